//! The Actor manager (spec 21 §7, §7.2, §7.3; 06 §15, §17, §20): Create / GetOrCreate placed by
//! weight and capacity through the authority layer and decided by the placing node's Entry
//! Spot callback, Find, Destroy, and messaging by global id through the route cache.

use std::time::Duration;

use zlink_codec::ObjectId;
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::ObjectKind;

use super::call::{CreateCall, parse};
use super::client::{DEFAULT_CREATE_DEADLINE, ObjectClient};
use super::host::ObjectKey;
use super::messages::ObjectReply;
use super::refs::ActorRef;
use crate::mesh::node::CallOptions;
use crate::messaging::{
    IdRole, InvalidCall, Message, Metadata, OutboundMessage, Request, ZLinkError, decode_reply,
};

/// Creates, finds and messages the Actors of one object mesh (cheap to clone).
#[derive(Clone)]
pub struct ActorManager {
    pub(crate) client: ObjectClient,
    deadline: Duration,
}

impl std::fmt::Debug for ActorManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActorManager")
            .field("mesh", &self.client.objects.mesh)
            .finish_non_exhaustive()
    }
}

pub(super) fn key(id: &str) -> Result<ObjectKey, ZLinkError> {
    let id = ObjectId::new(id).map_err(InvalidCall::invalid_id(IdRole::ActorId))?;
    Ok((AuthorityKind::Actor, id))
}

impl ActorManager {
    pub(crate) fn new(client: ObjectClient) -> Self {
        Self {
            client,
            deadline: DEFAULT_CREATE_DEADLINE,
        }
    }

    /// The same manager with another default creation deadline.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// The current Ready Actor `id`, or `None` (a Creating record is not Ready; nothing is
    /// created).
    pub async fn find(&self, id: &str) -> Result<Option<ActorRef>, ZLinkError> {
        let (_, id) = key(id)?;
        Ok(self
            .client
            .find(ObjectKind::Actor, &id)
            .await?
            .map(|h| ActorRef::of(&h)))
    }

    /// Destroys exactly the incarnation `actor` names (spec 21 §7.2): `Ok(false)` when no
    /// record exists, `InvalidOperation` when another incarnation of the id exists,
    /// `Unavailable` when its owner cannot be reached or it is not Ready. Never finds and
    /// destroys a newer one.
    pub async fn destroy(&self, actor: &ActorRef) -> Result<bool, ZLinkError> {
        let key = (AuthorityKind::Actor, actor.id.clone());
        self.client
            .end(ObjectKind::Actor, &key, actor.generation, self.deadline)
            .await
    }

    /// Joins the Actor incarnation `actor` to the User Spot incarnation `spot` (spec 06 §11;
    /// 21 §1.3, §8.2); the Actor then belongs to that Spot ([`spot_of`](Self::spot_of) names
    /// it) and, for a `SpotWide` Spot, its turns run under the Spot's turn.
    ///
    /// - **Same node**: the activation stays (no relocation payload, no adapter call) and only
    ///   the Actor's membership in the Location Store is rewritten.
    /// - **Another node**: the Actor moves to the Spot's node by live relocation under its own
    ///   policy — `PreserveStateWith` restores its state through the adapter,
    ///   `RecreateOnRelocation` builds a new instance (its queued messages and timers move) —
    ///   and the target's one owner-change CAS writes its new owner, the capacity on both nodes
    ///   and its membership of the Spot together. Messages sent meanwhile follow it (Message
    ///   Follow). The source handler and scope are cleaned up; the target re-creates them.
    ///
    /// Refused with nothing changed: a missing Actor or Spot → `NotFound`; another
    /// incarnation → `InvalidOperation`; the Actor's type `DisableRelocation` across nodes →
    /// `InvalidOperation` ([`MoveRefusal::RelocationDisabled`](crate::handler::MoveRefusal),
    /// before anything is captured); a member of a `SpotWide` Spot across nodes →
    /// `InvalidOperation` (`MovesWithSpot`: it moves with its Spot; join its Entry Spot
    /// first); the Spot's node not an eligible target for the Actor's type → `Unavailable`;
    /// either party moving, or the record changed meanwhile → `Stale`; the host not `Serving`
    /// → `Unavailable`. A cross-node move that fails before its owner change is cancelled and
    /// the Actor keeps serving where it was, its membership unchanged.
    pub async fn join(
        &self,
        actor: &ActorRef,
        spot: &crate::objects::SpotRef,
    ) -> Result<(), ZLinkError> {
        self.client.join(actor, spot, self.deadline).await
    }

    /// JoinEntrySpot on the Actor's own node: the Actor incarnation `actor` leaves its User
    /// Spot and becomes a member of the Entry Spot of the node that owns it now (spec 06 §11,
    /// §17): the activation stays, its membership in the Location Store is rewritten with one
    /// Preserve CAS, and its turns are its own again (no longer under a `SpotWide` Spot's
    /// turn). Already a member of that Entry Spot: `Ok`, nothing changes. Refused as
    /// [`join`](Self::join) is.
    pub async fn join_entry_spot(&self, actor: &ActorRef) -> Result<(), ZLinkError> {
        self.client.join_entry(actor, None, self.deadline).await
    }

    /// JoinEntrySpot on the node `node` (spec 21 §1.3, §8.2): the Actor incarnation `actor`
    /// becomes a member of that node's Entry Spot (the one its MeshNode descriptor maps to its
    /// lifecycle). The Actor's own node → [`join_entry_spot`](Self::join_entry_spot); another
    /// node → the Actor moves there as a cross-node [`join`](Self::join) does, the target's
    /// owner-change CAS naming the target's Entry Spot. Refused as [`join`](Self::join) is; a
    /// node that is no eligible target for the Actor's type → `Unavailable`.
    pub async fn join_entry_spot_on(
        &self,
        actor: &ActorRef,
        node: &zlink_codec::RoutingId,
    ) -> Result<(), ZLinkError> {
        self.client
            .join_entry(actor, Some(node), self.deadline)
            .await
    }

    /// The Actor `id` of `stable_type`: the existing Ready one, the result of a creation in
    /// progress, or a new one placed on an eligible Object Server by weight and capacity and
    /// approved by that node's Entry Spot callback (spec 21 §7). Another type under the id is
    /// `TypeMismatch`; no eligible node is `CapacityExceeded`; a declined creation is
    /// `Rejected`; a failing factory or callback is `InternalFailure`; the deadline passing is
    /// `DeadlineExceeded` (the next call re-reads). Await it for the ref, or set options first.
    pub fn get_or_create(&self, stable_type: &str, id: &str) -> CreateCall<ActorRef> {
        CreateCall::new(
            self.client.clone(),
            ObjectKind::Actor,
            parse(IdRole::ActorId, stable_type, id),
            false,
            self.deadline,
        )
    }

    /// Creates the Actor `id` of `stable_type`; an existing or in-progress one is
    /// `AlreadyExists`.
    pub fn create(&self, stable_type: &str, id: &str) -> CreateCall<ActorRef> {
        CreateCall::new(
            self.client.clone(),
            ObjectKind::Actor,
            parse(IdRole::ActorId, stable_type, id),
            true,
            self.deadline,
        )
    }

    /// Sends `request` to the Ready Actor `id` and waits for its typed reply (spec 06 §7,
    /// §20): Missing → NotFound, owner route not ready → Unavailable, exactly one terminal.
    ///
    /// The error of a request answered on this node is the handler's (or a filter's, or the
    /// runtime's) own [`ZLinkError`], with its typed source; from another node it is
    /// [`ZLinkError::Remote`] with the same kind and only the sanitised message (the cause stays
    /// on the node that failed).
    ///
    /// A local call error the handler failed with (`InvalidOperation`, `NotConfigured`: an
    /// invalid argument or state of a call the handler made) is not the caller's (spec 06
    /// §20): a caller on either node gets `InternalFailure`, here
    /// [`ZLinkError::HandlerFailed`] with the handler's error as its source, as for a
    /// node-direct request. The runtime's own refusals (Missing → NotFound, ...) are as listed.
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
        let key = key(id)?;
        request_object(&self.client, &key, request, options).await
    }

    /// Sends `message` one-way to the Ready Actor `id` (completes once admitted).
    pub async fn send<M: Message>(&self, id: &str, message: &M) -> Result<(), ZLinkError> {
        send_object(&self.client, &key(id)?, message).await
    }
}

/// A typed one-way message to the Ready object `key` (shared by the Actor and Spot managers).
pub(crate) async fn send_object<M: Message>(
    client: &ObjectClient,
    key: &ObjectKey,
    message: &M,
) -> Result<(), ZLinkError> {
    let codecs = client.node.inner.codecs().clone();
    let msg = OutboundMessage::encode(&codecs, message, &Metadata::empty())?;
    client.send(key, &msg).await
}

/// A typed request to the Ready object `key` (shared by the Actor and Spot managers).
pub(crate) async fn request_object<R: Request>(
    client: &ObjectClient,
    key: &ObjectKey,
    request: &R,
    options: &CallOptions,
) -> Result<R::Reply, ZLinkError> {
    let codecs = client.node.inner.codecs().clone();
    let msg = OutboundMessage::encode(&codecs, request, &options.metadata)?;
    let out = match client.request(key, &msg, options.reply_timeout).await? {
        ObjectReply::Local(reply) => reply.into_value::<R::Reply>(&codecs),
        ObjectReply::Body(body) => decode_reply::<R>(&codecs, body.as_inbound()),
    };
    if let Err(e) = &out {
        client.reply_seen(key, e);
    }
    out
}
