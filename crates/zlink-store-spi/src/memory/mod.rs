//! In-memory reference providers: the embedded default for single-process use and the
//! reference every other provider is checked against.

mod clock;
mod location;
mod relocation;

pub use clock::{ManualClock, StoreClock, SystemClock};
pub use location::{
    ForeignCheckpoint, MemoryCheckpoint, MemoryLocationOptions, MemoryLocationStore,
};
pub use relocation::MemoryRelocationStore;

use std::sync::atomic::{AtomicU64, Ordering};

/// A process-unique id per store instance, so a cursor of one store is foreign to another.
fn next_instance_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    // Mix in the host time so ids differ between processes too (cursors are never persisted,
    // this only makes a stale cursor from another process fail as foreign).
    n ^ (crate::StoreTime::host_now().as_millis() << 20)
}
