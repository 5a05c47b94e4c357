//! What the Actor and Spot managers share (spec 21 §7, §7.2; 06 §15–§17, §20): the creation
//! flow on the source side, find, join and the end of an incarnation (messages to objects are
//! in `messages.rs`).
//!
//! Creation: read the record → follow an existing or in-progress creation (or fail with the
//! result table) → place by weight and capacity and reserve `Creating` + capacity + the inline
//! creation request in one conditional batch → run the creation on the reserved node (here, or
//! over `zlink.object.create`) → the terminal it returns is the result. A reply lost on the way
//! is not judged a failure: the stored terminal of the operation is read again (only this
//! source run and OperationId can name it), and the record re-read, until the deadline; a
//! reservation whose target never answered is cancelled by its first-secured version when the
//! deadline passes, so no `Reserved` row is left behind.
//!
//! Every Reserve records the operation and its deadline on the Store's clock beside the record
//! (`zlink_location::CreationMark`). A Reserve whose reply is lost is not judged a failure:
//! the record is read again, and a `Reserved` record whose mark names this operation is this
//! creation (it goes on). A caller that meets a `Reserved` record of another creation checks,
//! at most every [`ABANDON_CHECK`], whether that creation is abandoned — its creating run's
//! lease gone, or the Store's clock past its deadline plus the cleanup window — and then
//! cancels it in one guarded batch and competes for a new reservation
//! (`AuthorityClient::cancel_abandoned`); a cancel the Store does not confirm is retried until
//! the deadline plus the cleanup window.
//!
//! The call answers by its deadline: the creation runs as a task of its own, and what follows
//! a deadline passed with the outcome unknown (the cancel above, retried until the deadline
//! plus the cleanup window) goes on in the background after the caller heard
//! `DeadlineExceeded`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::{AllocationState, ObjectKind, PendingCreation};
use zlink_codec::terminal::{CreationOutcome, CreationTerminal, ObjectRef};
use zlink_codec::{ObjectId, OperationId, RoutingId, StableType};

use super::create::{CREATE_OBJECT, CreateCommand, CreationOrder};
use super::host::{ObjectHost, ObjectKey, store_failure, what};
use super::membership::Membership;
use crate::mesh::node::{MeshNode, ReplyBody};
use crate::messaging::{
    CreationError, ErrorMessage, ErrorReply, IdRole, InvalidCall, UnavailableReason, ZLinkError,
};
use zlink_location::{
    AuthorityHandle, AuthorityRead, Conflict, CreationMark, Discovery, ErrorKind as StoreErrorKind,
    InvalidOperation, LocationError, OperationKey, Outcome,
};

use super::messages::owner_unreachable;

/// How long a manager call waits for a creation (its deadline) unless told otherwise.
pub const DEFAULT_CREATE_DEADLINE: Duration = Duration::from_secs(30);

/// How often a caller re-reads a record another creation holds in `Creating`.
const CREATING_POLL: Duration = Duration::from_millis(10);

/// How long past its deadline a creation call waits for an answer already on its way (a
/// terminal read, a `DeadlineExceeded` the creation itself decided) before it answers
/// `DeadlineExceeded` on its own.
const RETURN_SLACK: Duration = Duration::from_millis(50);

/// How often a caller waiting on another creation's `Reserved` record checks whether that
/// creation is abandoned.
const ABANDON_CHECK: Duration = Duration::from_millis(100);

/// The shared core of the managers of one object node (cheap to clone).
#[derive(Clone)]
pub(crate) struct ObjectClient {
    pub(crate) node: MeshNode,
    pub(crate) objects: Arc<ObjectHost>,
    pub(crate) discovery: Arc<Discovery>,
}

/// One creation call, as the manager's fluent options left it.
#[derive(Debug, Clone)]
pub(crate) struct Obtain {
    pub(crate) kind: ObjectKind,
    pub(crate) stable_type: StableType,
    pub(crate) id: ObjectId,
    pub(crate) request: Option<Bytes>,
    pub(crate) exclusive: bool,
    pub(crate) deadline: Duration,
    /// The User Spot an Actor is created into (`None`: the placing node's Entry Spot).
    pub(crate) spot: Option<super::refs::SpotRef>,
}

/// How a creation call ended well.
#[derive(Debug, Clone)]
pub(crate) struct Obtained {
    pub(crate) object: ObjectRef,
    pub(crate) created: bool,
    pub(crate) reply: Option<Vec<u8>>,
}

fn deadline_exceeded() -> ZLinkError {
    ZLinkError::DeadlinePassed {
        operation: "creation",
    }
}

/// The result a terminal stands for: Created / Existing → the ref; Rejected → a typed
/// `Rejected` (its text is the application's reason); Failed → `InternalFailure`.
fn from_terminal(t: CreationTerminal) -> Result<Obtained, ZLinkError> {
    match t.outcome {
        CreationOutcome::Created | CreationOutcome::Existing => Ok(Obtained {
            created: t.outcome == CreationOutcome::Created,
            object: t.object_ref,
            reply: t.reply,
        }),
        CreationOutcome::Rejected => {
            let reason = t
                .reply
                .map(|r| String::from_utf8_lossy(&r).into_owned())
                .unwrap_or_default();
            Err(ZLinkError::Creation(CreationError::Rejected {
                reason: ErrorMessage::sanitise(&reason),
            }))
        }
        CreationOutcome::Failed { failure } => Err(ZLinkError::Creation(CreationError::Failed {
            failure: ErrorMessage::sanitise(&failure),
        })),
    }
}

/// An [`ObjectClient`] held weakly (by the contexts of its node's handlers): it keeps neither
/// the node nor its objects alive.
pub(crate) struct WeakClient {
    node: std::sync::Weak<crate::mesh::node::NodeInner>,
    objects: std::sync::Weak<ObjectHost>,
    discovery: std::sync::Weak<Discovery>,
}

impl std::fmt::Debug for WeakClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WeakClient")
    }
}

impl WeakClient {
    /// The client, while its node, objects and discovery are alive.
    pub(crate) fn upgrade(&self) -> Option<ObjectClient> {
        Some(ObjectClient {
            node: MeshNode {
                inner: self.node.upgrade()?,
            },
            objects: self.objects.upgrade()?,
            discovery: self.discovery.upgrade()?,
        })
    }
}

impl ObjectClient {
    /// This client, held weakly.
    pub(crate) fn downgrade(&self) -> WeakClient {
        WeakClient {
            node: Arc::downgrade(&self.node.inner),
            objects: Arc::downgrade(&self.objects),
            discovery: Arc::downgrade(&self.discovery),
        }
    }
}

impl ObjectClient {
    /// Reads the record of `(kind, id)`: the route cache learns what it shows, and an
    /// activation here that it shows missing or replaced is closed
    /// ([`ObjectHost::close_if_orphaned`](super::host::ObjectHost::close_if_orphaned)).
    pub(crate) async fn read(
        &self,
        kind: ObjectKind,
        id: &ObjectId,
    ) -> Result<AuthorityRead, ZLinkError> {
        let key = (kind.authority_kind(), id.clone());
        // Taken before the read starts: a read older than the activation never judges it.
        let held = self.objects.held_of(&key);
        let read = self
            .objects
            .location
            .authority()
            .read(kind, id)
            .await
            .map_err(store_failure)?;
        match &read {
            AuthorityRead::Found { handle, .. } => self.objects.routes.observe(&key, Some(handle)),
            AuthorityRead::Missing { .. } => self.objects.routes.observe(&key, None),
        }
        if let Some(held) = held {
            self.objects.close_if_orphaned(&held, &read);
        } else {
            self.objects.remove_if_stale_move(&key, &read);
        }
        Ok(read)
    }

    /// The current Ready incarnation of `(kind, id)`, if any.
    pub(crate) async fn find(
        &self,
        kind: ObjectKind,
        id: &ObjectId,
    ) -> Result<Option<AuthorityHandle>, ZLinkError> {
        match self.read(kind, id).await? {
            AuthorityRead::Found { handle, .. }
                if handle.state() == AllocationState::Active && handle.kind() == kind =>
            {
                Ok(Some(handle))
            }
            _ => Ok(None),
        }
    }

    /// Create / GetOrCreate (see the module docs and spec 21 §7's result table), counted on
    /// `zlink.objects.creations` by its end.
    pub(crate) async fn obtain(&self, call: Obtain) -> Result<Obtained, ZLinkError> {
        use crate::telemetry::labels::{CreationOutcome as Ended, ObjectLabel};
        let kind = match call.kind {
            ObjectKind::Actor => ObjectLabel::Actor,
            _ => ObjectLabel::Spot,
        };
        let out = self.obtain_by_deadline(call).await;
        let ended = match &out {
            Ok(o) if o.created => Ended::Created,
            Ok(_) => Ended::Existing,
            Err(e) if e.kind() == crate::messaging::ErrorKind::AlreadyExists => Ended::Existing,
            Err(_) => Ended::Failed,
        };
        self.objects.metrics.creation(kind, ended);
        out
    }

    /// [`obtain_once`](Self::obtain_once) answered by the call's deadline (and
    /// [`RETURN_SLACK`]): the creation runs as a task of its own, so the cleanup that follows
    /// a creation whose outcome stayed unknown at the deadline — cancelling the reservation,
    /// recording a terminal, bounded by the deadline plus `creationCleanupWindow` — goes on
    /// in the background and never holds the caller past its deadline (found by zlink-sim
    /// seed 435: a call held 10 s past its deadline while its Store was slow).
    async fn obtain_by_deadline(&self, call: Obtain) -> Result<Obtained, ZLinkError> {
        let deadline = Instant::now() + call.deadline;
        let client = self.clone();
        let task = tokio::spawn(async move { client.obtain_once(call).await });
        match tokio::time::timeout_at(deadline + RETURN_SLACK, task).await {
            Ok(Ok(out)) => out,
            Ok(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // The runtime is shutting down.
            Ok(Err(_)) => Err(ZLinkError::ShuttingDown),
            Err(_) => Err(deadline_exceeded()),
        }
    }

    async fn obtain_once(&self, call: Obtain) -> Result<Obtained, ZLinkError> {
        let deadline = Instant::now() + call.deadline;
        let Some(run) = self.objects.location.host_run() else {
            return Err(ZLinkError::ShuttingDown);
        };
        let op = OperationKey {
            source: self.objects.rid.clone(),
            source_run: run.lease_generation.to_codec(),
            operation: OperationId::new(zlink_store_spi::entropy::uuid_v4().as_u128() | 1)
                .map_err(InvalidCall::invalid_id(IdRole::OperationId))?,
        };
        let pending = match &call.request {
            None => None,
            Some(r) => {
                let p = PendingCreation::for_request(op.operation.to_hex(), r)
                    .map_err(|e| too_large(InvalidOperation::RecordOutOfBounds(e).into()))?;
                zlink_location::AuthorityClient::creation_record_fits(
                    &self.objects.mesh,
                    call.kind,
                    &call.stable_type,
                    &p,
                )
                .map_err(too_large)?;
                Some(p)
            }
        };
        // A Reserve whose reply was lost: the record read next may be this creation's.
        let mut reserve_unknown = false;
        let mut next_check = Instant::now();
        loop {
            if Instant::now() >= deadline {
                return Err(deadline_exceeded());
            }
            match self.read(call.kind, &call.id).await? {
                AuthorityRead::Found { handle, .. } => {
                    // A record whose owner run is dead is recovered, then read again.
                    if self.objects.recover_if_dead(&handle).await? {
                        continue;
                    }
                    if handle.kind() != call.kind || handle.stable_type() != &call.stable_type {
                        return Err(ZLinkError::TypeMismatch {
                            target: what(call.kind.authority_kind(), &call.id),
                            kind: handle.kind(),
                            stable_type: handle.stable_type().clone(),
                        });
                    }
                    if call.exclusive {
                        return Err(ZLinkError::Creation(CreationError::Exists {
                            target: what(call.kind.authority_kind(), &call.id),
                        }));
                    }
                    if handle.state() == AllocationState::Active {
                        return Ok(Obtained {
                            object: super::refs::terminal_ref(&handle, handle.kind()),
                            created: false,
                            reply: None,
                        });
                    }
                    let authority = self.objects.location.authority();
                    if reserve_unknown {
                        let mark = authority
                            .creation_mark(&handle)
                            .await
                            .map_err(store_failure)?;
                        if mark.is_some_and(|m| m.op == op) {
                            // Our own Reserve applied; only its reply was lost.
                            let order = CreationOrder {
                                op: op.clone(),
                                remaining: deadline.saturating_duration_since(Instant::now()),
                            };
                            let t = self.create_on(&handle, &order, deadline).await?;
                            return from_terminal(t);
                        }
                    }
                    if Instant::now() >= next_check {
                        next_check = Instant::now() + ABANDON_CHECK;
                        match authority.cancel_abandoned(&handle).await {
                            // Cancelled: read again and compete for a new reservation.
                            Ok(Outcome::Applied(_)) => continue,
                            Ok(Outcome::Conflict(_)) => {}
                            Err(e) => {
                                tracing::debug!(error = %e, "abandoned-creation check failed")
                            }
                        }
                    }
                    // Creating: wait for its result.
                    tokio::time::sleep(CREATING_POLL).await;
                }
                AuthorityRead::Missing { store_now } => {
                    let mut candidates = self
                        .discovery
                        .candidates(self.objects.location.authority())
                        .await
                        .map_err(store_failure)?;
                    let mut payload = Vec::new();
                    if call.spot.is_none() {
                        // A Spot member goes to the Spot's node; anything else never to this
                        // host while it takes no new objects.
                        candidates.retain(|c| self.objects.may_place_on(&c.target.node));
                    }
                    if let Some(spot) = &call.spot {
                        let node = self.spot_node(spot).await?;
                        candidates.retain(|c| c.target.node == node);
                        payload = Membership {
                            spot: spot.id.as_str().to_owned(),
                            entry: false,
                            spot_wide: false,
                        }
                        .encode();
                    }
                    let mark = CreationMark::new(
                        op.clone(),
                        store_now,
                        deadline.saturating_duration_since(Instant::now()),
                        self.objects.cleanup_window(),
                    );
                    let outcome = self
                        .objects
                        .location
                        .authority()
                        .place_and_reserve_creation(
                            candidates,
                            call.kind,
                            call.id.clone(),
                            call.stable_type.clone(),
                            payload,
                            pending.clone(),
                            Some(mark),
                        )
                        .await;
                    match outcome {
                        Ok(Outcome::Applied(handle)) => {
                            let order = CreationOrder {
                                op: op.clone(),
                                remaining: deadline.saturating_duration_since(Instant::now()),
                            };
                            let t = self.create_on(&handle, &order, deadline).await?;
                            return from_terminal(t);
                        }
                        // Someone else's creation won the row: follow it.
                        Ok(Outcome::Conflict(Conflict::Record { .. })) => {}
                        // A fence of the reservation itself (a lease or capacity row that
                        // changed under it): read again after a pause, never in a hot loop
                        // (after a Store rollback the same conflict can come back on every
                        // attempt until the owner lease is taken over).
                        Ok(Outcome::Conflict(c)) => {
                            tracing::debug!(?c, "reservation conflicted; reading again");
                            tokio::time::sleep(CREATING_POLL).await;
                        }
                        Err(LocationError::CapacityExceeded) => {
                            return Err(ZLinkError::Creation(CreationError::NoRoom {
                                stable_type: call.stable_type.clone(),
                            }));
                        }
                        Err(
                            e @ LocationError::InvalidOperation(
                                InvalidOperation::RecordOutOfBounds(_),
                            ),
                        ) => return Err(too_large(e)),
                        // Whether the Store changed is unknown (spec 21 §10): read again.
                        Err(e)
                            if matches!(
                                e.kind(),
                                StoreErrorKind::Store | StoreErrorKind::Contended
                            ) =>
                        {
                            tracing::debug!(error = %e, "a reservation was not confirmed; reading again");
                            reserve_unknown = true;
                            tokio::time::sleep(CREATING_POLL).await;
                        }
                        Err(e) => return Err(store_failure(e)),
                    }
                }
            }
        }
    }

    /// Runs the creation on the reservation's node: here, or through the command plane; a
    /// lost reply is recovered from the stored terminal (see the module docs).
    async fn create_on(
        &self,
        handle: &AuthorityHandle,
        order: &CreationOrder,
        deadline: Instant,
    ) -> Result<CreationTerminal, ZLinkError> {
        let target = handle.node().routing_id;
        if target == self.objects.rid {
            return self.objects.create_reserved(handle, order).await;
        }
        let body = serde_json::to_vec(&CreateCommand::of(handle, order))
            .map_err(InvalidCall::unencodable("create command"))?;
        let peer = match self.node.inner.route_to(&target) {
            Ok(p) => p,
            Err(e) => {
                // Nothing was sent: the reservation is cancelled by its first-secured version.
                let until = deadline + self.objects.cleanup_window();
                self.objects.cancel(handle, until).await;
                return Err(owner_unreachable(e));
            }
        };
        let timeout = deadline.saturating_duration_since(Instant::now());
        let sent = self
            .node
            .inner
            .control_request(&peer, CREATE_OBJECT, Bytes::from(body), timeout)
            .await;
        match sent {
            Ok(ReplyBody::Ok { payload, .. }) => CreationTerminal::decode(&payload)
                .map_err(|e| ZLinkError::malformed_payload("creation reply")(e.into())),
            // The target answered: it cancelled (a framework failure) or refused the fence.
            Ok(ReplyBody::Error(bytes)) => Err(ErrorReply::decode(&bytes)?.into_error()),
            Err(e) => self.recover(handle, order, deadline, e).await,
        }
    }

    /// The reply of a remote creation was lost (timeout, connection loss): the stored terminal
    /// and the record decide, until the deadline.
    async fn recover(
        &self,
        handle: &AuthorityHandle,
        order: &CreationOrder,
        deadline: Instant,
        lost: ZLinkError,
    ) -> Result<CreationTerminal, ZLinkError> {
        tracing::debug!(error = %lost, "creation reply lost; reading the stored result");
        loop {
            if let Some(t) = self
                .objects
                .location
                .authority()
                .read_terminal(&order.op)
                .await
                .map_err(store_failure)?
            {
                return Ok(t);
            }
            match self.read(handle.kind(), handle.id()).await? {
                AuthorityRead::Found { handle: now, .. } if now.version() == handle.version() => {
                    if Instant::now() >= deadline {
                        let until = deadline + self.objects.cleanup_window();
                        self.objects.cancel(handle, until).await;
                        return Err(deadline_exceeded());
                    }
                }
                // Gone or another incarnation without our terminal: the target cancelled.
                _ => return Err(owner_unreachable(lost)),
            }
            tokio::time::sleep(CREATING_POLL).await;
        }
    }

    /// The node of the Ready User Spot incarnation `spot` names: missing → `NotFound`, another
    /// incarnation → `InvalidOperation`, not Ready → `Unavailable`.
    async fn spot_node(
        &self,
        spot: &super::refs::SpotRef,
    ) -> Result<zlink_location::NodeKey, ZLinkError> {
        match self.read(ObjectKind::UserSpot, &spot.id).await? {
            AuthorityRead::Missing { .. } => Err(ZLinkError::NoRoute {
                target: what(AuthorityKind::Spot, &spot.id),
            }),
            AuthorityRead::Found { handle, .. } => {
                if handle.kind() != ObjectKind::UserSpot
                    || handle.object_generation().get() != spot.generation
                {
                    return Err(InvalidCall::NotSpotIncarnation {
                        spot: spot.id.clone(),
                        named: spot.generation,
                    }
                    .into());
                }
                if handle.state() != AllocationState::Active {
                    return Err(ZLinkError::Unavailable {
                        target: what(AuthorityKind::Spot, &spot.id),
                        reason: UnavailableReason::NotServing,
                    });
                }
                Ok(handle.node())
            }
        }
    }

    /// Joins the Actor incarnation `actor` to the User Spot incarnation `spot` on the
    /// Actor's owner node (see `ObjectHost::join`).
    pub(crate) async fn join(
        &self,
        actor: &super::refs::ActorRef,
        spot: &super::refs::SpotRef,
        deadline: Duration,
    ) -> Result<(), ZLinkError> {
        let owner = self.joining_owner(actor).await?;
        if owner == self.objects.rid {
            return self
                .objects
                .join(&actor.id, actor.generation, &spot.id, spot.generation)
                .await;
        }
        let cmd = super::inbound::JoinCommand {
            actor: actor.id.as_str().to_owned(),
            generation: actor.generation.to_string(),
            spot: spot.id.as_str().to_owned(),
            spot_generation: spot.generation.to_string(),
            ..Default::default()
        };
        self.join_command(&owner, &cmd, deadline).await
    }

    /// Joins the Actor incarnation `actor` to the Entry Spot of `node` (its owner's when
    /// `None`) on the Actor's owner node (see `ObjectHost::join_entry`).
    pub(crate) async fn join_entry(
        &self,
        actor: &super::refs::ActorRef,
        node: Option<&RoutingId>,
        deadline: Duration,
    ) -> Result<(), ZLinkError> {
        let owner = self.joining_owner(actor).await?;
        if owner == self.objects.rid {
            return self
                .objects
                .join_entry(&actor.id, actor.generation, node)
                .await;
        }
        let cmd = super::inbound::JoinCommand {
            actor: actor.id.as_str().to_owned(),
            generation: actor.generation.to_string(),
            entry: true,
            entry_node: node.map(RoutingId::to_hex),
            ..Default::default()
        };
        self.join_command(&owner, &cmd, deadline).await
    }

    /// The node owning the Actor `actor` now (a missing record is `NotFound`).
    async fn joining_owner(&self, actor: &super::refs::ActorRef) -> Result<RoutingId, ZLinkError> {
        let AuthorityRead::Found { handle, .. } = self.read(ObjectKind::Actor, &actor.id).await?
        else {
            return Err(ZLinkError::NoRoute {
                target: what(AuthorityKind::Actor, &actor.id),
            });
        };
        Ok(handle.node().routing_id)
    }

    /// Runs the join `cmd` on the Actor's owner `owner`.
    async fn join_command(
        &self,
        owner: &RoutingId,
        cmd: &super::inbound::JoinCommand,
        deadline: Duration,
    ) -> Result<(), ZLinkError> {
        let body = serde_json::to_vec(cmd).map_err(InvalidCall::unencodable("join command"))?;
        self.command(owner, super::inbound::JOIN_SPOT, body, deadline)
            .await
            .map(|_| ())
    }

    /// Runs the object command `name` on the owner node `owner` and returns its reply bytes
    /// (an error reply is the error; an unreachable owner is `Unavailable`).
    async fn command(
        &self,
        owner: &RoutingId,
        name: &str,
        body: Vec<u8>,
        deadline: Duration,
    ) -> Result<Bytes, ZLinkError> {
        let peer = self.node.inner.route_to(owner).map_err(owner_unreachable)?;
        match self
            .node
            .inner
            .control_request(&peer, name, Bytes::from(body), deadline)
            .await?
        {
            ReplyBody::Ok { payload, .. } => Ok(payload),
            ReplyBody::Error(bytes) => Err(ErrorReply::decode(&bytes)?.into_error()),
        }
    }

    /// Ends exactly the incarnation `generation` of `key` (Destroy / Close, spec 21 §7.2):
    /// missing → `false`, another incarnation → `InvalidOperation`, owner unreachable or the
    /// record not Ready → `Unavailable`. Never finds and ends a newer one.
    pub(crate) async fn end(
        &self,
        kind: ObjectKind,
        key: &ObjectKey,
        generation: u64,
        deadline: Duration,
    ) -> Result<bool, ZLinkError> {
        let handle = match self.read(kind, &key.1).await? {
            AuthorityRead::Missing { .. } => return Ok(false),
            AuthorityRead::Found { handle, .. } => handle,
        };
        if handle.object_generation().get() != generation {
            return Err(InvalidCall::OtherIncarnation {
                target: what(key.0, &key.1),
                named: generation,
                current: handle.object_generation().get(),
            }
            .into());
        }
        self.objects.routes.forget(key);
        let owner = handle.node().routing_id;
        let fence = super::host::EndFence {
            owner_generation: handle.authority_owner_generation().get(),
            version: handle.version().as_str().to_owned(),
            target_run: handle.owner().lease_generation.get(),
        };
        if owner == self.objects.rid {
            return self.objects.end(key, generation, Some(&fence)).await;
        }
        let source_run = self
            .objects
            .location
            .host_run()
            .map(|r| r.lease_generation.get())
            .ok_or(ZLinkError::ShuttingDown)?;
        let body = serde_json::to_vec(&super::inbound::EndCommand {
            kind: key.0.as_str().to_owned(),
            id: key.1.as_str().to_owned(),
            generation: generation.to_string(),
            owner_generation: fence.owner_generation.to_string(),
            version: fence.version,
            source_run: source_run.to_string(),
            target_run: fence.target_run.to_string(),
            operation: format!("{:032x}", zlink_store_spi::entropy::uuid_v4().as_u128()),
        })
        .map_err(InvalidCall::unencodable("end command"))?;
        let reply = self
            .command(&owner, super::inbound::END_OBJECT, body, deadline)
            .await?;
        Ok(&reply[..] == b"true")
    }
}

/// A creation request beyond the 1 MiB record bound (`InvalidOperation`).
fn too_large(e: LocationError) -> ZLinkError {
    ZLinkError::Creation(CreationError::RequestTooLarge {
        source: Arc::new(e).into(),
    })
}
