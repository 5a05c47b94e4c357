//! [`MeshNode`]: the application's handle on one running MeshNode — node-direct calls, runtime
//! weight changes, manual peers and status.

use std::fmt;
use std::sync::Arc;

use zlink_codec::{ChannelName, Generation, MeshName, RoutingId};
use zlink_store_spi::entropy::HashSet;
use zlink_transport::PeerIntent;

use super::control;
use super::core::{Address, CallOptions, NodeInner, ReplyBody};
use super::status::{ManualPeerStatus, NodeStatus, PeerStatus};
use crate::mesh::peer::{ManualPeer, PeerEndpoint};
use crate::messaging::{
    ErrorMessage, InvalidCall, Message, OutboundMessage, Request, ZLinkError, decode_reply,
};

/// A running MeshNode (cheap to clone). Calls end with [`ZLinkError`] kinds per spec 06 §20:
/// an unknown RID is `NotFound` and runs no handler, a known peer without a Ready connection is
/// `Unavailable`, and after shutdown began every new call is `ShuttingDown`.
#[derive(Clone)]
pub struct MeshNode {
    pub(crate) inner: Arc<NodeInner>,
}

impl fmt::Debug for MeshNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeshNode")
            .field("mesh", &self.inner.mesh)
            .field("routing_id", &self.inner.rid)
            .finish_non_exhaustive()
    }
}

impl MeshNode {
    /// The MeshName.
    pub fn mesh_name(&self) -> &MeshName {
        &self.inner.mesh
    }

    /// This lifecycle's routing id.
    pub fn routing_id(&self) -> &RoutingId {
        &self.inner.rid
    }

    /// This lifecycle's generation.
    pub fn lifecycle_generation(&self) -> Generation {
        self.inner.generation
    }

    /// The advertised `host:port` peers connect to (the port actually bound).
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    /// Sends `message` one-way to the node `target` on this MeshName: completes once the
    /// message is admitted to the outbound queue (spec 06 §7).
    pub async fn send<M: Message>(
        &self,
        target: &RoutingId,
        message: &M,
    ) -> Result<(), ZLinkError> {
        self.send_with(target, message, &CallOptions::default())
            .await
    }

    /// [`send`](Self::send) with call options.
    pub async fn send_with<M: Message>(
        &self,
        target: &RoutingId,
        message: &M,
        options: &CallOptions,
    ) -> Result<(), ZLinkError> {
        let _work = self.inner.life.admit()?;
        let msg = OutboundMessage::encode(self.inner.codecs(), message, &options.metadata)?;
        if target == &self.inner.rid {
            return self
                .inner
                .local_send(&Address::Node, &msg, options.send_timeout)
                .await;
        }
        let peer = self.inner.route_to(target)?;
        self.inner
            .remote_send(&peer, &Address::Node, (&msg, &[]), options.send_timeout)
            .await
    }

    /// Sends `request` to the node `target` on this MeshName and waits for its typed reply:
    /// exactly one of the reply, an error reply, the reply timeout, the connection going down
    /// (`Unavailable`; never resent elsewhere) or shutdown ends it.
    ///
    /// A request to this node's own RID runs through the same mailbox, filters and handler and
    /// ends with their error itself, with its typed source ([`ZLinkError::Remote`] only comes
    /// from another node), of the kind a caller on another node gets. A local call error of
    /// the handler or a filter (`InvalidOperation`, `NotConfigured`) is not the caller's:
    /// both get `InternalFailure`, here [`ZLinkError::HandlerFailed`] with it as the source.
    pub async fn request<R: Request>(
        &self,
        target: &RoutingId,
        request: &R,
    ) -> Result<R::Reply, ZLinkError> {
        self.request_with(target, request, &CallOptions::default())
            .await
    }

    /// [`request`](Self::request) with call options.
    pub async fn request_with<R: Request>(
        &self,
        target: &RoutingId,
        request: &R,
        options: &CallOptions,
    ) -> Result<R::Reply, ZLinkError> {
        let _work = self.inner.life.admit()?;
        let msg = OutboundMessage::encode(self.inner.codecs(), request, &options.metadata)?;
        let timeout = options.reply_timeout;
        let body = if target == &self.inner.rid {
            self.inner
                .local_request(&Address::Node, &msg, timeout)
                .await?
        } else {
            let peer = self.inner.route_to(target)?;
            self.inner
                .remote_request(&peer, &Address::Node, (&msg, &[]), timeout)
                .await?
        };
        decode_reply::<R>(self.inner.codecs(), body.as_inbound())
    }

    /// A one-way send on a RouteMesh Channel of this node: one eligible member (weighted,
    /// weight 0 excluded, this node included when it is a Server member) is chosen and the
    /// message submitted in one call.
    pub(crate) async fn channel_send<M: Message>(
        &self,
        channel: &ChannelName,
        message: &M,
        options: &CallOptions,
    ) -> Result<(), ZLinkError> {
        let _work = self.inner.life.admit()?;
        let msg = OutboundMessage::encode(self.inner.codecs(), message, &options.metadata)?;
        let address = Address::Channel(channel.clone());
        match self.inner.select_member(channel)? {
            super::peers::Member::Local => {
                self.inner
                    .local_send(&address, &msg, options.send_timeout)
                    .await
            }
            super::peers::Member::Remote(peer) => {
                self.inner
                    .remote_send(&peer, &address, (&msg, &[]), options.send_timeout)
                    .await
            }
        }
    }

    /// A request on a RouteMesh Channel of this node (selection and submit in one call; a
    /// started request is never resubmitted to another member).
    pub(crate) async fn channel_request<R: Request>(
        &self,
        channel: &ChannelName,
        request: &R,
        options: &CallOptions,
    ) -> Result<R::Reply, ZLinkError> {
        let _work = self.inner.life.admit()?;
        let msg = OutboundMessage::encode(self.inner.codecs(), request, &options.metadata)?;
        let address = Address::Channel(channel.clone());
        let timeout = options.reply_timeout;
        let body: ReplyBody = match self.inner.select_member(channel)? {
            super::peers::Member::Local => {
                self.inner.local_request(&address, &msg, timeout).await?
            }
            super::peers::Member::Remote(peer) => {
                self.inner
                    .remote_request(&peer, &address, (&msg, &[]), timeout)
                    .await?
            }
        };
        decode_reply::<R>(self.inner.codecs(), body.as_inbound())
    }

    /// Changes this node's Channel Server weight (0..=10000; 0 drains the member from new
    /// selection). Only a Server membership's weight can change (spec 06 §4); peers learn the
    /// new weight at once over the command plane, and discovery from the republished
    /// descriptor.
    pub async fn set_channel_weight(
        &self,
        channel: &ChannelName,
        weight: i64,
    ) -> Result<(), ZLinkError> {
        let w = u16::try_from(weight)
            .ok()
            .filter(|w| *w <= zlink_codec::records::MAX_WEIGHT)
            .ok_or(ZLinkError::InvalidCall(InvalidCall::ChannelWeight {
                weight,
            }))?;
        let payload = {
            let mut weights = self.inner.weights.write();
            let Some(slot) = weights.get_mut(channel) else {
                return Err(ZLinkError::InvalidCall(InvalidCall::NotChannelServer {
                    channel: channel.clone(),
                }));
            };
            *slot = w;
            control::weights_payload(&weights)
        };
        self.inner.broadcast_control(control::WEIGHTS, payload);
        if let Some(d) = &self.inner.descriptor {
            d.republish(&self.inner).await;
        }
        Ok(())
    }

    /// Adds a manual peer connect intent at runtime (spec 06 §5): `endpoint` is `host:port`;
    /// with `expected_rid` only a handshake presenting that RID is admitted. An endpoint that
    /// already has an intent is `AlreadyExists`.
    pub fn add_manual_peer(
        &self,
        endpoint: &str,
        expected_rid: Option<RoutingId>,
    ) -> Result<(), ZLinkError> {
        let parsed = crate::mesh::peer::parse_endpoint(endpoint).map_err(|why| {
            ZLinkError::InvalidCall(InvalidCall::ManualPeerEndpoint {
                endpoint: endpoint.to_owned(),
                reason: ErrorMessage::sanitise(&why.to_string()),
            })
        })?;
        let peer = ManualPeer {
            endpoint: parsed,
            expected_rid,
        };
        add_manual_intent(&self.inner, &peer)?;
        self.inner.manual.lock().push(peer);
        refresh_manual_rids(&self.inner);
        Ok(())
    }

    /// Releases the manual peer intent of `endpoint` (its connection closes in order).
    /// Returns whether there was one.
    pub fn release_manual_peer(&self, endpoint: &str) -> bool {
        let Ok(parsed) = crate::mesh::peer::parse_endpoint(endpoint) else {
            return false;
        };
        let removed = {
            let mut manual = self.inner.manual.lock();
            let before = manual.len();
            manual.retain(|m| m.endpoint != parsed);
            before != manual.len()
        };
        if removed {
            self.inner.transport.remove_intent(&parsed.to_string());
            refresh_manual_rids(&self.inner);
        }
        removed
    }

    /// The manual peer intents and what their handshakes found.
    pub fn manual_peers(&self) -> Vec<ManualPeerStatus> {
        manual_status(&self.inner)
    }

    /// A caller-owned snapshot of this node (spec 06 §24).
    pub fn status(&self) -> NodeStatus {
        let inner = &self.inner;
        let mut peers: Vec<PeerStatus> = inner
            .peers
            .read()
            .all_ready()
            .map(|p| {
                let info = p.handle.info();
                PeerStatus {
                    routing_id: info.rid.clone(),
                    lifecycle_generation: info.lifecycle_generation,
                    remote_addr: info.remote_addr,
                    channels: info.channels.clone(),
                    weights: p.weights.clone(),
                }
            })
            .collect();
        peers.sort_by(|a, b| a.routing_id.cmp(&b.routing_id));
        let (mailbox_jobs, mailbox_bytes) = inner.mailbox.usage();
        NodeStatus {
            mesh: inner.mesh.clone(),
            routing_id: inner.rid.clone(),
            lifecycle_generation: inner.generation,
            endpoint: inner.endpoint.clone(),
            topology: inner.topology,
            object_role: inner.role,
            placement_weight: inner.placement_weight,
            channel_servers: inner.weights.read().clone(),
            channel_clients: inner.channel_clients.clone(),
            peers,
            manual_peers: manual_status(inner),
            connections: super::connections::connections(inner),
            pending_requests: inner.pending.len(),
            forwarded_requests: inner.pending.forwarded.len(),
            forwarded_requests_expired: inner.pending.forwarded.expired(),
            replies_discarded: inner.pending.forwarded.discarded(),
            mailbox_jobs,
            mailbox_bytes,
        }
    }

    /// Sends the command-plane ping to `target` and waits for its reply (a framework command:
    /// no handler key, filter or mailbox slot is involved).
    pub async fn ping(
        &self,
        target: &RoutingId,
        timeout: std::time::Duration,
    ) -> Result<(), ZLinkError> {
        let peer = self.inner.route_to(target)?;
        match self
            .inner
            .control_request(&peer, control::PING, bytes::Bytes::new(), timeout)
            .await?
        {
            ReplyBody::Ok { .. } => Ok(()),
            ReplyBody::Error(bytes) => {
                Err(crate::messaging::ErrorReply::decode(&bytes)?.into_error())
            }
        }
    }
}

/// Adds the transport intent of a manual peer (the side holding the intent dials).
pub(crate) fn add_manual_intent(inner: &NodeInner, peer: &ManualPeer) -> Result<(), ZLinkError> {
    let mut intent = PeerIntent::new(peer.endpoint.to_string()).always_dial();
    if let Some(rid) = &peer.expected_rid {
        intent = intent.expect_rid(rid.clone());
    }
    inner.transport.add_intent(intent).map_err(|e| {
        if e.kind() == zlink_transport::TransportErrorKind::InvalidArgument {
            ZLinkError::ManualPeerExists {
                endpoint: peer.endpoint.to_string(),
                source: std::sync::Arc::new(e).into(),
            }
        } else {
            super::core::transport_error(e)
        }
    })
}

/// Recomputes the RIDs named by manual intents (expected or learned by a handshake).
pub(crate) fn refresh_manual_rids(inner: &NodeInner) {
    let rids: HashSet<RoutingId> = manual_status(inner)
        .into_iter()
        .filter_map(|m| m.expected_rid.or(m.learned_rid))
        .collect();
    inner.peers.write().set_manual(rids);
}

fn manual_status(inner: &NodeInner) -> Vec<ManualPeerStatus> {
    let intents = inner.transport.intents();
    inner
        .manual
        .lock()
        .iter()
        .map(|m| {
            let endpoint = m.endpoint.to_string();
            let found = intents.iter().find(|i| i.intent.endpoint == endpoint);
            let learned_rid = found.and_then(|i| i.learned_rid.clone());
            let ready = learned_rid
                .as_ref()
                .or(m.expected_rid.as_ref())
                .is_some_and(|rid| inner.peers.read().ready(rid).is_some());
            ManualPeerStatus {
                endpoint: PeerEndpoint::clone(&m.endpoint),
                expected_rid: m.expected_rid.clone(),
                learned_rid,
                ready,
                last_error: found.and_then(|i| i.last_error.clone()),
            }
        })
        .collect()
}
