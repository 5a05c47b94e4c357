//! The shared test mesh: roots of one MeshNode of [`mesh`] over one Location Store, each with
//! a Relocation Store of its own, and a mesh of Object Servers and one Object Client waited for
//! until every node has every other one as a Ready peer and in its discovery list (re-exported
//! by `support`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use zlink_codec::RoutingId;
use zlink_codec::records::{HostState, ObjectRole};
use zlink_store_spi::{DynLocationStore, DynRelocationStore, MemoryRelocationStore};

use super::support::{RootOptions, WAIT, launch, mesh, wait_peers};
use crate::host::ZLinkHost;
use crate::host::config::{MeshNodeBuilder, ZLink, ZLinkBuilder};
use crate::mesh::node::MeshNode;
use crate::messaging::NodeHandler;

/// A started root and its one MeshNode.
pub(crate) type Root = (ZLinkHost, MeshNode);

/// Starts a root over `store` with the Relocation Store `relocation`, its builder shaped by
/// `root` (options, versions, waves), with one MeshNode of [`mesh`] of object role `role`
/// configured further by `node` (whatever the role).
pub(crate) async fn object_root_with(
    store: Arc<dyn DynLocationStore>,
    relocation: Arc<dyn DynRelocationStore>,
    role: ObjectRole,
    root: impl FnOnce(ZLinkBuilder<NodeHandler>) -> ZLinkBuilder<NodeHandler>,
    node: impl FnOnce(MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler>,
) -> Root {
    launch(
        root(ZLink::builder())
            .location_store(store)
            .relocation_store(relocation)
            .route_mesh(mesh(), move |n| node(n.object_role(role))),
    )
    .await
}

/// Starts a root over `store` with a memory Relocation Store of its own and `options`, one
/// MeshNode of [`mesh`] of object role `role`; an Object Server's node is configured further by
/// `serve` (its object types), any other role's is not.
pub(crate) async fn object_root(
    store: Arc<dyn DynLocationStore>,
    role: ObjectRole,
    options: &impl RootOptions,
    serve: impl FnOnce(MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler>,
) -> Root {
    let relocation: Arc<dyn DynRelocationStore> = Arc::new(MemoryRelocationStore::new());
    object_root_with(
        store,
        relocation,
        role,
        |b| options.apply(b),
        move |n| {
            if role == ObjectRole::Server {
                serve(n)
            } else {
                n
            }
        },
    )
    .await
}

/// Waits until every node of `roots` has every other one as a Ready peer with known weights
/// and, where it discovers through the Location Store, lists every other node's descriptor
/// (so each has the others as placement candidates).
pub(crate) async fn wait_connected<'a>(roots: impl IntoIterator<Item = &'a Root>) {
    let roots: Vec<&Root> = roots.into_iter().collect();
    let others = roots.len().saturating_sub(1);
    for (_, node) in &roots {
        wait_peers(node, others).await;
    }
    let hosts: Vec<&ZLinkHost> = roots.iter().map(|(h, _)| h).collect();
    wait_discovered(&hosts).await;
}

/// Waits until the discovery list of every host of `hosts` (those that discover through the
/// Location Store) names the first MeshNode of every host of `hosts`, itself included — as
/// `serving` when that host serves: each then has them all as placement and relocation
/// candidates.
pub(crate) async fn wait_discovered(hosts: &[&ZLinkHost]) {
    // A host that serves must be listed as serving; one that no longer does (relocating,
    // relocated) only listed.
    let rids: Vec<(RoutingId, bool)> = hosts
        .iter()
        .map(|h| {
            let serving = h.state() == HostState::Serving;
            (h.nodes()[0].routing_id().clone(), serving)
        })
        .collect();
    let deadline = tokio::time::Instant::now() + WAIT;
    for host in hosts {
        let Some(discovery) = host.discovery_of(0) else {
            continue;
        };
        loop {
            let listed = discovery.last_list().unwrap_or_default();
            let missing = rids.iter().find(|(rid, serving)| {
                !listed.iter().any(|d| {
                    &d.record.descriptor.routing_id == rid
                        && (!serving || d.record.descriptor.state == HostState::Serving)
                })
            });
            let Some((missing, _)) = missing else {
                break;
            };
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} does not list {missing} as serving in its discovery",
                host.nodes()[0].routing_id()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Waits until the discovery list of every host of `hosts` shows the node `rid` in `state`
/// (for example a relocated host's `relocated` descriptor, after which no one places there).
pub(crate) async fn wait_listed_in_state(hosts: &[&ZLinkHost], rid: &RoutingId, state: HostState) {
    super::support::wait_until("every discovery list shows the node's state", || {
        hosts.iter().all(|h| {
            h.discovery_of(0)
                .and_then(|d| d.last_list())
                .is_some_and(|listed| {
                    listed.iter().any(|n| {
                        &n.record.descriptor.routing_id == rid && n.record.descriptor.state == state
                    })
                })
        })
    })
    .await;
}

/// Shuts `host` down and checks it stopped cleanly with nothing left to its self-sweep
/// (`what` says what would have been left).
pub(crate) async fn shutdown_leaves_nothing_to_sweep(host: &ZLinkHost, what: &str) {
    let report = host.shutdown().await;
    assert_eq!(
        report.outcome,
        crate::host::ShutdownOutcome::Stopped,
        "{report:?}"
    );
    assert_eq!(
        report.sweep.map(|s| s.matched).unwrap_or_default(),
        0,
        "{what}"
    );
}

/// Something on one node: a node's RoutingId, or a ref naming the node it was on.
pub(crate) trait OnNode {
    /// The node's RoutingId.
    fn node_rid(&self) -> &RoutingId;
}

impl OnNode for RoutingId {
    fn node_rid(&self) -> &RoutingId {
        self
    }
}

impl OnNode for crate::objects::ActorRef {
    fn node_rid(&self) -> &RoutingId {
        &self.node
    }
}

impl OnNode for crate::objects::SpotRef {
    fn node_rid(&self) -> &RoutingId {
        &self.node
    }
}

/// `N` Object Servers and one Object Client over one store, all Ready peers of each other and
/// each in every discovery list, with what the test observes of them (`seen`).
pub(crate) struct TestMesh<S, const N: usize = 2> {
    /// The Object Servers, in start order.
    pub(crate) servers: [Root; N],
    /// The Object Client.
    pub(crate) client: Root,
    /// What the test observes of every node.
    pub(crate) seen: S,
}

impl<S, const N: usize> TestMesh<S, N> {
    /// Starts the `N` servers, then the client, each with `root(role)`, and waits until they
    /// are connected ([`wait_connected`]).
    pub(crate) async fn start<F, Fut>(seen: S, mut root: F) -> Self
    where
        F: FnMut(ObjectRole) -> Fut,
        Fut: Future<Output = Root>,
    {
        let mut servers = Vec::with_capacity(N);
        for _ in 0..N {
            servers.push(root(ObjectRole::Server).await);
        }
        let client = root(ObjectRole::Client).await;
        let Ok(servers) = <[Root; N]>::try_from(servers) else {
            unreachable!("N servers were started");
        };
        let mesh = Self {
            servers,
            client,
            seen,
        };
        wait_connected(mesh.all()).await;
        mesh
    }

    /// Every root: the servers, then the client.
    pub(crate) fn all(&self) -> Vec<&Root> {
        self.servers.iter().chain([&self.client]).collect()
    }

    /// The server whose node `on` is on, and another one.
    pub(crate) fn owner_and_other(&self, on: &impl OnNode) -> (&ZLinkHost, &ZLinkHost) {
        let rid = on.node_rid();
        let owner = self
            .servers
            .iter()
            .position(|(_, n)| n.routing_id() == rid)
            .unwrap_or_else(|| panic!("no server is {rid}"));
        let other = (owner + 1) % N;
        (&self.servers[owner].0, &self.servers[other].0)
    }

    /// Shuts the client down, then every server.
    pub(crate) async fn shutdown(self) {
        self.client.0.shutdown().await;
        for (host, _) in self.servers {
            host.shutdown().await;
        }
    }
}
