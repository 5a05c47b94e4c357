//! The validated, immutable plan a host starts from (spec 06 §23): every value here passed
//! startup validation.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use zlink_codec::payload::Registry;
use zlink_codec::records::ObjectRole;
use zlink_codec::{ChannelName, MeshName, RoutingId};
use zlink_store_spi::{DynLocationStore, DynRelocationStore};

use super::hosted::HostedService;
use crate::mesh::peer::{ManualPeer, Topology};
use crate::messaging::HandlerKey;
use zlink_location::{CapacityLimits, LocationOptions};

/// How a MeshNode's routing id is issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoutingIdPlan {
    /// `<prefix>-<lowercase uuid v4>`, new per lifecycle.
    Automatic {
        /// The validated prefix (1..=64 characters of `[A-Za-z0-9._-]`).
        prefix: String,
    },
    /// The same routing id every lifecycle (manual topology, object role None).
    Fixed(RoutingId),
}

/// One validated object type of an Object Server (spec 06 §15, §17).
#[derive(Debug, Clone)]
pub struct ObjectTypePlan {
    pub(crate) kind: zlink_codec::records::ObjectKind,
    pub(crate) stable_type: zlink_codec::StableType,
    pub(crate) relocation: crate::objects::RelocationChoice,
    pub(crate) execution: Option<crate::objects::SpotExecution>,
    pub(crate) readiness: Option<crate::objects::ReadinessMode>,
    pub(crate) registration: crate::objects::Registration,
}

impl ObjectTypePlan {
    /// Actor, User Spot or Instance Spot.
    pub fn kind(&self) -> zlink_codec::records::ObjectKind {
        self.kind
    }

    /// The stable type.
    pub fn stable_type(&self) -> &zlink_codec::StableType {
        &self.stable_type
    }

    /// The one relocation policy the configure step chose.
    pub fn relocation(&self) -> crate::objects::RelocationChoice {
        self.relocation
    }

    /// A User Spot's execution mode (`SpotWide` unless set; `None` for other kinds).
    pub fn execution(&self) -> Option<crate::objects::SpotExecution> {
        self.execution
    }

    /// A `SpotWide` User Spot's readiness mode (`AnyTurnBoundary` unless set; `None`
    /// otherwise).
    pub fn readiness(&self) -> Option<crate::objects::ReadinessMode> {
        self.readiness
    }
}

/// The validated configuration of one MeshNode.
#[derive(Debug)]
pub struct MeshNodePlan<H> {
    pub(crate) mesh: MeshName,
    pub(crate) routing_id: RoutingIdPlan,
    pub(crate) topology: Topology,
    pub(crate) bind_host: String,
    pub(crate) advertised_host: String,
    pub(crate) port: u16,
    pub(crate) channel_servers: BTreeMap<ChannelName, u16>,
    pub(crate) channel_clients: BTreeSet<ChannelName>,
    pub(crate) manual_peers: Vec<ManualPeer>,
    pub(crate) handlers: BTreeMap<HandlerKey, H>,
    pub(crate) object_role: ObjectRole,
    pub(crate) placement_weight: u16,
    pub(crate) capacity_limits: CapacityLimits,
    pub(crate) activation_concurrency: u32,
    pub(crate) location_options: LocationOptions,
    pub(crate) relocation_options: super::RelocationOptions,
    pub(crate) mailbox_jobs: usize,
    pub(crate) mailbox_bytes: usize,
    pub(crate) timer_limits: crate::objects::TimerLimits,
    pub(crate) object_types: Vec<ObjectTypePlan>,
    pub(crate) entry_callback: Option<crate::objects::EntryCallback>,
    pub(crate) entry_closing: Option<crate::objects::EntryClosing>,
    pub(crate) tls: Option<zlink_transport::MeshTls>,
    /// The replaced network and fixed transport seed (`MeshNodeBuilder::network`).
    pub(crate) transport: TransportSeam,
}

impl<H> MeshNodePlan<H> {
    /// The object types this Object Server registers, in registration order.
    pub fn object_types(&self) -> &[ObjectTypePlan] {
        &self.object_types
    }

    /// The application mailbox bound on jobs (spec 06 §11).
    pub fn mailbox_jobs(&self) -> usize {
        self.mailbox_jobs
    }

    /// The application mailbox bound on bytes (spec 06 §11).
    pub fn mailbox_bytes(&self) -> usize {
        self.mailbox_bytes
    }

    /// The validated timer bounds of this node's objects.
    pub fn timer_limits(&self) -> crate::objects::TimerLimits {
        self.timer_limits
    }

    /// The MeshName.
    pub fn mesh_name(&self) -> &MeshName {
        &self.mesh
    }

    /// How routing ids are issued.
    pub fn routing_id_plan(&self) -> &RoutingIdPlan {
        &self.routing_id
    }

    /// Issues the routing id of a new lifecycle: `<prefix>-<lowercase uuid v4>` (a fresh one
    /// per call; drawn from the transport seed when one is fixed) or the fixed routing id.
    pub fn new_routing_id(&self) -> RoutingId {
        match &self.routing_id {
            RoutingIdPlan::Fixed(rid) => rid.clone(),
            RoutingIdPlan::Automatic { prefix } => {
                let uuid = match self.transport.seed {
                    // A simulated node: the id follows from its seed, so a run replays.
                    Some(seed) => seeded_uuid(seed),
                    None => zlink_store_spi::entropy::uuid_v4(),
                };
                let text = format!("{prefix}-{uuid}");
                match RoutingId::new(text.into_bytes()) {
                    Ok(rid) => rid,
                    // A prefix of at most 64 bytes plus 37 bytes is always 1..=255 bytes.
                    Err(_) => unreachable!("a validated prefix always yields a valid routing id"),
                }
            }
        }
    }

    /// The topology.
    pub fn topology(&self) -> Topology {
        self.topology
    }

    /// The identity this node's descriptor publishes (`tls:{name}` with TLS settings).
    pub fn security_identity(&self) -> zlink_transport::SecurityIdentity {
        match &self.tls {
            Some(tls) => tls.identity(),
            None => zlink_transport::SecurityIdentity::Plaintext,
        }
    }

    /// The host the listener binds.
    pub fn bind_host(&self) -> &str {
        &self.bind_host
    }

    /// The host peers connect to (never an unspecified address).
    pub fn advertised_host(&self) -> &str {
        &self.advertised_host
    }

    /// The listener port; 0 binds an ephemeral port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Channel Server memberships and their weights (0..=10000).
    pub fn channel_servers(&self) -> &BTreeMap<ChannelName, u16> {
        &self.channel_servers
    }

    /// Outbound-only Channel route declarations.
    pub fn channel_clients(&self) -> &BTreeSet<ChannelName> {
        &self.channel_clients
    }

    /// Manual peer intents, in registration order.
    pub fn manual_peers(&self) -> &[ManualPeer] {
        &self.manual_peers
    }

    /// Node direct and Channel handlers by key.
    pub fn handlers(&self) -> &BTreeMap<HandlerKey, H> {
        &self.handlers
    }

    /// Takes the handlers out (for the dispatch table built at start).
    pub fn take_handlers(&mut self) -> BTreeMap<HandlerKey, H> {
        std::mem::take(&mut self.handlers)
    }

    /// The object role.
    pub fn object_role(&self) -> ObjectRole {
        self.object_role
    }

    /// The node-wide placement weight (0..=10000; 100 unless an Object Server sets it).
    pub fn placement_weight(&self) -> u16 {
        self.placement_weight
    }

    /// Per-node capacity limits (0 = unlimited).
    pub fn capacity_limits(&self) -> &CapacityLimits {
        &self.capacity_limits
    }

    /// Concurrently in-flight activations (1..=2^31-1, default 128).
    pub fn activation_concurrency(&self) -> u32 {
        self.activation_concurrency
    }

    /// The effective location options: the root's with this node's route cache and Message
    /// Follow overrides.
    pub fn location_options(&self) -> &LocationOptions {
        &self.location_options
    }

    /// The root's relocation settings.
    pub fn relocation_options(&self) -> &super::RelocationOptions {
        &self.relocation_options
    }
}

/// The validated root configuration: what `start()` consumes.
pub struct ZLinkPlan<H> {
    pub(crate) location_store: Option<Arc<dyn DynLocationStore>>,
    pub(crate) relocation_store: Option<Arc<dyn DynRelocationStore>>,
    pub(crate) location_options: LocationOptions,
    pub(crate) codecs: Registry,
    pub(crate) application_version: u64,
    pub(crate) maintenance_wave: Option<String>,
    pub(crate) hosted_services: Vec<Arc<dyn HostedService>>,
    pub(crate) nodes: Vec<MeshNodePlan<H>>,
    pub(crate) channel_index: BTreeMap<ChannelName, MeshName>,
    pub(crate) filters: Vec<Arc<dyn crate::messaging::Filter>>,
    pub(crate) factories: crate::messaging::ScopedFactories,
    pub(crate) job_queue: crate::mesh::JobQueueLimits,
}

impl<H: fmt::Debug> fmt::Debug for ZLinkPlan<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZLinkPlan")
            .field("location_store", &self.location_store)
            .field("relocation_store", &self.relocation_store)
            .field("location_options", &self.location_options)
            .field("application_version", &self.application_version)
            .field("job_queue", &self.job_queue)
            .field("maintenance_wave", &self.maintenance_wave)
            .field("hosted_services", &self.hosted_services)
            .field("nodes", &self.nodes)
            .finish_non_exhaustive()
    }
}

impl<H> ZLinkPlan<H> {
    /// The host-wide Application Job Queue's limits as startup computed them (spec 06 §3):
    /// `EffectiveMaxQueuedApplicationJobs` and the pause / resume permit counts.
    pub fn application_job_queue(&self) -> crate::mesh::JobQueueLimits {
        self.job_queue
    }

    /// The Location Store, if registered.
    pub fn location_store(&self) -> Option<&Arc<dyn DynLocationStore>> {
        self.location_store.as_ref()
    }

    /// The Relocation Store, if registered.
    pub fn relocation_store(&self) -> Option<&Arc<dyn DynRelocationStore>> {
        self.relocation_store.as_ref()
    }

    /// The validated root location options.
    pub fn location_options(&self) -> &LocationOptions {
        &self.location_options
    }

    /// The immutable codec registry.
    pub fn codecs(&self) -> &Registry {
        &self.codecs
    }

    /// The application version (0..=2^63-1).
    pub fn application_version(&self) -> u64 {
        self.application_version
    }

    /// The maintenance wave, if any.
    pub fn maintenance_wave(&self) -> Option<&str> {
        self.maintenance_wave.as_deref()
    }

    /// Hosted services in registration (start) order.
    pub fn hosted_services(&self) -> &[Arc<dyn HostedService>] {
        &self.hosted_services
    }

    /// The MeshNodes in registration order.
    pub fn nodes(&self) -> &[MeshNodePlan<H>] {
        &self.nodes
    }

    /// The MeshNodes, mutably (to take their handlers).
    pub fn nodes_mut(&mut self) -> &mut [MeshNodePlan<H>] {
        &mut self.nodes
    }

    /// The MeshNode of `mesh`.
    pub fn node(&self, mesh: &MeshName) -> Option<&MeshNodePlan<H>> {
        self.nodes.iter().find(|n| &n.mesh == mesh)
    }

    /// The process-local Channel route index: each ChannelName to the one MeshName that
    /// registers it, Client or Server (spec 06 §6).
    pub fn channel_index(&self) -> &BTreeMap<ChannelName, MeshName> {
        &self.channel_index
    }
}

/// What a simulation replaces in a node's transport: where it binds and dials, and the seed of
/// its reconnect jitter and OperationId salt. The default is tokio's TCP and a random seed.
#[derive(Clone, Debug, Default)]
pub(crate) struct TransportSeam {
    pub(crate) network: Option<std::sync::Arc<dyn zlink_transport::Network>>,
    pub(crate) seed: Option<u64>,
}

/// A version-4 UUID drawn from `seed` (splitmix64), for a node whose transport seed is fixed.
fn seeded_uuid(seed: u64) -> uuid::Uuid {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let hi = mix(seed.wrapping_add(0x9e37_79b9_7f4a_7c15));
    let lo = mix(hi ^ seed);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&hi.to_be_bytes());
    bytes[8..].copy_from_slice(&lo.to_be_bytes());
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}
