//! The target machine's plan, events, effects, stages and refusals.

use zlink_store_spi::StoreVersion;

use super::super::effect::{Binding, RestoreMode, StageRecord, StoreWrite, TargetListChecksum};
use super::super::event::{CompletionTally, PayloadSummary, StageOutcome};
use super::super::ids::{ReservationId, TargetAttemptGeneration};
use super::super::stage::RestoreFailure;

/// What a Restore header fixes on the target when it arrives (21 §9.1): the binding every
/// chunk, the ready, the cutover and the owner-change CAS must carry, the reservation the
/// source secured on this target, the declared payload, the target list checksum to verify and
/// what to build.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TargetPlan {
    /// The move and target attempt.
    pub binding: Binding,
    /// The reservation the source secured on this target (21 §8.1).
    pub reservation: ReservationId,
    /// The declared total length, chunk count and CRC-32C.
    pub payload: PayloadSummary,
    /// The target list checksum the Restore carries.
    pub target_list: TargetListChecksum,
    /// What the target builds.
    pub mode: RestoreMode,
    /// Whether a Session is bound to the unit (its route update is sent once dispatch opens).
    pub bound_session: bool,
}

/// One observation the runtime feeds to a [`TargetUnit`](super::TargetUnit). Events the
/// source sends carry the target attempt they belong to; another attempt's is refused and
/// changes nothing (21 §8.2, §9.1).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TargetEvent {
    /// The same Restore header arrived again (a retransmission).
    RestoreRepeated {
        /// The attempt the header names.
        attempt: TargetAttemptGeneration,
        /// What it declares.
        payload: PayloadSummary,
    },
    /// Every chunk arrived; the assembled payload has this length, chunk count and CRC-32C.
    PayloadAssembled {
        /// What was assembled.
        payload: PayloadSummary,
    },
    /// The hidden instance(s) were built and restored, the target list verified.
    Built,
    /// Building failed (factory, adapter Restore, target list, admission).
    BuildFailed {
        /// Why.
        reason: RestoreFailure,
    },
    /// The source recorded `Prepared` and asks for relay-ready.
    ReadyReceived {
        /// The attempt the command names.
        attempt: TargetAttemptGeneration,
        /// The version the `Prepared` record returned: the owner-change CAS's condition.
        prepared: StoreVersion,
    },
    /// The source's cutover arrived.
    CutoverReceived {
        /// The attempt the cutover names.
        attempt: TargetAttemptGeneration,
    },
    /// The 1,000 ms cutover wait after the relay-ready reply elapsed.
    CutoverWaitElapsed,
    /// The owner-change CAS applied (directly, or a re-read found this target as owner).
    CasApplied {
        /// The record's version after the change.
        version: StoreVersion,
    },
    /// The CAS condition failed, or a re-read found another valid owner or generation.
    CasConflict,
    /// No reply to the owner-change CAS (or its re-read) arrived: the outcome is unknown.
    CasReplyLost,
    /// The queues merged, the required lifecycle ran and dispatch opened.
    DispatchOpened,
    /// Current completion-record counts (21 §9.3). Counts only grow.
    CompletionTally(CompletionTally),
    /// The reply to the `Completed` record.
    CompletedRecorded(StageOutcome),
    /// The source aborted the move (before it accepted the relay-ready reply).
    AbortReceived {
        /// The attempt the abort names.
        attempt: TargetAttemptGeneration,
    },
    /// The source's owner lease ended, or it sent neither ready nor abort within the wait.
    SourceGone,
    /// The Restore's absolute deadline passed.
    DeadlinePassed,
}

/// The variant of a [`TargetEvent`], without its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[allow(missing_docs)] // One-to-one with `TargetEvent`'s variants.
pub enum TargetEventKind {
    RestoreRepeated,
    PayloadAssembled,
    Built,
    BuildFailed,
    ReadyReceived,
    CutoverReceived,
    CutoverWaitElapsed,
    CasApplied,
    CasConflict,
    CasReplyLost,
    DispatchOpened,
    CompletionTally,
    CompletedRecorded,
    AbortReceived,
    SourceGone,
    DeadlinePassed,
}

impl TargetEvent {
    /// The variant, without its data.
    pub fn kind(&self) -> TargetEventKind {
        match self {
            TargetEvent::RestoreRepeated { .. } => TargetEventKind::RestoreRepeated,
            TargetEvent::PayloadAssembled { .. } => TargetEventKind::PayloadAssembled,
            TargetEvent::Built => TargetEventKind::Built,
            TargetEvent::BuildFailed { .. } => TargetEventKind::BuildFailed,
            TargetEvent::ReadyReceived { .. } => TargetEventKind::ReadyReceived,
            TargetEvent::CutoverReceived { .. } => TargetEventKind::CutoverReceived,
            TargetEvent::CutoverWaitElapsed => TargetEventKind::CutoverWaitElapsed,
            TargetEvent::CasApplied { .. } => TargetEventKind::CasApplied,
            TargetEvent::CasConflict => TargetEventKind::CasConflict,
            TargetEvent::CasReplyLost => TargetEventKind::CasReplyLost,
            TargetEvent::DispatchOpened => TargetEventKind::DispatchOpened,
            TargetEvent::CompletionTally(_) => TargetEventKind::CompletionTally,
            TargetEvent::CompletedRecorded(_) => TargetEventKind::CompletedRecorded,
            TargetEvent::AbortReceived { .. } => TargetEventKind::AbortReceived,
            TargetEvent::SourceGone => TargetEventKind::SourceGone,
            TargetEvent::DeadlinePassed => TargetEventKind::DeadlinePassed,
        }
    }

    /// The target attempt an event from the source names, if it names one.
    pub fn attempt(&self) -> Option<TargetAttemptGeneration> {
        match self {
            TargetEvent::RestoreRepeated { attempt, .. }
            | TargetEvent::ReadyReceived { attempt, .. }
            | TargetEvent::CutoverReceived { attempt }
            | TargetEvent::AbortReceived { attempt } => Some(*attempt),
            TargetEvent::PayloadAssembled { .. }
            | TargetEvent::Built
            | TargetEvent::BuildFailed { .. }
            | TargetEvent::CutoverWaitElapsed
            | TargetEvent::CasApplied { .. }
            | TargetEvent::CasConflict
            | TargetEvent::CasReplyLost
            | TargetEvent::DispatchOpened
            | TargetEvent::CompletionTally(_)
            | TargetEvent::CompletedRecorded(_)
            | TargetEvent::SourceGone
            | TargetEvent::DeadlinePassed => None,
        }
    }
}

/// One thing the target runtime must do. Deliberately not `#[non_exhaustive]`: every performer
/// matches it exhaustively (no `_` arm), so a new effect is a compile error wherever it is
/// not yet performed (issue #39).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TargetEffect {
    /// Register the relocation temporary queue: early messages wait there, unrun (21 §1.3
    /// step 5, §9.2).
    RegisterTemporaryQueue,
    /// Build the unit hidden (not live, not dispatching) from the assembled payload: the
    /// factory, the adapter's Restore under `Preserve`, the target list verified.
    BuildHidden {
        /// What to build.
        mode: RestoreMode,
    },
    /// Answer the source: the Restore is accepted (assembled, verified, built).
    AcceptRestore,
    /// Answer the source with an explicit failure before relay-ready (21 §9.1).
    RefuseRestore {
        /// Why.
        reason: RestoreFailure,
    },
    /// Reply relay-ready to the source.
    SendRelayReady {
        /// The move and target attempt.
        binding: Binding,
    },
    /// Start the 1,000 ms wait for the cutover; its end is
    /// [`TargetEvent::CutoverWaitElapsed`].
    StartCutoverWait,
    /// Run the owner-change CAS (NewOwner), conditioned on the `Prepared` record's version.
    RunNewOwnerCas(super::super::effect::NewOwnerCas),
    /// Re-read the same key and, only if needed, retry the same write with the same
    /// condition, reservation and binding (21 §10).
    RereadAndRetry(StoreWrite),
    /// Saved work, pre-cutover relay and remaining temporary work enter the real queue in
    /// order; the regular route is installed with dispatch closed; the required lifecycle
    /// runs; then dispatch opens (21 §1.3 step 7). Only after a confirmed owner change.
    MergeQueuesAndOpenDispatch,
    /// Send the bound Session's route update (command 44), one-way.
    SendSessionRouteUpdate,
    /// Write the `Completed` record (21 §9.1, §9.3).
    RecordCompleted(StageRecord),
    /// Drop the temporary queue without running any of it (queued requests are answered
    /// `Unavailable`).
    DiscardTemporaryQueue,
    /// Drop the chunk assembly and any hidden instance, closed without running a message.
    DiscardAssembly,
    /// Remove the prepared object, its temporary queue and the move's state here; dispatch
    /// never opens, no Session update is sent (21 §9.4, §10).
    RemovePreparedTarget,
    /// Record `location_update_failed` (21 §10).
    RecordLocationUpdateFailed,
    /// Release this target's reservation as its row stands now (conditioned on the row as
    /// read): a move that will not complete here strands no capacity.
    ReleaseReservation {
        /// The reservation.
        reservation: ReservationId,
    },
}

impl TargetEffect {
    /// Whether the effect opens the activation to application work.
    pub fn opens_dispatch(&self) -> bool {
        matches!(self, TargetEffect::MergeQueuesAndOpenDispatch)
    }
}

/// Where a Restore is on the target. The first five are live; the rest are terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TargetStage {
    /// The header arrived, the temporary queue is registered, chunks are assembling.
    Receiving,
    /// The payload assembled and matched its declaration; the unit is being built hidden.
    Building,
    /// Built hidden and accepted; waiting for the source's ready.
    Prepared,
    /// Relay-ready was answered; waiting for the cutover or the cutover wait, then the
    /// owner-change CAS until it is confirmed or the Restore deadline passes.
    RelayReady,
    /// The owner change is confirmed: this node owns the unit (no rollback).
    Committed,
    /// The `Completed` record was written (terminal).
    Completed,
    /// The target answered an explicit failure before relay-ready (terminal).
    Refused(RestoreFailure),
    /// The source aborted before relay-ready (terminal).
    Aborted,
    /// The source went away before its ready, or the Restore deadline passed first (terminal).
    Abandoned,
    /// The owner-change CAS met another owner or generation: the prepared target is removed
    /// (terminal).
    OwnerChangeConflict,
    /// Ownership was not confirmed before the Restore deadline: `location_update_failed`
    /// (terminal).
    LocationUpdateFailed,
    /// The `Completed` record's condition no longer held; this node stays owner (terminal).
    CompletionConflict,
}

impl TargetStage {
    /// Whether the Restore has ended here.
    pub fn is_terminal(self) -> bool {
        !matches!(
            self,
            TargetStage::Receiving
                | TargetStage::Building
                | TargetStage::Prepared
                | TargetStage::RelayReady
                | TargetStage::Committed
        )
    }

    /// Whether this node owns the unit in this stage.
    pub fn owns(self) -> bool {
        matches!(
            self,
            TargetStage::Committed | TargetStage::Completed | TargetStage::CompletionConflict
        )
    }

    /// Position in the forward order; all terminal stages share the last.
    pub fn rank(self) -> u8 {
        match self {
            TargetStage::Receiving => 0,
            TargetStage::Building => 1,
            TargetStage::Prepared => 2,
            TargetStage::RelayReady => 3,
            TargetStage::Committed => 4,
            _ => 5,
        }
    }
}

/// What a [`TargetUnit`](super::TargetUnit) waits for next (other events may be valid too:
/// an abort, the source going away, the deadline).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TargetAwaiting {
    /// The rest of the chunks.
    Payload,
    /// The hidden build's result.
    Build,
    /// The source's ready.
    Ready,
    /// The cutover, or the end of the cutover wait.
    Cutover,
    /// The owner-change CAS's result.
    OwnerCas,
    /// Dispatch opening after the merge.
    Dispatch,
    /// A completion tally with every accepted request stored and nothing pending.
    CompletionTally,
    /// The reply to the `Completed` record.
    CompletedRecord,
    /// Nothing: the Restore ended here.
    Nothing,
}

/// An event the target machine refused; the unit is exactly as it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TargetError {
    /// The Restore already ended here; a terminal stage never changes (21 §10: a late Store
    /// reply for a terminal move does not reactivate the object).
    #[error("the Restore already ended as {stage:?}")]
    Ended {
        /// The terminal stage.
        stage: TargetStage,
    },
    /// The event does not fit the current stage.
    #[error("{event:?} is not expected in {stage:?}")]
    OutOfOrder {
        /// The refused event.
        event: TargetEventKind,
        /// The current stage.
        stage: TargetStage,
    },
    /// The event belongs to another target attempt (21 §8.2, §9.1).
    #[error("event from {got:?}, but this Restore's attempt is {expected:?}")]
    StaleAttempt {
        /// This Restore's attempt.
        expected: TargetAttemptGeneration,
        /// The attempt the event named.
        got: TargetAttemptGeneration,
    },
    /// A completion tally with more stored results than accepted requests, or a count lower
    /// than before.
    #[error("impossible completion tally: {accepted} accepted, {stored} stored")]
    InvalidTally {
        /// Accepted requests.
        accepted: u64,
        /// Stored results.
        stored: u64,
    },
}

/// What kind of [`TargetError`] it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TargetErrorKind {
    /// The Restore already ended.
    Ended,
    /// The event came at the wrong time.
    OutOfOrder,
    /// The event names another attempt.
    StaleBinding,
    /// The event's data is impossible.
    InvalidInput,
}

impl TargetError {
    /// What kind of error it is.
    pub fn kind(&self) -> TargetErrorKind {
        match self {
            TargetError::Ended { .. } => TargetErrorKind::Ended,
            TargetError::OutOfOrder { .. } => TargetErrorKind::OutOfOrder,
            TargetError::StaleAttempt { .. } => TargetErrorKind::StaleBinding,
            TargetError::InvalidTally { .. } => TargetErrorKind::InvalidInput,
        }
    }
}
