//! When a unit takes its payload memory (spec 28 §5): at its capture start, after its target
//! is secured, `Preparing` recorded and the target's admission taken — not at its admission
//! at the gate — with a bounded wait, and the target's admitted memory shrinking to the
//! declared length right after the capture.

use zlink_relocation::transfer::{PayloadClaim, PayloadUnit};

use super::gate::{
    all_returned, block_first_at, gate_of, gate_with, preserve_claim, relocation_options,
    spawn_move, two_on_one_server,
};
use super::*;
use crate::objects::RelocationOptions;
use crate::relocation::gate::{GateError, GateUsage, SourcePermits};

on_every_store!(
    a_unit_holds_no_payload_memory_until_its_capture_starts,
    a_unit_waiting_for_payload_memory_has_its_target_secured_keeps_serving_and_then_moves,
    a_unit_waiting_for_payload_memory_past_its_deadline_is_cancelled_and_releases_its_target,
    the_targets_admitted_memory_shrinks_to_the_declared_length_right_after_the_capture,
);

#[test]
fn admitted_units_hold_no_payload_memory_until_their_capture_starts() {
    // Every outbound permit can be held while only the units the memory cap allows capture:
    // the others have secured their targets and wait for memory before their seal.
    let gate = gate_with(RelocationOptions::default());
    let claim = gate.source_claim(1).expect("claim");
    let mut admitted: Vec<SourcePermits> = (0..64)
        .map(|_| gate.try_outbound_now(claim).expect("fits").expect("free"))
        .collect();
    assert!(
        gate.try_outbound_now(claim).expect("fits").is_none(),
        "the 65th waits for an outbound permit"
    );
    assert_eq!(gate.usage().memory, 0, "admission takes no memory");
    let capturing = admitted
        .iter_mut()
        .map(|p| p.try_capture_now().expect("fits"))
        .filter(|taken| *taken)
        .count();
    assert_eq!(
        capturing, 3,
        "three claims of 64 MiB and framing fit 256 MiB"
    );
    assert_eq!(
        gate.usage(),
        GateUsage {
            outbound: 64,
            captures: 3,
            memory: 3 * claim.bytes(),
            ..GateUsage::default()
        }
    );
    // A capture ran and shrank: the next unit captures.
    admitted[0].end_capture();
    admitted[0].shrink_to(40);
    assert!(admitted[3].try_capture_now().expect("fits"));
}

#[tokio::test]
async fn a_unit_waiting_for_payload_memory_past_its_bound_gives_up_holding_no_more() {
    let gate = gate_with(RelocationOptions::default().max_payload_in_flight_bytes(1000));
    let claim = PayloadClaim::exact(PayloadUnit::Single, 600);
    let _holder = gate.try_source_now(claim).expect("fits").expect("free");
    let mut waiting = gate.try_outbound_now(claim).expect("fits").expect("free");
    let before = gate.usage();
    let bound = std::time::Duration::from_millis(50);
    let err = waiting
        .take_capture(tokio::time::Instant::now() + bound)
        .await
        .expect_err("the memory stays short");
    assert!(
        matches!(err, GateError::WaitedTooLong { waited, .. } if waited >= bound),
        "{err}"
    );
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert_eq!(gate.usage(), before, "nothing more taken");
}

/// With payload memory for one preserved unit only, a unit stopped after its `Preparing`
/// record holds none of it: a second unit captures and moves meanwhile (before, the memory
/// was taken at admission and the second waited for the first to capture).
async fn a_unit_holds_no_payload_memory_until_its_capture_starts(h: &Harness) {
    let cap = RelocationOptions::default().max_payload_in_flight_bytes(preserve_claim());
    let m = mesh_with(h, Policy::Preserve, relocation_options(cap)).await;
    let (a, b) = two_on_one_server(&m).await;
    let (source, target) = m.owner_and_other(&a);
    let (entered, release) = block_first_at(source, RecordedStage::Preparing);
    let first = spawn_move(source, &a);
    wait_until("the first move recorded Preparing", || {
        entered.load(Ordering::SeqCst) == 1
    })
    .await;
    assert_eq!(
        gate_of(source).usage().memory,
        0,
        "the first holds no memory"
    );
    let second = tokio::time::timeout(std::time::Duration::from_secs(10), relocate(source, &b))
        .await
        .expect("the second moves while the first waits before its capture")
        .expect("moved");
    assert_eq!(second.node, rid_of(target));
    release.add_permits(1);
    let first = first.await.expect("task").expect("moved");
    assert_eq!(first.node, rid_of(target));
    let caller = m.client.0.actors().expect("manager");
    for r in [&a, &b] {
        assert_eq!(
            caller.request(r.id.as_str(), &Incr).await.expect("incr"),
            2,
            "its state moved"
        );
    }
    all_returned(source);
    m.shutdown().await;
}

/// A unit whose payload memory is short secures its target and records `Preparing`, then
/// waits before its seal — serving meanwhile — and moves with its state once memory frees.
async fn a_unit_waiting_for_payload_memory_has_its_target_secured_keeps_serving_and_then_moves(
    h: &Harness,
) {
    let cap = RelocationOptions::default().max_payload_in_flight_bytes(preserve_claim());
    let m = mesh_with(h, Policy::Preserve, relocation_options(cap)).await;
    let (caller, r) = m.counter_at_one("w1").await;
    let (source, target) = m.owner_and_other(&r);
    let gate = gate_of(source);
    let claim = gate.source_claim(1).expect("claim");
    let holder = gate.try_source_now(claim).expect("fits").expect("free");
    let (entered, release) = block_first_at(source, RecordedStage::Preparing);
    release.add_permits(1);
    let moving = spawn_move(source, &r);
    wait_until("the move recorded Preparing", || {
        entered.load(Ordering::SeqCst) == 1
    })
    .await;
    assert_eq!(
        super::target_faults::reservations(h).await,
        1,
        "its target is secured"
    );
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(!moving.is_finished(), "it waits for payload memory");
    assert_eq!(
        m.seen.captures.load(Ordering::SeqCst),
        0,
        "nothing captured"
    );
    assert_eq!(
        caller.request("w1", &Incr).await.expect("served"),
        2,
        "not sealed while it waits"
    );
    assert_eq!(gate.usage().memory, claim.bytes(), "never past the cap");
    drop(holder);
    let moved = moving.await.expect("task").expect("moved");
    assert_eq!(moved.node, rid_of(target));
    assert_eq!(
        caller.request("w1", &Incr).await.expect("incr"),
        3,
        "its state moved"
    );
    assert_eq!(gate.usage(), GateUsage::default(), "all returned");
    m.shutdown().await;
}

/// A unit still short of payload memory at its move's deadline is cancelled before its seal:
/// `Unavailable`, its target reservation released, the record still its own, serving here.
async fn a_unit_waiting_for_payload_memory_past_its_deadline_is_cancelled_and_releases_its_target(
    h: &Harness,
) {
    let cap = RelocationOptions::default().max_payload_in_flight_bytes(preserve_claim());
    let m = mesh_with(h, Policy::Preserve, relocation_options(cap)).await;
    let (caller, r) = m.counter_at_one("w2").await;
    let (source, _) = m.owner_and_other(&r);
    let gate = gate_of(source);
    let holder = gate
        .try_source_now(gate.source_claim(1).expect("claim"))
        .expect("fits")
        .expect("free");
    let client = source.actors().expect("manager").client;
    let until = tokio::time::Instant::now() + std::time::Duration::from_millis(500);
    let err = crate::relocation::relocate_actor_within(&client, &r, None, Some(until))
        .await
        .expect_err("no memory before the deadline");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert_eq!(
        m.seen.captures.load(Ordering::SeqCst),
        0,
        "nothing captured"
    );
    assert_eq!(
        super::target_faults::reservations(h).await,
        0,
        "its target is released"
    );
    assert_eq!(
        record(source, "w2").await.0,
        rid_of(source),
        "still its own"
    );
    assert_eq!(caller.request("w2", &Incr).await.expect("served"), 2);
    drop(holder);
    assert_eq!(gate.usage(), GateUsage::default(), "all returned");
    m.shutdown().await;
}

/// Right after its capture the source declares the encoded length: the target's memory for
/// the unit shrinks from the 64 MiB claim to it before the `Captured` record and the Restore.
async fn the_targets_admitted_memory_shrinks_to_the_declared_length_right_after_the_capture(
    h: &Harness,
) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (caller, r) = m.counter_at_one("d1").await;
    let (source, target) = m.owner_and_other(&r);
    let (entered, release) = block_first_at(source, RecordedStage::Captured);
    let moving = spawn_move(source, &r);
    wait_until("the move recorded Captured", || {
        entered.load(Ordering::SeqCst) == 1
    })
    .await;
    let held = || gate_of(target).usage().memory;
    wait_until("the target's memory shrank", || held() > 0 && held() < 4096).await;
    assert_eq!(gate_of(target).usage().restores, 1, "still admitted");
    release.add_permits(1);
    let moved = moving.await.expect("task").expect("moved");
    assert_eq!(moved.node, rid_of(target));
    assert_eq!(
        caller.request("d1", &Incr).await.expect("incr"),
        2,
        "its state moved"
    );
    all_returned(target);
    m.shutdown().await;
}
