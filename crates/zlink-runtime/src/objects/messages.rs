//! Messages to objects by global id (spec 21 §7.3, 06 §6–§7, §20): the owner of the Ready
//! incarnation resolved through the node's route cache (a `SpotWide` member through its
//! Spot's record), then the message delivered to the activation here or over the mesh, with
//! exactly one terminal per request.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::{AllocationState, ObjectKind};
use zlink_codec::{ObjectId, RoutingId};

use super::client::ObjectClient;
use super::host::{ObjectHost, ObjectKey, what};
use super::membership::Membership;
use super::registration::{MessageContext, ObjectCall, Reply};
use super::route_source::{self, RouteSource};
use super::routes::RouteMark;
use crate::mesh::node::{Address, ReplyBody};
use crate::messaging::{
    ErrorKind, ErrorReply, IdRole, InvalidCall, Metadata, OutboundMessage, PayloadError, RouteKind,
    UnavailableReason, ZLinkError,
};
use crate::telemetry::labels::{MessageKind, SendPath};
use tracing::Instrument;
use zlink_location::AuthorityRead;

/// The record names an owner this node cannot reach (its route is not ready, or its lease
/// is gone and discovery dropped it): `Unavailable`, never `NotFound` (spec 06 §20).
pub(crate) fn owner_unreachable(e: ZLinkError) -> ZLinkError {
    match e {
        ZLinkError::NoRoute { target } => ZLinkError::Unavailable {
            target,
            reason: UnavailableReason::NotConnected,
        },
        other => other,
    }
}

/// The reply to an object request: as the owner's node sent it, or — from an activation on
/// this node — the handler's own reply (its error is the request's own `Err`, never an
/// error reply).
pub(crate) enum ObjectReply {
    /// Received over the mesh.
    Body(ReplyBody),
    /// An activation here answered.
    Local(Reply),
}

impl ObjectClient {
    /// The owner of `key` with the connection to reach it (`None`: this node). A cached owner
    /// this node has no Ready connection to is dropped and the record read once more before
    /// anything is sent (the owner may have moved and stopped): the message goes to the
    /// owner the record names now, or the caller gets `Unavailable`. An owner read from the
    /// record whose connection is about to exist (not listed yet, or listed and its first
    /// connection being made) is waited for until `deadline` (`NodeInner::route_to_within`).
    async fn reachable_owner(
        &self,
        key: &ObjectKey,
        span: &tracing::Span,
        deadline: tokio::time::Instant,
    ) -> Result<Option<(Arc<RoutingId>, zlink_transport::PeerHandle)>, ZLinkError> {
        // Earlier messages of this node still wait in the forward queue of a move that left
        // here: this one joins them (spec 21 §1.3; delivered locally, the follow takes it).
        if self.objects.interception.forwards_pending(key) {
            return Ok(None);
        }
        // An activation live here takes the call: this node's admission gate and the audit of
        // held activations keep it the current incarnation (a sealed one hands the call to its
        // move), so no Store read and no cached route is needed. The route cache holds only
        // objects of other nodes: an idle Actor here costs no cache entry.
        if self.objects.is_live(key) {
            self.objects.route_found(span, RouteSource::Live);
            return Ok(None);
        }
        let (owner, cached) = match self.objects.routes.get(key) {
            Some(node) => (node, true),
            None => (self.owner_read(key).await?, false),
        };
        self.objects.route_found(
            span,
            if cached {
                RouteSource::Cache
            } else {
                RouteSource::Store
            },
        );
        if *owner == self.objects.rid {
            return Ok(None);
        }
        // A cached owner without a connection is not waited for: the record may name
        // another owner now.
        let routed = if cached {
            self.node.inner.route_to(&owner)
        } else {
            self.node.inner.route_to_within(&owner, deadline).await
        };
        match routed {
            Ok(peer) => Ok(Some((owner, peer))),
            Err(_) if cached => {
                self.objects.routes.forget(key);
                let owner = self.owner_read(key).await?;
                self.objects.route_found(span, RouteSource::Store);
                if *owner == self.objects.rid {
                    return Ok(None);
                }
                let peer = self
                    .node
                    .inner
                    .route_to_within(&owner, deadline)
                    .await
                    .map_err(owner_unreachable)?;
                Ok(Some((owner, peer)))
            }
            Err(e) => Err(owner_unreachable(e)),
        }
    }

    /// The node that owns the Ready incarnation of `key`, read from the Store (Missing →
    /// NotFound, Creating → Unavailable; neither is cached); a Ready owner is remembered in
    /// the route cache (younger than `routeCacheMaxAge`), which the callers consult first.
    ///
    /// Boxed: a Store read is a large future, and this is the route cache's miss path; the
    /// hit path's future (every message's) stays small.
    fn owner_read<'a>(
        &'a self,
        key: &'a ObjectKey,
    ) -> crate::messaging::BoxFuture<'a, Result<Arc<RoutingId>, ZLinkError>> {
        Box::pin(async move {
            self.owner_read_once(key)
                .await
                .map_err(|e| super::host::route_failure(key, e))
        })
    }

    /// [`Self::owner_read`] with the Store's own errors as they are.
    async fn owner_read_once(&self, key: &ObjectKey) -> Result<Arc<RoutingId>, ZLinkError> {
        let kind = match key.0 {
            AuthorityKind::Actor => ObjectKind::Actor,
            AuthorityKind::Spot => ObjectKind::UserSpot,
        };
        let mut read = self.read(kind, &key.1).await?;
        // A record whose owner run is dead is recovered (at most twice), then read again: the
        // caller gets the record as it is now, not an endless `Unavailable`.
        for _ in 0..2 {
            let AuthorityRead::Found { handle, .. } = &read else {
                break;
            };
            match self.objects.recover_if_dead(handle).await {
                Ok(true) => read = self.read(kind, &key.1).await?,
                Ok(false) => break,
                // A recovery that failed at the Store is no failure of the message: the record
                // is answered as read — its owner run is dead, so the route is unavailable
                // (06 §20: an Actor or Spot message is `NotFound` or `Unavailable`, never
                // `InternalFailure`); a later message recovers it.
                Err(e) => {
                    tracing::debug!(object = %what(key.0, &key.1), error = %e, "at-access recovery failed: the record is answered as read");
                    break;
                }
            }
        }
        match read {
            AuthorityRead::Found { handle, .. } if handle.state() == AllocationState::Active => {
                // A member of a SpotWide Spot resolves through the Spot's aggregate authority.
                if let Some(m) = Membership::decode(handle.payload()).filter(|m| m.spot_wide) {
                    let spot = ObjectId::new(m.spot)
                        .map_err(InvalidCall::invalid_id(IdRole::MembershipSpotId))?;
                    if let AuthorityRead::Found { handle: s, .. } =
                        self.read(ObjectKind::UserSpot, &spot).await?
                    {
                        if s.state() == AllocationState::Active {
                            self.remember_elsewhere(key, &s);
                            return Ok(Arc::new(s.node().routing_id));
                        }
                    }
                    return Err(ZLinkError::Unavailable {
                        target: what(AuthorityKind::Spot, &spot),
                        reason: UnavailableReason::NotServing,
                    });
                }
                self.remember_elsewhere(key, &handle);
                Ok(Arc::new(handle.node().routing_id))
            }
            AuthorityRead::Found { .. } => Err(ZLinkError::Unavailable {
                target: what(key.0, &key.1),
                reason: UnavailableReason::NotServing,
            }),
            AuthorityRead::Missing { .. } => Err(ZLinkError::NoRoute {
                target: what(key.0, &key.1),
            }),
        }
    }

    /// Caches the route to `key` that `handle` shows, unless it names this node: a call to an
    /// activation here finds it in the live set first ([`Self::reachable_owner`]), and an
    /// entry naming another node is stale then.
    fn remember_elsewhere(&self, key: &ObjectKey, handle: &zlink_location::AuthorityHandle) {
        if handle.node().routing_id == self.objects.rid {
            self.objects.routes.forget(key);
        } else {
            self.objects.routes.remember(key, handle);
        }
    }

    /// Sends `msg` as a request to the Ready object `key` and waits for the reply (exactly
    /// one terminal; a NotFound/Unavailable result drops the cached route).
    pub(crate) async fn request(
        &self,
        key: &ObjectKey,
        msg: &OutboundMessage,
        timeout: Duration,
    ) -> Result<ObjectReply, ZLinkError> {
        let span = route_source::call_span(RouteKind::Request, key.1.as_str());
        let result = async {
            let deadline = tokio::time::Instant::now() + timeout;
            match self.reachable_owner(key, &span, deadline).await? {
                None => {
                    // A call to an activation here: counted and timed like a remote one.
                    let metrics = &self.node.inner.metrics;
                    metrics.sent(MessageKind::Request, SendPath::Local);
                    let started = std::time::Instant::now();
                    // The wait runs on tokio's clock from its own now (virtual in a
                    // simulation); `started` only times the metric.
                    let deadline = tokio::time::Instant::now() + timeout;
                    let out = self.local_request(key, msg, (deadline, timeout)).await;
                    metrics.request_ended(started, matches!(out, Ok(ObjectReply::Local(_))));
                    out
                }
                Some((owner, peer)) => {
                    let mark = self.objects.routes.mark(key, &owner);
                    // What is left of the caller's timeout after any wait for the connection.
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    self.remote_request(&peer, key, msg, left, mark, &span)
                        .await
                        .map(ObjectReply::Body)
                }
            }
        }
        .instrument(span.clone())
        .await;
        if let Err(e) = &result {
            if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::Unavailable) {
                self.objects.routes.forget(key);
            }
        }
        result
    }

    /// Drops the cached route of `key` when a decoded reply says it is stale.
    pub(crate) fn reply_seen(&self, key: &ObjectKey, e: &ZLinkError) {
        if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::Unavailable) {
            self.objects.routes.forget(key);
        }
    }

    /// The call of `msg` to `key`; `typed_reply`: the caller takes the handler's value
    /// ([`Reply::Typed`]).
    fn call(
        key: &ObjectKey,
        msg: &OutboundMessage,
        metadata: Metadata,
        typed_reply: bool,
    ) -> ObjectCall {
        ObjectCall {
            content_type: crate::messaging::content_type_bytes(&msg.content_type),
            payload: msg.payload.clone(),
            typed_reply,
            context: MessageContext {
                id: key.1.as_str().to_owned(),
                packet: msg.packet.clone(),
                metadata,
                relocation: Default::default(),
                node: Default::default(),
                timers: Default::default(),
            },
            job: crate::mesh::JobPermit::none(),
        }
    }

    /// A request to an activation here, answered within `timeout` from `started`. The reply
    /// is the handler's value itself (not encoded): the caller is on this node. So is a
    /// refusal or a failure: the handler's (or the runtime's) error itself, of the kind the
    /// error reply a caller on another node decodes has (`ErrorReply::from_error`); nothing
    /// of it crosses a node boundary, so nothing is stripped.
    async fn local_request(
        &self,
        key: &ObjectKey,
        msg: &OutboundMessage,
        (deadline, timeout): (tokio::time::Instant, Duration),
    ) -> Result<ObjectReply, ZLinkError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let call = Self::call(key, msg, Metadata::from_bytes(&msg.metadata)?, true);
        let cost = crate::mesh::node::job_cost(msg.payload.len(), msg.metadata.len());
        if !self.objects.is_live(key) && !self.objects.interception.covers(key) {
            // Boxed: a Store read, off the path of every other request.
            let location = Arc::clone(&self.objects.location);
            return Err(Box::pin(ObjectHost::not_live(
                location,
                key.clone(),
                Some(Arc::clone(&self.objects)),
            ))
            .await);
        }
        // The job waits for its Application Job Queue permit within the request's time
        // (spec 06 §3: a cancellable wait, never a refusal).
        let mut call = call;
        let jobs = &self.node.inner.jobs;
        call.job = match jobs.try_acquire() {
            Some(permit) => permit,
            None => tokio::time::timeout_at(deadline, jobs.acquire())
                .await
                .map_err(|_| ZLinkError::ReplyTimeout { timeout })?,
        };
        // An idle activation's job runs here, on this task (`here` module): the reply is then
        // ready before the wait below starts.
        let (delivered, here) = super::here::offered(|| {
            self.objects
                .deliver(key, RouteKind::Request, call, cost, Some(tx.into()))
        });
        if let Some(job) = here {
            job.run_or_spawn();
        }
        delivered?;
        let out = match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(out)) => out,
            Ok(Err(_)) => Err(ZLinkError::ShuttingDown),
            Err(_) => Err(ZLinkError::ReplyTimeout { timeout }),
        };
        match out {
            Ok(Some(reply)) => Ok(ObjectReply::Local(reply)),
            Ok(None) => Err(ZLinkError::NoReply),
            Err(e) => Err(e),
        }
    }

    /// A request to the owner `peer`; `mark` is what the route entry showed before it was
    /// queued.
    async fn remote_request(
        &self,
        peer: &zlink_transport::PeerHandle,
        key: &ObjectKey,
        msg: &OutboundMessage,
        timeout: Duration,
        mark: Option<RouteMark>,
        span: &tracing::Span,
    ) -> Result<ReplyBody, ZLinkError> {
        let head = ObjectHead::new(&key.1);
        let (out, elsewhere) = self
            .node
            .inner
            .remote_request_noting(peer, &address(key.0), (msg, head.bytes()), timeout)
            .await;
        if elsewhere {
            self.objects.route_found(span, RouteSource::Follow);
            // The object moved: its new owner answered this followed (or relayed) request.
            // The next message reads the record once instead of being followed again — unless
            // a one-way sent after this request may still be on its way through the old owner
            // (it would be overtaken; `routes` module doc).
            self.objects.routes.moved(key, mark.as_ref());
        }
        out
    }

    /// Sends `msg` one-way to the Ready object `key` (completes once admitted).
    pub(crate) async fn send(
        &self,
        key: &ObjectKey,
        msg: &OutboundMessage,
    ) -> Result<(), ZLinkError> {
        let span = route_source::call_span(RouteKind::Send, key.1.as_str());
        self.send_on(key, msg, &span).instrument(span.clone()).await
    }

    async fn send_on(
        &self,
        key: &ObjectKey,
        msg: &OutboundMessage,
        span: &tracing::Span,
    ) -> Result<(), ZLinkError> {
        let deadline = tokio::time::Instant::now() + crate::mesh::node::DEFAULT_SEND_TIMEOUT;
        let Some((owner, peer)) = self.reachable_owner(key, span, deadline).await? else {
            let call = Self::call(key, msg, Metadata::from_bytes(&msg.metadata)?, false);
            let cost = crate::mesh::node::job_cost(msg.payload.len(), msg.metadata.len());
            if !self.objects.is_live(key) && !self.objects.interception.covers(key) {
                self.objects.routes.forget(key);
                return Err(ObjectHost::not_live(
                    Arc::clone(&self.objects.location),
                    key.clone(),
                    Some(Arc::clone(&self.objects)),
                )
                .await);
            }
            let timeout = crate::mesh::node::DEFAULT_SEND_TIMEOUT;
            let mut call = call;
            call.job = tokio::time::timeout(timeout, self.node.inner.jobs.acquire())
                .await
                .map_err(|_| ZLinkError::SendTimeout { timeout })?;
            self.objects
                .deliver(key, RouteKind::Send, call, cost, None)?;
            self.node
                .inner
                .metrics
                .sent(MessageKind::OneWay, SendPath::Local);
            return Ok(());
        };
        let head = ObjectHead::new(&key.1);
        self.node
            .inner
            .remote_send(
                &peer,
                &address(key.0),
                (msg, head.bytes()),
                crate::mesh::node::DEFAULT_SEND_TIMEOUT,
            )
            .await?;
        // Counted once queued: a later request's answer from a new owner then tells whether
        // this one-way can still be overtaken (`routes` module doc).
        self.objects.routes.one_way_sent(key, &owner);
        Ok(())
    }
}

impl ObjectClient {
    /// Forwards one message a live relocation held or followed to the object's new owner
    /// (spec 21 §7.3), unchanged: a request's output is the remote handler's.
    pub(crate) async fn forward_held(
        &self,
        owner: &RoutingId,
        key: &ObjectKey,
        route: RouteKind,
        call: ObjectCall,
    ) -> super::registration::ObjectOutput {
        let msg = OutboundMessage {
            packet: call.context.packet.clone(),
            content_type: String::from_utf8_lossy(&call.content_type).into_owned(),
            payload: call.payload.clone(),
            metadata: call.context.metadata.to_bytes(),
        };
        let peer = self.node.inner.route_to(owner).map_err(owner_unreachable)?;
        let head = ObjectHead::new(&key.1);
        let inner = &self.node.inner;
        match route {
            RouteKind::Send => inner
                .remote_send(
                    &peer,
                    &address(key.0),
                    (&msg, head.bytes()),
                    crate::mesh::node::DEFAULT_SEND_TIMEOUT,
                )
                .await
                .map(|()| None),
            RouteKind::Request => match inner
                .remote_request(
                    &peer,
                    &address(key.0),
                    (&msg, head.bytes()),
                    crate::mesh::node::DEFAULT_REPLY_TIMEOUT,
                )
                .await?
            {
                ReplyBody::Ok {
                    content_type,
                    payload,
                } => Ok(Some(Reply::Encoded(
                    String::from_utf8_lossy(&content_type).into_owned(),
                    payload.to_vec(),
                ))),
                ReplyBody::Error(bytes) => Err(ErrorReply::decode(&bytes)?.into_error()),
            },
        }
    }
}

/// The envelope address of messages for objects of `kind`.
fn address(kind: AuthorityKind) -> Address {
    match kind {
        AuthorityKind::Actor => Address::Actor,
        AuthorityKind::Spot => Address::Spot,
    }
}

/// The head of an object message's payload on the wire: `u8` id length, then the id (at most
/// 255 bytes, an ObjectId bound); the message payload follows it. Kept on the stack: the
/// envelope copies it and the payload into the frame in one step.
pub(crate) struct ObjectHead {
    buf: [u8; 256],
    len: usize,
}

impl ObjectHead {
    pub(crate) fn new(id: &ObjectId) -> Self {
        let idb = id.as_str().as_bytes();
        // ObjectId guarantees 1..=255 bytes; a longer one could not be framed.
        let n = idb.len().min(255);
        let mut buf = [0u8; 256];
        buf[0] = n as u8;
        buf[1..=n].copy_from_slice(&idb[..n]);
        Self { buf, len: 1 + n }
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Splits an object message's payload into the id and the message payload.
pub(crate) fn unframe_object_payload(payload: &Bytes) -> Result<(ObjectId, Bytes), ZLinkError> {
    let bad = ZLinkError::malformed_payload("object message");
    let len = usize::from(
        *payload
            .first()
            .ok_or(bad(PayloadError::Format("no object id")))?,
    );
    if payload.len() < 1 + len {
        return Err(bad(PayloadError::Format("truncated object id")));
    }
    let id = std::str::from_utf8(&payload[1..1 + len])
        .map_err(|_| bad(PayloadError::Format("the object id is not UTF-8")))?;
    let id = ObjectId::new(id).map_err(|e| bad(e.into()))?;
    Ok((id, payload.slice(1 + len..)))
}
