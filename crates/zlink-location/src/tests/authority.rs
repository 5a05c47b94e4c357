//! Authority reads and the Reserve / Commit / Abort / Preserve / Delete operations with capacity and placement (spec 21 §3.3, §4, §6.1).

use super::prelude::*;

/// Reading a missing authority row returns Missing with StoreNow and creates nothing (no
/// counter, no version); an authority row never expires, even after its owner's lease did.
pub(super) async fn missing_read_creates_no_generation_and_records_never_expire(h: &Harness) {
    let a = h.host_with(h.store.clone(), short_lease(), None, 1).await;
    let before = h.snapshot().await;
    for _ in 0..3 {
        match a
            .rt
            .authority()
            .read(ObjectKind::Actor, &id("nobody"))
            .await
            .expect("read")
        {
            AuthorityRead::Missing { store_now } => assert!(store_now.as_millis() > 0),
            other => panic!("expected Missing, got {other:?}"),
        }
    }
    assert_eq!(h.snapshot().await, before, "a read created something");
    assert_eq!(
        counter(h.store.as_ref(), GenerationKind::Object).await,
        None
    );
    assert_eq!(
        counter(h.store.as_ref(), GenerationKind::AuthorityOwner).await,
        None
    );

    let x = active_actor(&a, "x").await;
    let key = keys::authority(ObjectKind::Actor, &id("x")).expect("key");
    // The lease row expires after its TTL; the authority row stays, with no expiry.
    h.advance_store_time(Duration::from_millis(1_500)).await;
    let lease_key = lease::lease_key(a.rt.owner_id()).expect("key");
    assert!(h.store.read(&lease_key).await.expect("read").is_missing());
    match h.store.read(&key).await.expect("read") {
        ReadResult::Found {
            expires_at,
            version,
            ..
        } => {
            assert_eq!(expires_at, None);
            assert_eq!(&version, x.version());
        }
        ReadResult::Missing { .. } => panic!("the authority row expired"),
    }
}

/// A location looked up by global id is the same from hosts of different meshes, and a second
/// Reserve of the id from another mesh sees the existing record.
pub(super) async fn lookup_by_global_id_ignores_mesh_name(h: &Harness) {
    let east = host(h, "east", 1).await;
    let west = host(h, "west", 1).await;
    let x = active_actor(&east, "user:42").await;
    for reader in [&east, &west] {
        match reader
            .rt
            .authority()
            .read(ObjectKind::Actor, &id("user:42"))
            .await
            .expect("read")
        {
            AuthorityRead::Found { handle, .. } => assert_eq!(handle, x),
            other => panic!("expected Found, got {other:?}"),
        }
    }
    let again = west
        .rt
        .authority()
        .reserve(request(ObjectKind::Actor, "user:42", "chat", west.target()))
        .await
        .expect("reserve");
    assert_eq!(
        again,
        Outcome::Conflict(Conflict::Record { current: Some(x) })
    );
    // The same id is another key as a Spot.
    assert!(matches!(
        west.rt
            .authority()
            .read(ObjectKind::UserSpot, &id("user:42"))
            .await
            .expect("read"),
        AuthorityRead::Missing { .. }
    ));
}

/// 64 hosts Reserve the same id at once: exactly one wins; every other one gets a Conflict
/// carrying the winner's record, and only the winner's node holds reserved capacity.
pub(super) async fn concurrent_reserves_of_one_id_have_exactly_one_winner(h: &Harness) {
    let mut hosts = Vec::new();
    for i in 0..64u8 {
        hosts.push(Arc::new(host(h, "main", i + 1).await));
    }
    let mut tasks = Vec::new();
    for hst in &hosts {
        let hst = hst.clone();
        tasks.push(tokio::spawn(async move {
            hst.rt
                .authority()
                .reserve(request(ObjectKind::Actor, "hot", "chat", hst.target()))
                .await
                .expect("reserve")
        }));
    }
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.expect("task"));
    }
    let winners: Vec<&AuthorityHandle> = outcomes
        .iter()
        .filter_map(|o| match o {
            Outcome::Applied(h) => Some(h),
            Outcome::Conflict(_) => None,
        })
        .collect();
    assert_eq!(winners.len(), 1, "exactly one Reserve wins");
    let winner = winners[0].clone();
    for o in &outcomes {
        if let Outcome::Conflict(c) = o {
            assert_eq!(
                c,
                &Conflict::Record {
                    current: Some(winner.clone())
                }
            );
        }
    }
    let mut reserved = 0;
    for hst in &hosts {
        reserved += capacity(&hosts[0], hst).await.actors.reserved;
    }
    assert_eq!(reserved, 1);
}

/// Preserve, NewOwner, Delete and securing target capacity on a Reserved record, and Commit or
/// Abort on an Active one, are Conflicts decided before any Store request: nothing changes.
pub(super) async fn reserved_record_refuses_preserve_new_owner_and_delete(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    let r = reserve(&a, ObjectKind::Actor, "r", "chat", &a).await;
    let y = active_actor(&a, "y").await;
    let res =
        a.rt.authority()
            .secure_target(&y, b.target(), None)
            .await
            .expect("secure")
            .applied()
            .expect("secured");
    let before = h.snapshot().await;
    let reserved = Conflict::State {
        state: AllocationState::Reserved,
    };
    let active = Conflict::State {
        state: AllocationState::Active,
    };
    let auth = a.rt.authority();
    assert_eq!(
        auth.preserve(&r, vec![9]).await.expect("preserve"),
        Outcome::Conflict(reserved.clone())
    );
    assert_eq!(
        auth.delete(&r).await.expect("delete"),
        Outcome::Conflict(reserved.clone())
    );
    assert_eq!(
        auth.secure_target(&r, b.target(), None)
            .await
            .expect("secure"),
        Outcome::Conflict(reserved.clone())
    );
    assert_eq!(
        b.rt.authority()
            .new_owner(&r, &res)
            .await
            .expect("new owner"),
        Outcome::Conflict(reserved)
    );
    assert_eq!(
        auth.commit(&y, None).await.expect("commit"),
        Outcome::Conflict(active.clone())
    );
    assert_eq!(
        auth.abort(&y).await.expect("abort"),
        Outcome::Conflict(active)
    );
    assert_eq!(h.snapshot().await, before);
}

/// Reserve reserves the bundle, Commit turns it into capacity in use, Abort returns it with the
/// record and index gone, Delete returns the capacity in use with the record and index gone;
/// a User Spot moves the spot and its (kind, type) slots.
pub(super) async fn commit_abort_and_delete_move_capacity_with_the_record(h: &Harness) {
    let a = host(h, "main", 1).await;
    let auth = a.rt.authority();
    let x = reserve(&a, ObjectKind::Actor, "x", "chat", &a).await;
    assert_eq!(capacity(&a, &a).await.actors.reserved, 1);
    let x = auth
        .commit(&x, Some(b"ready".to_vec()))
        .await
        .expect("commit")
        .applied()
        .expect("applied");
    assert_eq!(x.state(), AllocationState::Active);
    assert_eq!(x.record().payload, b"ready");
    let row = capacity(&a, &a).await;
    assert_eq!((row.actors.active, row.actors.reserved), (1, 0));

    let s = reserve(&a, ObjectKind::UserSpot, "room", "game", &a).await;
    let row = capacity(&a, &a).await;
    assert_eq!(row.spots.reserved, 1);
    assert_eq!(
        row.spot_types
            .get(&(ObjectKind::UserSpot, ty("game")))
            .map(|u| u.reserved),
        Some(1)
    );
    let index = keys::location_index(ObjectKind::UserSpot, &ty("game"), &id("room")).expect("key");
    assert!(!h.store.read(&index).await.expect("read").is_missing());
    assert_eq!(auth.abort(&s).await.expect("abort"), Outcome::Applied(()));
    assert!(h.store.read(&index).await.expect("read").is_missing());
    assert!(matches!(
        auth.read(ObjectKind::UserSpot, &id("room"))
            .await
            .expect("read"),
        AuthorityRead::Missing { .. }
    ));
    let row = capacity(&a, &a).await;
    assert_eq!(row.spots.reserved, 0);
    assert!(row.spot_types.is_empty());

    assert_eq!(auth.delete(&x).await.expect("delete"), Outcome::Applied(()));
    assert_eq!(capacity(&a, &a).await, NodeUsage::default());
    let index = keys::location_index(ObjectKind::Actor, &ty("chat"), &id("x")).expect("key");
    assert!(h.store.read(&index).await.expect("read").is_missing());
    // A stale handle conflicts and changes nothing.
    let before = h.snapshot().await;
    assert_eq!(
        auth.preserve(&x, vec![]).await.expect("preserve"),
        Outcome::Conflict(Conflict::Record { current: None })
    );
    assert_eq!(h.snapshot().await, before);
}

/// With a limit, active + reserved slots count: past it Reserve is CapacityExceeded and changes
/// nothing; the per-type limit applies to its type only.
pub(super) async fn reserve_past_the_limit_is_capacity_exceeded_and_changes_nothing(h: &Harness) {
    let mut a = host(h, "main", 1).await;
    a.desc.capacity.actors.limit = 2;
    a.desc.object_capabilities = vec![
        capability(ObjectKind::Actor, "chat", 0),
        capability(ObjectKind::UserSpot, "game", 1),
        capability(ObjectKind::UserSpot, "lobby", 0),
    ];
    active_actor(&a, "x").await;
    reserve(&a, ObjectKind::Actor, "y", "chat", &a).await;
    reserve(&a, ObjectKind::UserSpot, "g1", "game", &a).await;
    let before = h.snapshot().await;
    for (kind, object, t) in [
        (ObjectKind::Actor, "z", "chat"),
        (ObjectKind::UserSpot, "g2", "game"),
    ] {
        let e =
            a.rt.authority()
                .reserve(request(kind, object, t, a.target()))
                .await
                .expect_err("full");
        assert!(matches!(e, LocationError::CapacityExceeded), "{e}");
        assert_eq!(h.snapshot().await, before);
    }
    reserve(&a, ObjectKind::UserSpot, "l1", "lobby", &a).await;
}

/// Preserve and Delete verify the owner's lease in the Store itself: with the lease row gone
/// (even while the local gate is still open) they conflict and change nothing. Preserve keeps
/// owner, generations and capacity.
pub(super) async fn preserve_and_delete_need_a_valid_owner_lease(h: &Harness) {
    let a = host(h, "main", 1).await;
    let x = active_actor(&a, "x").await;
    let p =
        a.rt.authority()
            .preserve(&x, b"v2".to_vec())
            .await
            .expect("preserve")
            .applied()
            .expect("preserved");
    assert_eq!(p.object_generation(), x.object_generation());
    assert_eq!(
        p.authority_owner_generation(),
        x.authority_owner_generation()
    );
    assert_eq!(p.owner(), x.owner());
    assert_ne!(p.version(), x.version());
    assert_eq!(capacity(&a, &a).await.actors.active, 1);

    force_delete(
        h.store.as_ref(),
        &lease::lease_key(a.rt.owner_id()).expect("key"),
    )
    .await;
    let before = h.snapshot().await;
    let stale = Conflict::LeaseStale {
        run: a.run(),
        target: false,
    };
    assert_eq!(
        a.rt.authority()
            .preserve(&p, b"v3".to_vec())
            .await
            .expect("preserve"),
        Outcome::Conflict(stale.clone())
    );
    assert_eq!(
        a.rt.authority().delete(&p).await.expect("delete"),
        Outcome::Conflict(stale)
    );
    assert_eq!(h.snapshot().await, before);
}

/// Placement only chooses a serving node with a valid lease, the type registered, weight > 0
/// and room; with none left it is CapacityExceeded and nothing changes.
pub(super) async fn placement_chooses_only_eligible_nodes(h: &Harness) {
    let mut full = host(h, "main", 1).await;
    full.desc.capacity.actors.limit = 1;
    let mut zero = host(h, "main", 2).await;
    zero.desc.placement_weight = 0;
    let mut preparing = host(h, "main", 3).await;
    preparing.desc.state = HostState::Preparing;
    let mut untyped = host(h, "main", 4).await;
    untyped.desc.object_capabilities = vec![capability(ObjectKind::UserSpot, "game", 0)];
    let gone = host(h, "main", 5).await;
    for x in [&full, &zero, &preparing, &untyped, &gone] {
        publish(x).await;
    }
    gone.rt.lease().release().await.expect("release");
    let d = full.rt.discovery(&full.desc.mesh_name).expect("d");
    d.refresh().await.expect("refresh");
    let placed = full
        .rt
        .authority()
        .place_and_reserve(
            d.candidates(full.rt.authority()).await.expect("candidates"),
            ObjectKind::Actor,
            id("p1"),
            ty("chat"),
            vec![],
            None,
        )
        .await
        .expect("placed")
        .applied()
        .expect("applied");
    assert_eq!(placed.node(), full.node());
    let before = h.snapshot().await;
    let e = full
        .rt
        .authority()
        .place_and_reserve(
            d.candidates(full.rt.authority()).await.expect("candidates"),
            ObjectKind::Actor,
            id("p2"),
            ty("chat"),
            vec![],
            None,
        )
        .await
        .expect_err("no room");
    assert!(matches!(e, LocationError::CapacityExceeded));
    assert_eq!(h.snapshot().await, before);
}

/// Weight 0 removes a node from new placement only: its Active objects stay and its existing
/// reservations still commit.
pub(super) async fn weight_zero_keeps_existing_objects_and_reservations(h: &Harness) {
    let a = host(h, "main", 1).await;
    let publisher = a.rt.descriptor_publisher(a.desc.clone()).expect("p");
    publisher.publish(a.desc.clone()).await.expect("publish");
    let x = active_actor(&a, "x").await;
    let y = reserve(&a, ObjectKind::Actor, "y", "chat", &a).await;
    let mut drained = a.desc.clone();
    drained.placement_weight = 0;
    publisher.publish(drained).await.expect("publish");
    let d = a.rt.discovery(&a.desc.mesh_name).expect("d");
    d.refresh().await.expect("refresh");
    let e =
        a.rt.authority()
            .place_and_reserve(
                d.candidates(a.rt.authority()).await.expect("c"),
                ObjectKind::Actor,
                id("z"),
                ty("chat"),
                vec![],
                None,
            )
            .await
            .expect_err("no candidate");
    assert!(matches!(e, LocationError::CapacityExceeded));
    assert!(matches!(
        a.rt.authority().read(ObjectKind::Actor, &id("x")).await.expect("read"),
        AuthorityRead::Found { handle, .. } if handle == x
    ));
    assert!(
        a.rt.authority()
            .commit(&y, None)
            .await
            .expect("commit")
            .is_applied()
    );
    assert_eq!(capacity(&a, &a).await.actors.active, 2);
}

/// The capacity invariant under random concurrent operations (see `capacity_model`).
pub(super) async fn capacity_counters_equal_allocations_after_random_operations(h: &Harness) {
    super::capacity_model::run_on(h).await;
}
