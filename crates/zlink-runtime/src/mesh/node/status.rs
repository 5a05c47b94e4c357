//! Caller-owned status snapshots (spec 06 §24, 28 §3, §11).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use zlink_codec::records::{HostState, ObjectRole};
use zlink_codec::{ChannelName, Generation, MeshName, RoutingId};

use crate::mesh::config::{PeerEndpoint, Topology};
use zlink_location::SweepReport;

/// The whole host: its state and each MeshNode.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HostStatus {
    /// The host state (spec 28 §3).
    pub state: HostState,
    /// The terminal result of the last host Relocate that ran, if any.
    pub last_relocation: Option<super::RelocationResult>,
    /// The shutdown's terminal result, once it ended.
    pub shutdown: Option<ShutdownReport>,
    /// Each MeshNode, in registration order.
    pub nodes: Vec<NodeStatus>,
    /// Completion results of requests relayed to objects that moved here, over every
    /// MeshNode (spec 21 §9.3).
    pub completions: super::CompletionCounts,
    /// One-way messages the relocations of this host's objects dropped, over every MeshNode:
    /// refused by a full hold, refused when held work was resubmitted (the admission door
    /// closed, no handler, the activation closing), or queued for a move that did not commit
    /// here. Held work is never refused for a full mailbox, and a one-way the cutover accepted
    /// is never dropped for one (`relocation` module doc). Each drop is also logged at `warn`
    /// with the object and the reason.
    pub dropped_one_way: u64,
}

/// One MeshNode.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NodeStatus {
    /// The MeshName.
    pub mesh: MeshName,
    /// This lifecycle's routing id.
    pub routing_id: RoutingId,
    /// This lifecycle's generation.
    pub lifecycle_generation: Generation,
    /// The advertised `host:port`.
    pub endpoint: String,
    /// Automatic or manual.
    pub topology: Topology,
    /// The object role.
    pub object_role: ObjectRole,
    /// The node-wide placement weight.
    pub placement_weight: u16,
    /// Channel Server memberships and their current weights.
    pub channel_servers: BTreeMap<ChannelName, u16>,
    /// Outbound-only Channel routes.
    pub channel_clients: BTreeSet<ChannelName>,
    /// Admitted (Ready) peers.
    pub peers: Vec<PeerStatus>,
    /// Manual peer intents.
    pub manual_peers: Vec<ManualPeerStatus>,
    /// Requests of this node waiting for a reply.
    pub pending_requests: usize,
    /// Application jobs in the mailbox (pending and executing).
    pub mailbox_jobs: usize,
    /// Bytes those jobs account for.
    pub mailbox_bytes: usize,
}

/// One Ready peer.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PeerStatus {
    /// Its routing id.
    pub routing_id: RoutingId,
    /// Its lifecycle generation.
    pub lifecycle_generation: Generation,
    /// The connection's remote address.
    pub remote_addr: SocketAddr,
    /// Its Channel Server memberships (from the handshake).
    pub channels: BTreeSet<ChannelName>,
    /// Its announced Channel Server weights; `None` until the first announcement.
    pub weights: Option<BTreeMap<ChannelName, u16>>,
}

/// One manual peer intent.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ManualPeerStatus {
    /// The endpoint.
    pub endpoint: PeerEndpoint,
    /// The RID the handshake must present, if given.
    pub expected_rid: Option<RoutingId>,
    /// The RID the last handshake found.
    pub learned_rid: Option<RoutingId>,
    /// Whether a Ready connection exists for it.
    pub ready: bool,
    /// The last dial error.
    pub last_error: Option<String>,
}

/// How a shutdown ended (spec 28 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ShutdownOutcome {
    /// Everything finished in time (wire value 0).
    Stopped,
    /// Bounded teardown ended cleanup (wire value 1); the host state is still `Stopped`.
    ForceStopped,
}

impl ShutdownOutcome {
    /// The wire value.
    pub fn code(self) -> u8 {
        match self {
            Self::Stopped => 0,
            Self::ForceStopped => 1,
        }
    }
}

/// Why a shutdown was forced (spec 28 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ShutdownReason {
    /// Not forced (0).
    None,
    /// Accepted work did not finish by the deadline (1).
    DeadlineExceeded,
    /// A cleanup step failed (2).
    TeardownFailed,
}

impl ShutdownReason {
    /// The wire value.
    pub fn code(self) -> u8 {
        match self {
            Self::None => 0,
            Self::DeadlineExceeded => 1,
            Self::TeardownFailed => 2,
        }
    }
}

/// The terminal result of a shutdown; concurrent and repeated shutdowns all get the same one.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Stopped or ForceStopped.
    pub outcome: ShutdownOutcome,
    /// Why it was forced.
    pub reason: ShutdownReason,
    /// The self-sweep of this run's authority rows, when a Location Store is registered and
    /// the sweep ran.
    pub sweep: Option<SweepReport>,
    /// Requests and dispatches ended by the forced teardown.
    pub abandoned: usize,
    /// Cleanup failures, in order (hosted-service stages, Store cleanup).
    pub failures: Vec<String>,
}
