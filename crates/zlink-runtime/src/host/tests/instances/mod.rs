//! Instance Spots created by their first message (cold activation, spec 06 §15–§16, §18;
//! 21 §7.1, §10), over a Relocation Store of the harness's kind: the in-memory one on the
//! memory store's clock, or the Redis provider on the same live Redis (single node or
//! cluster) under a fresh key prefix.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use zlink_codec::records::{AllocationState, AuthorityRecord, ObjectKind, ObjectRole};
use zlink_codec::{ObjectId, RoutingId};
use zlink_redis_relocation::{RedisRelocationOptions, RedisRelocationStore};
use zlink_store_conformance::{Fault, FaultyLocationStore, LocationOp};
use zlink_store_spi::{
    BlobReadResult, BlobRef, Bytes, Deleted, DynLocationStore, DynRelocationStore,
    MemoryRelocationStore, PutResult, RelocationStore, RenewResult, Retention, StoreResult,
};

mod job_queue;
mod restarts;

use super::support::*;
use crate::host::ZLinkHost;
use crate::host::config::{MeshNodeBuilder, ZLink};
use crate::host::tests::support::launch;
use crate::mesh::node::MeshNode;
use crate::messaging::{ErrorKind, Message, NodeHandler, Request, ZLinkError};
use crate::objects::{Spot, SpotType};
use zlink_location::{AuthorityHandle, AuthorityRead, LocationOptions, LocationRuntime};
use zlink_testkit::Harness;
use zlink_testkit::{CLUSTER_ENV, REDIS_ENV, snapshot_of};

/// One Instance Spot: counts the messages it ran and logs them with its node's label.
struct Room {
    label: String,
    generation: u64,
    seen: usize,
    log: Log,
    gate: Option<Gate>,
}
impl Spot for Room {}

/// A User Spot type (for the type checks).
struct Hall;
impl Spot for Hall {}

/// What ran where: (node label, message text).
type Log = Arc<Mutex<Vec<(String, String)>>>;

#[derive(Debug, Serialize, Deserialize)]
struct Say(String);
impl Message for Say {
    const PACKET: &'static str = "Say";
}
impl Request for Say {
    type Reply = Said;
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Said {
    node: String,
    count: usize,
    generation: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Note(String);
impl Message for Note {
    const PACKET: &'static str = "Note";
}

/// What one node's Room type shares with the test.
#[derive(Clone)]
struct RoomKit {
    label: String,
    factories: Arc<AtomicUsize>,
    log: Log,
    /// Factories wait here (a creation that never reaches Ready).
    factory_gate: Option<Gate>,
    /// Handlers wait here (a first message that never completes).
    handler_gate: Option<Gate>,
}

impl RoomKit {
    fn new(label: &str, factories: &Arc<AtomicUsize>, log: &Log) -> Self {
        Self {
            label: label.to_owned(),
            factories: Arc::clone(factories),
            log: Arc::clone(log),
            factory_gate: None,
            handler_gate: None,
        }
    }

    fn room(self) -> impl FnOnce(SpotType<Room>) -> SpotType<Room> {
        move |t| {
            let kit = self.clone();
            t.factory(move |ctx| {
                let kit = kit.clone();
                async move {
                    kit.factories.fetch_add(1, Ordering::SeqCst);
                    if let Some(g) = &kit.factory_gate {
                        g.pass().await;
                    }
                    Ok(Room {
                        label: kit.label.clone(),
                        generation: ctx.generation,
                        seen: 0,
                        log: Arc::clone(&kit.log),
                        gate: kit.handler_gate.clone(),
                    })
                }
            })
            .disable_relocation()
            .on_request::<Say, _>(|r, say, _ctx| {
                Box::pin(async move {
                    if let Some(g) = &r.gate {
                        g.pass().await;
                    }
                    r.seen += 1;
                    r.log.lock().push((r.label.clone(), say.0));
                    Ok(Said {
                        node: r.label.clone(),
                        count: r.seen,
                        generation: r.generation,
                    })
                })
            })
            .on_send::<Note, _>(|r, note, _ctx| {
                Box::pin(async move {
                    r.seen += 1;
                    r.log.lock().push((r.label.clone(), note.0));
                    Ok(())
                })
            })
        }
    }
}

/// A Relocation Store that records every reference put (and whether it was newly stored),
/// read back (and whether it was found) and deleted, and counts deletions of a reference an
/// authority record still pointed at when the deletion started (spec 21 §10: end of use is
/// recorded in the Location Store before the payload is deleted). While `freeze` holds a gate,
/// a read returns only once the gate opens (the reader's process stops right after it).
/// Reads of a reference `lost` picks answer `Missing` (a payload permanently lost). Puts of a
/// reference `stalled.0` picks and reads of one `stalled.1` picks time out without reaching
/// the store (the Store cannot take or give it back for now).
#[derive(Debug)]
pub(in crate::host::tests) struct Recorded {
    inner: Arc<dyn DynRelocationStore>,
    location: Arc<dyn DynLocationStore>,
    puts: Mutex<Vec<(BlobRef, bool)>>,
    reads: Mutex<Vec<(BlobRef, bool)>>,
    deletes: Mutex<Vec<BlobRef>>,
    deleted_while_pointed: AtomicUsize,
    /// Renewals that found their reference.
    renewed: AtomicUsize,
    freeze: Mutex<Option<Gate>>,
    lost: Mutex<Option<Picks>>,
    stalled: Mutex<(Option<Picks>, Option<Picks>)>,
    /// The authority rows a deletion checks for a pointer to the deleted reference.
    pointers: Mutex<&'static str>,
}

/// Which references a [`Recorded`] store treats as lost.
type Picks = fn(&str) -> bool;

impl Recorded {
    /// Deletions check the authority rows under `prefix` (`authority\0spot\0` unless set)
    /// for a pointer to the deleted reference.
    pub(in crate::host::tests) fn pointers_under(&self, prefix: &'static str) {
        *self.pointers.lock() = prefix;
    }

    /// From now on, reads of the references `which` picks answer `Missing`.
    pub(in crate::host::tests) fn lose(&self, which: Picks) {
        *self.lost.lock() = Some(which);
    }

    /// From now on, puts of the references `puts` picks and reads of those `reads` picks time
    /// out (`None`: none).
    pub(in crate::host::tests) fn stall(&self, puts: Option<Picks>, reads: Option<Picks>) {
        *self.stalled.lock() = (puts, reads);
    }

    /// Whether a put (`put`) or a read of `reference` is one `stall` picks now.
    fn stalled(&self, reference: &BlobRef, put: bool) -> bool {
        let (puts, reads) = *self.stalled.lock();
        let which = if put { puts } else { reads };
        which.is_some_and(|which| which(reference.as_str()))
    }

    /// Deletions that started while an authority record still pointed at the reference.
    pub(in crate::host::tests) fn deleted_while_pointed(&self) -> usize {
        self.deleted_while_pointed.load(Ordering::SeqCst)
    }

    pub(in crate::host::tests) fn puts(&self) -> Vec<BlobRef> {
        let mut v: Vec<BlobRef> = self.puts.lock().iter().map(|(r, _)| r.clone()).collect();
        v.dedup();
        v
    }

    /// Whether every put stored new bytes and was read back (found) by the runtime.
    pub(in crate::host::tests) fn all_stored_and_read_back(&self) -> bool {
        let reads = self.reads.lock();
        self.puts
            .lock()
            .iter()
            .all(|(r, stored)| *stored && reads.iter().any(|(read, found)| read == r && *found))
    }

    pub(in crate::host::tests) fn deletes(&self) -> Vec<BlobRef> {
        self.deletes.lock().clone()
    }

    pub(in crate::host::tests) async fn is_stored(&self, reference: &BlobRef) -> bool {
        matches!(
            self.inner.read(reference).await.expect("read"),
            BlobReadResult::Found { .. }
        )
    }

    /// Deletes every envelope a test stored (the live Redis keeps nothing of a test).
    pub(in crate::host::tests) async fn purge(&self) {
        for r in self.puts() {
            let _ = self.inner.delete(&r).await;
        }
    }
}

impl RelocationStore for Recorded {
    async fn put(
        &self,
        reference: &BlobRef,
        payload: &Bytes,
        retention: Retention,
    ) -> StoreResult<PutResult> {
        if self.stalled(reference, true) {
            return Err(zlink_store_spi::StoreError::TimedOut);
        }
        let put = self.inner.put(reference, payload, retention).await;
        let stored = matches!(put, Ok(PutResult::Stored { .. }));
        self.puts.lock().push((reference.clone(), stored));
        put
    }

    async fn read(&self, reference: &BlobRef) -> StoreResult<BlobReadResult> {
        if self.stalled(reference, false) {
            return Err(zlink_store_spi::StoreError::TimedOut);
        }
        let lost = self
            .lost
            .lock()
            .as_ref()
            .is_some_and(|which| which(reference.as_str()));
        let read = match self.inner.read(reference).await {
            Ok(BlobReadResult::Found { store_now, .. }) if lost => {
                Ok(BlobReadResult::Missing { store_now })
            }
            other => other,
        };
        let found = matches!(read, Ok(BlobReadResult::Found { .. }));
        self.reads.lock().push((reference.clone(), found));
        let freeze = self.freeze.lock().clone();
        if let Some(gate) = freeze {
            gate.pass().await;
        }
        read
    }

    async fn renew(&self, reference: &BlobRef, retention: Retention) -> StoreResult<RenewResult> {
        let renew = self.inner.renew(reference, retention).await;
        if matches!(renew, Ok(RenewResult::Renewed { .. })) {
            self.renewed.fetch_add(1, Ordering::SeqCst);
        }
        renew
    }

    async fn delete(&self, reference: &BlobRef) -> StoreResult<Deleted> {
        let prefix = *self.pointers.lock();
        let rows = snapshot_of(self.location.as_ref(), prefix).await;
        let pointed = rows.values().any(|(bytes, _)| {
            AuthorityRecord::decode(bytes)
                .is_ok_and(|r| String::from_utf8_lossy(&r.payload).contains(reference.as_str()))
        });
        if pointed {
            self.deleted_while_pointed.fetch_add(1, Ordering::SeqCst);
        }
        self.deletes.lock().push(reference.clone());
        self.inner.delete(reference).await
    }
}

/// The harness's kind of Relocation Store, recorded.
pub(in crate::host::tests) async fn relocation_store(h: &Harness) -> Arc<Recorded> {
    let prefix = format!("zlrt-inst-{}", uuid::Uuid::new_v4().simple());
    let inner: Arc<dyn DynRelocationStore> = match (h.backend, &h.store_clock) {
        (_, Some(clock)) => Arc::new(MemoryRelocationStore::with_clock(Arc::new(clock.clone()))),
        ("cluster", None) => {
            let seeds: Vec<String> = std::env::var(CLUSTER_ENV)
                .expect("cluster seeds")
                .split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect();
            let options = RedisRelocationOptions::cluster(&seeds)
                .and_then(|o| o.with_key_prefix(prefix))
                .expect("options");
            Arc::new(
                RedisRelocationStore::connect(options)
                    .await
                    .expect("connect"),
            )
        }
        _ => {
            let url = std::env::var(REDIS_ENV).expect("redis url");
            let options = RedisRelocationOptions::from_url(&url)
                .and_then(|o| o.with_key_prefix(prefix))
                .expect("options");
            Arc::new(
                RedisRelocationStore::connect(options)
                    .await
                    .expect("connect"),
            )
        }
    };
    Arc::new(Recorded {
        inner,
        location: Arc::clone(&h.store),
        puts: Mutex::new(Vec::new()),
        reads: Mutex::new(Vec::new()),
        deletes: Mutex::new(Vec::new()),
        deleted_while_pointed: AtomicUsize::new(0),
        renewed: AtomicUsize::new(0),
        freeze: Mutex::new(None),
        lost: Mutex::new(None),
        stalled: Mutex::new((None, None)),
        pointers: Mutex::new("authority\0spot\0"),
    })
}

/// Quick discovery; envelopes kept 60 s (a failed test leaves nothing for long).
fn options() -> LocationOptions {
    fast_options().cold_activation_retention(Duration::from_secs(60))
}

/// Lease timings short enough to let a node die within a test.
fn dying_options() -> LocationOptions {
    short_lease()
        .polling_interval(Duration::from_millis(100))
        .cold_activation_retention(Duration::from_secs(60))
}

/// Starts one Object Server root over `store` with `relocation` and `options`.
async fn server(
    store: Arc<dyn DynLocationStore>,
    relocation: &Arc<Recorded>,
    options: LocationOptions,
    configure: impl FnOnce(MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler>,
) -> (ZLinkHost, MeshNode) {
    let relocation: Arc<dyn DynRelocationStore> = relocation.clone();
    launch(
        ZLink::builder()
            .location_store(store)
            .relocation_store(relocation)
            .location_options(options)
            .route_mesh(mesh(), |n| configure(n.object_role(ObjectRole::Server))),
    )
    .await
}

/// `N` Object Servers serving the Room Instance Spot type, labelled `n0`, `n1`, …, each with
/// the others as Ready peers and listing all of them.
async fn rooms<const N: usize>(
    h: &Harness,
    relocation: &Arc<Recorded>,
    factories: &Arc<AtomicUsize>,
    log: &Log,
) -> [(ZLinkHost, MeshNode); N] {
    let mut out = Vec::new();
    for i in 0..N {
        let kit = RoomKit::new(&format!("n{i}"), factories, log);
        out.push(
            server(Arc::clone(&h.store), relocation, options(), |n| {
                n.instance_spot_type::<Room>("room", kit.room())
            })
            .await,
        );
    }
    for (_, n) in &out {
        wait_peers(n, N - 1).await;
    }
    // Every node's discovery lists all of them (placement candidates and its own entry).
    tokio::time::sleep(Duration::from_millis(400)).await;
    match out.try_into() {
        Ok(a) => a,
        Err(_) => unreachable!("N servers were started"),
    }
}

/// The authority record of Spot `id`, read directly.
async fn record(rt: &LocationRuntime, id: &str) -> Option<AuthorityHandle> {
    match rt
        .authority()
        .read(ObjectKind::InstanceSpot, &ObjectId::new(id).expect("id"))
        .await
        .expect("read")
    {
        AuthorityRead::Found { handle, .. } => Some(handle),
        AuthorityRead::Missing { .. } => None,
    }
}

/// Polls `check` (every 50 ms, the store clock moved along by as much) until it yields a
/// value.
async fn eventually<T, F, Fut>(h: &Harness, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..400 {
        if let Some(v) = check().await {
            return v;
        }
        h.advance_store_time(Duration::from_millis(50)).await;
        if h.store_clock.is_some() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    panic!("timed out waiting: {what}");
}

fn kind(r: Result<Said, ZLinkError>) -> ErrorKind {
    r.expect_err("an error").kind()
}

on_every_store!(
    first_message_creates_the_instance_spot_and_is_answered_by_it,
    omitted_stable_type_is_chosen_only_when_exactly_one_instance_type_is_served,
    instance_intent_on_a_user_spot_or_another_type_is_a_type_mismatch,
    racing_first_messages_run_one_factory_and_every_message_is_answered_once,
);

async fn first_message_creates_the_instance_spot_and_is_answered_by_it(h: &Harness) {
    let relocation = relocation_store(h).await;
    let factories = Arc::new(AtomicUsize::new(0));
    let log: Log = Arc::default();
    let [(ha, a), (hb, b), (hc, c)] = rooms::<3>(h, &relocation, &factories, &log).await;
    let rid = |label: &str| -> RoutingId {
        match label {
            "n0" => a.routing_id().clone(),
            "n1" => b.routing_id().clone(),
            _ => c.routing_id().clone(),
        }
    };
    let spots = [
        ha.spots().expect("m"),
        hb.spots().expect("m"),
        hc.spots().expect("m"),
    ];
    let rt = location_runtime(h).await;

    // The first message creates the Spot and its reply comes from it.
    let first = spots[0]
        .instance("room-1")
        .stable_type("room")
        .request(&Say("hello".into()))
        .await
        .expect("created and answered");
    assert_eq!(first.count, 1);
    assert_eq!(factories.load(Ordering::SeqCst), 1);
    let found = spots[1].find("room-1").await.expect("find").expect("Ready");
    assert_eq!(found.node, rid(&first.node));
    assert_eq!(found.generation, first.generation);
    // Ready, and no longer pointing at the stored first message.
    let now = record(&rt, "room-1").await.expect("record");
    assert_eq!(now.state(), AllocationState::Active);
    assert!(now.payload().is_empty(), "the recovery root is removed");

    // Instance intent on an existing Spot: delivered once to its owner, the record decides
    // the type; existing-only messaging reaches it too.
    let again = spots[2]
        .instance("room-1")
        .request(&Say("again".into()))
        .await
        .expect("existing");
    assert_eq!((again.count, &again.node), (2, &first.node));
    let plain = spots[1]
        .request("room-1", &Say("plain".into()))
        .await
        .expect("existing-only");
    assert_eq!((plain.count, &plain.node), (3, &first.node));

    // A one-way first message creates another one.
    spots[1]
        .instance("room-2")
        .stable_type("room")
        .send(&Note("note".into()))
        .await
        .expect("created by a send");
    let after = spots[0]
        .request("room-2", &Say("then".into()))
        .await
        .expect("Ready");
    assert_eq!(after.count, 2, "the send ran first");

    // Without Instance intent a Missing Spot is NotFound and nothing is created.
    let err = spots[0].request("room-3", &Say("no".into())).await;
    assert_eq!(kind(err), ErrorKind::NotFound);
    assert_eq!(spots[0].find("room-3").await.expect("find"), None);
    assert_eq!(factories.load(Ordering::SeqCst), 2);
    assert_eq!(
        log.lock().iter().filter(|(_, m)| m == "hello").count(),
        1,
        "the first message ran once"
    );

    // Each stored envelope was deleted after its record stopped pointing at it.
    let (puts, deletes) = (relocation.puts(), relocation.deletes());
    assert_eq!(puts.len(), 2, "one envelope per creation: {puts:?}");
    assert!(
        relocation.all_stored_and_read_back(),
        "stored, then read back"
    );
    assert_eq!(deletes, puts);
    for r in &puts {
        assert!(!relocation.is_stored(r).await, "{r:?} is gone");
    }
    assert_eq!(relocation.deleted_while_pointed.load(Ordering::SeqCst), 0);
    relocation.purge().await;
    let _ = rt.shutdown().await;
    stop_all(&[&ha, &hb, &hc]).await;
}

async fn omitted_stable_type_is_chosen_only_when_exactly_one_instance_type_is_served(h: &Harness) {
    let relocation = relocation_store(h).await;
    let factories = Arc::new(AtomicUsize::new(0));
    let log: Log = Arc::default();
    // A serves a User Spot type only: no Instance Spot type is served.
    let (ha, a) = server(Arc::clone(&h.store), &relocation, options(), |n| {
        n.user_spot_type::<Hall>("hall", |t| {
            t.factory(|_| async { Ok(Hall) }).disable_relocation()
        })
    })
    .await;
    wait_discovered(&[&ha]).await;
    let spots = ha.spots().expect("m");
    let err = spots.instance("x").request(&Say("0".into())).await;
    assert_eq!(kind(err), ErrorKind::NotFound);
    assert_eq!(spots.find("x").await.expect("find"), None);

    // One type served (by B): chosen.
    let kit = RoomKit::new("b", &factories, &log);
    let (hb, _b) = server(Arc::clone(&h.store), &relocation, options(), |n| {
        n.instance_spot_type::<Room>("room", kit.room())
    })
    .await;
    wait_peers(&a, 1).await;
    let on_a = &spots;
    let first = eventually(h, "A lists B's type", move || async move {
        match on_a.instance("x").request(&Say("1".into())).await {
            Ok(said) => Some(said),
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
                None
            }
        }
    })
    .await;
    assert_eq!((first.node.as_str(), first.count), ("b", 1));

    // Two types served (C adds another): the caller must name one.
    let kit = RoomKit::new("c", &factories, &log);
    let (hc, _c) = server(Arc::clone(&h.store), &relocation, options(), |n| {
        n.instance_spot_type::<Room>("lobby", kit.room())
    })
    .await;
    wait_peers(&a, 2).await;
    eventually(h, "A lists C's type", move || async move {
        match on_a.instance("y").request(&Say("2".into())).await {
            Ok(said) => panic!("created without a type among two: {said:?}"),
            Err(e) => (e.kind() == ErrorKind::InvalidOperation).then_some(()),
        }
    })
    .await;
    assert_eq!(
        spots.find("y").await.expect("find"),
        None,
        "nothing created"
    );
    let lobby = spots
        .instance("y")
        .stable_type("lobby")
        .request(&Say("3".into()))
        .await
        .expect("named type");
    assert_eq!((lobby.node.as_str(), lobby.count), ("c", 1));
    // An existing record decides the type, however many types are served.
    let again = spots
        .instance("x")
        .request(&Say("4".into()))
        .await
        .expect("existing");
    assert_eq!((again.node.as_str(), again.count), ("b", 2));
    assert_eq!(factories.load(Ordering::SeqCst), 2);
    relocation.purge().await;
    stop_all(&[&ha, &hb, &hc]).await;
}

async fn instance_intent_on_a_user_spot_or_another_type_is_a_type_mismatch(h: &Harness) {
    let relocation = relocation_store(h).await;
    let factories = Arc::new(AtomicUsize::new(0));
    let log: Log = Arc::default();
    let room = RoomKit::new("a", &factories, &log);
    let cell = RoomKit::new("a", &factories, &log);
    let (ha, _a) = server(Arc::clone(&h.store), &relocation, options(), |n| {
        n.user_spot_type::<Hall>("hall", |t| {
            t.factory(|_| async { Ok(Hall) }).disable_relocation()
        })
        .instance_spot_type::<Room>("room", room.room())
        .instance_spot_type::<Room>("cell", cell.room())
    })
    .await;
    wait_discovered(&[&ha]).await;
    let spots = ha.spots().expect("m");
    spots
        .get_or_create("hall", "h-1")
        .await
        .expect("a User Spot");
    let err = spots.instance("h-1").request(&Say("x".into())).await;
    assert_eq!(kind(err), ErrorKind::TypeMismatch);
    let err = spots
        .instance("h-1")
        .stable_type("room")
        .request(&Say("x".into()))
        .await;
    assert_eq!(kind(err), ErrorKind::TypeMismatch);

    let cell = spots
        .instance("c-1")
        .stable_type("cell")
        .request(&Say("x".into()))
        .await
        .expect("an Instance Spot");
    assert_eq!(cell.count, 1);
    let err = spots
        .instance("c-1")
        .stable_type("room")
        .request(&Say("x".into()))
        .await;
    assert_eq!(kind(err), ErrorKind::TypeMismatch);
    let err = spots
        .get_or_create("hall", "c-1")
        .await
        .expect_err("an Instance Spot is no User Spot");
    assert_eq!(err.kind(), ErrorKind::TypeMismatch);
    assert_eq!(factories.load(Ordering::SeqCst), 1);
    assert_eq!(relocation.puts().len(), 1, "nothing stored for a mismatch");
    relocation.purge().await;
    stop_all(&[&ha]).await;
}

async fn racing_first_messages_run_one_factory_and_every_message_is_answered_once(h: &Harness) {
    let relocation = relocation_store(h).await;
    let factories = Arc::new(AtomicUsize::new(0));
    let log: Log = Arc::default();
    let [(ha, _), (hb, _), (hc, _)] = rooms::<3>(h, &relocation, &factories, &log).await;
    let spots = [
        ha.spots().expect("m"),
        hb.spots().expect("m"),
        hc.spots().expect("m"),
    ];
    let mut calls = Vec::new();
    for i in 0..64 {
        let m = spots[i % 3].clone();
        calls.push(tokio::spawn(async move {
            m.instance("hot")
                .stable_type("room")
                .request(&Say(format!("m{i}")))
                .await
        }));
    }
    let mut replies = Vec::new();
    for c in calls {
        replies.push(c.await.expect("task").expect("answered"));
    }
    assert_eq!(factories.load(Ordering::SeqCst), 1, "one factory run");
    let owner = replies[0].node.clone();
    assert!(
        replies
            .iter()
            .all(|r| r.node == owner && r.generation == replies[0].generation),
        "one Spot answered every message: {replies:?}"
    );
    let mut counts: Vec<usize> = replies.iter().map(|r| r.count).collect();
    counts.sort_unstable();
    assert_eq!(
        counts,
        (1..=64).collect::<Vec<_>>(),
        "each message ran exactly once"
    );
    // The winner removed its recovery root, then deleted its envelope; the losers' envelopes
    // are pointed to by nothing and expire with their retention.
    let rt = location_runtime(h).await;
    assert!(
        record(&rt, "hot")
            .await
            .expect("Ready")
            .payload()
            .is_empty()
    );
    let deletes = relocation.deletes();
    assert_eq!(deletes.len(), 1, "one creation released one envelope");
    assert!(!relocation.is_stored(&deletes[0]).await);
    assert_eq!(relocation.deleted_while_pointed.load(Ordering::SeqCst), 0);
    relocation.purge().await;
    let _ = rt.shutdown().await;
    stop_all(&[&ha, &hb, &hc]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_option_set_twice_or_a_reserved_id_fails_before_anything_is_stored() {
    let h = Harness::memory();
    let relocation = relocation_store(&h).await;
    let factories = Arc::new(AtomicUsize::new(0));
    let log: Log = Arc::default();
    let kit = RoomKit::new("a", &factories, &log);
    let (ha, _a) = server(Arc::clone(&h.store), &relocation, options(), |n| {
        n.instance_spot_type::<Room>("room", kit.room())
    })
    .await;
    wait_discovered(&[&ha]).await;
    let spots = ha.spots().expect("m");
    let say = || Say("x".into());
    let twice = spots
        .instance("r")
        .stable_type("room")
        .stable_type("room")
        .request(&say())
        .await;
    assert_eq!(kind(twice), ErrorKind::InvalidOperation);
    let twice = spots
        .instance("r")
        .deadline(Duration::from_secs(1))
        .deadline(Duration::from_secs(2))
        .request(&say())
        .await;
    assert_eq!(kind(twice), ErrorKind::InvalidOperation);
    let zero = spots
        .instance("r")
        .deadline(Duration::ZERO)
        .request(&say())
        .await;
    assert_eq!(kind(zero), ErrorKind::InvalidOperation);
    let entry = format!("lobby-entry-{}", uuid::Uuid::new_v4());
    let reserved = spots.instance(&entry).request(&say()).await;
    assert_eq!(kind(reserved), ErrorKind::InvalidOperation);
    assert_eq!(spots.find("r").await.expect("find"), None);
    assert_eq!(factories.load(Ordering::SeqCst), 0);
    assert!(relocation.puts().is_empty(), "nothing was stored");
    // The same call set once works.
    let ok = spots
        .instance("r")
        .stable_type("room")
        .deadline(Duration::from_secs(5))
        .request(&say())
        .await
        .expect("created");
    assert_eq!(ok.count, 1);
    ha.shutdown().await;
}
