//! The `SpotWide` User Spot aggregate move in the location core (spec 21 §8, §8.2; 28 §6): one
//! reservation for the Spot and every member, one NewOwner CAS over the Spot's record, the
//! reservation row, the inventory root row and the capacity rows.

use super::prelude::*;

/// The target's capacity for the Spot and its 3 members is secured at once; the aggregate
/// NewOwner moves the Spot (same ObjectGeneration, a greater AuthorityOwnerGeneration), writes
/// the inventory root, consumes the reservation and moves every slot; each member's record
/// then follows the Spot's owner; replaying the CAS conflicts and changes nothing.
pub(super) async fn spot_wide_relocation_moves_the_spot_its_members_capacity_and_root(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    let spot = active_spot(&a, "s").await;
    for m in ["m1", "m2", "m3"] {
        active_actor(&a, m).await;
    }
    let auth = a.rt.authority();
    let res = auth
        .secure_spot_wide(&spot, &[ty("chat")], 3, b.target(), None)
        .await
        .expect("secure")
        .applied()
        .expect("secured");
    let rb = capacity(&a, &b).await;
    assert_eq!((rb.actors.reserved, rb.spots.reserved), (3, 1));
    // Not a single-object reservation: plain NewOwner refuses it.
    assert!(matches!(
        b.rt.authority().new_owner(&spot, &res).await,
        Err(LocationError::InvalidOperation(_))
    ));
    let moved =
        b.rt.authority()
            .new_owner_spot_wide(&spot, &res, b"root".to_vec())
            .await
            .expect("new owner")
            .applied()
            .expect("moved");
    assert_eq!(moved.object_generation(), spot.object_generation());
    assert!(moved.authority_owner_generation() > spot.authority_owner_generation());
    assert_eq!(moved.node(), b.node());
    assert_eq!(
        auth.spot_inventory_root(spot.id()).await.expect("root"),
        Some(b"root".to_vec())
    );
    let row_a = auth.node_capacity(&a.node()).await.expect("row a");
    let row_b = auth.node_capacity(&b.node()).await.expect("row b");
    assert_eq!((row_a.actors, row_a.spots), (0, 0));
    assert_eq!((row_b.actors, row_b.spots), (3, 1));
    // Every member's record then follows the Spot's owner: the allocation rows count the
    // records again (`capacity` checks it), on both nodes.
    for m in ["m1", "m2", "m3"] {
        let AuthorityRead::Found { handle, .. } =
            b.rt.authority()
                .read(ObjectKind::Actor, &id(m))
                .await
                .expect("read")
        else {
            panic!("{m} is missing");
        };
        // Only the Spot's owner can make a member follow it.
        assert!(matches!(
            a.rt.authority().follow_spot_owner(&handle, &moved).await,
            Err(LocationError::InvalidOperation(_))
        ));
        let followed =
            b.rt.authority()
                .follow_spot_owner(&handle, &moved)
                .await
                .expect("follow")
                .applied()
                .expect("followed");
        assert_eq!(followed.node(), b.node());
        assert_eq!(followed.object_generation(), handle.object_generation());
    }
    let (ua, ub) = (capacity(&a, &a).await, capacity(&a, &b).await);
    assert_eq!((ua.actors.active, ua.spots.active), (0, 0));
    assert_eq!((ub.actors.active, ub.spots.active), (3, 1));
    let before = h.snapshot().await;
    assert!(matches!(
        b.rt.authority()
            .new_owner_spot_wide(&moved, &res, b"other".to_vec())
            .await
            .expect("replay"),
        Outcome::Conflict(Conflict::Reservation)
    ));
    assert!(matches!(
        b.rt.authority()
            .new_owner_spot_wide(&spot, &res, b"other".to_vec())
            .await
            .expect("replay"),
        Outcome::Conflict(_)
    ));
    assert_eq!(h.snapshot().await, before, "a conflict changes nothing");
}

/// A target without room for the Spot and every member is `CapacityExceeded` (nothing
/// reserved); a target that does not offer a member's type is refused; neither stores
/// anything.
pub(super) async fn spot_wide_relocation_short_of_capacity_or_a_type_stores_nothing(h: &Harness) {
    let a = host(h, "main", 1).await;
    let mut b = host(h, "main", 2).await;
    b.desc.capacity.actors.limit = 2;
    let spot = active_spot(&a, "s").await;
    for m in ["m1", "m2", "m3"] {
        active_actor(&a, m).await;
    }
    let before = h.snapshot().await;
    let e =
        a.rt.authority()
            .secure_spot_wide(&spot, &[ty("chat")], 3, b.target(), None)
            .await
            .expect_err("short");
    assert!(matches!(e, LocationError::CapacityExceeded), "{e}");
    assert_eq!(h.snapshot().await, before);
    let e =
        a.rt.authority()
            .secure_spot_wide(&spot, &[ty("unknown")], 3, b.target(), None)
            .await
            .expect_err("type");
    assert!(!matches!(e, LocationError::CapacityExceeded), "{e}");
    assert_eq!(h.snapshot().await, before);
    // At the bound: room for exactly the Spot and 2 members.
    a.rt.authority()
        .secure_spot_wide(&spot, &[ty("chat")], 2, b.target(), None)
        .await
        .expect("secure")
        .applied()
        .expect("fits");
}
