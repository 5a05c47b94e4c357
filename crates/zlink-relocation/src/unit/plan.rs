//! The plan a move starts from.

use zlink_store_spi::StoreVersion;

use super::effect::{Binding, TargetListChecksum};
use super::ids::ReservationId;
use super::kind::{Policy, UnitKind};

/// Everything fixed before a move starts: identity, kind, policy, the reservation id, the
/// version of the location record the source first read (21 §1.3 step 1) and the target list
/// checksum.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MovePlan {
    pub(super) binding: Binding,
    pub(super) kind: UnitKind,
    pub(super) policy: Policy,
    pub(super) reservation: ReservationId,
    pub(super) first_read: StoreVersion,
    pub(super) target_list: TargetListChecksum,
    pub(super) bound_session: bool,
}

impl MovePlan {
    /// A plan for a unit with no bound Session.
    pub fn new(
        binding: Binding,
        kind: UnitKind,
        policy: Policy,
        reservation: ReservationId,
        first_read: StoreVersion,
        target_list: TargetListChecksum,
    ) -> Self {
        Self {
            binding,
            kind,
            policy,
            reservation,
            first_read,
            target_list,
            bound_session: false,
        }
    }

    /// Whether a Session is bound to the unit (command 44 abort on cancellation, route
    /// update after the owner change).
    pub fn with_bound_session(mut self, bound: bool) -> Self {
        self.bound_session = bound;
        self
    }

    /// The move and target attempt.
    pub fn binding(&self) -> Binding {
        self.binding
    }

    /// The unit's kind.
    pub fn kind(&self) -> UnitKind {
        self.kind
    }

    /// The unit's policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// The target-capacity reservation id.
    pub fn reservation(&self) -> ReservationId {
        self.reservation
    }

    /// The version the first stage record is conditioned on.
    pub fn first_read(&self) -> &StoreVersion {
        &self.first_read
    }

    /// The target list checksum.
    pub fn target_list(&self) -> TargetListChecksum {
        self.target_list
    }

    /// Whether a Session is bound.
    pub fn bound_session(&self) -> bool {
        self.bound_session
    }
}
