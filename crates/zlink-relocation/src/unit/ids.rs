//! The three identifiers of one move (spec 21 §8.1). They are distinct types on purpose: a
//! [`RelocationId`] can never be passed where a [`ReservationId`] or a
//! [`TargetAttemptGeneration`] is expected.
//!
//! ```compile_fail
//! use zlink_relocation::unit::{RelocationId, ReservationId};
//! fn release(_: ReservationId) {}
//! release(RelocationId::random()); // a move id is not a reservation id
//! ```

use std::fmt;
use std::num::{NonZeroU64, NonZeroU128};

/// Which identifier a value was meant to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IdKind {
    /// A [`RelocationId`].
    Relocation,
    /// A [`TargetAttemptGeneration`].
    TargetAttempt,
    /// A [`ReservationId`].
    Reservation,
}

/// An identifier value the spec does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdError {
    /// Zero is never a valid identifier (21 §8.1: all three are non-zero).
    #[error("a {what:?} identifier must be non-zero")]
    Zero {
        /// The identifier that was zero.
        what: IdKind,
    },
}

impl IdError {
    /// Which identifier was rejected.
    pub fn kind(&self) -> IdKind {
        match self {
            IdError::Zero { what } => *what,
        }
    }
}

/// 128 random bits, never zero (`zlink_store_spi::entropy`: the operating system's random
/// source, or a simulation's seed).
fn random_non_zero_u128() -> NonZeroU128 {
    loop {
        let bits = zlink_store_spi::entropy::random_u128();
        if let Some(value) = NonZeroU128::new(bits) {
            return value;
        }
    }
}

/// 64 random bits, never zero.
fn random_non_zero_u64() -> NonZeroU64 {
    loop {
        if let Some(value) = NonZeroU64::new(zlink_store_spi::entropy::random_u128() as u64) {
            return value;
        }
    }
}

/// Identifies one move: a non-zero random 128-bit value, used only by the runtime (21 §8.1).
///
/// ```
/// use zlink_relocation::unit::RelocationId;
/// assert_eq!(RelocationId::new(7).unwrap().get(), 7);
/// assert!(RelocationId::new(0).is_err());
/// assert_ne!(RelocationId::random(), RelocationId::random());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RelocationId(NonZeroU128);

impl RelocationId {
    /// Wraps bits from the caller's own random source; zero is rejected.
    pub fn new(bits: u128) -> Result<Self, IdError> {
        NonZeroU128::new(bits).map(Self).ok_or(IdError::Zero {
            what: IdKind::Relocation,
        })
    }

    /// A fresh id from the operating system's random source (a simulation's seed inside one).
    pub fn random() -> Self {
        Self(random_non_zero_u128())
    }

    /// The 128 bits.
    pub fn get(self) -> u128 {
        self.0.get()
    }
}

impl fmt::Display for RelocationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0.get())
    }
}

impl fmt::Debug for RelocationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RelocationId({self})")
    }
}

/// Identifies the request that secured target capacity: non-zero 128 bits, separate from a
/// creation id and from the [`RelocationId`] (21 §8.1). The runtime fixes it before the
/// first reservation request, so that a retried request with the same id returns the value
/// already issued and a cancellation can release it even while the request is in flight.
///
/// ```
/// use zlink_relocation::unit::ReservationId;
/// assert!(ReservationId::new(1).is_ok());
/// assert!(ReservationId::new(0).is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReservationId(NonZeroU128);

impl ReservationId {
    /// Wraps bits from the caller's own random source; zero is rejected.
    pub fn new(bits: u128) -> Result<Self, IdError> {
        NonZeroU128::new(bits).map(Self).ok_or(IdError::Zero {
            what: IdKind::Reservation,
        })
    }

    /// A fresh id (same source as [`RelocationId::random`]).
    pub fn random() -> Self {
        Self(random_non_zero_u128())
    }

    /// The 128 bits.
    pub fn get(self) -> u128 {
        self.0.get()
    }
}

impl fmt::Debug for ReservationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ReservationId({:032x})", self.0.get())
    }
}

/// Distinguishes a duplicate or earlier Restore sent to the same target (21 §8.1): non-zero,
/// compared **only for equality** (it has no ordering), and never derived from the target
/// node's lifecycle generation, which cannot tell a second attempt on the same node from the
/// first.
///
/// ```
/// use zlink_relocation::unit::TargetAttemptGeneration;
/// let a = TargetAttemptGeneration::new(2).unwrap();
/// assert_eq!(a, TargetAttemptGeneration::new(2).unwrap());
/// assert!(TargetAttemptGeneration::new(0).is_err());
/// ```
///
/// There is no ordering to compare attempts by:
///
/// ```compile_fail
/// use zlink_relocation::unit::TargetAttemptGeneration;
/// let a = TargetAttemptGeneration::new(1).unwrap();
/// let b = TargetAttemptGeneration::new(2).unwrap();
/// let _newer = a < b;
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TargetAttemptGeneration(NonZeroU64);

impl TargetAttemptGeneration {
    /// Wraps a value the runtime issued; zero is rejected.
    pub fn new(value: u64) -> Result<Self, IdError> {
        NonZeroU64::new(value).map(Self).ok_or(IdError::Zero {
            what: IdKind::TargetAttempt,
        })
    }

    /// A fresh attempt value (same source as [`RelocationId::random`]).
    pub fn random() -> Self {
        Self(random_non_zero_u64())
    }

    /// The value, for encoding only (never compare attempts by magnitude).
    pub fn get(self) -> u64 {
        self.0.get()
    }
}

impl fmt::Debug for TargetAttemptGeneration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TargetAttemptGeneration({:016x})", self.0.get())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.
mod tests {
    use super::*;

    #[test]
    fn random_ids_are_non_zero_and_differ() {
        let ids: zlink_store_spi::entropy::HashSet<u128> =
            (0..1000).map(|_| RelocationId::random().get()).collect();
        assert_eq!(ids.len(), 1000);
        let attempts: zlink_store_spi::entropy::HashSet<u64> = (0..1000)
            .map(|_| TargetAttemptGeneration::random().get())
            .collect();
        assert_eq!(attempts.len(), 1000);
    }

    #[test]
    fn zero_is_rejected_with_the_identifier_kind() {
        assert_eq!(RelocationId::new(0).unwrap_err().kind(), IdKind::Relocation);
        assert_eq!(
            ReservationId::new(0).unwrap_err().kind(),
            IdKind::Reservation
        );
        assert_eq!(
            TargetAttemptGeneration::new(0).unwrap_err().kind(),
            IdKind::TargetAttempt
        );
    }
}
