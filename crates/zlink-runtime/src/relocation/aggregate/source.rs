//! The source side of a `SpotWide` aggregate move: the preflight over every participant, then
//! one `zlink_relocation::unit::Unit` of kind `SpotWideAggregate` driven like a single move
//! (`drive.rs`), its effects applied to the whole group: one reservation, stage records on
//! the Spot's record, one seal over every participant, one capture pass, one aggregate
//! Restore, one cutover; then every participant follows — or, before relay-ready, every held
//! queue runs here again in order.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::time::Instant;
use zlink_codec::RoutingId;
use zlink_codec::records::ObjectKind;
use zlink_relocation::transfer::PayloadChunks;
use zlink_relocation::unit::{
    Effect, Event, PayloadSummary, ReservationId, RestoreFailure, Stage, StageOutcome, StageRecord,
    Unit,
};
use zlink_store_spi::StoreVersion;

use super::start::{Part, capacity_exceeded, internal};
use super::{Payload, RestoreCommand};
use crate::messaging::{ErrorKind, ZLinkError};
use crate::objects::RelocationReadyOutcome;
use crate::objects::client::{ObjectClient, invalid};
use crate::objects::host::{stale, store_failure};
use crate::objects::lifecycle::LifecycleCall;
use crate::relocation::drive::capture_retried;
use crate::relocation::follow::FollowRecord;
use crate::relocation::gate::{self, AdmitCommand, SourcePermits};
use crate::relocation::send;
use crate::relocation::source::{
    answered, cutover_applied, cutover_failed, forward, relay, relocation_out, request,
    request_within, send_cutover,
};
use crate::relocation::stage::{self, StageWriteError};
use crate::relocation::wire::{self, MoveRef, ReadyCommand};
use zlink_location::{
    AuthorityHandle, AuthorityRead, LocationError, Outcome, TargetNode, TargetReservation,
};

/// How long the source waits for the target's admission: the target's own wait plus an
/// answer's way back.
const ADMIT_ANSWER: std::time::Duration =
    std::time::Duration::from_secs(gate::ADMIT_WAIT.as_secs() + 10);

/// One aggregate move in progress on its source.
pub(super) struct Group<'a> {
    pub(super) client: &'a ObjectClient,
    /// The Spot's record as this move last wrote or read it.
    pub(super) handle: AuthorityHandle,
    pub(super) parts: Vec<Part>,
    pub(super) chosen: TargetNode,
    pub(super) root: Vec<u8>,
    pub(super) pages: Vec<Bytes>,
    pub(super) unit: Unit,
    /// What the unit gate admitted the aggregate with (28 §5): held until the move ends.
    pub(super) permits: Option<SourcePermits>,
    pub(super) reservation: Option<TargetReservation>,
    pub(super) restore: Option<(Bytes, PayloadChunks)>,
    pub(super) sealed: bool,
    /// When the seal was set (the interruption starts there, 28 §5).
    pub(super) sealed_at: Option<tokio::time::Instant>,
    pub(super) release_refused: bool,
    /// A relay of held messages that failed after relay-ready (fed to the unit as a deadline
    /// at the cutover).
    pub(super) relay_failed: Option<ZLinkError>,
    pub(super) followed: bool,
    pub(super) owner_generation: Option<u64>,
    pub(super) error: Option<ZLinkError>,
    pub(super) interrupt: bool,
    /// Until when the seal of an `ApplicationSignaled` Spot waits for its boundary (28 §5).
    pub(super) until: Instant,
    /// Whether this move consumed a boundary the application signalled (a cancel before the
    /// commit then runs `Continued` on the source after the queues reopened).
    pub(super) consumed: bool,
}

impl Group<'_> {
    fn relocation(&self) -> u128 {
        self.unit.plan().binding().relocation.get()
    }

    fn to(&self) -> RoutingId {
        self.chosen.node.routing_id.clone()
    }

    fn fail(&mut self, e: ZLinkError) {
        self.error.get_or_insert(e);
    }

    /// Waits at the unit gate until the outbound-unit permit, a `Capture` permit and the
    /// aggregate claim are all free and takes them at once (28 §5; an oversized claim then
    /// holds the payload memory alone), then performs `effects` and every effect they lead
    /// to, and settles.
    pub(super) async fn run(mut self, effects: Vec<Effect>) -> Result<(), ZLinkError> {
        let relocations = &self.client.objects.relocations;
        let gate = relocations.gate(&self.client.objects.relocation_options)?;
        let preserved = self.parts.iter().filter(|p| p.preserve).count();
        let preserved = u32::try_from(preserved).unwrap_or(u32::MAX);
        let listed = Payload::listed_len(&self.pages, self.parts.len());
        let claim = gate.aggregate_claim(preserved, listed)?;
        self.permits = Some(gate.admit_outbound(claim).await?);
        tracing::debug!(
            relocation = self.relocation(),
            claim = claim.bytes(),
            alone = claim.bytes()
                > self
                    .client
                    .objects
                    .relocation_options
                    .max_payload_in_flight_bytes,
            "SpotWide relocation admitted at the unit gate"
        );
        let mut queue: VecDeque<Effect> = effects.into();
        while let Some(effect) = queue.pop_front() {
            tracing::debug!(
                relocation = self.relocation(),
                ?effect,
                "SpotWide relocation effect"
            );
            let events = self.perform(effect).await;
            for event in events {
                if std::mem::take(&mut self.interrupt) {
                    queue.clear();
                }
                match self.unit.step(event) {
                    Ok(more) => queue.extend(more),
                    Err(e) => {
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
        let attempt = self.unit.plan().binding().attempt;
        match effect {
            Effect::SecureTarget { reservation } => self.secure(reservation.get()).await,
            Effect::RecordStage(record) => self.record(record).await,
            Effect::RereadAndRetry(_) => {
                self.interrupt = true;
                vec![Event::Deadline]
            }
            Effect::SealSource => match self.admit_target().await {
                Ok(()) => match self.boundary().await {
                    Ok(release) => {
                        // Sealed while the signalling turn is still held; then it ends.
                        let events = self.seal();
                        drop(release);
                        events
                    }
                    Err(e) => {
                        self.fail(e);
                        self.interrupt = true;
                        vec![Event::CancelRequested]
                    }
                },
                Err(e) => {
                    self.fail(e);
                    self.interrupt = true;
                    vec![Event::CancelRequested]
                }
            },
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
            Effect::SendCutover { .. } => self.cutover().await,
            Effect::StartMessageFollow => {
                let owner = self.owner_generation.unwrap_or_default();
                self.follow_all(owner).await;
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
            // Each participant's held messages from other nodes go to its temporary queue on
            // the target, in hold order, before the cutover (those sent on this node follow
            // right after it).
            Effect::RelayHeldWork => {
                let to = self.to();
                for p in &self.parts {
                    if let Err(e) = relay(self.client, &p.key, &to, self.relocation()) {
                        self.relay_failed.get_or_insert(e);
                    }
                }
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    async fn secure(&mut self, id: u128) -> Vec<Event> {
        let mut types: Vec<_> = self.parts[1..]
            .iter()
            .map(|p| p.stable_type.clone())
            .collect();
        types.sort();
        types.dedup();
        let members = u32::try_from(self.parts.len() - 1).unwrap_or(u32::MAX);
        let authority = self.client.objects.location.authority();
        match authority
            .secure_spot_wide(&self.handle, &types, members, self.chosen.clone(), Some(id))
            .await
        {
            Ok(Outcome::Applied(r)) => {
                self.reservation = Some(r);
                match ReservationId::new(id) {
                    Ok(reservation) => vec![Event::TargetSecured { reservation }],
                    Err(e) => {
                        self.fail(internal(&e));
                        vec![Event::TargetUnavailable]
                    }
                }
            }
            Ok(Outcome::Conflict(c)) => {
                tracing::info!(?c, "SpotWide relocation target not secured");
                self.fail(stale(
                    "the Spot's record changed or the target lease is gone",
                ));
                vec![Event::TargetUnavailable]
            }
            Err(LocationError::CapacityExceeded) => {
                self.fail(capacity_exceeded(
                    "the target has no room for the Spot and every member",
                ));
                vec![Event::TargetUnavailable]
            }
            Err(e) => {
                self.fail(store_failure(e));
                vec![Event::TargetUnavailable]
            }
        }
    }

    /// A stage record on the Spot's record (the aggregate authority), carrying the
    /// reservation. A lost reply is not settled here (the move is cancelled).
    async fn record(&mut self, record: StageRecord) -> Vec<Event> {
        let stage = record.stage();
        let Some(reservation) = self.reservation.clone() else {
            self.fail(internal(&"a stage record before the target was secured"));
            self.interrupt = true;
            return vec![Event::CancelRequested];
        };
        let authority = self.client.objects.location.authority();
        let written = stage::write(
            authority,
            &self.handle,
            &reservation,
            self.relocation(),
            &record,
        )
        .await;
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
                tracing::info!(?c, ?stage, "SpotWide stage record conflicted: cancelling");
                self.fail(stale("the Spot's record changed during the move"));
                StageOutcome::Conflict
            }
            Err(StageWriteError::Store(e)) => {
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

    /// Before the seal: the target admits the aggregate (its inbound-unit and `Restore`
    /// permits and this unit's payload memory claim), waiting there until they are free.
    async fn admit_target(&self) -> Result<(), ZLinkError> {
        let bytes = self.permits.as_ref().map_or(0, SourcePermits::memory);
        let cmd = AdmitCommand {
            relocation: self.relocation().to_string(),
            bytes,
        };
        let wait = ADMIT_ANSWER;
        let body = wire::encode(&cmd)?;
        answered(request_within(self.client, &self.to(), (super::ADMIT, body), wait).await)
            .map(|_| ())
    }

    /// For an `ApplicationSignaled` Spot (28 §5): with preflight, target and permits done,
    /// waits for the next boundary a handler signals, until the deadline (then the move is
    /// cancelled before anything moved, `DeadlineExceeded`). The returned release keeps the
    /// signalling turn held until it is dropped. `None` for `AnyTurnBoundary` (the seal falls
    /// at any turn boundary).
    async fn boundary(&mut self) -> Result<Option<tokio::sync::oneshot::Sender<()>>, ZLinkError> {
        let Some(readiness) = self.parts.first().and_then(|p| p.live.readiness()) else {
            return Ok(None);
        };
        tracing::debug!(
            relocation = self.relocation(),
            "SpotWide relocation waits for the application's boundary"
        );
        match tokio::time::timeout_at(self.until, readiness.wait()).await {
            Ok(Ok(release)) => {
                self.consumed = true;
                Ok(Some(release))
            }
            Ok(Err(_)) => Err(internal(
                &"the boundary wait ended: the Spot closed or another move waits for it",
            )),
            Err(_) => Err(ZLinkError::application(
                ErrorKind::DeadlineExceeded,
                "the ApplicationSignaled Spot signalled no relocation boundary before the deadline",
            )),
        }
    }

    /// After a cancel that reopened the held queues: `Continued` on the source when this move
    /// had consumed the application's boundary (28 §5).
    async fn continued(&mut self) {
        if !std::mem::take(&mut self.consumed) {
            return;
        }
        let Some(spot) = self.parts.first() else {
            return;
        };
        let call = LifecycleCall::Ready(RelocationReadyOutcome::Continued);
        if let Err(e) = spot.live.lifecycle(call).await {
            tracing::warn!(error = %e, "relocation-ready callback (Continued) failed");
        }
    }

    /// Seals every participant (one hold group); any already covered cancels the move.
    fn seal(&mut self) -> Vec<Event> {
        let relocations = &self.client.objects.relocations;
        for (i, p) in self.parts.iter().enumerate() {
            if !relocations.seal(&p.key) {
                for q in &self.parts[..i] {
                    relocations.reopen(&q.key, q.live.as_ref());
                }
                self.fail(invalid(
                    "a move of this Spot or a member is already running",
                ));
                self.interrupt = true;
                return vec![Event::CancelRequested];
            }
        }
        self.sealed = true;
        self.sealed_at = Some(tokio::time::Instant::now());
        Vec::new()
    }

    /// Captures every participant after its accepted jobs, then chunks the aggregate payload.
    /// The participants are captured one after another under the one `Capture` permit the
    /// gate admitted the aggregate with (returned once the pass ends); the payload memory then
    /// shrinks to the encoded aggregate payload (never grows).
    async fn capture(&mut self) -> Vec<Event> {
        let events = self.capture_all().await;
        if let Some(p) = &mut self.permits {
            p.end_capture();
        }
        events
    }

    async fn capture_all(&mut self) -> Vec<Event> {
        let mut states = Vec::with_capacity(self.parts.len());
        let mut largest: Option<u64> = None;
        for p in &self.parts {
            match (capture_retried(p.live.as_ref(), &p.key).await, p.preserve) {
                (Ok(_), false) => states.push(None),
                (Ok(Some(bytes)), true) => {
                    let len = bytes.len() as u64;
                    largest = Some(largest.map_or(len, |l| l.max(len)));
                    states.push(Some(bytes));
                }
                (Ok(None), true) => {
                    self.fail(invalid("PreserveStateWith without an adapter"));
                    return vec![Event::CaptureFailed];
                }
                (Err(e), _) => {
                    self.fail(e);
                    return vec![Event::CaptureFailed];
                }
            }
        }
        if largest.is_some_and(|l| l > zlink_relocation::unit::MAX_STATE_LEN) {
            let summary = PayloadSummary {
                total_len: 0,
                chunk_count: 0,
                crc32c: 0,
            };
            return vec![Event::Captured {
                state_len: largest,
                payload: summary,
            }];
        }
        let payload = match (Payload {
            pages: self.pages.clone(),
            states,
        })
        .encode()
        {
            Ok(p) => p,
            Err(e) => {
                self.fail(e);
                return vec![Event::CaptureFailed];
            }
        };
        let limit = self.client.objects.relocation_options.payload_chunk_limit;
        let attempt = self.unit.plan().binding().attempt.get();
        match send::split(&self.handle, (self.relocation(), attempt), limit, payload) {
            Ok((header, chunks, summary, encoded)) => {
                self.restore = Some((header, chunks));
                if let Some(p) = &mut self.permits {
                    p.shrink_to(encoded);
                }
                vec![Event::Captured {
                    state_len: largest,
                    payload: summary,
                }]
            }
            Err(e) => {
                self.fail(e);
                vec![Event::CaptureFailed]
            }
        }
    }

    async fn send_restore(&mut self) -> Result<(), ZLinkError> {
        let reservation = self
            .reservation
            .clone()
            .ok_or_else(|| internal(&"no target secured"))?;
        let Some((header, chunks)) = self.restore.clone() else {
            return Err(internal(&"the captured payload was dropped"));
        };
        let inner = &self.client.node.inner;
        let peer = inner.route_to(&self.to())?;
        let cmd = RestoreCommand {
            header: header.to_vec(),
            spot: self.handle.id().as_str().to_owned(),
            root: self.root.clone(),
            checksum: self.unit.plan().target_list().as_bytes().to_vec(),
            reservation: reservation.to_wire().map_err(store_failure)?,
        };
        inner.send_control(&peer, super::RESTORE, wire::encode(&cmd)?)?;
        let relocations = &self.client.objects.relocations;
        let gate = relocations.gate(&self.client.objects.relocation_options)?;
        send::chunks_as(inner, &peer, gate, chunks, super::CHUNK).await?;
        let body = wire::encode(&MoveRef::of(self.relocation()))?;
        answered(request(self.client, &self.to(), super::PREPARE, body).await).map(|_| ())
    }

    async fn ready(&mut self) -> Result<(), ZLinkError> {
        let reservation = self
            .reservation
            .clone()
            .ok_or_else(|| internal(&"no target secured"))?;
        let cmd = ReadyCommand {
            relocation: self.relocation().to_string(),
            reservation: reservation.to_wire().map_err(store_failure)?,
        };
        answered(request(self.client, &self.to(), super::READY, wire::encode(&cmd)?).await)
            .map(|_| ())
    }

    async fn cutover(&mut self) -> Vec<Event> {
        let attempt = self.unit.plan().binding().attempt;
        if let Some(e) = self.relay_failed.take() {
            // A relay that failed after relay-ready: fed to the unit as a deadline.
            self.fail(e);
            self.interrupt = true;
            return vec![Event::Deadline];
        }
        let applied =
            send_cutover(self.client, &self.to(), super::CUTOVER, self.relocation()).await;
        match applied {
            Ok((version, owner)) => {
                self.owner_generation = Some(owner);
                // The processing-start signal: NewOwner applied and every queue opened there.
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

    /// Every participant follows to the new owner (its held messages first, in order), its
    /// old activation closes and its route-cache entry goes.
    async fn follow_all(&mut self, owner_generation: u64) {
        let host = &self.client.objects;
        let until = Instant::now() + host.location.options().message_follow_duration;
        let to = self.to();
        for p in &self.parts {
            let record = FollowRecord {
                to: to.clone(),
                previous_owner_generation: self.handle.authority_owner_generation().get(),
                owner_generation,
                object_generation: p.generation,
            };
            let (tx, rx) = mpsc::unbounded_channel();
            host.relocations.follow(&p.key, record.clone(), until, tx);
            tokio::spawn(forward(
                self.client.clone(),
                p.key.clone(),
                record,
                rx,
                until,
            ));
        }
        for p in &self.parts {
            let old = host
                .remove_live(&p.key)
                .unwrap_or_else(|| Arc::clone(&p.live));
            // The Spot (first part) gets `OnClosing(RelocationOut)`; members get nothing.
            relocation_out(&p.key, old.as_ref()).await;
            old.close().await;
            host.routes.forget(&p.key);
        }
        self.followed = true;
    }

    fn abort_target(&self) {
        let inner = &self.client.node.inner;
        let sent = wire::encode(&MoveRef::of(self.relocation())).and_then(|body| {
            let peer = inner.route_to(&self.to())?;
            inner.send_control(&peer, super::ABORT, body)
        });
        if let Err(e) = sent {
            tracing::debug!(error = %e, "SpotWide abort not sent to the target");
        }
    }

    async fn release(&mut self) {
        let Some(reservation) = self.reservation.clone() else {
            return;
        };
        let authority = self.client.objects.location.authority();
        let released = match authority.reservation_now(&reservation).await {
            Ok(Some(now)) => authority.release_target(&now).await,
            Ok(None) => Ok(Outcome::Conflict(zlink_location::Conflict::Reservation)),
            Err(e) => Err(e),
        };
        if !matches!(released, Ok(Outcome::Applied(()))) {
            tracing::info!(?released, "SpotWide release did not apply");
            self.release_refused = true;
        }
    }

    /// The AuthorityOwnerGeneration of the Spot's record when it names the target now.
    async fn target_owns(&self) -> Option<u64> {
        let authority = self.client.objects.location.authority();
        match authority.read(ObjectKind::UserSpot, self.handle.id()).await {
            Ok(AuthorityRead::Found { handle, .. }) if handle.node().routing_id == self.to() => {
                Some(handle.authority_owner_generation().get())
            }
            _ => None,
        }
    }

    /// Serves here again: every held queue runs in its original order (the Spot first) —
    /// unless the release was refused and the Spot's record names the target (then follow).
    async fn reopen(&mut self) {
        if !self.sealed {
            return;
        }
        if self.release_refused {
            if let Some(owner) = self.target_owns().await {
                self.follow_all(owner).await;
                return;
            }
        }
        for p in &self.parts {
            self.client
                .objects
                .relocations
                .reopen(&p.key, p.live.as_ref());
        }
        self.sealed = false;
        self.continued().await;
    }

    async fn settle(mut self) -> Result<(), ZLinkError> {
        let stage = self.unit.stage();
        if matches!(stage, Stage::Committed | Stage::Completed) || self.followed {
            return Ok(());
        }
        if self.sealed {
            // Past relay-ready (a failed cutover): serve again once the released reservation
            // fenced the NewOwner, or follow if the target owns the Spot.
            self.release().await;
            if self.release_refused {
                if let Some(owner) = self.target_owns().await {
                    self.follow_all(owner).await;
                    return Ok(());
                }
            }
            for p in &self.parts {
                self.client
                    .objects
                    .relocations
                    .reopen(&p.key, p.live.as_ref());
            }
        }
        self.continued().await;
        tracing::info!(?stage, "SpotWide relocation did not move the Spot");
        Err(self
            .error
            .take()
            .unwrap_or_else(|| internal(&format!("the relocation ended: {stage:?}"))))
    }
}
