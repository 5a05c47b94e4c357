//! The admission gate is the only door for object work (spec 21 §5, §10): once an owner's
//! local admission deadline has passed — its Store unreachable, the lease not renewed — no
//! object message job starts on it (from the mesh, or queued before the deadline) and no
//! factory's activation is made live; the caller gets `Unavailable` and nothing runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::ObjectRole;
use zlink_store_conformance::{Fault, FaultyLocationStore, LocationOp};
use zlink_store_spi::DynLocationStore;

use super::support::*;
use crate::host::ZLinkHost;
use crate::host::config::{MeshNodeBuilder, ZLink};
use crate::host::tests::support::launch;
use crate::messaging::{
    ErrorKind, Message, Metadata, NodeHandler, OutboundMessage, Request, RouteKind,
};
use crate::objects::host::{ObjectHost, ObjectKey};
use crate::objects::registration::{MessageContext, ObjectCall};
use crate::objects::{Actor, ActorType};
use zlink_location::LocationOptions;
use zlink_testkit::Harness;

on_every_store!(
    object_messages_past_the_admission_deadline_are_refused_and_never_run,
    a_factory_finishing_past_the_admission_deadline_is_not_made_live,
);

/// An Actor whose handler runs are counted by the test.
struct Probe;
impl Actor for Probe {}

#[derive(Debug, Serialize, Deserialize)]
struct Ping;
impl Message for Ping {
    const PACKET: &'static str = "Ping";
}
impl Request for Ping {
    type Reply = u64;
}

#[derive(Debug, Serialize, Deserialize)]
struct Poke;
impl Message for Poke {
    const PACKET: &'static str = "Poke";
}

/// Holds the activation's turn until the test opens [`Probe::hold`].
#[derive(Debug, Serialize, Deserialize)]
struct Hold;
impl Message for Hold {
    const PACKET: &'static str = "Hold";
}
impl Request for Hold {
    type Reply = ();
}

/// What the test sees of the probe type: handler runs (`Ping` and `Poke`), factory runs,
/// `Hold` turns started; the factory waits at `factory`, a `Hold` turn at `hold`.
#[derive(Clone)]
struct Seen {
    runs: Arc<AtomicUsize>,
    factories: Arc<AtomicUsize>,
    holds: Arc<AtomicUsize>,
    factory: Gate,
    hold: Gate,
}

impl Seen {
    fn new() -> Self {
        Seen {
            runs: Arc::new(AtomicUsize::new(0)),
            factories: Arc::new(AtomicUsize::new(0)),
            holds: Arc::new(AtomicUsize::new(0)),
            factory: Gate::new(),
            hold: Gate::new(),
        }
    }

    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

/// A short owner lease: the admission deadline is 2 s after the last successful renew.
fn short_lease() -> LocationOptions {
    fast_options()
        .owner_lease_ttl(Duration::from_secs(3))
        .owner_lease_fencing_margin(Duration::from_secs(1))
        .owner_lease_renew_interval(Duration::from_millis(1000))
        .owner_lease_renew_timeout(Duration::from_millis(500))
}

fn probe_type(seen: &Seen) -> impl FnOnce(ActorType<Probe>) -> ActorType<Probe> {
    let (f, p, k, h) = (seen.clone(), seen.clone(), seen.clone(), seen.clone());
    move |t| {
        t.factory(move |_ctx| {
            let f = f.clone();
            async move {
                f.factories.fetch_add(1, Ordering::SeqCst);
                f.factory.pass().await;
                Ok(Probe)
            }
        })
        .disable_relocation()
        .on_request::<Ping, _>(move |_p, _req, _ctx| {
            let n = p.runs.fetch_add(1, Ordering::SeqCst) as u64 + 1;
            Box::pin(async move { Ok(n) })
        })
        .on_send::<Poke, _>(move |_p, _poke, _ctx| {
            k.runs.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move { Ok(()) })
        })
        .on_request::<Hold, _>(move |_p, _req, _ctx| {
            let h = h.clone();
            Box::pin(async move {
                h.holds.fetch_add(1, Ordering::SeqCst);
                h.hold.pass().await;
                Ok(())
            })
        })
    }
}

/// An owner and a client node: the owner (the only Object Server) over `faulty`, the client
/// over the harness's healthy store; both Ready with each other as peers.
async fn owner_and_client(
    h: &Harness,
    faulty: &Arc<FaultyLocationStore<Arc<dyn DynLocationStore>>>,
    seen: &Seen,
) -> (ZLinkHost, ZLinkHost) {
    let start = |store: Arc<dyn DynLocationStore>,
                 configure: Box<
        dyn FnOnce(MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler>,
    >| async move {
        launch(
            ZLink::builder()
                .location_store(store)
                .location_options(short_lease())
                .route_mesh(mesh(), configure),
        )
        .await
    };
    let probe = probe_type(seen);
    let (owner, on) = start(
        faulty.clone(),
        Box::new(|b| {
            b.object_role(ObjectRole::Server)
                .actor_type::<Probe>("probe", probe)
        }),
    )
    .await;
    let (client, cn) = start(
        Arc::clone(&h.store),
        Box::new(|b| b.object_role(ObjectRole::Client)),
    )
    .await;
    wait_peers(&on, 1).await;
    wait_peers(&cn, 1).await;
    // The client's discovery lists the owner as a placement candidate.
    wait_discovered(&[&owner, &client]).await;
    (owner, client)
}

fn objects_of(host: &ZLinkHost) -> Arc<ObjectHost> {
    Arc::clone(&host.actors().expect("manager").client.objects)
}

fn key(id: &str) -> ObjectKey {
    (
        AuthorityKind::Actor,
        zlink_codec::ObjectId::new(id).expect("id"),
    )
}

/// Queues `msg` as a request on the owner's activation of `id` directly (accepted or refused
/// on return); its output arrives on the receiver.
fn deliver<M: Message>(
    owner: &ZLinkHost,
    id: &str,
    msg: &M,
) -> (
    Result<(), crate::messaging::ZLinkError>,
    tokio::sync::oneshot::Receiver<crate::objects::registration::ObjectOutput>,
) {
    let inner = &owner.actors().expect("manager").client.node.inner;
    let msg = OutboundMessage::encode(inner.codecs(), msg, &Metadata::empty()).expect("encode");
    let call = ObjectCall {
        content_type: bytes::Bytes::copy_from_slice(msg.content_type.as_bytes()),
        payload: msg.payload.clone(),
        typed_reply: false,
        context: MessageContext {
            id: id.into(),
            packet: msg.packet.clone(),
            metadata: Metadata::empty(),
            relocation: Default::default(),
            node: Default::default(),
            timers: Default::default(),
        },
        job: crate::mesh::JobPermit::none(),
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let cost = crate::mesh::node::job_cost(msg.payload.len(), 0);
    let accepted =
        objects_of(owner).deliver(&key(id), RouteKind::Request, call, cost, Some(tx.into()));
    (accepted, rx)
}

/// Makes the owner's Store unreachable and waits until its admission deadline has passed.
async fn cut_off(faulty: &FaultyLocationStore<Arc<dyn DynLocationStore>>, owner: &ZLinkHost) {
    faulty.set_fault(LocationOp::ALL, Fault::UNAVAILABLE);
    let location = Arc::clone(&objects_of(owner).location);
    wait_until("the owner's admission deadline passes", || {
        !location.is_admitting()
    })
    .await;
}

fn unavailable<T: std::fmt::Debug>(out: &Result<T, crate::messaging::ZLinkError>) -> bool {
    matches!(out, Err(e) if e.kind() == ErrorKind::Unavailable)
}

async fn object_messages_past_the_admission_deadline_are_refused_and_never_run(h: &Harness) {
    let seen = Seen::new();
    seen.factory.open();
    let faulty = Arc::new(FaultyLocationStore::new(Arc::clone(&h.store)));
    let (ho, hc) = owner_and_client(h, &faulty, &seen).await;
    let client = hc.actors().expect("manager");
    client.get_or_create("probe", "p").await.expect("created");
    assert_eq!(client.request("p", &Ping).await.expect("ping"), 1);

    // A turn held across the deadline, and a Ping accepted behind it before the deadline.
    let (held, held_out) = deliver(&ho, "p", &Hold);
    held.expect("the hold is accepted");
    wait_until("the held turn runs", || {
        seen.holds.load(Ordering::SeqCst) == 1
    })
    .await;
    let (queued, queued_out) = deliver(&ho, "p", &Ping);
    queued.expect("accepted while the deadline is ahead");

    cut_off(&faulty, &ho).await;
    let before = seen.runs();
    seen.hold.open();
    let held_out = tokio::time::timeout(WAIT, held_out)
        .await
        .expect("hold ends");
    assert!(
        matches!(held_out, Ok(Ok(_))),
        "the started turn finishes: {held_out:?}"
    );
    let queued_out = tokio::time::timeout(WAIT, queued_out)
        .await
        .expect("the queued job ends")
        .expect("one terminal");
    assert!(
        unavailable(&queued_out),
        "a job starting past the deadline: {queued_out:?}"
    );

    // New work on the owner itself, and through the mesh from a client whose Store is fine.
    let (local, local_out) = deliver(&ho, "p", &Ping);
    assert!(
        unavailable(&local),
        "a local message past the deadline: {local:?}"
    );
    let local_out = local_out.await.expect("one terminal");
    assert!(unavailable(&local_out), "{local_out:?}");
    for _ in 0..20 {
        let out = client.request("p", &Ping).await;
        assert!(unavailable(&out), "a request past the deadline: {out:?}");
        let _ = client.send("p", &Poke).await;
    }
    // A one-way send that was admitted is refused on the owner; one more request orders
    // after it on the same connection.
    let _ = client.request("p", &Ping).await;
    assert_eq!(
        seen.runs(),
        before,
        "a handler ran past the owner's admission deadline"
    );
    faulty.heal();
    stop_all(&[&ho, &hc]).await;
}

async fn a_factory_finishing_past_the_admission_deadline_is_not_made_live(h: &Harness) {
    let seen = Seen::new();
    let faulty = Arc::new(FaultyLocationStore::new(Arc::clone(&h.store)));
    let (ho, hc) = owner_and_client(h, &faulty, &seen).await;
    let client = hc.actors().expect("manager");
    let creating = {
        let client = hc.actors().expect("manager");
        tokio::spawn(async move { client.get_or_create("probe", "slow").await })
    };
    wait_until("the owner's factory runs", || {
        seen.factories.load(Ordering::SeqCst) == 1
    })
    .await;
    cut_off(&faulty, &ho).await;
    seen.factory.open();
    let created = tokio::time::timeout(WAIT, creating)
        .await
        .expect("the creation ends")
        .expect("the task");
    assert!(
        unavailable(&created),
        "a factory finishing past the deadline: {created:?}"
    );
    assert!(
        objects_of(&ho).live_object(&key("slow")).is_none(),
        "the factory's activation was made live"
    );
    assert_eq!(client.find("slow").await.expect("find"), None, "not Ready");
    let out = client.request("slow", &Ping).await;
    assert!(out.is_err(), "a message reached it: {out:?}");
    assert_eq!(seen.runs(), 0, "a handler ran");
    faulty.heal();
    stop_all(&[&ho, &hc]).await;
}
