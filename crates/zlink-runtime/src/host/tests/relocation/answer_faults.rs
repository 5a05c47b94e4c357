//! The source's last read of a unit that moved (spec 21 §10: never guess; issue 20): the
//! owner change applied and the source followed, then its read of the record for the move's
//! answer fails. It is read again until `storeFailureGrace`; only then is the move's answer an
//! error, and that error says the unit moved but its record could not be confirmed.

use super::*;
use crate::host::tests::support::authority_key;
use crate::messaging::ZLinkError;
use crate::objects::host::ObjectKey;
use crate::relocation::MovesOf;
use zlink_store_conformance::{Fault, FaultyLocationStore};

on_every_store!(
    a_record_read_that_fails_after_the_follow_is_read_again_and_the_move_answers,
    a_record_that_stays_unreadable_after_the_follow_is_reported_as_moved_unconfirmed,
);

/// The settle reads give up this soon (`storeFailureGrace`).
const GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// A stage hook for a source over `lossy`: once it recorded `Prepared`, the next `reads`
/// reads of `key` (the unit's record) fail.
fn fail_record_reads_after_prepared(
    lossy: &Arc<FaultyLocationStore>,
    key: zlink_store_spi::StoreKey,
    reads: usize,
) -> crate::relocation::StageHook {
    let lossy = Arc::clone(lossy);
    Arc::new(move |stage| {
        if stage == RecordedStage::Prepared {
            for _ in 0..reads {
                lossy.fail_next_read_of(key.clone(), Fault::UNAVAILABLE);
            }
        }
        Box::pin(async {})
    })
}

/// A mesh over faulty stores with the counter `id` at one, its source's reads of the record
/// failing `reads` times once it recorded `Prepared`; then the source, the target and the
/// source's faulty store.
async fn moving_with_failing_reads(
    h: &Harness,
    id: &str,
    reads: usize,
) -> (
    Mesh,
    crate::objects::ActorManager,
    ActorRef,
    Arc<FaultyLocationStore>,
) {
    let (m, faulty) =
        super::stages::faulty_mesh(h, fast_options().store_failure_grace(GRACE)).await;
    let (caller, r) = m.counter_at_one(id).await;
    let (source, _) = m.owner_and_other(&r);
    let lossy = if rid_of(source) == rid_of(&m.servers[0].0) {
        Arc::clone(&faulty[0])
    } else {
        Arc::clone(&faulty[1])
    };
    let oid = zlink_codec::ObjectId::new(id).expect("id");
    let hook =
        fail_record_reads_after_prepared(&lossy, authority_key(ObjectKind::Actor, &oid), reads);
    let objects = &source.actors().expect("manager").client.objects;
    objects.relocations().probe.on_stage(Some(hook));
    (m, caller, r, lossy)
}

/// The key of the Actor `id`.
fn key_of(id: &str) -> ObjectKey {
    (
        AuthorityKind::Actor,
        zlink_codec::ObjectId::new(id).expect("id"),
    )
}

/// The owner change applied and the source followed; the source's next few reads of the
/// record fail (a short Store outage). The record is read again and the move answers with the
/// target's record (before, the first failed read turned the move into an error).
async fn a_record_read_that_fails_after_the_follow_is_read_again_and_the_move_answers(h: &Harness) {
    let (m, caller, r, lossy) = moving_with_failing_reads(h, "v1", 3).await;
    let (source, target) = m.owner_and_other(&r);
    let moved = relocate(source, &r).await.expect("the move answers");
    lossy.heal();
    assert_eq!(moved.node, rid_of(target), "the answer names the target");
    let target_objects = &target.actors().expect("manager").client.objects;
    assert!(
        target_objects.is_live(&key_of("v1")),
        "the target serves it"
    );
    assert_eq!(caller.request("v1", &Incr).await.expect("served"), 2);
    source
        .actors()
        .expect("manager")
        .client
        .objects
        .relocations()
        .probe
        .on_stage(None);
    m.shutdown().await;
}

/// The owner change applied and the source followed; every read of the record by the source
/// fails until `storeFailureGrace` has passed. The move's answer is an error, and it says the
/// unit moved (to the target) but its record could not be confirmed — not a failed move: the
/// target serves it with its state and the source does not.
async fn a_record_that_stays_unreadable_after_the_follow_is_reported_as_moved_unconfirmed(
    h: &Harness,
) {
    let (m, caller, r, lossy) = moving_with_failing_reads(h, "v2", 100_000).await;
    let (source, target) = m.owner_and_other(&r);
    let err = relocate(source, &r).await.expect_err("not confirmed");
    lossy.heal();
    assert!(
        matches!(&err, ZLinkError::MovedUnconfirmed { to, .. } if *to == rid_of(target)),
        "{err:?}"
    );
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    let target_objects = &target.actors().expect("manager").client.objects;
    assert!(
        target_objects.is_live(&key_of("v2")),
        "the target serves it"
    );
    let source_objects = &source.actors().expect("manager").client.objects;
    assert!(
        !source_objects.is_live(&key_of("v2")),
        "the source does not"
    );
    assert_eq!(caller.request("v2", &Incr).await.expect("served"), 2);
    source_objects.relocations().probe.on_stage(None);
    m.shutdown().await;
}
