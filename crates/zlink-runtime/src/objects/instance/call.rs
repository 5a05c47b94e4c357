//! The Spot direct call with Instance intent (spec 06 §15, §18; 21 §7.1): the source side of
//! cold activation.

use std::time::Duration;

use tokio::time::Instant;
use zlink_codec::records::ObjectKind;
use zlink_codec::{ObjectId, OperationId, StableType};

use super::envelope::ActivationEnvelope;
use super::{deadline_exceeded, type_mismatch};
use crate::mesh::node::ReplyBody;
use crate::messaging::{
    IdRole, InvalidCall, Message, Metadata, OutboundMessage, Request, RouteKind, ZLinkError,
    decode_reply,
};
use crate::objects::client::ObjectClient;
use crate::objects::messages::owner_unreachable;
use crate::objects::spots::user_spot_id;
use zlink_location::AuthorityRead;

/// One Spot direct call with Instance intent (from
/// [`SpotManager::instance`](crate::objects::SpotManager::instance)): delivered once to the
/// Ready Instance Spot `id`, or — when no record exists — creating it on an eligible Object
/// Server from this first message, which its new activation runs before any other (cold
/// activation; see spec 21 §7.1). An existing record decides
/// the stable type and the owner; the options never move it.
///
/// Options are set at most once each (a second setting makes the call fail with
/// `InvalidOperation` before anything is read or sent); the terminals
/// [`request`](Self::request) and [`send`](Self::send) consume the call.
///
/// | outcome | error kind |
/// |---|---|
/// | a User Spot, or an Instance Spot of another stable type, under the id | `TypeMismatch` |
/// | stable type omitted, no serving node offers an Instance Spot type | `NotFound` |
/// | stable type omitted, several Instance Spot types are served | `InvalidOperation` |
/// | no eligible node has room for the type | `CapacityExceeded` |
/// | the owner (or the chosen node) cannot be reached | `Unavailable` |
/// | the deadline passed (the message may still run: it is never sent twice) | `DeadlineExceeded` |
/// | the factory failed / declined | `InternalFailure` / `Rejected` |
#[must_use = "an Instance Spot call does nothing until request or send is awaited"]
pub struct InstanceCall {
    client: ObjectClient,
    id: String,
    stable_type: Option<String>,
    deadline: Duration,
    deadline_set: bool,
    metadata: Option<Metadata>,
    twice: Option<&'static str>,
}

impl std::fmt::Debug for InstanceCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstanceCall")
            .field("id", &self.id)
            .field("stable_type", &self.stable_type)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl InstanceCall {
    pub(crate) fn new(client: ObjectClient, id: &str, deadline: Duration) -> Self {
        Self {
            client,
            id: id.to_owned(),
            stable_type: None,
            deadline,
            deadline_set: false,
            metadata: None,
            twice: None,
        }
    }

    /// The Instance Spot stable type to create when no record exists (default: the only
    /// Instance Spot type the mesh's serving nodes offer). An existing record of another type
    /// is `TypeMismatch`.
    pub fn stable_type(mut self, stable_type: impl Into<String>) -> Self {
        if self.stable_type.is_some() {
            self.twice.get_or_insert("stable type");
        }
        self.stable_type = Some(stable_type.into());
        self
    }

    /// The deadline spanning the whole call, from the first read to the first message's reply
    /// (default: the manager's creation deadline).
    pub fn deadline(mut self, deadline: Duration) -> Self {
        if self.deadline_set {
            self.twice.get_or_insert("deadline");
        }
        self.deadline_set = true;
        self.deadline = deadline;
        self
    }

    /// The metadata snapshot the handler sees.
    pub fn metadata(mut self, metadata: Metadata) -> Self {
        if self.metadata.is_some() {
            self.twice.get_or_insert("metadata");
        }
        self.metadata = Some(metadata);
        self
    }

    /// Sends `request` and waits for the Spot's typed reply (see the type docs for the
    /// outcomes).
    ///
    /// The handler's error reaches a caller on the Spot's node as it is (with its typed
    /// source) and one on another node as [`ZLinkError::Remote`] of the same kind; a local
    /// call error the handler failed with (`InvalidOperation`, `NotConfigured`) is
    /// `InternalFailure` for both ([`ZLinkError::HandlerFailed`] with it as the source here),
    /// as for a node-direct request (spec 06 §20).
    pub async fn request<R: Request>(self, request: &R) -> Result<R::Reply, ZLinkError> {
        let codecs = self.client.node.inner.codecs().clone();
        let metadata = self.metadata.clone().unwrap_or_else(Metadata::empty);
        let msg = OutboundMessage::encode(&codecs, request, &metadata)?;
        let body = self.run(RouteKind::Request, msg).await?;
        decode_reply::<R>(&codecs, body.as_inbound())
    }

    /// Sends `message` one-way. It completes once the Spot accepted the message — for a cold
    /// activation, once the new Spot's first handler ran and its recovery data was released.
    pub async fn send<M: Message>(self, message: &M) -> Result<(), ZLinkError> {
        let codecs = self.client.node.inner.codecs().clone();
        let metadata = self.metadata.clone().unwrap_or_else(Metadata::empty);
        let msg = OutboundMessage::encode(&codecs, message, &metadata)?;
        self.run(RouteKind::Send, msg).await.map(|_| ())
    }

    /// Resolves the target (the record's node, or placement) and hands it the envelope.
    async fn run(self, route: RouteKind, msg: OutboundMessage) -> Result<ReplyBody, ZLinkError> {
        if let Some(option) = self.twice {
            return Err(InvalidCall::OptionSetTwice { option }.into());
        }
        if self.deadline.is_zero() {
            return Err(InvalidCall::ZeroDeadline.into());
        }
        let id =
            ObjectId::new(self.id.as_str()).map_err(InvalidCall::invalid_id(IdRole::SpotId))?;
        user_spot_id(&id)?;
        let asked = match &self.stable_type {
            None => None,
            Some(t) => Some(
                StableType::new(t.as_str()).map_err(InvalidCall::invalid_id(IdRole::StableType))?,
            ),
        };
        let deadline =
            Instant::now()
                .checked_add(self.deadline)
                .ok_or(InvalidCall::DeadlineTooFar {
                    deadline: self.deadline,
                })?;
        let objects = &self.client.objects;
        let run = objects
            .location
            .host_run()
            .ok_or(ZLinkError::ShuttingDown)?;
        let (stable_type, target, target_lifecycle) =
            match self.client.read(ObjectKind::InstanceSpot, &id).await? {
                AuthorityRead::Found { handle, .. } => {
                    if handle.kind() != ObjectKind::InstanceSpot
                        || asked.as_ref().is_some_and(|t| t != handle.stable_type())
                    {
                        return Err(type_mismatch(&id, handle.kind(), handle.stable_type()));
                    }
                    (
                        handle.stable_type().clone(),
                        handle.node().routing_id,
                        handle
                            .record()
                            .allocation
                            .descriptor_lifecycle_generation
                            .get(),
                    )
                }
                AuthorityRead::Missing { .. } => {
                    let stable_type = match asked {
                        Some(t) => t,
                        None => objects.instances.only_type()?,
                    };
                    let target = objects.instances.place(objects, &stable_type).await?;
                    (
                        stable_type,
                        target.node.routing_id,
                        target.lifecycle_generation,
                    )
                }
            };
        let envelope = ActivationEnvelope {
            id,
            stable_type,
            mesh: objects.mesh.clone(),
            target,
            target_lifecycle,
            source: objects.rid.clone(),
            source_run: run.lease_generation.get(),
            operation: OperationId::new(zlink_store_spi::entropy::uuid_v4().as_u128() | 1)
                .map_err(InvalidCall::invalid_id(IdRole::OperationId))?,
            route,
            packet: msg.packet,
            content_type: msg.content_type,
            remaining: deadline.saturating_duration_since(Instant::now()),
            hops: 0,
            metadata: bytes::Bytes::from(msg.metadata),
            payload: msg.payload,
        };
        let out = if envelope.target == objects.rid {
            super::target::activate(objects, &self.client.node.inner, envelope).await
        } else {
            let peer = self
                .client
                .node
                .inner
                .route_to(&envelope.target)
                .map_err(owner_unreachable)?;
            super::target::send_envelope(&self.client.node.inner, &peer, &envelope, deadline).await
        };
        match out {
            Ok(Some(reply)) => {
                let (ct, payload) = reply.into_encoded(self.client.node.inner.codecs())?;
                Ok(ReplyBody::Ok {
                    content_type: bytes::Bytes::from(ct.into_bytes()),
                    payload: bytes::Bytes::from(payload),
                })
            }
            Ok(None) if route == RouteKind::Send => Ok(ReplyBody::Ok {
                content_type: bytes::Bytes::new(),
                payload: bytes::Bytes::new(),
            }),
            Ok(None) => Err(ZLinkError::NoReply),
            Err(ZLinkError::ReplyTimeout { .. }) => Err(deadline_exceeded()),
            Err(e) => Err(e),
        }
    }
}
