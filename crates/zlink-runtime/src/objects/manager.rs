//! The Actor manager (spec 21 §7, §7.2, §7.3; 06 §15, §17, §20): get-or-create placed by
//! weight and capacity through the authority layer, find, and messaging by global id through
//! a route cache.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::time::Instant;
use zlink_codec::records::{AllocationState, ObjectKind};
use zlink_codec::{ObjectId, RoutingId, StableType};

use super::host::{ActorRef, CreateCommand, ObjectHost, store_failure};
use super::registration::{ActorCall, ActorContext};
use crate::location::{AuthorityRead, Conflict, Discovery, LocationError, Outcome};
use crate::mesh::messaging::{
    ErrorKind, ErrorReply, Message, Metadata, OutboundMessage, Request, RouteKind, ZLinkError,
    decode_reply,
};
use crate::mesh::node::{Address, CallOptions, MeshNode, ReplyBody};

/// How long a manager call waits for a creation (its deadline) unless told otherwise.
pub const DEFAULT_CREATE_DEADLINE: Duration = Duration::from_secs(30);

/// The command-plane name of the remote Actor creation.
pub(crate) const CREATE_ACTOR: &str = "zlink.actor.create";

/// The command-plane name of the remote Actor destroy.
pub(crate) const DESTROY_ACTOR: &str = "zlink.actor.destroy";

/// Creates, finds and messages the Actors of one object mesh (cheap to clone).
#[derive(Clone)]
pub struct ActorManager {
    pub(crate) node: MeshNode,
    pub(crate) objects: Arc<ObjectHost>,
    pub(crate) discovery: Arc<Discovery>,
    deadline: Duration,
}

impl std::fmt::Debug for ActorManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActorManager")
            .field("mesh", &self.objects.mesh)
            .finish_non_exhaustive()
    }
}

fn invalid(what: &str) -> ZLinkError {
    ZLinkError::application(ErrorKind::InvalidOperation, what)
}

impl ActorManager {
    pub(crate) fn new(node: MeshNode, objects: Arc<ObjectHost>, discovery: Arc<Discovery>) -> Self {
        Self {
            node,
            objects,
            discovery,
            deadline: DEFAULT_CREATE_DEADLINE,
        }
    }

    /// The same manager with another creation deadline.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    fn parse(
        id: &str,
        stable_type: Option<&str>,
    ) -> Result<(ObjectId, Option<StableType>), ZLinkError> {
        let id = ObjectId::new(id).map_err(|e| invalid(&format!("actor id: {e}")))?;
        let st = stable_type
            .map(|t| StableType::new(t).map_err(|e| invalid(&format!("stable type: {e}"))))
            .transpose()?;
        Ok((id, st))
    }

    /// The current Ready Actor `id`, or `None` (a Creating record is not Ready; nothing is
    /// created).
    pub async fn find(&self, id: &str) -> Result<Option<ActorRef>, ZLinkError> {
        let (id, _) = Self::parse(id, None)?;
        match self.read(&id).await? {
            AuthorityRead::Found { handle, .. } if handle.state() == AllocationState::Active => {
                Ok(Some(ActorRef::of(&handle)))
            }
            _ => Ok(None),
        }
    }

    /// Destroys exactly the incarnation `actor` names (spec 21 §7.2): `Ok(false)` when no
    /// record exists, `InvalidOperation` when another incarnation of the id exists,
    /// `Unavailable` when its owner cannot be reached. Never finds and destroys a newer one.
    pub async fn destroy(&self, actor: &ActorRef) -> Result<bool, ZLinkError> {
        let handle = match self.read(&actor.id).await? {
            AuthorityRead::Missing { .. } => return Ok(false),
            AuthorityRead::Found { handle, .. } => handle,
        };
        if handle.object_generation().get() != actor.generation {
            return Err(invalid(&format!(
                "actor {:?} is incarnation {}, not {}",
                actor.id.as_str(),
                handle.object_generation().get(),
                actor.generation
            )));
        }
        self.forget(&actor.id);
        let owner = handle.node().routing_id;
        if owner == self.objects.rid {
            return self.objects.destroy(&actor.id, actor.generation).await;
        }
        let body = serde_json::to_vec(&super::inbound::DestroyCommand {
            id: actor.id.as_str().to_owned(),
            generation: actor.generation.to_string(),
        })
        .map_err(|e| invalid(&e.to_string()))?;
        let peer = self
            .node
            .inner
            .route_to(&owner)
            .map_err(owner_unreachable)?;
        match self
            .node
            .inner
            .control_request(&peer, DESTROY_ACTOR, Bytes::from(body), self.deadline)
            .await?
        {
            ReplyBody::Ok { payload, .. } => Ok(&payload[..] == b"true"),
            ReplyBody::Error(bytes) => Err(ErrorReply::decode(&bytes)?.into_error()),
        }
    }

    /// The Actor `id` of `stable_type`: the existing Ready one, the result of a creation in
    /// progress, or a new one placed on an eligible Object Server by weight and capacity
    /// (spec 21 §7). Another type under the id is `TypeMismatch`; no eligible node is
    /// `CapacityExceeded`; the deadline passing is `DeadlineExceeded` (the next call re-reads).
    pub async fn get_or_create(&self, stable_type: &str, id: &str) -> Result<ActorRef, ZLinkError> {
        self.obtain(stable_type, id, false).await
    }

    /// Creates the Actor `id` of `stable_type`; an existing or in-progress one is
    /// `AlreadyExists`.
    pub async fn create(&self, stable_type: &str, id: &str) -> Result<ActorRef, ZLinkError> {
        self.obtain(stable_type, id, true).await
    }

    async fn read(&self, id: &ObjectId) -> Result<AuthorityRead, ZLinkError> {
        self.objects
            .location
            .authority()
            .read(ObjectKind::Actor, id)
            .await
            .map_err(store_failure)
    }

    async fn obtain(
        &self,
        stable_type: &str,
        id: &str,
        exclusive: bool,
    ) -> Result<ActorRef, ZLinkError> {
        let (id, st) = Self::parse(id, Some(stable_type))?;
        let Some(st) = st else {
            return Err(invalid("a stable type is required"));
        };
        let deadline = Instant::now() + self.deadline;
        loop {
            if Instant::now() >= deadline {
                return Err(ZLinkError::application(
                    ErrorKind::DeadlineExceeded,
                    "the creation did not finish before the deadline",
                ));
            }
            match self.read(&id).await? {
                AuthorityRead::Found { handle, .. } => {
                    if handle.stable_type() != &st {
                        return Err(ZLinkError::application(
                            ErrorKind::TypeMismatch,
                            &format!(
                                "actor {:?} is a {:?}",
                                id.as_str(),
                                handle.stable_type().as_str()
                            ),
                        ));
                    }
                    if exclusive {
                        return Err(ZLinkError::application(
                            ErrorKind::AlreadyExists,
                            &format!("actor {:?} exists", id.as_str()),
                        ));
                    }
                    if handle.state() == AllocationState::Active {
                        return Ok(ActorRef::of(&handle));
                    }
                    // Creating: wait for its result.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                AuthorityRead::Missing { .. } => {
                    let candidates = self
                        .discovery
                        .candidates(self.objects.location.authority())
                        .await
                        .map_err(store_failure)?;
                    let outcome = self
                        .objects
                        .location
                        .authority()
                        .place_and_reserve(
                            candidates,
                            ObjectKind::Actor,
                            id.clone(),
                            st.clone(),
                            Vec::new(),
                            None,
                        )
                        .await;
                    match outcome {
                        Ok(Outcome::Applied(handle)) => {
                            let created = self.create_on(&handle, deadline).await?;
                            self.objects
                                .routes
                                .remember(&id, &created.node, handle.owner());
                            return Ok(created);
                        }
                        // Someone else's creation won the row: follow it.
                        Ok(Outcome::Conflict(Conflict::Record { .. })) => {}
                        Ok(Outcome::Conflict(c)) => {
                            tracing::debug!(?c, "reservation conflicted; reading again");
                        }
                        Err(LocationError::CapacityExceeded) => {
                            return Err(ZLinkError::application(
                                ErrorKind::CapacityExceeded,
                                "no eligible Object Server has room for this type",
                            ));
                        }
                        Err(e) => return Err(store_failure(e)),
                    }
                }
            }
        }
    }

    /// Runs the creation on the reservation's node: here, or through the command plane.
    async fn create_on(
        &self,
        handle: &crate::location::AuthorityHandle,
        deadline: Instant,
    ) -> Result<ActorRef, ZLinkError> {
        let target = handle.node().routing_id;
        if target == self.objects.rid {
            return self.objects.create_reserved(handle).await;
        }
        let cmd = CreateCommand {
            id: handle.id().as_str().to_owned(),
            generation: handle.object_generation().get(),
            stable_type: handle.stable_type().as_str().to_owned(),
        };
        let body = serde_json::to_vec(&cmd).map_err(|e| invalid(&e.to_string()))?;
        let peer = self.node.inner.route_to(&target)?;
        let timeout = deadline.saturating_duration_since(Instant::now());
        match self
            .node
            .inner
            .control_request(&peer, CREATE_ACTOR, Bytes::from(body), timeout)
            .await?
        {
            ReplyBody::Ok { payload, .. } => ActorRef::from_json(&payload),
            ReplyBody::Error(bytes) => Err(ErrorReply::decode(&bytes)?.into_error()),
        }
    }

    /// The node that owns the Ready incarnation of `id`: from the route cache (younger than
    /// `routeCacheMaxAge`), else read (Missing → NotFound, Creating → Unavailable; neither is
    /// cached).
    async fn owner(&self, id: &ObjectId) -> Result<RoutingId, ZLinkError> {
        if let Some(node) = self.objects.routes.get(id) {
            return Ok(node);
        }
        match self.read(id).await? {
            AuthorityRead::Found { handle, .. } if handle.state() == AllocationState::Active => {
                let node = handle.node().routing_id;
                self.objects.routes.remember(id, &node, handle.owner());
                Ok(node)
            }
            AuthorityRead::Found { .. } => Err(ZLinkError::Unavailable {
                target: format!("actor {:?}", id.as_str()),
                reason: crate::mesh::messaging::UnavailableReason::NotServing,
            }),
            AuthorityRead::Missing { .. } => Err(ZLinkError::NoRoute {
                target: format!("actor {:?}", id.as_str()),
            }),
        }
    }

    fn forget(&self, id: &ObjectId) {
        self.objects.routes.forget(id);
    }

    /// Sends `request` to the Ready Actor `id` and waits for its typed reply (spec 06 §7,
    /// §20): Missing → NotFound, owner route not ready → Unavailable, exactly one terminal.
    pub async fn request<R: Request>(&self, id: &str, request: &R) -> Result<R::Reply, ZLinkError> {
        self.request_with(id, request, &CallOptions::default())
            .await
    }

    /// [`request`](Self::request) with call options.
    pub async fn request_with<R: Request>(
        &self,
        id: &str,
        request: &R,
        options: &CallOptions,
    ) -> Result<R::Reply, ZLinkError> {
        let (id, _) = Self::parse(id, None)?;
        let codecs = self.node.inner.codecs().clone();
        let msg = OutboundMessage::encode(&codecs, request, &options.metadata)?;
        let owner = self.owner(&id).await?;
        let result = if owner == self.objects.rid {
            self.local(&id, RouteKind::Request, &msg, options.reply_timeout)
                .await
        } else {
            self.remote(&owner, &id, &msg, options.reply_timeout).await
        };
        let body = match result {
            Ok(b) => b,
            Err(e) => {
                if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::Unavailable) {
                    self.forget(&id);
                }
                return Err(e);
            }
        };
        let out = decode_reply::<R>(&codecs, body.as_inbound());
        if let Err(e) = &out {
            if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::Unavailable) {
                self.forget(&id);
            }
        }
        out
    }

    async fn local(
        &self,
        id: &ObjectId,
        route: RouteKind,
        msg: &OutboundMessage,
        timeout: Duration,
    ) -> Result<ReplyBody, ZLinkError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let call = ActorCall {
            content_type: Bytes::copy_from_slice(msg.content_type.as_bytes()),
            payload: Bytes::from(msg.payload.clone()),
            context: ActorContext {
                id: id.as_str().to_owned(),
                packet: msg.packet.clone(),
                metadata: Metadata::from_bytes(&msg.metadata)?,
            },
        };
        let cost = crate::mesh::node::job_cost(msg.payload.len(), msg.metadata.len());
        if !self.objects.is_live(id) {
            return Err(ObjectHost::not_live(Arc::clone(&self.objects.location), id.clone()).await);
        }
        self.objects.deliver(id, route, call, cost, Some(tx))?;
        let out = match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(out)) => out,
            Ok(Err(_)) => Err(ZLinkError::ShuttingDown),
            Err(_) => Err(ZLinkError::ReplyTimeout { timeout }),
        };
        match out {
            Ok(Some((ct, bytes))) => Ok(ReplyBody::Ok {
                content_type: Bytes::from(ct.into_bytes()),
                payload: Bytes::from(bytes),
            }),
            Ok(None) => Err(ZLinkError::application(
                ErrorKind::InternalFailure,
                "the handler produced no reply",
            )),
            Err(e) => Ok(ReplyBody::Error(Bytes::from(
                ErrorReply::from_error(&e).encode(),
            ))),
        }
    }

    async fn remote(
        &self,
        owner: &RoutingId,
        id: &ObjectId,
        msg: &OutboundMessage,
        timeout: Duration,
    ) -> Result<ReplyBody, ZLinkError> {
        let peer = self.node.inner.route_to(owner).map_err(owner_unreachable)?;
        let framed = frame_object_payload(id, msg);
        self.node
            .inner
            .remote_request(&peer, &Address::Actor, &framed, timeout)
            .await
    }

    /// Sends `message` one-way to the Ready Actor `id` (completes once admitted).
    pub async fn send<M: Message>(&self, id: &str, message: &M) -> Result<(), ZLinkError> {
        let (id, _) = Self::parse(id, None)?;
        let codecs = self.node.inner.codecs().clone();
        let msg = OutboundMessage::encode(&codecs, message, &Metadata::empty())?;
        let owner = self.owner(&id).await?;
        if owner == self.objects.rid {
            let call = ActorCall {
                content_type: Bytes::copy_from_slice(msg.content_type.as_bytes()),
                payload: Bytes::from(msg.payload.clone()),
                context: ActorContext {
                    id: id.as_str().to_owned(),
                    packet: msg.packet.clone(),
                    metadata: Metadata::empty(),
                },
            };
            let cost = crate::mesh::node::job_cost(msg.payload.len(), 0);
            if !self.objects.is_live(&id) {
                self.forget(&id);
                return Err(ObjectHost::not_live(Arc::clone(&self.objects.location), id).await);
            }
            return self.objects.deliver(&id, RouteKind::Send, call, cost, None);
        }
        let peer = self
            .node
            .inner
            .route_to(&owner)
            .map_err(owner_unreachable)?;
        let framed = frame_object_payload(&id, &msg);
        self.node
            .inner
            .remote_send(
                &peer,
                &Address::Actor,
                &framed,
                crate::mesh::node::DEFAULT_SEND_TIMEOUT,
            )
            .await
    }
}

/// The record names an owner this node cannot reach (its route is not ready, or its lease
/// is gone and discovery dropped it): `Unavailable`, never `NotFound` (spec 06 §20).
fn owner_unreachable(e: ZLinkError) -> ZLinkError {
    match e {
        ZLinkError::NoRoute { target } => ZLinkError::Unavailable {
            target,
            reason: crate::mesh::messaging::UnavailableReason::NotConnected,
        },
        other => other,
    }
}

/// An object message's payload on the wire: `u8` id length, the id, then the message payload.
fn frame_object_payload(id: &ObjectId, msg: &OutboundMessage) -> OutboundMessage {
    let idb = id.as_str().as_bytes();
    let mut buf = BytesMut::with_capacity(1 + idb.len() + msg.payload.len());
    buf.put_u8(idb.len() as u8);
    buf.put_slice(idb);
    buf.put_slice(&msg.payload);
    OutboundMessage {
        packet: msg.packet.clone(),
        content_type: msg.content_type.clone(),
        payload: buf.to_vec(),
        metadata: msg.metadata.clone(),
    }
}

/// Splits an object message's payload into the id and the message payload.
pub(crate) fn unframe_object_payload(payload: &Bytes) -> Result<(ObjectId, Bytes), ZLinkError> {
    let bad = || ZLinkError::application(ErrorKind::ProtocolError, "malformed object message");
    let len = usize::from(*payload.first().ok_or_else(bad)?);
    if payload.len() < 1 + len {
        return Err(bad());
    }
    let id = std::str::from_utf8(&payload[1..1 + len]).map_err(|_| bad())?;
    let id = ObjectId::new(id).map_err(|_| bad())?;
    Ok((id, payload.slice(1 + len..)))
}
