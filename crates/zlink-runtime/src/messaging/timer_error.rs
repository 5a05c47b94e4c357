//! Why an object timer could not be started (spec 21 §1, §1.2; 06 §11): the typed refusal of
//! `Timers::start_once` / `Timers::start_every`, carried by [`ZLinkError::Timer`].
//!
//! [`ZLinkError::Timer`]: super::ZLinkError::Timer

use std::time::Duration;

use super::ErrorKind;

/// Why a timer was not started; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TimerError {
    /// A timer name must be 1..=255 bytes of UTF-8: `InvalidOperation`.
    #[error("a timer name must be 1..=255 bytes (got {len})")]
    InvalidName {
        /// The name's length in bytes.
        len: usize,
    },
    /// The object already has a timer of that name (cancel it first): `AlreadyExists`.
    #[error("the object already has a timer named {name:?}")]
    AlreadyExists {
        /// The name in use.
        name: String,
    },
    /// The object already has the most timers its node allows: `CapacityExceeded`.
    #[error("the object already has {max} timers, the most its node allows")]
    TooMany {
        /// The node's `max_timers_per_object`.
        max: usize,
    },
    /// A periodic timer's period is below the node's minimum: `InvalidOperation`.
    #[error("the period {period:?} is below the node's minimum timer period {min:?}")]
    PeriodTooShort {
        /// The period asked for.
        period: Duration,
        /// The node's `min_timer_period`.
        min: Duration,
    },
    /// The context is not (or no longer) the one of a running activation: `Unavailable`.
    #[error("no running activation to hold the timer")]
    NoActivation,
}

impl TimerError {
    /// The common kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::InvalidName { .. } | Self::PeriodTooShort { .. } => ErrorKind::InvalidOperation,
            Self::AlreadyExists { .. } => ErrorKind::AlreadyExists,
            Self::TooMany { .. } => ErrorKind::CapacityExceeded,
            Self::NoActivation => ErrorKind::Unavailable,
        }
    }
}
