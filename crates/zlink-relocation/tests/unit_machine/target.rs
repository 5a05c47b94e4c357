//! The target machine (`TargetUnit`): one named test per rule, then property tests over
//! random event sequences against its invariants.

use proptest::prelude::*;
use zlink_relocation::unit::{
    CompletionTally, NewOwnerCas, PayloadSummary, RestoreFailure, RestoreMode, StageOutcome,
    StageRecord, StoreWrite, TargetAwaiting, TargetEffect, TargetErrorKind, TargetEvent,
    TargetPlan, TargetStage, TargetUnit,
};

use crate::support::*;

fn target_plan(session: bool) -> TargetPlan {
    TargetPlan {
        binding: binding(),
        reservation: reservation(),
        payload: summary(1_000),
        target_list: list(),
        mode: RestoreMode::Preserve,
        bound_session: session,
    }
}

fn started(session: bool) -> TargetUnit {
    TargetUnit::start(target_plan(session)).0
}

fn release() -> TargetEffect {
    TargetEffect::ReleaseReservation {
        reservation: reservation(),
    }
}

fn cas(condition: u64) -> NewOwnerCas {
    NewOwnerCas {
        binding: binding(),
        reservation: reservation(),
        condition: version(condition),
    }
}

/// The event a healthy move produces next on the target (versions count up).
fn happy(unit: &TargetUnit, n: &mut u64) -> Option<TargetEvent> {
    *n += 1;
    Some(match unit.awaiting() {
        TargetAwaiting::Payload => TargetEvent::PayloadAssembled {
            payload: summary(1_000),
        },
        TargetAwaiting::Build => TargetEvent::Built,
        TargetAwaiting::Ready => TargetEvent::ReadyReceived {
            attempt: attempt(),
            prepared: version(*n),
        },
        TargetAwaiting::Cutover => TargetEvent::CutoverReceived { attempt: attempt() },
        TargetAwaiting::OwnerCas => TargetEvent::CasApplied {
            version: version(*n),
        },
        TargetAwaiting::Dispatch => TargetEvent::DispatchOpened,
        TargetAwaiting::CompletionTally => {
            // Every accepted request's result stored and delivered.
            let accepted = unit.tally().map_or(0, |t| t.accepted.max(t.stored));
            TargetEvent::CompletionTally(CompletionTally {
                accepted,
                stored: accepted,
                pending_deliveries: 0,
            })
        }
        TargetAwaiting::CompletedRecord => {
            TargetEvent::CompletedRecorded(StageOutcome::Applied(version(*n)))
        }
        _ => return None,
    })
}

/// Drives a unit to the relay-ready point with the `Prepared` record at version 7.
fn relay_ready(session: bool) -> TargetUnit {
    let mut unit = started(session);
    unit.step(TargetEvent::PayloadAssembled {
        payload: summary(1_000),
    })
    .unwrap();
    unit.step(TargetEvent::Built).unwrap();
    unit.step(TargetEvent::ReadyReceived {
        attempt: attempt(),
        prepared: version(7),
    })
    .unwrap();
    unit
}

#[test]
fn a_restore_registers_its_temporary_queue_first() {
    let (unit, effects) = TargetUnit::start(target_plan(false));
    assert_eq!(effects, vec![TargetEffect::RegisterTemporaryQueue]);
    assert_eq!(unit.stage(), TargetStage::Receiving);
}

#[test]
fn a_payload_that_differs_from_its_declaration_is_refused_and_never_built() {
    let mut unit = started(false);
    let wrong = PayloadSummary {
        crc32c: 1,
        ..summary(1_000)
    };
    let effects = unit
        .step(TargetEvent::PayloadAssembled { payload: wrong })
        .unwrap();
    assert_eq!(
        effects,
        vec![
            TargetEffect::RefuseRestore {
                reason: RestoreFailure::ChecksumMismatch
            },
            TargetEffect::DiscardTemporaryQueue,
            TargetEffect::DiscardAssembly,
        ]
    );
    assert_eq!(
        unit.stage(),
        TargetStage::Refused(RestoreFailure::ChecksumMismatch)
    );
}

#[test]
fn a_repeated_header_with_another_declaration_ends_as_a_binding_conflict() {
    let mut unit = started(false);
    let same = TargetEvent::RestoreRepeated {
        attempt: attempt(),
        payload: summary(1_000),
    };
    assert_eq!(unit.step(same).unwrap(), vec![]);
    let other = TargetEvent::RestoreRepeated {
        attempt: attempt(),
        payload: summary(2_000),
    };
    let effects = unit.step(other).unwrap();
    assert_eq!(
        effects[0],
        TargetEffect::RefuseRestore {
            reason: RestoreFailure::BindingConflict
        }
    );
}

#[test]
fn another_attempts_events_change_nothing() {
    let mut unit = started(false);
    let before = unit.clone();
    let err = unit
        .step(TargetEvent::AbortReceived {
            attempt: stale_attempt(),
        })
        .unwrap_err();
    assert_eq!(err.kind(), TargetErrorKind::StaleBinding);
    assert_eq!(unit, before);
}

#[test]
fn a_built_unit_is_accepted_and_ready_answers_relay_ready_and_starts_the_wait() {
    let mut unit = started(false);
    let effects = unit
        .step(TargetEvent::PayloadAssembled {
            payload: summary(1_000),
        })
        .unwrap();
    assert_eq!(
        effects,
        vec![TargetEffect::BuildHidden {
            mode: RestoreMode::Preserve
        }]
    );
    assert_eq!(
        unit.step(TargetEvent::Built).unwrap(),
        vec![TargetEffect::AcceptRestore]
    );
    let ready = TargetEvent::ReadyReceived {
        attempt: attempt(),
        prepared: version(7),
    };
    assert_eq!(
        unit.step(ready.clone()).unwrap(),
        vec![
            TargetEffect::SendRelayReady { binding: binding() },
            TargetEffect::StartCutoverWait
        ]
    );
    assert_eq!(
        unit.step(ready).unwrap(),
        vec![TargetEffect::SendRelayReady { binding: binding() }],
        "a repeated ready is answered the same, the wait not restarted"
    );
}

#[test]
fn the_cutover_wait_runs_the_owner_change_once_conditioned_on_the_prepared_record() {
    let mut unit = relay_ready(false);
    assert_eq!(
        unit.step(TargetEvent::CutoverWaitElapsed).unwrap(),
        vec![TargetEffect::RunNewOwnerCas(cas(7))]
    );
    assert_eq!(
        unit.step(TargetEvent::CutoverReceived { attempt: attempt() })
            .unwrap(),
        vec![],
        "a late cutover does not run a second CAS"
    );
}

#[test]
fn a_lost_cas_reply_retries_the_same_write_until_the_restore_deadline() {
    let mut unit = relay_ready(false);
    unit.step(TargetEvent::CutoverReceived { attempt: attempt() })
        .unwrap();
    for _ in 0..3 {
        assert_eq!(
            unit.step(TargetEvent::CasReplyLost).unwrap(),
            vec![TargetEffect::RereadAndRetry(StoreWrite::NewOwner(cas(7)))]
        );
    }
    assert_eq!(
        unit.step(TargetEvent::DeadlinePassed).unwrap(),
        vec![
            TargetEffect::RecordLocationUpdateFailed,
            TargetEffect::RemovePreparedTarget,
            release()
        ]
    );
    assert_eq!(unit.stage(), TargetStage::LocationUpdateFailed);
    let late = unit.step(TargetEvent::CasApplied {
        version: version(8),
    });
    assert_eq!(
        late.unwrap_err().kind(),
        TargetErrorKind::Ended,
        "a late Store reply for a terminal Restore does not reactivate the object"
    );
}

#[test]
fn a_confirmed_owner_change_opens_dispatch_and_updates_the_bound_session() {
    let mut unit = relay_ready(true);
    unit.step(TargetEvent::CutoverReceived { attempt: attempt() })
        .unwrap();
    assert_eq!(
        unit.step(TargetEvent::CasApplied {
            version: version(8)
        })
        .unwrap(),
        vec![
            TargetEffect::MergeQueuesAndOpenDispatch,
            TargetEffect::SendSessionRouteUpdate
        ]
    );
    assert_eq!(unit.stage(), TargetStage::Committed);
    assert_eq!(
        unit.step(TargetEvent::DeadlinePassed).unwrap(),
        vec![],
        "no rollback after the owner change"
    );
}

#[test]
fn completed_is_recorded_only_after_dispatch_and_a_settled_tally() {
    let mut unit = relay_ready(false);
    unit.step(TargetEvent::CutoverReceived { attempt: attempt() })
        .unwrap();
    unit.step(TargetEvent::CasApplied {
        version: version(8),
    })
    .unwrap();
    let pending = CompletionTally {
        accepted: 2,
        stored: 2,
        pending_deliveries: 1,
    };
    assert_eq!(
        unit.step(TargetEvent::CompletionTally(pending)).unwrap(),
        vec![]
    );
    assert_eq!(unit.step(TargetEvent::DispatchOpened).unwrap(), vec![]);
    let settled = CompletionTally {
        pending_deliveries: 0,
        ..pending
    };
    let record = StageRecord::Completed {
        relocation: binding().relocation,
        condition: version(8),
    };
    assert_eq!(
        unit.step(TargetEvent::CompletionTally(settled)).unwrap(),
        vec![TargetEffect::RecordCompleted(record)]
    );
    unit.step(TargetEvent::CompletedRecorded(StageOutcome::Conflict))
        .unwrap();
    assert_eq!(unit.stage(), TargetStage::CompletionConflict);
    assert!(unit.stage().owns(), "no rollback: this node stays owner");
}

#[test]
fn a_cas_conflict_removes_the_prepared_target_without_opening_dispatch() {
    let mut unit = relay_ready(true);
    unit.step(TargetEvent::CutoverReceived { attempt: attempt() })
        .unwrap();
    assert_eq!(
        unit.step(TargetEvent::CasConflict).unwrap(),
        vec![TargetEffect::RemovePreparedTarget, release()]
    );
    assert_eq!(unit.stage(), TargetStage::OwnerChangeConflict);
}

#[test]
fn an_abort_before_relay_ready_is_accepted_discards_unrun_and_leaves_the_release_to_the_source() {
    let mut unit = relay_ready(false);
    assert_eq!(
        unit.step(TargetEvent::AbortReceived { attempt: attempt() })
            .unwrap(),
        vec![
            TargetEffect::DiscardTemporaryQueue,
            TargetEffect::DiscardAssembly
        ]
    );
    assert_eq!(unit.stage(), TargetStage::Aborted);
}

#[test]
fn a_source_gone_before_its_ready_abandons_and_releases_here_but_not_after() {
    let mut before_ready = started(false);
    assert_eq!(
        before_ready.step(TargetEvent::SourceGone).unwrap(),
        vec![
            TargetEffect::DiscardTemporaryQueue,
            TargetEffect::DiscardAssembly,
            release()
        ]
    );
    assert_eq!(before_ready.stage(), TargetStage::Abandoned);
    let mut after_ready = relay_ready(false);
    assert_eq!(after_ready.step(TargetEvent::SourceGone).unwrap(), vec![]);
    assert_eq!(
        after_ready.step(TargetEvent::CutoverWaitElapsed).unwrap(),
        vec![TargetEffect::RunNewOwnerCas(cas(7))],
        "after relay-ready the cutover wait runs the CAS without the source"
    );
}

/// One step of a generated history.
#[derive(Debug, Clone)]
enum Step {
    Next,
    Any(TargetEvent),
}

fn any_attempt() -> impl Strategy<Value = zlink_relocation::unit::TargetAttemptGeneration> {
    prop_oneof![4 => Just(attempt()), 1 => Just(stale_attempt())]
}

fn any_event() -> impl Strategy<Value = TargetEvent> {
    let payload = prop_oneof![3 => Just(summary(1_000)), 1 => Just(summary(7))];
    let failure = prop::sample::select(vec![
        RestoreFailure::ChecksumMismatch,
        RestoreFailure::TargetListMismatch,
        RestoreFailure::BindingConflict,
        RestoreFailure::TargetFailed,
    ]);
    let outcome = prop_oneof![
        (1u64..50).prop_map(|n| StageOutcome::Applied(version(n))),
        Just(StageOutcome::Conflict),
        Just(StageOutcome::ReplyLost),
    ];
    let tally = (0u64..3, 0u64..3, 0u64..2).prop_map(|(accepted, stored, pending)| {
        TargetEvent::CompletionTally(CompletionTally {
            accepted,
            stored,
            pending_deliveries: pending,
        })
    });
    prop_oneof![
        (any_attempt(), payload.clone())
            .prop_map(|(attempt, payload)| TargetEvent::RestoreRepeated { attempt, payload }),
        payload.prop_map(|payload| TargetEvent::PayloadAssembled { payload }),
        Just(TargetEvent::Built),
        failure.prop_map(|reason| TargetEvent::BuildFailed { reason }),
        (any_attempt(), 1u64..50).prop_map(|(attempt, n)| TargetEvent::ReadyReceived {
            attempt,
            prepared: version(n)
        }),
        any_attempt().prop_map(|attempt| TargetEvent::CutoverReceived { attempt }),
        Just(TargetEvent::CutoverWaitElapsed),
        (1u64..50).prop_map(|n| TargetEvent::CasApplied {
            version: version(n)
        }),
        Just(TargetEvent::CasConflict),
        Just(TargetEvent::CasReplyLost),
        Just(TargetEvent::DispatchOpened),
        tally,
        outcome.prop_map(TargetEvent::CompletedRecorded),
        any_attempt().prop_map(|attempt| TargetEvent::AbortReceived { attempt }),
        Just(TargetEvent::SourceGone),
        Just(TargetEvent::DeadlinePassed),
    ]
}

fn any_step() -> impl Strategy<Value = Step> {
    prop_oneof![3 => Just(Step::Next), 2 => any_event().prop_map(Step::Any)]
}

fn is_new_owner_write(effect: &TargetEffect) -> bool {
    matches!(
        effect,
        TargetEffect::RunNewOwnerCas(_) | TargetEffect::RereadAndRetry(StoreWrite::NewOwner(_))
    )
}

/// Runs a history and checks every invariant after every step; returns the unit.
fn run(session: bool, steps: &[Step]) -> Result<TargetUnit, TestCaseError> {
    let (mut unit, _) = TargetUnit::start(target_plan(session));
    let mut n = 100;
    let mut ready_version = None;
    let mut cas_confirmed = false;
    let mut cas_runs = 0;
    let mut opened = 0;
    let mut queue_ends = 0;
    let mut endings = 0;
    let mut deadline_passed_in_cas = false;
    for step in steps {
        let event = match step {
            Step::Next => happy(&unit, &mut n).unwrap_or(TargetEvent::DeadlinePassed),
            Step::Any(event) => event.clone(),
        };
        let before = unit.clone();
        match unit.step(event.clone()) {
            Err(_) => prop_assert_eq!(&unit, &before, "a refused event changed the unit"),
            Ok(effects) => {
                prop_assert!(
                    !before.stage().is_terminal(),
                    "a terminal unit accepted an event"
                );
                prop_assert!(
                    unit.stage().rank() >= before.stage().rank(),
                    "stage moved back: {:?} -> {:?}",
                    before.stage(),
                    unit.stage()
                );
                if let TargetEvent::ReadyReceived { prepared, .. } = &event {
                    ready_version.get_or_insert(prepared.clone());
                }
                if matches!(event, TargetEvent::CasApplied { .. }) {
                    cas_confirmed = true;
                }
                if matches!(event, TargetEvent::DeadlinePassed) && before.cas_in_flight() {
                    deadline_passed_in_cas = true;
                }
                for effect in &effects {
                    if is_new_owner_write(effect) {
                        prop_assert!(ready_version.is_some(), "owner CAS before the ready");
                        prop_assert!(!deadline_passed_in_cas, "CAS retried past the deadline");
                        let condition = match effect {
                            TargetEffect::RunNewOwnerCas(c)
                            | TargetEffect::RereadAndRetry(StoreWrite::NewOwner(c)) => {
                                c.condition.clone()
                            }
                            _ => unreachable!(),
                        };
                        prop_assert_eq!(Some(condition), ready_version.clone());
                    }
                    if matches!(effect, TargetEffect::RunNewOwnerCas(_)) {
                        cas_runs += 1;
                    }
                    if effect.opens_dispatch() {
                        prop_assert!(
                            cas_confirmed,
                            "dispatch opened without a confirmed owner change"
                        );
                        opened += 1;
                        queue_ends += 1;
                    }
                    if matches!(
                        effect,
                        TargetEffect::DiscardTemporaryQueue | TargetEffect::RemovePreparedTarget
                    ) {
                        queue_ends += 1;
                    }
                    if *effect == TargetEffect::RecordLocationUpdateFailed {
                        prop_assert_eq!(unit.stage(), TargetStage::LocationUpdateFailed);
                    }
                    if matches!(effect, TargetEffect::SendSessionRouteUpdate) {
                        prop_assert!(session && opened == 1);
                    }
                }
                if unit.stage().is_terminal() {
                    endings += 1;
                }
            }
        }
        prop_assert!(cas_runs <= 1, "the owner-change CAS ran twice");
        prop_assert!(opened <= 1, "dispatch opened twice");
        prop_assert!(queue_ends <= 1, "the temporary queue ended twice");
        prop_assert!(endings <= 1, "the Restore ended twice");
        if unit.stage().is_terminal() {
            prop_assert_eq!(
                queue_ends,
                1,
                "a Restore ended without ending its temporary queue"
            );
            prop_assert_eq!(
                opened == 1,
                unit.stage().owns(),
                "owning {:?} must mean dispatch opened",
                unit.stage()
            );
        }
    }
    Ok(unit)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_target_histories_keep_the_target_invariants(
        session in any::<bool>(),
        steps in prop::collection::vec(any_step(), 0..60),
    ) {
        run(session, &steps)?;
    }

    #[test]
    fn every_target_history_ends_in_exactly_one_terminal_stage(
        session in any::<bool>(),
        steps in prop::collection::vec(any_step(), 0..40),
    ) {
        let mut all = steps;
        all.extend(std::iter::repeat_n(Step::Next, 20));
        let unit = run(session, &all)?;
        prop_assert!(unit.stage().is_terminal(), "did not end: {:?}", unit.stage());
    }
}
