//! A Store that lost its data (spec 21 §3, §5, §10; the store-epoch decision in
//! `docs/store-epoch.md`): detected as a lost lease, and no generation ever goes back.

use super::prelude::*;

/// Deletes every key of the store (the Redis prefix of the test): a Store restarted without
/// persistence.
async fn wipe(store: &dyn DynLocationStore) {
    for key in snapshot_of(store, "").await.keys() {
        force_delete(store, key).await;
    }
    assert!(
        snapshot_of(store, "").await.is_empty(),
        "the store is empty"
    );
}

/// The highest ObjectGeneration and AuthorityOwnerGeneration among `handles`.
fn highest(handles: &[AuthorityHandle]) -> (u64, u64) {
    handles.iter().fold((0, 0), |(o, a), h| {
        (
            o.max(h.object_generation().get()),
            a.max(h.authority_owner_generation().get()),
        )
    })
}

/// After every key is gone: the renew finds the lease row missing and reports the lease lost
/// (admission stops); re-acquiring issues a LeaseGeneration above the one held, and an object
/// recreated afterwards (here or by a host that never saw the old data) gets an
/// ObjectGeneration and AuthorityOwnerGeneration above any this host held.
pub(super) async fn a_store_that_lost_its_data_is_a_lost_lease_and_generations_never_go_back(
    h: &Harness,
) {
    let a = host(h, "main", 1).await;
    let mut held = Vec::new();
    for i in 0..4 {
        held.push(active_actor(&a, &format!("x{i}")).await);
    }
    let (object, owner) = highest(&held);
    let before = a.run();

    wipe(h.store.as_ref()).await;
    assert_eq!(
        a.rt.lease().renew().await.expect("renew"),
        RenewOutcome::Lost
    );
    assert!(!a.rt.is_admitting());
    assert!(a.rt.admit(AdmissionOp::ObjectMessageStart).is_err());
    assert_eq!(a.rt.host_run(), None);

    let after = a.rt.lease().acquire().await.expect("re-acquire");
    assert_eq!(after.owner_id, before.owner_id);
    assert!(
        after.lease_generation > before.lease_generation,
        "{} after {}",
        after.lease_generation,
        before.lease_generation
    );
    assert!(a.rt.is_admitting());
    let again = active_actor(&a, "x0").await;
    assert!(
        again.object_generation().get() > object,
        "object generation went back"
    );
    assert!(again.authority_owner_generation().get() > owner);

    // A host that never saw the old data issues above it too: the re-acquire raised the
    // counters in its batch.
    let b = host(h, "main", 2).await;
    assert!(b.run().lease_generation > before.lease_generation);
    let fresh = active_actor(&b, "y").await;
    assert!(fresh.object_generation().get() > object);
    assert!(fresh.authority_owner_generation().get() > owner);
}

/// Counters that answer at or below a generation this host holds (the lease row survived, the
/// counters did not) are Store data loss, noticed by the authority batch that reads them:
/// admission closes at once (that batch is refused), the next renew reports the lease lost, and
/// after the takeover the next issuance goes above what the host holds.
pub(super) async fn a_counter_below_a_held_generation_is_data_loss(h: &Harness) {
    let a = host(h, "main", 1).await;
    let mut held = Vec::new();
    for i in 0..3 {
        held.push(active_actor(&a, &format!("x{i}")).await);
    }
    let (object, owner) = highest(&held);
    for kind in [GenerationKind::Object, GenerationKind::AuthorityOwner] {
        force_delete(h.store.as_ref(), &kind.counter_key()).await;
    }
    let e =
        a.rt.authority()
            .reserve(request(ObjectKind::Actor, "z", "chat", a.target()))
            .await
            .expect_err("refused once the loss is noticed");
    assert!(matches!(e, LocationError::Admission(_)), "{e}");
    assert!(!a.rt.is_admitting());
    assert_eq!(
        a.rt.lease().renew().await.expect("renew"),
        RenewOutcome::Lost
    );
    assert!(!a.rt.is_admitting());
    let again = a.rt.lease().acquire().await.expect("re-acquire");
    assert!(again.lease_generation > held[0].owner().lease_generation);
    let next = active_actor(&a, "z").await;
    assert!(next.object_generation().get() > object);
    assert!(next.authority_owner_generation().get() > owner);
}
