//! Cancellation, deadlines, completion and the ended unit.

use zlink_relocation::unit::*;

use super::*;
use crate::support::*;

#[test]
fn cancellation_before_relay_ready_releases_target_and_reopens_source() {
    let mut unit = prepared(Policy::Preserve);
    let effects = unit.step(Event::CancelRequested).unwrap();
    assert_eq!(unit.stage(), Stage::Cancelled);
    assert_eq!(
        effects,
        vec![
            Effect::DiscardTargetQueue,
            Effect::RestoreHeldWorkInOrder,
            release(),
            Effect::DiscardAssembly,
            Effect::DiscardProgress,
            Effect::ReopenSource
        ]
    );
    // No Location Store read or write on cancellation (21 §9.4 step 5).
    assert!(!effects.iter().any(|e| matches!(
        e,
        Effect::RecordStage(_) | Effect::RunNewOwnerCas(_) | Effect::RereadAndRetry(_)
    )));
}

#[test]
fn cancellation_aborts_the_bound_session_before_reopening() {
    let mut unit =
        Unit::start(plan(UnitKind::EntryMemberActor, Policy::Recreate).with_bound_session(true)).0;
    drive_until(&mut unit, Awaiting::Capture);
    let effects = unit.step(Event::CancelRequested).unwrap();
    assert_eq!(
        effects,
        vec![
            Effect::RestoreHeldWorkInOrder,
            Effect::AbortSessionBinding,
            release(),
            Effect::DiscardProgress,
            Effect::ReopenSource
        ]
    );
}

#[test]
fn cancellation_while_securing_releases_the_reservation_without_reopening() {
    let mut unit = started(UnitKind::EntryMemberActor, Policy::Recreate);
    let effects = unit.step(Event::CancelRequested).unwrap();
    assert_eq!(effects, vec![release(), Effect::DiscardProgress]);
}

#[test]
fn cancellation_after_relay_ready_is_refused() {
    let mut unit = prepared(Policy::Recreate);
    unit.step(Event::RelayReady { attempt: attempt() }).unwrap();
    let error = assert_refused(
        &mut unit,
        Event::CancelRequested,
        TransitionErrorKind::CancelRefused,
    );
    assert_eq!(error, TransitionError::CancelAfterRelayReady);
    let mut committed = cas_in_flight();
    committed
        .step(Event::CasApplied {
            attempt: attempt(),
            version: version(5),
        })
        .unwrap();
    assert_refused(
        &mut committed,
        Event::CancelRequested,
        TransitionErrorKind::CancelRefused,
    );
}

#[test]
fn deadline_before_relay_ready_aborts_like_cancellation() {
    let mut unit = prepared(Policy::Recreate);
    let effects = unit.step(Event::Deadline).unwrap();
    assert_eq!(unit.stage(), Stage::Failed(FailureReason::DeadlineExceeded));
    assert_eq!(effects.last(), Some(&Effect::ReopenSource));
    assert_eq!(effects.iter().filter(|e| **e == release()).count(), 1);
}

#[test]
fn deadline_after_the_owner_change_changes_nothing() {
    let mut unit = cas_in_flight();
    unit.step(Event::CasApplied {
        attempt: attempt(),
        version: version(5),
    })
    .unwrap();
    let before = unit.clone();
    assert_eq!(unit.step(Event::Deadline).unwrap(), Vec::<Effect>::new());
    assert_eq!(unit, before);
    assert_eq!(unit.stage(), Stage::Committed);
}

#[test]
fn completed_is_recorded_only_after_dispatch_cutover_submit_and_settled_tally() {
    let mut unit = cas_in_flight();
    unit.step(Event::CasApplied {
        attempt: attempt(),
        version: version(5),
    })
    .unwrap();
    let pending = CompletionTally {
        accepted: 2,
        stored: 1,
        pending_deliveries: 1,
    };
    assert!(
        unit.step(Event::CompletionTally(pending))
            .unwrap()
            .is_empty()
    );
    assert!(
        unit.step(Event::DispatchOpened { attempt: attempt() })
            .unwrap()
            .is_empty()
    );
    assert_eq!(unit.awaiting(), Awaiting::CutoverSubmit);
    let effects = unit.step(Event::CutoverSent).unwrap();
    assert!(!effects.iter().any(|e| matches!(e, Effect::RecordStage(_))));
    let stored = CompletionTally {
        accepted: 2,
        stored: 2,
        pending_deliveries: 1,
    };
    assert!(
        unit.step(Event::CompletionTally(stored))
            .unwrap()
            .is_empty()
    );
    let settled = CompletionTally {
        pending_deliveries: 0,
        ..stored
    };
    let effects = unit.step(Event::CompletionTally(settled)).unwrap();
    assert_eq!(
        effects,
        vec![Effect::RecordStage(StageRecord::Completed {
            relocation: binding().relocation,
            condition: version(5),
        })]
    );
    unit.step(applied(RecordedStage::Completed, 6)).unwrap();
    assert_eq!(unit.stage(), Stage::Completed);
}

#[test]
fn impossible_completion_tally_is_refused() {
    let mut unit = cas_in_flight();
    unit.step(Event::CasApplied {
        attempt: attempt(),
        version: version(5),
    })
    .unwrap();
    let more_stored = CompletionTally {
        accepted: 1,
        stored: 2,
        pending_deliveries: 0,
    };
    assert_refused(
        &mut unit,
        Event::CompletionTally(more_stored),
        TransitionErrorKind::InvalidInput,
    );
    unit.step(Event::CompletionTally(CompletionTally {
        accepted: 3,
        stored: 1,
        pending_deliveries: 0,
    }))
    .unwrap();
    let shrinking = CompletionTally {
        accepted: 2,
        stored: 1,
        pending_deliveries: 0,
    };
    assert_refused(
        &mut unit,
        Event::CompletionTally(shrinking),
        TransitionErrorKind::InvalidInput,
    );
}

#[test]
fn per_actor_shell_starts_members_and_completes_after_them() {
    let mut unit = started(UnitKind::PerActorSpotShell, Policy::Recreate);
    drive_until(&mut unit, Awaiting::OwnerCas);
    let effects = unit
        .step(Event::CasApplied {
            attempt: attempt(),
            version: version(5),
        })
        .unwrap();
    assert_eq!(
        effects,
        vec![Effect::MergeQueuesAndOpenDispatch, Effect::StartMemberMoves]
    );
    unit.step(Event::DispatchOpened { attempt: attempt() })
        .unwrap();
    let effects = unit.step(Event::CutoverSent).unwrap();
    assert!(!effects.iter().any(|e| matches!(e, Effect::RecordStage(_))));
    assert_eq!(unit.awaiting(), Awaiting::Members);
    let effects = unit.step(Event::MembersSettled).unwrap();
    assert!(matches!(
        effects.as_slice(),
        [Effect::RecordStage(StageRecord::Completed { .. })]
    ));
}

#[test]
fn members_settled_is_refused_for_other_kinds() {
    for kind in [
        UnitKind::EntryMemberActor,
        UnitKind::PerActorSpotActor,
        UnitKind::SpotWideAggregate,
        UnitKind::InstanceSpot,
    ] {
        let mut unit = started(kind, Policy::Recreate);
        drive_until(&mut unit, Awaiting::Dispatch);
        assert_refused(
            &mut unit,
            Event::MembersSettled,
            TransitionErrorKind::OutOfOrder,
        );
    }
}

#[test]
fn completion_record_conflict_keeps_the_target_as_owner() {
    let mut unit = started(UnitKind::InstanceSpot, Policy::Recreate);
    drive_until(&mut unit, Awaiting::StageRecord(RecordedStage::Completed));
    let effects = unit
        .step(Event::StageRecorded {
            stage: RecordedStage::Completed,
            outcome: StageOutcome::Conflict,
        })
        .unwrap();
    assert!(effects.is_empty(), "no rollback, no removal: {effects:?}");
    assert_eq!(
        unit.stage(),
        Stage::Failed(FailureReason::CompletionConflict)
    );
}

#[test]
fn ended_unit_refuses_every_event() {
    let mut unit = started(UnitKind::EntryMemberActor, Policy::Recreate);
    unit.step(Event::CancelRequested).unwrap();
    for event in [
        Event::TargetSecured {
            reservation: reservation(),
        },
        Event::CancelRequested,
        Event::Deadline,
        Event::CutoverSent,
        Event::CasApplied {
            attempt: attempt(),
            version: version(1),
        },
    ] {
        assert_refused(&mut unit, event, TransitionErrorKind::Ended);
    }
}

#[test]
fn effects_name_the_process_that_performs_them() {
    assert_eq!(Effect::SealSource.performer(), Side::Source);
    assert_eq!(Effect::ReopenSource.performer(), Side::Source);
    assert_eq!(Effect::RemovePreparedTarget.performer(), Side::Target);
    assert_eq!(
        Effect::RunNewOwnerCas(new_owner_cas(1)).performer(),
        Side::Target
    );
    assert_eq!(
        Effect::RereadAndRetry(StoreWrite::NewOwner(new_owner_cas(1))).performer(),
        Side::Target
    );
    let preparing = StageRecord::Preparing {
        target_list: list(),
        reservation: reservation(),
        condition: version(1),
    };
    assert_eq!(Effect::RecordStage(preparing).performer(), Side::Source);
}

#[test]
fn happy_path_reaches_completed_for_every_kind_and_moving_policy() {
    for kind in UnitKind::ALL {
        for policy in [Policy::Recreate, Policy::Preserve] {
            let mut unit = started(kind, policy);
            let effects = drive_until(&mut unit, Awaiting::Nothing);
            assert_eq!(unit.stage(), Stage::Completed, "{kind:?} {policy:?}");
            assert!(!effects.iter().any(Effect::reopens_source));
            assert!(!effects.iter().any(|e| *e == release()));
        }
    }
}
