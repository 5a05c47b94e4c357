//! One test per transition rule of the unit machine, named after the behaviour, grouped by
//! the part of the move they cover.

mod ending;
mod handoff;
mod preparing;

use zlink_relocation::unit::{
    Awaiting, Effect, Event, NewOwnerCas, Policy, TransitionError, TransitionErrorKind, Unit,
    UnitKind,
};

use crate::support::*;

pub(crate) fn release() -> Effect {
    Effect::ReleaseTarget {
        reservation: reservation(),
    }
}

pub(crate) fn new_owner_cas(n: u64) -> NewOwnerCas {
    NewOwnerCas {
        binding: binding(),
        reservation: reservation(),
        condition: version(n),
    }
}

/// An actor unit driven to the point where the source awaits the relay-ready reply.
pub(crate) fn prepared(policy: Policy) -> Unit {
    let mut unit = started(UnitKind::EntryMemberActor, policy);
    drive_until(&mut unit, Awaiting::RelayReady);
    unit
}

/// An actor unit whose NewOwner CAS is in flight.
pub(crate) fn cas_in_flight() -> Unit {
    let mut unit = started(UnitKind::EntryMemberActor, Policy::Recreate);
    drive_until(&mut unit, Awaiting::OwnerCas);
    unit
}

/// Asserts that the event is refused with the given kind and that the unit did not change.
pub(crate) fn assert_refused(
    unit: &mut Unit,
    event: Event,
    kind: TransitionErrorKind,
) -> TransitionError {
    let before = unit.clone();
    let error = unit.step(event).unwrap_err();
    assert_eq!(error.kind(), kind, "{error}");
    assert_eq!(*unit, before);
    error
}
