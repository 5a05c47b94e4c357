//! Restore, the `Prepared` record, relay-ready, cutover and the owner-change CAS.

use zlink_relocation::unit::*;

use super::*;
use crate::support::*;

#[test]
fn captured_record_sends_restore_with_declared_length_count_and_crc() {
    let mut unit = started(UnitKind::EntryMemberActor, Policy::Preserve);
    let effects = drive_until(&mut unit, Awaiting::Restore);
    let Some(Effect::SendRestore(request)) = effects.last() else {
        panic!("no restore request in {effects:?}");
    };
    assert_eq!(request.binding, binding());
    assert_eq!(request.mode, RestoreMode::Preserve);
    assert_eq!(request.payload, summary(1_000));
    assert_eq!(request.target_list, list());
    assert_eq!(unit.stage(), Stage::Captured);
}

#[test]
fn restore_accepted_records_prepared_with_the_target_attempt() {
    let mut unit = started(UnitKind::EntryMemberActor, Policy::Recreate);
    drive_until(&mut unit, Awaiting::Restore);
    let effects = unit
        .step(Event::RestoreAccepted { attempt: attempt() })
        .unwrap();
    assert_eq!(
        effects,
        vec![Effect::RecordStage(StageRecord::Prepared {
            binding: binding(),
            reservation: reservation(),
            condition: version(102),
        })]
    );
    assert_eq!(effects[0].performer(), Side::Target);
}

#[test]
fn restore_failure_before_relay_ready_restores_the_source() {
    for reason in [
        RestoreFailure::ChecksumMismatch,
        RestoreFailure::TargetListMismatch,
        RestoreFailure::BindingConflict,
        RestoreFailure::TargetFailed,
    ] {
        let mut unit = started(UnitKind::EntryMemberActor, Policy::Preserve);
        drive_until(&mut unit, Awaiting::Restore);
        let effects = unit
            .step(Event::RestoreFailed {
                attempt: attempt(),
                reason,
            })
            .unwrap();
        assert_eq!(
            unit.stage(),
            Stage::Failed(FailureReason::RestoreFailed(reason))
        );
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
    }
}

#[test]
fn stage_conflict_before_prepared_cancels_without_owner_change() {
    for stage in [
        RecordedStage::Preparing,
        RecordedStage::Captured,
        RecordedStage::Prepared,
    ] {
        let mut unit = started(UnitKind::EntryMemberActor, Policy::Recreate);
        drive_until(&mut unit, Awaiting::StageRecord(stage));
        let effects = unit
            .step(Event::StageRecorded {
                stage,
                outcome: StageOutcome::Conflict,
            })
            .unwrap();
        assert_eq!(
            unit.stage(),
            Stage::Failed(FailureReason::StageConflict { stage })
        );
        assert!(
            !effects
                .iter()
                .any(|e| matches!(e, Effect::RunNewOwnerCas(_)))
        );
        assert_eq!(effects.iter().filter(|e| **e == release()).count(), 1);
    }
}

#[test]
fn stage_record_reply_lost_rereads_and_retries_the_same_record() {
    let mut unit = started(UnitKind::EntryMemberActor, Policy::Recreate);
    let effects = drive_until(&mut unit, Awaiting::StageRecord(RecordedStage::Captured));
    let Some(Effect::RecordStage(original)) = effects.last().cloned() else {
        panic!("no record in {effects:?}");
    };
    for _ in 0..3 {
        let retry = unit
            .step(Event::StageRecorded {
                stage: RecordedStage::Captured,
                outcome: StageOutcome::ReplyLost,
            })
            .unwrap();
        assert_eq!(
            retry,
            vec![Effect::RereadAndRetry(StoreWrite::Stage(original.clone()))]
        );
        assert_eq!(unit.stage(), Stage::Preparing);
    }
}

#[test]
fn prepared_recorded_replies_relay_ready_from_the_target() {
    let mut unit = started(UnitKind::EntryMemberActor, Policy::Recreate);
    let effects = drive_until(&mut unit, Awaiting::RelayReady);
    assert_eq!(
        effects.last(),
        Some(&Effect::SendRelayReady { binding: binding() })
    );
    assert_eq!(unit.stage(), Stage::Prepared);
    assert!(!unit.relay_ready());
}

#[test]
fn relay_ready_relays_held_work_then_sends_cutover() {
    let mut unit = prepared(Policy::Recreate);
    let effects = unit.step(Event::RelayReady { attempt: attempt() }).unwrap();
    assert_eq!(
        effects,
        vec![
            Effect::RelayHeldWork,
            Effect::SendCutover { binding: binding() }
        ]
    );
    assert!(unit.relay_ready());
}

#[test]
fn cutover_submit_starts_message_follow_and_drops_the_payload() {
    let mut unit = prepared(Policy::Recreate);
    unit.step(Event::RelayReady { attempt: attempt() }).unwrap();
    let effects = unit.step(Event::CutoverSent).unwrap();
    assert_eq!(
        effects,
        vec![Effect::StartMessageFollow, Effect::DropCapturedPayload]
    );
    assert_refused(
        &mut unit,
        Event::CutoverSent,
        TransitionErrorKind::OutOfOrder,
    );
}

#[test]
fn new_owner_cas_runs_on_cutover_or_after_the_wait_conditioned_on_prepared() {
    for trigger in [
        Event::CutoverReceived { attempt: attempt() },
        Event::CutoverWaitElapsed { attempt: attempt() },
    ] {
        let mut unit = prepared(Policy::Recreate);
        let prepared_version = unit.latest_version().clone();
        unit.step(Event::RelayReady { attempt: attempt() }).unwrap();
        let effects = unit.step(trigger).unwrap();
        let [Effect::RunNewOwnerCas(cas)] = effects.as_slice() else {
            panic!("unexpected {effects:?}");
        };
        assert_eq!(cas.condition, prepared_version);
        assert_eq!(cas.binding, binding());
        assert_eq!(cas.reservation, reservation());
    }
}

#[test]
fn cutover_before_the_relay_ready_point_is_refused() {
    let mut unit = prepared(Policy::Recreate);
    assert_refused(
        &mut unit,
        Event::CutoverWaitElapsed { attempt: attempt() },
        TransitionErrorKind::OutOfOrder,
    );
    assert_refused(
        &mut unit,
        Event::CutoverSent,
        TransitionErrorKind::OutOfOrder,
    );
}

#[test]
fn cas_applied_commits_merges_queues_and_updates_the_bound_session() {
    let mut unit =
        Unit::start(plan(UnitKind::EntryMemberActor, Policy::Recreate).with_bound_session(true)).0;
    drive_until(&mut unit, Awaiting::OwnerCas);
    let effects = unit
        .step(Event::CasApplied {
            attempt: attempt(),
            version: version(9),
        })
        .unwrap();
    assert_eq!(
        effects,
        vec![
            Effect::MergeQueuesAndOpenDispatch,
            Effect::SendSessionRouteUpdate
        ]
    );
    assert_eq!(unit.stage(), Stage::Committed);
    assert_eq!(unit.latest_version(), &version(9));
}

#[test]
fn cas_conflict_removes_prepared_target_without_dispatch() {
    let mut unit = cas_in_flight();
    let effects = unit
        .step(Event::CasConflict { attempt: attempt() })
        .unwrap();
    assert_eq!(
        effects,
        vec![Effect::RemovePreparedTarget, Effect::DropCapturedPayload]
    );
    assert_eq!(
        unit.stage(),
        Stage::Failed(FailureReason::OwnerChangeConflict)
    );
}

#[test]
fn store_reply_lost_retries_same_key_until_deadline() {
    let mut unit = cas_in_flight();
    let condition = unit.latest_version().clone();
    let n: u64 = condition.as_str()[1..].parse().unwrap();
    for _ in 0..5 {
        let effects = unit
            .step(Event::StoreReplyLost { attempt: attempt() })
            .unwrap();
        assert_eq!(
            effects,
            vec![Effect::RereadAndRetry(StoreWrite::NewOwner(new_owner_cas(
                n
            )))]
        );
        assert_eq!(unit.stage(), Stage::Prepared);
    }
    let effects = unit.step(Event::Deadline).unwrap();
    assert_eq!(
        effects,
        vec![
            Effect::RecordLocationUpdateFailed,
            Effect::RemovePreparedTarget,
            Effect::DropCapturedPayload
        ]
    );
    assert_eq!(
        unit.stage(),
        Stage::Failed(FailureReason::LocationUpdateFailed)
    );
}

#[test]
fn store_reply_lost_then_confirmed_ownership_commits() {
    let mut unit = cas_in_flight();
    unit.step(Event::StoreReplyLost { attempt: attempt() })
        .unwrap();
    unit.step(Event::CasApplied {
        attempt: attempt(),
        version: version(50),
    })
    .unwrap();
    assert_eq!(unit.stage(), Stage::Committed);
}

#[test]
fn late_cas_reply_after_deadline_does_not_reactivate() {
    let mut unit = cas_in_flight();
    unit.step(Event::Deadline).unwrap();
    let error = assert_refused(
        &mut unit,
        Event::CasApplied {
            attempt: attempt(),
            version: version(77),
        },
        TransitionErrorKind::Ended,
    );
    assert!(matches!(error, TransitionError::Ended { .. }));
}

#[test]
fn stale_target_attempt_cannot_change_owner_or_advance_the_move() {
    let mut unit = cas_in_flight();
    assert_refused(
        &mut unit,
        Event::CasApplied {
            attempt: stale_attempt(),
            version: version(77),
        },
        TransitionErrorKind::StaleBinding,
    );
    let mut unit = started(UnitKind::EntryMemberActor, Policy::Recreate);
    drive_until(&mut unit, Awaiting::Restore);
    assert_refused(
        &mut unit,
        Event::RestoreAccepted {
            attempt: stale_attempt(),
        },
        TransitionErrorKind::StaleBinding,
    );
}
