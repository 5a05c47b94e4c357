//! Creation on the target node (spec 21 §7, 06 §17): the node a reservation names runs the
//! factory (and the deciding callback) for the `Reserved` record and records the result in one
//! Location Store batch — Ready plus the Created terminal, or the record's deletion, the space
//! returned and the Rejected/Failed terminal. A framework failure before the callback cancels
//! the reservation without a terminal.
//!
//! Every creation ends (spec 21 §7, §10): a Store error on the Ready commit is not judged a
//! failure — the operation's terminal and the record are read again until the commit is known
//! to have applied (the creation is live) or not (the record still at its first-read version:
//! it is aborted with a typed Failed terminal). An abort or a cancel the Store does not
//! confirm is retried until the creation's deadline plus the cleanup window
//! (`LocationOptions::creation_cleanup_window`); past that, the reservation is left to the
//! next node that meets it (`AuthorityClient::cancel_abandoned`), whose creation deadline
//! row makes it cancellable by anyone.
//!
//! The remote form is the `zlink.object.create` command (our command for 47 / 49, its reply
//! standing for command 20): it names the source host run generation, the operation id, the
//! object (kind, id, stable type, ObjectGeneration, AuthorityOwnerGeneration), the first-secured
//! StoreVersion and the target host run generation, and the target checks every one of them
//! against the record it reads and its own run before anything runs. The reply is the
//! `creation-operation-terminal-v1` value itself: the same bytes the Store keeps, sent with the
//! current correlation.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use zlink_codec::records::{AllocationState, ObjectKind};
use zlink_codec::terminal::{CreationOutcome, CreationTerminal};
use zlink_codec::{Generation, ObjectId, OperationId, RoutingId};

use super::host::{ObjectHost, store_failure, what};
use super::live::{Built, LiveObject, Turn};
use super::membership::Membership;
use super::refs::terminal_ref;
use super::registration::SpotExecution;
use super::registration::{CreationContext, CreationDecision, FactoryContext};
use crate::messaging::{CreationError, PayloadError, StaleReason, ZLinkError};
use zlink_codec::keys::AuthorityKind;
use zlink_location::{
    AuthorityHandle, AuthorityRead, Conflict, LocationError, OperationKey, Outcome, TerminalWrite,
};

/// The command-plane name of the remote creation of an Actor or User Spot.
pub(crate) const CREATE_OBJECT: &str = "zlink.object.create";

/// The `zlink.object.create` body: exactly which reservation to create, and for whom.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CreateCommand {
    /// `actor` or `userSpot`.
    pub(crate) kind: String,
    pub(crate) id: String,
    pub(crate) stable_type: String,
    /// ObjectGeneration (decimal).
    pub(crate) object_generation: String,
    /// AuthorityOwnerGeneration (decimal).
    pub(crate) owner_generation: String,
    /// The StoreVersion the source's reservation returned (opaque; compared for equality).
    pub(crate) first_version: String,
    /// The source host run generation (decimal).
    pub(crate) source_run: String,
    /// The target host run generation the reservation names (decimal).
    pub(crate) target_run: String,
    /// The creation OperationId (32 lowercase hex digits).
    pub(crate) operation: String,
    /// Milliseconds left before the operation's original deadline.
    pub(crate) remaining_ms: u64,
}

/// Which operation a creation runs for, and how long it has.
#[derive(Debug, Clone)]
pub(crate) struct CreationOrder {
    pub(crate) op: OperationKey,
    pub(crate) remaining: Duration,
}

/// A malformed `zlink.object.create` command.
fn malformed(problem: PayloadError) -> ZLinkError {
    ZLinkError::malformed_payload("create command")(problem)
}

fn decimal(text: &str, field: &'static str) -> Result<u64, ZLinkError> {
    text.parse()
        .map_err(|source| malformed(PayloadError::Number { field, source }))
}

impl CreateCommand {
    /// The command for `handle` (a reservation just secured by `order`'s source).
    pub(crate) fn of(handle: &AuthorityHandle, order: &CreationOrder) -> Self {
        Self {
            kind: handle.kind().as_str().to_owned(),
            id: handle.id().as_str().to_owned(),
            stable_type: handle.stable_type().as_str().to_owned(),
            object_generation: handle.object_generation().get().to_string(),
            owner_generation: handle.authority_owner_generation().get().to_string(),
            first_version: handle.version().as_str().to_owned(),
            source_run: order.op.source_run.get().to_string(),
            target_run: handle.owner().lease_generation.get().to_string(),
            operation: order.op.operation.to_hex(),
            remaining_ms: u64::try_from(order.remaining.as_millis()).unwrap_or(u64::MAX),
        }
    }

    fn kind(&self) -> Result<ObjectKind, ZLinkError> {
        match self.kind.as_str() {
            "actor" => Ok(ObjectKind::Actor),
            "userSpot" => Ok(ObjectKind::UserSpot),
            _ => Err(malformed(PayloadError::Format(
                "only an actor or a userSpot is created by command",
            ))),
        }
    }

    fn operation(&self, source: &RoutingId) -> Result<OperationKey, ZLinkError> {
        let op = u128::from_str_radix(&self.operation, 16).map_err(|source| {
            malformed(PayloadError::Number {
                field: "operation",
                source,
            })
        })?;
        Ok(OperationKey {
            source: source.clone(),
            source_run: Generation::new(decimal(&self.source_run, "sourceRun")?)
                .map_err(|e| malformed(e.into()))?,
            operation: OperationId::new(op).map_err(|e| malformed(e.into()))?,
        })
    }
}

/// The terminal of a creation, or the error of a framework failure (no terminal).
pub(crate) type CreationResult = Result<CreationTerminal, ZLinkError>;

impl ObjectHost {
    /// Runs the `zlink.object.create` command from `source`: the record is re-read and every
    /// field the command names must match it and this node's run before the creation runs; a
    /// command for a creation that already ended is answered with the operation's stored
    /// result.
    pub(crate) async fn create_command(
        &self,
        cmd: CreateCommand,
        source: &RoutingId,
    ) -> CreationResult {
        let kind = cmd.kind()?;
        let op = cmd.operation(source)?;
        let id = ObjectId::new(cmd.id.as_str()).map_err(|e| malformed(e.into()))?;
        let read = self
            .location
            .authority()
            .read(kind, &id)
            .await
            .map_err(store_failure)?;
        let run = self.location.host_run();
        let reserved = match read {
            AuthorityRead::Found { handle, .. } => {
                let matches = handle.kind() == kind
                    && handle.stable_type().as_str() == cmd.stable_type
                    && handle.object_generation().get()
                        == decimal(&cmd.object_generation, "generation")?
                    && handle.authority_owner_generation().get()
                        == decimal(&cmd.owner_generation, "ownerGeneration")?
                    && handle.version().as_str() == cmd.first_version
                    && handle.owner().lease_generation.get()
                        == decimal(&cmd.target_run, "targetRun")?
                    && run.as_ref() == Some(handle.owner());
                matches.then_some(handle)
            }
            AuthorityRead::Missing { .. } => None,
        };
        let Some(handle) = reserved else {
            // Not the secured record (any more): the same operation's stored result, if this
            // is a resend of a creation that already ended, else a stale fence.
            return match self
                .location
                .authority()
                .read_terminal(&op)
                .await
                .map_err(store_failure)?
            {
                Some(t) => Ok(t),
                None => Err(StaleReason::ReservationChanged.into()),
            };
        };
        let order = CreationOrder {
            op,
            remaining: Duration::from_millis(cmd.remaining_ms),
        };
        self.create_reserved(&handle, &order).await
    }

    /// Creates the incarnation `handle` reserves on this node (see the module docs).
    pub(crate) async fn create_reserved(
        self: &ObjectHost,
        handle: &AuthorityHandle,
        order: &CreationOrder,
    ) -> CreationResult {
        let node = handle.node();
        let run = self.location.host_run();
        let until = Instant::now() + order.remaining + self.cleanup_window();
        if handle.state() != AllocationState::Reserved
            || node.routing_id != self.rid
            || node.mesh != self.mesh
            || Some(handle.owner()) != run.as_ref()
        {
            return Err(StaleReason::ReservationElsewhere.into());
        }
        if !self.accepts_new_objects() {
            // Relocating, Relocated or Draining: no new object here (spec 28 §10).
            self.cancel(handle, until).await;
            return Err(self.not_accepting());
        }
        // Past the admission deadline no factory runs (spec 21 §5); the reservation cannot be
        // cancelled either (that is a Store change), it stays for the owner sweep.
        self.door.check()?;
        let hosted = self
            .types
            .get(handle.stable_type())
            .filter(|t| t.kind == handle.kind())
            .cloned();
        let Some(hosted) = hosted else {
            self.cancel(handle, until).await;
            return Err(ZLinkError::Creation(CreationError::NotHosted {
                kind: handle.kind(),
                stable_type: handle.stable_type().clone(),
            }));
        };
        let request = match &handle.record().pending_creation {
            None => None,
            Some(p) => match p.verify_request() {
                Ok(bytes) => Some(Bytes::from(bytes)),
                Err(e) => {
                    // The stored request does not verify: the factory must not run.
                    self.cancel(handle, until).await;
                    return Err(ZLinkError::Creation(CreationError::RequestUnverified {
                        source: Arc::new(e).into(),
                    }));
                }
            },
        };
        let request_sha256 = zlink_codec::inline_ref::sha256(request.as_deref().unwrap_or(&[]));
        let ctx = FactoryContext {
            id: handle.id().as_str().to_owned(),
            stable_type: handle.stable_type().as_str().to_owned(),
            generation: handle.object_generation().get(),
            request: request.clone(),
            mesh: self.mesh.clone(),
            routing_id: self.rid.clone(),
            timers: Default::default(),
        };
        let creation = CreationContext {
            id: ctx.id.clone(),
            stable_type: ctx.stable_type.clone(),
            generation: ctx.generation,
            request,
        };
        // The membership the commit records, and the turn the activation runs under.
        let (membership, turn) = match handle.kind() {
            ObjectKind::Actor => match Membership::decode(handle.payload()) {
                Some(m) if !m.entry => {
                    let spot = (
                        AuthorityKind::Spot,
                        ObjectId::new(m.spot.as_str())
                            .map_err(|e| ZLinkError::malformed_payload("membership")(e.into()))?,
                    );
                    // A Spot sealed for a move (or moved away) takes no new member here.
                    let live = self
                        .live_object(&spot)
                        .filter(|_| !self.interception.covers(&spot));
                    let Some(live) = live else {
                        self.cancel(handle, until).await;
                        return Err(ZLinkError::Unavailable {
                            target: what(spot.0, &spot.1),
                            reason: crate::messaging::UnavailableReason::NotServing,
                        });
                    };
                    let turn = live.turn();
                    let m = Membership {
                        spot: m.spot,
                        entry: false,
                        spot_wide: turn.is_some(),
                    };
                    (Some(m), turn)
                }
                _ => (
                    self.entry_spot.as_ref().map(|e| Membership {
                        spot: e.as_str().to_owned(),
                        entry: true,
                        spot_wide: false,
                    }),
                    None,
                ),
            },
            _ => {
                let spot_wide = handle.kind() == ObjectKind::UserSpot
                    && hosted.execution != Some(SpotExecution::PerActor);
                (None, spot_wide.then(Turn::default))
            }
        };
        // One activation concurrency permit while the factory and initialization run.
        let permit = self
            .activations
            .acquire()
            .await
            .map_err(|_| ZLinkError::ShuttingDown)?;
        let built = hosted
            .erased
            .build(
                ctx,
                self.codecs.clone(),
                (self.mailbox, self.door.clone()),
                turn,
            )
            .await;
        drop(permit);
        // An Actor's creation is decided by the placing node's Entry Spot callback.
        let built = match (built, &self.entry_callback) {
            (Built::Approved { live, .. }, Some(cb)) if handle.kind() == ObjectKind::Actor => {
                match (cb.0)(creation).await {
                    Ok(CreationDecision::Approve { reply }) => Built::Approved { live, reply },
                    Ok(CreationDecision::Reject { reason }) => {
                        live.close().await;
                        Built::Rejected { reason }
                    }
                    Err(e) => {
                        live.close().await;
                        Built::Failed {
                            error: format!("the Entry Spot callback failed: {e}"),
                        }
                    }
                }
            }
            (other, _) => other,
        };
        let object_ref = terminal_ref(handle, handle.kind());
        let (outcome, reply, live) = match built {
            Built::Approved { live, reply } => (CreationOutcome::Created, reply, Some(live)),
            Built::Rejected { reason } => {
                (CreationOutcome::Rejected, Some(reason.into_bytes()), None)
            }
            Built::Failed { error } | Built::Incompatible { error } => {
                let mut failure = error;
                truncate_utf8(&mut failure, zlink_codec::terminal::MAX_FAILURE_BYTES);
                (CreationOutcome::Failed { failure }, None, None)
            }
        };
        let terminal = CreationTerminal {
            outcome,
            object_ref,
            request_sha256,
            reply,
        };
        let write = match TerminalWrite::new(&order.op, &terminal, order.remaining) {
            Ok(w) => w,
            Err(e) => {
                // The reply does not fit a terminal record: a framework failure.
                if let Some(l) = live {
                    l.close().await;
                }
                self.cancel(handle, until).await;
                return Err(ZLinkError::Creation(CreationError::ResultTooLarge {
                    source: Arc::new(e).into(),
                }));
            }
        };
        // The factory's activation is not made live, nor its result confirmed, past the
        // admission deadline (spec 21 §5): nothing of it runs.
        if let Err(e) = self.door.check() {
            if let Some(l) = live {
                l.close().await;
            }
            return Err(e);
        }
        match live {
            Some(live) => match self
                .location
                .authority()
                .commit_also(handle, membership.map(|m| m.encode()), Some(write))
                .await
            {
                Ok(Outcome::Applied(ready)) => {
                    // Live: the timers its factory started tick from here.
                    live.timers().resume();
                    self.insert_live(
                        (ready.kind().authority_kind(), ready.id().clone()),
                        live,
                        &ready,
                    );
                    Ok(terminal)
                }
                Ok(Outcome::Conflict(c)) => {
                    live.close().await;
                    tracing::info!(?c, "creation commit conflicted");
                    Err(StaleReason::ChangedBeforeCommit.into())
                }
                Err(e) => {
                    // Whether the Store changed is unknown: read again (spec 21 §10).
                    tracing::warn!(error = %e, "the creation commit was not confirmed; reading again");
                    let commit = Unconfirmed {
                        handle,
                        order,
                        terminal,
                        until,
                    };
                    self.confirm_commit(commit, live, e).await
                }
            },
            None => self.abort_with(handle, &order.op, write, until).await,
        }
    }

    /// The cleanup window past a creation's deadline (see the module docs).
    pub(crate) fn cleanup_window(&self) -> Duration {
        self.location.options().creation_cleanup_window
    }

    /// Aborts `handle` with the terminal `write` in one batch, retried until `until` while the
    /// Store does not confirm it; the terminal stored for `op` is the result (also when an
    /// earlier, unconfirmed attempt applied).
    async fn abort_with(
        &self,
        handle: &AuthorityHandle,
        op: &OperationKey,
        write: TerminalWrite,
        until: Instant,
    ) -> CreationResult {
        match self.abort_until(handle, Some(write), until).await {
            // The terminal was written in that batch; read it back as the one answer.
            Ok(Outcome::Applied(())) => self.stored_terminal(op, until).await,
            Ok(Outcome::Conflict(c)) => match self.stored_terminal(op, until).await {
                Ok(t) => Ok(t),
                Err(_) => {
                    tracing::info!(?c, "creation abort conflicted");
                    Err(StaleReason::ChangedBeforeAbort.into())
                }
            },
            Err(e) => Err(store_failure(e)),
        }
    }

    /// The stored terminal of `op`, read (retried on Store errors) until `until`.
    async fn stored_terminal(&self, op: &OperationKey, until: Instant) -> CreationResult {
        let mut pause = RETRY_FIRST;
        loop {
            match self.location.authority().read_terminal(op).await {
                Ok(Some(t)) => return Ok(t),
                Ok(None) => return Err(StaleReason::NoCreationResult.into()),
                Err(e) if Instant::now() >= until => return Err(store_failure(e)),
                Err(e) => {
                    tracing::debug!(error = %e, "reading a creation terminal failed; retrying")
                }
            }
            pause = backoff(pause).await;
        }
    }

    /// Aborts `handle` (with `terminal` in the same batch), retrying while the Store does not
    /// confirm it until `until`. A retry after an unconfirmed attempt that applied finds the
    /// record gone (`Conflict::Record`).
    async fn abort_until(
        &self,
        handle: &AuthorityHandle,
        terminal: Option<TerminalWrite>,
        until: Instant,
    ) -> Result<Outcome<()>, LocationError> {
        let mut pause = RETRY_FIRST;
        loop {
            match self
                .location
                .authority()
                .abort_also(handle, terminal.clone())
                .await
            {
                Ok(o) => return Ok(o),
                // Only an unconfirmed Store change is retried: a refused admission or a lost
                // lease stays so for this run (the row is left to the sweeps and to the next
                // node that meets it).
                Err(e) if !unconfirmed(&e) || Instant::now() >= until => return Err(e),
                Err(e) => tracing::warn!(
                    error = %e,
                    id = handle.id().as_str(),
                    "aborting a reservation failed; retrying"
                ),
            }
            pause = backoff(pause).await;
        }
    }

    /// The Ready commit of a creation returned an error: its terminal and record decide
    /// whether it applied (the activation becomes live) or not (the reservation is aborted with
    /// a typed Failed terminal), read again until the deadline plus the cleanup window.
    async fn confirm_commit(
        &self,
        commit: Unconfirmed<'_>,
        live: Arc<dyn LiveObject>,
        error: LocationError,
    ) -> CreationResult {
        let Unconfirmed {
            handle,
            order,
            terminal,
            until,
        } = commit;
        let authority = self.location.authority();
        let mut pause = RETRY_FIRST;
        loop {
            let known = async {
                let stored = authority.read_terminal(&order.op).await?;
                let now = authority.read(handle.kind(), handle.id()).await?;
                Ok::<_, LocationError>((stored, now))
            }
            .await;
            match known {
                Ok((Some(t), AuthorityRead::Found { handle: ready, .. }))
                    if t.outcome == CreationOutcome::Created
                        && ready.state() == AllocationState::Active
                        && ready.object_generation() == handle.object_generation()
                        && ready.owner() == handle.owner() =>
                {
                    // The commit applied; only its reply was lost.
                    // Live: the timers its factory started tick from here.
                    live.timers().resume();
                    self.insert_live(
                        (ready.kind().authority_kind(), ready.id().clone()),
                        live,
                        &ready,
                    );
                    return Ok(t);
                }
                Ok((None, AuthorityRead::Found { handle: now, .. }))
                    if now.version() == handle.version() =>
                {
                    // The commit did not apply: abort with a typed Failed terminal.
                    live.close().await;
                    let mut failure = format!("the Store did not record Ready: {error}");
                    truncate_utf8(&mut failure, zlink_codec::terminal::MAX_FAILURE_BYTES);
                    let failed = CreationTerminal {
                        outcome: CreationOutcome::Failed { failure },
                        reply: None,
                        ..terminal
                    };
                    let write = TerminalWrite::new(&order.op, &failed, order.remaining)
                        .map_err(store_failure)?;
                    return self.abort_with(handle, &order.op, write, until).await;
                }
                Ok(_) => {
                    // Another terminal, or the record gone or changed: not this creation's.
                    live.close().await;
                    return Err(StaleReason::ChangedBeforeCommit.into());
                }
                Err(e) if Instant::now() >= until => {
                    live.close().await;
                    return Err(store_failure(e));
                }
                Err(e) => {
                    tracing::debug!(error = %e, "confirming a creation commit failed; retrying")
                }
            }
            pause = backoff(pause).await;
        }
    }

    /// Cancels a reservation without a terminal (a framework failure before the callback, a
    /// target that never answered), retried until `until` while the Store does not confirm it.
    pub(crate) async fn cancel(&self, handle: &AuthorityHandle, until: Instant) {
        match self.abort_until(handle, None, until).await {
            Ok(Outcome::Applied(()))
            | Ok(Outcome::Conflict(Conflict::Record { current: None })) => {}
            Ok(Outcome::Conflict(c)) => tracing::debug!(?c, "cancel found the record changed"),
            Err(e) => tracing::warn!(
                error = %e,
                id = handle.id().as_str(),
                "cancelling a reservation failed until past its cleanup window; the next node that meets it cancels it"
            ),
        }
    }
}

/// A Ready commit whose result the Store did not confirm.
struct Unconfirmed<'a> {
    handle: &'a AuthorityHandle,
    order: &'a CreationOrder,
    terminal: CreationTerminal,
    until: Instant,
}

/// Whether `e` leaves the Store change unconfirmed (worth retrying).
fn unconfirmed(e: &LocationError) -> bool {
    matches!(
        e.kind(),
        zlink_location::ErrorKind::Store | zlink_location::ErrorKind::Contended
    )
}

/// The first pause between retries of a Store change that was not confirmed.
const RETRY_FIRST: Duration = Duration::from_millis(20);

/// Sleeps `pause` and returns the next one (doubling, at most 500 ms).
async fn backoff(pause: Duration) -> Duration {
    tokio::time::sleep(pause).await;
    (pause * 2).min(Duration::from_millis(500))
}

/// Cuts `text` to at most `max` bytes on a character boundary.
fn truncate_utf8(text: &mut String, max: usize) {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
}
