//! The transition function: one [`Unit`] per move, one [`Unit::step`] per observed event.

use zlink_store_spi::StoreVersion;

use super::effect::{
    CaptureMode, Effect, NewOwnerCas, RestoreMode, RestoreRequest, StageRecord, StoreWrite,
};
use super::error::TransitionError;
use super::event::{CompletionTally, Event, EventKind, PayloadSummary, StageOutcome};
use super::kind::{MAX_STATE_LEN, Policy, UnitKind};
use super::plan::MovePlan;
use super::stage::{Awaiting, FailureReason, RecordedStage, Stage};

/// What the machine is doing; [`Stage`] and [`Awaiting`] are derived from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    Securing,
    Recording(RecordedStage),
    Capturing,
    Restoring,
    AwaitingRelayReady,
    AwaitingCutover,
    OwnerCas,
    Committed,
    Ended(Stage),
}

/// Whether the target capacity was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Capacity {
    NotRequested,
    Requested,
    Secured,
    Refused,
}

/// One relocation unit's state machine (architecture convention 12): the only owner of the
/// unit's stages and failure handling. Pure and synchronous: the runtime feeds it
/// [`Event`]s and performs the [`Effect`]s it returns, in order.
///
/// ```
/// use zlink_relocation::unit::*;
/// use zlink_store_spi::StoreVersion;
///
/// let plan = MovePlan::new(
///     Binding { relocation: RelocationId::random(), attempt: TargetAttemptGeneration::random() },
///     UnitKind::EntryMemberActor,
///     Policy::Disable,
///     ReservationId::random(),
///     StoreVersion::new("7")?,
///     TargetListChecksum::from_bytes([0; 32]),
/// );
/// let (unit, effects) = Unit::start(plan);
/// assert_eq!(effects, vec![Effect::Reject { reason: FailureReason::RelocationDisabled }]);
/// assert_eq!(unit.stage(), Stage::Failed(FailureReason::RelocationDisabled));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    plan: MovePlan,
    phase: Phase,
    latest: StoreVersion,
    payload: Option<PayloadSummary>,
    capacity: Capacity,
    sealed: bool,
    restore_sent: bool,
    relay_ready: bool,
    cutover_sent: bool,
    payload_dropped: bool,
    dispatch_open: bool,
    members_settled: bool,
    tally: CompletionTally,
}

impl Unit {
    /// Starts a move. A `DisableRelocation` unit is rejected at once (before capture, nothing
    /// written, 21 §1.3); any other unit first secures target capacity (21 §1.3 step 2).
    pub fn start(plan: MovePlan) -> (Unit, Vec<Effect>) {
        let mut unit = Unit {
            latest: plan.first_read.clone(),
            plan,
            phase: Phase::Securing,
            payload: None,
            capacity: Capacity::Requested,
            sealed: false,
            restore_sent: false,
            relay_ready: false,
            cutover_sent: false,
            payload_dropped: false,
            dispatch_open: false,
            members_settled: false,
            tally: CompletionTally::default(),
        };
        let effects = if unit.plan.policy == Policy::Disable {
            let reason = FailureReason::RelocationDisabled;
            unit.capacity = Capacity::NotRequested;
            unit.phase = Phase::Ended(Stage::Failed(reason));
            vec![Effect::Reject { reason }]
        } else {
            vec![Effect::SecureTarget {
                reservation: unit.plan.reservation,
            }]
        };
        tracing::debug!(
            relocation = %unit.plan.binding.relocation,
            kind = ?unit.plan.kind,
            policy = ?unit.plan.policy,
            stage = ?unit.stage(),
            "relocation unit started"
        );
        (unit, effects)
    }

    /// Feeds one observed event. On success the unit has moved and the returned effects must
    /// be performed in order; on error the unit is exactly as it was.
    pub fn step(&mut self, event: Event) -> Result<Vec<Effect>, TransitionError> {
        let kind = event.kind();
        let before = self.stage();
        let mut next = self.clone();
        match next.apply(event) {
            Ok(effects) => {
                *self = next;
                tracing::debug!(
                    relocation = %self.plan.binding.relocation,
                    event = ?kind,
                    from = ?before,
                    to = ?self.stage(),
                    effects = effects.len(),
                    "relocation unit transition"
                );
                Ok(effects)
            }
            Err(error) => {
                tracing::debug!(
                    relocation = %self.plan.binding.relocation,
                    event = ?kind,
                    stage = ?before,
                    %error,
                    "relocation unit refused an event"
                );
                Err(error)
            }
        }
    }

    /// The plan the unit runs.
    pub fn plan(&self) -> &MovePlan {
        &self.plan
    }

    /// The unit's stage.
    pub fn stage(&self) -> Stage {
        match self.phase {
            Phase::Securing
            | Phase::Recording(RecordedStage::Preparing)
            | Phase::Capturing
            | Phase::Recording(RecordedStage::Captured) => Stage::Preparing,
            Phase::Restoring | Phase::Recording(RecordedStage::Prepared) => Stage::Captured,
            Phase::AwaitingRelayReady | Phase::AwaitingCutover | Phase::OwnerCas => Stage::Prepared,
            Phase::Committed | Phase::Recording(RecordedStage::Completed) => Stage::Committed,
            Phase::Ended(stage) => stage,
        }
    }

    /// The event the unit waits for next.
    pub fn awaiting(&self) -> Awaiting {
        match self.phase {
            Phase::Securing => Awaiting::TargetSecured,
            Phase::Recording(stage) => Awaiting::StageRecord(stage),
            Phase::Capturing => Awaiting::Capture,
            Phase::Restoring => Awaiting::Restore,
            Phase::AwaitingRelayReady => Awaiting::RelayReady,
            Phase::AwaitingCutover => Awaiting::Cutover,
            Phase::OwnerCas => Awaiting::OwnerCas,
            Phase::Committed if !self.dispatch_open => Awaiting::Dispatch,
            Phase::Committed if !self.cutover_sent => Awaiting::CutoverSubmit,
            Phase::Committed if self.plan.kind.waits_for_members() && !self.members_settled => {
                Awaiting::Members
            }
            Phase::Committed => Awaiting::CompletionTally,
            Phase::Ended(_) => Awaiting::Nothing,
        }
    }

    /// Whether the relay-ready point has passed: from here on cancellation is refused and the
    /// source never reopens (21 §9.4).
    pub fn relay_ready(&self) -> bool {
        self.relay_ready
    }

    /// The version the next conditional write is conditioned on: the one the last applied
    /// write of this move returned (or the first-read version).
    pub fn latest_version(&self) -> &StoreVersion {
        &self.latest
    }

    /// The captured payload's summary, once captured.
    pub fn payload(&self) -> Option<PayloadSummary> {
        self.payload
    }

    /// The last completion tally.
    pub fn tally(&self) -> CompletionTally {
        self.tally
    }

    fn apply(&mut self, event: Event) -> Result<Vec<Effect>, TransitionError> {
        if let Phase::Ended(stage) = self.phase {
            return Err(TransitionError::Ended { stage });
        }
        if let Some(got) = event.attempt() {
            let expected = self.plan.binding.attempt;
            if got != expected {
                return Err(TransitionError::StaleAttempt { expected, got });
            }
        }
        let kind = event.kind();
        match event {
            Event::TargetSecured { reservation } => {
                self.expect(Phase::Securing, kind)?;
                if reservation != self.plan.reservation {
                    return Err(TransitionError::WrongReservation {
                        expected: self.plan.reservation,
                        got: reservation,
                    });
                }
                self.capacity = Capacity::Secured;
                Ok(vec![self.record(RecordedStage::Preparing)])
            }
            Event::TargetUnavailable => {
                self.expect(Phase::Securing, kind)?;
                self.capacity = Capacity::Refused;
                Ok(self.abort(Stage::Failed(FailureReason::TargetUnavailable)))
            }
            Event::StageRecorded { stage, outcome } => {
                self.expect(Phase::Recording(stage), kind)?;
                Ok(self.recorded(stage, outcome))
            }
            Event::Captured { state_len, payload } => {
                self.expect(Phase::Capturing, kind)?;
                match self.check_capture(state_len, payload)? {
                    Some(reason) => Ok(self.abort(Stage::Failed(reason))),
                    None => {
                        self.payload = Some(payload);
                        Ok(vec![self.record(RecordedStage::Captured)])
                    }
                }
            }
            Event::CaptureFailed => {
                self.expect(Phase::Capturing, kind)?;
                Ok(self.abort(Stage::Failed(FailureReason::CaptureFailed)))
            }
            Event::RestoreAccepted { .. } => {
                self.expect(Phase::Restoring, kind)?;
                Ok(vec![self.record(RecordedStage::Prepared)])
            }
            Event::RestoreFailed { reason, .. } => match self.phase {
                Phase::Restoring
                | Phase::Recording(RecordedStage::Prepared)
                | Phase::AwaitingRelayReady => {
                    Ok(self.abort(Stage::Failed(FailureReason::RestoreFailed(reason))))
                }
                _ => Err(self.out_of_order(kind)),
            },
            Event::RelayReady { .. } => {
                self.expect(Phase::AwaitingRelayReady, kind)?;
                self.relay_ready = true;
                self.phase = Phase::AwaitingCutover;
                Ok(vec![
                    Effect::RelayHeldWork,
                    Effect::SendCutover {
                        binding: self.plan.binding,
                    },
                ])
            }
            Event::CutoverSent => {
                if !self.relay_ready || self.cutover_sent {
                    return Err(self.out_of_order(kind));
                }
                self.cutover_sent = true;
                self.payload_dropped = true;
                let mut effects = vec![Effect::StartMessageFollow, Effect::DropCapturedPayload];
                effects.extend(self.maybe_complete());
                Ok(effects)
            }
            Event::CutoverReceived { .. } | Event::CutoverWaitElapsed { .. } => {
                self.expect(Phase::AwaitingCutover, kind)?;
                self.phase = Phase::OwnerCas;
                Ok(vec![Effect::RunNewOwnerCas(self.new_owner_cas())])
            }
            Event::CasApplied { version, .. } => {
                self.expect(Phase::OwnerCas, kind)?;
                self.latest = version;
                self.phase = Phase::Committed;
                let mut effects = vec![Effect::MergeQueuesAndOpenDispatch];
                if self.plan.bound_session {
                    effects.push(Effect::SendSessionRouteUpdate);
                }
                if self.plan.kind.waits_for_members() {
                    effects.push(Effect::StartMemberMoves);
                }
                Ok(effects)
            }
            Event::CasConflict { .. } => {
                self.expect(Phase::OwnerCas, kind)?;
                Ok(self.end_after_relay_ready(FailureReason::OwnerChangeConflict))
            }
            Event::StoreReplyLost { .. } => {
                self.expect(Phase::OwnerCas, kind)?;
                Ok(vec![Effect::RereadAndRetry(StoreWrite::NewOwner(
                    self.new_owner_cas(),
                ))])
            }
            Event::DispatchOpened { .. } => {
                if self.phase != Phase::Committed || self.dispatch_open {
                    return Err(self.out_of_order(kind));
                }
                self.dispatch_open = true;
                Ok(self.maybe_complete().into_iter().collect())
            }
            Event::CompletionTally(tally) => {
                self.expect(Phase::Committed, kind)?;
                if tally.stored > tally.accepted
                    || tally.accepted < self.tally.accepted
                    || tally.stored < self.tally.stored
                {
                    return Err(TransitionError::InvalidTally {
                        accepted: tally.accepted,
                        stored: tally.stored,
                    });
                }
                self.tally = tally;
                Ok(self.maybe_complete().into_iter().collect())
            }
            Event::MembersSettled => {
                if !self.plan.kind.waits_for_members() {
                    return Err(TransitionError::NotForKind {
                        event: kind,
                        kind: self.plan.kind,
                    });
                }
                if self.phase != Phase::Committed || self.members_settled {
                    return Err(self.out_of_order(kind));
                }
                self.members_settled = true;
                Ok(self.maybe_complete().into_iter().collect())
            }
            Event::Deadline => Ok(self.deadline()),
            Event::CancelRequested => {
                if self.relay_ready {
                    return Err(TransitionError::CancelAfterRelayReady);
                }
                Ok(self.abort(Stage::Cancelled))
            }
        }
    }

    fn expect(&self, phase: Phase, event: EventKind) -> Result<(), TransitionError> {
        if self.phase == phase {
            Ok(())
        } else {
            Err(self.out_of_order(event))
        }
    }

    fn out_of_order(&self, event: EventKind) -> TransitionError {
        TransitionError::OutOfOrder {
            event,
            awaiting: self.awaiting(),
        }
    }

    /// Whether the capture carries application state.
    fn carries_state(&self) -> bool {
        self.plan.policy == Policy::Preserve && self.plan.kind.restores_application_state()
    }

    /// Checks a capture against the policy (06 §17) and the bounds (28 §5). A bound exceeded
    /// is a failure of the move; impossible data is a refused event.
    fn check_capture(
        &self,
        state_len: Option<u64>,
        payload: PayloadSummary,
    ) -> Result<Option<FailureReason>, TransitionError> {
        match (self.carries_state(), state_len) {
            (true, None) => {
                return Err(TransitionError::MissingState {
                    kind: self.plan.kind,
                });
            }
            (false, Some(len)) => {
                return Err(TransitionError::UnexpectedState {
                    kind: self.plan.kind,
                    policy: self.plan.policy,
                    len,
                });
            }
            (true, Some(len)) => {
                if len > payload.total_len {
                    return Err(TransitionError::StateLongerThanPayload {
                        state_len: len,
                        total_len: payload.total_len,
                    });
                }
                if len > MAX_STATE_LEN {
                    return Ok(Some(FailureReason::StateTooLarge {
                        len,
                        max: MAX_STATE_LEN,
                    }));
                }
            }
            (false, None) => {}
        }
        if let Some(max) = self.plan.kind.payload_bound() {
            if payload.total_len > max {
                return Ok(Some(FailureReason::PayloadTooLarge {
                    len: payload.total_len,
                    max,
                }));
            }
        }
        Ok(None)
    }

    /// Asks for a stage record conditioned on the latest version.
    fn record(&mut self, stage: RecordedStage) -> Effect {
        self.phase = Phase::Recording(stage);
        Effect::RecordStage(self.stage_record(stage))
    }

    fn stage_record(&self, stage: RecordedStage) -> StageRecord {
        let condition = self.latest.clone();
        match stage {
            RecordedStage::Preparing => StageRecord::Preparing {
                target_list: self.plan.target_list,
                reservation: self.plan.reservation,
                condition,
            },
            RecordedStage::Captured => StageRecord::Captured {
                target_list: self.plan.target_list,
                reservation: self.plan.reservation,
                condition,
            },
            RecordedStage::Prepared => StageRecord::Prepared {
                binding: self.plan.binding,
                reservation: self.plan.reservation,
                condition,
            },
            RecordedStage::Completed => StageRecord::Completed {
                relocation: self.plan.binding.relocation,
                condition,
            },
        }
    }

    fn new_owner_cas(&self) -> NewOwnerCas {
        NewOwnerCas {
            binding: self.plan.binding,
            reservation: self.plan.reservation,
            condition: self.latest.clone(),
        }
    }

    /// The reply to a stage record (21 §9.1, §10).
    fn recorded(&mut self, stage: RecordedStage, outcome: StageOutcome) -> Vec<Effect> {
        match outcome {
            StageOutcome::Applied(version) => {
                self.latest = version;
                self.advance_after(stage)
            }
            StageOutcome::ReplyLost => vec![Effect::RereadAndRetry(StoreWrite::Stage(
                self.stage_record(stage),
            ))],
            StageOutcome::Conflict if stage == RecordedStage::Completed => {
                self.phase = Phase::Ended(Stage::Failed(FailureReason::CompletionConflict));
                Vec::new()
            }
            StageOutcome::Conflict => {
                self.abort(Stage::Failed(FailureReason::StageConflict { stage }))
            }
        }
    }

    fn advance_after(&mut self, stage: RecordedStage) -> Vec<Effect> {
        match stage {
            RecordedStage::Preparing => {
                self.sealed = true;
                self.phase = Phase::Capturing;
                let mode = if self.carries_state() {
                    CaptureMode::StateAndFrameworkWork
                } else {
                    CaptureMode::FrameworkWork
                };
                vec![Effect::SealSource, Effect::Capture { mode }]
            }
            RecordedStage::Captured => {
                self.phase = Phase::Restoring;
                self.restore_sent = true;
                let mode = match (self.plan.kind, self.plan.policy) {
                    (UnitKind::PerActorSpotShell, _) => RestoreMode::SpotShell,
                    (_, Policy::Preserve) => RestoreMode::Preserve,
                    _ => RestoreMode::Recreate,
                };
                // The payload is always present here: `Captured` is recorded only after a
                // capture was accepted.
                let payload = self.payload.unwrap_or(PayloadSummary {
                    total_len: 0,
                    chunk_count: 0,
                    crc32c: 0,
                });
                vec![Effect::SendRestore(RestoreRequest {
                    binding: self.plan.binding,
                    mode,
                    payload,
                    target_list: self.plan.target_list,
                })]
            }
            RecordedStage::Prepared => {
                self.phase = Phase::AwaitingRelayReady;
                vec![Effect::SendRelayReady {
                    binding: self.plan.binding,
                }]
            }
            RecordedStage::Completed => {
                self.phase = Phase::Ended(Stage::Completed);
                Vec::new()
            }
        }
    }

    /// Asks for the `Completed` record once the target dispatch is open, the source has
    /// submitted cutover, every accepted request's completion is stored and delivered
    /// (21 §9.1, §9.3) and, for a `PerActor` Spot, every member has settled (21 §8.1).
    fn maybe_complete(&mut self) -> Option<Effect> {
        let ready = self.phase == Phase::Committed
            && self.dispatch_open
            && self.cutover_sent
            && self.tally.is_settled()
            && (!self.plan.kind.waits_for_members() || self.members_settled);
        ready.then(|| self.record(RecordedStage::Completed))
    }

    /// The deadline: before the relay-ready point the unit aborts before the owner change
    /// (28 §5); between it and the owner change, ownership was not confirmed in time (21 §10);
    /// after the owner change the stage in progress finishes (no rollback, 28 §5).
    fn deadline(&mut self) -> Vec<Effect> {
        if !self.relay_ready {
            return self.abort(Stage::Failed(FailureReason::DeadlineExceeded));
        }
        match self.phase {
            Phase::AwaitingCutover | Phase::OwnerCas => {
                let mut effects = vec![Effect::RecordLocationUpdateFailed];
                effects.extend(self.end_after_relay_ready(FailureReason::LocationUpdateFailed));
                effects
            }
            _ => Vec::new(),
        }
    }

    /// Ends the move after the relay-ready point without an owner change: the prepared target
    /// is removed and never dispatches; the source does not reopen (21 §9.4, §10).
    fn end_after_relay_ready(&mut self, reason: FailureReason) -> Vec<Effect> {
        self.phase = Phase::Ended(Stage::Failed(reason));
        let mut effects = vec![Effect::RemovePreparedTarget];
        if !self.payload_dropped {
            self.payload_dropped = true;
            effects.push(Effect::DropCapturedPayload);
        }
        effects
    }

    /// Ends the move before the relay-ready point, in the order of 21 §9.4: discard the
    /// target's temporary queue unrun and return the source's held work in order; abort the
    /// bound Session one-way; release the target capacity and the chunk assembly; forget the
    /// progress without touching the Location Store; reopen the source last.
    fn abort(&mut self, end: Stage) -> Vec<Effect> {
        let mut effects = Vec::new();
        if self.restore_sent {
            effects.push(Effect::DiscardTargetQueue);
        }
        if self.sealed {
            effects.push(Effect::RestoreHeldWorkInOrder);
            if self.plan.bound_session {
                effects.push(Effect::AbortSessionBinding);
            }
        }
        if matches!(self.capacity, Capacity::Requested | Capacity::Secured) {
            effects.push(Effect::ReleaseTarget {
                reservation: self.plan.reservation,
            });
        }
        if self.restore_sent {
            effects.push(Effect::DiscardAssembly);
        }
        effects.push(Effect::DiscardProgress);
        if self.sealed {
            effects.push(Effect::ReopenSource);
        }
        self.payload_dropped = true;
        self.phase = Phase::Ended(end);
        effects
    }
}
