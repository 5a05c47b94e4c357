//! [`ZLinkHost`]: a started root — its MeshNodes, Channel calls through the process-local
//! route index, status and shutdown (spec 06 §6, §24; 28 §3, §9, §10).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use zlink_codec::records::HostState;
use zlink_codec::{ChannelName, MeshName};

use super::observe::{HostEvent, HostEvents};
use super::status::{HostStatus, ShutdownReport};
use crate::host::config::RunningHostedServices;
use crate::mesh::node::core::CallOptions;
use crate::mesh::node::discover::NodeDescriptor;
use crate::mesh::node::handle::MeshNode;
use crate::mesh::node::lifecycle::Lifecycle;
use crate::messaging::{InvalidCall, Message, Request, Unconfigured, ZLinkError};
use crate::relocation::MovesOf;
use zlink_location::LocationRuntime;

/// The default shutdown deadline (spec 28 §12).
pub const DEFAULT_SHUTDOWN_DEADLINE: Duration = Duration::from_secs(30);

pub(crate) struct HostInner {
    pub(crate) life: Arc<Lifecycle>,
    /// The observers of the host's state changes and terminal results.
    pub(crate) events: Arc<HostEvents>,
    pub(crate) nodes: Vec<MeshNode>,
    pub(crate) descriptors: Vec<Option<Arc<NodeDescriptor>>>,
    pub(crate) objects: Vec<Option<super::start::NodeObjects>>,
    pub(crate) channel_index: BTreeMap<ChannelName, usize>,
    pub(crate) location: tokio::sync::Mutex<Option<Arc<LocationRuntime>>>,
    pub(crate) hosted: tokio::sync::Mutex<Option<RunningHostedServices>>,
    pub(crate) tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    pub(crate) report: tokio::sync::OnceCell<ShutdownReport>,
    /// The host Relocate operation and its kept results.
    pub(crate) relocate: super::relocate::SlotCell,
    /// This host's application version (spec 28 §2, §4).
    pub(crate) application_version: u64,
    /// This host's maintenance wave, if any (spec 28 §4).
    pub(crate) maintenance_wave: Option<String>,
    /// The Location Store's and owner lease's health (`None` without a Location Store).
    pub(crate) health: Option<zlink_location::HealthProbe>,
    /// The host-wide Application Job Queue (spec 06 §3), shared by every MeshNode.
    pub(crate) jobs: Arc<crate::mesh::JobQueue>,
    /// The stores the root was given; closed at the end of shutdown by their last owner.
    pub(crate) stores: super::disposal::RootStores,
}

impl HostInner {
    /// Tells every observer of a terminal result, ordered against state changes.
    pub(crate) fn emit(&self, event: HostEvent) {
        self.life.serialized(|_| self.events.emit(event));
    }
}

impl Drop for HostInner {
    fn drop(&mut self) {
        // Dropped without shutdown: no task outlives the host.
        for t in self.tasks.lock().drain(..) {
            t.abort();
        }
    }
}

/// A started ZLink root (cheap to clone). Keep it for the host's lifetime and end it with
/// [`shutdown`](Self::shutdown); dropping every clone without shutdown aborts its tasks
/// without the orderly cleanup (descriptors and the owner lease then expire on their own).
#[derive(Clone)]
pub struct ZLinkHost {
    inner: Arc<HostInner>,
}

#[cfg(test)]
impl ZLinkHost {
    /// The host-wide Application Job Queue (tests hold its permits).
    pub(crate) fn job_queue(&self) -> Arc<crate::mesh::JobQueue> {
        Arc::clone(&self.inner.jobs)
    }

    /// The object host of this root's `i`-th MeshNode (tests reach the internals through it).
    pub(crate) fn object_host(&self, i: usize) -> Arc<crate::objects::host::ObjectHost> {
        match &self.inner.objects[i] {
            Some(o) => Arc::clone(&o.host),
            None => panic!("MeshNode {i} has no object role"),
        }
    }

    /// The Store key of the descriptor of this root's `i`-th MeshNode.
    pub(crate) fn descriptor_key(&self, i: usize) -> zlink_store_spi::StoreKey {
        match &self.inner.descriptors[i] {
            Some(d) => d.store_key(),
            None => panic!("MeshNode {i} publishes no descriptor"),
        }
    }

    /// The discovery of this root's `i`-th MeshNode, if it has one (an object role over a
    /// Location Store).
    pub(crate) fn discovery_of(&self, i: usize) -> Option<Arc<zlink_location::Discovery>> {
        self.inner.objects[i]
            .as_ref()
            .and_then(|o| o.discovery.clone())
    }

    /// The discovery of this root's `i`-th MeshNode.
    pub(crate) fn object_discovery(&self, i: usize) -> Arc<zlink_location::Discovery> {
        match self.inner.objects[i]
            .as_ref()
            .and_then(|o| o.discovery.clone())
        {
            Some(d) => d,
            None => panic!("MeshNode {i} has no discovery"),
        }
    }
}

impl fmt::Debug for ZLinkHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZLinkHost")
            .field("state", &self.inner.life.state())
            .field("nodes", &self.inner.nodes)
            .finish_non_exhaustive()
    }
}

impl ZLinkHost {
    pub(crate) fn new(inner: HostInner) -> Self {
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The shared host (for the `impl ZLinkHost` blocks of sibling modules).
    pub(crate) fn inner(&self) -> &Arc<HostInner> {
        &self.inner
    }

    /// The host state (spec 28 §3).
    pub fn state(&self) -> HostState {
        self.inner.life.state()
    }

    /// The MeshNode registered under `mesh`.
    pub fn node(&self, mesh: &MeshName) -> Option<MeshNode> {
        self.inner
            .nodes
            .iter()
            .find(|n| n.mesh_name() == mesh)
            .cloned()
    }

    /// Every MeshNode, in registration order.
    pub fn nodes(&self) -> &[MeshNode] {
        &self.inner.nodes
    }

    /// Waits, at most `within` in all, until every MeshNode of this host is ready to call its
    /// mesh ([`MeshNode::ready`]: its first discovery list read and a Ready connection to every
    /// peer that list says it must connect to). Call it after [`start`](crate::ZLinkBuilder)
    /// instead of polling the status for peers.
    pub async fn ready(&self, within: Duration) -> Result<(), crate::status::NotReady> {
        let deadline = tokio::time::Instant::now() + within;
        for node in self.nodes() {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            node.ready(left).await.map_err(|mut e| {
                e.within = within;
                e
            })?;
        }
        Ok(())
    }

    fn channel_node(&self, channel: &ChannelName) -> Result<&MeshNode, ZLinkError> {
        self.inner
            .channel_index
            .get(channel)
            .and_then(|i| self.inner.nodes.get(*i))
            .ok_or_else(|| ZLinkError::NoRoute {
                target: crate::messaging::Target::Channel(channel.clone()),
            })
    }

    /// A one-way send on `channel`: the process-local route index names its MeshNode, which
    /// picks one eligible Server member by weight and submits, in one call (spec 06 §6). A
    /// name not in the index is `NotFound`; no Ready member with a positive weight is
    /// `Unavailable`.
    pub async fn channel_send<M: Message>(
        &self,
        channel: &ChannelName,
        message: &M,
    ) -> Result<(), ZLinkError> {
        self.channel_send_with(channel, message, &CallOptions::default())
            .await
    }

    /// [`channel_send`](Self::channel_send) with call options.
    pub async fn channel_send_with<M: Message>(
        &self,
        channel: &ChannelName,
        message: &M,
        options: &CallOptions,
    ) -> Result<(), ZLinkError> {
        self.channel_node(channel)?
            .channel_send(channel, message, options)
            .await
    }

    /// A request on `channel` (member selection and submit in one call; a started request is
    /// never resubmitted to another member). When this node is the selected member, the
    /// error is the handler's own, as for a [`MeshNode::request`] to itself.
    pub async fn channel_request<R: Request>(
        &self,
        channel: &ChannelName,
        request: &R,
    ) -> Result<R::Reply, ZLinkError> {
        self.channel_request_with(channel, request, &CallOptions::default())
            .await
    }

    /// [`channel_request`](Self::channel_request) with call options.
    pub async fn channel_request_with<R: Request>(
        &self,
        channel: &ChannelName,
        request: &R,
        options: &CallOptions,
    ) -> Result<R::Reply, ZLinkError> {
        self.channel_node(channel)?
            .channel_request(channel, request, options)
            .await
    }

    /// The Actor manager of the one object mesh of this root (spec 06 §15 mesh selection): no
    /// MeshNode with an object role is `NotConfigured`; several are `InvalidOperation` (use
    /// [`actors_in`](Self::actors_in)).
    pub fn actors(&self) -> Result<crate::objects::ActorManager, ZLinkError> {
        Ok(crate::objects::ActorManager::new(self.object_client(None)?))
    }

    /// The Actor manager of the object mesh `mesh`: an unknown MeshName is `NotFound`, one
    /// without an object role `NotConfigured`.
    pub fn actors_in(&self, mesh: &MeshName) -> Result<crate::objects::ActorManager, ZLinkError> {
        Ok(crate::objects::ActorManager::new(
            self.object_client(Some(mesh))?,
        ))
    }

    /// The User Spot manager of the one object mesh of this root (the same mesh selection as
    /// [`actors`](Self::actors)).
    pub fn spots(&self) -> Result<crate::objects::SpotManager, ZLinkError> {
        Ok(crate::objects::SpotManager::new(self.object_client(None)?))
    }

    /// The User Spot manager of the object mesh `mesh`.
    pub fn spots_in(&self, mesh: &MeshName) -> Result<crate::objects::SpotManager, ZLinkError> {
        Ok(crate::objects::SpotManager::new(
            self.object_client(Some(mesh))?,
        ))
    }

    /// The object client of `mesh`, or of the one object mesh (spec 06 §15 selection table).
    fn object_client(
        &self,
        mesh: Option<&MeshName>,
    ) -> Result<crate::objects::client::ObjectClient, ZLinkError> {
        let i = match mesh {
            Some(mesh) => self
                .inner
                .nodes
                .iter()
                .position(|n| n.mesh_name() == mesh)
                .ok_or_else(|| ZLinkError::NoRoute {
                    target: crate::messaging::Target::Mesh(mesh.clone()),
                })?,
            None => {
                let mut found = self
                    .inner
                    .objects
                    .iter()
                    .enumerate()
                    .filter(|(_, o)| o.is_some());
                let first = found.next();
                if found.next().is_some() {
                    return Err(ZLinkError::InvalidCall(InvalidCall::SeveralObjectNodes));
                }
                match first {
                    Some((i, _)) => i,
                    None => return Err(ZLinkError::NotConfigured(Unconfigured::NoObjectNode)),
                }
            }
        };
        let node = self.inner.nodes[i].clone();
        match &self.inner.objects[i] {
            Some(o) => {
                let discovery = o
                    .discovery
                    .clone()
                    .ok_or(ZLinkError::NotConfigured(Unconfigured::AutomaticTopology))?;
                Ok(crate::objects::client::ObjectClient {
                    node,
                    objects: Arc::clone(&o.host),
                    discovery,
                })
            }
            None => Err(ZLinkError::NotConfigured(Unconfigured::NoObjectRole)),
        }
    }

    /// Per Object Client/Server node of this root: its slots in use (active) and secured by
    /// creations in progress (reserved), read from the Location Store (spec 06 §24, 21 §4).
    /// It scans the authority rows: an operator query, not a hot path.
    pub async fn object_capacity(
        &self,
    ) -> Result<Vec<(MeshName, zlink_codec::RoutingId, zlink_location::NodeUsage)>, ZLinkError>
    {
        let mut out = Vec::new();
        for (node, o) in self.inner.nodes.iter().zip(&self.inner.objects) {
            let Some(o) = o else { continue };
            let key = zlink_location::NodeKey {
                mesh: node.mesh_name().clone(),
                routing_id: node.routing_id().clone(),
            };
            let usage = o
                .host
                .location
                .authority()
                .node_usage(&key)
                .await
                .map_err(crate::objects::host::store_failure)?;
            out.push((key.mesh, key.routing_id, usage));
        }
        Ok(out)
    }

    /// The location runtime of this root, or `NotConfigured` without a Location Store.
    async fn location_runtime(&self) -> Result<Arc<LocationRuntime>, ZLinkError> {
        match self.inner.location.lock().await.as_ref() {
            Some(rt) => Ok(Arc::clone(rt)),
            None => Err(ZLinkError::NotConfigured(Unconfigured::LocationStore)),
        }
    }

    /// Where the Actor or Spot `id` lives, for operational tools (spec 21 §7.4): `None` when no
    /// record exists (nothing is created); `Creating`, `Ready`, or `Unavailable` when its
    /// owner's lease is gone. A Store failure is an `Unavailable` error
    /// ([`ZLinkError::LocationQueryFailed`]), never an absent object.
    pub async fn locate(
        &self,
        kind: zlink_location::LookupKind,
        id: &zlink_codec::ObjectId,
    ) -> Result<Option<zlink_location::LocationEntry>, ZLinkError> {
        self.location_runtime()
            .await?
            .lookup(kind, id)
            .await
            .map_err(query_failure)
    }

    /// One page (1..=1000 entries, at most 4 MiB encoded) of the location list of `filter`
    /// (object kind, optional stable type and MeshName), for operational tools (spec 21 §7.4):
    /// pass `None` to start a cycle and each page's `next` token to go on. A Store failure
    /// fails the whole page as an `Unavailable` error ([`ZLinkError::LocationQueryFailed`]).
    pub async fn list_locations(
        &self,
        filter: zlink_location::ListFilter,
        page_size: u32,
        token: Option<&zlink_location::PageToken>,
    ) -> Result<zlink_location::Page, ZLinkError> {
        self.location_runtime()
            .await?
            .list(filter, page_size, token)
            .await
            .map_err(|e| match e {
                zlink_location::LocationError::InvalidOperation(i) => {
                    ZLinkError::InvalidCall(InvalidCall::LocationQuery {
                        source: Arc::new(i).into(),
                    })
                }
                other => query_failure(other),
            })
    }

    /// A caller-owned snapshot of the host and every MeshNode (spec 06 §24).
    pub fn status(&self) -> HostStatus {
        HostStatus {
            state: self.state(),
            last_relocation: self.inner.relocate.lock().last(),
            shutdown: self.inner.report.get().cloned(),
            nodes: self.inner.nodes.iter().map(MeshNode::status).collect(),
            health: self.location_health(),
            completions: self
                .per_object_host(|o| o.relocations().completions.counts())
                .fold(super::CompletionCounts::default(), |a, b| a + b),
            dropped_one_way: self
                .per_object_host(|o| o.relocations().dropped_one_way())
                .sum(),
            location_update_failed: self
                .per_object_host(|o| o.relocations().location_updates_failed())
                .sum(),
            live: self
                .per_object_host(|o| {
                    let (actors, spots) = o.live_totals();
                    super::LiveObjects {
                        mesh: o.mesh.clone(),
                        routing_id: o.rid.clone(),
                        actors,
                        spots,
                    }
                })
                .collect(),
            application_jobs: self.application_jobs(),
        }
    }

    /// `f` of each object host of this root (the per-node parts of [`status`](Self::status)).
    fn per_object_host<'a, T: 'a>(
        &'a self,
        f: impl Fn(&crate::objects::host::ObjectHost) -> T + 'a,
    ) -> impl Iterator<Item = T> + 'a {
        self.inner.objects.iter().flatten().map(move |o| f(&o.host))
    }

    /// The host-wide Application Job Queue's depth, effective maximum and receive-flow state
    /// now (spec 06 §3), without the rest of [`status`](Self::status).
    pub fn application_jobs(&self) -> super::ApplicationJobQueueStatus {
        let q = &self.inner.jobs;
        super::ApplicationJobQueueStatus {
            in_use: q.in_use(),
            effective_max: q.limits().effective_max,
            paused: q.is_paused(),
        }
    }

    /// An ordered stream of this host's state changes and terminal results (spec 28 §2,
    /// §11): the current state first, then every change; nothing is dropped for a slow
    /// observer.
    pub fn observe(&self) -> super::HostObserver {
        let events = &self.inner.events;
        self.inner.life.serialized(|now| events.subscribe(now))
    }

    /// Moves every stateful object of this host to other nodes and leaves the host
    /// `Relocated` on success, its descriptors, listeners and connections kept (spec 06 §2,
    /// 28 §2–§8; see [`RelocateOptions`](super::RelocateOptions) and the `relocate` module
    /// docs of this crate's `host` layer for the order). Invalid options are an error before
    /// anything changes; every other ending is a [`RelocationResult`](super::RelocationResult)
    /// — `Relocated`, or `Blocked` with its reason. Concurrent calls with the same mode and
    /// effective version share one operation; other options get `Blocked/OperationInProgress`
    /// at once; a call in `Relocated` returns the first `Relocated` result. Dropping the
    /// returned future ends only this caller's wait. Call [`shutdown`](Self::shutdown)
    /// afterwards.
    pub async fn relocate(
        &self,
        options: super::RelocateOptions,
    ) -> Result<super::RelocationResult, super::RelocateError> {
        super::relocate::relocate(&self.inner, options).await
    }

    /// Moves one Actor or Spot of this host to `target` (a named Object Server, or any
    /// eligible one) through the same unit a host Relocate runs for it: the same policies,
    /// target filters, results and guarantees, the host staying `Serving` (beyond the spec,
    /// as Orleans' grain migration; see [`ObjectToMove`](super::ObjectToMove)). Refusals
    /// come before anything moves, the object serving where it is:
    /// [`InvalidCall::ObjectRelocation`](crate::handler::InvalidCall::ObjectRelocation) with
    /// its [`ObjectRelocationRefusal`](crate::handler::ObjectRelocationRefusal). A move that
    /// fails is the unit's error (kind as for a host Relocate's unit); before its owner change
    /// the object serves here again.
    pub async fn relocate_object(
        &self,
        object: impl Into<super::ObjectToMove>,
        target: super::ObjectTarget,
    ) -> Result<super::ObjectRelocation, ZLinkError> {
        super::relocate::relocate_object(&self.inner, object.into(), target).await
    }

    /// [`shutdown_within`](Self::shutdown_within) the default 30-second deadline.
    pub async fn shutdown(&self) -> ShutdownReport {
        self.shutdown_within(DEFAULT_SHUTDOWN_DEADLINE).await
    }

    /// Shuts the host down (spec 28 §9): `Draining` (new application admission ends with
    /// `ShuttingDown`), peers told to stop selecting this host, `Draining` descriptors,
    /// accepted work finished until `deadline`, every Entry, User and Instance Spot's closing
    /// callback run with a `HostShutdown` context and the remaining deadline (a failed one →
    /// `ForceStopped/TeardownFailed`, one still running at the deadline →
    /// `ForceStopped/DeadlineExceeded`), then this run's authority rows swept,
    /// descriptors withdrawn, the owner lease released, hosted services stopped in reverse,
    /// connections and listeners closed and every task ended. Concurrent and repeated calls
    /// share one run and return the same report.
    pub async fn shutdown_within(&self, deadline: Duration) -> ShutdownReport {
        self.inner
            .report
            .get_or_init(|| super::shutdown::run_shutdown(&self.inner, deadline))
            .await
            .clone()
    }
}

/// A location query's failure other than a bad argument (spec 21 §7.4: "Store query failure"
/// is an `Unavailable` framework error).
fn query_failure(e: zlink_location::LocationError) -> ZLinkError {
    ZLinkError::LocationQueryFailed {
        source: Arc::new(e).into(),
    }
}
