//! Store and owner-lease health for operational readiness queries (guide-10 §4:
//! `storeHealthy()`, `ownerLeaseHealthy()`).
//!
//! Every Location Store call the location runtime makes (authority batches and reads, the
//! owner lease, descriptors, discovery, queries) goes through [`RecordingStore`], which notes
//! on the runtime's monotonic clock when the last call the Store answered ended and since
//! when calls keep failing. A call the Store answered is a success, whatever its outcome
//! (missing, conflict, unreadable key); one that failed, timed out, was cancelled by the
//! provider, or was dropped before it finished (a caller's own timeout) is a failure. An
//! argument refused before any I/O says nothing about the Store and is not counted. The
//! bookkeeping is three atomics per call.
//!
//! What is reported is health only: no Store key, version, owner token or relocation record
//! (guide-10 §4, spec 21 §7.4).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use zlink_store_spi::{
    DynLocationStore, LocationStore, ReadResult, ScanRequest, ScanResult, StoreErrorKind, StoreKey,
    StoreResult, WriteRequest, WriteResult,
};

use super::admission::AdmissionGate;
use super::clock::SharedClock;
use super::written::{Watch, WrittenBook};

/// No time recorded (times are stored as nanoseconds + 1 on the runtime clock).
const NONE: u64 = 0;

fn encode(t: Duration) -> u64 {
    u64::try_from(t.as_nanos())
        .unwrap_or(u64::MAX - 1)
        .saturating_add(1)
}

fn decode(v: u64) -> Option<Duration> {
    (v != NONE).then(|| Duration::from_nanos(v - 1))
}

/// What the location runtime has seen of its Location Store.
#[derive(Debug)]
pub(crate) struct StoreHealth {
    clock: SharedClock,
    last_success: AtomicU64,
    failing_since: AtomicU64,
    consecutive_failures: AtomicU64,
}

impl StoreHealth {
    pub(crate) fn new(clock: SharedClock) -> Self {
        Self {
            clock,
            last_success: AtomicU64::new(NONE),
            failing_since: AtomicU64::new(NONE),
            consecutive_failures: AtomicU64::new(0),
        }
    }

    fn success(&self) {
        self.last_success
            .store(encode(self.clock.now()), Ordering::Release);
        self.failing_since.store(NONE, Ordering::Release);
        self.consecutive_failures.store(0, Ordering::Release);
    }

    fn failure(&self) {
        let now = encode(self.clock.now());
        let _ = self
            .failing_since
            .compare_exchange(NONE, now, Ordering::AcqRel, Ordering::Acquire);
        self.consecutive_failures.fetch_add(1, Ordering::AcqRel);
    }

    fn record<T>(&self, result: &StoreResult<T>) {
        match result {
            Ok(_) => self.success(),
            Err(e) => match e.kind() {
                StoreErrorKind::InvalidArgument => {}
                StoreErrorKind::Unreadable => self.success(),
                _ => self.failure(),
            },
        }
    }

    /// A snapshot, with times as ages before now.
    pub(crate) fn snapshot(&self) -> StoreHealthStatus {
        let now = self.clock.now();
        let age = |v: &AtomicU64| decode(v.load(Ordering::Acquire)).map(|t| now.saturating_sub(t));
        StoreHealthStatus {
            last_success_age: age(&self.last_success),
            failing_for: age(&self.failing_since),
            consecutive_failures: self.consecutive_failures.load(Ordering::Acquire),
        }
    }
}

/// The Location Store's health as this host sees it (guide-10 §4 `storeHealthy()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreHealthStatus {
    /// How long ago the last Store call this host made was answered (`None`: none yet).
    pub last_success_age: Option<Duration>,
    /// How long every Store call has been failing, from the first failure after the last
    /// success (`None`: the last call was answered).
    pub failing_for: Option<Duration>,
    /// Failed calls since the last success.
    pub consecutive_failures: u64,
}

impl StoreHealthStatus {
    /// Healthy: the last Store call was answered (`failing_for` is `None`).
    pub fn is_healthy(&self) -> bool {
        self.failing_for.is_none()
    }
}

/// Where the owner lease stands (guide-10 §4 `ownerLeaseHealthy()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeaseState {
    /// Held, and the last renew (or the acquire) succeeded.
    Held,
    /// Held, but the last renew failed: admission stays open until the admission deadline,
    /// and the renew loop keeps trying.
    Renewing,
    /// Not held, or the admission deadline passed: no new work is admitted (spec 21 §5).
    Expired,
    /// Released by the host's shutdown.
    Released,
}

/// The owner lease's health: its state and the local admission deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseHealthStatus {
    /// Held, renewing, expired or released.
    pub state: LeaseState,
    /// How long until the local admission deadline passes (`None`: no lease held, or it
    /// passed already).
    pub admission_deadline_in: Option<Duration>,
    /// How long ago the local admission deadline passed (`None`: it has not passed, no
    /// lease deadline is known, or the lease was released).
    pub admission_deadline_passed_for: Option<Duration>,
}

impl LeaseHealthStatus {
    /// Healthy: the lease is held and its last renew succeeded.
    pub fn is_healthy(&self) -> bool {
        self.state == LeaseState::Held
    }
}

/// How the renew loop's attempts ended so far (monotonic counts, for metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseRenewals {
    /// Renews that succeeded.
    pub renewed: u64,
    /// Renews and takeovers that failed or timed out.
    pub failed: u64,
    /// Leases found lost and taken over under a new generation.
    pub taken_over: u64,
}

/// The renew loop's view of the lease, kept by the lease (one atomic), and its counts.
#[derive(Debug, Default)]
pub(crate) struct RenewState {
    state: AtomicU8,
    renewed: AtomicU64,
    failed: AtomicU64,
    taken_over: AtomicU64,
}

impl RenewState {
    const OK: u8 = 0;
    const FAILING: u8 = 1;
    const RELEASED: u8 = 2;

    fn ok(&self) {
        self.state.store(Self::OK, Ordering::Release);
    }

    /// A renew succeeded.
    pub(crate) fn renewed(&self) {
        self.renewed.fetch_add(1, Ordering::Relaxed);
        self.ok();
    }

    /// A lost lease was taken over.
    pub(crate) fn taken_over(&self) {
        self.taken_over.fetch_add(1, Ordering::Relaxed);
        self.ok();
    }

    /// A takeover of a lost lease failed (counted; the state stays what the gate says).
    pub(crate) fn takeover_failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    /// A renew failed.
    pub(crate) fn failing(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let _ = self.state.compare_exchange(
            Self::OK,
            Self::FAILING,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    pub(crate) fn released(&self) {
        self.state.store(Self::RELEASED, Ordering::Release);
    }

    /// The counts so far.
    pub(crate) fn renewals(&self) -> LeaseRenewals {
        LeaseRenewals {
            renewed: self.renewed.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            taken_over: self.taken_over.load(Ordering::Relaxed),
        }
    }

    /// The lease's state given the admission gate.
    pub(crate) fn status(&self, gate: &AdmissionGate) -> LeaseHealthStatus {
        let now = gate.now();
        let deadline = gate.deadline();
        let deadline_in = deadline.filter(|d| *d > now).map(|d| d.saturating_sub(now));
        let passed_for = deadline
            .filter(|d| *d <= now)
            .map(|d| now.saturating_sub(d));
        let state = match self.state.load(Ordering::Acquire) {
            Self::RELEASED => LeaseState::Released,
            _ if !gate.is_open() || deadline_in.is_none() => LeaseState::Expired,
            Self::FAILING => LeaseState::Renewing,
            _ => LeaseState::Held,
        };
        let released = state == LeaseState::Released;
        LeaseHealthStatus {
            state,
            admission_deadline_in: if released { None } else { deadline_in },
            admission_deadline_passed_for: if released { None } else { passed_for },
        }
    }
}

/// A cheap handle on a location runtime's health (clone it into status code).
#[derive(Debug, Clone)]
pub struct HealthProbe {
    pub(crate) store: Arc<StoreHealth>,
    pub(crate) renew: Arc<RenewState>,
    pub(crate) gate: Arc<AdmissionGate>,
}

impl HealthProbe {
    /// The Location Store's health.
    pub fn store(&self) -> StoreHealthStatus {
        self.store.snapshot()
    }

    /// The owner lease's health.
    pub fn lease(&self) -> LeaseHealthStatus {
        self.renew.status(&self.gate)
    }

    /// How the renew loop's attempts ended so far.
    pub fn renewals(&self) -> LeaseRenewals {
        self.renew.renewals()
    }
}

/// Ends a tracked write that was dropped before its answer as an unknown outcome.
struct WatchGuard<'a> {
    written: &'a WrittenBook,
    request: &'a WriteRequest,
    watch: Option<Watch>,
}

impl Drop for WatchGuard<'_> {
    fn drop(&mut self) {
        if let Some(watch) = self.watch.take() {
            self.written.after_write(watch, self.request, None, true);
        }
    }
}

/// Notes a failure when a Store call is dropped before it finished.
struct Pending<'a> {
    health: &'a StoreHealth,
    done: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.health.failure();
        }
    }
}

/// The Location Store as the runtime calls it: every call's end is noted in [`StoreHealth`],
/// and every acknowledged write of an authority row in the [`WrittenBook`] that verifies it
/// is still there after the next renew (`written.rs`).
#[derive(Debug)]
pub(crate) struct RecordingStore {
    inner: Arc<dyn DynLocationStore>,
    health: Arc<StoreHealth>,
    written: Option<Arc<WrittenBook>>,
}

impl RecordingStore {
    #[cfg(test)]
    pub(crate) fn wrap(
        inner: Arc<dyn DynLocationStore>,
        health: Arc<StoreHealth>,
    ) -> Arc<dyn DynLocationStore> {
        Arc::new(Self {
            inner,
            health,
            written: None,
        })
    }

    /// [`wrap`](Self::wrap), recording acknowledged writes in `written`.
    pub(crate) fn wrap_recording(
        inner: Arc<dyn DynLocationStore>,
        health: Arc<StoreHealth>,
        written: Arc<WrittenBook>,
    ) -> Arc<dyn DynLocationStore> {
        Arc::new(Self {
            inner,
            health,
            written: Some(written),
        })
    }

    async fn noted<T>(
        &self,
        call: impl std::future::Future<Output = StoreResult<T>>,
    ) -> StoreResult<T> {
        let mut pending = Pending {
            health: &self.health,
            done: false,
        };
        let result = call.await;
        pending.done = true;
        self.health.record(&result);
        result
    }
}

impl LocationStore for RecordingStore {
    async fn read(&self, key: &StoreKey) -> StoreResult<ReadResult> {
        self.noted(self.inner.read_dyn(key)).await
    }

    async fn write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
        let Some(written) = &self.written else {
            return self.noted(self.inner.write_dyn(request)).await;
        };
        let Some(watch) = written.before_write(request) else {
            return self.noted(self.inner.write_dyn(request)).await;
        };
        // A write dropped before its answer (a caller's time-out) may have applied: the
        // guard forgets its keys, as for any unknown outcome.
        let mut guard = WatchGuard {
            written,
            request,
            watch: Some(watch),
        };
        let result = self.noted(self.inner.write_dyn(request)).await;
        if let Some(watch) = guard.watch.take() {
            match &result {
                Ok(WriteResult::Applied { put_versions, .. }) => {
                    written.after_write(watch, request, Some(put_versions), false)
                }
                Ok(WriteResult::Conflict { .. }) => {
                    written.after_write(watch, request, None, false)
                }
                Err(e) => written.after_write(watch, request, None, e.outcome_unknown()),
            }
        }
        result
    }

    async fn scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
        self.noted(self.inner.scan_dyn(request)).await
    }

    async fn read_many(&self, keys: &[StoreKey]) -> StoreResult<Vec<ReadResult>> {
        self.noted(self.inner.read_many_dyn(keys)).await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use zlink_store_spi::{LocationStore, MemoryLocationStore, ReadResult, StoreError};

    use super::*;
    use crate::clock::ManualMonotonic;

    /// A store whose reads never answer and whose writes fail.
    #[derive(Debug)]
    struct Hung;
    impl LocationStore for Hung {
        async fn read(&self, _key: &StoreKey) -> StoreResult<ReadResult> {
            std::future::pending().await
        }
        async fn write(&self, _request: &WriteRequest) -> StoreResult<WriteResult> {
            Err(StoreError::failure_kind(
                zlink_store_spi::FailureKind::Unavailable,
            ))
        }
        async fn scan(&self, _request: &ScanRequest) -> StoreResult<ScanResult> {
            std::future::pending().await
        }
    }

    fn recording(
        store: Arc<dyn DynLocationStore>,
    ) -> (Arc<dyn DynLocationStore>, Arc<StoreHealth>, ManualMonotonic) {
        let clock = ManualMonotonic::new();
        let health = Arc::new(StoreHealth::new(Arc::new(clock.clone())));
        (RecordingStore::wrap(store, health.clone()), health, clock)
    }

    #[tokio::test]
    async fn an_answered_call_is_healthy_and_a_dropped_one_is_a_failure_since_then() {
        let key = StoreKey::new("probe").expect("key");
        let (store, health, clock) = recording(Arc::new(MemoryLocationStore::new()));
        assert_eq!(
            health.snapshot().last_success_age,
            None,
            "nothing called yet"
        );
        store.read(&key).await.expect("answered");
        clock.advance(Duration::from_secs(2));
        let s = health.snapshot();
        assert!(s.is_healthy());
        assert_eq!(s.last_success_age, Some(Duration::from_secs(2)));

        let (hung, health, clock) = recording(Arc::new(Hung));
        // A caller's own timeout drops the call: it counts as failed.
        let dropped = tokio::time::timeout(Duration::from_millis(10), hung.read(&key)).await;
        assert!(dropped.is_err());
        clock.advance(Duration::from_secs(3));
        let again = tokio::time::timeout(Duration::from_millis(10), hung.read(&key)).await;
        assert!(again.is_err());
        let s = health.snapshot();
        assert!(!s.is_healthy());
        assert_eq!(
            s.failing_for,
            Some(Duration::from_secs(3)),
            "since the first failure"
        );
        assert_eq!(s.consecutive_failures, 2);
        assert_eq!(s.last_success_age, None);
    }
}
