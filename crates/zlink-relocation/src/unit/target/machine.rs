//! The target's transition function: one [`TargetUnit`] per Restore that arrives, one
//! [`TargetUnit::step`] per observed event.

use zlink_store_spi::StoreVersion;

use super::super::effect::{NewOwnerCas, StageRecord, StoreWrite};
use super::super::event::{CompletionTally, StageOutcome};
use super::super::stage::RestoreFailure;
use super::types::{
    TargetAwaiting, TargetEffect, TargetError, TargetEvent, TargetEventKind, TargetPlan,
    TargetStage,
};

/// What the target is doing; [`TargetStage`] is derived from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    Receiving,
    Building,
    Prepared,
    AwaitingCutover,
    OwnerCas,
    Committed,
    RecordingCompleted,
    Ended(TargetStage),
}

/// The target side of one relocation unit (spec 21 §1.3 steps 5–7, §8.2, §9.1, §9.2, §9.4,
/// §10): pure and synchronous like the source's [`Unit`](super::super::Unit). The runtime
/// feeds it what it observed ([`TargetEvent`]; deadlines and timers are events, it reads no
/// clock) and performs the [`TargetEffect`]s it returns, in order.
///
/// ```
/// use zlink_relocation::unit::*;
/// use zlink_store_spi::StoreVersion;
///
/// let binding = Binding {
///     relocation: RelocationId::random(),
///     attempt: TargetAttemptGeneration::random(),
/// };
/// let payload = PayloadSummary { total_len: 10, chunk_count: 1, crc32c: 7 };
/// let plan = TargetPlan {
///     binding,
///     reservation: ReservationId::random(),
///     payload,
///     target_list: TargetListChecksum::from_bytes([0; 32]),
///     mode: RestoreMode::Recreate,
///     bound_session: false,
/// };
/// let (mut unit, effects) = TargetUnit::start(plan);
/// assert_eq!(effects, vec![TargetEffect::RegisterTemporaryQueue]);
/// let wrong = PayloadSummary { crc32c: 8, ..payload };
/// let effects = unit.step(TargetEvent::PayloadAssembled { payload: wrong })?;
/// assert_eq!(effects[0], TargetEffect::RefuseRestore { reason: RestoreFailure::ChecksumMismatch });
/// assert_eq!(unit.stage(), TargetStage::Refused(RestoreFailure::ChecksumMismatch));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetUnit {
    plan: TargetPlan,
    phase: Phase,
    /// The `Prepared` record's version (the CAS's condition), then the CAS's.
    latest: Option<StoreVersion>,
    dispatch_open: bool,
    tally: Option<CompletionTally>,
}

impl TargetUnit {
    /// A Restore header arrived: the temporary queue is registered first (21 §1.3 step 5).
    pub fn start(plan: TargetPlan) -> (TargetUnit, Vec<TargetEffect>) {
        let unit = TargetUnit {
            plan,
            phase: Phase::Receiving,
            latest: None,
            dispatch_open: false,
            tally: None,
        };
        tracing::debug!(
            relocation = %unit.plan.binding.relocation,
            mode = ?unit.plan.mode,
            "relocation target unit started"
        );
        (unit, vec![TargetEffect::RegisterTemporaryQueue])
    }

    /// Feeds one observed event. On success the unit has moved and the returned effects must
    /// be performed in order; on error the unit is exactly as it was.
    pub fn step(&mut self, event: TargetEvent) -> Result<Vec<TargetEffect>, TargetError> {
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
                    "relocation target transition"
                );
                Ok(effects)
            }
            Err(error) => {
                tracing::debug!(
                    relocation = %self.plan.binding.relocation,
                    event = ?kind,
                    stage = ?before,
                    %error,
                    "relocation target refused an event"
                );
                Err(error)
            }
        }
    }

    /// The plan the Restore fixed.
    pub fn plan(&self) -> &TargetPlan {
        &self.plan
    }

    /// Where the Restore is.
    pub fn stage(&self) -> TargetStage {
        match self.phase {
            Phase::Receiving => TargetStage::Receiving,
            Phase::Building => TargetStage::Building,
            Phase::Prepared => TargetStage::Prepared,
            Phase::AwaitingCutover | Phase::OwnerCas => TargetStage::RelayReady,
            Phase::Committed | Phase::RecordingCompleted => TargetStage::Committed,
            Phase::Ended(stage) => stage,
        }
    }

    /// The event the unit waits for next.
    pub fn awaiting(&self) -> TargetAwaiting {
        match self.phase {
            Phase::Receiving => TargetAwaiting::Payload,
            Phase::Building => TargetAwaiting::Build,
            Phase::Prepared => TargetAwaiting::Ready,
            Phase::AwaitingCutover => TargetAwaiting::Cutover,
            Phase::OwnerCas => TargetAwaiting::OwnerCas,
            Phase::Committed if !self.dispatch_open => TargetAwaiting::Dispatch,
            Phase::Committed => TargetAwaiting::CompletionTally,
            Phase::RecordingCompleted => TargetAwaiting::CompletedRecord,
            Phase::Ended(_) => TargetAwaiting::Nothing,
        }
    }

    /// Whether the relay-ready reply was sent (and the unit has not ended).
    pub fn relay_ready(&self) -> bool {
        matches!(self.phase, Phase::AwaitingCutover | Phase::OwnerCas)
    }

    /// Whether the owner-change CAS is in flight (sent, or being re-read and retried).
    pub fn cas_in_flight(&self) -> bool {
        self.phase == Phase::OwnerCas
    }

    /// The last completion tally reported after the owner change.
    pub fn tally(&self) -> Option<CompletionTally> {
        self.tally
    }

    /// The version the next conditional write is conditioned on, once the source's ready
    /// named it.
    pub fn latest_version(&self) -> Option<&StoreVersion> {
        self.latest.as_ref()
    }

    fn apply(&mut self, event: TargetEvent) -> Result<Vec<TargetEffect>, TargetError> {
        if let Phase::Ended(stage) = self.phase {
            return Err(TargetError::Ended { stage });
        }
        if let Some(got) = event.attempt() {
            let expected = self.plan.binding.attempt;
            if got != expected {
                return Err(TargetError::StaleAttempt { expected, got });
            }
        }
        let kind = event.kind();
        match event {
            TargetEvent::RestoreRepeated { payload, .. } => match self.phase {
                // 21 §9.1: the same declaration reuses the assembly; another ends it as an
                // explicit conflict, neither reused nor overwritten.
                Phase::Receiving | Phase::Building if payload != self.plan.payload => {
                    Ok(self.refuse(RestoreFailure::BindingConflict))
                }
                Phase::Receiving | Phase::Building | Phase::Prepared
                    if payload == self.plan.payload =>
                {
                    Ok(Vec::new())
                }
                _ => Err(self.out_of_order(kind)),
            },
            TargetEvent::PayloadAssembled { payload } => {
                self.expect(Phase::Receiving, kind)?;
                if payload != self.plan.payload {
                    // Never restored from a payload that does not match its declaration.
                    return Ok(self.refuse(RestoreFailure::ChecksumMismatch));
                }
                self.phase = Phase::Building;
                Ok(vec![TargetEffect::BuildHidden {
                    mode: self.plan.mode,
                }])
            }
            TargetEvent::Built => {
                self.expect(Phase::Building, kind)?;
                self.phase = Phase::Prepared;
                Ok(vec![TargetEffect::AcceptRestore])
            }
            TargetEvent::BuildFailed { reason } => {
                self.expect(Phase::Building, kind)?;
                Ok(self.refuse(reason))
            }
            TargetEvent::ReadyReceived { prepared, .. } => match self.phase {
                Phase::Prepared => {
                    self.latest = Some(prepared);
                    self.phase = Phase::AwaitingCutover;
                    Ok(vec![
                        TargetEffect::SendRelayReady {
                            binding: self.plan.binding,
                        },
                        TargetEffect::StartCutoverWait,
                    ])
                }
                // A repeated ready is answered the same; the wait is not restarted.
                Phase::AwaitingCutover | Phase::OwnerCas
                    if self.latest.as_ref() == Some(&prepared) =>
                {
                    Ok(vec![TargetEffect::SendRelayReady {
                        binding: self.plan.binding,
                    }])
                }
                _ => Err(self.out_of_order(kind)),
            },
            TargetEvent::CutoverReceived { .. } | TargetEvent::CutoverWaitElapsed => {
                match self.phase {
                    Phase::AwaitingCutover => {
                        self.phase = Phase::OwnerCas;
                        Ok(vec![TargetEffect::RunNewOwnerCas(
                            self.new_owner_cas(kind)?,
                        )])
                    }
                    // The CAS runs once: the other trigger, or a repeat, changes nothing.
                    Phase::OwnerCas | Phase::Committed | Phase::RecordingCompleted => {
                        Ok(Vec::new())
                    }
                    _ => Err(self.out_of_order(kind)),
                }
            }
            TargetEvent::CasApplied { version } => {
                self.expect(Phase::OwnerCas, kind)?;
                self.latest = Some(version);
                self.phase = Phase::Committed;
                let mut effects = vec![TargetEffect::MergeQueuesAndOpenDispatch];
                if self.plan.bound_session {
                    effects.push(TargetEffect::SendSessionRouteUpdate);
                }
                Ok(effects)
            }
            TargetEvent::CasConflict => {
                self.expect(Phase::OwnerCas, kind)?;
                Ok(self.remove(TargetStage::OwnerChangeConflict))
            }
            TargetEvent::CasReplyLost => {
                self.expect(Phase::OwnerCas, kind)?;
                Ok(vec![TargetEffect::RereadAndRetry(StoreWrite::NewOwner(
                    self.new_owner_cas(kind)?,
                ))])
            }
            TargetEvent::DispatchOpened => {
                if self.phase != Phase::Committed || self.dispatch_open {
                    return Err(self.out_of_order(kind));
                }
                self.dispatch_open = true;
                self.maybe_complete(kind)
            }
            TargetEvent::CompletionTally(tally) => {
                self.expect(Phase::Committed, kind)?;
                let before = self.tally.unwrap_or_default();
                if tally.stored > tally.accepted
                    || tally.accepted < before.accepted
                    || tally.stored < before.stored
                {
                    return Err(TargetError::InvalidTally {
                        accepted: tally.accepted,
                        stored: tally.stored,
                    });
                }
                self.tally = Some(tally);
                self.maybe_complete(kind)
            }
            TargetEvent::CompletedRecorded(outcome) => {
                self.expect(Phase::RecordingCompleted, kind)?;
                Ok(match outcome {
                    StageOutcome::Applied(version) => {
                        self.latest = Some(version);
                        self.phase = Phase::Ended(TargetStage::Completed);
                        Vec::new()
                    }
                    StageOutcome::Conflict => {
                        self.phase = Phase::Ended(TargetStage::CompletionConflict);
                        Vec::new()
                    }
                    StageOutcome::ReplyLost => vec![TargetEffect::RereadAndRetry(
                        StoreWrite::Stage(self.completed_record(kind)?),
                    )],
                })
            }
            TargetEvent::AbortReceived { .. } => match self.phase {
                // 21 §9.4: the source cancelled before it accepted relay-ready.
                Phase::Receiving | Phase::Building | Phase::Prepared | Phase::AwaitingCutover => {
                    Ok(self.discard(TargetStage::Aborted, false))
                }
                // The source's release of the reservation fences the CAS in flight: its
                // outcome decides.
                Phase::OwnerCas => Ok(Vec::new()),
                _ => Err(self.out_of_order(kind)),
            },
            TargetEvent::SourceGone => match self.phase {
                Phase::Receiving | Phase::Building | Phase::Prepared => {
                    Ok(self.discard(TargetStage::Abandoned, true))
                }
                // After relay-ready the cutover wait runs the CAS without the source
                // (21 §1.3 step 6); after the owner change nothing depends on it.
                Phase::AwaitingCutover
                | Phase::OwnerCas
                | Phase::Committed
                | Phase::RecordingCompleted => Ok(Vec::new()),
                Phase::Ended(_) => Err(self.out_of_order(kind)),
            },
            TargetEvent::DeadlinePassed => match self.phase {
                Phase::Receiving | Phase::Building | Phase::Prepared => {
                    Ok(self.discard(TargetStage::Abandoned, true))
                }
                // 21 §10: ownership not confirmed before the Restore's absolute deadline.
                Phase::AwaitingCutover | Phase::OwnerCas => {
                    let mut effects = vec![TargetEffect::RecordLocationUpdateFailed];
                    effects.extend(self.remove(TargetStage::LocationUpdateFailed));
                    Ok(effects)
                }
                // After the owner change there is no rollback (28 §5).
                Phase::Committed | Phase::RecordingCompleted => Ok(Vec::new()),
                Phase::Ended(_) => Err(self.out_of_order(kind)),
            },
        }
    }

    fn expect(&self, phase: Phase, event: TargetEventKind) -> Result<(), TargetError> {
        if self.phase == phase {
            Ok(())
        } else {
            Err(self.out_of_order(event))
        }
    }

    fn out_of_order(&self, event: TargetEventKind) -> TargetError {
        TargetError::OutOfOrder {
            event,
            stage: self.stage(),
        }
    }

    /// The version the next write is conditioned on. Always known from the ready on: no
    /// write is asked for before it (a missing one refuses the event).
    fn condition(&self, event: TargetEventKind) -> Result<StoreVersion, TargetError> {
        self.latest.clone().ok_or_else(|| self.out_of_order(event))
    }

    fn new_owner_cas(&self, event: TargetEventKind) -> Result<NewOwnerCas, TargetError> {
        Ok(NewOwnerCas {
            binding: self.plan.binding,
            reservation: self.plan.reservation,
            condition: self.condition(event)?,
        })
    }

    fn completed_record(&self, event: TargetEventKind) -> Result<StageRecord, TargetError> {
        Ok(StageRecord::Completed {
            relocation: self.plan.binding.relocation,
            condition: self.condition(event)?,
        })
    }

    /// Asks for the `Completed` record once dispatch is open and a completion tally with
    /// every accepted request stored and nothing pending was reported (21 §9.1, §9.3).
    fn maybe_complete(&mut self, event: TargetEventKind) -> Result<Vec<TargetEffect>, TargetError> {
        let settled = self.tally.is_some_and(|t| t.is_settled());
        if self.phase == Phase::Committed && self.dispatch_open && settled {
            let record = self.completed_record(event)?;
            self.phase = Phase::RecordingCompleted;
            Ok(vec![TargetEffect::RecordCompleted(record)])
        } else {
            Ok(Vec::new())
        }
    }

    /// An explicit failure before relay-ready (21 §9.1): the source is answered, the
    /// temporary queue and the assembly go unrun. The source's abort cleanup releases the
    /// reservation (21 §9.4 step 4).
    fn refuse(&mut self, reason: RestoreFailure) -> Vec<TargetEffect> {
        let mut effects = vec![TargetEffect::RefuseRestore { reason }];
        effects.extend(self.discard(TargetStage::Refused(reason), false));
        effects
    }

    /// Ends the Restore before any owner change: the temporary queue and the assembly (and
    /// any hidden instance) go unrun; `release`: the source will not release the reservation
    /// (it is gone or past its deadline), so this target does.
    fn discard(&mut self, end: TargetStage, release: bool) -> Vec<TargetEffect> {
        self.phase = Phase::Ended(end);
        let mut effects = vec![
            TargetEffect::DiscardTemporaryQueue,
            TargetEffect::DiscardAssembly,
        ];
        if release {
            effects.push(TargetEffect::ReleaseReservation {
                reservation: self.plan.reservation,
            });
        }
        effects
    }

    /// Ends the Restore after relay-ready without an owner change: the prepared target is
    /// removed, dispatch never opens, no Session update is sent (21 §9.4, §10); its
    /// reservation is released as the row stands (a consumed one releases nothing).
    fn remove(&mut self, end: TargetStage) -> Vec<TargetEffect> {
        self.phase = Phase::Ended(end);
        vec![
            TargetEffect::RemovePreparedTarget,
            TargetEffect::ReleaseReservation {
                reservation: self.plan.reservation,
            },
        ]
    }
}
