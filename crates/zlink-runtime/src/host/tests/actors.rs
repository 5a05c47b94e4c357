//! Actors placed by weight and capacity, created once, messaged by global id.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};
use zlink_codec::records::ObjectRole;

use super::support::*;
use crate::host::config::MeshNodeBuilder;
use crate::messaging::{ErrorKind, Message, NodeHandler, Request, ZLinkError};
use crate::objects::{Actor, ActorType};
use zlink_testkit::Harness;

struct Counter {
    n: u64,
}
impl Actor for Counter {}

#[derive(Debug, Serialize, Deserialize)]
struct Incr;
impl Message for Incr {
    const PACKET: &'static str = "Incr";
}
impl Request for Incr {
    type Reply = u64;
}

#[derive(Debug, Serialize, Deserialize)]
struct Add(u64);
impl Message for Add {
    const PACKET: &'static str = "Add";
}

fn counter_type(
    factories: Arc<AtomicUsize>,
) -> impl FnOnce(ActorType<Counter>) -> ActorType<Counter> {
    move |t| {
        t.factory(move |_ctx| {
            let factories = Arc::clone(&factories);
            async move {
                factories.fetch_add(1, Ordering::SeqCst);
                Ok(Counter { n: 0 })
            }
        })
        .disable_relocation()
        .on_request::<Incr, _>(|c, _req, _ctx| {
            Box::pin(async move {
                c.n += 1;
                Ok(c.n)
            })
        })
        .on_send::<Add, _>(|c, add, _ctx| {
            Box::pin(async move {
                c.n += add.0;
                Ok(())
            })
        })
    }
}

fn server(
    factories: &Arc<AtomicUsize>,
) -> impl FnOnce(MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler> {
    let f = Arc::clone(factories);
    move |b| {
        b.object_role(ObjectRole::Server)
            .actor_type::<Counter>("counter", counter_type(f))
    }
}

/// `N` Object Servers of the counter type over the harness's store, each Ready with the other
/// `N - 1` as peers and listed as placement candidates.
async fn servers<const N: usize>(
    h: &Harness,
    factories: &Arc<AtomicUsize>,
) -> [(crate::host::ZLinkHost, crate::mesh::node::MeshNode); N] {
    let mut out = Vec::with_capacity(N);
    for _ in 0..N {
        out.push(start(h, server(factories)).await);
    }
    wait_connected(&out).await;
    match out.try_into() {
        Ok(a) => a,
        Err(_) => unreachable!("N servers were started"),
    }
}

on_every_store!(
    actors_are_placed_created_once_and_messaged_by_id,
    concurrent_get_or_create_of_one_id_runs_one_factory,
    actors_of_a_dead_owner_are_recreated_with_a_higher_generation,
    an_earlier_run_of_this_host_is_reclaimed_after_a_lease_takeover,
    destroy_ends_only_the_named_incarnation,
);

async fn actors_are_placed_created_once_and_messaged_by_id(h: &Harness) {
    let factories = Arc::new(AtomicUsize::new(0));
    let [(ha, _), (hb, _), (hc, _)] = servers::<3>(h, &factories).await;
    let (ma, mb) = (ha.actors().expect("manager"), hb.actors().expect("manager"));
    let mut placed = std::collections::BTreeMap::new();
    for i in 0..30 {
        let id = format!("counter-{i}");
        let r = ma.get_or_create("counter", &id).await.expect("created");
        assert_eq!(r.id.as_str(), id);
        *placed.entry(r.node.clone()).or_insert(0u64) += 1;
        // The same id again: the existing ref, no second factory.
        assert_eq!(mb.get_or_create("counter", &id).await.expect("existing"), r);
        assert_eq!(ma.find(&id).await.expect("find"), Some(r));
    }
    assert_eq!(
        factories.load(Ordering::SeqCst),
        30,
        "one factory run per id"
    );
    assert!(placed.len() >= 2, "placement spread over nodes: {placed:?}");
    // Messages by id from any node reach the one activation and keep its state.
    for i in 0..30 {
        let id = format!("counter-{i}");
        assert_eq!(ma.request(&id, &Incr).await.expect("incr"), 1);
        // One sender's send and request keep their order into the Actor's mailbox.
        mb.send(&id, &Add(10)).await.expect("add");
        assert_eq!(mb.request(&id, &Incr).await.expect("incr"), 12);
        let mc = hc.actors().expect("m");
        assert_eq!(mc.request(&id, &Incr).await.expect("incr"), 13);
    }
    // Results of spec 06 §20 / 21 §7.
    assert_eq!(ma.find("nobody").await.expect("find"), None);
    let err = ma.request("nobody", &Incr).await.expect_err("missing");
    assert_eq!(err.kind(), ErrorKind::NotFound);
    let err = ma.create("counter", "counter-0").await.expect_err("exists");
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
    let err = ma
        .get_or_create("other-type", "counter-0")
        .await
        .expect_err("type");
    assert_eq!(err.kind(), ErrorKind::TypeMismatch);
    let err = ma
        .get_or_create("no-such-type", "fresh")
        .await
        .expect_err("no node");
    assert_eq!(err.kind(), ErrorKind::CapacityExceeded);
    stop_all(&[&ha, &hb, &hc]).await;
}

async fn concurrent_get_or_create_of_one_id_runs_one_factory(h: &Harness) {
    let factories = Arc::new(AtomicUsize::new(0));
    let [(ha, _), (hb, _), (hc, _)] = servers::<3>(h, &factories).await;
    let managers = [
        ha.actors().expect("m"),
        hb.actors().expect("m"),
        hc.actors().expect("m"),
    ];
    let mut calls = Vec::new();
    for i in 0..64 {
        let m = managers[i % 3].clone();
        calls.push(tokio::spawn(async move {
            m.get_or_create("counter", "the-one").await
        }));
    }
    let mut refs = Vec::new();
    for c in calls {
        refs.push(c.await.expect("task").expect("created or existing"));
    }
    assert!(
        refs.windows(2).all(|w| w[0] == w[1]),
        "every caller got the same ref"
    );
    assert_eq!(
        factories.load(Ordering::SeqCst),
        1,
        "exactly one factory ran"
    );
    stop_all(&[&ha, &hb, &hc]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_factory_ends_the_creation_and_returns_its_capacity() {
    let h = Harness::memory();
    let (ha, _a) = start(&h, |b| {
        b.object_role(ObjectRole::Server)
            .actor_limit(1)
            .actor_type::<Counter>("counter", |t| {
                t.factory(|ctx| async move {
                    if ctx.id.starts_with("bad") {
                        Err(ZLinkError::application(ErrorKind::Rejected, "no"))
                    } else {
                        Ok(Counter { n: 0 })
                    }
                })
                .disable_relocation()
                .on_request::<Incr, _>(|c, _r, _ctx| {
                    Box::pin(async move {
                        c.n += 1;
                        Ok(c.n)
                    })
                })
            })
    })
    .await;
    wait_discovered(&[&ha]).await;
    let m = ha.actors().expect("manager");
    let err = m
        .get_or_create("counter", "bad-1")
        .await
        .expect_err("factory fails");
    assert_eq!(err.kind(), ErrorKind::InternalFailure);
    assert_eq!(
        m.find("bad-1").await.expect("find"),
        None,
        "the record is gone"
    );
    // The limit of one Actor is free again: the aborted creation returned its slot.
    let r = m
        .get_or_create("counter", "good")
        .await
        .expect("room again");
    assert_eq!(m.request(r.id.as_str(), &Incr).await.expect("incr"), 1);
    let err = m
        .get_or_create("counter", "good-2")
        .await
        .expect_err("full");
    assert_eq!(err.kind(), ErrorKind::CapacityExceeded);
    ha.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actor_manager_needs_an_object_role() {
    let h = Harness::memory();
    let (ha, _a) = start(&h, echo_node).await;
    let err = ha.actors().expect_err("no object role");
    assert_eq!(err.kind(), ErrorKind::NotConfigured);
    ha.shutdown().await;
}

/// A counter-type Object Server over `store` with `options` (short leases in these tests).
async fn short_lease_server(
    store: Arc<dyn zlink_store_spi::DynLocationStore>,
    options: zlink_location::LocationOptions,
    factories: &Arc<AtomicUsize>,
) -> (crate::host::ZLinkHost, crate::mesh::node::MeshNode) {
    let host = crate::host::config::ZLink::builder()
        .location_store(store)
        .location_options(options)
        .route_mesh(mesh(), server(factories))
        .build()
        .start()
        .await
        .expect("the host starts");
    let node = host.node(&mesh()).expect("node");
    (host, node)
}

async fn actors_of_a_dead_owner_are_recreated_with_a_higher_generation(h: &Harness) {
    use super::support::short_lease;
    use zlink_store_conformance::{Fault, FaultyLocationStore, LocationOp};
    let factories = Arc::new(AtomicUsize::new(0));
    let options = short_lease().polling_interval(std::time::Duration::from_millis(100));
    let start_with = |store: Arc<dyn zlink_store_spi::DynLocationStore>| {
        short_lease_server(store, options.clone(), &factories)
    };
    let (ha, a) = start_with(h.store.clone()).await;
    let faulty = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let (hd, d) = start_with(faulty.clone()).await;
    wait_peers(&a, 1).await;
    wait_peers(&d, 1).await;
    wait_discovered(&[&ha, &hd]).await;
    let m = ha.actors().expect("manager");
    let mut on_d = Vec::new();
    for i in 0..40 {
        let id = format!("c-{i}");
        let r = m.get_or_create("counter", &id).await.expect("created");
        if &r.node == d.routing_id() {
            on_d.push(r);
        }
    }
    assert!(!on_d.is_empty(), "some actors were placed on D");

    // D stops renewing its lease (its writes fail) and its lease runs out; A's discovery drops
    // D and reclaims what D owned.
    faulty.set_fault([LocationOp::Write], Fault::UNAVAILABLE);
    let mut gone = false;
    for _ in 0..80 {
        h.advance_store_time(std::time::Duration::from_millis(100))
            .await;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        if m.find(on_d[0].id.as_str()).await.expect("find").is_none() {
            gone = true;
            break;
        }
    }
    assert!(gone, "the dead owner's rows were reclaimed");
    // Messages to its objects meanwhile are never answered by the dead incarnation.
    for old in &on_d {
        let again = m
            .get_or_create("counter", old.id.as_str())
            .await
            .expect("recreated");
        assert_eq!(&again.node, a.routing_id(), "recreated on the survivor");
        assert!(again.generation > old.generation, "{again:?} after {old:?}");
        assert_eq!(
            m.request(old.id.as_str(), &Incr).await.expect("incr"),
            1,
            "a new incarnation"
        );
    }
    faulty.heal();
    stop_all(&[&ha, &hd]).await;
}

/// A host whose lease ran out (its Store writes failed) and which then took it over under a
/// new LeaseGeneration: its descriptor is republished under the new run (a new peer finds
/// it), the earlier run's activations close and their rows are reclaimed by the host itself
/// with their capacity, and `get_or_create` makes new incarnations with a higher
/// ObjectGeneration.
async fn an_earlier_run_of_this_host_is_reclaimed_after_a_lease_takeover(h: &Harness) {
    use super::support::short_lease;
    use std::time::Duration;
    use zlink_store_conformance::{Fault, FaultyLocationStore, LocationOp};
    use zlink_testkit::snapshot_of;
    let factories = Arc::new(AtomicUsize::new(0));
    let options = short_lease().polling_interval(Duration::from_millis(100));
    let start_with = |store: Arc<dyn zlink_store_spi::DynLocationStore>| {
        short_lease_server(store, options.clone(), &factories)
    };
    let faulty = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let (hd, d) = start_with(faulty.clone()).await;
    wait_discovered(&[&hd]).await;
    let m = hd.actors().expect("manager");
    let mut old = Vec::new();
    for i in 0..10 {
        let r = m
            .get_or_create("counter", &format!("t-{i}"))
            .await
            .expect("created");
        assert_eq!(m.request(r.id.as_str(), &Incr).await.expect("incr"), 1);
        old.push(r);
    }
    let location = Arc::clone(&hd.object_host(0).location);
    let first = location.host_run().expect("the first run");

    // The host's writes fail until its lease row has expired by Store time; then the Store
    // heals and the renew loop takes the lease over under a new generation.
    faulty.set_fault([LocationOp::Write], Fault::UNAVAILABLE);
    for _ in 0..25 {
        h.advance_store_time(Duration::from_millis(100)).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    faulty.heal();
    wait_until("the lease is taken over under a new generation", || {
        location.host_run().is_some_and(|r| r != first)
    })
    .await;
    let second = location.host_run().expect("the second run");
    assert_eq!(second.owner_id, first.owner_id);
    assert!(second.lease_generation > first.lease_generation);

    // The earlier run's records go, reclaimed by this host itself (no other host runs).
    let deadline = tokio::time::Instant::now() + WAIT;
    for r in &old {
        while m.find(r.id.as_str()).await.expect("find").is_some() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{r:?} not reclaimed"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // No capacity leaks: no allocation row counts an actor.
    let counted: u64 = snapshot_of(h.store.as_ref(), "node-capacity\0")
        .await
        .values()
        .map(|(bytes, _)| {
            zlink_location::CapacityRow::decode(bytes)
                .expect("allocation row")
                .actors
        })
        .sum();
    assert_eq!(counted, 0, "the earlier run's capacity was returned");
    // The descriptor is republished under the new run: the node is listed again.
    let discovery = hd.object_discovery(0);
    let deadline = tokio::time::Instant::now() + WAIT;
    while !discovery
        .refresh()
        .await
        .is_ok_and(|v| v.nodes.iter().any(|n| n.run == second))
    {
        assert!(tokio::time::Instant::now() < deadline, "not listed again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // New incarnations, on this host (a placement candidate again).
    for r in &old {
        let again = m
            .get_or_create("counter", r.id.as_str())
            .await
            .expect("recreated");
        assert_eq!(&again.node, d.routing_id());
        assert!(again.generation > r.generation, "{again:?} after {r:?}");
        assert_eq!(m.request(r.id.as_str(), &Incr).await.expect("incr"), 1);
    }
    assert_eq!(factories.load(Ordering::SeqCst), 20);
    // A host started now finds this one through its republished descriptor.
    let (ha, a) = start_with(h.store.clone()).await;
    wait_peers(&a, 1).await;
    let ma = ha.actors().expect("manager");
    assert_eq!(
        ma.request(old[0].id.as_str(), &Incr).await.expect("incr"),
        2
    );
    stop_all(&[&ha, &hd]).await;
}

async fn destroy_ends_only_the_named_incarnation(h: &Harness) {
    let factories = Arc::new(AtomicUsize::new(0));
    let [(ha, a), (hb, b)] = servers::<2>(h, &factories).await;
    let (ma, mb) = (ha.actors().expect("m"), hb.actors().expect("m"));
    let mut refs = Vec::new();
    for i in 0..12 {
        refs.push(
            ma.get_or_create("counter", &format!("d-{i}"))
                .await
                .expect("created"),
        );
    }
    assert!(
        refs.iter().any(|r| &r.node == b.routing_id())
            && refs.iter().any(|r| &r.node == a.routing_id()),
        "owners on both nodes"
    );
    for old in &refs {
        // B routes to it once, so B's route cache names its owner.
        assert_eq!(mb.request(old.id.as_str(), &Incr).await.expect("incr"), 1);
        // Destroyed from A whoever owns it (locally or over the command plane).
        assert!(ma.destroy(old).await.expect("destroy"), "{old:?}");
        assert_eq!(mb.find(old.id.as_str()).await.expect("find"), None);
        // B's cached route is stale; the owner answers by the record: NotFound.
        let err = mb.request(old.id.as_str(), &Incr).await.expect_err("gone");
        assert_eq!(err.kind(), ErrorKind::NotFound);
        // A second destroy of the same ref finds nothing.
        assert!(!ma.destroy(old).await.expect("destroy again"));
        // A new incarnation: the old ref does not destroy it.
        let new = mb
            .get_or_create("counter", old.id.as_str())
            .await
            .expect("recreated");
        assert!(new.generation > old.generation);
        let err = ma.destroy(old).await.expect_err("stale ref");
        assert_eq!(err.kind(), ErrorKind::InvalidOperation);
        assert_eq!(ma.request(old.id.as_str(), &Incr).await.expect("incr"), 1);
    }
    stop_all(&[&ha, &hb]).await;
}

/// Which task ran a [`Which`] handler, and the counter it saw.
#[derive(Debug, Serialize, Deserialize)]
struct Which;
impl Message for Which {
    const PACKET: &'static str = "Which";
}
impl Request for Which {
    type Reply = (Option<String>, u64);
}

/// Holds the Actor's turn until the test releases it, then adds 100.
#[derive(Debug, Serialize, Deserialize)]
struct Hold;
impl Message for Hold {
    const PACKET: &'static str = "Hold";
}

/// A request to an idle Actor on this node runs its handler on the caller's task (no hand-over
/// to the activation's task); one that finds the Actor busy waits for the running job and runs
/// after it, on the activation's task. Both keep the one-job-at-a-time order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_to_an_idle_actor_runs_on_the_callers_task_and_a_busy_one_waits_its_turn() {
    let h = Harness::memory();
    let release = Arc::new(tokio::sync::Notify::new());
    let held = Arc::new(tokio::sync::Notify::new());
    let (r, hd) = (Arc::clone(&release), Arc::clone(&held));
    let (ha, _a) = start(&h, move |b| {
        b.object_role(ObjectRole::Server)
            .actor_type::<Counter>("counter", move |t| {
                t.factory(|_ctx| async { Ok(Counter { n: 0 }) })
                    .disable_relocation()
                    .on_request::<Which, _>(|c, _w, _ctx| {
                        Box::pin(async move {
                            c.n += 1;
                            Ok((tokio::task::try_id().map(|id| id.to_string()), c.n))
                        })
                    })
                    .on_send::<Hold, _>(move |c, _h, _ctx| {
                        let (release, held) = (Arc::clone(&r), Arc::clone(&hd));
                        Box::pin(async move {
                            held.notify_one();
                            release.notified().await;
                            c.n += 100;
                            Ok(())
                        })
                    })
            })
    })
    .await;
    wait_discovered(&[&ha]).await;
    let m = ha.actors().expect("manager");
    m.get_or_create("counter", "c").await.expect("created");
    let caller = {
        let m = m.clone();
        tokio::spawn(async move {
            let mine = tokio::task::id().to_string();
            (mine, m.request("c", &Which).await.expect("which"))
        })
    };
    let (mine, (ran_on, n)) = caller.await.expect("caller");
    assert_eq!(
        ran_on,
        Some(mine),
        "an idle Actor's handler ran on the caller's task"
    );
    assert_eq!(n, 1);
    // Busy: the one-way's handler holds the Actor until released.
    m.send("c", &Hold).await.expect("hold");
    held.notified().await;
    let caller = {
        let m = m.clone();
        tokio::spawn(async move {
            let mine = tokio::task::id().to_string();
            (mine, m.request("c", &Which).await.expect("which"))
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(
        !caller.is_finished(),
        "the request waits for the running job"
    );
    release.notify_one();
    let (mine, (ran_on, n)) = caller.await.expect("caller");
    assert_ne!(ran_on, Some(mine), "a busy Actor's job ran on its own task");
    assert_eq!(n, 102, "after the job that held the Actor");
    ha.shutdown().await;
}

/// How many times a [`Tracked`] reply was encoded (only the test below uses it).
static TRACKED_ENCODINGS: AtomicUsize = AtomicUsize::new(0);

/// A reply that counts its encodings.
#[derive(Debug, Deserialize)]
struct Tracked(u64);
impl Serialize for Tracked {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        TRACKED_ENCODINGS.fetch_add(1, Ordering::SeqCst);
        self.0.serialize(s)
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Track;
impl Message for Track {
    const PACKET: &'static str = "Track";
}
impl Request for Track {
    type Reply = Tracked;
}

/// A request from this node takes the handler's reply as it is (no codec: spec 06 §7 asks no
/// encoding of what never leaves the process); one from another node gets it encoded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_same_node_reply_is_handed_over_without_the_codec_and_a_remote_one_is_encoded() {
    let h = Harness::memory();
    let tracked = |b: MeshNodeBuilder<NodeHandler>| {
        b.object_role(ObjectRole::Server)
            .actor_type::<Counter>("tracked", |t| {
                t.factory(|_ctx| async { Ok(Counter { n: 0 }) })
                    .disable_relocation()
                    .on_request::<Track, _>(|c, _t, _ctx| {
                        Box::pin(async move {
                            c.n += 1;
                            Ok(Tracked(c.n))
                        })
                    })
            })
    };
    let (ha, _a) = start(&h, tracked).await;
    let (hb, _b) = start(&h, tracked).await;
    wait_discovered(&[&ha, &hb]).await;
    let r = ha
        .actors()
        .expect("manager")
        .get_or_create("tracked", "t")
        .await
        .expect("created");
    let (owner, other) = if r.node == *_a.routing_id() {
        (&ha, &hb)
    } else {
        (&hb, &ha)
    };
    let before = TRACKED_ENCODINGS.load(Ordering::SeqCst);
    let local = owner.actors().expect("manager");
    assert_eq!(local.request("t", &Track).await.expect("local").0, 1);
    assert_eq!(
        TRACKED_ENCODINGS.load(Ordering::SeqCst),
        before,
        "the same-node reply was not encoded"
    );
    let remote = other.actors().expect("manager");
    assert_eq!(remote.request("t", &Track).await.expect("remote").0, 2);
    assert_eq!(
        TRACKED_ENCODINGS.load(Ordering::SeqCst),
        before + 1,
        "the reply to another node was encoded once"
    );
    stop_all(&[&ha, &hb]).await;
}
