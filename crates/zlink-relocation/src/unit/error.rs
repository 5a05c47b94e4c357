//! The error of [`Unit::step`](super::Unit::step): an event the machine does not accept now.
//! A refused event changes nothing.

use super::event::EventKind;
use super::ids::{ReservationId, TargetAttemptGeneration};
use super::kind::{Policy, UnitKind};
use super::stage::{Awaiting, Stage};

/// An event the unit refused; the unit is exactly as it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransitionError {
    /// The unit already ended; a terminal stage never changes (21 §10: a late Store reply
    /// for a terminal move does not reactivate the object).
    #[error("the unit already ended as {stage:?}")]
    Ended {
        /// The terminal stage.
        stage: Stage,
    },
    /// The event does not fit what the unit is doing now.
    #[error("{event:?} is not expected while the unit awaits {awaiting:?}")]
    OutOfOrder {
        /// The refused event.
        event: EventKind,
        /// What the unit awaits.
        awaiting: Awaiting,
    },
    /// The event belongs to another target attempt (21 §8.2: a previous attempt can neither
    /// change the owner nor receive new messages).
    #[error("event from {got:?}, but the move's target attempt is {expected:?}")]
    StaleAttempt {
        /// The move's attempt.
        expected: TargetAttemptGeneration,
        /// The attempt the event named.
        got: TargetAttemptGeneration,
    },
    /// The reply names another reservation than the move's.
    #[error("reply for {got:?}, but the move's reservation is {expected:?}")]
    WrongReservation {
        /// The move's reservation.
        expected: ReservationId,
        /// The reservation the reply named.
        got: ReservationId,
    },
    /// Cancellation after the relay-ready point is refused: the source never reopens
    /// (21 §9.4).
    #[error("cancellation refused: the relay-ready reply was already accepted")]
    CancelAfterRelayReady,
    /// Capture reported application state for a unit that carries none
    /// (`RecreateOnRelocation`, or the `PerActor` Spot shell).
    #[error("{kind:?} under {policy:?} captures no application state, got {len} bytes")]
    UnexpectedState {
        /// The unit's kind.
        kind: UnitKind,
        /// The unit's policy.
        policy: Policy,
        /// The reported state length.
        len: u64,
    },
    /// Capture reported no application state for a `PreserveStateWith` unit.
    #[error("{kind:?} under PreserveStateWith must capture application state")]
    MissingState {
        /// The unit's kind.
        kind: UnitKind,
    },
    /// The reported state is longer than the whole payload that contains it.
    #[error("state of {state_len} bytes is longer than the {total_len}-byte payload")]
    StateLongerThanPayload {
        /// The reported state length.
        state_len: u64,
        /// The reported payload length.
        total_len: u64,
    },
    /// A completion tally with more stored results than accepted requests, or with a count
    /// lower than before (counts only grow).
    #[error("impossible completion tally: {accepted} accepted, {stored} stored")]
    InvalidTally {
        /// Accepted requests.
        accepted: u64,
        /// Stored results.
        stored: u64,
    },
    /// The event only exists for another unit kind.
    #[error("{event:?} does not apply to a {kind:?} unit")]
    NotForKind {
        /// The refused event.
        event: EventKind,
        /// The unit's kind.
        kind: UnitKind,
    },
}

/// What kind of [`TransitionError`] it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransitionErrorKind {
    /// The unit already ended.
    Ended,
    /// The event came at the wrong time.
    OutOfOrder,
    /// The event names another attempt or reservation.
    StaleBinding,
    /// A cancellation after the relay-ready point.
    CancelRefused,
    /// The event's data is impossible for this unit.
    InvalidInput,
}

impl TransitionError {
    /// What kind of error it is.
    pub fn kind(&self) -> TransitionErrorKind {
        match self {
            TransitionError::Ended { .. } => TransitionErrorKind::Ended,
            TransitionError::OutOfOrder { .. } | TransitionError::NotForKind { .. } => {
                TransitionErrorKind::OutOfOrder
            }
            TransitionError::StaleAttempt { .. } | TransitionError::WrongReservation { .. } => {
                TransitionErrorKind::StaleBinding
            }
            TransitionError::CancelAfterRelayReady => TransitionErrorKind::CancelRefused,
            TransitionError::UnexpectedState { .. }
            | TransitionError::MissingState { .. }
            | TransitionError::StateLongerThanPayload { .. }
            | TransitionError::InvalidTally { .. } => TransitionErrorKind::InvalidInput,
        }
    }
}
