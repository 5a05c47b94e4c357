//! How an authority operation ends: applied, or a [`Conflict`] that changed nothing.

use zlink_codec::records::AllocationState;

use super::super::engine::LeaseRole;
use super::super::identity::HostRun;
use super::handle::AuthorityHandle;

/// Why an authority operation changed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Conflict {
    /// The row is not what the operation expected: it exists (Reserve) or changed or
    /// disappeared since it was read. `current` is what it holds now (`None`: missing).
    Record {
        /// The row now.
        current: Option<AuthorityHandle>,
    },
    /// The operation is not allowed in the record's state (decided before any Store request).
    State {
        /// The record's state.
        state: AllocationState,
    },
    /// This host run is not the record's owner (decided before any Store request).
    NotOwner {
        /// The record's owner.
        owner: HostRun,
    },
    /// A lease the operation needs is not held by this run in the Store (expired, released or
    /// taken over).
    LeaseStale {
        /// The host run whose lease is stale.
        run: HostRun,
        /// Whether it is the target's lease (else this host's own).
        target: bool,
    },
    /// The relocation reservation is missing, was used, was made against another version of
    /// the record, or holds different content (spec 21 §8.1).
    Reservation,
    /// The recovery sweep found the swept run's owner lease held again: nothing of that run
    /// is reclaimed (spec 21 §3.1).
    RunStillLive,
    /// The at-access recovery of a dead run's object found a move of it that a live target
    /// may still complete (spec 21 §8.1): the record is kept, as the recovery-sweep keeps it.
    Relocating,
    /// The at-access recovery met a `SpotWide` member whose Spot's record names another run
    /// (the member moved with its Spot; its own record has not followed yet) or could not be
    /// read: the record is kept, as the sweeps keep it (`members.rs`).
    ResolvesThroughSpot,
}

impl Conflict {
    pub(crate) fn lease_stale(role: LeaseRole, run: HostRun) -> Self {
        Conflict::LeaseStale {
            run,
            target: role == LeaseRole::Target,
        }
    }
}

/// The result of an authority operation: applied, or a [`Conflict`] that changed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<T> {
    /// Applied as one commit.
    Applied(T),
    /// Nothing changed.
    Conflict(Conflict),
}

impl<T> Outcome<T> {
    /// The applied value, if any.
    pub fn applied(self) -> Option<T> {
        match self {
            Outcome::Applied(t) => Some(t),
            Outcome::Conflict(_) => None,
        }
    }

    /// Whether it was applied.
    pub fn is_applied(&self) -> bool {
        matches!(self, Outcome::Applied(_))
    }

    /// The conflict, if any.
    pub fn conflict(&self) -> Option<&Conflict> {
        match self {
            Outcome::Applied(_) => None,
            Outcome::Conflict(c) => Some(c),
        }
    }

    /// Maps the Done value, keeping a Conflict as it is.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Outcome<U> {
        match self {
            Outcome::Applied(t) => Outcome::Applied(f(t)),
            Outcome::Conflict(c) => Outcome::Conflict(c),
        }
    }
}
