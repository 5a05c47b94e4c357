//! The node's timer bounds (validated at startup) and the counters its ticks keep.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The default most timers one object holds.
pub const DEFAULT_MAX_TIMERS_PER_OBJECT: usize = 64;

/// The largest `max_timers_per_object` a node accepts.
pub const MAX_MAX_TIMERS_PER_OBJECT: usize = 4096;

/// The default shortest period of a periodic timer.
pub const DEFAULT_MIN_TIMER_PERIOD: Duration = Duration::from_millis(10);

/// The smallest `min_timer_period` a node accepts.
pub const MIN_MIN_TIMER_PERIOD: Duration = Duration::from_millis(1);

/// The largest `min_timer_period` a node accepts.
pub const MAX_MIN_TIMER_PERIOD: Duration = Duration::from_secs(3600);

/// The timer bounds of one Object Server node (`MeshNodeBuilder::timer_limits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TimerLimits {
    /// The most timers one object holds at a time (1..=[`MAX_MAX_TIMERS_PER_OBJECT`]).
    pub max_timers_per_object: usize,
    /// The shortest period of a periodic timer
    /// ([`MIN_MIN_TIMER_PERIOD`]..=[`MAX_MIN_TIMER_PERIOD`]).
    pub min_timer_period: Duration,
}

impl Default for TimerLimits {
    fn default() -> Self {
        Self {
            max_timers_per_object: DEFAULT_MAX_TIMERS_PER_OBJECT,
            min_timer_period: DEFAULT_MIN_TIMER_PERIOD,
        }
    }
}

impl TimerLimits {
    /// The limits with `max` timers per object and `min_period` as the shortest period
    /// (checked when the host starts).
    pub fn new(max: usize, min_period: Duration) -> Self {
        Self {
            max_timers_per_object: max,
            min_timer_period: min_period,
        }
    }
}

/// What happened to a node's ticks (tests and logs).
#[derive(Debug, Default)]
pub(crate) struct TimerCounters {
    /// Ticks whose handler ran.
    pub(crate) ran: AtomicU64,
    /// Ticks the admission gate refused at their start (spec 21 §5).
    pub(crate) refused: AtomicU64,
    /// Ticks skipped: the previous tick still waited, or the mailbox or the Application Job
    /// Queue was full.
    pub(crate) skipped: AtomicU64,
}

impl TimerCounters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// (ran, refused, skipped).
    pub(crate) fn get(&self) -> (u64, u64, u64) {
        (
            self.ran.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
            self.skipped.load(Ordering::Relaxed),
        )
    }
}

/// One node's validated limits with the counters every activation built there shares.
#[derive(Debug, Clone, Default)]
pub(crate) struct TimerConfig {
    pub(crate) limits: TimerLimits,
    pub(crate) counters: Arc<TimerCounters>,
}

impl TimerConfig {
    pub(crate) fn new(limits: TimerLimits) -> Self {
        Self {
            limits,
            counters: Arc::default(),
        }
    }
}

impl crate::objects::host::ObjectHost {
    /// The same host with the node's validated timer limits (every activation built here
    /// gets them through the door).
    pub(crate) fn with_timer_limits(mut self, limits: TimerLimits) -> Self {
        self.door = self.door.clone().with_timers(limits);
        self
    }

    /// The same host with its timer ticks drawing permits from the host's Application Job
    /// Queue (06 §3).
    pub(crate) fn with_job_queue(mut self, jobs: Arc<crate::mesh::JobQueue>) -> Self {
        self.door = self.door.clone().with_jobs(jobs);
        self
    }

    /// The counters of this node's timer ticks (sampled into `zlink.objects.timer.ticks`).
    pub(crate) fn timer_counters(&self) -> &TimerCounters {
        &self.door.timers().counters
    }
}
