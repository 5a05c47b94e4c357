//! Capture and Restore attempts (spec 21 §9.2, 28 §5, §8): a failing adapter is tried again
//! (a Restore on a new instance), and only a state that fails on every allowed attempt, or
//! one over 64 MiB, blocks the host Relocate as `StateIncompatible` with nothing moved.

use std::sync::atomic::Ordering;

use super::{Incr, Mesh, Policy, mesh_of, record};
use crate::host::tests::support::*;
use crate::host::{RelocateOptions, RelocationOutcome, RelocationReason};
use crate::objects::live::RESTORE_ATTEMPTS;
use crate::relocation::CAPTURE_ATTEMPTS;
use zlink_testkit::Harness;

on_every_store!(
    a_restore_that_fails_is_tried_again_on_a_new_instance_and_the_move_completes,
    a_restore_failing_every_attempt_blocks_the_host_relocate_as_state_incompatible,
    a_capture_that_fails_is_tried_again_and_the_move_completes,
    a_capture_failing_every_attempt_blocks_the_host_relocate_as_state_incompatible,
    a_state_over_64_mib_blocks_the_host_relocate_as_state_incompatible,
);

/// The owner of the counter `id` (at 1) runs a host Relocate; its result.
async fn relocate_owner(m: &Mesh, id: &str) -> (crate::host::RelocationResult, usize) {
    let (_, r) = m.counter_at_one(id).await;
    let (source, _) = m.owner_and_other(&r);
    let server = usize::from(m.servers[0].1.routing_id() != &r.node);
    let result = source
        .relocate(RelocateOptions::planned_maintenance())
        .await
        .expect("valid options");
    (result, server)
}

/// Asserts the host Relocate was blocked as `StateIncompatible` with nothing moved, and the
/// counter still served by its source at its old record.
async fn assert_incompatible_and_stayed(
    m: &Mesh,
    id: &str,
    result: &crate::host::RelocationResult,
    server: usize,
) {
    assert_eq!(result.outcome, RelocationOutcome::Blocked, "{result:?}");
    assert_eq!(
        result.reason,
        RelocationReason::StateIncompatible,
        "{result:?}"
    );
    assert_eq!(result.moved, 0);
    let source = &m.servers[server].0;
    let (node, _, _) = record(source, id).await;
    assert_eq!(
        &node,
        m.servers[server].1.routing_id(),
        "the owner is unchanged"
    );
    let caller = m.client.0.actors().expect("manager");
    assert_eq!(caller.request(id, &Incr).await.expect("served"), 2);
}

async fn a_restore_that_fails_is_tried_again_on_a_new_instance_and_the_move_completes(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let before = m.seen.factories.load(Ordering::SeqCst);
    m.seen
        .failing_restores
        .store(RESTORE_ATTEMPTS as usize - 1, Ordering::SeqCst);
    let (result, server) = relocate_owner(&m, "ra1").await;
    assert_eq!(result.outcome, RelocationOutcome::Relocated, "{result:?}");
    assert_eq!(m.seen.failing_restores.load(Ordering::SeqCst), 0);
    // The creation, then one new instance per Restore attempt on the target.
    assert_eq!(
        m.seen.factories.load(Ordering::SeqCst) - before,
        1 + RESTORE_ATTEMPTS as usize
    );
    let (node, _, _) = record(&m.servers[server].0, "ra1").await;
    assert_eq!(&node, m.servers[1 - server].1.routing_id(), "moved");
    let caller = m.client.0.actors().expect("manager");
    assert_eq!(caller.request("ra1", &Incr).await.expect("state kept"), 2);
    m.shutdown().await;
}

async fn a_restore_failing_every_attempt_blocks_the_host_relocate_as_state_incompatible(
    h: &Harness,
) {
    let m = mesh_of(h, Policy::Preserve).await;
    m.seen
        .failing_restores
        .store(RESTORE_ATTEMPTS as usize, Ordering::SeqCst);
    let (result, server) = relocate_owner(&m, "ri1").await;
    assert_eq!(
        m.seen.failing_restores.load(Ordering::SeqCst),
        0,
        "all tried"
    );
    assert_incompatible_and_stayed(&m, "ri1", &result, server).await;
    m.shutdown().await;
}

async fn a_capture_that_fails_is_tried_again_and_the_move_completes(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    m.seen
        .failing_captures
        .store(CAPTURE_ATTEMPTS as usize - 1, Ordering::SeqCst);
    let (result, server) = relocate_owner(&m, "ca1").await;
    assert_eq!(result.outcome, RelocationOutcome::Relocated, "{result:?}");
    assert_eq!(
        m.seen.captures.load(Ordering::SeqCst),
        CAPTURE_ATTEMPTS as usize
    );
    let (node, _, _) = record(&m.servers[server].0, "ca1").await;
    assert_eq!(&node, m.servers[1 - server].1.routing_id(), "moved");
    let caller = m.client.0.actors().expect("manager");
    assert_eq!(caller.request("ca1", &Incr).await.expect("state kept"), 2);
    m.shutdown().await;
}

async fn a_capture_failing_every_attempt_blocks_the_host_relocate_as_state_incompatible(
    h: &Harness,
) {
    let m = mesh_of(h, Policy::Preserve).await;
    m.seen
        .failing_captures
        .store(CAPTURE_ATTEMPTS as usize, Ordering::SeqCst);
    let (result, server) = relocate_owner(&m, "ci1").await;
    assert_eq!(
        m.seen.captures.load(Ordering::SeqCst),
        CAPTURE_ATTEMPTS as usize
    );
    assert_incompatible_and_stayed(&m, "ci1", &result, server).await;
    m.shutdown().await;
}

async fn a_state_over_64_mib_blocks_the_host_relocate_as_state_incompatible(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    m.seen.oversize_capture.store(true, Ordering::SeqCst);
    let (result, server) = relocate_owner(&m, "big1").await;
    m.seen.oversize_capture.store(false, Ordering::SeqCst);
    assert_eq!(m.seen.captures.load(Ordering::SeqCst), 1, "never retried");
    assert_incompatible_and_stayed(&m, "big1", &result, server).await;
    m.shutdown().await;
}
