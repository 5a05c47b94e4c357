//! How a move ends on its source when the Location Store does not answer (spec 21 §9.4, §10:
//! never guess): the source serves again only on a confirmed read, and a lost secure reply
//! leaks no target capacity.

use super::*;
use crate::host::tests::support::authority_key;
use crate::objects::host::ObjectKey;
use crate::relocation::MovesOf;
use zlink_store_conformance::{Fault, FaultyLocationStore};
use zlink_store_spi::ScanPrefix;

on_every_store!(
    a_failed_record_read_at_settle_never_reopens_the_source,
    a_record_read_that_fails_for_a_while_at_settle_is_read_again_and_the_move_completes,
    a_failed_record_read_never_reopens_a_spot_wide_group,
    a_lost_secure_target_reply_does_not_leak_the_target_reservation,
);

/// The settle reads give up this soon (`storeFailureGrace`).
const GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// A stage hook for a source over `lossy`: once it recorded `Prepared`, every read of `key`
/// (the unit's record) fails, far longer than the grace leaves time for.
fn fail_record_reads_after_prepared(
    lossy: &Arc<FaultyLocationStore>,
    key: zlink_store_spi::StoreKey,
) -> crate::relocation::StageHook {
    let lossy = Arc::clone(lossy);
    Arc::new(move |stage| {
        if stage == RecordedStage::Prepared {
            for _ in 0..100_000 {
                lossy.fail_next_read_of(key.clone(), Fault::UNAVAILABLE);
            }
        }
        Box::pin(async {})
    })
}

/// `call` until it is served, at most three times: a caller whose route still names the old
/// owner hears `Unavailable` once, drops its entry and reads the record.
async fn served<T>(mut call: impl AsyncFnMut() -> Result<T, crate::messaging::ZLinkError>) -> T {
    for _ in 0..2 {
        match call().await {
            Ok(v) => return v,
            Err(e) => assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}"),
        }
    }
    call().await.expect("served after a re-read")
}

/// Spec 21 §9.4, §10: the target's NewOwner applied but its cutover answer never reached the
/// source, and every read of the record by the source fails until `storeFailureGrace` has
/// passed. The release finds the reservation consumed, and the record cannot be read: the
/// source never reopens on that guess (the target owns the Actor: two owners). It fails
/// closed — its activation closes without a location change and the move reports the store
/// failure — and the record decides: the next access reaches the target, state intact.
async fn a_failed_record_read_at_settle_never_reopens_the_source(h: &Harness) {
    let (m, faulty) =
        super::stages::faulty_mesh(h, fast_options().store_failure_grace(GRACE)).await;
    let (caller, r) = m.counter_at_one("u1").await;
    let (source, target) = m.owner_and_other(&r);
    let lossy = if rid_of(source) == rid_of(&m.servers[0].0) {
        Arc::clone(&faulty[0])
    } else {
        Arc::clone(&faulty[1])
    };
    let id = zlink_codec::ObjectId::new("u1").expect("id");
    let objects = &source.actors().expect("manager").client.objects;
    let hook = fail_record_reads_after_prepared(&lossy, authority_key(ObjectKind::Actor, &id));
    objects.relocations().probe.on_stage(Some(hook));
    objects.relocations().probe.lose_next_cutover_reply();
    let err = relocate(source, &r).await.expect_err("not settled");
    lossy.heal();
    objects.relocations().probe.on_stage(None);
    let key: ObjectKey = (AuthorityKind::Actor, id);
    let target_objects = &target.actors().expect("manager").client.objects;
    assert_eq!(
        record(source, "u1").await.0,
        rid_of(target),
        "the owner changed"
    );
    assert!(target_objects.is_live(&key), "the target serves it");
    assert!(!objects.is_live(&key), "the source never serves it again");
    assert_eq!(err.kind(), ErrorKind::InternalFailure, "{err}");
    assert_eq!(served(async || caller.request("u1", &Incr).await).await, 2);
    assert!(!objects.is_live(&key));
    m.shutdown().await;
}

/// Spec 21 §10: as in [`a_failed_record_read_at_settle_never_reopens_the_source`], but only
/// the first few reads of the record fail: the source reads it again after a pause, finds the
/// target named and completes the move (follows) — it neither reopens on the failed read nor
/// gives up before the grace.
async fn a_record_read_that_fails_for_a_while_at_settle_is_read_again_and_the_move_completes(
    h: &Harness,
) {
    let (m, faulty) = super::stages::faulty_mesh(h, fast_options()).await;
    let (caller, r) = m.counter_at_one("u2").await;
    let (source, target) = m.owner_and_other(&r);
    let lossy = if rid_of(source) == rid_of(&m.servers[0].0) {
        Arc::clone(&faulty[0])
    } else {
        Arc::clone(&faulty[1])
    };
    let id = zlink_codec::ObjectId::new("u2").expect("id");
    let key = authority_key(ObjectKind::Actor, &id);
    let armed = Arc::clone(&lossy);
    let hook: crate::relocation::StageHook = Arc::new(move |stage| {
        if stage == RecordedStage::Prepared {
            for _ in 0..5 {
                armed.fail_next_read_of(key.clone(), Fault::UNAVAILABLE);
            }
        }
        Box::pin(async {})
    });
    let objects = &source.actors().expect("manager").client.objects;
    objects.relocations().probe.on_stage(Some(hook));
    objects.relocations().probe.lose_next_cutover_reply();
    let moved = relocate(source, &r).await.expect("settled by a later read");
    objects.relocations().probe.on_stage(None);
    assert_eq!(moved.node, rid_of(target));
    let key: ObjectKey = (AuthorityKind::Actor, id);
    assert!(!objects.is_live(&key), "the source followed");
    assert_eq!(caller.request("u2", &Incr).await.expect("moved state"), 2);
    m.shutdown().await;
}

/// [`a_failed_record_read_at_settle_never_reopens_the_source`] for a `SpotWide` group: the
/// aggregate NewOwner applied, its cutover answer is lost and the Spot's record cannot be
/// read by the source until the grace passed. Neither the Spot nor any member serves on the
/// source again; the record (the target) decides, every member's state intact.
async fn a_failed_record_read_never_reopens_a_spot_wide_group(h: &Harness) {
    use super::spot_wide::{hall_moving_to, live_here, root, root_over, spot_record};
    let lossy = Arc::new(FaultyLocationStore::new(Arc::clone(&h.store)));
    let options = fast_options().store_failure_grace(GRACE);
    let source = root_over(lossy.clone(), ObjectRole::Server, None, false, options).await;
    let target = root(h, ObjectRole::Server, None, false);
    let (r, hall, ids) = hall_moving_to(h, source, 3, target).await;
    let actors = r[2].0.actors().expect("actors");
    let relocations = r[0].0.object_host(0);
    let key = authority_key(ObjectKind::UserSpot, &hall.id);
    let hook = fail_record_reads_after_prepared(&lossy, key);
    relocations.relocations().probe.on_stage(Some(hook));
    relocations.relocations().probe.lose_next_cutover_reply();
    let err = super::spot_wide::relocate(&r[0].0, &hall)
        .await
        .expect_err("not settled");
    lossy.heal();
    relocations.relocations().probe.on_stage(None);
    let (node, _) = spot_record(&r[2].0, &hall).await;
    assert_eq!(&node, r[1].1.routing_id(), "the Spot's owner changed");
    assert!(live_here(&r[1].0, AuthorityKind::Spot, hall.id.as_str()));
    assert!(
        !live_here(&r[0].0, AuthorityKind::Spot, hall.id.as_str()),
        "the source Spot never serves again"
    );
    assert_eq!(err.kind(), ErrorKind::InternalFailure, "{err}");
    for id in &ids {
        assert!(
            !live_here(&r[0].0, AuthorityKind::Actor, id),
            "{id} never serves on the source again"
        );
        assert!(
            live_here(&r[1].0, AuthorityKind::Actor, id),
            "{id} on the target"
        );
        let totals = served(async || actors.request(id, &Totals).await).await;
        assert_eq!(totals, (1, 1, 0), "{id}'s state moved");
    }
    for (host, _) in r {
        host.shutdown().await;
    }
}

/// Spec 21 §10, §9.4 step 4: the secure of the target capacity applies but its reply is lost,
/// and the engine cannot settle it (its read of the reservation row fails too), so the source
/// holds no copy of the reservation. The move is cancelled, and its release finds the row by
/// the move's ReservationId and returns the capacity: no reservation row remains, the
/// allocation rows count the one record, the Actor serves here and a later move succeeds.
async fn a_lost_secure_target_reply_does_not_leak_the_target_reservation(h: &Harness) {
    let (m, faulty) = super::stages::faulty_mesh(h, fast_options()).await;
    let (caller, r) = m.counter_at_one("u3").await;
    let (source, target) = m.owner_and_other(&r);
    let lossy = if rid_of(source) == rid_of(&m.servers[0].0) {
        Arc::clone(&faulty[0])
    } else {
        Arc::clone(&faulty[1])
    };
    let id = zlink_codec::ObjectId::new("u3").expect("id");
    // The secure is the move's first write conditioned on the record; the engine's witness is
    // the reservation row.
    lossy.fail_next_write_touching(authority_key(ObjectKind::Actor, &id), Fault::LOSE_REPLY);
    let rows = ScanPrefix::new("capacity-reservation\0").expect("prefix");
    lossy.fail_next_read_under(rows, Fault::UNAVAILABLE);
    let err = relocate(source, &r).await.expect_err("not secured");
    lossy.heal();
    assert_eq!(err.kind(), ErrorKind::InternalFailure, "{err}");
    super::stages::no_reservation_leaked(h, 1).await;
    assert_eq!(record(source, "u3").await.0, rid_of(source), "not moved");
    assert_eq!(caller.request("u3", &Incr).await.expect("served here"), 2);
    let moved = relocate(source, &r).await.expect("moved");
    assert_eq!(moved.node, rid_of(target));
    assert_eq!(caller.request("u3", &Incr).await.expect("moved state"), 3);
    super::stages::no_reservation_leaked(h, 1).await;
    m.shutdown().await;
}
