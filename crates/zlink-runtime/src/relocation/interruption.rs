//! The relocation interruption of each unit (spec 28 §5 "Interruption target", §11
//! `zlink.relocation.interruption`): the time from the source admission seal to the target's
//! signal that held work is restored and processing can start. In this runtime that signal is
//! the cutover answer reporting that NewOwner applied and the target opened dispatch.
//!
//! The target (default 1 s) is never a timeout: a unit over it only logs a warning and is
//! recorded like any other; nothing is cancelled or rolled back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The default interruption target per unit (28 §5): 1 s.
pub(crate) const INTERRUPTION_TARGET: Duration = Duration::from_secs(1);

/// The upper bound of the first bucket: 100 µs. Bucket `i` holds durations up to
/// `100 µs × 2^i`; the last one holds everything longer.
const FIRST_BUCKET_NANOS: u64 = 100_000;
/// Buckets: 100 µs … 100 µs × 2^22 (about 7 minutes), then the overflow bucket.
const BUCKETS: usize = 24;

/// What the interruptions of the relocations of one object node look like so far.
///
/// The quantiles come from fixed log-spaced buckets (each twice the previous, from 100 µs):
/// a quantile is the upper bound of the bucket holding it, never more than [`max`](Self::max).
/// All zero when no unit has completed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct InterruptionSummary {
    /// Units measured: one per completed move (the seal to the processing-start signal).
    pub count: u64,
    /// The median interruption (bucket upper bound).
    pub p50: Duration,
    /// The 99th percentile interruption (bucket upper bound).
    pub p99: Duration,
    /// The longest interruption measured, exactly.
    pub max: Duration,
}

/// A lock-free histogram of unit interruptions.
pub(crate) struct Interruptions {
    buckets: [AtomicU64; BUCKETS],
    count: AtomicU64,
    max_nanos: AtomicU64,
    target: Duration,
    /// `zlink.relocation.interruption` (resolved once, with the registry).
    histogram: metrics::Histogram,
}

impl Default for Interruptions {
    fn default() -> Self {
        Self {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            max_nanos: AtomicU64::new(0),
            target: INTERRUPTION_TARGET,
            histogram: crate::telemetry::relocation::interruption(),
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The bucket of a duration of `n` nanoseconds.
fn bucket_of(n: u64) -> usize {
    let mut bound = FIRST_BUCKET_NANOS;
    for i in 0..BUCKETS - 1 {
        if n <= bound {
            return i;
        }
        bound = bound.saturating_mul(2);
    }
    BUCKETS - 1
}

/// The upper bound of bucket `i` (the overflow bucket has none: `u64::MAX`).
fn bound_of(i: usize) -> u64 {
    if i >= BUCKETS - 1 {
        return u64::MAX;
    }
    FIRST_BUCKET_NANOS.saturating_mul(1u64 << i)
}

impl Interruptions {
    /// Records the interruption of one unit; warns when it exceeds the target.
    pub(crate) fn record(&self, relocation: u128, took: Duration) {
        let n = nanos(took);
        self.buckets[bucket_of(n)].fetch_add(1, Ordering::Relaxed);
        self.max_nanos.fetch_max(n, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        crate::telemetry::relocation::record_interruption(&self.histogram, took);
        if took > self.target {
            tracing::warn!(
                relocation,
                interruption_ms = took.as_millis() as u64,
                target_ms = self.target.as_millis() as u64,
                "zlink.relocation.interruption: the unit exceeded the interruption target"
            );
        } else {
            tracing::debug!(
                relocation,
                interruption_us = took.as_micros() as u64,
                "zlink.relocation.interruption"
            );
        }
    }

    /// Records the interruption of a unit sealed at `sealed` (none: never sealed, nothing
    /// recorded) ending now.
    pub(crate) fn record_since(&self, relocation: u128, sealed: Option<tokio::time::Instant>) {
        if let Some(t) = sealed {
            self.record(relocation, t.elapsed());
        }
    }

    /// The summary so far.
    pub(crate) fn summary(&self) -> InterruptionSummary {
        Self::merged([self])
    }

    /// One summary over the units of several histograms (the object nodes of one host).
    pub(crate) fn merged<'a>(all: impl IntoIterator<Item = &'a Self>) -> InterruptionSummary {
        let mut counts = [0u64; BUCKETS];
        let mut max = 0;
        for h in all {
            for (c, b) in counts.iter_mut().zip(&h.buckets) {
                *c += b.load(Ordering::Relaxed);
            }
            max = max.max(h.max_nanos.load(Ordering::Relaxed));
        }
        let count: u64 = counts.iter().sum();
        if count == 0 {
            return InterruptionSummary::default();
        }
        let quantile = |q_per_mille: u64| {
            // The rank (1-based) of the quantile among `count` samples.
            let rank = (count * q_per_mille).div_ceil(1000).max(1);
            let mut seen = 0;
            for (i, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return Duration::from_nanos(bound_of(i).min(max));
                }
            }
            Duration::from_nanos(max)
        };
        InterruptionSummary {
            count,
            p50: quantile(500),
            p99: quantile(990),
            max: Duration::from_nanos(max),
        }
    }
}

impl std::fmt::Debug for Interruptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interruptions")
            .field("summary", &self.summary())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn no_unit_gives_an_all_zero_summary() {
        assert_eq!(
            Interruptions::default().summary(),
            InterruptionSummary::default()
        );
    }

    #[test]
    fn the_summary_counts_each_unit_and_bounds_quantiles_by_the_max() {
        let h = Interruptions::default();
        for _ in 0..98 {
            h.record(1, ms(1));
        }
        h.record(1, ms(50));
        h.record(1, ms(2_000));
        let s = h.summary();
        assert_eq!(s.count, 100);
        assert_eq!(s.max, ms(2_000));
        // 1 ms falls in the bucket up to 1.6 ms (100 µs × 16).
        assert!(s.p50 >= ms(1) && s.p50 <= Duration::from_micros(1_600));
        // The 99th of 100 is the 50 ms unit: its bucket bound is at most twice it.
        assert!(s.p99 >= ms(50) && s.p99 <= ms(100), "{:?}", s.p99);
    }

    #[test]
    fn a_unit_past_every_bucket_reports_its_exact_max() {
        let h = Interruptions::default();
        h.record(1, Duration::from_secs(3_600));
        let s = h.summary();
        assert_eq!(s.count, 1);
        assert_eq!(
            (s.p50, s.p99, s.max),
            (s.max, s.max, Duration::from_secs(3_600))
        );
    }
}
