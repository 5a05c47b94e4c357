//! What the runtime observed: the inputs of [`Unit::step`](super::Unit::step).

use zlink_store_spi::StoreVersion;

use super::ids::{ReservationId, TargetAttemptGeneration};
use super::stage::{RecordedStage, RestoreFailure};

/// What the source captured and will send (21 §9.1: the Restore request declares the total
/// length, chunk count and CRC-32C; the transfer layer computes them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PayloadSummary {
    /// The whole payload's length in bytes (state, queue, timers, framing).
    pub total_len: u64,
    /// How many chunks the payload is sent as.
    pub chunk_count: u32,
    /// CRC-32C of the whole payload.
    pub crc32c: u32,
}

/// The counts that decide whether `Completed` may be recorded (21 §9.3): every accepted
/// request has a stored completion result and no delivery is pending. Counts only grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CompletionTally {
    /// Requests accepted before the move that finish after it.
    pub accepted: u64,
    /// Completion results stored for them.
    pub stored: u64,
    /// Completion results not yet delivered through the previous owner.
    pub pending_deliveries: u64,
}

impl CompletionTally {
    /// Whether `Completed` may be recorded: `accepted == stored` and nothing pending.
    pub fn is_settled(&self) -> bool {
        self.accepted == self.stored && self.pending_deliveries == 0
    }
}

/// The result of a conditional stage record (a reservation-carrying Preserve CAS).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StageOutcome {
    /// The record was applied; the next conditional write is conditioned on this version.
    Applied(StoreVersion),
    /// The condition no longer held; nothing changed.
    Conflict,
    /// No reply arrived (time-out, cancellation or provider error after the request
    /// started): whether the Store changed is unknown (21 §10).
    ReplyLost,
}

/// One observation the runtime feeds to the machine. Events that come from the target carry
/// the target attempt they belong to; an event from another attempt is refused (21 §8.2: a
/// previous target attempt can change nothing).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Event {
    /// The Location Store secured target capacity under the move's reservation id.
    TargetSecured {
        /// The reservation the reply is for.
        reservation: ReservationId,
    },
    /// Target capacity could not be secured (expired target, no space, conflict).
    TargetUnavailable,
    /// The reply to a stage record.
    StageRecorded {
        /// Which record.
        stage: RecordedStage,
        /// What the Store answered.
        outcome: StageOutcome,
    },
    /// The source finished its current turn and captured the unit.
    Captured {
        /// The adapter's state length, present only under `PreserveStateWith` on a unit that
        /// restores state; for a `SpotWide` aggregate, the largest participant's state (the
        /// 64 MiB bound is per participant).
        state_len: Option<u64>,
        /// The whole payload the source will send.
        payload: PayloadSummary,
    },
    /// The adapter's Capture failed.
    CaptureFailed,
    /// The target assembled and verified the payload, registered the temporary queue and
    /// restored the hidden instance.
    RestoreAccepted {
        /// The attempt the reply is for.
        attempt: TargetAttemptGeneration,
    },
    /// The target reported an explicit failure before the relay-ready point.
    RestoreFailed {
        /// The attempt the reply is for.
        attempt: TargetAttemptGeneration,
        /// Why.
        reason: RestoreFailure,
    },
    /// The source accepted the target's relay-ready reply: the relay-ready point. From here
    /// on the source never reopens (21 §9.4).
    RelayReady {
        /// The attempt the reply is for.
        attempt: TargetAttemptGeneration,
    },
    /// The source finished submitting cutover (one-way; no reply is awaited).
    CutoverSent,
    /// The target received cutover.
    CutoverReceived {
        /// The attempt the cutover names.
        attempt: TargetAttemptGeneration,
    },
    /// 1,000 ms passed on the target after its relay-ready reply without a cutover.
    CutoverWaitElapsed {
        /// The target's attempt.
        attempt: TargetAttemptGeneration,
    },
    /// The target's owner-change CAS was applied (directly, or confirmed by a re-read that
    /// found this target as owner).
    CasApplied {
        /// The target's attempt.
        attempt: TargetAttemptGeneration,
        /// The record's version after the change.
        version: StoreVersion,
    },
    /// The owner-change CAS condition failed, or a re-read found another valid owner or
    /// generation.
    CasConflict {
        /// The target's attempt.
        attempt: TargetAttemptGeneration,
    },
    /// No reply to the owner-change CAS arrived.
    StoreReplyLost {
        /// The target's attempt.
        attempt: TargetAttemptGeneration,
    },
    /// The target merged the queues, ran the required lifecycle and opened dispatch.
    DispatchOpened {
        /// The target's attempt.
        attempt: TargetAttemptGeneration,
    },
    /// Current completion-record counts (21 §9.3).
    CompletionTally(CompletionTally),
    /// Every member Actor unit of this `PerActor` Spot ended and the source relay finished.
    MembersSettled,
    /// The unit's Restore deadline passed.
    Deadline,
    /// An explicit cancellation was requested.
    CancelRequested,
}

/// The variant of an [`Event`], without its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[allow(missing_docs)] // One-to-one with `Event`'s variants.
pub enum EventKind {
    TargetSecured,
    TargetUnavailable,
    StageRecorded,
    Captured,
    CaptureFailed,
    RestoreAccepted,
    RestoreFailed,
    RelayReady,
    CutoverSent,
    CutoverReceived,
    CutoverWaitElapsed,
    CasApplied,
    CasConflict,
    StoreReplyLost,
    DispatchOpened,
    CompletionTally,
    MembersSettled,
    Deadline,
    CancelRequested,
}

impl Event {
    /// The variant, without its data.
    pub fn kind(&self) -> EventKind {
        match self {
            Event::TargetSecured { .. } => EventKind::TargetSecured,
            Event::TargetUnavailable => EventKind::TargetUnavailable,
            Event::StageRecorded { .. } => EventKind::StageRecorded,
            Event::Captured { .. } => EventKind::Captured,
            Event::CaptureFailed => EventKind::CaptureFailed,
            Event::RestoreAccepted { .. } => EventKind::RestoreAccepted,
            Event::RestoreFailed { .. } => EventKind::RestoreFailed,
            Event::RelayReady { .. } => EventKind::RelayReady,
            Event::CutoverSent => EventKind::CutoverSent,
            Event::CutoverReceived { .. } => EventKind::CutoverReceived,
            Event::CutoverWaitElapsed { .. } => EventKind::CutoverWaitElapsed,
            Event::CasApplied { .. } => EventKind::CasApplied,
            Event::CasConflict { .. } => EventKind::CasConflict,
            Event::StoreReplyLost { .. } => EventKind::StoreReplyLost,
            Event::DispatchOpened { .. } => EventKind::DispatchOpened,
            Event::CompletionTally(_) => EventKind::CompletionTally,
            Event::MembersSettled => EventKind::MembersSettled,
            Event::Deadline => EventKind::Deadline,
            Event::CancelRequested => EventKind::CancelRequested,
        }
    }

    /// The target attempt a target-originated event names, if it names one.
    pub fn attempt(&self) -> Option<TargetAttemptGeneration> {
        match self {
            Event::RestoreAccepted { attempt }
            | Event::RestoreFailed { attempt, .. }
            | Event::RelayReady { attempt }
            | Event::CutoverReceived { attempt }
            | Event::CutoverWaitElapsed { attempt }
            | Event::CasApplied { attempt, .. }
            | Event::CasConflict { attempt }
            | Event::StoreReplyLost { attempt }
            | Event::DispatchOpened { attempt } => Some(*attempt),
            _ => None,
        }
    }
}
