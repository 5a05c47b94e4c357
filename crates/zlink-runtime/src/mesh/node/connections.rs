//! Every connection intent of one MeshNode with its state (not only the Ready peers), and the
//! readiness query the guide names (guide-10 §4 `isPeerReady(mesh, role, ..)`).
//!
//! A node's connections are the peers its discovery list names (each one required or not,
//! spec 06 §4 [`must_connect`](super::discover::must_connect)), its manual peer intents, and
//! any other Ready connection (one that dialed this node and that no list names yet). Only
//! what an operator needs is shown: RID, endpoint, role and state — no Store key, version,
//! owner token or relocation record (guide-10 §4).

use std::collections::BTreeMap;

use zlink_codec::records::{HostState, ObjectRole};
use zlink_codec::{ChannelName, RoutingId};
use zlink_store_spi::entropy::HashMap;

use super::core::NodeInner;
use super::handle::MeshNode;

/// What the discovery list says of one peer of the node's MeshName.
#[derive(Debug, Clone)]
pub(crate) struct PeerFacts {
    /// The endpoint its descriptor advertises (the intent's endpoint, without the scheme).
    pub(crate) endpoint: String,
    /// Its object role.
    pub(crate) role: ObjectRole,
    /// Its host state.
    pub(crate) state: HostState,
    /// Whether the two nodes must connect (spec 06 §4).
    pub(crate) required: bool,
}

/// The state of one connection of a MeshNode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectionState {
    /// A Ready, admitted connection: a call target.
    Ready,
    /// Connected, but no discovery list or manual intent names the peer yet: not a call target
    /// (closed unless the next full list names it).
    Unconfirmed,
    /// This node dials the peer and is not connected yet (see `last_error`).
    Connecting,
    /// The peer dials this node (the larger RID waits, spec 06 §4) and has not yet.
    AwaitingDial,
    /// Listed, but the two nodes need no connection: both are Object Clients without a
    /// Channel Server membership (spec 06 §4).
    NotRequired,
    /// Listed as `Draining` or `Stopped` and not connected: out of selection.
    Stopped,
}

/// One connection intent of a MeshNode and where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionStatus {
    /// The peer's routing id (`None` for a manual intent whose handshake has not run).
    pub routing_id: Option<RoutingId>,
    /// The endpoint dialed or advertised (`None` for a connection only the peer dialed).
    pub endpoint: Option<String>,
    /// The peer's object role, as its descriptor publishes it (`None` when no list names it).
    pub object_role: Option<ObjectRole>,
    /// The peer's host state, as its descriptor publishes it (`None` when no list names it).
    pub peer_state: Option<HostState>,
    /// Whether a manual peer intent names it.
    pub manual: bool,
    /// The connection's state.
    pub state: ConnectionState,
    /// The last dial error, if the last attempt failed.
    pub last_error: Option<String>,
}

/// Which peers [`MeshNode::is_peer_ready`] asks about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PeerRole {
    /// Any peer.
    Any,
    /// An Object Server (it hosts Actors and Spots).
    ObjectServer,
    /// An Object Client.
    ObjectClient,
    /// A Channel Server of this channel.
    ChannelServer(ChannelName),
}

/// Every connection of `inner`, sorted by RID then endpoint.
pub(crate) fn connections(inner: &NodeInner) -> Vec<ConnectionStatus> {
    let intents: HashMap<String, zlink_transport::IntentStatus> = inner
        .transport
        .intents()
        .into_iter()
        .map(|i| (i.intent.endpoint.clone(), i))
        .collect();
    let peers = inner.peers.read();
    let mut out: BTreeMap<(Option<RoutingId>, Option<String>), ConnectionStatus> = BTreeMap::new();
    let connected = |rid: &RoutingId| {
        peers
            .connected()
            .find(|p| &p.handle.info().rid == rid)
            .map(|p| p.confirmed)
    };
    for (rid, f) in peers.facts() {
        let intent = intents.get(&f.endpoint);
        let state = match connected(rid) {
            Some(true) => ConnectionState::Ready,
            Some(false) => ConnectionState::Unconfirmed,
            None if !f.required => ConnectionState::NotRequired,
            None if matches!(f.state, HostState::Draining | HostState::Stopped) => {
                ConnectionState::Stopped
            }
            None if intent.is_some_and(|i| !i.dials) => ConnectionState::AwaitingDial,
            None => ConnectionState::Connecting,
        };
        out.insert(
            (Some(rid.clone()), Some(f.endpoint.clone())),
            ConnectionStatus {
                routing_id: Some(rid.clone()),
                endpoint: Some(f.endpoint.clone()),
                object_role: Some(f.role),
                peer_state: Some(f.state),
                manual: peers.is_manual(rid),
                state,
                last_error: intent.and_then(|i| i.last_error.clone()),
            },
        );
    }
    for m in inner.manual.lock().iter() {
        let endpoint = m.endpoint.to_string();
        let intent = intents.get(&endpoint);
        let rid = intent
            .and_then(|i| i.learned_rid.clone())
            .or_else(|| m.expected_rid.clone());
        if rid
            .as_ref()
            .is_some_and(|r| out.keys().any(|(k, _)| k.as_ref() == Some(r)))
        {
            continue;
        }
        let state = match rid.as_ref().and_then(connected) {
            Some(true) => ConnectionState::Ready,
            Some(false) => ConnectionState::Unconfirmed,
            None if intent.is_some_and(|i| !i.dials) => ConnectionState::AwaitingDial,
            None => ConnectionState::Connecting,
        };
        out.insert(
            (rid.clone(), Some(endpoint.clone())),
            ConnectionStatus {
                routing_id: rid,
                endpoint: Some(endpoint),
                object_role: None,
                peer_state: None,
                manual: true,
                state,
                last_error: intent.and_then(|i| i.last_error.clone()),
            },
        );
    }
    for p in peers.connected() {
        let rid = &p.handle.info().rid;
        if out.keys().any(|(k, _)| k.as_ref() == Some(rid)) {
            continue;
        }
        out.insert(
            (Some(rid.clone()), None),
            ConnectionStatus {
                routing_id: Some(rid.clone()),
                endpoint: None,
                object_role: None,
                peer_state: None,
                manual: false,
                state: if p.confirmed {
                    ConnectionState::Ready
                } else {
                    ConnectionState::Unconfirmed
                },
                last_error: None,
            },
        );
    }
    out.into_values().collect()
}

impl MeshNode {
    /// Every connection intent of this node with its state: the peers its discovery list
    /// names (required or not), its manual intents, and any other connection (see
    /// [`ConnectionState`]).
    pub fn connections(&self) -> Vec<ConnectionStatus> {
        connections(&self.inner)
    }

    /// Whether a Ready, admitted peer of `role` exists (guide-10 §4 `isPeerReady(mesh, role,
    /// ..)`): `routing_id` names one peer, `None` asks for any. An Object role is known from
    /// the peer's descriptor (a manual peer no list names matches only [`PeerRole::Any`] and
    /// [`PeerRole::ChannelServer`]); a Channel Server is one whose handshake carried the
    /// channel. Lock-free of the Store: it reads this node's peer table only.
    pub fn is_peer_ready(&self, role: &PeerRole, routing_id: Option<&RoutingId>) -> bool {
        let peers = self.inner.peers.read();
        peers.all_ready().any(|p| {
            let info = p.handle.info();
            if routing_id.is_some_and(|r| r != &info.rid) {
                return false;
            }
            let object_role = peers.facts().get(&info.rid).map(|f| f.role);
            match role {
                PeerRole::Any => true,
                PeerRole::ObjectServer => object_role == Some(ObjectRole::Server),
                PeerRole::ObjectClient => object_role == Some(ObjectRole::Client),
                PeerRole::ChannelServer(c) => info.channels.contains(c),
            }
        })
    }
}
