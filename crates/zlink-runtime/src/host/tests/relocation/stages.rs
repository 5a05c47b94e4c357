//! The stage records a live move writes (spec 21 §6.1, §9.1) and what a concurrent rewrite of
//! the record does to the move.

use super::*;
use crate::relocation::MovesOf;
use zlink_store_conformance::{Fault, FaultyLocationStore};

on_every_store!(
    stage_records_are_written_in_order_and_the_owner_change_follows_the_last,
    a_preserve_after_captured_fails_the_prepared_record_and_the_source_serves_again,
    a_preserve_after_prepared_fails_the_owner_change_and_the_source_is_not_restored,
    a_stage_record_whose_reply_is_lost_is_settled_by_reading_and_leaks_no_reservation,
    a_move_cancelled_after_a_lost_stage_reply_releases_the_reservation_it_reads,
    a_lost_owner_change_reply_on_the_target_is_settled_by_reading_and_the_move_completes,
    an_owner_change_that_fails_past_the_grace_removes_the_prepared_target,
);

/// Each stage record a move wrote, with the stage mark (stage, RelocationId) the record held.
type StageLog = Arc<parking_lot::Mutex<Vec<(RecordedStage, Option<(String, String)>)>>>;

/// Sets a hook on `source`'s moves, run after each stage record applied: it records the stage
/// and the stage mark the record then holds, and at `preserve_at` makes an ordinary Preserve of
/// the Actor's record (as a concurrent same-node rewrite would).
fn hook_stages(source: &ZLinkHost, id: &str, preserve_at: Option<RecordedStage>) -> StageLog {
    let client = source.actors().expect("manager").client;
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let id = zlink_codec::ObjectId::new(id).expect("id");
    let hook: crate::relocation::StageHook = Arc::new(move |stage| {
        let (client, log, id) = (client.clone(), Arc::clone(&log), id.clone());
        Box::pin(async move {
            let authority = client.objects.location.authority();
            let AuthorityRead::Found { handle, .. } =
                authority.read(ObjectKind::Actor, &id).await.expect("read")
            else {
                panic!("the record is missing");
            };
            log.lock()
                .push((stage, crate::relocation::recorded_stage(handle.payload())));
            if preserve_at == Some(stage) {
                let payload = handle.payload().to_vec();
                let done = authority
                    .preserve(&handle, payload)
                    .await
                    .expect("preserve");
                assert!(matches!(done, zlink_location::Outcome::Applied(_)));
            }
        })
    });
    let objects = &source.actors().expect("manager").client.objects;
    objects.relocations().probe.on_stage(Some(hook));
    seen
}

async fn stage_records_are_written_in_order_and_the_owner_change_follows_the_last(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (caller, r) = m.counter_at_one("s1").await;
    let (source, target) = m.owner_and_other(&r);
    let stages = hook_stages(source, "s1", None);
    let moved = relocate(source, &r).await.expect("moved");
    assert_eq!(moved.node, rid_of(target));
    let stages = stages.lock().clone();
    let order: Vec<RecordedStage> = stages.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        order,
        vec![
            RecordedStage::Preparing,
            RecordedStage::Captured,
            RecordedStage::Prepared
        ]
    );
    let marks: Vec<&str> = stages
        .iter()
        .filter_map(|(_, m)| m.as_ref().map(|(stage, _)| stage.as_str()))
        .collect();
    assert_eq!(
        marks,
        vec!["preparing", "captured", "prepared"],
        "each record names its stage"
    );
    let ids: std::collections::BTreeSet<_> = stages
        .iter()
        .filter_map(|(_, m)| m.as_ref().map(|(_, id)| id.clone()))
        .collect();
    assert_eq!(ids.len(), 1, "one RelocationId throughout");
    assert_eq!(caller.request("s1", &Incr).await.expect("moved state"), 2);
    m.shutdown().await;
}

async fn a_preserve_after_captured_fails_the_prepared_record_and_the_source_serves_again(
    h: &Harness,
) {
    preserve_during_a_move_cancels_it(h, "s2", RecordedStage::Captured).await;
}

/// Past relay-ready (21 §9.4 last paragraph): the NewOwner conflicts, the source is not
/// restored, the record is removed and the next access makes a new incarnation.
async fn a_preserve_after_prepared_fails_the_owner_change_and_the_source_is_not_restored(
    h: &Harness,
) {
    preserve_during_a_move_cancels_it(h, "s3", RecordedStage::Prepared).await;
}

/// An ordinary Preserve of the Actor's record after the stage record `at`: the next
/// reservation-conditioned write (the `Prepared` record, or NewOwner conditioned on it)
/// conflicts and the move is cancelled. Before relay-ready (`Captured`) the record is not
/// moved and the source serves again, its state intact; past it (`Prepared`: the NewOwner is
/// the target's, after the relay-ready reply) the source is not restored — the record is
/// removed and the next GetOrCreate makes a new incarnation. A later move succeeds.
async fn preserve_during_a_move_cancels_it(h: &Harness, id: &str, at: RecordedStage) {
    let m = mesh_of(h, Policy::Preserve).await;
    let caller = m.client.0.actors().expect("manager");
    let r = caller.get_or_create("counter", id).await.expect("created");
    assert_eq!(caller.request(id, &Incr).await.expect("incr"), 1);
    let (source, _) = m.owner_and_other(&r);
    let before = record(source, id).await;
    let stages = hook_stages(source, id, Some(at));
    let err = relocate(source, &r).await.expect_err("cancelled");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    let last = stages.lock().last().map(|(s, _)| *s);
    assert_eq!(last, Some(at), "no stage record after the conflict");
    let objects = &source.actors().expect("manager").client.objects;
    objects.relocations().probe.on_stage(None);
    let (r, count) = if at == RecordedStage::Prepared {
        let key = (
            AuthorityKind::Actor,
            zlink_codec::ObjectId::new(id).expect("id"),
        );
        assert!(!objects.is_live(&key), "the source is not restored");
        let again = caller.get_or_create("counter", id).await.expect("created");
        assert!(again.generation > r.generation, "a new incarnation");
        (again, 0)
    } else {
        let after = record(source, id).await;
        assert_eq!(
            (&after.0, after.1),
            (&before.0, before.1),
            "the record is not moved"
        );
        (r, 1)
    };
    assert_eq!(caller.request(id, &Incr).await.expect("served"), count + 1);
    let (source, target) = m.owner_and_other(&r);
    let moved = relocate(source, &r).await.expect("moved");
    assert_eq!(moved.node, rid_of(target));
    assert_eq!(
        caller.request(id, &Incr).await.expect("moved state"),
        count + 2
    );
    m.shutdown().await;
}

/// Two counter Object Servers, each over its own fault-injecting wrapper of the harness's
/// store, and one client node; the wrappers in the servers' order.
pub(super) async fn faulty_mesh(
    h: &Harness,
    options: zlink_location::LocationOptions,
) -> (Mesh, [Arc<FaultyLocationStore>; 2]) {
    let seen = Arc::new(Seen::default());
    let faulty = [
        Arc::new(FaultyLocationStore::new(Arc::clone(&h.store))),
        Arc::new(FaultyLocationStore::new(Arc::clone(&h.store))),
    ];
    let a = server_over(faulty[0].clone(), &seen, &options).await;
    let b = server_over(faulty[1].clone(), &seen, &options).await;
    let c = root(h, ObjectRole::Client, Policy::Preserve, &seen, &options).await;
    wait_connected([&a, &b, &c]).await;
    let mesh = Mesh {
        servers: [a, b],
        client: c,
        seen,
    };
    (mesh, faulty)
}

/// Spec 21 §10: the `Captured` stage record applies but its reply is lost, and the engine
/// cannot settle it itself (its re-read of the record fails too). The move settles it by
/// reading the record (this move's stage mark) and the reservation row, and goes on with the
/// versions read: the Actor moves with its state, and afterwards no reservation row remains
/// and the allocation rows count exactly the one record (no target capacity leaked).
async fn a_stage_record_whose_reply_is_lost_is_settled_by_reading_and_leaks_no_reservation(
    h: &Harness,
) {
    use crate::host::tests::support::authority_key;
    let (m, faulty) = faulty_mesh(h, fast_options()).await;
    let (caller, r) = m.counter_at_one("l1").await;
    let (source, target) = m.owner_and_other(&r);
    let lossy = if rid_of(source) == rid_of(&m.servers[0].0) {
        Arc::clone(&faulty[0])
    } else {
        Arc::clone(&faulty[1])
    };
    let key = authority_key(
        ObjectKind::Actor,
        &zlink_codec::ObjectId::new("l1").expect("id"),
    );
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let hook: crate::relocation::StageHook = Arc::new(move |stage| {
        log.lock().push(stage);
        if stage == RecordedStage::Preparing {
            // The next write of the record (Captured) applies and loses its reply; the
            // engine's re-read of the record right after fails as well.
            lossy.fail_next_write_touching(key.clone(), Fault::LOSE_REPLY);
            lossy.fail_next_read_of(key.clone(), Fault::UNAVAILABLE);
        }
        Box::pin(async {})
    });
    let objects = &source.actors().expect("manager").client.objects;
    objects.relocations().probe.on_stage(Some(hook));
    let moved = relocate(source, &r).await.expect("moved");
    assert_eq!(moved.node, rid_of(target));
    assert_eq!(
        seen.lock().clone(),
        vec![
            RecordedStage::Preparing,
            RecordedStage::Captured,
            RecordedStage::Prepared
        ],
        "the lost Captured record was settled as applied, and written once"
    );
    assert_eq!(caller.request("l1", &Incr).await.expect("moved state"), 2);
    no_reservation_leaked(h, 1).await;
    m.shutdown().await;
}

/// A counter Object Server (Preserve policy) over `store`, as `root` makes one over the
/// harness's store.
async fn server_over(
    store: Arc<dyn zlink_store_spi::DynLocationStore>,
    seen: &Arc<Seen>,
    options: &zlink_location::LocationOptions,
) -> (ZLinkHost, MeshNode) {
    let relocation: Arc<dyn DynRelocationStore> = Arc::new(MemoryRelocationStore::new());
    let seen = Arc::clone(seen);
    launch(
        ZLink::builder()
            .location_store(store)
            .relocation_store(relocation)
            .location_options(options.clone())
            .route_mesh(mesh(), move |n| {
                n.object_role(ObjectRole::Server)
                    .actor_type::<Counter>("counter", counter_type(Policy::Preserve, seen))
            }),
    )
    .await
}

/// No reservation row remains and the allocation rows count exactly `records` actors.
pub(super) async fn no_reservation_leaked(h: &Harness, records: u64) {
    use zlink_testkit::snapshot_of;
    assert!(
        snapshot_of(h.store.as_ref(), "capacity-reservation\0")
            .await
            .is_empty(),
        "no reservation row remains"
    );
    let counted: u64 = snapshot_of(h.store.as_ref(), "node-capacity\0")
        .await
        .values()
        .map(|(bytes, _)| {
            zlink_location::CapacityRow::decode(bytes)
                .expect("allocation row")
                .actors
        })
        .sum();
    assert_eq!(counted, records, "the allocation rows count the records");
}

/// Spec 21 §10: the `Captured` stage record applies but its reply is lost, and the record
/// cannot be read back until `storeFailureGrace` has passed: the move is cancelled (never
/// guessing), and its release is conditioned on the reservation row as read then (the lost
/// write had carried it once more), so the target capacity is returned; the Actor stays and
/// serves with its state, and a later move succeeds.
async fn a_move_cancelled_after_a_lost_stage_reply_releases_the_reservation_it_reads(h: &Harness) {
    use crate::host::tests::support::authority_key;
    let options = fast_options().store_failure_grace(std::time::Duration::from_millis(500));
    let (m, faulty) = faulty_mesh(h, options).await;
    let (caller, r) = m.counter_at_one("l2").await;
    let (source, target) = m.owner_and_other(&r);
    let lossy = if rid_of(source) == rid_of(&m.servers[0].0) {
        Arc::clone(&faulty[0])
    } else {
        Arc::clone(&faulty[1])
    };
    let key = authority_key(
        ObjectKind::Actor,
        &zlink_codec::ObjectId::new("l2").expect("id"),
    );
    let armed = Arc::clone(&lossy);
    let hook: crate::relocation::StageHook = Arc::new(move |stage| {
        if stage == RecordedStage::Preparing {
            // The Captured write applies and loses its reply; every read of the record by the
            // source fails from then on (far more reads than the grace leaves time for).
            armed.fail_next_write_touching(key.clone(), Fault::LOSE_REPLY);
            for _ in 0..100_000 {
                armed.fail_next_read_of(key.clone(), Fault::UNAVAILABLE);
            }
        }
        Box::pin(async {})
    });
    let objects = &source.actors().expect("manager").client.objects;
    objects.relocations().probe.on_stage(Some(hook));
    let err = relocate(source, &r).await.expect_err("cancelled");
    lossy.heal();
    objects.relocations().probe.on_stage(None);
    // The store failure that was never settled is reported.
    assert_eq!(err.kind(), ErrorKind::InternalFailure, "{err}");
    no_reservation_leaked(h, 1).await;
    assert_eq!(record(source, "l2").await.0, rid_of(source), "not moved");
    assert_eq!(caller.request("l2", &Incr).await.expect("served here"), 2);
    let moved = relocate(source, &r).await.expect("moved");
    assert_eq!(moved.node, rid_of(target));
    assert_eq!(caller.request("l2", &Incr).await.expect("moved state"), 3);
    no_reservation_leaked(h, 1).await;
    m.shutdown().await;
}

/// A stage hook for the source: once it recorded `Prepared`, the target's next write through
/// `lossy` touching `key` (its NewOwner) applies and loses its reply, and the read right after
/// it (the engine's own settle) fails too.
pub(super) fn lose_the_next_owner_change_reply(
    lossy: &Arc<FaultyLocationStore>,
    key: &zlink_store_spi::StoreKey,
) -> crate::relocation::StageHook {
    let armed = Arc::new(AtomicBool::new(false));
    let on_write = {
        let (armed, lossy, key) = (Arc::clone(&armed), Arc::clone(lossy), key.clone());
        Arc::new(move || {
            if armed.swap(false, Ordering::SeqCst) {
                lossy.fail_next_read_of(key.clone(), Fault::UNAVAILABLE);
            }
        })
    };
    lossy.set_write_hook(Some(on_write));
    let (lossy, key) = (Arc::clone(lossy), key.clone());
    Arc::new(move |stage| {
        if stage == RecordedStage::Prepared {
            lossy.fail_next_write_touching(key.clone(), Fault::LOSE_REPLY);
            armed.store(true, Ordering::SeqCst);
        }
        Box::pin(async {})
    })
}

/// Spec 21 §10 on the target: its NewOwner applies but the reply is lost, and the engine's
/// own re-read of the record fails too. The target reads the record again (the owner change
/// is there: this reservation's target, the same incarnation) instead of dropping its
/// prepared instance: the Actor serves from the target with its state, nothing leaked.
async fn a_lost_owner_change_reply_on_the_target_is_settled_by_reading_and_the_move_completes(
    h: &Harness,
) {
    use crate::host::tests::support::authority_key;
    let (m, faulty) = faulty_mesh(h, fast_options()).await;
    let (caller, r) = m.counter_at_one("l3").await;
    let (source, target) = m.owner_and_other(&r);
    let lossy = if rid_of(target) == rid_of(&m.servers[0].0) {
        Arc::clone(&faulty[0])
    } else {
        Arc::clone(&faulty[1])
    };
    let key = authority_key(
        ObjectKind::Actor,
        &zlink_codec::ObjectId::new("l3").expect("id"),
    );
    let hook = lose_the_next_owner_change_reply(&lossy, &key);
    let objects = &source.actors().expect("manager").client.objects;
    objects.relocations().probe.on_stage(Some(hook));
    let moved = relocate(source, &r).await.expect("moved");
    lossy.set_write_hook(None);
    assert_eq!(moved.node, rid_of(target));
    assert_eq!(caller.request("l3", &Incr).await.expect("moved state"), 2);
    no_reservation_leaked(h, 1).await;
    m.shutdown().await;
}

/// Spec 21 §10 / §12 "Store Failure": the target's NewOwner keeps failing (its Store writes
/// fail before they reach the Store) until `storeFailureGrace` has passed: the target removes
/// its prepared object and queue, the owner never changes and the reservation is released.
/// That is past relay-ready, so the source is not restored either (21 §9.4 last paragraph):
/// the record is removed and the next GetOrCreate makes a new incarnation (its state lost).
async fn an_owner_change_that_fails_past_the_grace_removes_the_prepared_target(h: &Harness) {
    let options = fast_options().store_failure_grace(std::time::Duration::from_millis(500));
    let (m, faulty) = faulty_mesh(h, options).await;
    let (caller, r) = m.counter_at_one("l4").await;
    let (source, target) = m.owner_and_other(&r);
    let failing = if rid_of(target) == rid_of(&m.servers[0].0) {
        Arc::clone(&faulty[0])
    } else {
        Arc::clone(&faulty[1])
    };
    let hook: crate::relocation::StageHook = {
        let failing = Arc::clone(&failing);
        Arc::new(move |stage| {
            if stage == RecordedStage::Prepared {
                failing.set_fault(
                    [zlink_store_conformance::LocationOp::Write],
                    Fault::UNAVAILABLE,
                );
            }
            Box::pin(async {})
        })
    };
    let objects = &source.actors().expect("manager").client.objects;
    objects.relocations().probe.on_stage(Some(hook));
    let outcome = relocate(source, &r).await;
    failing.heal();
    assert!(outcome.is_err(), "the owner never changed: {outcome:?}");
    let client = source.actors().expect("manager").client;
    let id = zlink_codec::ObjectId::new("l4").expect("id");
    assert!(
        matches!(
            client.read(ObjectKind::Actor, &id).await.expect("read"),
            AuthorityRead::Missing { .. }
        ),
        "the source removed the abandoned incarnation's record"
    );
    let key = (
        zlink_codec::keys::AuthorityKind::Actor,
        zlink_codec::ObjectId::new("l4").expect("id"),
    );
    assert!(
        !target
            .actors()
            .expect("manager")
            .client
            .objects
            .is_live(&key),
        "the target removed its prepared object"
    );
    assert!(!objects.is_live(&key), "the source is not restored");
    let again = caller
        .get_or_create("counter", "l4")
        .await
        .expect("created");
    assert!(again.generation > r.generation, "a new incarnation");
    assert_eq!(caller.request("l4", &Incr).await.expect("served"), 1);
    no_reservation_leaked(h, 1).await;
    m.shutdown().await;
}
