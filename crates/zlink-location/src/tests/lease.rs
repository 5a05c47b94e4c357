//! Generations, the owner lease and the admission gate (spec 21 §3.1, §3.2, §5).

use super::prelude::*;

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
    let a = h
        .host_with(
            h.store.clone(),
            LocationOptions::default(),
            Some(clock.clone()),
            1,
        )
        .await;
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
    // The lock-free check the object runtime makes at every message job's start agrees.
    assert!(!a.rt.is_admitting());
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

/// With an injected monotonic clock and 2 s of write latency: the deadline counts from before
/// the request (latency shortens it), new work is admitted until it and refused from it on,
/// while the Store still holds the lease (before its TTL). A failing renew does not move it.
pub(super) async fn lease_stall_refuses_new_work_after_deadline_before_ttl(h: &Harness) {
    let clock = ManualMonotonic::new();
    let slow = Arc::new(FaultyLocationStore::new(h.store.clone()));
    {
        let clock = clock.clone();
        slow.set_write_hook(Some(Arc::new(move || {
            clock.advance(Duration::from_secs(2))
        })));
    }
    let rt = h
        .runtime_with(
            slow.clone(),
            LocationOptions::default(),
            Some(clock.clone()),
        )
        .await;
    slow.set_write_hook(None);
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
    slow.set_fault(LocationOp::ALL, Fault::UNAVAILABLE);
    assert!(a.rt.lease().renew().await.is_err());
    assert_eq!(a.rt.gate().deadline(), Some(Duration::from_secs(10)));
    slow.heal();

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
    let lossy = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let rt = h
        .runtime_with(lossy.clone(), LocationOptions::default(), None)
        .await;
    let run = rt.host_run().expect("run");
    lossy.set_fault([LocationOp::Write], Fault::LOSE_REPLY);
    let e = rt.lease().renew().await.expect_err("reply lost");
    assert!(matches!(e, LocationError::Store(ref s) if s.kind() == StoreErrorKind::TimedOut));
    lossy.heal();
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

/// A release while the renew loop has a renew in flight (every write takes 600 ms here) ends
/// the lease for good: the row is deleted once that renew is done, and the loop neither
/// reports the lease lost nor takes it over under a new generation afterwards (a clean
/// shutdown leaves no lease row and republishes nothing).
pub(super) async fn a_release_during_a_renew_in_flight_ends_the_lease_without_a_takeover(
    h: &Harness,
) {
    let slow = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let options = LocationOptions::default()
        .owner_lease_renew_interval(Duration::from_millis(100))
        .owner_lease_renew_timeout(Duration::from_millis(1_500))
        .owner_lease_ttl(Duration::from_millis(4_000))
        .owner_lease_fencing_margin(Duration::from_millis(1_000));
    let rt = LocationRuntime::builder(slow.clone())
        .options(options)
        .start()
        .await
        .expect("runtime starts");
    let first = rt.host_run().expect("run");
    slow.set_delay([LocationOp::Write], Some(Duration::from_millis(600)));
    // The loop's next renew is in flight from the first 100 ms tick on.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let writes = slow.writes();
    rt.lease().release().await.expect("release");
    slow.set_delay([LocationOp::Write], None);
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let key = lease::lease_key(rt.owner_id()).expect("key");
    assert!(
        h.store.read(&key).await.expect("read").is_missing(),
        "the lease row is gone after the release"
    );
    assert_eq!(rt.host_run(), None, "no term after the release");
    assert!(
        slow.writes() <= writes + 2,
        "nothing written after the release but the delete and the renew it waited for"
    );
    assert_eq!(
        counter(h.store.as_ref(), GenerationKind::OwnerLease)
            .await
            .as_deref(),
        Some((first.lease_generation.get() + 1).to_string().as_str()),
        "no new LeaseGeneration was issued"
    );
}
