//! Host-level instruments (spec 28 §11), named apart from the object-relocation ones: the
//! host-state gauge, host Relocate and shutdown terminal results; and the process-wide
//! sampled gauges (mailbox depth, live activations) and lease renewals, kept as deltas so
//! several hosts in one process add up instead of overwriting each other.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use metrics::{Counter, Gauge};
use zlink_codec::records::HostState;

use super::labels::{HOST_STATES, ObjectLabel, RenewLabel, host_state_index};
use super::names;

/// The host-state gauge of one host: the host counts `1` in the state it is in.
#[derive(Debug)]
pub(crate) struct HostStateMetrics {
    gauges: [Gauge; 7],
    current: AtomicUsize,
}

impl HostStateMetrics {
    /// Resolves the gauges and counts this host as `Preparing`.
    pub(crate) fn new() -> Self {
        super::describe();
        let gauges = HOST_STATES.map(|s| metrics::gauge!(names::HOST_STATE, "state" => s.as_str()));
        let current = host_state_index(HostState::Preparing);
        gauges[current].increment(1.0);
        Self {
            gauges,
            current: AtomicUsize::new(current),
        }
    }

    /// The host is now in `to`.
    pub(crate) fn changed(&self, to: HostState) {
        let to = host_state_index(to);
        let from = self.current.swap(to, Ordering::AcqRel);
        if from != to {
            self.gauges[from].decrement(1.0);
            self.gauges[to].increment(1.0);
        }
    }
}

impl Default for HostStateMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for HostStateMetrics {
    fn drop(&mut self) {
        self.gauges[self.current.load(Ordering::Acquire)].decrement(1.0);
    }
}

/// A host Relocate ended (rare: a lookup per call is fine).
pub(crate) fn host_relocation(mode: &'static str, outcome: &'static str, reason: &'static str) {
    metrics::counter!(names::HOST_RELOCATION, "mode" => mode, "outcome" => outcome, "reason" => reason)
        .increment(1);
}

/// A host shutdown ended.
pub(crate) fn host_shutdown(outcome: &'static str, reason: &'static str) {
    metrics::counter!(names::HOST_SHUTDOWN, "outcome" => outcome, "reason" => reason).increment(1);
}

/// One sampled value published as a gauge delta (the last value this sampler published is
/// kept, so a gauge shared by several hosts carries their sum).
#[derive(Debug)]
struct Sampled {
    gauge: Gauge,
    last: AtomicU64,
}

impl Sampled {
    fn new(gauge: Gauge) -> Self {
        Self {
            gauge,
            last: AtomicU64::new(0),
        }
    }

    fn set(&self, now: u64) {
        let last = self.last.swap(now, Ordering::AcqRel);
        if now >= last {
            self.gauge.increment((now - last) as f64);
        } else {
            self.gauge.decrement((last - now) as f64);
        }
    }
}

impl Drop for Sampled {
    fn drop(&mut self) {
        self.set(0);
    }
}

/// One monotonic count published as counter increments.
#[derive(Debug)]
struct Counted {
    counter: Counter,
    last: AtomicU64,
}

impl Counted {
    fn new(counter: Counter) -> Self {
        Self {
            counter,
            last: AtomicU64::new(0),
        }
    }

    fn set(&self, now: u64) {
        let last = self.last.fetch_max(now, Ordering::AcqRel);
        if now > last {
            self.counter.increment(now - last);
        }
    }
}

/// What one host's sampler publishes every period: its mailboxes, its live activations, its
/// owner-lease renewals and its timer ticks.
#[derive(Debug)]
pub(crate) struct HostSamples {
    mailbox_jobs: Sampled,
    mailbox_bytes: Sampled,
    job_queue: Sampled,
    object_mailbox_jobs: Sampled,
    /// `[kind]`: actor, spot.
    live: [Sampled; 2],
    /// `[outcome]`: renewed, failed, taken over.
    renewals: [Counted; 3],
    /// `[outcome]`: ran, refused, skipped.
    ticks: [Counted; 3],
}

/// A host's sample: mailbox jobs and bytes, live Actors and Spots, lease renew counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Sample {
    /// Jobs in every node's mailbox.
    pub(crate) mailbox_jobs: u64,
    /// Bytes in every node's mailbox.
    pub(crate) mailbox_bytes: u64,
    /// Permits of the host's Application Job Queue in use.
    pub(crate) job_queue: u64,
    /// Jobs in every live activation's mailbox.
    pub(crate) object_mailbox_jobs: u64,
    /// Live Actor activations.
    pub(crate) actors: u64,
    /// Live Spot activations.
    pub(crate) spots: u64,
    /// Renewals so far: renewed, failed, taken over.
    pub(crate) renewals: [u64; 3],
    /// Timer ticks so far: ran, refused (past the admission deadline), skipped.
    pub(crate) ticks: [u64; 3],
}

impl HostSamples {
    /// Resolves the handles with the recorder installed now.
    pub(crate) fn new() -> Self {
        super::describe();
        Self {
            mailbox_jobs: Sampled::new(metrics::gauge!(names::MAILBOX_JOBS)),
            mailbox_bytes: Sampled::new(metrics::gauge!(names::MAILBOX_BYTES)),
            job_queue: Sampled::new(metrics::gauge!(names::JOB_QUEUE_JOBS)),
            object_mailbox_jobs: Sampled::new(metrics::gauge!(names::OBJECT_MAILBOX_JOBS)),
            live: [ObjectLabel::Actor, ObjectLabel::Spot]
                .map(|k| Sampled::new(metrics::gauge!(names::OBJECTS_LIVE, "kind" => k.as_str()))),
            renewals: [
                RenewLabel::Renewed,
                RenewLabel::Failed,
                RenewLabel::TakenOver,
            ]
            .map(|o| {
                Counted::new(metrics::counter!(names::LEASE_RENEWALS, "outcome" => o.as_str()))
            }),
            ticks: ["ran", "refused", "skipped"]
                .map(|o| Counted::new(metrics::counter!(names::TIMER_TICKS, "outcome" => o))),
        }
    }

    /// Publishes `sample`.
    pub(crate) fn publish(&self, sample: Sample) {
        self.mailbox_jobs.set(sample.mailbox_jobs);
        self.mailbox_bytes.set(sample.mailbox_bytes);
        self.job_queue.set(sample.job_queue);
        self.object_mailbox_jobs.set(sample.object_mailbox_jobs);
        self.live[0].set(sample.actors);
        self.live[1].set(sample.spots);
        for (c, n) in self.renewals.iter().zip(sample.renewals) {
            c.set(n);
        }
        for (c, n) in self.ticks.iter().zip(sample.ticks) {
            c.set(n);
        }
    }
}
