//! `HostShutdown` closing callbacks (spec 28 §9 step 4, §12 item 9): every Entry, User and
//! Instance Spot gets one; a failure is `TeardownFailed`, the deadline `DeadlineExceeded`.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{DESK, Ev, Log, roots};
use zlink_testkit::Harness;
use crate::host::{ShutdownOutcome, ShutdownReason};
use crate::objects::{ClosingReason, ReadinessMode};

on_every_store!(
    host_shutdown_closing_callback_runs_for_every_spot,
    a_failing_closing_callback_is_teardown_failed,
    a_closing_callback_past_the_deadline_is_deadline_exceeded,
);

/// The HostShutdown closings of the Spots of node `a`, by id.
fn shutdown_closings_of_a(log: &Log) -> Vec<String> {
    let mut ids: Vec<String> = log
        .closings()
        .into_iter()
        .filter_map(|e| match e {
            Ev::Closing {
                node: "a",
                id,
                reason: ClosingReason::HostShutdown,
                ..
            } => Some(id),
            _ => None,
        })
        .collect();
    ids.sort();
    ids
}

async fn host_shutdown_closing_callback_runs_for_every_spot(h: &Harness) {
    let r = roots(h, ReadinessMode::AnyTurnBoundary, false).await;
    let entry = r.r[0]
        .0
        .object_host(0)
        .entry_spot
        .as_ref()
        .expect("an Entry Spot id")
        .as_str()
        .to_owned();
    let report = r.r[0].0.shutdown().await;
    assert_eq!(
        (report.outcome, report.reason),
        (ShutdownOutcome::Stopped, ShutdownReason::None),
        "{report:?}"
    );
    let mut want = vec![entry, r.room.id.as_str().to_owned(), DESK.to_owned()];
    want.sort();
    assert_eq!(
        shutdown_closings_of_a(&r.log),
        want,
        "the Entry Spot, the User Spot and the Instance Spot, once each; no member Actor"
    );
    r.shutdown().await;
}

async fn a_failing_closing_callback_is_teardown_failed(h: &Harness) {
    let r = roots(h, ReadinessMode::AnyTurnBoundary, false).await;
    r.log.fail_closing.store(true, Ordering::SeqCst);
    let report = r.r[0].0.shutdown().await;
    assert_eq!(
        (report.outcome, report.reason),
        (
            ShutdownOutcome::ForceStopped,
            ShutdownReason::TeardownFailed
        ),
        "{report:?}"
    );
    assert!(
        report
            .failures
            .iter()
            .any(|f| matches!(
                f,
                crate::status::ShutdownFailure::ClosingCallback { object, .. } if object.contains(DESK)
            )),
        "{:?}",
        report.failures
    );
    r.log.fail_closing.store(false, Ordering::SeqCst);
    r.shutdown().await;
}

async fn a_closing_callback_past_the_deadline_is_deadline_exceeded(h: &Harness) {
    let r = roots(h, ReadinessMode::AnyTurnBoundary, false).await;
    r.log.hang_closing.store(true, Ordering::SeqCst);
    let report = r.r[0].0.shutdown_within(Duration::from_secs(2)).await;
    assert_eq!(
        (report.outcome, report.reason),
        (
            ShutdownOutcome::ForceStopped,
            ShutdownReason::DeadlineExceeded
        ),
        "{report:?}"
    );
    r.log.hang_closing.store(false, Ordering::SeqCst);
    r.shutdown().await;
}
