//! The root's Application Job Queue settings (spec 06 §3, inbound dispatch options) and their
//! startup validation into the queue's [`JobQueueLimits`].
//!
//! Without a manual `MaxQueuedApplicationJobs`, the effective maximum is the effective
//! processor count × the profile's jobs per processor. The effective processor count is the
//! minimum of the known positive startup values: the standard library's available
//! parallelism (the runtime-constrained logical count, the affinity mask and the cgroup
//! `floor(quota / period)`, minimum 1) and the worker count of the Tokio runtime that starts
//! the root (the explicit executor maximum); 1 when none is known.

use crate::mesh::JobQueueLimits;

use super::StartupError;

/// The largest `MaxQueuedApplicationJobs` (and effective maximum): 2^31-1.
pub const MAX_QUEUED_APPLICATION_JOBS: i64 = 2_147_483_647;

/// The default `ApplicationJobQueuePauseThresholdPercent`.
pub const DEFAULT_JOB_QUEUE_PAUSE_PERCENT: i64 = 80;

/// The default `ApplicationJobQueueResumeThresholdPercent`.
pub const DEFAULT_JOB_QUEUE_RESUME_PERCENT: i64 = 60;

/// The automatic job-cap profile (spec 06 §3). It shares its labels with the Core HWM
/// profile, nothing else.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ApplicationJobQueueProfile {
    /// 32 jobs per processor.
    Compact,
    /// 64 jobs per processor.
    LowLatency,
    /// 128 jobs per processor (the default).
    #[default]
    Balanced,
    /// 256 jobs per processor.
    Throughput,
}

impl ApplicationJobQueueProfile {
    /// The jobs per processor the profile allows.
    pub fn jobs_per_processor(self) -> u32 {
        match self {
            Self::Compact => 32,
            Self::LowLatency => 64,
            Self::Balanced => 128,
            Self::Throughput => 256,
        }
    }
}

/// The raw settings as the root builder collected them (validated at start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JobQueueSettings {
    pub(crate) profile: ApplicationJobQueueProfile,
    pub(crate) max_queued: Option<i64>,
    pub(crate) pause_percent: i64,
    pub(crate) resume_percent: i64,
}

impl Default for JobQueueSettings {
    fn default() -> Self {
        Self {
            profile: ApplicationJobQueueProfile::Balanced,
            max_queued: None,
            pause_percent: DEFAULT_JOB_QUEUE_PAUSE_PERCENT,
            resume_percent: DEFAULT_JOB_QUEUE_RESUME_PERCENT,
        }
    }
}

/// The effective processor count of this process now (module doc).
pub(crate) fn effective_processors() -> u32 {
    let parallelism = std::thread::available_parallelism()
        .ok()
        .map(|n| u32::try_from(n.get()).unwrap_or(u32::MAX));
    let workers = tokio::runtime::Handle::try_current()
        .ok()
        .map(|h| u32::try_from(h.metrics().num_workers()).unwrap_or(u32::MAX))
        .filter(|n| *n > 0);
    parallelism
        .into_iter()
        .chain(workers)
        .min()
        .unwrap_or(1)
        .max(1)
}

/// The queue's limits for `settings` on a host with `processors` effective processors, or
/// the startup error of the first rule broken.
pub(crate) fn validate(
    settings: JobQueueSettings,
    processors: u32,
) -> Result<JobQueueLimits, StartupError> {
    let percent = |setting: &'static str, value: i64, min: i64, max: i64| {
        if (min..=max).contains(&value) {
            Ok(value as u64)
        } else {
            Err(StartupError::JobQueueSettingOutOfRange {
                setting,
                value,
                min,
                max,
            })
        }
    };
    let pause = percent(
        "ApplicationJobQueuePauseThresholdPercent",
        settings.pause_percent,
        1,
        100,
    )?;
    let resume = percent(
        "ApplicationJobQueueResumeThresholdPercent",
        settings.resume_percent,
        0,
        99,
    )?;
    if resume >= pause {
        return Err(StartupError::JobQueueThresholdsInverted {
            pause: settings.pause_percent,
            resume: settings.resume_percent,
        });
    }
    let effective_max = match settings.max_queued {
        Some(max) => percent(
            "MaxQueuedApplicationJobs",
            max,
            1,
            MAX_QUEUED_APPLICATION_JOBS,
        )?,
        None => {
            let per = settings.profile.jobs_per_processor();
            u64::from(processors)
                .checked_mul(u64::from(per))
                .filter(|m| *m <= MAX_QUEUED_APPLICATION_JOBS as u64)
                .ok_or(StartupError::JobQueueOverflow {
                    processors,
                    jobs_per_processor: per,
                })?
        }
    };
    // Both are at most the effective maximum (percent ≤ 100), so they fit in u32.
    let pause_at = (effective_max * pause).div_ceil(100);
    let resume_at = effective_max * resume / 100;
    let fit = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    Ok(JobQueueLimits {
        effective_max: fit(effective_max),
        pause_at: fit(pause_at),
        resume_at: fit(resume_at),
    })
}
