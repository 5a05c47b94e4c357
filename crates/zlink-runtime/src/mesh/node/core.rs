//! One running MeshNode: its identity, transport, peers, pending requests and mailbox, and the
//! outbound call path (node-direct and channel, remote or local).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use zlink_codec::payload::Registry;
use zlink_codec::records::ObjectRole;
use zlink_codec::{ChannelName, Generation, MeshName, RoutingId};
use zlink_transport::{
    Envelope, PeerHandle, Reply, ReplyStatus, Transport, TransportError, TransportErrorKind,
};

use super::control::ControlRegistry;
use super::lifecycle::Lifecycle;
use super::mailbox::{Mailbox, job_cost};
use super::peers::{Member, PeerTable, pick_weighted, uniform_below};
use super::pending::Pending;
use crate::mesh::peer::{ManualPeer, Topology};
use crate::messaging::{
    Cancellation, Correlation, DispatchOutcome, Dispatcher, InboundFrame, InboundReply,
    InboundTarget, Metadata, OutboundMessage, ReplyExpectation, SendEnd, UnavailableReason,
    ZLinkError,
};
use crate::telemetry::NodeMetrics;
use crate::telemetry::labels::{DropReason, MessageKind, SendPath};

/// The default reply timeout of a request (spec 06 §7).
pub const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// The default send timeout: how long a one-way send waits for outbound admission.
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// The settings of one call (spec 06 §7): metadata, and the reply timeout of a request or the
/// send timeout of a one-way send. Cancellation is dropping the call's future.
#[derive(Debug, Clone)]
pub struct CallOptions {
    pub(crate) reply_timeout: Duration,
    pub(crate) send_timeout: Duration,
    pub(crate) metadata: Metadata,
}

impl Default for CallOptions {
    fn default() -> Self {
        Self {
            reply_timeout: DEFAULT_REPLY_TIMEOUT,
            send_timeout: DEFAULT_SEND_TIMEOUT,
            metadata: Metadata::empty(),
        }
    }
}

impl CallOptions {
    /// How long a request waits for its reply (default [`DEFAULT_REPLY_TIMEOUT`]); on expiry
    /// it ends with `DeadlineExceeded` and a later reply is discarded.
    pub fn reply_timeout(mut self, timeout: Duration) -> Self {
        self.reply_timeout = timeout;
        self
    }

    /// How long a one-way send waits for outbound admission (default
    /// [`DEFAULT_SEND_TIMEOUT`]); on expiry it ends with `DeadlineExceeded`.
    pub fn send_timeout(mut self, timeout: Duration) -> Self {
        self.send_timeout = timeout;
        self
    }

    /// The metadata snapshot the handler sees (validated when built, spec 06 §7).
    pub fn metadata(mut self, metadata: Metadata) -> Self {
        self.metadata = metadata;
        self
    }
}

/// Which handler namespace a call addresses.
#[derive(Debug, Clone)]
pub(crate) enum Address {
    /// Node-direct on this node's MeshName.
    Node,
    /// A RouteMesh Channel.
    Channel(ChannelName),
    /// An Actor by global id (the id travels at the head of the payload).
    Actor,
    /// A Spot by global id (the id travels at the head of the payload).
    Spot,
}

/// The envelope address of Actor messages (a ChannelName cannot start with U+0001).
pub(crate) const ACTOR_ADDRESS: &str = "\u{1}actor";

/// The envelope address of Spot messages.
pub(crate) const SPOT_ADDRESS: &str = "\u{1}spot";

impl Address {
    /// The envelope's address text: empty for node-direct, else the ChannelName.
    pub(crate) fn wire(&self) -> &str {
        match self {
            Address::Node => "",
            Address::Channel(c) => c.as_str(),
            Address::Actor => ACTOR_ADDRESS,
            Address::Spot => SPOT_ADDRESS,
        }
    }
}

/// A reply as received, owned.
#[derive(Debug)]
pub(crate) enum ReplyBody {
    Ok { content_type: Bytes, payload: Bytes },
    Error(Bytes),
}

impl ReplyBody {
    pub(crate) fn as_inbound(&self) -> InboundReply<'_> {
        match self {
            ReplyBody::Ok {
                content_type,
                payload,
            } => InboundReply::Reply {
                content_type,
                payload,
            },
            ReplyBody::Error(bytes) => InboundReply::Error(bytes),
        }
    }

    fn from_wire(reply: Reply) -> Self {
        match reply.status() {
            ReplyStatus::Error => ReplyBody::Error(reply.into_payload()),
            _ => ReplyBody::Ok {
                content_type: reply.content_type_bytes().clone(),
                payload: reply.into_payload(),
            },
        }
    }
}

/// The state of one running MeshNode, shared by its handle and its tasks.
#[derive(Debug)]
pub(crate) struct NodeInner {
    pub(crate) mesh: MeshName,
    pub(crate) rid: RoutingId,
    pub(crate) generation: Generation,
    pub(crate) endpoint: String,
    pub(crate) topology: Topology,
    pub(crate) role: ObjectRole,
    pub(crate) placement_weight: u16,
    pub(crate) channel_clients: BTreeSet<ChannelName>,
    pub(crate) weights: RwLock<BTreeMap<ChannelName, u16>>,
    pub(crate) transport: Transport,
    pub(crate) dispatcher: Dispatcher,
    pub(crate) peers: RwLock<PeerTable>,
    pub(crate) pending: Arc<Pending>,
    pub(crate) mailbox: Arc<Mailbox>,
    /// The host-wide Application Job Queue, shared by every MeshNode of the host (06 §3).
    pub(crate) jobs: Arc<crate::mesh::JobQueue>,
    pub(crate) life: Arc<Lifecycle>,
    pub(crate) manual: Mutex<Vec<ManualPeer>>,
    pub(crate) control: ControlRegistry,
    pub(crate) descriptor: Option<Arc<super::discover::NodeDescriptor>>,
    /// Wakes the discovery loop early (a peer connected that the last list did not name).
    pub(crate) discovery_wake: tokio::sync::Notify,
    /// The object layer of an Object Client/Server node (set once at start).
    pub(crate) objects: std::sync::OnceLock<Arc<dyn ObjectSink>>,
    /// The node's messaging instruments (resolved once, when the node was built).
    pub(crate) metrics: NodeMetrics,
}

/// Where the object layer plugs into a node: inbound Actor messages arriving on the
/// application lane (after the node mailbox, never through filters).
pub(crate) trait ObjectSink: Send + Sync + std::fmt::Debug {
    /// Runs one inbound object message and answers it (a request) on the completion path.
    /// `job` (its Application Job Queue permit) travels with the message until its handler
    /// starts.
    /// `guard` (the node mailbox permit and the admission) is held until the message's work
    /// ends; work that must wait on something other than the object's turn is returned as a
    /// future for the caller to spawn.
    fn deliver(
        &self,
        node: Arc<NodeInner>,
        peer: RoutingId,
        envelope: Envelope,
        job: crate::mesh::JobPermit,
        guard: Box<dyn Send>,
    ) -> Option<crate::messaging::BoxFuture<'static, ()>>;

    /// A host run's owner lease is gone (discovery no longer lists it): reclaim what it owned.
    fn owner_gone(&self, run: zlink_location::HostRun);

    /// A fresh discovery list: each listed run's owner lease as its read bounds it (the
    /// route cache serves a run's routes only until that run stops accepting new work).
    fn owners_listed(&self, view: &zlink_location::DiscoveryView);

    /// The usage this node's descriptor projects now (`None` when it cannot be read).
    fn projection(
        &self,
    ) -> crate::messaging::BoxFuture<
        '_,
        Option<(
            zlink_codec::records::DescriptorCapacity,
            zlink_codec::records::ActivationConcurrency,
        )>,
    >;
}

impl NodeInner {
    pub(crate) fn codecs(&self) -> &Registry {
        self.dispatcher.codecs()
    }

    /// The Ready connection to `target`, or NotFound / Unavailable (spec 06 §20).
    pub(crate) fn route_to(&self, target: &RoutingId) -> Result<PeerHandle, ZLinkError> {
        let peers = self.peers.read();
        if let Some(p) = peers.ready(target) {
            return Ok(p.handle.clone());
        }
        if peers.is_known(target) {
            return Err(ZLinkError::Unavailable {
                target: crate::messaging::Target::Node(target.clone()),
                reason: UnavailableReason::NotConnected,
            });
        }
        Err(ZLinkError::NoRoute {
            target: crate::messaging::Target::NodeOn {
                node: target.clone(),
                mesh: self.mesh.clone(),
            },
        })
    }

    /// Picks one eligible member of `channel` (weighted, 64-bit sum) or says why none is.
    pub(crate) fn select_member(&self, channel: &ChannelName) -> Result<Member, ZLinkError> {
        let local = self.weights.read().get(channel).copied();
        let peers = self.peers.read();
        let candidates = peers.candidates(channel, local);
        match pick_weighted(&candidates, uniform_below) {
            Some(m) => Ok(m),
            None => Err(ZLinkError::Unavailable {
                target: crate::messaging::Target::Channel(channel.clone()),
                reason: UnavailableReason::NoEligibleMember,
            }),
        }
    }

    /// The envelope of `msg` for `address`; its payload is `prefix` followed by the message
    /// payload (an object message's id framing; empty for others), built in one copy.
    fn envelope(
        &self,
        address: &Address,
        msg: &OutboundMessage,
        prefix: &[u8],
        route: Option<zlink_transport::ReplyRouteId>,
    ) -> Result<Envelope, ZLinkError> {
        let ids = self.transport.ids();
        let op = ids.next_operation_id().map_err(transport_error)?;
        let payload = if prefix.is_empty() {
            msg.payload.clone()
        } else {
            let mut joined = Vec::with_capacity(prefix.len() + msg.payload.len());
            joined.extend_from_slice(prefix);
            joined.extend_from_slice(&msg.payload);
            Bytes::from(joined)
        };
        let env = match route {
            Some(r) => Envelope::request(op, r, &self.rid, self.generation, payload),
            None => Envelope::one_way(op, &self.rid, self.generation, payload),
        };
        env.with_address(address.wire())
            .and_then(|e| match msg.packet.as_static() {
                Some(name) => e.with_packet_name_static(name),
                None => e.with_packet_name_bytes(msg.packet.to_bytes()),
            })
            .and_then(
                |e| match crate::messaging::static_content_type(&msg.content_type) {
                    Some(ct) => e.with_content_type_static(ct),
                    None => e.with_content_type_bytes(crate::messaging::content_type_bytes(
                        &msg.content_type,
                    )),
                },
            )
            .and_then(|e| e.with_metadata(msg.metadata.clone()))
            .map_err(transport_error)
    }

    /// Sends a request to a Ready peer and waits for its reply, its timeout, the connection
    /// going down or a forced shutdown — exactly one of them. `prefix` goes before the
    /// payload on the wire (see [`envelope`](Self::envelope)).
    pub(crate) async fn remote_request(
        &self,
        peer: &PeerHandle,
        address: &Address,
        (msg, prefix): (&OutboundMessage, &[u8]),
        timeout: Duration,
    ) -> Result<ReplyBody, ZLinkError> {
        self.remote_request_noting(peer, address, (msg, prefix), timeout)
            .await
            .0
    }

    /// [`remote_request`](Self::remote_request), also telling whether the reply came from
    /// another node than `peer` (the object it addressed moved and its new owner answered).
    pub(crate) async fn remote_request_noting(
        &self,
        peer: &PeerHandle,
        address: &Address,
        (msg, prefix): (&OutboundMessage, &[u8]),
        timeout: Duration,
    ) -> (Result<ReplyBody, ZLinkError>, bool) {
        let route = match self.transport.ids().next_reply_route_id() {
            Ok(r) => r,
            Err(e) => return (Err(transport_error(e)), false),
        };
        let env = match self.envelope(address, msg, prefix, Some(route)) {
            Ok(env) => env,
            Err(e) => return (Err(e), false),
        };
        // The table's reaper ends the request at its reply timeout: no timer per request.
        let (guard, rx) =
            self.pending
                .register_timed(route, env.operation_id(), peer.info(), timeout);
        self.metrics.sent(MessageKind::Request, SendPath::Remote);
        let started = std::time::Instant::now();
        let out = match peer.try_send_app(&env) {
            // Queued at once: only the reply (or the reaper's timeout) is left to wait for. A
            // forced shutdown fails every pending request (`Pending::fail_all` after the force
            // signal), so no wait on the signal is needed; one registered after that sees it.
            Ok(()) if self.life.force().is_cancelled() => Err(ZLinkError::ShuttingDown),
            Ok(()) => ended(rx.await),
            Err(e) if e.kind() != TransportErrorKind::Full => Err(transport_error(e)),
            // The lane is full: wait for room and then the reply, bounded by the timeout and
            // the force signal.
            Err(_) => {
                let wait = async {
                    peer.send_app(&env).await.map_err(transport_error)?;
                    ended(rx.await)
                };
                tokio::select! {
                    r = tokio::time::timeout(timeout, wait) => match r {
                        Ok(r) => r,
                        Err(_) => Err(ZLinkError::ReplyTimeout { timeout }),
                    },
                    () = self.life.force().cancelled() => Err(ZLinkError::ShuttingDown),
                }
            }
        };
        drop(guard);
        self.metrics
            .request_ended(started, matches!(out, Ok((ReplyBody::Ok { .. }, _))));
        match out {
            Ok((body, elsewhere)) => (Ok(body), elsewhere),
            Err(e) => (Err(e), false),
        }
    }

    /// Queues a one-way send to a Ready peer, waiting up to `timeout` for admission.
    /// `prefix` goes before the payload on the wire.
    pub(crate) async fn remote_send(
        &self,
        peer: &PeerHandle,
        address: &Address,
        (msg, prefix): (&OutboundMessage, &[u8]),
        timeout: Duration,
    ) -> Result<(), ZLinkError> {
        let env = self.envelope(address, msg, prefix, None)?;
        match peer.try_send_app(&env) {
            Ok(()) => {
                self.metrics.sent(MessageKind::OneWay, SendPath::Remote);
                return Ok(());
            }
            Err(e) if e.kind() != TransportErrorKind::Full => return Err(transport_error(e)),
            Err(_) => {}
        }
        match tokio::time::timeout(timeout, peer.send_app(&env)).await {
            Ok(r) => {
                r.map_err(transport_error)?;
                self.metrics.sent(MessageKind::OneWay, SendPath::Remote);
                Ok(())
            }
            Err(_) => Err(ZLinkError::SendTimeout { timeout }),
        }
    }

    fn local_frame(&self, address: &Address, msg: &OutboundMessage, request: bool) -> InboundFrame {
        let target = match address {
            // Actor calls to this node go to the object host, never through the dispatcher.
            Address::Node | Address::Actor | Address::Spot => InboundTarget::NodeDirect {
                mesh: self.mesh.clone(),
                source: self.rid.clone(),
                target: self.rid.clone(),
            },
            Address::Channel(c) => InboundTarget::Channel {
                channel: c.clone(),
                mesh: Some(self.mesh.clone()),
            },
        };
        InboundFrame {
            target,
            expect: if request {
                ReplyExpectation::Reply(Correlation::new(Bytes::new()))
            } else {
                ReplyExpectation::None
            },
            packet: Bytes::copy_from_slice(msg.packet.as_str().as_bytes()),
            content_type: Bytes::copy_from_slice(msg.content_type.as_bytes()),
            metadata: Bytes::from(msg.metadata.clone()),
            payload: msg.payload.clone(),
        }
    }

    /// A request to this node itself: through the same mailbox, dispatcher and filters. Its
    /// reply is never [`ReplyBody::Error`]: a dispatch that failed ends it with the error
    /// itself ([`crate::messaging::same_node_error`]: the kind a caller on another node sees),
    /// not an error reply to decode.
    pub(crate) async fn local_request(
        self: &Arc<Self>,
        address: &Address,
        msg: &OutboundMessage,
        timeout: Duration,
    ) -> Result<ReplyBody, ZLinkError> {
        let frame = self.local_frame(address, msg, true);
        let cost = job_cost(frame.payload.len(), frame.metadata.len());
        self.metrics.sent(MessageKind::Request, SendPath::Local);
        let started = std::time::Instant::now();
        let out = self
            .local_request_run(frame, cost, timeout)
            .await
            .map_err(|e| crate::messaging::same_node_error(e, msg.packet.as_str()));
        self.metrics
            .request_ended(started, matches!(out, Ok(ReplyBody::Ok { .. })));
        out
    }

    async fn local_request_run(
        self: &Arc<Self>,
        frame: InboundFrame,
        cost: usize,
        timeout: Duration,
    ) -> Result<ReplyBody, ZLinkError> {
        let run = async {
            let mut job = self.jobs.acquire().await;
            let _permit = self.mailbox.reserve(cost).await;
            // The wait is over: the permit returns before the first filter runs (06 §3).
            job.release();
            self.dispatcher.dispatch(frame, Cancellation::new()).await
        };
        let outcome = tokio::select! {
            r = tokio::time::timeout(timeout, run) => match r {
                Ok(o) => o,
                Err(_) => return Err(ZLinkError::ReplyTimeout { timeout }),
            },
            () = self.life.force().cancelled() => return Err(ZLinkError::ShuttingDown),
        };
        match outcome {
            DispatchOutcome::Reply {
                content_type,
                payload,
                ..
            } => Ok(ReplyBody::Ok {
                content_type: Bytes::from(content_type.into_bytes()),
                payload: Bytes::from(payload),
            }),
            DispatchOutcome::ErrorReply { error, .. } => Err(error),
            DispatchOutcome::NoReply(_) => Err(ZLinkError::NoReply),
        }
    }

    /// A one-way send to this node itself: admitted once the mailbox has room, then run.
    pub(crate) async fn local_send(
        self: &Arc<Self>,
        address: &Address,
        msg: &OutboundMessage,
        timeout: Duration,
    ) -> Result<(), ZLinkError> {
        let frame = self.local_frame(address, msg, false);
        let cost = job_cost(frame.payload.len(), frame.metadata.len());
        let reserve = async {
            let job = self.jobs.acquire().await;
            (job, self.mailbox.reserve(cost).await)
        };
        let (mut job, permit) = match tokio::time::timeout(timeout, reserve).await {
            Ok(p) => p,
            Err(_) => return Err(ZLinkError::SendTimeout { timeout }),
        };
        let work = self.life.admit()?;
        self.metrics.sent(MessageKind::OneWay, SendPath::Local);
        let node = Arc::clone(self);
        tokio::spawn(async move {
            // Waited in the executor: the permit returns before the first filter runs.
            job.release();
            let _permit = permit;
            let _work = work;
            let cancel = Cancellation::new();
            tokio::select! {
                o = node.dispatcher.dispatch(frame, cancel.clone()) => log_send_end(&node.metrics, &o),
                () = node.life.force().cancelled() => cancel.cancel(),
            }
        });
        Ok(())
    }

    /// Sends the control-plane one-way `command` to every connected peer (best effort).
    pub(crate) fn broadcast_control(&self, command: &str, payload: Bytes) {
        // Every connection that is up, confirmed by discovery or not yet: a peer this node's
        // list does not name yet may already select this node (its own list names it), so
        // it must not miss a weight change.
        let peers: Vec<PeerHandle> = self
            .peers
            .read()
            .connected()
            .map(|p| p.handle.clone())
            .collect();
        for p in peers {
            if let Err(e) = self.send_control(&p, command, payload.clone()) {
                tracing::debug!(peer = %p.info().rid, %e, command, "control send failed");
            }
        }
    }

    /// Queues a control-plane one-way command to one peer.
    pub(crate) fn send_control(
        &self,
        peer: &PeerHandle,
        command: &str,
        payload: Bytes,
    ) -> Result<(), ZLinkError> {
        let op = self
            .transport
            .ids()
            .next_operation_id()
            .map_err(transport_error)?;
        let env = Envelope::one_way(op, &self.rid, self.generation, payload)
            .with_packet_name(command)
            .map_err(transport_error)?;
        peer.try_send_control(&env).map_err(transport_error)
    }

    /// Sends a control-plane request and waits for its reply (never through the mailbox,
    /// filters or handler keys).
    pub(crate) async fn control_request(
        &self,
        peer: &PeerHandle,
        command: &str,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<ReplyBody, ZLinkError> {
        let ids = self.transport.ids();
        let route = ids.next_reply_route_id().map_err(transport_error)?;
        let op = ids.next_operation_id().map_err(transport_error)?;
        let env = Envelope::request(op, route, &self.rid, self.generation, payload)
            .with_packet_name(command)
            .map_err(transport_error)?;
        let (_guard, rx) = self.pending.register(route, op, peer.info());
        let wait = async {
            peer.send_control(&env).await.map_err(transport_error)?;
            match rx.await {
                Ok((Ok(reply), _)) => Ok(ReplyBody::from_wire(reply)),
                Ok((Err(e), _)) => Err(e),
                Err(_) => Err(ZLinkError::ShuttingDown),
            }
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(r) => r,
            Err(_) => Err(ZLinkError::ReplyTimeout { timeout }),
        }
    }
}

/// The reply body and whether it came from another node, from what the pending table
/// delivered.
fn ended(
    r: Result<super::pending::Ended, tokio::sync::oneshot::error::RecvError>,
) -> Result<(ReplyBody, bool), ZLinkError> {
    match r {
        Ok((Ok(reply), elsewhere)) => Ok((ReplyBody::from_wire(reply), elsewhere)),
        Ok((Err(e), _)) => Err(e),
        Err(_) => Err(ZLinkError::ShuttingDown),
    }
}

/// Logs how a one-way dispatch ended (nothing goes back to the sender, spec 06 §20); a
/// failed one counts as dropped (`handler_failed`).
pub(crate) fn log_send_end(metrics: &NodeMetrics, outcome: &DispatchOutcome) {
    if let DispatchOutcome::NoReply(SendEnd::Failed(e)) = outcome {
        metrics.dropped(DropReason::HandlerFailed);
        tracing::warn!(error = %e, kind = %e.kind(), "one-way dispatch failed");
    }
}

/// Maps a transport error onto the call results of spec 06 §20.
pub(crate) fn transport_error(e: TransportError) -> ZLinkError {
    match e {
        TransportError::FrameTooLarge { len, max } => ZLinkError::MessageTooLarge { len, max },
        TransportError::ShuttingDown => ZLinkError::ShuttingDown,
        other => match other.kind() {
            TransportErrorKind::Exhausted | TransportErrorKind::InvalidArgument => {
                ZLinkError::transport(other)
            }
            _ => ZLinkError::Unavailable {
                target: crate::messaging::Target::Peer,
                reason: UnavailableReason::ConnectionLost,
            },
        },
    }
}
