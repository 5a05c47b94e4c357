//! The MeshNode builder (spec 06 §4, §5, §9): everything one RouteMesh registration configures.
//! Values are recorded as given; [`ZLink::start_plan`](super::ZLink::start_plan) validates them.

use std::time::Duration;

use zlink_codec::records::{ObjectKind, ObjectRole};
use zlink_codec::{ChannelName, MeshName, StableType};

use crate::mesh::peer::Topology;
use crate::messaging::{
    ChannelContext, Message, NodeContext, NodeHandler, Request, RouteKind, ZLinkError,
};

/// A handler registration as given: the packet name is checked (spec 06 §9) when the plan is
/// validated, which turns it into a [`HandlerKey`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HandlerSpec {
    /// A Node direct handler of this MeshNode.
    NodeDirect { route: RouteKind, packet: String },
    /// A Channel handler.
    Channel {
        channel: ChannelName,
        route: RouteKind,
        packet: String,
    },
}

/// The routing id a MeshNode asks for (spec 06 §4, §23).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RoutingIdChoice {
    /// Automatic: `<prefix>-<lowercase uuid v4>`.
    Prefix(String),
    /// Fixed raw bytes (manual topology, object role None only).
    Fixed(Vec<u8>),
}

/// The default automatic routing-id prefix.
pub const DEFAULT_ROUTING_ID_PREFIX: &str = "node";

/// The default activation concurrency per node (spec 06 §4).
pub const DEFAULT_ACTIVATION_CONCURRENCY: u32 = 128;

/// A Channel role as registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChannelRole {
    /// Outbound send path only (no weight, no handler).
    Client,
    /// Target membership with its weight as given.
    Server {
        /// The weight, validated at start.
        weight: i64,
    },
}

/// A manual peer connect intent as registered (spec 06 §5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ManualPeerIntent {
    /// `host:port`, validated at start.
    pub(crate) endpoint: String,
    /// The routing id the handshake must present, if given.
    pub(crate) expected_rid: Option<Vec<u8>>,
}

/// The Object Server placement settings as given (`None`: not set).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PlacementSettings {
    pub(crate) placement_weight: Option<i64>,
    pub(crate) actor_limit: Option<i64>,
    pub(crate) spot_limit: Option<i64>,
    pub(crate) spot_type_limits: Vec<(ObjectKind, StableType, i64)>,
    pub(crate) activation_concurrency: Option<i64>,
}

/// Configures one MeshNode under one MeshName (spec 06 §4). `H` is the handler value the
/// messaging layer registers per [`HandlerKey`](crate::messaging::HandlerKey); this layer only checks the keys.
///
/// Every setter records its value as given; out-of-range values and invalid combinations
/// surface from [`ZLink::start_plan`](super::ZLink::start_plan) as a
/// [`StartupError`](super::StartupError), never as a panic.
#[derive(Debug)]
pub struct MeshNodeBuilder<H> {
    pub(crate) mesh: MeshName,
    pub(crate) bind_host: Option<String>,
    pub(crate) advertised_host: Option<String>,
    pub(crate) port: u16,
    pub(crate) routing_id: RoutingIdChoice,
    pub(crate) topology: Topology,
    pub(crate) channels: Vec<(ChannelName, ChannelRole)>,
    pub(crate) manual_peers: Vec<ManualPeerIntent>,
    pub(crate) handlers: Vec<(HandlerSpec, H)>,
    pub(crate) object_role: ObjectRole,
    pub(crate) placement: PlacementSettings,
    pub(crate) route_cache_max_age: Option<Duration>,
    pub(crate) message_follow_duration: Option<Duration>,
    pub(crate) mailbox: (i64, i64),
    pub(crate) timer_limits: crate::objects::TimerLimits,
    pub(crate) object_types: Vec<crate::objects::Registration>,
    pub(crate) entry_callbacks: Vec<crate::objects::EntryCallback>,
    pub(crate) entry_closing: Option<crate::objects::EntryClosing>,
    pub(crate) tls: Option<zlink_transport::MeshTls>,
    pub(crate) transport: super::plan::TransportSeam,
}

impl<H> MeshNodeBuilder<H> {
    /// A MeshNode of `mesh` with the defaults: automatic topology, routing-id prefix
    /// [`DEFAULT_ROUTING_ID_PREFIX`], object role None, ephemeral port, the root's network
    /// identity and location options, no memberships, peers or handlers.
    pub fn new(mesh: MeshName) -> Self {
        MeshNodeBuilder {
            mesh,
            bind_host: None,
            advertised_host: None,
            port: 0,
            routing_id: RoutingIdChoice::Prefix(DEFAULT_ROUTING_ID_PREFIX.to_owned()),
            topology: Topology::Automatic,
            channels: Vec::new(),
            manual_peers: Vec::new(),
            handlers: Vec::new(),
            object_role: ObjectRole::None,
            placement: PlacementSettings::default(),
            route_cache_max_age: None,
            message_follow_duration: None,
            mailbox: (
                i64::from(crate::mesh::node::DEFAULT_MAILBOX_JOBS),
                crate::mesh::node::DEFAULT_MAILBOX_BYTES as i64,
            ),
            timer_limits: crate::objects::TimerLimits::default(),
            object_types: Vec::new(),
            entry_callbacks: Vec::new(),
            entry_closing: None,
            tls: None,
            transport: super::plan::TransportSeam::default(),
        }
    }

    /// The Entry Spot's Actor creation callback of this Object Server (spec 21 §7): every
    /// Actor placed on this node is created only if it approves — `Approve` (optionally with
    /// an application reply for the creator), `Reject` (nothing is created, the creator gets a
    /// typed `Rejected`), or an error (the creation `Failed`). Without one, every Actor
    /// creation is approved. Set at most once (twice is a startup error).
    pub fn on_actor_create<F, Fut>(mut self, callback: F) -> Self
    where
        F: Fn(crate::objects::CreationContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<
                Output = Result<crate::objects::CreationDecision, crate::messaging::BoxError>,
            > + Send
            + 'static,
    {
        self.entry_callbacks
            .push(crate::objects::EntryCallback(std::sync::Arc::new(
                move |ctx| Box::pin(callback(ctx)),
            )));
        self
    }

    /// The Entry Spot's closing callback of this Object Server (spec 28 §9 step 4): it runs
    /// once during shutdown with a `HostShutdown` [`ClosingContext`](crate::objects::ClosingContext)
    /// carrying the remaining deadline, beside every User and Instance Spot's; an error makes
    /// the shutdown `ForceStopped/TeardownFailed`, running past the deadline
    /// `ForceStopped/DeadlineExceeded`. An Entry Spot never moves, so it never closes with
    /// `RelocationOut`. A later call replaces an earlier one; a node that is not an Object
    /// Server has no Entry Spot and never calls it.
    pub fn on_entry_spot_closing<F, Fut>(mut self, callback: F) -> Self
    where
        F: Fn(crate::objects::ClosingContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<(), crate::messaging::BoxError>> + Send + 'static,
    {
        self.entry_closing = Some(crate::objects::EntryClosing(std::sync::Arc::new(
            move |ctx| Box::pin(callback(ctx)),
        )));
        self
    }

    /// Registers an Actor type under `stable_type` (Object Server only; spec 06 §15): the
    /// configure step sets its factory and chooses exactly one relocation policy.
    pub fn actor_type<A: crate::objects::Actor>(
        mut self,
        stable_type: impl Into<String>,
        configure: impl FnOnce(crate::objects::ActorType<A>) -> crate::objects::ActorType<A>,
    ) -> Self {
        let t = configure(crate::objects::ActorType::default());
        self.object_types
            .push(crate::objects::Registration::actor(stable_type.into(), t));
        self
    }

    /// Registers a User Spot type under `stable_type` (Object Server only): factory, exactly
    /// one relocation policy, execution mode and (SpotWide) readiness mode.
    pub fn user_spot_type<S: crate::objects::Spot>(
        self,
        stable_type: impl Into<String>,
        configure: impl FnOnce(crate::objects::SpotType<S>) -> crate::objects::SpotType<S>,
    ) -> Self {
        self.spot_type(ObjectKind::UserSpot, stable_type.into(), configure)
    }

    /// Registers an actor-free Instance Spot type under `stable_type` (Object Server only;
    /// needs a Relocation Store for cold activation, spec 06 §16).
    pub fn instance_spot_type<S: crate::objects::Spot>(
        self,
        stable_type: impl Into<String>,
        configure: impl FnOnce(crate::objects::SpotType<S>) -> crate::objects::SpotType<S>,
    ) -> Self {
        self.spot_type(ObjectKind::InstanceSpot, stable_type.into(), configure)
    }

    fn spot_type<S: crate::objects::Spot>(
        mut self,
        kind: ObjectKind,
        stable_type: String,
        configure: impl FnOnce(crate::objects::SpotType<S>) -> crate::objects::SpotType<S>,
    ) -> Self {
        let t = configure(crate::objects::SpotType::default());
        self.object_types
            .push(crate::objects::Registration::spot(kind, stable_type, t));
        self
    }

    /// The application mailbox bounds of this node (spec 06 §11): at most `jobs` pending or
    /// executing node-direct and channel jobs (1..=2^31-1, default
    /// [`DEFAULT_MAILBOX_JOBS`](crate::mesh::node::DEFAULT_MAILBOX_JOBS)) holding at most
    /// `bytes` (1..=2^62, default 64 MiB; payload + metadata + a fixed per-job cost). Inbound
    /// frames wait for room, which holds back the sender through the transport's credit.
    pub fn mailbox_limits(mut self, jobs: i64, bytes: i64) -> Self {
        self.mailbox = (jobs, bytes);
        self
    }

    /// The timer bounds of this Object Server node's Actors and Spots (spec 21 §1.2; see
    /// [`Timers`](crate::handler::Timers)): at most `max_timers_per_object` timers per object
    /// (1..=[`MAX_MAX_TIMERS_PER_OBJECT`](crate::config::MAX_MAX_TIMERS_PER_OBJECT), default
    /// [`DEFAULT_MAX_TIMERS_PER_OBJECT`](crate::config::DEFAULT_MAX_TIMERS_PER_OBJECT)) and no
    /// period below `min_timer_period`
    /// ([`MIN_MIN_TIMER_PERIOD`](crate::config::MIN_MIN_TIMER_PERIOD)..=[`MAX_MIN_TIMER_PERIOD`](crate::config::MAX_MIN_TIMER_PERIOD),
    /// default [`DEFAULT_MIN_TIMER_PERIOD`](crate::config::DEFAULT_MIN_TIMER_PERIOD)); outside
    /// either range the host does not start.
    pub fn timer_limits(mut self, limits: crate::objects::TimerLimits) -> Self {
        self.timer_limits = limits;
        self
    }

    /// The MeshName this node registers.
    pub fn mesh_name(&self) -> &MeshName {
        &self.mesh
    }

    /// Speaks TLS on every peer connection of this node (spec 06 §23): peers are verified by
    /// the settings' CA on both ends, and the descriptor publishes `tls:{identity}` instead of
    /// `plaintext:{rid}`. A TLS node neither dials nor admits a plaintext peer, so every node
    /// of the RouteMesh needs TLS settings from the same CA.
    pub fn tls(mut self, tls: zlink_transport::MeshTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Binds this node's listener and dials its peers on `network` instead of tokio's TCP (the
    /// deterministic simulation's seam, `crates/zlink-sim`). A replaced network speaks plain
    /// frames only: with [`Self::tls`] too, start fails.
    pub fn network(mut self, network: std::sync::Arc<dyn zlink_transport::Network>) -> Self {
        self.transport.network = Some(network);
        self
    }

    /// Fixes the seed of this node's reconnect jitter and OperationId salt (drawn at random
    /// otherwise), so a simulated run replays.
    pub fn transport_seed(mut self, seed: u64) -> Self {
        self.transport.seed = Some(seed);
        self
    }

    /// Overrides the root's bind host for this node's ROUTER listener.
    pub fn bind_host(mut self, host: impl Into<String>) -> Self {
        self.bind_host = Some(host.into());
        self
    }

    /// Overrides the root's advertised host for this node's endpoint.
    pub fn advertised_host(mut self, host: impl Into<String>) -> Self {
        self.advertised_host = Some(host.into());
        self
    }

    /// The listener port; 0 (the default) binds an ephemeral port.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// The automatic routing-id prefix: 1..=64 characters of `[A-Za-z0-9._-]`; the routing id
    /// of each lifecycle is `<prefix>-<lowercase uuid v4>` (spec 06 §4, §23).
    pub fn routing_id_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.routing_id = RoutingIdChoice::Prefix(prefix.into());
        self
    }

    /// A fixed routing id (1..=255 bytes) for explicit manual topology; only object role None
    /// with [`Topology::Manual`] accepts it (spec 06 §23).
    pub fn fixed_routing_id(mut self, rid: impl Into<Vec<u8>>) -> Self {
        self.routing_id = RoutingIdChoice::Fixed(rid.into());
        self
    }

    /// Sets the topology (default [`Topology::Automatic`]).
    pub fn topology(mut self, topology: Topology) -> Self {
        self.topology = topology;
        self
    }

    /// Registers a RouteMesh Channel Server membership with the default weight 100.
    pub fn channel_server(self, channel: ChannelName) -> Self {
        self.channel_server_weighted(channel, i64::from(zlink_location::DEFAULT_WEIGHT))
    }

    /// Registers a RouteMesh Channel Server membership with a weight in 0..=10000 (spec 06
    /// §4; 0 excludes the server from new selection but keeps the connection requirement).
    pub fn channel_server_weighted(mut self, channel: ChannelName, weight: i64) -> Self {
        self.channels
            .push((channel, ChannelRole::Server { weight }));
        self
    }

    /// Declares an outbound Channel route (Client role): no weight, no handler, not advertised
    /// as membership (spec 06 §4).
    pub fn channel_client(mut self, channel: ChannelName) -> Self {
        self.channels.push((channel, ChannelRole::Client));
        self
    }

    /// A manual peer whose routing id the admission handshake determines (spec 06 §5).
    /// `endpoint` is `host:port` (IPv6 as `[addr]:port`), port 1..=65535.
    pub fn manual_peer(mut self, endpoint: impl Into<String>) -> Self {
        self.manual_peers.push(ManualPeerIntent {
            endpoint: endpoint.into(),
            expected_rid: None,
        });
        self
    }

    /// A manual peer admitted only when the handshake presents `expected_rid` (spec 06 §5).
    pub fn manual_peer_expecting(
        mut self,
        endpoint: impl Into<String>,
        expected_rid: impl Into<Vec<u8>>,
    ) -> Self {
        self.manual_peers.push(ManualPeerIntent {
            endpoint: endpoint.into(),
            expected_rid: Some(expected_rid.into()),
        });
        self
    }

    /// Registers a Node direct handler under (this MeshName, `route`, `packet`) (spec 06 §9).
    pub fn node_handler(mut self, route: RouteKind, packet: impl Into<String>, handler: H) -> Self {
        let key = HandlerSpec::NodeDirect {
            route,
            packet: packet.into(),
        };
        self.handlers.push((key, handler));
        self
    }

    /// Registers a Channel handler under (`channel`, `kind`, `packet`); `channel` must be a
    /// Server membership of this node (spec 06 §4, §9).
    pub fn channel_handler(
        mut self,
        channel: ChannelName,
        route: RouteKind,
        packet: impl Into<String>,
        handler: H,
    ) -> Self {
        let key = HandlerSpec::Channel {
            channel,
            route,
            packet: packet.into(),
        };
        self.handlers.push((key, handler));
        self
    }

    /// The object role (default None). Client and Server need a Location Store.
    pub fn object_role(mut self, role: ObjectRole) -> Self {
        self.object_role = role;
        self
    }

    /// The node-wide placement weight, 0..=10000, default 100 (Object Server only).
    pub fn placement_weight(mut self, weight: i64) -> Self {
        self.placement.placement_weight = Some(weight);
        self
    }

    /// The overall Actor limit: 0 (default) unlimited, else 1..=2^31-1 (Object Server only).
    pub fn actor_limit(mut self, limit: i64) -> Self {
        self.placement.actor_limit = Some(limit);
        self
    }

    /// The overall User/Instance Spot limit: 0 (default) unlimited, else 1..=2^31-1 (Object
    /// Server only; the Entry Spot is not counted).
    pub fn spot_limit(mut self, limit: i64) -> Self {
        self.placement.spot_limit = Some(limit);
        self
    }

    /// The limit of one (Spot kind, stable type): 0 unlimited, else 1..=2^31-1 (Object Server
    /// only; `kind` must be a Spot kind).
    pub fn spot_type_limit(
        mut self,
        kind: ObjectKind,
        stable_type: StableType,
        limit: i64,
    ) -> Self {
        self.placement
            .spot_type_limits
            .push((kind, stable_type, limit));
        self
    }

    /// Concurrently in-flight activations, positive, default 128 (Object Server only).
    pub fn activation_concurrency(mut self, permits: i64) -> Self {
        self.placement.activation_concurrency = Some(permits);
        self
    }

    /// Overrides the root's `routeCacheMaxAge` for this node (0 disables the route cache).
    pub fn route_cache_max_age(mut self, age: Duration) -> Self {
        self.route_cache_max_age = Some(age);
        self
    }

    /// Overrides the root's `messageFollowDuration` for this node (0 disables Message Follow).
    pub fn message_follow_duration(mut self, duration: Duration) -> Self {
        self.message_follow_duration = Some(duration);
        self
    }
}

impl MeshNodeBuilder<NodeHandler> {
    /// Registers the node-direct send handler of `M` on this MeshName (spec 06 §9; key:
    /// MeshName, send, `M::PACKET`).
    pub fn on_send<M, F, Fut>(self, handler: F) -> Self
    where
        M: Message,
        F: Fn(M, NodeContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<(), ZLinkError>> + Send + 'static,
    {
        let h = NodeHandler::send::<M, NodeContext, F, Fut>(handler);
        self.node_handler(RouteKind::Send, M::PACKET, h)
    }

    /// Registers the node-direct request handler of `R` on this MeshName (key: MeshName,
    /// request, `R::PACKET`).
    pub fn on_request<R, F, Fut>(self, handler: F) -> Self
    where
        R: Request,
        F: Fn(R, NodeContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<R::Reply, ZLinkError>> + Send + 'static,
    {
        let h = NodeHandler::request::<R, NodeContext, F, Fut>(handler);
        self.node_handler(RouteKind::Request, R::PACKET, h)
    }

    /// Registers the channel send handler of `M` under `channel`, which must be a Server
    /// membership of this node (key: ChannelName, send, `M::PACKET`).
    pub fn on_channel_send<M, F, Fut>(self, channel: ChannelName, handler: F) -> Self
    where
        M: Message,
        F: Fn(M, ChannelContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<(), ZLinkError>> + Send + 'static,
    {
        let h = NodeHandler::send::<M, ChannelContext, F, Fut>(handler);
        self.channel_handler(channel, RouteKind::Send, M::PACKET, h)
    }

    /// Registers the channel request handler of `R` under `channel`, which must be a Server
    /// membership of this node (key: ChannelName, request, `R::PACKET`).
    pub fn on_channel_request<R, F, Fut>(self, channel: ChannelName, handler: F) -> Self
    where
        R: Request,
        F: Fn(R, ChannelContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<R::Reply, ZLinkError>> + Send + 'static,
    {
        let h = NodeHandler::request::<R, ChannelContext, F, Fut>(handler);
        self.channel_handler(channel, RouteKind::Request, R::PACKET, h)
    }
}
