//! The shutdown of a root (spec 28 §8, §9, §12): the one run every `shutdown` call and a
//! forced stop after an unconfirmed descriptor rollback share, and its report.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use zlink_codec::ChannelName;
use zlink_codec::records::HostState;

use super::observe::HostEvent;
use super::running::HostInner;
use super::status::{
    DescriptorStep, ShutdownFailure, ShutdownOutcome, ShutdownReason, ShutdownReport,
};
use crate::mesh::node::control;
use crate::mesh::node::handle::MeshNode;
use crate::relocation::MovesOf;

/// How long a forced teardown waits for abandoned work to observe its cancellation.
const FORCED_SETTLE: Duration = Duration::from_secs(1);

/// The fixed maximum time of the bounded teardown after a `Relocating` descriptor whose
/// rollback to `Serving` was not confirmed (spec 28 §8).
const ROLLBACK_TEARDOWN: Duration = Duration::from_secs(10);

/// Spec 28 §8: a `Relocating` descriptor write was not confirmed on some MeshNode and the
/// rollback of an attempted descriptor to `Serving` was not confirmed either: no new work
/// (`Draining`), cleanup bounded by [`ROLLBACK_TEARDOWN`], and the host's termination result
/// `ForceStopped/TeardownFailed` whatever else happens (`unconfirmed` lead its failures). A
/// shutdown already running (or done) keeps its own report. Returns the host's report.
pub(crate) async fn force_stop(
    host: &HostInner,
    unconfirmed: Vec<ShutdownFailure>,
) -> ShutdownReport {
    host.report
        .get_or_init(|| run_shutdown_with(host, ROLLBACK_TEARDOWN, unconfirmed))
        .await
        .clone()
}

pub(super) async fn run_shutdown(host: &HostInner, deadline: Duration) -> ShutdownReport {
    run_shutdown_with(host, deadline, Vec::new()).await
}

/// The shutdown; `forced` non-empty makes it `ForceStopped/TeardownFailed` (28 §8).
async fn run_shutdown_with(
    host: &HostInner,
    deadline: Duration,
    forced: Vec<ShutdownFailure>,
) -> ShutdownReport {
    let end = tokio::time::Instant::now() + deadline;
    let teardown_failed = !forced.is_empty();
    let mut failures = forced;
    host.life.transition(
        &[
            HostState::Preparing,
            HostState::Serving,
            HostState::Relocating,
            HostState::Relocated,
            HostState::Error,
        ],
        HostState::Draining,
    );
    if let Some(h) = host.hosted.lock().await.as_ref() {
        for f in h.request_stop().await {
            failures.push(ShutdownFailure::hosted(f));
        }
    }
    // Out of new selection: peers at once over the command plane, others by the descriptor.
    for node in &host.nodes {
        let zero: BTreeMap<ChannelName, u16> = node
            .inner
            .weights
            .read()
            .keys()
            .map(|c| (c.clone(), 0))
            .collect();
        node.inner
            .broadcast_control(control::WEIGHTS, control::weights_payload(&zero));
    }
    for (node, d) in host.nodes.iter().zip(&host.descriptors) {
        if let Some(d) = d {
            let weights = node.inner.weights.read().clone();
            if let Err(e) = d.publish_state(&weights, HostState::Draining).await {
                failures.push(ShutdownFailure::descriptor(
                    &node.inner.mesh,
                    DescriptorStep::Draining,
                    e,
                ));
            }
        }
    }

    // Accepted work finishes until the deadline.
    let drained = tokio::time::timeout_at(end, host.life.drained())
        .await
        .is_ok();
    let mut abandoned = 0;
    if !drained {
        abandoned = host.life.accepted();
        tracing::warn!(
            abandoned,
            "shutdown deadline passed with accepted work running"
        );
        host.life.force().cancel();
        for node in &host.nodes {
            abandoned += node.inner.pending.fail_all();
        }
        let _ = tokio::time::timeout(FORCED_SETTLE, host.life.drained()).await;
    }

    // Step 4 (28 §9): membership and instances still valid, every Entry, User and Instance
    // Spot gets its `HostShutdown` closing callback, bounded by the deadline. A failed one →
    // TeardownFailed; one still running at the deadline → DeadlineExceeded.
    let mut closing_late = false;
    for o in host.objects.iter().flatten() {
        let closing = o.host.shutdown_closing(end).await;
        closing_late |= closing.late;
        failures.extend(closing.failures.into_iter().map(ShutdownFailure::from));
    }
    if closing_late {
        tracing::warn!("shutdown deadline passed with a Spot closing callback running");
    }

    // Local object scope first: every activation finishes its accepted turns and ends (a
    // closing callback past the deadline is waited for only briefly).
    for o in host.objects.iter().flatten() {
        if closing_late {
            let _ = tokio::time::timeout(FORCED_SETTLE, o.host.close_all()).await;
        } else {
            o.host.close_all().await;
        }
    }

    // The member records of `SpotWide` moves committed here finish following their Spot's
    // owner (bounded by the deadline) before the sweep reads this run's records.
    for o in host.objects.iter().flatten() {
        if !o.host.relocations().following.finish(end).await {
            tracing::warn!("shutdown deadline passed with SpotWide member records following");
        }
    }

    // Owner records, then descriptors, then the owner lease.
    let mut sweep = None;
    if let Some(rt) = host.location.lock().await.take() {
        match rt.self_sweep().await {
            Ok(r) => sweep = Some(r),
            Err(e) => failures.push(ShutdownFailure::SelfSweep(Arc::new(e))),
        }
        if let Some(run) = rt.host_run() {
            for (node, d) in host.nodes.iter().zip(&host.descriptors) {
                if let Some(d) = d {
                    if let Err(e) = d.withdraw(&run).await {
                        failures.push(ShutdownFailure::descriptor(
                            &node.inner.mesh,
                            DescriptorStep::Withdraw,
                            e,
                        ));
                    }
                }
            }
        }
        if let Err(e) = rt.release_lease().await {
            failures.push(ShutdownFailure::LeaseRelease(Arc::new(e)));
        }
    }
    if let Some(h) = host.hosted.lock().await.take() {
        for f in h.finish_stop().await {
            failures.push(ShutdownFailure::hosted(f));
        }
    }

    // Replies of finished work are queued on the reply lane; let them reach the wire before
    // the connections close (bounded by the deadline).
    let _ = tokio::time::timeout_at(end, replies_flushed(&host.nodes)).await;

    // Connections, listeners and every task.
    for node in &host.nodes {
        node.inner.transport.shutdown().await;
    }
    let tasks: Vec<_> = host.tasks.lock().drain(..).collect();
    for t in tasks {
        t.abort();
        let _ = t.await;
    }
    // Every use of the stores has ended: they are disposed of (spec 21 §2).
    host.stores.dispose().await;
    host.life
        .transition(&[HostState::Draining], HostState::Stopped);

    let (outcome, reason) = if teardown_failed {
        (
            ShutdownOutcome::ForceStopped,
            ShutdownReason::TeardownFailed,
        )
    } else if !drained || closing_late {
        (
            ShutdownOutcome::ForceStopped,
            ShutdownReason::DeadlineExceeded,
        )
    } else if !failures.is_empty() {
        (
            ShutdownOutcome::ForceStopped,
            ShutdownReason::TeardownFailed,
        )
    } else {
        (ShutdownOutcome::Stopped, ShutdownReason::None)
    };
    for f in &failures {
        tracing::warn!(failure = %f, "shutdown cleanup step failed");
    }
    tracing::info!(?outcome, ?reason, "host stopped");
    let report = ShutdownReport {
        outcome,
        reason,
        sweep,
        abandoned,
        failures,
    };
    host.emit(HostEvent::Termination(report.clone()));
    report
}

/// Completes once no Ready peer connection of `nodes` has a reply queued or being written.
async fn replies_flushed(nodes: &[MeshNode]) {
    loop {
        // Every Ready connection the transport holds, not only the peers this node has
        // confirmed: a reply goes out on whichever connection to its requester is Ready now.
        let queued = nodes.iter().any(|n| {
            let transport = &n.inner.transport;
            transport.peers().iter().any(|info| {
                transport
                    .peer(&info.rid)
                    .is_some_and(|p| p.queue_usage(zlink_transport::Lane::Reply).0 > 0)
            })
        });
        if !queued {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
