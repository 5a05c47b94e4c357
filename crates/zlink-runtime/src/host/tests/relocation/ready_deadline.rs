//! The target waits for a move's ready no longer than the move's deadline (issue 20; spec 21
//! §8.1, §9.1 failure table): a Restore command that carries the deadline (`deadlineMs`, a
//! host Relocate's) is abandoned there once it passed without a ready — its reservation
//! released and its prepared instance dropped — instead of after the target's longest wait.

use std::time::Duration;

use super::target_faults::{
    key_of, objects_of, reservations, stall_after_prepared, target_released,
};
use super::*;
use crate::relocation::MovesOf;

on_every_store!(a_restore_waits_for_its_ready_no_longer_than_the_moves_deadline);

/// The source moves with a deadline 600 ms away and stalls right after its `Prepared` record
/// (no ready). The target releases its reservation and drops the prepared instance once that
/// deadline passed — far inside its longest wait (a minute; before, it waited all of it). The
/// source's late ready is refused, its cancel finds the reservation gone and the record still
/// its own, and the Actor serves there again with its state.
async fn a_restore_waits_for_its_ready_no_longer_than_the_moves_deadline(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (caller, r) = m.counter_at_one("d1").await;
    let (source, target) = m.owner_and_other(&r);
    let target_objects = objects_of(target);
    let (gate, reached) = (Gate::new(), Arc::new(AtomicBool::new(false)));
    stall_after_prepared(source, &gate, &reached);
    let client = source.actors().expect("manager").client;
    let deadline = Duration::from_millis(600);
    let started = tokio::time::Instant::now();
    let until = Some(started + deadline);
    let moving = {
        let r = r.clone();
        tokio::spawn(async move {
            crate::relocation::relocate_actor_within(&client, &r, None, until).await
        })
    };
    wait_until("the source recorded Prepared", || {
        reached.load(Ordering::SeqCst)
    })
    .await;
    assert_eq!(target_objects.relocations().incoming_units(), 1);
    target_released(h, target, "the target released its reservation").await;
    let waited = started.elapsed();
    assert!(
        waited >= deadline,
        "not released before the deadline: {waited:?}"
    );
    assert!(!target_objects.is_live(&key_of("d1")));

    gate.open();
    let outcome = tokio::time::timeout(WAIT, moving)
        .await
        .expect("the move ends")
        .expect("task");
    assert!(outcome.is_err(), "the move did not complete: {outcome:?}");
    assert_eq!(record(source, "d1").await.0, rid_of(source), "not moved");
    assert_eq!(caller.request("d1", &Incr).await.expect("served here"), 2);
    assert_eq!(reservations(h).await, 0, "no reservation row remains");
    m.shutdown().await;
}
