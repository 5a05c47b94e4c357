//! Descriptor publishing and discovery (spec 21 §4, §6.2, §10).

use super::prelude::*;

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
        let LocationError::Config(ConfigError::Descriptor(rejected)) = &e else {
            panic!("not a descriptor rejection: {e}");
        };
        // The codec's typed error is kept as the source, not flattened to text.
        assert_eq!(
            rejected.codec_error().kind(),
            zlink_codec::CodecErrorKind::InvalidInput,
            "{e}"
        );
        assert!(std::error::Error::source(&e).is_some(), "{e}");
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
    let flaky = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let a = h
        .host_with(
            flaky.clone(),
            LocationOptions::default(),
            Some(clock.clone()),
            1,
        )
        .await;
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

    flaky.set_fault(LocationOp::ALL, Fault::UNAVAILABLE);
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

    flaky.heal();
    let view = d.refresh().await.expect("refresh");
    assert_eq!(view.status, DiscoveryStatus::Fresh);
}
