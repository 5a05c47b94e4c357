//! Plans, fixed ids and a happy-path oracle shared by the unit machine tests.

use zlink_relocation::unit::{
    Awaiting, Binding, CompletionTally, Effect, Event, MovePlan, PayloadSummary, Policy,
    RecordedStage, RelocationId, ReservationId, StageOutcome, TargetAttemptGeneration,
    TargetListChecksum, Unit, UnitKind,
};
use zlink_store_spi::StoreVersion;

pub(crate) fn attempt() -> TargetAttemptGeneration {
    TargetAttemptGeneration::new(0x5eed).unwrap()
}

pub(crate) fn stale_attempt() -> TargetAttemptGeneration {
    TargetAttemptGeneration::new(0x01d).unwrap()
}

pub(crate) fn reservation() -> ReservationId {
    ReservationId::new(0xabc).unwrap()
}

pub(crate) fn binding() -> Binding {
    Binding {
        relocation: RelocationId::new(0x1234_5678).unwrap(),
        attempt: attempt(),
    }
}

pub(crate) fn list() -> TargetListChecksum {
    TargetListChecksum::from_bytes([7; 32])
}

pub(crate) fn version(n: u64) -> StoreVersion {
    StoreVersion::new(format!("v{n}")).unwrap()
}

pub(crate) fn plan(kind: UnitKind, policy: Policy) -> MovePlan {
    MovePlan::new(binding(), kind, policy, reservation(), version(0), list())
}

pub(crate) fn started(kind: UnitKind, policy: Policy) -> Unit {
    Unit::start(plan(kind, policy)).0
}

pub(crate) fn summary(total_len: u64) -> PayloadSummary {
    PayloadSummary {
        total_len,
        chunk_count: 1,
        crc32c: 0xdead_beef,
    }
}

/// The capture a well-behaved source reports for this unit.
pub(crate) fn good_capture(unit: &Unit) -> Event {
    let carries =
        unit.plan().policy() == Policy::Preserve && unit.plan().kind().restores_application_state();
    Event::Captured {
        state_len: carries.then_some(100),
        payload: summary(1_000),
    }
}

/// The event a healthy move produces next (versions count up from 1 so each is distinct).
pub(crate) fn happy_event(unit: &Unit, next_version: &mut u64) -> Option<Event> {
    let mut fresh = || {
        *next_version += 1;
        version(*next_version)
    };
    Some(match unit.awaiting() {
        Awaiting::TargetSecured => Event::TargetSecured {
            reservation: reservation(),
        },
        Awaiting::StageRecord(stage) => Event::StageRecorded {
            stage,
            outcome: StageOutcome::Applied(fresh()),
        },
        Awaiting::Capture => good_capture(unit),
        Awaiting::Restore => Event::RestoreAccepted { attempt: attempt() },
        Awaiting::RelayReady => Event::RelayReady { attempt: attempt() },
        Awaiting::Cutover => Event::CutoverReceived { attempt: attempt() },
        Awaiting::OwnerCas => Event::CasApplied {
            attempt: attempt(),
            version: fresh(),
        },
        Awaiting::Dispatch => Event::DispatchOpened { attempt: attempt() },
        Awaiting::CutoverSubmit => Event::CutoverSent,
        Awaiting::Members => Event::MembersSettled,
        Awaiting::CompletionTally => {
            // Every accepted request's result stored and delivered.
            let accepted = unit.tally().accepted;
            Event::CompletionTally(CompletionTally {
                accepted,
                stored: accepted,
                pending_deliveries: 0,
            })
        }
        Awaiting::Nothing => return None,
        _ => return None,
    })
}

/// Drives the unit along the happy path until it awaits `stop` (or ends); returns every
/// effect emitted on the way.
pub(crate) fn drive_until(unit: &mut Unit, stop: Awaiting) -> Vec<Effect> {
    let mut n = 100;
    let mut effects = Vec::new();
    while unit.awaiting() != stop {
        let Some(event) = happy_event(unit, &mut n) else {
            break;
        };
        effects.extend(unit.step(event).unwrap());
    }
    effects
}

/// Applies one stage record reply.
pub(crate) fn applied(stage: RecordedStage, n: u64) -> Event {
    Event::StageRecorded {
        stage,
        outcome: StageOutcome::Applied(version(n)),
    }
}
