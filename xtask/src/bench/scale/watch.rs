//! What the scale bench watches besides its timings: each root's owner lease health, the
//! process's resident set, and the phases of a shutdown by the in-memory Store's key count.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use zlink_runtime::ZLinkHost;
use zlink_store_spi::MemoryLocationStore;

/// The owner lease health of some roots, sampled every 20 ms until dropped.
pub(super) struct LeaseWatch {
    /// Samples whose lease was `Renewing` (a renew failed) or `Expired` (lost).
    renewing: Arc<AtomicU64>,
    expired: Arc<AtomicU64>,
    samples: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl LeaseWatch {
    pub(super) fn start(hosts: Vec<ZLinkHost>) -> Self {
        let w = Self {
            renewing: Arc::default(),
            expired: Arc::default(),
            samples: Arc::default(),
            stop: Arc::default(),
        };
        let (renewing, expired, samples, stop) = (
            Arc::clone(&w.renewing),
            Arc::clone(&w.expired),
            Arc::clone(&w.samples),
            Arc::clone(&w.stop),
        );
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                for h in &hosts {
                    if let Some(health) = h.location_health() {
                        samples.fetch_add(1, Ordering::Relaxed);
                        match health.owner_lease.state {
                            zlink_runtime::status::LeaseState::Renewing => {
                                renewing.fetch_add(1, Ordering::Relaxed);
                            }
                            zlink_runtime::status::LeaseState::Expired => {
                                expired.fetch_add(1, Ordering::Relaxed);
                            }
                            _ => {}
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        w
    }

    /// Samples taken, `Renewing` ones, `Expired` ones.
    pub(super) fn counts(&self) -> (u64, u64, u64) {
        (
            self.samples.load(Ordering::Relaxed),
            self.renewing.load(Ordering::Relaxed),
            self.expired.load(Ordering::Relaxed),
        )
    }

    pub(super) fn describe(&self) -> String {
        let (samples, renewing, expired) = self.counts();
        format!(
            "owner lease sampled {samples} times every 20 ms: {renewing} Renewing (a renew \
             failed), {expired} Expired (lost)"
        )
    }
}

impl Drop for LeaseWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// VmRSS and VmHWM of this process, in bytes (0 when `/proc` cannot be read).
pub(super) fn rss() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

pub(super) fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

pub(super) fn describe_report(r: &zlink_runtime::status::ShutdownReport) -> String {
    let sweep = r
        .sweep
        .as_ref()
        .map(|s| format!("swept {} authority row(s)", s.removed))
        .unwrap_or_else(|| "no sweep".to_owned());
    let failures: Vec<String> = r.failures.iter().map(|f| f.to_string()).collect();
    format!(
        "{:?}/{:?}, {sweep}, {} abandoned, {} failure(s){}",
        r.outcome,
        r.reason,
        r.abandoned,
        failures.len(),
        if failures.is_empty() {
            String::new()
        } else {
            format!(": {}", failures.join("; "))
        }
    )
}

/// The in-memory Location Store's key count, read every 5 ms during a shutdown: the sweep is
/// the span over which it falls.
pub(super) struct SweepProbe {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<(Instant, usize)>>,
}

impl SweepProbe {
    pub(super) fn start(store: MemoryLocationStore) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let task = tokio::spawn(async move {
            let mut seen = vec![(Instant::now(), store.key_count())];
            while !s.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(5)).await;
                let keys = store.key_count();
                if seen.last().is_none_or(|(_, k)| *k != keys) {
                    seen.push((Instant::now(), keys));
                }
            }
            seen.push((Instant::now(), store.key_count()));
            seen
        });
        Self { stop, task }
    }

    /// The phases of a shutdown that started at `started`: before the first fall of the key
    /// count, while it falls, and after its last fall.
    pub(super) async fn finish(self, started: Instant) -> String {
        self.stop.store(true, Ordering::Relaxed);
        let Ok(seen) = self.task.await else {
            return "sweep probe failed".to_owned();
        };
        let Some((_, first_keys)) = seen.first().copied() else {
            return "sweep probe saw nothing".to_owned();
        };
        let Some((end, last_keys)) = seen.last().copied() else {
            return "sweep probe saw nothing".to_owned();
        };
        let falls: Vec<Instant> = seen
            .windows(2)
            .filter(|w| w[1].1 < w[0].1)
            .map(|w| w[1].0)
            .collect();
        let (Some(first), Some(last)) = (falls.first(), falls.last()) else {
            return format!("store keys {first_keys} -> {last_keys}: no sweep seen");
        };
        let s = |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64();
        format!(
            "phases by the Store's key count ({first_keys} -> {last_keys}): before the sweep \
             (drain, closing activations) {:.2} s, sweep {:.2} s, after it (descriptor, lease, \
             tasks) {:.2} s",
            s(started, *first),
            s(*first, *last),
            s(*last, end)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_file_gives_the_resident_set() {
        let (rss, peak) = rss();
        assert!(rss > 0 && peak >= rss);
    }
}
