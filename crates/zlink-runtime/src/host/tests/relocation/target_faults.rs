//! Faults on the target side of a move (spec 21 §8.1, §9.1, §10; issue 20 items 8 and 9): a
//! source that crashed or stalled before its ready never strands the target's reservation or
//! prepared instance, and a NewOwner that applied with its reply lost at the give-up point
//! keeps the target's instance.

use std::time::Duration;

use super::gate::spawn_move;
use super::stages::faulty_mesh;
use super::*;
use crate::relocation::MovesOf;
use zlink_store_conformance::{Fault, FaultyLocationStore, LocationOp};
use zlink_testkit::snapshot_of;

on_every_store!(
    a_source_crash_mid_move_releases_the_target_reservation_and_prepared_instance,
    a_move_past_its_deadline_releases_the_target_reservation,
    a_new_owner_applied_with_its_reply_lost_keeps_the_target_instance,
);

/// The faulty store `host` runs over (`faulty` in the servers' order).
fn store_of(
    m: &Mesh,
    faulty: &[Arc<FaultyLocationStore>; 2],
    host: &ZLinkHost,
) -> Arc<FaultyLocationStore> {
    if rid_of(host) == rid_of(&m.servers[0].0) {
        Arc::clone(&faulty[0])
    } else {
        Arc::clone(&faulty[1])
    }
}

/// The object host of `host`'s node.
pub(super) fn objects_of(host: &ZLinkHost) -> Arc<crate::objects::host::ObjectHost> {
    Arc::clone(&host.actors().expect("manager").client.objects)
}

/// The Actor `id`'s key.
pub(super) fn key_of(id: &str) -> (AuthorityKind, zlink_codec::ObjectId) {
    (
        AuthorityKind::Actor,
        zlink_codec::ObjectId::new(id).expect("id"),
    )
}

/// Reservation rows in the store.
pub(super) async fn reservations(h: &Harness) -> usize {
    snapshot_of(h.store.as_ref(), "capacity-reservation\0")
        .await
        .len()
}

/// Makes `source`'s moves stop right after their `Prepared` record applied (the Restore is
/// prepared on the target, no ready sent) until `gate` opens; `reached` is set on arrival.
pub(super) fn stall_after_prepared(source: &ZLinkHost, gate: &Gate, reached: &Arc<AtomicBool>) {
    let (gate, reached) = (gate.clone(), Arc::clone(reached));
    let hook: crate::relocation::StageHook = Arc::new(move |stage| {
        let (gate, reached) = (gate.clone(), Arc::clone(&reached));
        Box::pin(async move {
            if stage == RecordedStage::Prepared {
                reached.store(true, Ordering::SeqCst);
                gate.pass().await;
            }
        })
    });
    objects_of(source).relocations().probe.on_stage(Some(hook));
}

/// Waits (bounded by [`WAIT`]) until the target holds no Restore and the store no
/// reservation row.
pub(super) async fn target_released(h: &Harness, target: &ZLinkHost, what: &str) {
    let objects = objects_of(target);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if objects.relocations().incoming_units() == 0 && reservations(h).await == 0 {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        h.advance_store_time(Duration::from_millis(50)).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Issue 20 item 8: the source's run ends in the middle of a move, after the target prepared
/// the unit and before its ready (no clean shutdown: every Store call of the source fails, so
/// its lease runs out unrenewed and unreleased, and no abort or ready ever comes). The target
/// sees the source's lease gone, releases its reservation and drops the prepared instance;
/// the object is no longer stranded: the record of the dead run can be recovered (before,
/// the reservation kept it `Relocating` forever).
async fn a_source_crash_mid_move_releases_the_target_reservation_and_prepared_instance(
    h: &Harness,
) {
    let options = short_lease()
        .polling_interval(Duration::from_millis(100))
        .store_failure_grace(Duration::from_millis(500));
    let (m, faulty) = faulty_mesh(h, options).await;
    let (_caller, r) = m.counter_at_one("x1").await;
    let (source, target) = m.owner_and_other(&r);
    let (gate, reached) = (Gate::new(), Arc::new(AtomicBool::new(false)));
    stall_after_prepared(source, &gate, &reached);
    let moving = spawn_move(source, &r);
    wait_until("the source recorded Prepared", || {
        reached.load(Ordering::SeqCst)
    })
    .await;
    let target_objects = objects_of(target);
    assert_eq!(
        target_objects.relocations().incoming_units(),
        1,
        "the target holds the prepared unit"
    );
    assert_eq!(reservations(h).await, 1, "the target capacity is reserved");

    // The source's run ends without a shutdown.
    let run = source.object_host(0).location.host_run().expect("a run");
    store_of(&m, &faulty, source).set_fault(LocationOp::ALL, Fault::UNAVAILABLE);
    let target_location = Arc::clone(&target.object_host(0).location);
    let deadline = tokio::time::Instant::now() + WAIT;
    while !target_location
        .authority()
        .lease_ended(&run)
        .await
        .expect("lease read")
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the lease never ran out"
        );
        h.advance_store_time(Duration::from_millis(100)).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    target_released(h, target, "the target released its reservation").await;
    assert!(
        !target_objects.is_live(&key_of("x1")),
        "the prepared instance never went live"
    );
    // The record of the dead run is recoverable now (no move of it is pending): recovered
    // here, or already by the mesh (the source left the live peers' lists).
    let authority = target_location.authority();
    let id = zlink_codec::ObjectId::new("x1").expect("id");
    if let AuthorityRead::Found { handle, .. } =
        authority.read(ObjectKind::Actor, &id).await.expect("read")
    {
        let recovered = authority.recover_object(&handle).await.expect("recover");
        assert!(
            recovered.is_applied()
                || matches!(
                    recovered.conflict(),
                    Some(zlink_location::Conflict::Record { .. })
                ),
            "{recovered:?}"
        );
    }
    assert!(
        matches!(
            authority.read(ObjectKind::Actor, &id).await.expect("read"),
            AuthorityRead::Missing { .. }
        ),
        "the dead run's record is recovered"
    );
    assert_eq!(actors_counted(h).await, 0, "no capacity left behind");

    gate.open();
    moving.abort();
    stop_all(&[&m.client.0, &m.servers[0].0, &m.servers[1].0]).await;
}

/// Issue 20 item 8: the source (alive) stalls after its `Prepared` record and sends no ready
/// before the target's deadline for the unit passes. The target releases its reservation and
/// drops the prepared instance; the source's late ready is refused, its cancel finds the
/// reservation gone and the record still its own, and it serves again with its state.
async fn a_move_past_its_deadline_releases_the_target_reservation(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (caller, r) = m.counter_at_one("x2").await;
    let (source, target) = m.owner_and_other(&r);
    let target_objects = objects_of(target);
    target_objects
        .relocations()
        .probe
        .wait_for_ready(Some(Duration::from_millis(800)));
    let (gate, reached) = (Gate::new(), Arc::new(AtomicBool::new(false)));
    stall_after_prepared(source, &gate, &reached);
    let moving = spawn_move(source, &r);
    wait_until("the source recorded Prepared", || {
        reached.load(Ordering::SeqCst)
    })
    .await;
    assert_eq!(target_objects.relocations().incoming_units(), 1);
    target_released(h, target, "the target released its reservation").await;
    assert!(!target_objects.is_live(&key_of("x2")));

    gate.open();
    let outcome = tokio::time::timeout(WAIT, moving)
        .await
        .expect("the move ends")
        .expect("task");
    assert!(outcome.is_err(), "the move did not complete: {outcome:?}");
    assert_eq!(record(source, "x2").await.0, rid_of(source), "not moved");
    assert_eq!(caller.request("x2", &Incr).await.expect("served here"), 2);
    assert_eq!(reservations(h).await, 0, "no reservation row remains");
    assert_eq!(
        actors_counted(h).await,
        1,
        "the allocation rows count the record"
    );
    m.shutdown().await;
}

/// Issue 20 item 9 (spec 21 §10): the target's NewOwner applies, but its reply comes back only
/// past the deadline (`storeFailureGrace`) and is lost, and the engine's own re-read fails
/// too: the give-up point. The target reads the record before giving up, finds the change
/// applied and keeps its instance: the Actor serves from the target with its state (before,
/// the target closed its instance while the record named it: the Actor was lost).
async fn a_new_owner_applied_with_its_reply_lost_keeps_the_target_instance(h: &Harness) {
    use crate::host::tests::support::authority_key;
    let grace = Duration::from_millis(500);
    let (m, faulty) = faulty_mesh(h, fast_options().store_failure_grace(grace)).await;
    let (caller, r) = m.counter_at_one("g1").await;
    let (source, target) = m.owner_and_other(&r);
    let lossy = store_of(&m, &faulty, target);
    let key = authority_key(
        ObjectKind::Actor,
        &zlink_codec::ObjectId::new("g1").expect("id"),
    );
    let armed = Arc::new(AtomicBool::new(false));
    let on_write = {
        let (armed, lossy, key) = (Arc::clone(&armed), Arc::clone(&lossy), key.clone());
        Arc::new(move || {
            if armed.swap(false, Ordering::SeqCst) {
                lossy.fail_next_read_of(key.clone(), Fault::UNAVAILABLE);
            }
        })
    };
    lossy.set_write_hook(Some(on_write));
    let hook: crate::relocation::StageHook = {
        let (lossy, key) = (Arc::clone(&lossy), key.clone());
        Arc::new(move |stage| {
            if stage == RecordedStage::Prepared {
                // The target's NewOwner applies past the deadline and loses its reply.
                let late = grace + Duration::from_millis(300);
                lossy.fail_next_write_touching_late(key.clone(), late, Fault::LOSE_REPLY);
                armed.store(true, Ordering::SeqCst);
            }
            Box::pin(async {})
        })
    };
    objects_of(source).relocations().probe.on_stage(Some(hook));
    let moved = relocate(source, &r).await.expect("moved");
    lossy.set_write_hook(None);
    assert_eq!(moved.node, rid_of(target));
    assert_eq!(record(source, "g1").await.0, rid_of(target));
    assert!(
        objects_of(target).is_live(&key_of("g1")),
        "the target kept its instance"
    );
    assert_eq!(caller.request("g1", &Incr).await.expect("moved state"), 2);
    assert_eq!(reservations(h).await, 0, "no reservation row remains");
    assert_eq!(
        actors_counted(h).await,
        1,
        "the allocation rows count the record"
    );
    m.shutdown().await;
}
