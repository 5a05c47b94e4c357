//! The behaviour tests, each over one [`Harness`] (see `mod.rs` for the backends).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use zlink_codec::Generation;
use zlink_codec::records::{AllocationState, HostState, MeshNodeRecord, ObjectKind};
use zlink_store_spi::{
    DynLocationStore, LocationStore, PageLimit, ReadResult, ScanCursor, StoreErrorKind,
};

use super::support::{
    Harness, Host, Mode, TestStore, capability, descriptor, force_delete, force_put, host,
    short_lease, snapshot_of, ty,
};
use crate::location::generation::{COUNTER_EXHAUSTED, MAX_ISSUED};
use crate::location::{
    AdmissionOp, AdmissionRefused, AuthorityHandle, AuthorityRead, ConfigError, Conflict,
    DiscoveryStatus, GenerationKind, LocationError, LocationOptions, LocationRuntime,
    ManualMonotonic, MonotonicClock, NodeUsage, ObjectId, Outcome, PublishOutcome, RenewOutcome,
    ReserveRequest, TargetNode, keys, lease,
};

fn id(s: &str) -> ObjectId {
    ObjectId::new(s).expect("object id")
}

fn request(
    kind: ObjectKind,
    object: &str,
    stable_type: &str,
    target: TargetNode,
) -> ReserveRequest {
    ReserveRequest {
        kind,
        id: id(object),
        stable_type: ty(stable_type),
        target,
        payload: b"internal".to_vec(),
        pending_creation: None,
    }
}

/// Reserve on `target` by `by`, expecting it applied.
async fn reserve(
    by: &Host,
    kind: ObjectKind,
    object: &str,
    stable_type: &str,
    target: &Host,
) -> AuthorityHandle {
    by.rt
        .authority()
        .reserve(request(kind, object, stable_type, target.target()))
        .await
        .expect("reserve")
        .applied()
        .expect("reserve applied")
}

/// An active actor `object` owned by `host`.
async fn active_actor(host: &Host, object: &str) -> AuthorityHandle {
    let h = reserve(host, ObjectKind::Actor, object, "chat", host).await;
    host.rt
        .authority()
        .commit(&h, None)
        .await
        .expect("commit")
        .applied()
        .expect("commit applied")
}

async fn counter(store: &dyn DynLocationStore, kind: GenerationKind) -> Option<String> {
    store
        .read(&kind.counter_key())
        .await
        .expect("read counter")
        .bytes()
        .map(|b| String::from_utf8(b.to_vec()).expect("utf8"))
}

/// The active/reserved split of `node_of`'s slots, derived from the records; also checks that
/// the node's allocation row equals their sum.
async fn capacity(host: &Host, node_of: &Host) -> NodeUsage {
    let auth = host.rt.authority();
    let usage = auth.node_usage(&node_of.node()).await.expect("usage");
    let row = auth
        .node_capacity(&node_of.node())
        .await
        .expect("allocation row");
    assert_eq!(
        row,
        usage.allocated(),
        "the allocation row is the sum of the records"
    );
    usage
}

fn is_admission(e: &LocationError) -> bool {
    matches!(
        e,
        LocationError::Admission(AdmissionRefused::DeadlinePassed { .. })
    )
}

// ---------------------------------------------------------------------------------------------
// Spec 21 §12 "Generation And Owner Lease".

/// ObjectGeneration, AuthorityOwnerGeneration and OwnerLeaseGeneration come from their own
/// counters only and never swap: seeded far apart, each value lands in its own range; NewOwner
/// keeps the ObjectGeneration and takes the next AuthorityOwnerGeneration; a lease takeover
/// changes only the OwnerLeaseGeneration.
pub(super) async fn generations_never_swap(h: &Harness) {
    let store = h.store.as_ref();
    force_put(store, &GenerationKind::Object.counter_key(), b"1000").await;
    force_put(
        store,
        &GenerationKind::AuthorityOwner.counter_key(),
        b"2000",
    )
    .await;
    force_put(store, &GenerationKind::OwnerLease.counter_key(), b"3000").await;
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    assert_eq!(a.run().lease_generation.get(), 3000);
    assert_eq!(b.run().lease_generation.get(), 3001);

    let x = active_actor(&a, "x").await;
    let y = active_actor(&a, "y").await;
    assert_eq!(
        (
            x.object_generation().get(),
            x.authority_owner_generation().get()
        ),
        (1000, 2000)
    );
    assert_eq!(
        (
            y.object_generation().get(),
            y.authority_owner_generation().get()
        ),
        (1001, 2001)
    );
    assert_eq!(x.record().owner_lease_generation.get(), 3000);

    let res =
        a.rt.authority()
            .secure_target(&x, b.target(), None)
            .await
            .expect("secure")
            .applied()
            .expect("secured");
    let moved =
        b.rt.authority()
            .new_owner(&x, &res)
            .await
            .expect("new owner")
            .applied()
            .expect("moved");
    assert_eq!(moved.object_generation(), x.object_generation());
    assert_eq!(moved.authority_owner_generation().get(), 2002);
    assert_eq!(moved.owner(), &b.run());
    assert_eq!(moved.record().owner_lease_generation.get(), 3001);

    // A takeover issues only an OwnerLeaseGeneration.
    a.rt.lease().release().await.expect("release");
    let again = a.rt.lease().acquire().await.expect("takeover");
    assert_eq!(again.lease_generation.get(), 3002);
    assert_eq!(
        counter(store, GenerationKind::Object).await.as_deref(),
        Some("1002")
    );
    assert_eq!(
        counter(store, GenerationKind::AuthorityOwner)
            .await
            .as_deref(),
        Some("2003")
    );
    assert_eq!(
        counter(store, GenerationKind::OwnerLease).await.as_deref(),
        Some("3003")
    );
}

/// A counter holding 2^63-1 is GenerationExhausted for every issuer (Reserve's ObjectGeneration
/// and AuthorityOwnerGeneration, NewOwner's AuthorityOwnerGeneration, acquiring a lease), the
/// Store does not change, and repeating gives the same result. 2^63-2 is still issued once.
pub(super) async fn generation_exhausted_changes_nothing_and_repeats(h: &Harness) {
    let store = h.store.as_ref();
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    let x = active_actor(&a, "x").await;
    let sentinel = COUNTER_EXHAUSTED.to_string();

    for kind in [GenerationKind::Object, GenerationKind::AuthorityOwner] {
        let saved = counter(store, kind).await.expect("counter row");
        force_put(store, &kind.counter_key(), sentinel.as_bytes()).await;
        let before = h.snapshot().await;
        for _ in 0..3 {
            let e =
                a.rt.authority()
                    .reserve(request(ObjectKind::Actor, "y", "chat", a.target()))
                    .await
                    .expect_err("exhausted");
            assert!(
                matches!(e, LocationError::GenerationExhausted { kind: k } if k == kind),
                "{e}"
            );
            assert_eq!(
                h.snapshot().await,
                before,
                "GenerationExhausted changed the Store"
            );
        }
        force_put(store, &kind.counter_key(), saved.as_bytes()).await;
    }

    // NewOwner needs an AuthorityOwnerGeneration.
    let res =
        a.rt.authority()
            .secure_target(&x, b.target(), None)
            .await
            .expect("secure")
            .applied()
            .expect("secured");
    force_put(
        store,
        &GenerationKind::AuthorityOwner.counter_key(),
        sentinel.as_bytes(),
    )
    .await;
    let before = h.snapshot().await;
    for _ in 0..3 {
        let e =
            b.rt.authority()
                .new_owner(&x, &res)
                .await
                .expect_err("exhausted");
        assert!(matches!(
            e,
            LocationError::GenerationExhausted {
                kind: GenerationKind::AuthorityOwner
            }
        ));
        assert_eq!(h.snapshot().await, before);
    }

    // The last issuable value is 2^63-2, then the row holds the sentinel.
    force_put(store, &GenerationKind::AuthorityOwner.counter_key(), b"5").await;
    force_put(
        store,
        &GenerationKind::Object.counter_key(),
        MAX_ISSUED.to_string().as_bytes(),
    )
    .await;
    let last = reserve(&a, ObjectKind::Actor, "last", "chat", &a).await;
    assert_eq!(last.object_generation().get(), MAX_ISSUED);
    assert_eq!(
        counter(store, GenerationKind::Object).await,
        Some(sentinel.clone())
    );

    // Acquiring an owner lease.
    force_put(
        store,
        &GenerationKind::OwnerLease.counter_key(),
        sentinel.as_bytes(),
    )
    .await;
    let before = h.snapshot().await;
    for _ in 0..3 {
        let e = LocationRuntime::builder(h.store.clone())
            .renew_loop(false)
            .start()
            .await
            .expect_err("exhausted");
        assert!(matches!(
            e,
            LocationError::GenerationExhausted {
                kind: GenerationKind::OwnerLease
            }
        ));
        assert_eq!(h.snapshot().await, before);
    }
}

/// `renewInterval + renewTimeout < ttl - fencingMargin` and positive values are checked at
/// startup, before any Store request: a violation is a startup error that wrote nothing; the
/// boundary itself starts.
pub(super) async fn lease_timing_violation_fails_startup(h: &Harness) {
    let bad = [
        LocationOptions::default().owner_lease_fencing_margin(Duration::from_millis(7_000)),
        LocationOptions::default().owner_lease_ttl(Duration::from_secs(8)),
        LocationOptions::default().owner_lease_renew_timeout(Duration::ZERO),
        LocationOptions::default()
            .route_cache_max_age(Duration::from_millis(25_001))
            .message_follow_duration(Duration::from_secs(30)),
    ];
    for options in bad {
        let e = LocationRuntime::builder(h.store.clone())
            .options(options)
            .renew_loop(false)
            .start()
            .await
            .expect_err("startup error");
        assert!(matches!(e, LocationError::Config(_)), "{e}");
    }
    assert!(
        h.snapshot().await.is_empty(),
        "a refused startup wrote to the Store"
    );
    let at_bound =
        LocationOptions::default().owner_lease_fencing_margin(Duration::from_millis(6_999));
    let rt = LocationRuntime::builder(h.store.clone())
        .options(at_bound)
        .renew_loop(false)
        .start()
        .await
        .expect("the boundary starts");
    assert!(rt.host_run().is_some());
}

/// Once the local admission deadline passes, descriptor publishing, object message and timer
/// starts, factory results, capacity reservation and relocation changes are all refused
/// together, and nothing reaches the Store, although the lease row is still valid there.
pub(super) async fn expired_admission_deadline_blocks_all_new_work(h: &Harness) {
    let clock = ManualMonotonic::new();
    let rt = h
        .runtime_with(
            h.store.clone(),
            LocationOptions::default(),
            Some(clock.clone()),
        )
        .await;
    let a = Host {
        rt,
        desc: descriptor("main", &[1]),
    };
    let b = host(h, "main", 2).await;
    let publisher =
        a.rt.descriptor_publisher(a.desc.clone())
            .expect("publisher");
    publisher.publish(a.desc.clone()).await.expect("publish");
    let reserved = reserve(&a, ObjectKind::Actor, "r", "chat", &a).await;
    let x = active_actor(&a, "x").await;
    let res =
        a.rt.authority()
            .secure_target(&x, b.target(), None)
            .await
            .expect("secure")
            .applied()
            .expect("secured");

    // Default timings: deadline = t0 + 15 s - 5 s.
    clock.advance(Duration::from_secs(10));
    let before = h.snapshot().await;
    for op in AdmissionOp::ALL {
        assert!(matches!(
            a.rt.admit(op),
            Err(AdmissionRefused::DeadlinePassed { .. })
        ));
    }
    let auth = a.rt.authority();
    assert!(is_admission(
        &publisher
            .publish(a.desc.clone())
            .await
            .expect_err("publish")
    ));
    assert!(is_admission(
        &publisher.republish().await.expect_err("republish")
    ));
    assert!(is_admission(
        &auth
            .reserve(request(ObjectKind::Actor, "y", "chat", a.target()))
            .await
            .expect_err("reserve")
    ));
    assert!(is_admission(
        &auth.commit(&reserved, None).await.expect_err("commit")
    ));
    assert!(is_admission(
        &auth.abort(&reserved).await.expect_err("abort")
    ));
    assert!(is_admission(
        &auth.preserve(&x, vec![1]).await.expect_err("preserve")
    ));
    assert!(is_admission(&auth.delete(&x).await.expect_err("delete")));
    assert!(is_admission(
        &auth
            .secure_target(&x, b.target(), None)
            .await
            .expect_err("secure")
    ));
    assert!(is_admission(
        &auth.release_target(&res).await.expect_err("release")
    ));
    assert_eq!(h.snapshot().await, before, "refused work reached the Store");
    // The lease row itself is still valid by the Store's clock.
    let (now, expires) =
        a.rt.lease()
            .store_expiry()
            .await
            .expect("read")
            .expect("lease row");
    assert!(expires > now);
}

// ---------------------------------------------------------------------------------------------
// Spec 21 §12 "Descriptor And Location Lookup".

/// A descriptor with more than 1,024 capabilities or over 1 MiB fails startup entirely: no
/// lease, no descriptor, nothing partial; 1,024 entries is accepted.
pub(super) async fn oversized_descriptor_fails_startup_without_publishing(h: &Harness) {
    let ok = descriptor("main", &[1]);
    let mut too_many = descriptor("main", &[2]);
    too_many.object_capabilities = (0..1025)
        .map(|i| capability(ObjectKind::Actor, &format!("t{i}"), 0))
        .collect();
    let mut too_big = descriptor("main", &[3]);
    too_big.endpoint = "e".repeat(1024 * 1024);
    for set in [vec![too_many.clone()], vec![ok.clone(), too_big.clone()]] {
        let e = LocationRuntime::builder(h.store.clone())
            .renew_loop(false)
            .start_checking(&set)
            .await
            .expect_err("startup fails");
        assert!(
            matches!(e, LocationError::Config(ConfigError::Descriptor(_))),
            "{e}"
        );
    }
    assert!(
        h.snapshot().await.is_empty(),
        "a refused startup published something"
    );

    let mut at_bound = descriptor("main", &[4]);
    at_bound.object_capabilities = (0..1024)
        .map(|i| capability(ObjectKind::Actor, &format!("t{i}"), 0))
        .collect();
    let rt = LocationRuntime::builder(h.store.clone())
        .renew_loop(false)
        .start_checking(&[at_bound.clone(), ok])
        .await
        .expect("1,024 entries start");
    let publisher = rt
        .descriptor_publisher(at_bound.clone())
        .expect("publisher");
    assert!(matches!(
        publisher.publish(at_bound).await.expect("publish"),
        PublishOutcome::Published { .. }
    ));
    // A publisher is never built for an oversized descriptor either.
    assert!(rt.descriptor_publisher(too_big).is_err());
    assert!(rt.descriptor_publisher(too_many).is_err());
}

/// Reading a missing authority row returns Missing with StoreNow and creates nothing (no
/// counter, no version); an authority row never expires, even after its owner's lease did.
pub(super) async fn missing_read_creates_no_generation_and_records_never_expire(h: &Harness) {
    let rt = h.runtime_with(h.store.clone(), short_lease(), None).await;
    let a = Host {
        rt,
        desc: descriptor("main", &[1]),
    };
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

/// A list read pages at most 1,000 entries and 4 MiB per page with cursors of at most 4,096
/// bytes, and every page comes from the snapshot fixed by the first page (a descriptor changed
/// or deleted mid-read without moving the change number is seen as it was at the first page).
pub(super) async fn discovery_pages_are_bounded_and_same_point_in_time(h: &Harness) {
    let a = host(h, "main", 1).await;
    // 1,005 descriptors of one host: two pages of at most 1,000.
    let mut publishers = Vec::new();
    for i in 0..1005u32 {
        let d = descriptor("main", &i.to_be_bytes());
        let p = a.rt.descriptor_publisher(d.clone()).expect("publisher");
        p.publish(d).await.expect("publish");
        publishers.push(p);
    }
    let discovery = a.rt.discovery(&a.desc.mesh_name).expect("discovery");
    let view = discovery.refresh().await.expect("refresh");
    assert_eq!(view.nodes.len(), 1005);
    assert!(view.pages.len() >= 2);
    for page in &view.pages {
        assert!((1..=1000).contains(&page.items), "{page:?}");
        assert!(page.encoded_len <= 4 * 1024 * 1024);
        assert!(page.cursor_len.is_none_or(|l| l <= ScanCursor::MAX_LEN));
    }

    // Five descriptors of about 0.9 MiB: a page never passes 4 MiB.
    for i in 0..5u8 {
        let mut d = descriptor("big", &[i]);
        d.endpoint = "e".repeat(900 * 1024);
        a.rt.descriptor_publisher(d.clone())
            .expect("publisher")
            .publish(d)
            .await
            .expect("publish");
    }
    let big =
        a.rt.discovery(&zlink_codec::MeshName::new("big").expect("mesh"))
            .expect("discovery");
    let view = big.refresh().await.expect("refresh");
    assert_eq!(view.nodes.len(), 5);
    assert!(view.pages.len() >= 2);
    for page in &view.pages {
        assert!(page.encoded_len <= 4 * 1024 * 1024, "{page:?}");
    }

    // Same point in time: change one descriptor and delete another directly (the change
    // number does not move) after the first page.
    let small =
        a.rt.discovery(&a.desc.mesh_name)
            .expect("discovery")
            .with_page_limit(PageLimit::new(100).expect("limit"));
    let store = h.store.clone();
    let changed = keys::store_key(&zlink_codec::LogicalKey::mesh_node(
        &a.desc.mesh_name,
        &zlink_codec::RoutingId::new(999u32.to_be_bytes().to_vec()).expect("rid"),
    ))
    .expect("key");
    let deleted = keys::store_key(&zlink_codec::LogicalKey::mesh_node(
        &a.desc.mesh_name,
        &zlink_codec::RoutingId::new(1000u32.to_be_bytes().to_vec()).expect("rid"),
    ))
    .expect("key");
    let original = store
        .read(&changed)
        .await
        .expect("read")
        .bytes()
        .cloned()
        .expect("found");
    let fired = Arc::new(AtomicBool::new(false));
    let hook_fired = fired.clone();
    let hook = move |page: usize| {
        let store = store.clone();
        let changed = changed.clone();
        let deleted = deleted.clone();
        let fired = hook_fired.clone();
        Box::pin(async move {
            if page == 1 && !fired.swap(true, Ordering::SeqCst) {
                let mut r = MeshNodeRecord::decode(
                    &store
                        .read(&changed)
                        .await
                        .expect("read")
                        .bytes()
                        .cloned()
                        .expect("found"),
                )
                .expect("decode");
                r.descriptor.endpoint = "tcp://changed:1".into();
                force_put(store.as_ref(), &changed, &r.encode().expect("encode")).await;
                force_delete(store.as_ref(), &deleted).await;
            }
        }) as std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
    };
    let view = small.refresh_with(Some(&hook)).await.expect("refresh");
    assert!(fired.load(Ordering::SeqCst));
    assert_eq!(view.attempts, 1);
    assert!(view.pages.len() > 10);
    assert_eq!(
        view.nodes.len(),
        1005,
        "the deleted descriptor is still in the snapshot"
    );
    let seen = view
        .nodes
        .iter()
        .find(|n| n.record.descriptor.routing_id.as_bytes() == 999u32.to_be_bytes())
        .expect("present");
    assert_eq!(
        seen.record,
        MeshNodeRecord::decode(&original).expect("decode")
    );
}

// ---------------------------------------------------------------------------------------------
// Issue 6.

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

/// With an injected monotonic clock and 2 s of write latency: the deadline counts from before
/// the request (latency shortens it), new work is admitted until it and refused from it on,
/// while the Store still holds the lease (before its TTL). A failing renew does not move it.
pub(super) async fn lease_stall_refuses_new_work_after_deadline_before_ttl(h: &Harness) {
    let clock = ManualMonotonic::new();
    let slow = TestStore::new(h.store.clone());
    slow.set_latency(Some((clock.clone(), Duration::from_secs(2))));
    let rt = h
        .runtime_with(
            slow.clone(),
            LocationOptions::default(),
            Some(clock.clone()),
        )
        .await;
    slow.set_latency(None);
    assert_eq!(clock.now(), Duration::from_secs(2));
    assert_eq!(rt.gate().deadline(), Some(Duration::from_secs(10)));
    let a = Host {
        rt,
        desc: descriptor("main", &[1]),
    };
    clock.advance(Duration::from_millis(7_999));
    assert!(a.rt.admit(AdmissionOp::ObjectMessageStart).is_ok());
    let x = reserve(&a, ObjectKind::Actor, "x", "chat", &a).await;

    // The Store stops answering: renew fails and the deadline stays.
    slow.set_mode(Mode::Down);
    assert!(a.rt.lease().renew().await.is_err());
    assert_eq!(a.rt.gate().deadline(), Some(Duration::from_secs(10)));
    slow.set_mode(Mode::Normal);

    clock.advance(Duration::from_millis(1));
    for op in AdmissionOp::ALL {
        assert!(a.rt.admit(op).is_err(), "{op} admitted after the deadline");
    }
    let before = h.snapshot().await;
    assert!(is_admission(
        &a.rt.authority().commit(&x, None).await.expect_err("commit")
    ));
    assert!(is_admission(
        &a.rt
            .authority()
            .reserve(request(ObjectKind::Actor, "y", "chat", a.target()))
            .await
            .expect_err("reserve")
    ));
    assert_eq!(h.snapshot().await, before);
    let (now, expires) =
        a.rt.lease()
            .store_expiry()
            .await
            .expect("read")
            .expect("lease row");
    assert!(
        expires > now,
        "the Store's lease is still valid: refused before the TTL"
    );

    // A successful renew refreshes the deadline from its own t0.
    let renewed = a.rt.lease().renew().await.expect("renew");
    assert_eq!(
        renewed,
        RenewOutcome::Renewed {
            deadline: clock.now() + Duration::from_secs(10)
        }
    );
    assert!(a.rt.admit(AdmissionOp::TimerStart).is_ok());
}

/// Acquire issues a new LeaseGeneration (a second host gets a new OwnerId and a later one);
/// renew and release keep it and do not move the owner counter.
pub(super) async fn acquire_issues_a_new_generation_renew_and_release_keep_it(h: &Harness) {
    let a = h.runtime().await;
    let b = h.runtime().await;
    let ga = a.host_run().expect("run");
    let gb = b.host_run().expect("run");
    assert_ne!(ga.owner_id, gb.owner_id);
    assert!(gb.lease_generation > ga.lease_generation);
    let counter_before = counter(h.store.as_ref(), GenerationKind::OwnerLease).await;
    for _ in 0..3 {
        assert!(matches!(
            a.lease().renew().await.expect("renew"),
            RenewOutcome::Renewed { .. }
        ));
        assert_eq!(a.host_run(), Some(ga.clone()));
    }
    let key = lease::lease_key(&ga.owner_id).expect("key");
    let stored = zlink_codec::OwnerLeaseRecord::decode(
        h.store
            .read(&key)
            .await
            .expect("read")
            .bytes()
            .expect("row"),
    )
    .expect("decode");
    assert_eq!(stored.lease_generation.get(), ga.lease_generation.get());
    a.lease().release().await.expect("release");
    assert!(h.store.read(&key).await.expect("read").is_missing());
    assert!(matches!(
        a.admit(AdmissionOp::TimerStart),
        Err(AdmissionRefused::NoLease { .. })
    ));
    assert_eq!(
        counter(h.store.as_ref(), GenerationKind::OwnerLease).await,
        counter_before
    );
}

/// The renew loop renews every renew interval (bounded by the renew timeout): across more than
/// a TTL the lease row stays, the generation is kept and the admission deadline moves forward.
pub(super) async fn renew_loop_keeps_the_lease_and_refreshes_the_deadline(h: &Harness) {
    // 200 + 500 < 3000 - 1000: generous timeouts, so a loaded machine does not lose the lease.
    let options = LocationOptions::default()
        .owner_lease_renew_interval(Duration::from_millis(200))
        .owner_lease_renew_timeout(Duration::from_millis(500))
        .owner_lease_ttl(Duration::from_millis(3_000))
        .owner_lease_fencing_margin(Duration::from_millis(1_000));
    let rt = LocationRuntime::builder(h.store.clone())
        .options(options)
        .start()
        .await
        .expect("runtime starts");
    let run = rt.host_run().expect("run");
    let first = rt.gate().deadline().expect("deadline");
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert_eq!(rt.host_run(), Some(run));
    assert!(rt.gate().deadline().expect("deadline") > first);
    assert!(rt.admit(AdmissionOp::ObjectMessageStart).is_ok());
    let key = lease::lease_key(rt.owner_id()).expect("key");
    assert!(!h.store.read(&key).await.expect("read").is_missing());
}

/// Once the lease row has expired, renew reports it lost and closes the gate; acquiring again
/// takes over under a new LeaseGeneration for the same OwnerId.
pub(super) async fn takeover_of_an_expired_lease_issues_a_new_generation(h: &Harness) {
    let rt = h.runtime_with(h.store.clone(), short_lease(), None).await;
    let first = rt.host_run().expect("run");
    h.advance_store_time(Duration::from_millis(1_500)).await;
    assert_eq!(rt.lease().renew().await.expect("renew"), RenewOutcome::Lost);
    assert!(rt.admit(AdmissionOp::ObjectMessageStart).is_err());
    let second = rt.lease().acquire().await.expect("takeover");
    assert_eq!(second.owner_id, first.owner_id);
    assert!(second.lease_generation > first.lease_generation);
    assert!(rt.admit(AdmissionOp::ObjectMessageStart).is_ok());
}

/// A renew whose reply was lost is recovered by an exact read at the next renew: same
/// generation, no takeover.
pub(super) async fn lost_renew_reply_is_recovered_without_a_new_generation(h: &Harness) {
    let lossy = TestStore::new(h.store.clone());
    let rt = h
        .runtime_with(lossy.clone(), LocationOptions::default(), None)
        .await;
    let run = rt.host_run().expect("run");
    lossy.set_mode(Mode::LoseReplies);
    let e = rt.lease().renew().await.expect_err("reply lost");
    assert!(matches!(e, LocationError::Store(ref s) if s.kind() == StoreErrorKind::TimedOut));
    lossy.set_mode(Mode::Normal);
    assert!(matches!(
        rt.lease().renew().await.expect("renew"),
        RenewOutcome::Renewed { .. }
    ));
    assert_eq!(rt.host_run(), Some(run));
    assert!(matches!(
        rt.lease().renew().await.expect("renew"),
        RenewOutcome::Renewed { .. }
    ));
}

/// A RENEW at the Revision already stored is a no-op reported as stale, however often it is
/// replayed and whatever it carries; the stored bytes and version never change.
pub(super) async fn renew_at_unchanged_revision_is_stale_and_never_overwrites(h: &Harness) {
    let a = host(h, "main", 1).await;
    let p =
        a.rt.descriptor_publisher(a.desc.clone())
            .expect("publisher");
    let PublishOutcome::Published { revision, version } =
        p.publish(a.desc.clone()).await.expect("publish")
    else {
        panic!("not published");
    };
    assert_eq!(revision, Generation::MIN);
    let key = keys::mesh_node(&a.node()).expect("key");
    let bytes = h
        .store
        .read(&key)
        .await
        .expect("read")
        .bytes()
        .cloned()
        .expect("row");
    let mut other = a.desc.clone();
    other.endpoint = "tcp://replayed:1".into();
    for _ in 0..10 {
        assert_eq!(
            p.publish_at(revision, other.clone()).await.expect("replay"),
            PublishOutcome::Stale {
                stored_revision: revision
            }
        );
    }
    let now = h.store.read(&key).await.expect("read");
    assert_eq!(now.version(), Some(&version));
    assert_eq!(now.bytes(), Some(&bytes));
    // A new revision publishes; the old one is still stale.
    assert!(matches!(
        p.publish(other.clone()).await.expect("publish"),
        PublishOutcome::Published { revision: r, .. } if r.get() == 2
    ));
    assert!(matches!(
        p.publish_at(revision, a.desc.clone()).await.expect("replay"),
        PublishOutcome::Stale { stored_revision: r } if r.get() == 2
    ));
}

/// The Revision after 2^63-1 does not exist: the publisher enters the Error state and publishes
/// nothing more; the Store keeps the last descriptor.
pub(super) async fn revision_overflow_enters_error_state_and_stops_publishing(h: &Harness) {
    let a = host(h, "main", 1).await;
    let p =
        a.rt.descriptor_publisher(a.desc.clone())
            .expect("publisher");
    p.set_last_revision(MAX_ISSUED).await;
    assert!(matches!(
        p.publish(a.desc.clone()).await.expect("publish"),
        PublishOutcome::Published { revision, .. } if revision == Generation::MAX
    ));
    let key = keys::mesh_node(&a.node()).expect("key");
    let before = h.store.read(&key).await.expect("read");
    for _ in 0..3 {
        assert!(matches!(
            p.publish(a.desc.clone()).await,
            Err(LocationError::RevisionExhausted)
        ));
    }
    assert!(p.is_error().await);
    assert_eq!(
        h.store.read(&key).await.expect("read").version(),
        before.version()
    );
}

/// A descriptor key held by a host whose lease is valid is not taken over; once that lease row
/// is gone, another host takes it over.
pub(super) async fn descriptor_key_of_a_live_host_is_not_taken_over(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 1).await; // same node key, another host
    a.rt.descriptor_publisher(a.desc.clone())
        .expect("p")
        .publish(a.desc.clone())
        .await
        .expect("publish");
    let pb = b.rt.descriptor_publisher(b.desc.clone()).expect("p");
    assert!(matches!(
        pb.publish(b.desc.clone()).await,
        Err(LocationError::InvalidOperation(_))
    ));
    a.rt.lease().release().await.expect("release");
    assert!(matches!(
        pb.publish(b.desc.clone()).await.expect("takeover"),
        PublishOutcome::Published { .. }
    ));
    let key = keys::mesh_node(&b.node()).expect("key");
    let r = MeshNodeRecord::decode(
        h.store
            .read(&key)
            .await
            .expect("read")
            .bytes()
            .expect("row"),
    )
    .expect("decode");
    assert_eq!(r.owner_id, b.run().owner_id);
}

/// Discovery lists only hosts whose lease row holds exactly the descriptor's run; a descriptor
/// of an unknown recordVersion is left out explicitly, never guessed at.
pub(super) async fn discovery_lists_only_hosts_with_a_valid_lease(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    for x in [&a, &b] {
        x.rt.descriptor_publisher(x.desc.clone())
            .expect("p")
            .publish(x.desc.clone())
            .await
            .expect("publish");
    }
    let mut third = a.node();
    third.routing_id = zlink_codec::RoutingId::new(vec![3]).expect("rid");
    let future = keys::mesh_node(&third).expect("key");
    force_put(
        h.store.as_ref(),
        &future,
        br#"{"recordVersion":2,"ownerId":"x"}"#,
    )
    .await;
    b.rt.lease().release().await.expect("release");
    let view =
        a.rt.discovery(&a.desc.mesh_name)
            .expect("d")
            .refresh()
            .await
            .expect("refresh");
    let runs: Vec<_> = view.nodes.iter().map(|n| n.run.clone()).collect();
    assert_eq!(runs, vec![a.run()]);
    assert_eq!(view.excluded, 2);
}

/// The change number is read before and after the pages; a publish between pages makes the
/// whole list be read again, and the result includes it.
pub(super) async fn discovery_uses_pages_only_when_change_number_matches(h: &Harness) {
    let a = Arc::new(host(h, "main", 1).await);
    for i in 0..5u8 {
        let d = descriptor("main", &[10 + i]);
        a.rt.descriptor_publisher(d.clone())
            .expect("p")
            .publish(d)
            .await
            .expect("publish");
    }
    let d =
        a.rt.discovery(&a.desc.mesh_name)
            .expect("d")
            .with_page_limit(PageLimit::new(2).expect("limit"));
    let fired = Arc::new(AtomicBool::new(false));
    let (hook_host, hook_fired) = (a.clone(), fired.clone());
    let hook = move |page: usize| {
        let a = hook_host.clone();
        let fired = hook_fired.clone();
        Box::pin(async move {
            if page == 1 && !fired.swap(true, Ordering::SeqCst) {
                let d = descriptor("main", &[99]);
                a.rt.descriptor_publisher(d.clone())
                    .expect("p")
                    .publish(d)
                    .await
                    .expect("publish");
            }
        }) as std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
    };
    let view = d.refresh_with(Some(&hook)).await.expect("refresh");
    assert_eq!(view.attempts, 2, "the first read was discarded");
    assert_eq!(view.nodes.len(), 6);
    assert_eq!(view.status, DiscoveryStatus::Fresh);
}

/// During a Store outage the last full list is kept (its nodes stay targets, no other node
/// becomes one), grace then staleness is reported, and neither the lease nor the admission
/// deadline is extended; after recovery the list is read again in full.
pub(super) async fn store_failure_grace_keeps_the_list_and_never_extends_the_deadline(h: &Harness) {
    let clock = ManualMonotonic::new();
    let flaky = TestStore::new(h.store.clone());
    let rt = h
        .runtime_with(
            flaky.clone(),
            LocationOptions::default(),
            Some(clock.clone()),
        )
        .await;
    let a = Host {
        rt,
        desc: descriptor("main", &[1]),
    };
    a.rt.descriptor_publisher(a.desc.clone())
        .expect("p")
        .publish(a.desc.clone())
        .await
        .expect("publish");
    let d = a.rt.discovery(&a.desc.mesh_name).expect("d");
    assert_eq!(
        d.refresh().await.expect("refresh").status,
        DiscoveryStatus::Fresh
    );
    let deadline = a.rt.gate().deadline();
    let other = {
        let mut n = a.node();
        n.routing_id = zlink_codec::RoutingId::new(vec![2]).expect("rid");
        n
    };

    flaky.set_mode(Mode::Down);
    clock.advance(Duration::from_secs(1));
    let view = d.refresh().await.expect("kept list");
    assert!(matches!(view.status, DiscoveryStatus::Grace { .. }));
    assert_eq!(view.nodes.len(), 1);
    assert!(d.is_connect_target(&a.node()));
    assert!(!d.is_connect_target(&other));
    assert!(a.rt.lease().renew().await.is_err());
    assert_eq!(
        a.rt.gate().deadline(),
        deadline,
        "grace extended the deadline"
    );
    clock.advance(Duration::from_secs(9));
    assert!(a.rt.admit(AdmissionOp::CapacityReservation).is_err());
    clock.advance(Duration::from_secs(21));
    let view = d.refresh().await.expect("kept list");
    assert!(
        matches!(view.status, DiscoveryStatus::Grace { .. }),
        "30 s is still within grace"
    );
    clock.advance(Duration::from_millis(1));
    let view = d.refresh().await.expect("kept list");
    assert!(matches!(view.status, DiscoveryStatus::Stale { .. }));
    assert_eq!(view.nodes.len(), 1);

    flaky.set_mode(Mode::Normal);
    let view = d.refresh().await.expect("refresh");
    assert_eq!(view.status, DiscoveryStatus::Fresh);
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

async fn publish(host: &Host) {
    host.rt
        .descriptor_publisher(host.desc.clone())
        .expect("publisher")
        .publish(host.desc.clone())
        .await
        .expect("publish");
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

/// The owner sweep deletes exactly the authority rows of one (OwnerId, LeaseGeneration), with
/// their index and capacity, from one snapshot; other owners' rows and every descriptor stay.
pub(super) async fn remove_all_by_owner_reclaims_only_that_run_and_never_descriptors(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    publish(&a).await;
    publish(&b).await;
    active_actor(&a, "x").await;
    reserve(&a, ObjectKind::UserSpot, "s", "game", &a).await;
    // A row of A's node owned by B's run stays.
    let z = active_actor(&b, "z").await;
    let report =
        b.rt.authority()
            .remove_all_by_owner(&a.run())
            .await
            .expect("sweep");
    assert_eq!((report.matched, report.removed, report.changed), (2, 2, 0));
    for (kind, object) in [(ObjectKind::Actor, "x"), (ObjectKind::UserSpot, "s")] {
        assert!(matches!(
            a.rt.authority()
                .read(kind, &id(object))
                .await
                .expect("read"),
            AuthorityRead::Missing { .. }
        ));
    }
    assert!(matches!(
        a.rt.authority().read(ObjectKind::Actor, &id("z")).await.expect("read"),
        AuthorityRead::Found { handle, .. } if handle == z
    ));
    assert_eq!(capacity(&a, &a).await, NodeUsage::default());
    assert_eq!(capacity(&a, &b).await.actors.active, 1);
    let descriptors = snapshot_of(h.store.as_ref(), "mesh-node\0").await;
    assert_eq!(descriptors.len(), 2, "the sweep never touches descriptors");
    // Shutdown sweeps its own run and releases the lease.
    let report = b.rt.shutdown().await.expect("shutdown");
    assert_eq!(report.removed, 1);
}

/// When a write's reply is lost, the engine settles the outcome by an exact read of the
/// witness key and its first-read version (never guessing): Reserve and Commit are reported
/// applied with the stored version, and the capacity row stays consistent.
pub(super) async fn lost_write_reply_is_reconstructed_from_the_store(h: &Harness) {
    let lossy = TestStore::new(h.store.clone());
    let rt = h
        .runtime_with(lossy.clone(), LocationOptions::default(), None)
        .await;
    let a = Host {
        rt,
        desc: descriptor("main", &[1]),
    };
    lossy.set_mode(Mode::LoseReplies);
    let x = reserve(&a, ObjectKind::Actor, "x", "chat", &a).await;
    let key = keys::authority(ObjectKind::Actor, &id("x")).expect("key");
    assert_eq!(
        h.store.read(&key).await.expect("read").version(),
        Some(x.version())
    );
    let x =
        a.rt.authority()
            .commit(&x, None)
            .await
            .expect("commit")
            .applied()
            .expect("applied");
    assert_eq!(
        h.store.read(&key).await.expect("read").version(),
        Some(x.version())
    );
    lossy.set_mode(Mode::Normal);
    let row = capacity(&a, &a).await;
    assert_eq!((row.actors.active, row.actors.reserved), (1, 0));
    // The engine's cached rows were refreshed: the next operation works.
    active_actor(&a, "y").await;
    assert_eq!(capacity(&a, &a).await.actors.active, 2);
}

/// Concurrent operations of one host share batches: 50 concurrent Reserve+Commit pairs take
/// far fewer than 100 writes. Each write stays in flight for 20 ms, so the operations submitted
/// meanwhile queue behind it whatever the scheduling (on a fast store they might all run one
/// by one, which is allowed, and would prove nothing).
pub(super) async fn concurrent_operations_coalesce_into_shared_batches(h: &Harness) {
    let counting = TestStore::new(h.store.clone());
    counting.set_in_flight(Some(Duration::from_millis(20)));
    let rt = h
        .runtime_with(counting.clone(), LocationOptions::default(), None)
        .await;
    let a = Arc::new(Host {
        rt,
        desc: descriptor("main", &[1]),
    });
    let before = counting.writes();
    let mut tasks = Vec::new();
    for i in 0..50 {
        let a = a.clone();
        tasks.push(tokio::spawn(async move {
            active_actor(&a, &format!("c{i}")).await;
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    let writes = counting.writes() - before;
    assert!(writes < 100, "{writes} writes for 100 operations");
    assert_eq!(capacity(&a, &a).await.actors.active, 50);
    let ids: BTreeSet<u64> = {
        let mut s = BTreeSet::new();
        for i in 0..50 {
            if let AuthorityRead::Found { handle, .. } =
                a.rt.authority()
                    .read(ObjectKind::Actor, &id(&format!("c{i}")))
                    .await
                    .expect("read")
            {
                s.insert(handle.object_generation().get());
            }
        }
        s
    };
    assert_eq!(ids.len(), 50, "every object got its own ObjectGeneration");
}

/// The capacity invariant under random concurrent operations (see `capacity_model`).
pub(super) async fn capacity_counters_equal_allocations_after_random_operations(h: &Harness) {
    super::capacity_model::run_on(h).await;
}
