//! Start, target capacity, the `Preparing` record, capture and its bounds, the SpotWide
//! preflight.

use zlink_relocation::unit::*;

use super::*;
use crate::support::*;

#[test]
fn disable_policy_rejects_before_capture() {
    for kind in UnitKind::ALL {
        let (mut unit, effects) = Unit::start(plan(kind, Policy::Disable));
        assert_eq!(
            effects,
            vec![Effect::Reject {
                reason: FailureReason::RelocationDisabled
            }]
        );
        assert_eq!(
            unit.stage(),
            Stage::Failed(FailureReason::RelocationDisabled)
        );
        let capture = good_capture(&unit);
        assert_refused(&mut unit, capture, TransitionErrorKind::Ended);
    }
}

#[test]
fn start_secures_target_capacity_before_anything_else() {
    let (unit, effects) = Unit::start(plan(UnitKind::InstanceSpot, Policy::Preserve));
    assert_eq!(
        effects,
        vec![Effect::SecureTarget {
            reservation: reservation()
        }]
    );
    assert_eq!(unit.stage(), Stage::Preparing);
    assert_eq!(unit.awaiting(), Awaiting::TargetSecured);
}

#[test]
fn target_unavailable_fails_without_sealing_or_releasing() {
    let mut unit = started(UnitKind::EntryMemberActor, Policy::Recreate);
    let effects = unit.step(Event::TargetUnavailable).unwrap();
    assert_eq!(effects, vec![Effect::DiscardProgress]);
    assert_eq!(
        unit.stage(),
        Stage::Failed(FailureReason::TargetUnavailable)
    );
}

#[test]
fn secured_target_records_preparing_with_list_checksum_and_reservation() {
    let mut unit = started(UnitKind::EntryMemberActor, Policy::Recreate);
    let effects = unit
        .step(Event::TargetSecured {
            reservation: reservation(),
        })
        .unwrap();
    assert_eq!(
        effects,
        vec![Effect::RecordStage(StageRecord::Preparing {
            target_list: list(),
            reservation: reservation(),
            condition: version(0),
        })]
    );
}

#[test]
fn reply_for_another_reservation_is_refused() {
    let mut unit = started(UnitKind::EntryMemberActor, Policy::Recreate);
    let other = zlink_relocation::unit::ReservationId::new(0xfff).unwrap();
    assert_refused(
        &mut unit,
        Event::TargetSecured { reservation: other },
        TransitionErrorKind::StaleBinding,
    );
}

#[test]
fn preparing_recorded_seals_the_source_then_captures_per_policy() {
    for (kind, policy, mode) in [
        (
            UnitKind::EntryMemberActor,
            Policy::Preserve,
            CaptureMode::StateAndFrameworkWork,
        ),
        (
            UnitKind::EntryMemberActor,
            Policy::Recreate,
            CaptureMode::FrameworkWork,
        ),
        (
            UnitKind::PerActorSpotShell,
            Policy::Preserve,
            CaptureMode::FrameworkWork,
        ),
    ] {
        let mut unit = started(kind, policy);
        let effects = drive_until(&mut unit, Awaiting::Capture);
        assert_eq!(
            effects[effects.len() - 2..],
            [Effect::SealSource, Effect::Capture { mode }]
        );
    }
}

#[test]
fn each_conditional_write_is_conditioned_on_the_version_the_previous_one_returned() {
    let mut unit = started(UnitKind::EntryMemberActor, Policy::Recreate);
    let mut conditions = Vec::new();
    let mut n = 0;
    let record = |effects: Vec<Effect>, conditions: &mut Vec<_>| {
        for effect in effects {
            match effect {
                Effect::RecordStage(record) => conditions.push(record.condition().clone()),
                Effect::RunNewOwnerCas(cas) => conditions.push(cas.condition),
                _ => {}
            }
        }
    };
    while let Some(event) = happy_event(&unit, &mut n) {
        record(unit.step(event).unwrap(), &mut conditions);
    }
    assert_eq!(unit.stage(), Stage::Completed);
    // Preparing on the first read, Captured on Preparing's reply, Prepared on Captured's, the
    // owner CAS on Prepared's, Completed on the CAS's.
    assert_eq!(
        conditions,
        vec![version(0), version(1), version(2), version(3), version(4)]
    );
}

#[test]
fn recreate_capture_carries_no_state_and_restores_through_the_factory() {
    let mut unit = started(UnitKind::InstanceSpot, Policy::Recreate);
    drive_until(&mut unit, Awaiting::Capture);
    assert_refused(
        &mut unit,
        Event::Captured {
            state_len: Some(1),
            payload: summary(10),
        },
        TransitionErrorKind::InvalidInput,
    );
    let effects = drive_until(&mut unit, Awaiting::Restore);
    let Some(Effect::SendRestore(request)) = effects.last() else {
        panic!("no restore request in {effects:?}");
    };
    assert_eq!(request.mode, RestoreMode::Recreate);
}

#[test]
fn preserve_capture_without_state_is_refused() {
    let mut unit = started(UnitKind::EntryMemberActor, Policy::Preserve);
    drive_until(&mut unit, Awaiting::Capture);
    assert_refused(
        &mut unit,
        Event::Captured {
            state_len: None,
            payload: summary(10),
        },
        TransitionErrorKind::InvalidInput,
    );
}

#[test]
fn preserve_capture_of_exactly_64_mib_is_accepted() {
    let mut unit = started(UnitKind::EntryMemberActor, Policy::Preserve);
    drive_until(&mut unit, Awaiting::Capture);
    let effects = unit
        .step(Event::Captured {
            state_len: Some(MAX_STATE_LEN),
            payload: summary(MAX_STATE_LEN + 4_096),
        })
        .unwrap();
    assert!(matches!(
        effects.as_slice(),
        [Effect::RecordStage(StageRecord::Captured { .. })]
    ));
    assert_eq!(MAX_STATE_LEN, 64 * 1024 * 1024);
}

#[test]
fn preserve_capture_over_64_mib_is_state_incompatible() {
    let mut unit = started(UnitKind::EntryMemberActor, Policy::Preserve);
    drive_until(&mut unit, Awaiting::Capture);
    let effects = unit
        .step(Event::Captured {
            state_len: Some(MAX_STATE_LEN + 1),
            payload: summary(MAX_STATE_LEN + 4_096),
        })
        .unwrap();
    assert_eq!(
        unit.stage(),
        Stage::Failed(FailureReason::StateTooLarge {
            len: MAX_STATE_LEN + 1,
            max: MAX_STATE_LEN
        })
    );
    // Sealed but no Restore sent: the held work returns, the capacity is released, the source
    // reopens last.
    assert_eq!(
        effects,
        vec![
            Effect::RestoreHeldWorkInOrder,
            release(),
            Effect::DiscardProgress,
            Effect::ReopenSource
        ]
    );
}

#[test]
fn single_unit_payload_of_exactly_256_mib_is_accepted_and_one_byte_more_fails() {
    let mut at = started(UnitKind::InstanceSpot, Policy::Recreate);
    drive_until(&mut at, Awaiting::Capture);
    at.step(Event::Captured {
        state_len: None,
        payload: summary(MAX_SINGLE_PAYLOAD_LEN),
    })
    .unwrap();
    assert_eq!(
        at.awaiting(),
        Awaiting::StageRecord(RecordedStage::Captured)
    );

    let mut past = started(UnitKind::InstanceSpot, Policy::Recreate);
    drive_until(&mut past, Awaiting::Capture);
    past.step(Event::Captured {
        state_len: None,
        payload: summary(MAX_SINGLE_PAYLOAD_LEN + 1),
    })
    .unwrap();
    assert_eq!(
        past.stage(),
        Stage::Failed(FailureReason::PayloadTooLarge {
            len: MAX_SINGLE_PAYLOAD_LEN + 1,
            max: MAX_SINGLE_PAYLOAD_LEN
        })
    );
}

#[test]
fn spot_wide_payload_is_not_bounded_by_the_single_unit_limit() {
    let mut unit = started(UnitKind::SpotWideAggregate, Policy::Recreate);
    drive_until(&mut unit, Awaiting::Capture);
    unit.step(Event::Captured {
        state_len: None,
        payload: summary(4 * MAX_SINGLE_PAYLOAD_LEN),
    })
    .unwrap();
    assert_eq!(
        unit.awaiting(),
        Awaiting::StageRecord(RecordedStage::Captured)
    );
}

#[test]
fn spot_shell_never_captures_state_even_under_preserve() {
    let mut unit = started(UnitKind::PerActorSpotShell, Policy::Preserve);
    drive_until(&mut unit, Awaiting::Capture);
    assert_refused(
        &mut unit,
        Event::Captured {
            state_len: Some(1),
            payload: summary(10),
        },
        TransitionErrorKind::InvalidInput,
    );
    let effects = drive_until(&mut unit, Awaiting::Restore);
    assert!(matches!(
        effects.last(),
        Some(Effect::SendRestore(r)) if r.mode == RestoreMode::SpotShell
    ));
}

#[test]
fn capture_failure_fails_the_move_and_reopens_the_source() {
    let mut unit = started(UnitKind::EntryMemberActor, Policy::Preserve);
    drive_until(&mut unit, Awaiting::Capture);
    let effects = unit.step(Event::CaptureFailed).unwrap();
    assert_eq!(unit.stage(), Stage::Failed(FailureReason::CaptureFailed));
    assert_eq!(effects.last(), Some(&Effect::ReopenSource));
}

#[test]
fn spot_wide_preflight_rejects_the_whole_move_if_one_participant_fails() {
    let ok = Participant {
        policy: Policy::Recreate,
        target_supports_type: true,
        target_has_adapter: false,
    };
    let preserve = Participant {
        policy: Policy::Preserve,
        target_has_adapter: true,
        ..ok
    };
    assert_eq!(check_spot_wide(&[ok, ok]), Ok(Policy::Recreate));
    assert_eq!(check_spot_wide(&[ok, preserve]), Ok(Policy::Preserve));
    assert_eq!(check_spot_wide(&[]), Err(AggregateRejection::Empty));
    let disabled = Participant {
        policy: Policy::Disable,
        ..ok
    };
    assert_eq!(
        check_spot_wide(&[ok, preserve, disabled]),
        Err(AggregateRejection::RelocationDisabled { index: 2 })
    );
    let unsupported = Participant {
        target_supports_type: false,
        ..ok
    };
    assert_eq!(
        check_spot_wide(&[unsupported, ok]),
        Err(AggregateRejection::TargetUnsupported { index: 0 })
    );
    let no_adapter = Participant {
        target_has_adapter: false,
        ..preserve
    };
    assert_eq!(
        check_spot_wide(&[ok, no_adapter]),
        Err(AggregateRejection::AdapterMissing { index: 1 })
    );
}
