//! Relocation target capacity, the reservation-carrying Preserve and NewOwner (spec 21 §6.1, §8.1, §8.2).

use super::prelude::*;

/// NewOwner keeps the ObjectGeneration, issues a greater AuthorityOwnerGeneration, turns the
/// secured target capacity into capacity in use, returns the source's, and consumes the
/// reservation; replaying it conflicts.
pub(super) async fn new_owner_keeps_object_generation_and_moves_capacity(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    let x = active_actor(&a, "x").await;
    let res =
        a.rt.authority()
            .secure_target(&x, b.target(), None)
            .await
            .expect("secure")
            .applied()
            .expect("secured");
    assert_eq!(capacity(&a, &b).await.actors.reserved, 1);
    // Only the target runs NewOwner.
    assert!(matches!(
        a.rt.authority().new_owner(&x, &res).await,
        Err(LocationError::InvalidOperation(_))
    ));
    let moved =
        b.rt.authority()
            .new_owner(&x, &res)
            .await
            .expect("new owner")
            .applied()
            .expect("moved");
    assert_eq!(moved.object_generation(), x.object_generation());
    assert!(moved.authority_owner_generation() > x.authority_owner_generation());
    assert_eq!(moved.node(), b.node());
    let (ra, rb) = (capacity(&a, &a).await, capacity(&a, &b).await);
    assert_eq!((ra.actors.active, ra.actors.reserved), (0, 0));
    assert_eq!((rb.actors.active, rb.actors.reserved), (1, 0));
    let before = h.snapshot().await;
    assert!(matches!(
        b.rt.authority().new_owner(&x, &res).await.expect("replay"),
        Outcome::Conflict(Conflict::Record { current: Some(_) })
    ));
    assert!(matches!(
        b.rt.authority()
            .new_owner(&moved, &res)
            .await
            .expect("replay"),
        Outcome::Conflict(Conflict::Reservation)
    ));
    assert_eq!(h.snapshot().await, before);
    // The new owner can now delete it.
    assert_eq!(
        b.rt.authority().delete(&moved).await.expect("delete"),
        Outcome::Applied(())
    );
    assert_eq!(capacity(&a, &b).await, NodeUsage::default());
}

/// Securing target capacity with the same ReservationId and content returns the first
/// reservation (capacity reserved once); the same id with other content conflicts; an expired
/// target lease conflicts; release returns the capacity.
pub(super) async fn secure_target_is_idempotent_and_checks_the_target_lease(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    let c = host(h, "main", 3).await;
    let x = active_actor(&a, "x").await;
    let auth = a.rt.authority();
    let first = auth
        .secure_target(&x, b.target(), Some(7))
        .await
        .expect("secure")
        .applied()
        .expect("secured");
    let again = auth
        .secure_target(&x, b.target(), Some(7))
        .await
        .expect("secure")
        .applied()
        .expect("same");
    assert_eq!(first, again);
    assert_eq!(capacity(&a, &b).await.actors.reserved, 1);
    assert_eq!(
        auth.secure_target(&x, c.target(), Some(7))
            .await
            .expect("secure"),
        Outcome::Conflict(Conflict::Reservation)
    );
    assert!(matches!(
        auth.secure_target(&x, b.target(), Some(0)).await,
        Err(LocationError::InvalidOperation(_))
    ));
    assert_eq!(
        auth.release_target(&first).await.expect("release"),
        Outcome::Applied(())
    );
    assert_eq!(capacity(&a, &b).await.actors.reserved, 0);

    let c_target = c.target();
    c.rt.lease().release().await.expect("release");
    let before = h.snapshot().await;
    assert_eq!(
        auth.secure_target(&x, c_target.clone(), None)
            .await
            .expect("secure"),
        Outcome::Conflict(Conflict::LeaseStale {
            run: c_target.run,
            target: true
        })
    );
    assert_eq!(h.snapshot().await, before);
}

/// A reservation secured while A owned `x`, followed by A's regular Preserve (which carries no
/// reservation): the reservation expects the record as it was, so NewOwner through it is a
/// Conflict, with the fresh record and with the stale one, and nothing changes.
pub(super) async fn reservation_made_before_a_regular_preserve_cannot_move_the_object(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    let x = active_actor(&a, "x").await;
    let res = secure(&a, &x, &b).await;
    let preserved =
        a.rt.authority()
            .preserve(&x, b"state-2".to_vec())
            .await
            .expect("preserve")
            .applied()
            .expect("preserved");
    new_owner_changes_nothing(h, &b, &[&preserved, &x], &res).await;
    assert_eq!(capacity(&a, &a).await.actors.active, 1);
}

/// Two reservations for `x` (targets B and C); C's NewOwner moves `x`. B's reservation was made
/// against the record before that move: NewOwner through it is a Conflict with the current
/// record and with the old one, and nothing changes (spec 21 §8.2: a previous target attempt
/// can never change the owner).
pub(super) async fn reservation_made_before_another_move_cannot_move_the_object(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    let c = host(h, "main", 3).await;
    let x = active_actor(&a, "x").await;
    let to_b = secure(&a, &x, &b).await;
    let to_c = secure(&a, &x, &c).await;
    let moved =
        c.rt.authority()
            .new_owner(&x, &to_c)
            .await
            .expect("new owner")
            .applied()
            .expect("moved to C");
    assert_eq!(moved.owner(), &c.run());
    new_owner_changes_nothing(h, &b, &[&moved, &x], &to_b).await;
    // B's reservation still holds its capacity until it is released.
    assert_eq!(capacity(&a, &b).await.actors.reserved, 1);
    assert_eq!(
        a.rt.authority()
            .release_target(&to_b)
            .await
            .expect("release"),
        Outcome::Applied(())
    );
    assert_eq!(capacity(&a, &b).await, NodeUsage::default());
}

/// A host that does not own `x` cannot secure a target for it: Conflict::NotOwner, decided
/// before any Store request, nothing changed.
pub(super) async fn non_owner_cannot_secure_a_target(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    let d = host(h, "main", 4).await;
    let x = active_actor(&a, "x").await;
    let before = h.snapshot().await;
    assert_eq!(
        d.rt.authority()
            .secure_target(&x, b.target(), None)
            .await
            .expect("secure"),
        Outcome::Conflict(Conflict::NotOwner { owner: a.run() })
    );
    assert_eq!(h.snapshot().await, before);
}

/// A Preserve that carries the reservation rewrites the record and the reservation row in one
/// batch: the reservation it returns expects the new record and moves it; the copy from before
/// the Preserve is a Conflict; the consumed reservation cannot move the object again.
pub(super) async fn carrying_preserve_keeps_the_reservation_and_stales_older_copies(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    let x = active_actor(&a, "x").await;
    let res = secure(&a, &x, &b).await;
    let (x2, res2) =
        a.rt.authority()
            .preserve_carrying(&x, &res, b"captured".to_vec())
            .await
            .expect("preserve")
            .applied()
            .expect("carried");
    assert_eq!(x2.payload(), b"captured");
    assert_eq!(x2.owner(), &a.run());
    assert_eq!(res2.reservation_id(), res.reservation_id());
    // A regular record change is refused through a reservation that expects another version.
    let before = h.snapshot().await;
    assert_eq!(
        a.rt.authority()
            .preserve_carrying(&x2, &res, b"again".to_vec())
            .await
            .expect("preserve"),
        Outcome::Conflict(Conflict::Reservation)
    );
    assert_eq!(
        b.rt.authority()
            .new_owner(&x2, &res)
            .await
            .expect("stale copy"),
        Outcome::Conflict(Conflict::Reservation)
    );
    assert_eq!(h.snapshot().await, before);
    let moved =
        b.rt.authority()
            .new_owner(&x2, &res2)
            .await
            .expect("new owner")
            .applied()
            .expect("moved");
    assert_eq!(moved.payload(), b"captured");
    assert_eq!(capacity(&a, &b).await.actors.active, 1);
    let after = h.snapshot().await;
    let again =
        b.rt.authority()
            .new_owner(&moved, &res2)
            .await
            .expect("replay");
    assert!(again.conflict().is_some());
    assert_eq!(h.snapshot().await, after);
}

/// NewOwner by `by` through `reservation`, with each of `handles`, ends in a Conflict and
/// leaves the whole Store as it was.
async fn new_owner_changes_nothing(
    h: &Harness,
    by: &Host,
    handles: &[&AuthorityHandle],
    reservation: &TargetReservation,
) {
    let before = h.snapshot().await;
    for handle in handles {
        let outcome = by
            .rt
            .authority()
            .new_owner(handle, reservation)
            .await
            .expect("new owner");
        assert!(outcome.conflict().is_some(), "{outcome:?}");
    }
    assert_eq!(
        h.snapshot().await,
        before,
        "a stale reservation changes nothing"
    );
}

/// After a NewOwner whose reply was lost, the record read settles it (spec 21 §10): still the
/// expected version → not applied; the target run owning the same incarnation → applied; a
/// change by anything else → other.
pub(super) async fn a_lost_new_owner_reply_is_settled_by_reading_the_record(h: &Harness) {
    use crate::OwnerChangeRead;
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    let x = active_actor(&a, "x").await;
    let res =
        a.rt.authority()
            .secure_target(&x, b.target(), None)
            .await
            .expect("secure")
            .applied()
            .expect("secured");
    assert_eq!(res.owner_change_read(&x), OwnerChangeRead::NotApplied);
    let moved =
        b.rt.authority()
            .new_owner(&x, &res)
            .await
            .expect("new owner")
            .applied()
            .expect("moved");
    assert_eq!(res.owner_change_read(&moved), OwnerChangeRead::Applied);
    // Another change after it (the new owner's Preserve) is still this target's incarnation.
    let preserved =
        b.rt.authority()
            .preserve(&moved, b"later".to_vec())
            .await
            .expect("preserve")
            .applied()
            .expect("preserved");
    assert_eq!(res.owner_change_read(&preserved), OwnerChangeRead::Applied);
    // A record changed by the source instead (a Preserve before any NewOwner) is another change.
    let y = active_actor(&a, "y").await;
    let res_y =
        a.rt.authority()
            .secure_target(&y, b.target(), None)
            .await
            .expect("secure")
            .applied()
            .expect("secured");
    let changed =
        a.rt.authority()
            .preserve(&y, b"source".to_vec())
            .await
            .expect("preserve")
            .applied()
            .expect("preserved");
    assert_eq!(res_y.owner_change_read(&changed), OwnerChangeRead::Other);
}

/// Spec 21 §10: a `secure_target` applies but its reply is lost, and the engine cannot settle
/// it (its witness read of the reservation row fails too), so the caller holds no copy of the
/// reservation while the row holds target capacity. The row is found by its ReservationId
/// (`reservation_by_id`) and released: the capacity comes back. An id never secured, another
/// object's handle or another target finds nothing.
pub(super) async fn a_lost_secure_reply_is_found_by_its_reservation_id_and_released(h: &Harness) {
    let lossy = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let a = h
        .host_with(lossy.clone(), LocationOptions::default(), None, 1)
        .await;
    let b = host(h, "main", 2).await;
    let c = host(h, "main", 3).await;
    let x = active_actor(&a, "x").await;
    let y = active_actor(&a, "y").await;
    let key = keys::capacity_reservation(11).expect("key");
    lossy.fail_next_write_touching(key.clone(), Fault::LOSE_REPLY);
    lossy.fail_next_read_of(key, Fault::UNAVAILABLE);
    let auth = a.rt.authority();
    let lost = auth.secure_target(&x, b.target(), Some(11)).await;
    assert!(lost.is_err(), "the outcome stays unknown: {lost:?}");
    assert_eq!(capacity(&a, &b).await.actors.reserved, 1, "the row applied");
    let by_id = |handle: &AuthorityHandle, target: TargetNode, id: u128| {
        let handle = handle.clone();
        async move {
            auth.reservation_by_id(&handle, &target, id)
                .await
                .expect("read")
        }
    };
    assert_eq!(by_id(&x, b.target(), 12).await, None, "never secured");
    assert_eq!(by_id(&y, b.target(), 11).await, None, "another object");
    assert_eq!(by_id(&x, c.target(), 11).await, None, "another target");
    assert!(matches!(
        auth.reservation_by_id(&x, &b.target(), 0).await,
        Err(LocationError::InvalidOperation(_))
    ));
    let found = by_id(&x, b.target(), 11).await.expect("found");
    assert_eq!(found.reservation_id(), 11);
    assert_eq!(found.object_generation(), x.object_generation());
    assert_eq!(
        auth.release_target(&found).await.expect("release"),
        Outcome::Applied(())
    );
    assert_eq!(capacity(&a, &b).await, NodeUsage::default());
    assert_eq!(by_id(&x, b.target(), 11).await, None, "released");
}

/// A cross-node join's NewOwner (spec 21 §8.2 "Cross-node JoinSpot/JoinEntrySpot") changes the
/// owner, the capacity on both nodes, the AuthorityOwnerGeneration and the record's membership
/// payload in one change; a stale reservation, or a Spot's record, changes nothing.
pub(super) async fn new_owner_joining_moves_owner_capacity_and_membership_in_one_change(
    h: &Harness,
) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    let x = active_actor(&a, "x").await;
    let spot = active_spot(&a, "room").await;
    let res = secure(&a, &x, &b).await;
    let spot_res = secure(&a, &spot, &b).await;
    let before = h.snapshot().await;
    // Only an Actor joins.
    assert!(matches!(
        b.rt.authority()
            .new_owner_joining(&spot, &spot_res, b"m1{}".to_vec())
            .await,
        Err(LocationError::InvalidOperation(_))
    ));
    assert_eq!(h.snapshot().await, before, "a refused join changes nothing");
    let payload = br#"m1{"spot":"room","entry":false,"spotWide":false}"#.to_vec();
    let moved =
        b.rt.authority()
            .new_owner_joining(&x, &res, payload.clone())
            .await
            .expect("new owner")
            .applied()
            .expect("moved");
    assert_eq!(moved.payload(), payload.as_slice());
    assert_eq!(moved.object_generation(), x.object_generation());
    assert!(moved.authority_owner_generation() > x.authority_owner_generation());
    assert_eq!(moved.node(), b.node());
    let (ra, rb) = (capacity(&a, &a).await, capacity(&a, &b).await);
    // On A: the Spot; on B: the Actor in use and the Spot's reservation.
    assert_eq!((ra.actors.active, ra.actors.reserved), (0, 0));
    assert_eq!((rb.actors.active, rb.actors.reserved), (1, 0));
    let read = b.rt.authority().read(ObjectKind::Actor, x.id()).await;
    let Ok(AuthorityRead::Found { handle, .. }) = read else {
        panic!("the joined record: {read:?}");
    };
    assert_eq!(handle.payload(), payload.as_slice());
    assert_eq!(handle.version(), moved.version());
    // Replaying the join through the consumed reservation changes nothing.
    let before = h.snapshot().await;
    let replay =
        b.rt.authority()
            .new_owner_joining(&moved, &res, b"m1{}".to_vec())
            .await
            .expect("replay");
    assert!(replay.conflict().is_some(), "{replay:?}");
    assert_eq!(h.snapshot().await, before);
}

/// Spec 21 §9.1 "Source terminates during Preparing or capture": a source that secured target
/// capacity and ended before its Restore reached the target leaves a row no process holds a
/// copy of. The target finds the rows that source secured on it (`reservations_from`) — not
/// another source's, not the ones on another target — and releases them: the capacity comes
/// back and the row is gone.
pub(super) async fn a_target_finds_the_reservations_an_ended_source_secured_on_it(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    let c = host(h, "main", 3).await;
    let x = active_actor(&a, "x").await;
    let y = active_actor(&a, "y").await;
    let z = active_actor(&c, "z").await;
    let rx = secure(&a, &x, &b).await;
    let _on_another_target = secure(&a, &y, &c).await;
    let _from_another_source = secure(&c, &z, &b).await;
    let auth = b.rt.authority();
    let from_a = || async {
        auth.reservations_from(&a.target().run, &b.target())
            .await
            .expect("scan")
    };
    let found = from_a().await;
    let ids: Vec<u128> = found.iter().map(|r| r.reservation_id()).collect();
    assert_eq!(ids, vec![rx.reservation_id()]);
    assert_eq!(found[0].id(), x.id());
    assert_eq!(capacity(&a, &b).await.actors.reserved, 2);
    assert_eq!(
        auth.release_target(&found[0]).await.expect("release"),
        Outcome::Applied(())
    );
    assert_eq!(
        capacity(&a, &b).await.actors.reserved,
        1,
        "only the other source's stays"
    );
    assert!(from_a().await.is_empty(), "released");
}
