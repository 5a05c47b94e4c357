//! One host Relocate operation (spec 28 §4–§8): preflight, target wait, the `Relocating`
//! publication, the unit moves, and the terminal result.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::time::Instant;
use zlink_codec::ChannelName;
use zlink_codec::records::{HostState, ObjectKind};

use super::moves::{Moves, move_all, stateful_left};
use super::targets::wait_for_targets;
use super::types::{RelocationMode, RelocationOutcome, RelocationReason, RelocationResult};
use super::units::preflight;
use crate::host::config::Topology;
use crate::host::running::HostInner;
use crate::host::status::{DescriptorStep, ShutdownFailure};
use crate::mesh::node::control;
use crate::messaging::{ErrorKind, ZLinkError};
use crate::relocation::MovesOf;

/// What one operation asks for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ask {
    pub(crate) mode: RelocationMode,
    pub(crate) version: u64,
    pub(crate) end: Instant,
}

impl Ask {
    /// Blocked before anything moved: every stateful object of `host` is still here.
    fn blocked(&self, host: &HostInner, why: RelocationReason) -> RelocationResult {
        RelocationResult::blocked(self.mode, self.version, why, stateful_left(host))
    }
}

/// Runs the operation to its terminal result (the caller stores and announces it).
pub(crate) async fn run(host: Arc<HostInner>, ask: Ask) -> RelocationResult {
    if host.life.state() != HostState::Serving {
        return ask.blocked(&host, not_serving(host.life.state()));
    }
    if manual_topology(&host) {
        return ask.blocked(&host, RelocationReason::ManualTopologyUnsupported);
    }
    let units = match preflight(&host).await {
        Ok(u) => u,
        Err(why) => return ask.blocked(&host, why),
    };
    if units.is_empty() {
        // Nothing stateful here: no target search (spec 28 §4 "No target yet").
        if !host
            .life
            .transition(&[HostState::Serving], HostState::Relocating)
        {
            return ask.blocked(&host, not_serving(host.life.state()));
        }
        return finish(&host, ask, Moves::default(), 0).await;
    }
    let targets = match wait_for_targets(&host, &units, ask).await {
        Ok(t) => t,
        Err(why) => return ask.blocked(&host, why),
    };
    if !host
        .life
        .transition(&[HostState::Serving], HostState::Relocating)
    {
        return ask.blocked(&host, not_serving(host.life.state()));
    }
    // Out of new selection: peers at once over the command plane, others by the descriptor.
    announce_weights(&host, true);
    if let Err((attempted, e)) = publish_each(&host, HostState::Relocating).await {
        // 28 §8: every attempted descriptor back to `Serving`. All confirmed → the host
        // serves again, `Blocked/StoreUnavailable`; one unconfirmed → bounded teardown, the
        // host `ForceStopped/TeardownFailed` (its termination result; this Relocate still
        // ends `Blocked/StoreUnavailable`, the only pairs 28 §3 allows).
        tracing::warn!(error = %e, "Relocating descriptor not confirmed: rolling back");
        let unconfirmed = roll_back(&host, attempted).await;
        if unconfirmed.is_empty() {
            if host
                .life
                .transition(&[HostState::Relocating], HostState::Serving)
            {
                announce_weights(&host, false);
            }
        } else {
            tracing::warn!(
                ?unconfirmed,
                "descriptor rollback not confirmed: bounded teardown of the host"
            );
            let report = crate::host::shutdown::force_stop(&host, unconfirmed).await;
            tracing::warn!(outcome = ?report.outcome, reason = ?report.reason, "host force-stopped");
        }
        return ask.blocked(&host, RelocationReason::StoreUnavailable);
    }
    tracing::info!(units = units.len(), mode = ?ask.mode, version = ask.version, "host relocating");
    let moves = move_all(&host, units, targets, ask).await;
    let remaining = stateful_left(&host);
    finish(&host, ask, moves, remaining).await
}

pub(super) fn not_serving(state: HostState) -> RelocationReason {
    match state {
        // A shutdown that interrupts a running Relocate ends it `ShutdownRequested`, whether
        // the host is still draining or already stopped when the operation looks; a *new*
        // Relocate on a `Stopped` host is `RuntimeNotReady` (28 §2), decided at its call.
        HostState::Draining | HostState::Stopped => RelocationReason::ShutdownRequested,
        _ => RelocationReason::RuntimeNotReady,
    }
}

/// Whether a manual topology component is registered (spec 28 §4): a manual MeshNode or a
/// manual peer intent on any node.
fn manual_topology(host: &HostInner) -> bool {
    host.nodes
        .iter()
        .any(|n| n.inner.topology == Topology::Manual || !n.manual_peers().is_empty())
}

/// The terminal step: `Relocated` when nothing is left, else `Blocked` with its reason and
/// the source serving again (unless a shutdown came first). Units left only because no
/// target had room for them by the deadline are `TargetUnavailable` (28 §4 "No target yet",
/// §8), not `DeadlineExceeded`.
async fn finish(host: &HostInner, ask: Ask, moves: Moves, remaining: usize) -> RelocationResult {
    let Moves {
        moved,
        failure,
        without_target,
    } = moves;
    let state = host.life.state();
    let reason = if state != HostState::Relocating {
        not_serving(state)
    } else if remaining == 0 && failure.is_none() {
        RelocationReason::None
    } else if without_target > 0 && failure.is_none() {
        RelocationReason::TargetUnavailable
    } else if Instant::now() >= ask.end {
        RelocationReason::DeadlineExceeded
    } else {
        match failure.as_ref().map(ZLinkError::kind) {
            Some(ErrorKind::CapacityExceeded) => RelocationReason::TargetUnavailable,
            // The adapter's capture or the target's restore failed on every allowed attempt,
            // or the state is over 64 MiB (`ZLinkError::StateIncompatible`, kept as its kind
            // when the target reported it).
            Some(ErrorKind::TypeMismatch) => RelocationReason::StateIncompatible,
            _ if moved == 0 && !store_reachable(host).await => RelocationReason::StoreUnavailable,
            _ => RelocationReason::RelocationFailed,
        }
    };
    if reason == RelocationReason::None {
        if host
            .life
            .transition(&[HostState::Relocating], HostState::Relocated)
        {
            if let Err(e) = publish(host, HostState::Relocated).await {
                tracing::warn!(error = %e, "Relocated descriptor not published");
            }
        }
        tracing::info!(moved, "host relocated");
        return RelocationResult {
            mode: ask.mode,
            target_version: ask.version,
            outcome: RelocationOutcome::Relocated,
            reason,
            moved,
            remaining: 0,
            interruption: interruption(host),
        };
    }
    if state == HostState::Relocating {
        reopen(host).await;
    }
    tracing::warn!(?reason, moved, remaining, "host relocation blocked");
    RelocationResult {
        mode: ask.mode,
        target_version: ask.version,
        outcome: RelocationOutcome::Blocked,
        reason,
        moved,
        remaining,
        interruption: interruption(host),
    }
}

/// The interruptions of the units this host's object nodes moved out.
fn interruption(host: &HostInner) -> crate::relocation::InterruptionSummary {
    crate::relocation::Interruptions::merged(
        host.objects
            .iter()
            .flatten()
            .map(|o| &o.host.relocations().interruptions),
    )
}

/// Whether the Location Store answers a read now.
pub(super) async fn store_reachable(host: &HostInner) -> bool {
    let Some(o) = host.objects.iter().flatten().next() else {
        return true;
    };
    let Ok(probe) = zlink_codec::ObjectId::new("zlink-relocate-store-probe") else {
        return true;
    };
    o.host
        .location
        .authority()
        .read(ObjectKind::Actor, &probe)
        .await
        .is_ok()
}

/// Back to `Serving` after a blocked Relocate: the descriptors and the peers' weights.
async fn reopen(host: &HostInner) {
    if host
        .life
        .transition(&[HostState::Relocating], HostState::Serving)
    {
        announce_weights(host, false);
        if let Err(e) = publish(host, HostState::Serving).await {
            tracing::warn!(error = %e, "Serving descriptor not republished after a blocked Relocate");
        }
    }
}

/// Tells the connected peers this host's Channel Server weights: zero (out of new selection)
/// or its own again.
fn announce_weights(host: &HostInner, zero: bool) {
    for node in &host.nodes {
        let weights: BTreeMap<ChannelName, u16> = node
            .inner
            .weights
            .read()
            .iter()
            .map(|(c, w)| (c.clone(), if zero { 0 } else { *w }))
            .collect();
        node.inner
            .broadcast_control(control::WEIGHTS, control::weights_payload(&weights));
    }
}

/// Publishes `state` in every descriptor of this host, in order, up to the first that is not
/// confirmed: that one's error with how many descriptors were attempted (it included: its
/// write may have applied).
async fn publish_each(
    host: &HostInner,
    state: HostState,
) -> Result<(), (usize, zlink_location::LocationError)> {
    for (i, (node, d)) in host.nodes.iter().zip(&host.descriptors).enumerate() {
        if let Some(d) = d {
            let weights = node.inner.weights.read().clone();
            d.publish_state(&weights, state)
                .await
                .map_err(|e| (i + 1, e))?;
        }
    }
    Ok(())
}

/// Writes `Serving` back into the first `attempted` descriptors (28 §8 rollback); one line
/// per descriptor whose rollback was not confirmed.
async fn roll_back(host: &HostInner, attempted: usize) -> Vec<ShutdownFailure> {
    let mut unconfirmed = Vec::new();
    for (node, d) in host.nodes.iter().zip(&host.descriptors).take(attempted) {
        if let Some(d) = d {
            let weights = node.inner.weights.read().clone();
            if let Err(e) = d.publish_state(&weights, HostState::Serving).await {
                unconfirmed.push(ShutdownFailure::descriptor(
                    &node.inner.mesh,
                    DescriptorStep::ServingRollback,
                    e,
                ));
            }
        }
    }
    unconfirmed
}

/// Publishes `state` in every descriptor of this host.
async fn publish(host: &HostInner, state: HostState) -> Result<(), zlink_location::LocationError> {
    for (node, d) in host.nodes.iter().zip(&host.descriptors) {
        if let Some(d) = d {
            let weights = node.inner.weights.read().clone();
            d.publish_state(&weights, state).await?;
        }
    }
    Ok(())
}
