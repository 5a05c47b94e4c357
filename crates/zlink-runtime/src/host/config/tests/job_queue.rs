//! Startup validation of the Application Job Queue settings (spec 06 §3): each at its bound
//! and past it, the effective maximum from the profile, and a refused setting that starts
//! nothing.

use super::*;
use crate::host::config::job_queue::{JobQueueSettings, effective_processors, validate};
use crate::host::config::{
    ApplicationJobQueueProfile, MAX_QUEUED_APPLICATION_JOBS, StartupErrorKind,
};

fn settings(max: Option<i64>, pause: i64, resume: i64) -> JobQueueSettings {
    JobQueueSettings {
        max_queued: max,
        pause_percent: pause,
        resume_percent: resume,
        ..JobQueueSettings::default()
    }
}

#[test]
fn the_default_cap_is_the_processors_times_128_with_pause_80_and_resume_60_percent() {
    let plan = start(root()).unwrap();
    let limits = plan.application_job_queue();
    let max = effective_processors() * 128;
    assert_eq!(limits.effective_max, max);
    assert_eq!(limits.pause_at, (max * 80).div_ceil(100));
    assert_eq!(limits.resume_at, max * 60 / 100);
}

#[test]
fn each_profile_sets_its_jobs_per_processor() {
    for (profile, per) in [
        (ApplicationJobQueueProfile::Compact, 32),
        (ApplicationJobQueueProfile::LowLatency, 64),
        (ApplicationJobQueueProfile::Balanced, 128),
        (ApplicationJobQueueProfile::Throughput, 256),
    ] {
        let s = JobQueueSettings {
            profile,
            ..JobQueueSettings::default()
        };
        assert_eq!(validate(s, 3).unwrap().effective_max, 3 * per);
    }
}

#[test]
fn pause_rounds_up_and_resume_rounds_down() {
    let l = validate(settings(Some(7), 50, 30), 1).unwrap();
    // 7 × 50% = 3.5 → 4; 7 × 30% = 2.1 → 2.
    assert_eq!((l.effective_max, l.pause_at, l.resume_at), (7, 4, 2));
}

#[test]
fn max_queued_application_jobs_is_accepted_at_its_bounds_and_refused_past_them() {
    for max in [1, MAX_QUEUED_APPLICATION_JOBS] {
        let plan = start(root().max_queued_application_jobs(max)).unwrap();
        assert_eq!(
            i64::from(plan.application_job_queue().effective_max),
            max,
            "the manual value replaces the profile"
        );
    }
    for max in [0, -1, MAX_QUEUED_APPLICATION_JOBS + 1] {
        let err = start(root().max_queued_application_jobs(max)).unwrap_err();
        assert!(
            matches!(err, StartupError::JobQueueSettingOutOfRange { value, setting: "MaxQueuedApplicationJobs", .. } if value == max),
            "{err:?}"
        );
        assert_eq!(err.kind(), StartupErrorKind::OutOfRange);
        assert!(err.is_configuration());
    }
}

#[test]
fn the_thresholds_are_accepted_at_their_bounds_and_refused_past_them() {
    for (pause, resume) in [(1, 0), (100, 99)] {
        start(root().application_job_queue_thresholds(pause, resume)).unwrap();
    }
    for (pause, resume, setting) in [
        (0, 0, "ApplicationJobQueuePauseThresholdPercent"),
        (101, 60, "ApplicationJobQueuePauseThresholdPercent"),
        (80, -1, "ApplicationJobQueueResumeThresholdPercent"),
        (100, 100, "ApplicationJobQueueResumeThresholdPercent"),
    ] {
        let err = start(root().application_job_queue_thresholds(pause, resume)).unwrap_err();
        assert!(
            matches!(err, StartupError::JobQueueSettingOutOfRange { setting: s, .. } if s == setting),
            "{pause}/{resume}: {err:?}"
        );
        assert_eq!(err.kind(), StartupErrorKind::OutOfRange);
    }
}

#[test]
fn a_resume_percent_not_below_the_pause_percent_is_refused() {
    start(root().application_job_queue_thresholds(61, 60)).unwrap();
    for (pause, resume) in [(60, 60), (50, 60)] {
        let err = start(root().application_job_queue_thresholds(pause, resume)).unwrap_err();
        assert!(
            matches!(err, StartupError::JobQueueThresholdsInverted { .. }),
            "{err:?}"
        );
        assert_eq!(err.kind(), StartupErrorKind::InvalidCombination);
    }
}

#[test]
fn a_profile_product_past_2_pow_31_minus_1_is_an_overflow_error() {
    let s = JobQueueSettings::default();
    // 16,777,215 × 128 = 2^31 - 128 fits; 16,777,216 × 128 = 2^31 does not.
    assert_eq!(
        validate(s, 16_777_215).unwrap().effective_max,
        16_777_215 * 128
    );
    let err = validate(s, 16_777_216).unwrap_err();
    assert!(
        matches!(
            err,
            StartupError::JobQueueOverflow {
                processors: 16_777_216,
                jobs_per_processor: 128
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.kind(), StartupErrorKind::OutOfRange);
}

#[tokio::test]
async fn a_refused_job_queue_setting_starts_nothing() {
    let store = location_store();
    let err = ZLink::builder()
        .location_store(Arc::clone(&store))
        .max_queued_application_jobs(0)
        .route_mesh(mesh("m"), |n| n)
        .build()
        .start()
        .await
        .expect_err("refused");
    assert_eq!(err.kind(), StartupErrorKind::OutOfRange);
    let written = zlink_testkit::snapshot_of(store.as_ref(), "").await;
    assert!(written.is_empty(), "nothing was written: {written:?}");
}
