//! [`FaultyLocationStore`]: a Location Store wrapper that injects faults.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use zlink_store_spi::{
    DynLocationStore, LocationStore, ReadResult, ScanRequest, ScanResult, StoreKey, StoreResult,
    WriteRequest, WriteResult,
};

use super::{Fault, OpKind, Switchboard, WriteHook};

/// One kind of Location Store operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LocationOp {
    /// [`LocationStore::read`].
    Read,
    /// [`LocationStore::write`] (the only mutating operation).
    Write,
    /// [`LocationStore::scan`].
    Scan,
}

impl LocationOp {
    /// Every operation kind.
    pub const ALL: [LocationOp; 3] = [LocationOp::Read, LocationOp::Write, LocationOp::Scan];
    /// The operations that never change anything: reads and scans.
    pub const READS: [LocationOp; 2] = [LocationOp::Read, LocationOp::Scan];
}

impl OpKind for LocationOp {
    const ALL_KINDS: &'static [Self] = &LocationOp::ALL;

    fn index(self) -> usize {
        self as usize
    }

    fn is_write(self) -> bool {
        self == LocationOp::Write
    }
}

const OPS: usize = LocationOp::ALL.len();

/// A Location Store that passes operations to an inner store, or injects faults into them, as
/// switched at runtime through `&self`.
///
/// Per operation kind ([`LocationOp`]) it holds a standing [`Fault`] (pass-through by
/// default) and an optional real-time delay; across kinds, an optional "the next N operations
/// get this fault" burst and an optional [`WriteHook`]. Every call is counted when it reaches
/// the wrapper (its future first polled), whatever its fault. One operation, in order:
///
/// 1. counted; its fault (the burst's while the burst lasts, else the standing one), delay and
///    hook are fixed;
/// 2. the delay elapses (real time, so operations submitted meanwhile proceed);
/// 3. [`Fault::FailBefore`] returns its error: nothing reaches the inner store;
/// 4. for a write, the hook runs; then the inner store runs the operation;
/// 5. [`Fault::FailAfter`] replaces a successful result with its error (the write applied).
///
/// Wraps any [`LocationStore`]; the default type parameter is the `Arc<dyn DynLocationStore>`
/// a runtime holds. Hand it on as `Arc<dyn DynLocationStore>` and keep an `Arc` to switch it:
///
/// ```
/// use std::sync::Arc;
/// use zlink_store_conformance::{Fault, FaultyLocationStore, LocationOp};
/// use zlink_store_spi::{DynLocationStore, MemoryLocationStore};
///
/// let memory: Arc<dyn DynLocationStore> = Arc::new(MemoryLocationStore::new());
/// let faulty = Arc::new(FaultyLocationStore::new(memory));
/// let for_the_runtime: Arc<dyn DynLocationStore> = faulty.clone();
/// faulty.set_fault(LocationOp::ALL, Fault::UNAVAILABLE); // the store is down
/// faulty.heal(); // and back
/// # drop(for_the_runtime);
/// ```
pub struct FaultyLocationStore<S = Arc<dyn DynLocationStore>> {
    inner: S,
    switches: Switchboard<OPS>,
}

impl<S: LocationStore> FaultyLocationStore<S> {
    /// Wraps `inner`, passing everything through.
    pub fn new(inner: S) -> Self {
        FaultyLocationStore {
            inner,
            switches: Switchboard::new(),
        }
    }

    /// Wraps `inner` with every write losing its reply ([`Fault::LOSE_REPLY`]): the lossy
    /// writer of [`crate::LocationCapabilities::with_lossy_writer`].
    pub fn losing_write_replies(inner: S) -> Self {
        let store = Self::new(inner);
        store.set_fault([LocationOp::Write], Fault::LOSE_REPLY);
        store
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Sets the standing fault of every operation kind in `ops`.
    pub fn set_fault(&self, ops: impl IntoIterator<Item = LocationOp>, fault: Fault) {
        self.switches.set_fault(ops, fault);
    }

    /// The standing fault of `op` (a running [`fail_next`](Self::fail_next) burst overrides
    /// it).
    pub fn fault(&self, op: LocationOp) -> Fault {
        self.switches.fault(op)
    }

    /// The next `count` operations of the kinds in `ops` get `fault`; after them the standing
    /// faults apply again. Replaces a running burst; `count` 0 ends it. For example
    /// `fail_next([LocationOp::Write], 2, Fault::UNAVAILABLE)` fails the next two writes.
    pub fn fail_next(&self, ops: impl IntoIterator<Item = LocationOp>, count: u64, fault: Fault) {
        self.switches.fail_next(ops, count, fault);
    }

    /// How many operations the running [`fail_next`](Self::fail_next) burst still covers.
    pub fn fail_next_remaining(&self) -> u64 {
        self.switches.burst_remaining()
    }

    /// Every operation of the kinds in `ops` waits `delay` of real time before going on
    /// (`None`: no delay).
    pub fn set_delay(&self, ops: impl IntoIterator<Item = LocationOp>, delay: Option<Duration>) {
        self.switches.set_delay(ops, delay);
    }

    /// Runs `hook` on every write that reaches the inner store, just before it is sent
    /// (`None`: no hook). Writes failed before the inner store do not run it.
    pub fn set_write_hook(&self, hook: Option<WriteHook>) {
        self.switches.set_write_hook(hook);
    }

    /// Back to passing everything through: standing faults, delays and any burst cleared. The
    /// write hook and the counters are kept.
    pub fn heal(&self) {
        self.switches.heal();
    }

    /// Calls of `op` that reached the wrapper (failed ones included).
    pub fn calls(&self, op: LocationOp) -> u64 {
        self.switches.calls(op)
    }

    /// Reads that reached the wrapper.
    pub fn reads(&self) -> u64 {
        self.calls(LocationOp::Read)
    }

    /// Writes that reached the wrapper.
    pub fn writes(&self) -> u64 {
        self.calls(LocationOp::Write)
    }

    /// Scan pages that reached the wrapper.
    pub fn scans(&self) -> u64 {
        self.calls(LocationOp::Scan)
    }
}

impl<S: fmt::Debug> fmt::Debug for FaultyLocationStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("FaultyLocationStore");
        d.field("inner", &self.inner);
        self.switches.debug_fields::<LocationOp>(&mut d);
        d.finish()
    }
}

impl<S: LocationStore> LocationStore for FaultyLocationStore<S> {
    async fn read(&self, key: &StoreKey) -> StoreResult<ReadResult> {
        let plan = self.switches.enter(LocationOp::Read);
        plan.run(|| self.inner.read(key)).await
    }

    async fn write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
        let plan = self.switches.enter(LocationOp::Write);
        plan.run(|| self.inner.write(request)).await
    }

    async fn scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
        let plan = self.switches.enter(LocationOp::Scan);
        plan.run(|| self.inner.scan(request)).await
    }
}
