//! [`FaultyRelocationStore`]: a Relocation Store wrapper that injects faults.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use zlink_store_spi::{
    BlobReadResult, BlobRef, Deleted, DynRelocationStore, PutResult, RelocationStore, RenewResult,
    Retention, StoreResult,
};

use super::{Fault, OpKind, Switchboard, WriteHook};

/// One kind of Relocation Store operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RelocationOp {
    /// [`RelocationStore::put`].
    Put,
    /// [`RelocationStore::read`].
    Read,
    /// [`RelocationStore::renew`].
    Renew,
    /// [`RelocationStore::delete`].
    Delete,
}

impl RelocationOp {
    /// Every operation kind.
    pub const ALL: [RelocationOp; 4] = [
        RelocationOp::Put,
        RelocationOp::Read,
        RelocationOp::Renew,
        RelocationOp::Delete,
    ];
    /// The operations that may change something (the "writes" of the write hook): put, renew
    /// and delete.
    pub const WRITES: [RelocationOp; 3] =
        [RelocationOp::Put, RelocationOp::Renew, RelocationOp::Delete];
}

impl OpKind for RelocationOp {
    const ALL_KINDS: &'static [Self] = &RelocationOp::ALL;

    fn index(self) -> usize {
        self as usize
    }

    fn is_write(self) -> bool {
        self != RelocationOp::Read
    }
}

const OPS: usize = RelocationOp::ALL.len();

/// A Relocation Store that passes operations to an inner store, or injects faults into them,
/// as switched at runtime through `&self`: the Relocation Store twin of
/// [`FaultyLocationStore`](crate::FaultyLocationStore), with the same order of events per
/// operation. Its writes (for the write hook) are put, renew and delete
/// ([`RelocationOp::WRITES`]).
///
/// ```
/// use std::sync::Arc;
/// use zlink_store_conformance::{Fault, FaultyRelocationStore, InjectedError, RelocationOp};
/// use zlink_store_spi::{DynRelocationStore, FailureKind, MemoryRelocationStore};
///
/// let memory: Arc<dyn DynRelocationStore> = Arc::new(MemoryRelocationStore::new());
/// let faulty = Arc::new(FaultyRelocationStore::new(memory));
/// // The next three puts fail with a backend error, then puts pass through again.
/// let backend = InjectedError::Failure(FailureKind::Backend);
/// faulty.fail_next([RelocationOp::Put], 3, Fault::FailBefore(backend));
/// assert_eq!(faulty.fail_next_remaining(), 3);
/// ```
pub struct FaultyRelocationStore<S = Arc<dyn DynRelocationStore>> {
    inner: S,
    switches: Switchboard<OPS>,
}

impl<S: RelocationStore> FaultyRelocationStore<S> {
    /// Wraps `inner`, passing everything through.
    pub fn new(inner: S) -> Self {
        FaultyRelocationStore {
            inner,
            switches: Switchboard::new(),
        }
    }

    /// Wraps `inner` with every put losing its reply ([`Fault::LOSE_REPLY`]): the lossy putter
    /// of [`crate::RelocationCapabilities::with_lossy_putter`].
    pub fn losing_put_replies(inner: S) -> Self {
        let store = Self::new(inner);
        store.set_fault([RelocationOp::Put], Fault::LOSE_REPLY);
        store
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Sets the standing fault of every operation kind in `ops`.
    pub fn set_fault(&self, ops: impl IntoIterator<Item = RelocationOp>, fault: Fault) {
        self.switches.set_fault(ops, fault);
    }

    /// The standing fault of `op` (a running [`fail_next`](Self::fail_next) burst overrides
    /// it).
    pub fn fault(&self, op: RelocationOp) -> Fault {
        self.switches.fault(op)
    }

    /// The next `count` operations of the kinds in `ops` get `fault`; after them the standing
    /// faults apply again. Replaces a running burst; `count` 0 ends it.
    pub fn fail_next(&self, ops: impl IntoIterator<Item = RelocationOp>, count: u64, fault: Fault) {
        self.switches.fail_next(ops, count, fault);
    }

    /// How many operations the running [`fail_next`](Self::fail_next) burst still covers.
    pub fn fail_next_remaining(&self) -> u64 {
        self.switches.burst_remaining()
    }

    /// Every operation of the kinds in `ops` waits `delay` of real time before going on
    /// (`None`: no delay).
    pub fn set_delay(&self, ops: impl IntoIterator<Item = RelocationOp>, delay: Option<Duration>) {
        self.switches.set_delay(ops, delay);
    }

    /// Runs `hook` on every put, renew and delete that reaches the inner store, just before it
    /// is sent (`None`: no hook). Operations failed before the inner store do not run it.
    pub fn set_write_hook(&self, hook: Option<WriteHook>) {
        self.switches.set_write_hook(hook);
    }

    /// Back to passing everything through: standing faults, delays and any burst cleared. The
    /// write hook and the counters are kept.
    pub fn heal(&self) {
        self.switches.heal();
    }

    /// Calls of `op` that reached the wrapper (failed ones included).
    pub fn calls(&self, op: RelocationOp) -> u64 {
        self.switches.calls(op)
    }

    /// Puts that reached the wrapper.
    pub fn puts(&self) -> u64 {
        self.calls(RelocationOp::Put)
    }

    /// Reads that reached the wrapper.
    pub fn reads(&self) -> u64 {
        self.calls(RelocationOp::Read)
    }

    /// Renews that reached the wrapper.
    pub fn renews(&self) -> u64 {
        self.calls(RelocationOp::Renew)
    }

    /// Deletes that reached the wrapper.
    pub fn deletes(&self) -> u64 {
        self.calls(RelocationOp::Delete)
    }
}

impl<S: fmt::Debug> fmt::Debug for FaultyRelocationStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("FaultyRelocationStore");
        d.field("inner", &self.inner);
        self.switches.debug_fields::<RelocationOp>(&mut d);
        d.finish()
    }
}

impl<S: RelocationStore> RelocationStore for FaultyRelocationStore<S> {
    async fn put(
        &self,
        reference: &BlobRef,
        payload: &Bytes,
        retention: Retention,
    ) -> StoreResult<PutResult> {
        let plan = self.switches.enter(RelocationOp::Put);
        plan.run(|| self.inner.put(reference, payload, retention))
            .await
    }

    async fn read(&self, reference: &BlobRef) -> StoreResult<BlobReadResult> {
        let plan = self.switches.enter(RelocationOp::Read);
        plan.run(|| self.inner.read(reference)).await
    }

    async fn renew(&self, reference: &BlobRef, retention: Retention) -> StoreResult<RenewResult> {
        let plan = self.switches.enter(RelocationOp::Renew);
        plan.run(|| self.inner.renew(reference, retention)).await
    }

    async fn delete(&self, reference: &BlobRef) -> StoreResult<Deleted> {
        let plan = self.switches.enter(RelocationOp::Delete);
        plan.run(|| self.inner.delete(reference)).await
    }
}
