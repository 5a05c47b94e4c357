//! The source drives one move through the `zlink-relocation` unit machine (architecture
//! convention 12): it feeds the [`Unit`] what it observed — its own store replies and capture,
//! and the target's replies on the command plane — and performs the effects the machine
//! returns, in order. Effects the machine assigns to the target are either asked of it over
//! the command plane (ready, abort) or were already performed by it inside a request whose
//! reply reports them (the cutover reply carries the NewOwner outcome).

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use zlink_codec::RoutingId;
use zlink_relocation::transfer::PayloadChunks;
use zlink_relocation::unit::{
    Binding, Effect, Event, FailureReason, PayloadSummary, RestoreFailure, Stage, StageOutcome,
    StageRecord, StoreWrite, Unit,
};
use zlink_store_spi::StoreVersion;

use super::gate::SourcePermits;
use super::send;
use super::source::{
    answered, choose_target, cutover_applied, cutover_failed, follow_and_close, owner_is, relay,
    request, send_cutover,
};
use super::stage::{self, Settled, StageWriteError};
use super::wire::{self, MoveRef, ReadyCommand, Rebuild, RestoreCommand};
use crate::messaging::{ErrorKind, ErrorMessage, ZLinkError};
use crate::objects::client::{ObjectClient, invalid};
use crate::objects::host::{ObjectKey, stale, store_failure};
use crate::objects::live::LiveObject;
use zlink_location::{AuthorityHandle, Outcome, TargetReservation};

/// The pause between two attempts to settle a stage record or a release whose outcome is
/// unknown (spec 21 §10: re-read, and retry the same write, until the deadline).
const SETTLE_PAUSE: std::time::Duration = std::time::Duration::from_millis(20);

/// One move in progress on its source.
pub(super) struct Move<'a> {
    pub(super) client: &'a ObjectClient,
    pub(super) key: ObjectKey,
    /// The Actor's record as this move last wrote or read it.
    pub(super) handle: AuthorityHandle,
    pub(super) live: Arc<dyn LiveObject>,
    pub(super) rebuild: Rebuild,
    pub(super) wanted: Option<RoutingId>,
    pub(super) unit: Unit,
    /// The reservation as the latest stage record carried it.
    reservation: Option<TargetReservation>,
    to: Option<RoutingId>,
    /// The Restore header and chunks, kept until the payload is dropped.
    restore: Option<(Bytes, PayloadChunks)>,
    sealed: bool,
    release_refused: bool,
    moved_anyway: bool,
    followed: bool,
    /// The AuthorityOwnerGeneration the target's NewOwner issued (its cutover reply).
    owner_generation: Option<u64>,
    relay_failed: Option<ZLinkError>,
    /// Why the move failed, as first observed.
    error: Option<ZLinkError>,
    /// An event the runtime injected (a cancellation or deadline): the effects still queued
    /// from the step before are dropped.
    interrupt: bool,
    /// What the unit gate admitted this unit with (28 §5): held until the move ends.
    permits: Option<SourcePermits>,
    /// When the source admission seal was set (the interruption starts there).
    sealed_at: Option<tokio::time::Instant>,
    /// The `PerActor` User Spot move this unit belongs to (its NewOwner writes the move
    /// record).
    per_actor: Option<wire::PerActorPart>,
    /// A `PerActor` Spot authority transition: no state is captured (no adapter call), and
    /// after the cutover the source activation leaves the live set without being closed (the
    /// whole move closes it after its last member).
    shell: bool,
}

fn internal(e: &dyn std::fmt::Display) -> ZLinkError {
    ZLinkError::application(ErrorKind::InternalFailure, &e.to_string())
}

impl<'a> Move<'a> {
    pub(super) fn new(
        client: &'a ObjectClient,
        key: ObjectKey,
        handle: AuthorityHandle,
        live: Arc<dyn LiveObject>,
        rebuild: Rebuild,
        wanted: Option<RoutingId>,
        unit: Unit,
    ) -> Self {
        Self {
            client,
            key,
            handle,
            live,
            rebuild,
            wanted,
            unit,
            reservation: None,
            to: None,
            restore: None,
            sealed: false,
            release_refused: false,
            moved_anyway: false,
            followed: false,
            owner_generation: None,
            relay_failed: None,
            error: None,
            interrupt: false,
            permits: None,
            sealed_at: None,
            per_actor: None,
            shell: false,
        }
    }

    /// This unit as part of the `PerActor` User Spot move `part`: the Spot authority
    /// transition (`shell`) or one member Actor.
    pub(super) fn per_actor(mut self, part: wire::PerActorPart, shell: bool) -> Self {
        self.per_actor = Some(part);
        self.shell = shell;
        self
    }

    /// After the cutover: follows to `to` and closes the old activation — or, for a Spot
    /// authority transition, only takes it out of the live set (see [`Self::shell`]).
    async fn follow_to(&mut self, to: &RoutingId, owner: u64) {
        let (key, live) = (&self.key, Arc::clone(&self.live));
        if self.shell {
            super::source::follow_only(self.client, key, &self.handle, (to, owner));
        } else {
            follow_and_close(self.client, key, &self.handle, (to, owner), live).await;
        }
        self.followed = true;
    }

    fn binding(&self) -> Binding {
        self.unit.plan().binding()
    }

    fn relocation(&self) -> u128 {
        self.binding().relocation.get()
    }

    fn fail(&mut self, e: ZLinkError) {
        self.error.get_or_insert(e);
    }

    /// Waits at the unit gate until every permit the unit needs is free and takes them at
    /// once (28 §5), then performs `effects` and every effect the events they produce lead to,
    /// and settles. A unit that can never fit is refused before anything is written or
    /// captured.
    pub(super) async fn run(mut self, effects: Vec<Effect>) -> Result<AuthorityHandle, ZLinkError> {
        let relocations = &self.client.objects.relocations;
        let gate = relocations.gate(&self.client.objects.relocation_options)?;
        let claim = gate.source_claim(u32::from(self.rebuild == Rebuild::Preserve))?;
        self.permits = Some(gate.admit_outbound(claim).await?);
        let mut queue: VecDeque<Effect> = effects.into();
        while let Some(effect) = queue.pop_front() {
            let events = self.perform(effect).await;
            for event in events {
                if std::mem::take(&mut self.interrupt) {
                    queue.clear();
                }
                match self.unit.step(event) {
                    Ok(more) => queue.extend(more),
                    Err(e) => {
                        // A refused event is a runtime bug: cancel while that is allowed.
                        tracing::warn!(error = %e, "relocation machine refused an event");
                        self.fail(internal(&e));
                        queue.clear();
                        if let Ok(more) = self.unit.step(Event::CancelRequested) {
                            queue.extend(more);
                        }
                        break;
                    }
                }
            }
        }
        self.settle().await
    }

    async fn perform(&mut self, effect: Effect) -> Vec<Event> {
        tracing::debug!(relocation = self.relocation(), ?effect, "relocation effect");
        let attempt = self.binding().attempt;
        match effect {
            Effect::SecureTarget { reservation } => self.secure(reservation.get()).await,
            Effect::RecordStage(record) => self.record(record).await,
            // `record` re-read and retried the same write until the deadline already.
            Effect::RereadAndRetry(StoreWrite::Stage(_)) => {
                self.interrupt = true;
                vec![Event::Deadline]
            }
            Effect::SealSource => {
                if let Err(e) = self.admit_target().await {
                    self.fail(e);
                    self.interrupt = true;
                    return vec![Event::CancelRequested];
                }
                if self.client.objects.relocations.seal(&self.key) {
                    self.sealed = true;
                    self.sealed_at = Some(tokio::time::Instant::now());
                    Vec::new()
                } else {
                    self.fail(invalid("a move of this object is already running"));
                    self.interrupt = true;
                    vec![Event::CancelRequested]
                }
            }
            Effect::Capture { .. } => self.capture().await,
            Effect::SendRestore(_) => match self.send_restore().await {
                Ok(()) => vec![Event::RestoreAccepted { attempt }],
                Err(e) => {
                    self.fail(e);
                    vec![Event::RestoreFailed {
                        attempt,
                        reason: RestoreFailure::TargetFailed,
                    }]
                }
            },
            Effect::SendRelayReady { .. } => match self.ready().await {
                Ok(()) => vec![Event::RelayReady { attempt }],
                Err(e) => {
                    self.fail(e);
                    vec![Event::RestoreFailed {
                        attempt,
                        reason: RestoreFailure::TargetFailed,
                    }]
                }
            },
            Effect::RelayHeldWork => {
                if let Some(to) = self.to.clone() {
                    if let Err(e) = relay(self.client, &self.key, &to, self.relocation()) {
                        self.relay_failed = Some(e);
                    }
                }
                Vec::new()
            }
            Effect::SendCutover { .. } => self.cutover().await,
            Effect::StartMessageFollow => {
                if let Some(to) = self.to.clone() {
                    let owner = self.owner_generation.unwrap_or_default();
                    self.follow_to(&to, owner).await;
                }
                Vec::new()
            }
            Effect::DropCapturedPayload | Effect::DiscardProgress => {
                self.restore = None;
                if let Some(p) = &mut self.permits {
                    p.drop_payload();
                }
                Vec::new()
            }
            Effect::DiscardTargetQueue | Effect::RemovePreparedTarget => {
                self.abort_target();
                Vec::new()
            }
            Effect::ReleaseTarget { .. } => {
                self.release().await;
                Vec::new()
            }
            Effect::ReopenSource => {
                self.reopen().await;
                Vec::new()
            }
            // The held work is restored with the reopen, after the release fenced the target;
            // the target performed these inside the cutover request; no Session is bound to an
            // Entry Spot member; the assembly goes with the abort.
            _ => Vec::new(),
        }
    }

    async fn secure(&mut self, reservation_id: u128) -> Vec<Event> {
        let target = match choose_target(self.client, &self.handle, self.wanted.as_ref()).await {
            Ok(t) => t,
            Err(e) => {
                self.fail(e);
                return vec![Event::TargetUnavailable];
            }
        };
        let authority = self.client.objects.location.authority();
        match authority
            .secure_target(&self.handle, target.clone(), Some(reservation_id))
            .await
        {
            Ok(Outcome::Applied(r)) => {
                self.to = Some(target.node.routing_id.clone());
                self.reservation = Some(r);
                match zlink_relocation::unit::ReservationId::new(reservation_id) {
                    Ok(reservation) => vec![Event::TargetSecured { reservation }],
                    Err(e) => {
                        self.fail(internal(&e));
                        vec![Event::TargetUnavailable]
                    }
                }
            }
            Ok(Outcome::Conflict(c)) => {
                tracing::info!(?c, "relocation target not secured");
                self.fail(stale("the record changed or the target has no room"));
                vec![Event::TargetUnavailable]
            }
            Err(e) => {
                self.fail(store_failure(e));
                vec![Event::TargetUnavailable]
            }
        }
    }

    /// Writes a stage record (21 §9.1) as a reservation-carrying Preserve conditioned on the
    /// latest version of this move.
    async fn record(&mut self, record: StageRecord) -> Vec<Event> {
        let stage = record.stage();
        let Some(reservation) = self.reservation.clone() else {
            self.fail(internal(&"a stage record before the target was secured"));
            self.interrupt = true;
            return vec![Event::CancelRequested];
        };
        let authority = self.client.objects.location.authority();
        let deadline = self.deadline();
        let written = loop {
            let written = stage::write(
                authority,
                &self.handle,
                &reservation,
                self.relocation(),
                &record,
            )
            .await;
            let Err(StageWriteError::Store(e)) = written else {
                break written;
            };
            // The outcome is unknown (spec 21 §10): settle it by reading the record and the
            // reservation row; retry the same write (same condition and reservation) only if
            // it did not apply; never guess.
            tracing::info!(error = %e, ?stage, "relocation stage record: no reply, re-reading");
            let settled = loop {
                match stage::settle(
                    authority,
                    &self.handle,
                    self.relocation(),
                    &reservation,
                    &record,
                )
                .await
                {
                    Settled::Unknown if tokio::time::Instant::now() < deadline => {
                        tokio::time::sleep(SETTLE_PAUSE).await;
                    }
                    settled => break settled,
                }
            };
            match settled {
                Settled::Applied(applied) => {
                    break Ok(Outcome::Applied(*applied));
                }
                Settled::Changed => {
                    break Ok(Outcome::Conflict(zlink_location::Conflict::Reservation));
                }
                Settled::NotApplied if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(SETTLE_PAUSE).await;
                }
                Settled::NotApplied | Settled::Unknown => break Err(StageWriteError::Store(e)),
            }
        };
        let outcome = match written {
            Ok(Outcome::Applied((handle, reservation))) => {
                let version: StoreVersion = handle.version().clone();
                self.handle = handle;
                self.reservation = Some(reservation);
                #[cfg(test)]
                self.client.objects.relocations.after_stage(stage).await;
                StageOutcome::Applied(version)
            }
            Ok(Outcome::Conflict(c)) => {
                tracing::info!(?c, ?stage, "relocation stage record conflicted: cancelling");
                self.fail(stale("the object's record changed during the move"));
                StageOutcome::Conflict
            }
            Err(StageWriteError::Store(e)) => {
                tracing::info!(error = %e, ?stage, "relocation stage record: not settled by the deadline");
                self.fail(store_failure(e));
                StageOutcome::ReplyLost
            }
            Err(e) => {
                self.fail(internal(&e));
                self.interrupt = true;
                return vec![Event::CancelRequested];
            }
        };
        vec![Event::StageRecorded { stage, outcome }]
    }

    /// How long a store write of this move whose outcome is unknown is settled and retried
    /// (`storeFailureGrace` from now).
    fn deadline(&self) -> tokio::time::Instant {
        tokio::time::Instant::now() + self.client.objects.location.options().store_failure_grace
    }

    /// Captures after every accepted job and chunks the payload (kept until it is dropped).
    async fn capture(&mut self) -> Vec<Event> {
        let captured = if self.shell {
            // No Spot state moves: only every accepted job runs first.
            self.live.settle().await.map(|()| None)
        } else {
            capture_retried(self.live.as_ref(), &self.key).await
        };
        if let Some(p) = &mut self.permits {
            p.end_capture();
        }
        let captured = match captured {
            Ok(c) => c,
            Err(e) => return self.failed_capture(e),
        };
        let (payload, state_len) = match self.rebuild {
            Rebuild::Recreate => (Bytes::new(), None),
            Rebuild::Preserve => match captured {
                Some(bytes) => {
                    let len = bytes.len() as u64;
                    (bytes, Some(len))
                }
                None => {
                    return self.failed_capture(invalid("PreserveStateWith without an adapter"));
                }
            },
        };
        let total_len = payload.len() as u64;
        if total_len > zlink_relocation::unit::MAX_STATE_LEN {
            // Over the bound: the machine fails the move; nothing is chunked.
            let summary = PayloadSummary {
                total_len,
                chunk_count: 0,
                crc32c: 0,
            };
            return vec![Event::Captured {
                state_len,
                payload: summary,
            }];
        }
        let limit = self.client.objects.relocation_options.payload_chunk_limit;
        let attempt = self.binding().attempt.get();
        match send::split(&self.handle, (self.relocation(), attempt), limit, payload) {
            Ok((header, chunks, summary, encoded)) => {
                if let Some(p) = &mut self.permits {
                    p.shrink_to(encoded);
                }
                self.restore = Some((header, chunks));
                vec![Event::Captured {
                    state_len,
                    payload: summary,
                }]
            }
            Err(e) => self.failed_capture(e),
        }
    }

    fn failed_capture(&mut self, e: ZLinkError) -> Vec<Event> {
        self.fail(e);
        vec![Event::CaptureFailed]
    }

    /// Sends the Restore and its chunks, in order on the one peer connection, then asks the
    /// target to prepare; its answer is the Restore accepted (assembled, verified, built).
    /// Each chunk first reserves its charge against the in-flight budgets (06 §3; see
    /// [`gate`]): short of budget, the unit has the target acknowledge its chunks in flight,
    /// or, with none, waits for another unit's release.
    async fn send_restore(&mut self) -> Result<(), ZLinkError> {
        let (to, reservation) = self.target()?;
        let Some((header, chunks)) = self.restore.clone() else {
            return Err(internal(&"the captured payload was dropped"));
        };
        let inner = &self.client.node.inner;
        let peer = inner.route_to(&to)?;
        let cmd = RestoreCommand {
            header: header.to_vec(),
            id: self.handle.id().as_str().to_owned(),
            stable_type: self.handle.stable_type().as_str().to_owned(),
            generation: self.handle.object_generation().get().to_string(),
            rebuild: self.rebuild,
            reservation: reservation.to_wire().map_err(store_failure)?,
            kind: wire::MovedKind::of(self.handle.kind())
                .ok_or_else(|| internal(&"a unit of a kind that does not move"))?,
            per_actor: self.per_actor.clone(),
        };
        inner.send_control(&peer, wire::RESTORE, wire::encode(&cmd)?)?;
        let relocations = &self.client.objects.relocations;
        let gate = relocations.gate(&self.client.objects.relocation_options)?;
        send::chunks(inner, &peer, gate, chunks).await?;
        let body = wire::encode(&MoveRef::of(self.relocation()))?;
        answered(request(self.client, &to, wire::PREPARE, body).await).map(|_| ())
    }

    /// Before the seal: the target admits the unit (its inbound-unit and `Restore` permits and
    /// this unit's payload memory claim), waiting there until they are free (28 §5).
    async fn admit_target(&self) -> Result<(), ZLinkError> {
        let (to, _) = self.target()?;
        let bytes = self.permits.as_ref().map_or(0, SourcePermits::memory);
        send::admit(&self.client.node.inner, &to, self.relocation(), bytes).await
    }

    /// `Prepared` is recorded: the target takes the reservation it carried and answers
    /// relay-ready.
    async fn ready(&mut self) -> Result<(), ZLinkError> {
        let (to, reservation) = self.target()?;
        let cmd = ReadyCommand {
            relocation: self.relocation().to_string(),
            reservation: reservation.to_wire().map_err(store_failure)?,
        };
        answered(request(self.client, &to, wire::READY, wire::encode(&cmd)?).await).map(|_| ())
    }

    /// Sends the cutover and reports what the target's NewOwner did: applied (at a version),
    /// a conflict, or not known (a deadline: the record settles it).
    async fn cutover(&mut self) -> Vec<Event> {
        let attempt = self.binding().attempt;
        if let Some(e) = self.relay_failed.take() {
            self.fail(e);
            self.interrupt = true;
            return vec![Event::Deadline];
        }
        let applied = match self.target() {
            Ok((to, _)) => send_cutover(self.client, &to, wire::CUTOVER, self.relocation()).await,
            Err(e) => Err(e),
        };
        match applied {
            Ok((version, owner)) => {
                self.owner_generation = Some(owner);
                // The processing-start signal: NewOwner applied and dispatch opened there.
                let interruptions = &self.client.objects.relocations.interruptions;
                interruptions.record_since(self.relocation(), self.sealed_at);
                cutover_applied(attempt, version)
            }
            Err(e) => {
                let events = cutover_failed(attempt, &e);
                self.fail(e);
                events
            }
        }
    }

    fn target(&self) -> Result<(RoutingId, TargetReservation), ZLinkError> {
        match (&self.to, &self.reservation) {
            (Some(to), Some(r)) => Ok((to.clone(), r.clone())),
            _ => Err(internal(&"no target secured")),
        }
    }

    /// Asks the target to drop the Restore, its prepared instance and queue (one-way, best
    /// effort: the released reservation fences any NewOwner anyway).
    fn abort_target(&self) {
        let Some(to) = &self.to else { return };
        let inner = &self.client.node.inner;
        let sent = wire::encode(&MoveRef::of(self.relocation())).and_then(|body| {
            let peer = inner.route_to(to)?;
            inner.send_control(&peer, wire::ABORT, body)
        });
        if let Err(e) = sent {
            tracing::debug!(error = %e, "relocation abort not sent to the target");
        }
    }

    /// Releases the target capacity, conditioned on the reservation row's version as it is
    /// read now (an earlier write whose reply was lost may have carried it further). A row
    /// that is gone or a release that conflicts is refused (the target may own the Actor);
    /// a store failure is re-read and retried until the deadline.
    async fn release(&mut self) {
        let Some(reservation) = self.reservation.clone() else {
            return;
        };
        let authority = self.client.objects.location.authority();
        let deadline = self.deadline();
        loop {
            let released = match authority.reservation_now(&reservation).await {
                Ok(Some(now)) => authority.release_target(&now).await,
                Ok(None) => Ok(Outcome::Conflict(zlink_location::Conflict::Reservation)),
                Err(e) => Err(e),
            };
            match released {
                Ok(Outcome::Applied(())) => return,
                Ok(other) => {
                    tracing::info!(?other, "relocation release did not apply");
                    self.release_refused = true;
                    return;
                }
                Err(e) if tokio::time::Instant::now() < deadline => {
                    tracing::info!(error = %e, "relocation release: no reply, re-reading");
                    tokio::time::sleep(SETTLE_PAUSE).await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "relocation release not settled by the deadline");
                    self.release_refused = true;
                    return;
                }
            }
        }
    }

    /// Serves here again — unless the release did not apply and the record shows the target
    /// already owns the Actor (then the move completes: follow and close).
    async fn reopen(&mut self) {
        if !self.sealed {
            return;
        }
        if self.release_refused {
            if let Some(to) = self.to.clone() {
                if let Some(owner) = owner_is(self.client, &self.key, self.handle.kind(), &to).await
                {
                    self.follow_to(&to, owner).await;
                    self.moved_anyway = true;
                    return;
                }
            }
        }
        self.client
            .objects
            .relocations
            .reopen(&self.key, self.live.as_ref());
        self.sealed = false;
    }

    /// After the last effect: the Actor's ref on its new owner, or why it stays.
    async fn settle(mut self) -> Result<AuthorityHandle, ZLinkError> {
        let stage = self.unit.stage();
        if matches!(stage, Stage::Committed | Stage::Completed) || self.moved_anyway {
            return self.answer().await;
        }
        if self.unit.relay_ready() && !self.followed {
            // Past relay-ready the machine never reopens the source (21 §9.4). Deviation: the
            // source serves again once the released reservation fenced every NewOwner (the
            // prepared instance never dispatched), and completes if the target owns it.
            self.release().await;
            if self.release_refused {
                if let Some(to) = self.to.clone() {
                    if let Some(owner) =
                        owner_is(self.client, &self.key, self.handle.kind(), &to).await
                    {
                        self.follow_to(&to, owner).await;
                        return self.answer().await;
                    }
                }
                self.client
                    .objects
                    .relocations
                    .reopen(&self.key, self.live.as_ref());
                return Err(stale(
                    "the relocation ended in an unknown state; the object stays",
                ));
            }
            self.client
                .objects
                .relocations
                .reopen(&self.key, self.live.as_ref());
        }
        tracing::info!(?stage, "relocation did not move the object");
        Err(self.error.take().unwrap_or_else(|| why(stage)))
    }

    async fn answer(&self) -> Result<AuthorityHandle, ZLinkError> {
        super::source::read_record(self.client, &self.key, self.handle.kind()).await
    }
}

/// How many times the adapter's capture is tried (each a job of its own on the sealed
/// activation) before the unit's state is incompatible (28 §8 `StateIncompatible`).
pub(crate) const CAPTURE_ATTEMPTS: u32 = 3;

/// The adapter's capture of `live`, tried up to [`CAPTURE_ATTEMPTS`] times while the adapter
/// fails (an activation that refuses the job, or a shutdown, ends it at once): every attempt
/// failing is `StateIncompatible`.
pub(in crate::relocation) async fn capture_retried(
    live: &dyn LiveObject,
    key: &ObjectKey,
) -> Result<Option<Bytes>, ZLinkError> {
    let mut attempt = 1;
    loop {
        match live.capture().await {
            Err(e) if e.kind() == ErrorKind::InternalFailure => {
                if attempt >= CAPTURE_ATTEMPTS {
                    return Err(ZLinkError::StateIncompatible {
                        target: crate::objects::host::what(key.0, &key.1),
                        reason: ErrorMessage::sanitise(&format!(
                            "the capture failed {attempt} times, last: {e}"
                        )),
                    });
                }
                tracing::warn!(attempt, error = %e, "relocation capture failed: trying again");
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// The error a move that ended without one observed reports.
fn why(stage: Stage) -> ZLinkError {
    match stage {
        Stage::Failed(FailureReason::StateTooLarge { len, max })
        | Stage::Failed(FailureReason::PayloadTooLarge { len, max }) => {
            ZLinkError::StateIncompatible {
                target: "the relocated object".into(),
                reason: ErrorMessage::sanitise(&format!(
                    "the captured state is {len} bytes, more than {max}"
                )),
            }
        }
        Stage::Failed(FailureReason::StageConflict { stage }) => stale(&format!(
            "the object's record changed during the move ({stage:?} not recorded)"
        )),
        other => internal(&format!("the relocation ended: {other:?}")),
    }
}
