//! Dead runs nobody saw leave the list (a whole-mesh restart, a crash nobody observed): their
//! objects are recovered at access and by the periodic sweep, never while the owner's lease
//! is held (`objects/recovery.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use zlink_location::{AuthorityRead, HostRun, LocationOptions, ObjectKind};
use zlink_store_conformance::{Fault, FaultyLocationStore, LocationOp};
use zlink_testkit::{Harness, snapshot_of};

use super::support::*;
use crate::host::ZLinkHost;

/// Short leases, fast discovery, and the periodic sweep every `sweep` (0: off).
fn options(sweep: Duration) -> LocationOptions {
    short_lease()
        .polling_interval(Duration::from_millis(100))
        .dead_run_sweep_interval(sweep)
}

/// The host runs of `hosts` (each has one).
fn runs(hosts: &[&ZLinkHost]) -> Vec<HostRun> {
    hosts
        .iter()
        .map(|h| h.object_host(0).location.host_run().expect("a run"))
        .collect()
}

/// Every Store call of the `faulty` roots fails (their process is as good as dead: no lease
/// renewal, no sweep, no shutdown), until the lease rows of `dead` have all ended by Store
/// time.
async fn kill_unobserved(h: &Harness, faulty: &[&FaultyLocationStore], dead: &[HostRun]) {
    for f in faulty {
        f.set_fault(LocationOp::ALL, Fault::UNAVAILABLE);
    }
    let probe = location_runtime(h).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut ended = true;
        for run in dead {
            ended &= probe
                .authority()
                .lease_ended(run)
                .await
                .expect("lease read");
        }
        if ended {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the leases never ran out"
        );
        h.advance_store_time(Duration::from_millis(100)).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The authority rows owned by any of `runs`.
async fn rows_of(h: &Harness, runs: &[HostRun]) -> usize {
    snapshot_of(h.store.as_ref(), "authority\0")
        .await
        .values()
        .filter(|(bytes, _)| {
            zlink_codec::records::AuthorityRecord::decode(bytes).is_ok_and(|r| {
                runs.iter().any(|run| {
                    r.owner_id == run.owner_id
                        && r.owner_lease_generation == run.lease_generation.to_codec()
                })
            })
        })
        .count()
}

on_every_store!(
    get_or_create_recovers_a_record_whose_owner_lease_is_gone_though_nobody_saw_it_leave,
    a_periodic_sweep_reclaims_dead_runs_nobody_observed,
    a_stalled_owner_whose_lease_is_held_is_never_recovered,
    a_message_whose_owner_recovery_fails_is_unavailable_not_an_internal_failure,
    a_reclaim_whose_sweep_the_store_fails_is_tried_again_not_left_to_the_periodic_sweep,
    a_run_already_being_reclaimed_here_is_not_swept_a_second_time_at_once,
);

/// A root that dies unobserved after creating `n` Actors (it is the only Object Server then,
/// so all of them are its): its run.
async fn dead_run_of(h: &Harness, n: usize, tag: &str) -> HostRun {
    let factories = Arc::new(AtomicUsize::new(0));
    let f = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let (host, _) = counter_server(f.clone(), options(Duration::ZERO), &factories).await;
    wait_discovered(&[&host]).await;
    let m = host.actors().expect("manager");
    for i in 0..n {
        m.get_or_create("counter", &format!("{tag}-{i}"))
            .await
            .expect("created");
    }
    let dead = runs(&[&host]);
    kill_unobserved(h, &[&f], &dead).await;
    f.heal();
    drop(host);
    dead[0].clone()
}

/// One dead run reclaimed here by several paths at once (discovery saw it leave, a lease
/// takeover, the periodic sweep) is swept once: the second reclaim leaves it to the first.
/// Before, each swept the same rows (three concurrent sweeps were seen in the fault suite's
/// Cluster failover), contending on the same capacity rows.
async fn a_run_already_being_reclaimed_here_is_not_swept_a_second_time_at_once(h: &Harness) {
    let first = dead_run_of(h, 4, "one").await;
    let second = dead_run_of(h, 4, "two").await;
    let factories = Arc::new(AtomicUsize::new(0));
    let fb = Arc::new(FaultyLocationStore::new(h.store.clone()));
    // Discovery reads once at start and not again during the test: every scan counted below
    // is a sweep's.
    let quiet = options(Duration::ZERO).polling_interval(Duration::from_secs(30));
    let (hb, _) = counter_server(fb.clone(), quiet, &factories).await;
    wait_discovered(&[&hb]).await;
    let host = hb.object_host(0);
    let reclaim = |run: &HostRun| {
        crate::objects::recovery::reclaim_dead_run(
            Arc::clone(&host.location),
            Some(Arc::clone(&host)),
            run.clone(),
        )
    };
    let before = fb.scans();
    reclaim(&first).await;
    let alone = fb.scans() - before;
    assert!(alone > 0, "a sweep scans");
    assert_eq!(rows_of(h, std::slice::from_ref(&first)).await, 0);
    // Slow scans: the second reclaim starts while the first is sweeping.
    fb.set_delay([LocationOp::Scan], Some(Duration::from_millis(40)));
    let before = fb.scans();
    tokio::join!(reclaim(&second), reclaim(&second));
    assert_eq!(fb.scans() - before, alone, "swept once");
    assert_eq!(rows_of(h, std::slice::from_ref(&second)).await, 0);
    fb.set_delay([LocationOp::Scan], None);
    hb.shutdown().await;
}

/// A root dies unobserved with Actors; another node reclaims its run (as when discovery saw
/// it leave) while its Store fails the sweep's first two scans — as the first calls after a
/// failover do. The reclaim tries again and removes every row of the dead run (before: one
/// failed sweep was left to the periodic sweep, three lease TTLs later; the fault suite's
/// Cluster failover saw half its Actors `Unavailable` for 12 s).
async fn a_reclaim_whose_sweep_the_store_fails_is_tried_again_not_left_to_the_periodic_sweep(
    h: &Harness,
) {
    let dead = [dead_run_of(h, 4, "c").await];
    assert_eq!(rows_of(h, &dead).await, 4);

    let fb = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let b = zlink_location::LocationRuntime::builder(fb.clone())
        .renew_loop(false)
        .start()
        .await
        .expect("runtime starts");
    fb.fail_next([LocationOp::Scan], 2, Fault::UNAVAILABLE);
    crate::objects::recovery::reclaim_dead_run(Arc::new(b), None, dead[0].clone()).await;
    assert_eq!(fb.fail_next_remaining(), 0, "both failures were met");
    assert_eq!(rows_of(h, &dead).await, 0, "the dead run's rows are gone");
}

/// A root creates Actors, then dies without any live peer observing it (its lease runs out).
/// A fresh root (its periodic sweep off) gets live Actors from `get_or_create` — new
/// incarnations with a higher ObjectGeneration, not stale refs — and the old capacity is
/// released. A message by global id to such a record is answered `NotFound` (recovered).
async fn get_or_create_recovers_a_record_whose_owner_lease_is_gone_though_nobody_saw_it_leave(
    h: &Harness,
) {
    let factories = Arc::new(AtomicUsize::new(0));
    let faulty = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let (hd, _) = counter_server(faulty.clone(), options(Duration::ZERO), &factories).await;
    wait_discovered(&[&hd]).await;
    let md = hd.actors().expect("manager");
    let mut old = Vec::new();
    for i in 0..4 {
        old.push(
            md.get_or_create("counter", &format!("c-{i}"))
                .await
                .expect("created"),
        );
    }
    let dead = runs(&[&hd]);
    kill_unobserved(h, &[&faulty], &dead).await;

    let (ha, a) = counter_server(h.store.clone(), options(Duration::ZERO), &factories).await;
    // Its discovery lists it as a placement candidate.
    wait_discovered(&[&ha]).await;
    let ma = ha.actors().expect("manager");
    // A message by global id recovers the record too: a definite NotFound, not an endless
    // Unavailable from a dead owner.
    let err = ma
        .request(old[0].id.as_str(), &Incr)
        .await
        .expect_err("the object is gone");
    assert_eq!(err.kind(), crate::messaging::ErrorKind::NotFound);
    for r in &old {
        let again = ma
            .get_or_create("counter", r.id.as_str())
            .await
            .expect("a live actor");
        assert_eq!(&again.node, a.routing_id(), "recreated on the live root");
        assert!(again.generation > r.generation, "{again:?} after {r:?}");
        assert_eq!(ma.request(r.id.as_str(), &Incr).await.expect("incr"), 1);
    }
    assert_eq!(factories.load(Ordering::SeqCst), 8);
    assert_eq!(rows_of(h, &dead).await, 0, "the dead run's rows are gone");
    assert_eq!(
        actors_counted(h).await,
        4,
        "only the live actors are counted"
    );
    faulty.heal();
    stop_all(&[&ha, &hd]).await;
}

/// A whole-mesh restart: every root dies unobserved, new roots start; within a bounded wait
/// the periodic sweep has removed every row of the old runs, and the allocation rows count
/// exactly the live activations.
async fn a_periodic_sweep_reclaims_dead_runs_nobody_observed(h: &Harness) {
    let factories = Arc::new(AtomicUsize::new(0));
    let f1 = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let f2 = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let (h1, n1) = counter_server(f1.clone(), options(Duration::ZERO), &factories).await;
    let (h2, n2) = counter_server(f2.clone(), options(Duration::ZERO), &factories).await;
    wait_peers(&n1, 1).await;
    wait_peers(&n2, 1).await;
    wait_discovered(&[&h1, &h2]).await;
    let m1 = h1.actors().expect("manager");
    for i in 0..12 {
        m1.get_or_create("counter", &format!("old-{i}"))
            .await
            .expect("created");
    }
    let dead = runs(&[&h1, &h2]);
    assert_eq!(rows_of(h, &dead).await, 12);
    kill_unobserved(h, &[&f1, &f2], &dead).await;

    // New roots, sweeping at the smallest interval allowed (the owner-lease TTL).
    let sweep = short_lease().owner_lease_ttl;
    let (ha, a) = counter_server(h.store.clone(), options(sweep), &factories).await;
    let (hb, b) = counter_server(h.store.clone(), options(sweep), &factories).await;
    wait_peers(&a, 1).await;
    wait_peers(&b, 1).await;
    // Every node's discovery lists both as placement candidates.
    wait_discovered(&[&ha, &hb]).await;
    let ma = ha.actors().expect("manager");
    for i in 0..3 {
        ma.get_or_create("counter", &format!("new-{i}"))
            .await
            .expect("created");
    }
    let deadline = tokio::time::Instant::now() + WAIT;
    while rows_of(h, &dead).await > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the dead runs' rows were not reclaimed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let live: u64 = [&ha, &hb]
        .iter()
        .map(|h| h.object_host(0).live_totals().0)
        .sum();
    assert_eq!(live, 3);
    assert_eq!(
        actors_counted(h).await,
        live,
        "capacity rows add up to live activations"
    );
    f1.heal();
    f2.heal();
    stop_all(&[&ha, &hb, &h1, &h2]).await;
}

/// An owner that holds its lease but serves nothing reachable (stalled, or in a mesh this node
/// does not discover) is never recovered: `get_or_create` returns its record's ref, and the
/// periodic sweep leaves its rows, round after round.
async fn a_stalled_owner_whose_lease_is_held_is_never_recovered(h: &Harness) {
    let factories = Arc::new(AtomicUsize::new(0));
    // The stalled owner: a location runtime holding its lease (default TTL, longer than this
    // test), with no MeshNode serving its object.
    let stalled = location_runtime(h).await;
    let target = zlink_location::TargetNode {
        node: zlink_location::NodeKey {
            mesh: mesh(),
            routing_id: zlink_codec::RoutingId::new(vec![0x5a]).expect("rid"),
        },
        run: stalled.host_run().expect("lease held"),
        lifecycle_generation: 1,
        limits: zlink_location::CapacityLimits::default(),
        offers: [(
            ObjectKind::Actor,
            zlink_location::StableType::new("counter").expect("type"),
        )]
        .into_iter()
        .collect(),
    };
    let id = zlink_location::ObjectId::new("held").expect("id");
    let reserved = stalled
        .authority()
        .reserve(zlink_location::ReserveRequest {
            kind: ObjectKind::Actor,
            id: id.clone(),
            stable_type: zlink_location::StableType::new("counter").expect("type"),
            target,
            payload: Vec::new(),
            pending_creation: None,
            creation: None,
        })
        .await
        .expect("reserve")
        .applied()
        .expect("reserved");
    let record = stalled
        .authority()
        .commit(&reserved, None)
        .await
        .expect("commit")
        .applied()
        .expect("ready");

    let sweep = short_lease().owner_lease_ttl;
    let (ha, _) = counter_server(h.store.clone(), options(sweep), &factories).await;
    let ma = ha.actors().expect("manager");
    let got = ma.get_or_create("counter", "held").await.expect("the ref");
    assert_eq!(got.generation, record.object_generation().get());
    assert_eq!(factories.load(Ordering::SeqCst), 0, "nothing recreated");
    let recovery = &ha.object_host(0).recovery;
    let from = recovery.rounds();
    wait_until("two periodic rounds", || recovery.rounds() >= from + 2).await;
    match stalled
        .authority()
        .read(ObjectKind::Actor, &id)
        .await
        .expect("read")
    {
        AuthorityRead::Found { handle, .. } => {
            assert_eq!(handle, record, "the record is untouched")
        }
        AuthorityRead::Missing { .. } => panic!("a live owner's record was recovered"),
    }
    stop_all(&[&ha]).await;
}

/// Issue 20 (`owner-kill` fault scenario): a message by global id whose record names a dead
/// run recovers it at access; when that recovery fails at the Store (here its writes refused
/// by the backend; in the scenario, concurrent recoveries of one dead run contending), the
/// message ends `Unavailable` — spec 06 §20, "route unavailable" for an Actor message, which
/// has no `InternalFailure` — and is answered by the record as read. A later message
/// recovers it and hears `NotFound`.
async fn a_message_whose_owner_recovery_fails_is_unavailable_not_an_internal_failure(h: &Harness) {
    use zlink_store_conformance::InjectedError;
    use zlink_store_spi::FailureKind;
    let factories = Arc::new(AtomicUsize::new(0));
    let faulty = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let (hd, _) = counter_server(faulty.clone(), options(Duration::ZERO), &factories).await;
    wait_discovered(&[&hd]).await;
    let old = hd
        .actors()
        .expect("manager")
        .get_or_create("counter", "r-0")
        .await
        .expect("created");
    let dead = runs(&[&hd]);
    kill_unobserved(h, &[&faulty], &dead).await;

    let live = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let (ha, _) = counter_server(live.clone(), options(Duration::ZERO), &factories).await;
    wait_discovered(&[&ha]).await;
    let refused = Fault::FailBefore(InjectedError::Failure(FailureKind::Backend));
    let ma = ha.actors().expect("manager");
    live.set_fault([LocationOp::Write], refused);
    let err = ma
        .request(old.id.as_str(), &Incr)
        .await
        .expect_err("the owner is dead");
    live.set_fault([LocationOp::Write], Fault::PassThrough);
    assert_eq!(
        err.kind(),
        crate::messaging::ErrorKind::Unavailable,
        "{err}"
    );
    // Once this node's own writes go through again (its lease renewal failed meanwhile too),
    // a message recovers the record.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let err = ma
            .request(old.id.as_str(), &Incr)
            .await
            .expect_err("the owner is dead");
        match err.kind() {
            crate::messaging::ErrorKind::NotFound => break,
            crate::messaging::ErrorKind::Unavailable => {}
            other => panic!("{other}: {err}"),
        }
        assert!(tokio::time::Instant::now() < deadline, "never recovered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(rows_of(h, &dead).await, 0, "the dead run's row is gone");
    faulty.heal();
    stop_all(&[&ha, &hd]).await;
}
