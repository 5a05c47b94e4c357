//! Fault-injecting store wrappers: pass operations through to an inner store, or fail them
//! before they reach it, or let them apply and then fail (a lost reply), delay them, count them,
//! and run a hook on every write. Everything is switched at runtime through `&self`, so a test
//! can hand the wrapper to the code under test as `Arc<dyn ...>` and keep switching it.

mod location;
mod relocation;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use zlink_store_spi::{FailureKind, StoreError, StoreResult};

pub use location::{FaultyLocationStore, LocationOp};
pub use relocation::{FaultyRelocationStore, RelocationOp};

/// A hook a faulty store runs on every write that reaches its inner store, just before the
/// write is sent (a test advances its manual clock by a latency here, say).
pub type WriteHook = Arc<dyn Fn() + Send + Sync>;

/// An error a fault answers with: a recipe for a [`StoreError`] (which is not `Clone`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InjectedError {
    /// [`StoreError::Failure`] of this kind (its source says the fault was injected).
    Failure(FailureKind),
    /// [`StoreError::TimedOut`].
    TimedOut,
    /// [`StoreError::Cancelled`].
    Cancelled,
}

impl InjectedError {
    /// The store error this stands for.
    pub fn to_error(self) -> StoreError {
        match self {
            InjectedError::Failure(kind) => {
                StoreError::failure(kind, "fault injected by a zlink-store-conformance wrapper")
            }
            InjectedError::TimedOut => StoreError::TimedOut,
            InjectedError::Cancelled => StoreError::Cancelled,
        }
    }
}

/// What a faulty store does with one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Fault {
    /// The operation goes to the inner store and its result comes back unchanged.
    #[default]
    PassThrough,
    /// The operation fails with this error before it reaches the inner store: nothing is sent
    /// and nothing changes.
    FailBefore(InjectedError),
    /// The operation runs on the inner store (a write applies), then this error is returned in
    /// place of its result. If the inner store itself fails, that error is returned instead.
    FailAfter(InjectedError),
}

impl Fault {
    /// The store is down: [`FailureKind::Unavailable`] before anything reaches the inner store.
    pub const UNAVAILABLE: Fault =
        Fault::FailBefore(InjectedError::Failure(FailureKind::Unavailable));

    /// The reply is lost: the operation applies on the inner store, then answers
    /// [`StoreError::TimedOut`].
    pub const LOSE_REPLY: Fault = Fault::FailAfter(InjectedError::TimedOut);

    /// Whether the operation reaches the inner store under this fault.
    pub fn reaches_inner(self) -> bool {
        !matches!(self, Fault::FailBefore(_))
    }
}

/// The operation kinds of one store kind, numbered `0..N`.
pub(crate) trait OpKind: Copy + fmt::Debug + 'static {
    /// Every kind, in index order.
    const ALL_KINDS: &'static [Self];
    fn index(self) -> usize;
    fn is_write(self) -> bool;
}

/// "The next `remaining` operations of the marked kinds get `fault`."
#[derive(Debug, Clone, Copy)]
struct Burst<const N: usize> {
    ops: [bool; N],
    remaining: u64,
    fault: Fault,
}

struct Settings<const N: usize> {
    faults: [Fault; N],
    delays: [Option<Duration>; N],
    burst: Option<Burst<N>>,
    write_hook: Option<WriteHook>,
}

/// The switches and counters shared by both faulty stores (one slot per operation kind).
pub(crate) struct Switchboard<const N: usize> {
    settings: Mutex<Settings<N>>,
    calls: [AtomicU64; N],
}

/// What one operation does, fixed when it reaches the wrapper.
pub(crate) struct Plan {
    fault: Fault,
    delay: Option<Duration>,
    hook: Option<WriteHook>,
}

impl Plan {
    /// The same operation with `fault` in place of the fault it was planned with.
    pub(crate) fn with_fault(mut self, fault: Fault) -> Self {
        self.fault = fault;
        self
    }

    /// The same operation waiting `delay` in place of its planned delay, when one is given.
    pub(crate) fn with_delay(mut self, delay: Option<Duration>) -> Self {
        if delay.is_some() {
            self.delay = delay;
        }
        self
    }

    /// Waits the delay, then fails before the inner store, or calls `inner` (after the write
    /// hook) and applies the after-fault to its result. `inner` is called only past the
    /// before-fault, so not even a provider that works when its future is created sees a
    /// failed-before operation.
    pub(crate) async fn run<T, F>(self, inner: impl FnOnce() -> F) -> StoreResult<T>
    where
        F: Future<Output = StoreResult<T>>,
    {
        if let Some(delay) = self.delay {
            tokio::time::sleep(delay).await;
        }
        if let Fault::FailBefore(error) = self.fault {
            return Err(error.to_error());
        }
        if let Some(hook) = self.hook {
            hook();
        }
        let result = inner().await;
        match self.fault {
            Fault::FailAfter(error) => {
                result?;
                Err(error.to_error())
            }
            _ => result,
        }
    }
}

fn mask<const N: usize, O: OpKind>(ops: impl IntoIterator<Item = O>) -> [bool; N] {
    let mut marked = [false; N];
    for op in ops {
        marked[op.index()] = true;
    }
    marked
}

impl<const N: usize> Switchboard<N> {
    pub(crate) fn new() -> Self {
        Switchboard {
            settings: Mutex::new(Settings {
                faults: [Fault::PassThrough; N],
                delays: [None; N],
                burst: None,
                write_hook: None,
            }),
            calls: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Counts the operation and fixes what it does.
    pub(crate) fn enter<O: OpKind>(&self, op: O) -> Plan {
        let i = op.index();
        self.calls[i].fetch_add(1, Ordering::SeqCst);
        let mut s = self.settings.lock();
        let mut fault = s.faults[i];
        if let Some(burst) = s.burst.as_mut().filter(|b| b.ops[i]) {
            fault = burst.fault;
            burst.remaining -= 1;
            if burst.remaining == 0 {
                s.burst = None;
            }
        }
        Plan {
            fault,
            delay: s.delays[i],
            hook: if op.is_write() {
                s.write_hook.clone()
            } else {
                None
            },
        }
    }

    pub(crate) fn set_fault<O: OpKind>(&self, ops: impl IntoIterator<Item = O>, fault: Fault) {
        let mut s = self.settings.lock();
        for op in ops {
            s.faults[op.index()] = fault;
        }
    }

    pub(crate) fn fault<O: OpKind>(&self, op: O) -> Fault {
        self.settings.lock().faults[op.index()]
    }

    pub(crate) fn fail_next<O: OpKind>(
        &self,
        ops: impl IntoIterator<Item = O>,
        count: u64,
        fault: Fault,
    ) {
        self.settings.lock().burst = (count > 0).then(|| Burst {
            ops: mask(ops),
            remaining: count,
            fault,
        });
    }

    pub(crate) fn burst_remaining(&self) -> u64 {
        self.settings.lock().burst.map_or(0, |b| b.remaining)
    }

    pub(crate) fn set_delay<O: OpKind>(
        &self,
        ops: impl IntoIterator<Item = O>,
        delay: Option<Duration>,
    ) {
        let mut s = self.settings.lock();
        for op in ops {
            s.delays[op.index()] = delay;
        }
    }

    pub(crate) fn set_write_hook(&self, hook: Option<WriteHook>) {
        self.settings.lock().write_hook = hook;
    }

    pub(crate) fn heal(&self) {
        let mut s = self.settings.lock();
        s.faults = [Fault::PassThrough; N];
        s.delays = [None; N];
        s.burst = None;
    }

    pub(crate) fn calls<O: OpKind>(&self, op: O) -> u64 {
        self.calls[op.index()].load(Ordering::SeqCst)
    }

    /// Debug fields for the wrapper's `Debug` impl.
    pub(crate) fn debug_fields<O: OpKind>(&self, d: &mut fmt::DebugStruct<'_, '_>) {
        let s = self.settings.lock();
        let per_op = |f: &dyn Fn(usize) -> String| -> Vec<String> {
            O::ALL_KINDS
                .iter()
                .map(|op| format!("{op:?}: {}", f(op.index())))
                .collect()
        };
        d.field("faults", &per_op(&|i| format!("{:?}", s.faults[i])));
        d.field("delays", &per_op(&|i| format!("{:?}", s.delays[i])));
        d.field(
            "calls",
            &per_op(&|i| self.calls[i].load(Ordering::SeqCst).to_string()),
        );
        d.field(
            "fail_next",
            &s.burst.map(|b| {
                let ops: Vec<O> = O::ALL_KINDS
                    .iter()
                    .copied()
                    .filter(|op| b.ops[op.index()])
                    .collect();
                format!("{} of {ops:?} -> {:?}", b.remaining, b.fault)
            }),
        );
        d.field("write_hook", &s.write_hook.is_some());
    }
}
