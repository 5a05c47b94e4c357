//! Shared helpers: message types, root builders over a shared store, waiting for peers, and
//! the shared test mesh ([`TestMesh`], from `mesh_harness`).

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use zlink_codec::{ChannelName, MeshName};
use zlink_store_spi::DynLocationStore;

use crate::host::ZLinkHost;
use crate::host::config::{MeshNodeBuilder, ZLink, ZLinkBuilder};
use crate::mesh::node::MeshNode;
use crate::messaging::{Message, NodeHandler, Request};
use zlink_location::LocationOptions;
use zlink_testkit::Harness;

pub(crate) use super::mesh_harness::*;

/// How long any wait in these tests may take before it fails.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Echo {
    pub(crate) text: String,
}
impl Message for Echo {
    const PACKET: &'static str = "Echo";
}
impl Request for Echo {
    type Reply = String;
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Who;
impl Message for Who {
    const PACKET: &'static str = "Who";
}
impl Request for Who {
    type Reply = String;
}

pub(crate) fn mesh() -> MeshName {
    MeshName::new("game").expect("mesh")
}

pub(crate) fn channel(name: &str) -> ChannelName {
    ChannelName::new(name).expect("channel")
}

/// Location options that discover quickly.
pub(crate) fn fast_options() -> LocationOptions {
    LocationOptions::default().polling_interval(Duration::from_millis(100))
}

/// Starts a root with one MeshNode of [`mesh`] over `store`, configured by `configure`.
pub(crate) async fn start_on(
    store: &Arc<dyn DynLocationStore>,
    configure: impl FnOnce(MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler>,
) -> (ZLinkHost, MeshNode) {
    start_shaped(store, |root| root, configure).await
}

/// Starts a root over `store` whose root builder is first shaped by `root`, with one MeshNode
/// of [`mesh`] configured by `configure`.
async fn start_shaped(
    store: &Arc<dyn DynLocationStore>,
    root: impl FnOnce(ZLinkBuilder<NodeHandler>) -> ZLinkBuilder<NodeHandler>,
    configure: impl FnOnce(MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler>,
) -> (ZLinkHost, MeshNode) {
    launch(
        root(ZLink::builder())
            .location_store(Arc::clone(store))
            .location_options(fast_options())
            .route_mesh(mesh(), configure),
    )
    .await
}

/// Starts the root `builder` describes and returns it with its MeshNode of [`mesh`].
pub(crate) async fn launch(builder: ZLinkBuilder<NodeHandler>) -> (ZLinkHost, MeshNode) {
    let host = builder.build().start().await.expect("the host starts");
    let node = host.node(&mesh()).expect("the node");
    (host, node)
}

/// Starts a root over the harness's store.
pub(crate) async fn start(
    h: &Harness,
    configure: impl FnOnce(MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler>,
) -> (ZLinkHost, MeshNode) {
    start_on(&h.store, configure).await
}

/// Waits until `node` has `n` Ready peers whose weights are known.
pub(crate) async fn wait_peers(node: &MeshNode, n: usize) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let s = node.status();
        if s.peers.iter().filter(|p| p.weights.is_some()).count() >= n {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} has {} ready peers, expected {n}",
            s.routing_id,
            s.peers.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A node answering `Echo` with its text and `Who` with its RID.
pub(crate) fn echo_node(b: MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler> {
    b.on_request::<Echo, _, _>(|e, _ctx| async move { Ok(e.text) })
        .on_request::<Who, _, _>(|_, ctx| async move { Ok(ctx.target_rid().to_string()) })
}

pub(crate) use zlink_testkit::on_every_store;

/// Starts a root over the harness's store whose root builder is first shaped by `root` (to
/// register filters), with one MeshNode of [`mesh`] configured by `configure`.
pub(crate) async fn start_root(
    h: &Harness,
    root: impl FnOnce(ZLinkBuilder<NodeHandler>) -> ZLinkBuilder<NodeHandler>,
    configure: impl FnOnce(MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler>,
) -> (ZLinkHost, MeshNode) {
    start_shaped(&h.store, root, configure).await
}

/// Starts a root without a Location Store whose one MeshNode of [`mesh`] uses
/// `Topology::Manual`, configured further by `configure`.
pub(crate) async fn start_manual(
    configure: impl FnOnce(MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler>,
) -> (ZLinkHost, MeshNode) {
    let host = ZLink::builder()
        .route_mesh(mesh(), |b| {
            configure(b.topology(crate::host::config::Topology::Manual))
        })
        .build()
        .start()
        .await
        .expect("the manual host starts");
    let node = host.node(&mesh()).expect("the node");
    (host, node)
}

/// Polls `cond` every 10 ms until it holds; fails after [`WAIT`] naming `what`.
pub(crate) async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A gate handlers wait at until the test opens it (once open, it stays open).
#[derive(Debug, Clone)]
pub(crate) struct Gate(Arc<tokio::sync::Semaphore>);

impl Gate {
    pub(crate) fn new() -> Self {
        Self(Arc::new(tokio::sync::Semaphore::new(0)))
    }

    /// Waits until the gate is open.
    pub(crate) async fn pass(&self) {
        // The semaphore never gets a permit: `acquire` returns only once it is closed.
        let _ = self.0.acquire().await;
    }

    pub(crate) fn open(&self) {
        self.0.close();
    }
}

/// Shuts every host down (bounded by [`WAIT`] each), whatever state it is in.
pub(crate) async fn stop_all(hosts: &[&ZLinkHost]) {
    for h in hosts {
        tokio::time::timeout(WAIT, h.shutdown_within(Duration::from_secs(2)))
            .await
            .expect("shutdown ends");
    }
}

/// Short lease timings for tests that wait for a lease to expire: 100 + 100 < 1000 - 500.
pub(crate) fn short_lease() -> LocationOptions {
    LocationOptions::default()
        .owner_lease_renew_interval(Duration::from_millis(100))
        .owner_lease_renew_timeout(Duration::from_millis(100))
        .owner_lease_ttl(Duration::from_millis(1000))
        .owner_lease_fencing_margin(Duration::from_millis(500))
}

/// The Store key of an object's authority record.
pub(crate) fn authority_key(
    kind: zlink_location::ObjectKind,
    id: &zlink_location::ObjectId,
) -> zlink_store_spi::StoreKey {
    zlink_location::authority_key(kind, id).expect("authority key")
}

/// A location runtime of its own over the harness's store (default options, renew loop off),
/// for tests that read or write the Store beside the roots.
pub(crate) async fn location_runtime(h: &Harness) -> zlink_location::LocationRuntime {
    zlink_location::LocationRuntime::builder(h.store.clone())
        .renew_loop(false)
        .start()
        .await
        .expect("runtime starts")
}

/// What a test root is configured with: its location options, and optionally relocation
/// settings beside them ([`WithRelocation`]).
pub(crate) trait RootOptions {
    /// The builder with these options set.
    fn apply<H>(&self, builder: ZLinkBuilder<H>) -> ZLinkBuilder<H>;
}

impl RootOptions for LocationOptions {
    fn apply<H>(&self, builder: ZLinkBuilder<H>) -> ZLinkBuilder<H> {
        builder.location_options(self.clone())
    }
}

/// Location options with relocation settings.
#[derive(Debug, Clone)]
pub(crate) struct WithRelocation(
    pub(crate) LocationOptions,
    pub(crate) crate::objects::RelocationOptions,
);

impl RootOptions for WithRelocation {
    fn apply<H>(&self, builder: ZLinkBuilder<H>) -> ZLinkBuilder<H> {
        builder
            .location_options(self.0.clone())
            .relocation_options(self.1.clone())
    }
}

/// A counter Actor: `Incr` adds one and answers the count.
pub(crate) struct Counter {
    pub(crate) n: u64,
}
impl crate::objects::Actor for Counter {}

/// Adds one to a [`Counter`]; answers the new count.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Incr;
impl Message for Incr {
    const PACKET: &'static str = "Incr";
}
impl Request for Incr {
    type Reply = u64;
}

/// A root with one Object Server of the `counter` Actor type (DisableRelocation) over `store`,
/// each factory run counted in `factories`.
pub(crate) async fn counter_server(
    store: Arc<dyn DynLocationStore>,
    options: LocationOptions,
    factories: &Arc<std::sync::atomic::AtomicUsize>,
) -> (ZLinkHost, MeshNode) {
    let host = counter_root(ZLink::builder().location_store(store), options, factories).await;
    let node = host.node(&mesh()).expect("node");
    (host, node)
}

/// [`counter_server`] on a builder that already holds its stores.
pub(crate) async fn counter_root(
    builder: ZLinkBuilder<NodeHandler>,
    options: LocationOptions,
    factories: &Arc<std::sync::atomic::AtomicUsize>,
) -> ZLinkHost {
    let f = Arc::clone(factories);
    builder
        .location_options(options)
        .route_mesh(mesh(), move |b| {
            b.object_role(zlink_codec::records::ObjectRole::Server)
                .actor_type::<Counter>("counter", move |t| {
                    t.factory(move |_ctx| {
                        let f = Arc::clone(&f);
                        async move {
                            f.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
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
                })
        })
        .build()
        .start()
        .await
        .expect("the host starts")
}

/// [`counter_server`] with short leases (renewed every 100 ms) and discovery polling every
/// 100 ms: tests that wait for leases, takeovers or audits.
pub(crate) async fn short_lease_counter_server(
    store: Arc<dyn DynLocationStore>,
) -> (ZLinkHost, MeshNode) {
    let options = short_lease().polling_interval(Duration::from_millis(100));
    counter_server(store, options, &Arc::default()).await
}

/// Three [`short_lease_counter_server`]s over `store`, each seeing the two others, and their
/// nodes.
pub(crate) async fn three_counter_servers(
    store: &Arc<dyn DynLocationStore>,
) -> ([ZLinkHost; 3], [MeshNode; 3]) {
    let (ha, a) = short_lease_counter_server(store.clone()).await;
    let (hb, b) = short_lease_counter_server(store.clone()).await;
    let (hc, c) = short_lease_counter_server(store.clone()).await;
    for n in [&a, &b, &c] {
        wait_peers(n, 2).await;
    }
    wait_discovered(&[&ha, &hb, &hc]).await;
    ([ha, hb, hc], [a, b, c])
}

/// Creates the `counter` Actors `{prefix}-0` .. `{prefix}-{n-1}` through `m`, each asked once.
pub(crate) async fn counters_asked_once(
    m: &crate::objects::ActorManager,
    prefix: &str,
    n: usize,
) -> Vec<crate::objects::ActorRef> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let r = m
            .get_or_create("counter", &format!("{prefix}-{i}"))
            .await
            .expect("created");
        assert_eq!(m.request(r.id.as_str(), &Incr).await.expect("incr"), 1);
        out.push(r);
    }
    out
}

/// How many live activations each actor id has across `hosts`.
pub(crate) fn live_per_id(hosts: &[&ZLinkHost]) -> std::collections::BTreeMap<String, usize> {
    let mut out = std::collections::BTreeMap::new();
    for h in hosts {
        for ((_, id), _, _) in h.object_host(0).live_list() {
            *out.entry(id.as_str().to_owned()).or_insert(0) += 1;
        }
    }
    out
}

/// Actors counted by every allocation row of the store.
pub(crate) async fn actors_counted(h: &zlink_testkit::Harness) -> u64 {
    zlink_testkit::snapshot_of(h.store.as_ref(), "node-capacity\0")
        .await
        .values()
        .map(|(bytes, _)| {
            zlink_location::CapacityRow::decode(bytes)
                .expect("allocation row")
                .actors
        })
        .sum()
}
