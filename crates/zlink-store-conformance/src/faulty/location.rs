//! [`FaultyLocationStore`]: a Location Store wrapper that injects faults.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use zlink_store_spi::{
    DynLocationStore, LocationStore, ReadResult, ScanPrefix, ScanRequest, ScanResult, StoreError,
    StoreKey, StoreResult, UnreadableKey, UnreadableKind, WriteRequest, WriteResult,
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
    /// One-shot faults for the next operation that touches a key, in the order set.
    keyed: Mutex<Vec<Keyed>>,
    /// Keys reported unreadable, as a provider reports corrupt or foreign data.
    unreadable: Mutex<BTreeMap<StoreKey, UnreadableKind>>,
}

/// A one-shot fault for the next operation of `op` that touches a key `key` matches.
#[derive(Debug, Clone)]
struct Keyed {
    op: LocationOp,
    key: KeyMatch,
    fault: Fault,
    /// Real time the operation waits before its fault applies (`None`: none).
    delay: Option<Duration>,
    /// A one-shot fault for the next read of the same key, armed once this one is taken.
    then_read: Option<Fault>,
}

/// The keys a one-shot fault is for: one key, or every key under a prefix.
#[derive(Debug, Clone)]
enum KeyMatch {
    Exact(StoreKey),
    Under(ScanPrefix),
}

impl KeyMatch {
    fn matches(&self, key: &StoreKey) -> bool {
        match self {
            KeyMatch::Exact(k) => k == key,
            KeyMatch::Under(prefix) => prefix.matches(key),
        }
    }
}

impl<S: LocationStore> FaultyLocationStore<S> {
    /// Wraps `inner`, passing everything through.
    pub fn new(inner: S) -> Self {
        FaultyLocationStore {
            inner,
            switches: Switchboard::new(),
            keyed: Mutex::new(Vec::new()),
            unreadable: Mutex::new(BTreeMap::new()),
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

    /// The next write that touches `key` (puts or deletes it, or has a condition on it) gets
    /// `fault` in place of any other; once. For example `Fault::LOSE_REPLY` lets that one write
    /// apply and loses its reply, whatever the other writes do.
    pub fn fail_next_write_touching(&self, key: StoreKey, fault: Fault) {
        self.keyed.lock().push(Keyed {
            op: LocationOp::Write,
            key: KeyMatch::Exact(key),
            fault,
            delay: None,
            then_read: None,
        });
    }

    /// The next write that touches `key` first waits `delay` of real time, then gets `fault`
    /// in place of any other; once. For example `Fault::LOSE_REPLY` with a delay past a
    /// caller's deadline lets that write apply after the deadline and loses its reply (the
    /// caller hears of it only once its deadline has passed).
    pub fn fail_next_write_touching_late(&self, key: StoreKey, delay: Duration, fault: Fault) {
        self.keyed.lock().push(Keyed {
            op: LocationOp::Write,
            key: KeyMatch::Exact(key),
            fault,
            delay: Some(delay),
            then_read: None,
        });
    }

    /// The next write that touches `key` gets `fault`, and the next read of `key` after it
    /// (the writer's own settle read, say) gets `read`; once. For example
    /// `Fault::UNAVAILABLE` for both: the write changes nothing and its outcome cannot be
    /// settled by re-reading the key, so the writer hears the failure.
    pub fn fail_next_write_touching_and_its_read(&self, key: StoreKey, fault: Fault, read: Fault) {
        self.keyed.lock().push(Keyed {
            op: LocationOp::Write,
            key: KeyMatch::Exact(key),
            fault,
            delay: None,
            then_read: Some(read),
        });
    }

    /// The next read of `key` gets `fault` in place of any other; once.
    pub fn fail_next_read_of(&self, key: StoreKey, fault: Fault) {
        self.keyed.lock().push(Keyed {
            op: LocationOp::Read,
            key: KeyMatch::Exact(key),
            fault,
            delay: None,
            then_read: None,
        });
    }

    /// The next read of a key under `prefix` gets `fault` in place of any other; once. For a
    /// key the test cannot name in advance (a row keyed by an id the code under test draws):
    /// `fail_next_read_under(ScanPrefix::new("capacity-reservation\0")?, Fault::UNAVAILABLE)`
    /// fails the next read of any reservation row.
    pub fn fail_next_read_under(&self, prefix: ScanPrefix, fault: Fault) {
        self.keyed.lock().push(Keyed {
            op: LocationOp::Read,
            key: KeyMatch::Under(prefix),
            fault,
            delay: None,
            then_read: None,
        });
    }

    /// From now on `key` holds data the store cannot read, as a provider reports corrupt or
    /// foreign data (a Redis key of another type, say): scan pages list it in
    /// [`ScanPage::unreadable`](zlink_store_spi::ScanPage::unreadable) in place of its item
    /// (only while the inner store holds it), and reads and writes that touch it fail with
    /// [`StoreError::Unreadable`] without reaching the inner store. Kept by
    /// [`heal`](Self::heal).
    pub fn set_unreadable(&self, key: StoreKey, kind: UnreadableKind) {
        self.unreadable.lock().insert(key, kind);
    }

    fn unreadable_error(&self, touches: impl Fn(&StoreKey) -> bool) -> Option<StoreError> {
        let unreadable = self.unreadable.lock();
        let (key, kind) = unreadable.iter().find(|(k, _)| touches(k))?;
        Some(StoreError::Unreadable(UnreadableKey::new(
            key.clone(),
            *kind,
        )))
    }

    /// Takes the first one-shot fault (and its delay) set for `op` on keys the operation
    /// `touches`.
    fn take_keyed(
        &self,
        op: LocationOp,
        touches: impl Fn(&KeyMatch) -> bool,
    ) -> Option<(Fault, Option<Duration>)> {
        let mut keyed = self.keyed.lock();
        let at = keyed.iter().position(|k| k.op == op && touches(&k.key))?;
        let taken = keyed.remove(at);
        if let Some(read) = taken.then_read {
            keyed.push(Keyed {
                op: LocationOp::Read,
                key: taken.key.clone(),
                fault: read,
                delay: None,
                then_read: None,
            });
        }
        Some((taken.fault, taken.delay))
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

    /// Back to passing everything through: standing faults, delays, any burst and the one-shot
    /// keyed faults cleared. The write hook and the counters are kept.
    pub fn heal(&self) {
        self.switches.heal();
        self.keyed.lock().clear();
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
        d.field("keyed", &*self.keyed.lock());
        d.field("unreadable", &*self.unreadable.lock());
        d.finish()
    }
}

impl<S: LocationStore> LocationStore for FaultyLocationStore<S> {
    async fn read(&self, key: &StoreKey) -> StoreResult<ReadResult> {
        let mut plan = self.switches.enter(LocationOp::Read);
        if let Some((fault, delay)) = self.take_keyed(LocationOp::Read, |m| m.matches(key)) {
            plan = plan.with_fault(fault).with_delay(delay);
        }
        if let Some(e) = self.unreadable_error(|k| k == key) {
            return Err(e);
        }
        plan.run(|| self.inner.read(key)).await
    }

    async fn write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
        let mut plan = self.switches.enter(LocationOp::Write);
        let touches = |k: &StoreKey| {
            request.mutations().iter().any(|m| m.key() == k)
                || request.conditions().iter().any(|c| c.key() == k)
        };
        let touched = |m: &KeyMatch| {
            request.mutations().iter().any(|x| m.matches(x.key()))
                || request.conditions().iter().any(|c| m.matches(c.key()))
        };
        if let Some((fault, delay)) = self.take_keyed(LocationOp::Write, touched) {
            plan = plan.with_fault(fault).with_delay(delay);
        }
        if let Some(e) = self.unreadable_error(touches) {
            return Err(e);
        }
        plan.run(|| self.inner.write(request)).await
    }

    async fn scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
        let plan = self.switches.enter(LocationOp::Scan);
        let mut result = plan.run(|| self.inner.scan(request)).await;
        if let Ok(ScanResult::Page(page)) = &mut result {
            let unreadable = self.unreadable.lock();
            if !unreadable.is_empty() {
                let mut moved = Vec::new();
                page.items.retain(|i| match unreadable.get(&i.key) {
                    Some(kind) => {
                        moved.push(UnreadableKey::new(i.key.clone(), *kind));
                        false
                    }
                    None => true,
                });
                page.unreadable.extend(moved);
                page.unreadable.sort_by(|a, b| a.key.cmp(&b.key));
            }
        }
        result
    }
}
