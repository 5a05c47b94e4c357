//! Caller-owned status snapshots of one MeshNode and its peers (spec 06 §24).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use zlink_codec::records::ObjectRole;
use zlink_codec::{ChannelName, Generation, MeshName, RoutingId};

use crate::mesh::peer::{PeerEndpoint, Topology};

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
    /// Every connection intent with its state: listed peers (required or not), manual
    /// intents and any other connection ([`MeshNode::connections`](super::MeshNode::connections)).
    pub connections: Vec<super::ConnectionStatus>,
    /// Requests of this node waiting for a reply.
    pub pending_requests: usize,
    /// Requests this node forwarded to another node (Message Follow) whose reply it still
    /// waits for, to relay it to their caller.
    pub forwarded_requests: usize,
    /// Forwarded requests whose reply did not come back within the default reply timeout,
    /// since the node started (their route dropped).
    pub forwarded_requests_expired: u64,
    /// Replies neither a request nor a forwarded route of this node waited for (late or
    /// unknown: discarded), since the node started.
    pub replies_discarded: u64,
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
