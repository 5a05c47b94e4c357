//! The one move performer (architecture convention 12): the source drives every unit — one
//! object, a `PerActor` step or a `SpotWide` aggregate ([`Shape`], over its [`Part`]s) —
//! through the `zlink-relocation` unit machine. It feeds the [`Unit`] what it observed — its
//! own store replies and capture, and the target's replies on the command plane — and
//! performs the effects the machine returns, in order, on every participant. Effects the
//! machine assigns to the target are either asked of it over the command plane (ready, abort)
//! or were already performed by it inside a request whose reply reports them (the cutover
//! reply carries the NewOwner outcome).

mod end;
mod steps;

use crate::objects::timer::wire::TimerWire;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use zlink_codec::RoutingId;
use zlink_relocation::transfer::PayloadChunks;
use zlink_relocation::unit::{
    Binding, Effect, Event, ReservationId, RestoreFailure, StageOutcome, StageRecord, StoreWrite,
    Unit,
};
use zlink_store_spi::StoreVersion;

use super::gate::{self, SourcePermits};
use super::participants::{Part, Shape, SpotWide};
use super::source::{choose_target, relay_each};
use super::stage::{self, Settled, StageWriteError};
use super::wire::{self, Rebuild};
use crate::messaging::{StaleReason, ZLinkError};
use crate::objects::client::ObjectClient;
use crate::objects::host::{ObjectKey, store_failure};
use crate::objects::live::LiveObject;
use crate::relocation::MovesOf;
use crate::relocation::{failed, invariant};
use zlink_location::{AuthorityHandle, LocationError, Outcome, TargetNode, TargetReservation};

#[cfg_attr(not(test), allow(unused_imports))]
pub(crate) use steps::CAPTURE_ATTEMPTS;

/// The pause between two attempts to settle a stage record or a release whose outcome is
/// unknown (spec 21 §10: re-read, and retry the same write, until the deadline).
const SETTLE_PAUSE: Duration = Duration::from_millis(20);

/// How long the source waits for the target's admission: the target's own wait plus an
/// answer's way back.
const ADMIT_ANSWER: Duration = Duration::from_secs(gate::ADMIT_WAIT.as_secs() + 10);

/// One unit in progress on its source.
pub(super) struct Move<'a> {
    client: &'a ObjectClient,
    /// The record of the unit's authority (the object's, or the Spot's) as this move last
    /// wrote or read it.
    handle: AuthorityHandle,
    /// The participants: the object, or the Spot first and then every member.
    parts: Vec<Part>,
    shape: Shape,
    unit: Unit,
    /// The reservation as the latest stage record carried it.
    reservation: Option<TargetReservation>,
    /// The target the reservation was asked for, and whether the reply of that secure was
    /// lost (the store may hold the row with no copy here: the release finds it by the move's
    /// ReservationId).
    asked: Option<TargetNode>,
    secure_lost: bool,
    to: Option<RoutingId>,
    /// The Restore header and chunks, kept until the payload is dropped.
    restore: Option<(Bytes, PayloadChunks)>,
    sealed: bool,
    /// Where the release of the target capacity stands (`None`: not asked).
    released: Option<end::Released>,
    /// Whether *ready* was sent: only a target that took it can run the NewOwner.
    ready_sent: bool,
    /// Whether the relay-ready reply was accepted: from then on the source is never restored
    /// (21 §9.4 last paragraph; `end.rs`).
    ready_accepted: bool,
    followed: bool,
    /// The AuthorityOwnerGeneration the target's NewOwner issued (its cutover reply).
    owner_generation: Option<u64>,
    /// A relay of held messages that failed after relay-ready (fed to the unit as a deadline
    /// at the cutover).
    relay_failed: Option<ZLinkError>,
    /// Why the move failed, as first observed.
    error: Option<ZLinkError>,
    /// The store failure a unit that failed closed at its `ReopenSource` reports.
    unsettled: Option<ZLinkError>,
    /// An event the runtime injected (a cancellation or deadline): the effects still queued
    /// from the step before are dropped.
    interrupt: bool,
    /// What the unit gate admitted this unit with (28 §5): held until the move ends.
    permits: Option<SourcePermits>,
    /// When the source admission seal was set (the interruption starts there).
    sealed_at: Option<Instant>,
    /// Each participant's timers as the capture left them (sent in the Restore command).
    timers: Vec<Vec<TimerWire>>,
    /// The move's deadline, if it has one (a host Relocate's; an aggregate's seal bound): the
    /// Restore command carries it, so the target waits for ready no longer.
    until: Option<Instant>,
}

impl<'a> Move<'a> {
    /// A single-object unit of `key`, recorded as `handle`, live here as `live`.
    pub(super) fn new(
        client: &'a ObjectClient,
        key: ObjectKey,
        handle: AuthorityHandle,
        live: Arc<dyn LiveObject>,
        rebuild: Rebuild,
        wanted: Option<RoutingId>,
        unit: Unit,
    ) -> Self {
        let part = Part {
            key,
            live,
            stable_type: handle.stable_type().clone(),
            generation: handle.object_generation().get(),
            preserve: rebuild == Rebuild::Preserve,
        };
        let shape = Shape::Single {
            rebuild,
            wanted,
            per_actor: None,
            join: None,
            shell: false,
        };
        Self::with(client, handle, vec![part], shape, unit)
    }

    /// A `SpotWide` aggregate of `parts` (the Spot first), recorded as the Spot's `handle`.
    pub(super) fn spot_wide(
        client: &'a ObjectClient,
        handle: AuthorityHandle,
        parts: Vec<Part>,
        spot_wide: SpotWide,
        unit: Unit,
    ) -> Self {
        Self::with(
            client,
            handle,
            parts,
            Shape::SpotWide(Box::new(spot_wide)),
            unit,
        )
    }

    fn with(
        client: &'a ObjectClient,
        handle: AuthorityHandle,
        parts: Vec<Part>,
        shape: Shape,
        unit: Unit,
    ) -> Self {
        let until = match &shape {
            Shape::SpotWide(s) => Some(s.until),
            Shape::Single { .. } => None,
        };
        Self {
            client,
            handle,
            parts,
            shape,
            unit,
            reservation: None,
            asked: None,
            secure_lost: false,
            to: None,
            restore: None,
            sealed: false,
            released: None,
            ready_sent: false,
            ready_accepted: false,
            followed: false,
            owner_generation: None,
            relay_failed: None,
            error: None,
            unsettled: None,
            interrupt: false,
            permits: None,
            sealed_at: None,
            timers: Vec::new(),
            until,
        }
    }

    /// This unit with the deadline `until` (a host Relocate's), when given: the target then
    /// waits for its ready no longer than that (`deadlineMs` in the Restore command).
    pub(super) fn until(mut self, until: Option<Instant>) -> Self {
        if until.is_some() {
            self.until = until;
        }
        self
    }

    /// This unit as part of the `PerActor` User Spot move `part`: the Spot authority
    /// transition (`shell`) or one member Actor.
    pub(super) fn per_actor(mut self, part: wire::PerActorPart, shell: bool) -> Self {
        if let Shape::Single {
            per_actor,
            shell: s,
            ..
        } = &mut self.shape
        {
            *per_actor = Some(part);
            *s = shell;
        }
        self
    }

    /// This unit as the cross-node join `part`: the target's NewOwner writes its membership.
    pub(super) fn join(mut self, part: wire::JoinPart) -> Self {
        if let Shape::Single { join, .. } = &mut self.shape {
            *join = Some(part);
        }
        self
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

    /// Waits at the unit gate for an outbound-unit permit (28 §5; its `Capture` permit and
    /// payload memory are taken when its capture starts, `steps.rs`), then performs `effects`
    /// and every effect the events they produce lead to, and settles. A unit that can never
    /// fit is refused before anything is written or captured. Returns the unit authority's
    /// record as it is after the move.
    pub(super) async fn run(mut self, effects: Vec<Effect>) -> Result<AuthorityHandle, ZLinkError> {
        let relocations = &self.client.objects.relocations();
        let gate = relocations.gate(&self.client.objects.relocation_options)?;
        let claim = self.shape.claim(gate, &self.parts)?;
        self.permits = Some(gate.admit_outbound(claim).await?);
        tracing::debug!(
            relocation = self.relocation(),
            claim = claim.bytes(),
            "relocation admitted at the unit gate"
        );
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
                        self.fail(failed("unit machine step")(e));
                        queue.clear();
                        if let Ok(more) = self.unit.step(Event::CancelRequested) {
                            queue.extend(more);
                        }
                        break;
                    }
                }
            }
        }
        let out = self.settle().await;
        crate::telemetry::relocation::unit_ended(out.as_ref().err().map(|e| e.kind().name()));
        out
    }

    async fn perform(&mut self, effect: Effect) -> Vec<Event> {
        tracing::debug!(relocation = self.relocation(), ?effect, "relocation effect");
        let attempt = self.binding().attempt;
        match effect {
            Effect::SecureTarget { reservation } => self.secure(reservation).await,
            Effect::RecordStage(record) => self.record(record).await,
            // `record` re-read and retried the same write until the deadline already.
            Effect::RereadAndRetry(StoreWrite::Stage(_)) => {
                self.interrupt = true;
                vec![Event::Deadline]
            }
            Effect::SealSource => match self.seal().await {
                Ok(()) => Vec::new(),
                Err(e) => {
                    self.fail(e);
                    self.interrupt = true;
                    vec![Event::CancelRequested]
                }
            },
            Effect::Capture { .. } => self.capture().await,
            Effect::SendRestore(_) => match self.send_restore().await {
                Ok(()) => vec![Event::RestoreAccepted { attempt }],
                Err(e) => self.target_failed(e),
            },
            Effect::SendRelayReady { .. } => {
                self.ready_sent = true;
                match self.ready().await {
                    Ok(()) => {
                        self.ready_accepted = true;
                        vec![Event::RelayReady { attempt }]
                    }
                    Err(e) => self.target_failed(e),
                }
            }
            // Each participant's held messages from other nodes go to its temporary queue on
            // the target, in hold order, before the cutover (those sent on this node follow
            // right after it).
            Effect::RelayHeldWork => {
                if let Some(to) = self.to.clone() {
                    let keys = self.parts.iter().map(|p| &p.key);
                    if let Err(e) = relay_each(self.client, keys, &to, self.relocation()) {
                        self.relay_failed.get_or_insert(e);
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
            // Never queued: the callers (`source.rs`, `aggregate/start.rs`) return the rejection
            // before `run` when `Unit::start` asks for it.
            Effect::Reject { .. } => Vec::new(),
            // Performed by `ReopenSource` (`reopen`, `end.rs`): the held work runs here again
            // in its order once the release fenced the target, never before.
            Effect::RestoreHeldWorkInOrder => Vec::new(),
            // No plan of this runtime binds a Session (`MovePlan::with_bound_session` is never
            // called), so the machine asks for neither.
            Effect::AbortSessionBinding | Effect::SendSessionRouteUpdate => Vec::new(),
            // Performed by the target with `DiscardTargetQueue`: its abort command drops the
            // Restore's assembly and hidden instance with the temporary queue
            // (`target/mod.rs`, `abort`).
            Effect::DiscardAssembly => Vec::new(),
            // Performed by the target inside the cutover request, whose reply reports the
            // outcome (`target/commit.rs`: NewOwner settled by reading until the Restore
            // deadline, then `location_update_failed` when not confirmed; the queues merged and
            // dispatch opened when it applied).
            Effect::RunNewOwnerCas(_)
            | Effect::RereadAndRetry(StoreWrite::NewOwner(_))
            | Effect::MergeQueuesAndOpenDispatch
            | Effect::RecordLocationUpdateFailed => Vec::new(),
            // Performed by `per_actor.rs` (`PerActorMove::move_member`) once this shell's
            // `run` returned.
            Effect::StartMemberMoves => Vec::new(),
        }
    }

    fn target_failed(&mut self, e: ZLinkError) -> Vec<Event> {
        self.fail(e);
        vec![Event::RestoreFailed {
            attempt: self.binding().attempt,
            reason: RestoreFailure::TargetFailed,
        }]
    }

    /// Secures the target capacity of every participant under `reservation`: a single object
    /// on an eligible target (the named one when given), an aggregate on the target its
    /// preflight chose, with the Spot's and every member type's capacity in one reservation.
    /// A reply lost in a way the engine could not settle (a store error) may have left the
    /// reservation row in the store with no copy here (spec 21 §10: never guessed): it is fed
    /// to the unit as a deadline, whose abort asks for the release, which finds the row by
    /// the move's ReservationId ([`release`](Self::release)).
    async fn secure(&mut self, reservation: ReservationId) -> Vec<Event> {
        let authority = self.client.objects.location.authority();
        let id = Some(reservation.get());
        let target = match &self.shape {
            Shape::Single { wanted, .. } => {
                match choose_target(self.client, &self.handle, wanted.as_ref()).await {
                    Ok(target) => target,
                    Err(e) => {
                        self.fail(e);
                        return vec![Event::TargetUnavailable];
                    }
                }
            }
            Shape::SpotWide(s) => s.chosen.clone(),
        };
        self.asked = Some(target.clone());
        let secured = match &self.shape {
            Shape::Single { .. } => {
                authority
                    .secure_target(&self.handle, target.clone(), id)
                    .await
            }
            Shape::SpotWide(_) => {
                let mut types: Vec<_> = self.parts[1..]
                    .iter()
                    .map(|p| p.stable_type.clone())
                    .collect();
                types.sort();
                types.dedup();
                let members = u32::try_from(self.parts.len() - 1).unwrap_or(u32::MAX);
                authority
                    .secure_spot_wide(&self.handle, &types, members, target.clone(), id)
                    .await
            }
        };
        match secured {
            Ok(Outcome::Applied(r)) => {
                self.to = Some(target.node.routing_id.clone());
                self.reservation = Some(r);
                vec![Event::TargetSecured { reservation }]
            }
            Ok(Outcome::Conflict(c)) => {
                tracing::info!(?c, "relocation target not secured");
                self.fail(StaleReason::TargetNotSecured.into());
                vec![Event::TargetUnavailable]
            }
            Err(e) if matches!(&e, LocationError::Store(se) if se.outcome_unknown()) => {
                tracing::info!(error = %e, "relocation target: the secure reply was lost");
                self.fail(store_failure(e));
                self.secure_lost = true;
                self.interrupt = true;
                vec![Event::Deadline]
            }
            Err(e) => {
                self.fail(store_failure(e));
                vec![Event::TargetUnavailable]
            }
        }
    }

    /// Writes a stage record (21 §9.1) as a reservation-carrying Preserve of the unit's
    /// record conditioned on the latest version of this move. A lost reply is settled by
    /// reading (the same write retried while it did not apply) until `storeFailureGrace`.
    async fn record(&mut self, record: StageRecord) -> Vec<Event> {
        let stage = record.stage();
        let Some(reservation) = self.reservation.clone() else {
            self.fail(invariant("a stage record before the target was secured"));
            self.interrupt = true;
            return vec![Event::CancelRequested];
        };
        let authority = self.client.objects.location.authority();
        let relocation = self.relocation();
        let deadline = self.deadline();
        let written = loop {
            let written =
                stage::write(authority, &self.handle, &reservation, relocation, &record).await;
            let Err(StageWriteError::Store(e)) = written else {
                break written;
            };
            // The outcome is unknown (spec 21 §10): settle it by reading the record and the
            // reservation row; retry the same write (same condition and reservation) only if
            // it did not apply; never guess.
            tracing::info!(error = %e, ?stage, "relocation stage record: no reply, re-reading");
            let settled = loop {
                let settled =
                    stage::settle(authority, &self.handle, relocation, &reservation, &record);
                match settled.await {
                    Settled::Unknown if Instant::now() < deadline => {
                        tokio::time::sleep(SETTLE_PAUSE).await;
                    }
                    settled => break settled,
                }
            };
            match settled {
                Settled::Applied(applied) => break Ok(Outcome::Applied(*applied)),
                Settled::Changed => {
                    break Ok(Outcome::Conflict(zlink_location::Conflict::Reservation));
                }
                Settled::NotApplied if Instant::now() < deadline => {
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
                self.client
                    .objects
                    .relocations()
                    .probe
                    .after_stage(stage)
                    .await;
                StageOutcome::Applied(version)
            }
            Ok(Outcome::Conflict(c)) => {
                tracing::info!(?c, ?stage, "relocation stage record conflicted: cancelling");
                self.fail(StaleReason::ChangedDuringMove.into());
                StageOutcome::Conflict
            }
            Err(StageWriteError::Store(e)) => {
                tracing::info!(error = %e, ?stage, "relocation stage record: not settled by the deadline");
                self.fail(store_failure(e));
                StageOutcome::ReplyLost
            }
            Err(e) => {
                self.fail(failed("stage record")(e));
                self.interrupt = true;
                return vec![Event::CancelRequested];
            }
        };
        vec![Event::StageRecorded { stage, outcome }]
    }

    /// How long a store write of this move whose outcome is unknown is settled and retried
    /// (`storeFailureGrace` from now).
    fn deadline(&self) -> Instant {
        Instant::now() + self.client.objects.location.options().store_failure_grace
    }
}
