//! Property tests: random event sequences (a mix of the next healthy event and arbitrary,
//! often wrong, events) against the machine's invariants.

use proptest::prelude::*;
use zlink_relocation::unit::{
    CompletionTally, Effect, Event, MAX_STATE_LEN, PayloadSummary, Policy, RecordedStage,
    RestoreFailure, Stage, StageOutcome, StoreWrite, Unit, UnitKind,
};

use crate::support::*;

/// One step of a generated history.
#[derive(Debug, Clone)]
enum Step {
    /// Whatever a healthy move produces next.
    Next,
    /// An arbitrary event.
    Any(Event),
}

fn any_attempt() -> impl Strategy<Value = zlink_relocation::unit::TargetAttemptGeneration> {
    prop_oneof![4 => Just(attempt()), 1 => Just(stale_attempt())]
}

fn any_stage() -> impl Strategy<Value = RecordedStage> {
    prop::sample::select(RecordedStage::ALL.to_vec())
}

fn any_outcome() -> impl Strategy<Value = StageOutcome> {
    prop_oneof![
        3 => (1u64..1000).prop_map(|n| StageOutcome::Applied(version(n))),
        1 => Just(StageOutcome::Conflict),
        1 => Just(StageOutcome::ReplyLost),
    ]
}

fn any_event() -> impl Strategy<Value = Event> {
    let state = prop_oneof![
        Just(None),
        Just(Some(0)),
        Just(Some(100)),
        Just(Some(MAX_STATE_LEN)),
        Just(Some(MAX_STATE_LEN + 1)),
    ];
    let total = prop_oneof![
        Just(0u64),
        Just(1_000),
        Just(MAX_STATE_LEN + 10),
        Just(u64::MAX)
    ];
    let failure = prop::sample::select(vec![
        RestoreFailure::ChecksumMismatch,
        RestoreFailure::TargetListMismatch,
        RestoreFailure::BindingConflict,
        RestoreFailure::TargetFailed,
    ]);
    let tally = (0u64..3, 0u64..3, 0u64..2).prop_map(|(accepted, stored, pending)| {
        Event::CompletionTally(CompletionTally {
            accepted,
            stored,
            pending_deliveries: pending,
        })
    });
    prop_oneof![
        Just(Event::TargetSecured {
            reservation: reservation()
        }),
        Just(Event::TargetUnavailable),
        (any_stage(), any_outcome())
            .prop_map(|(stage, outcome)| Event::StageRecorded { stage, outcome }),
        (state, total).prop_map(|(state_len, total_len)| Event::Captured {
            state_len,
            payload: PayloadSummary {
                total_len,
                chunk_count: 1,
                crc32c: 1
            }
        }),
        Just(Event::CaptureFailed),
        any_attempt().prop_map(|attempt| Event::RestoreAccepted { attempt }),
        (any_attempt(), failure)
            .prop_map(|(attempt, reason)| Event::RestoreFailed { attempt, reason }),
        any_attempt().prop_map(|attempt| Event::RelayReady { attempt }),
        Just(Event::CutoverSent),
        any_attempt().prop_map(|attempt| Event::CutoverReceived { attempt }),
        any_attempt().prop_map(|attempt| Event::CutoverWaitElapsed { attempt }),
        (any_attempt(), 1u64..1000).prop_map(|(attempt, n)| Event::CasApplied {
            attempt,
            version: version(n)
        }),
        any_attempt().prop_map(|attempt| Event::CasConflict { attempt }),
        any_attempt().prop_map(|attempt| Event::StoreReplyLost { attempt }),
        any_attempt().prop_map(|attempt| Event::DispatchOpened { attempt }),
        tally,
        Just(Event::MembersSettled),
        Just(Event::Deadline),
        Just(Event::CancelRequested),
    ]
}

fn any_step() -> impl Strategy<Value = Step> {
    prop_oneof![3 => Just(Step::Next), 2 => any_event().prop_map(Step::Any)]
}

fn any_plan() -> impl Strategy<Value = (UnitKind, Policy, bool)> {
    (
        prop::sample::select(UnitKind::ALL.to_vec()),
        prop::sample::select(Policy::ALL.to_vec()),
        any::<bool>(),
    )
}

fn is_new_owner_write(effect: &Effect) -> bool {
    matches!(
        effect,
        Effect::RunNewOwnerCas(_) | Effect::RereadAndRetry(StoreWrite::NewOwner(_))
    )
}

/// Runs a history and checks every invariant after every step; returns the unit.
fn run(
    kind: UnitKind,
    policy: Policy,
    session: bool,
    steps: &[Step],
) -> Result<Unit, TestCaseError> {
    let (mut unit, start_effects) = Unit::start(plan(kind, policy).with_bound_session(session));
    let mut releases = start_effects
        .iter()
        .filter(|e| matches!(e, Effect::ReleaseTarget { .. }))
        .count();
    let mut endings = usize::from(unit.stage().is_terminal());
    let mut prepared_recorded = false;
    let mut n = 1_000;
    for step in steps {
        let event = match step {
            Step::Next => match happy_event(&unit, &mut n) {
                Some(event) => event,
                None => Event::Deadline,
            },
            Step::Any(event) => event.clone(),
        };
        let before = unit.clone();
        let was_relay_ready = unit.relay_ready();
        let is_cancel = event == Event::CancelRequested;
        let records_prepared = matches!(
            &event,
            Event::StageRecorded {
                stage: RecordedStage::Prepared,
                outcome: StageOutcome::Applied(_)
            }
        );
        match unit.step(event) {
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
                if was_relay_ready {
                    prop_assert!(
                        !effects.iter().any(Effect::reopens_source),
                        "the source reopened after relay-ready: {:?}",
                        effects
                    );
                }
                if effects.iter().any(is_new_owner_write) {
                    prop_assert!(prepared_recorded, "owner CAS before Prepared was recorded");
                }
                let released = effects
                    .iter()
                    .filter(|e| matches!(e, Effect::ReleaseTarget { .. }))
                    .count();
                if is_cancel {
                    prop_assert_eq!(unit.stage(), Stage::Cancelled);
                    prop_assert!(!was_relay_ready);
                    prop_assert_eq!(released, 1, "cancel must release the target once");
                }
                if let Some(pos) = effects.iter().position(|e| *e == Effect::ReopenSource) {
                    prop_assert_eq!(pos, effects.len() - 1, "the source reopened before cleanup");
                }
                releases += released;
                if records_prepared {
                    prepared_recorded = true;
                }
                if unit.stage().is_terminal() {
                    endings += 1;
                }
            }
        }
        prop_assert!(releases <= 1, "the target was released twice");
        prop_assert!(endings <= 1, "the unit ended twice");
    }
    prop_assert_eq!(endings, usize::from(unit.stage().is_terminal()));
    Ok(unit)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_histories_keep_the_machine_invariants(
        (kind, policy, session) in any_plan(),
        steps in prop::collection::vec(any_step(), 0..60),
    ) {
        run(kind, policy, session, &steps)?;
    }

    #[test]
    fn every_history_ends_in_exactly_one_terminal_stage(
        (kind, policy, session) in any_plan(),
        steps in prop::collection::vec(any_step(), 0..40),
    ) {
        // Any prefix, then only healthy events: the unit always ends, once.
        let mut all = steps;
        all.extend(std::iter::repeat_n(Step::Next, 40));
        let unit = run(kind, policy, session, &all)?;
        prop_assert!(unit.stage().is_terminal(), "did not end: {:?}", unit.stage());
        prop_assert!(matches!(
            unit.stage(),
            Stage::Completed | Stage::Cancelled | Stage::Failed(_)
        ));
    }
}
