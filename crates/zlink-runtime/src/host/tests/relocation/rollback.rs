//! Spec 28 §8 last bullet, §12 item 8: a `Relocating` descriptor write that is not confirmed
//! and whose rollback to `Serving` is not confirmed either → no new work, a bounded teardown,
//! the host `ForceStopped/TeardownFailed`; the Relocate itself ends `Blocked/StoreUnavailable`
//! (the only pairs 28 §3 allows a Relocate result). The confirmed rollback is
//! `host.rs`'s `an_unconfirmed_relocating_descriptor_rolls_back_to_serving_with_store_unavailable`.

use zlink_codec::records::HostState;
use zlink_store_conformance::{Fault, LocationOp};

use super::*;
use crate::host::{
    HostEvent, RelocateOptions, RelocationOutcome, RelocationReason, ShutdownOutcome,
    ShutdownReason,
};

on_every_store!(an_unconfirmed_descriptor_rollback_force_stops_the_host_with_teardown_failed);

async fn an_unconfirmed_descriptor_rollback_force_stops_the_host_with_teardown_failed(h: &Harness) {
    let (m, faulty) = super::stages::faulty_mesh(h, fast_options()).await;
    let (_caller, r) = m.counter_at_one("ur").await;
    let (source, _) = m.owner_and_other(&r);
    let i = usize::from(source.nodes()[0].routing_id() != m.servers[0].1.routing_id());
    // Reads answer; every write of the source fails before it reaches the store: the
    // Relocating publication and its rollback to Serving alike.
    faulty[i].set_fault([LocationOp::Write], Fault::UNAVAILABLE);
    let mut observer = source.observe();
    let result = source
        .relocate(RelocateOptions::planned_maintenance())
        .await
        .expect("valid");
    faulty[i].heal();
    assert_eq!(
        (result.outcome, result.reason, result.moved),
        (
            RelocationOutcome::Blocked,
            RelocationReason::StoreUnavailable,
            0
        ),
        "{result:?}"
    );
    assert_eq!(source.state(), HostState::Stopped, "no new work: torn down");
    let report = source
        .status()
        .shutdown
        .expect("the host's termination result");
    assert_eq!(
        (report.outcome, report.reason),
        (
            ShutdownOutcome::ForceStopped,
            ShutdownReason::TeardownFailed
        ),
        "{report:?}"
    );
    assert!(
        matches!(
            report.failures[0],
            crate::status::ShutdownFailure::Descriptor {
                step: crate::status::DescriptorStep::ServingRollback,
                ..
            }
        ),
        "the unconfirmed rollback leads the failures: {:?}",
        report.failures
    );
    let mut states = Vec::new();
    let mut terminations = 0;
    while let Some(e) = observer.try_next() {
        match e {
            HostEvent::State(s) => states.push(s),
            HostEvent::Termination(_) => terminations += 1,
            _ => {}
        }
    }
    assert_eq!(
        states,
        [
            HostState::Serving,
            HostState::Relocating,
            HostState::Draining,
            HostState::Stopped
        ]
    );
    assert_eq!(terminations, 1, "the termination result is announced once");
    // A later shutdown returns the same report.
    let again = source.shutdown().await;
    assert_eq!(
        (again.outcome, again.reason),
        (report.outcome, report.reason)
    );
    m.shutdown().await;
}
