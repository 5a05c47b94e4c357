use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::StoreTime;

/// The clock an in-memory provider judges StoreNow and expiry by.
pub trait StoreClock: Send + Sync + fmt::Debug + 'static {
    /// The current provider time.
    fn now(&self) -> StoreTime;
}

/// The host wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl StoreClock for SystemClock {
    fn now(&self) -> StoreTime {
        StoreTime::host_now()
    }
}

/// A clock that only moves when told to; clones share the same time. Lets expiry tests run
/// without sleeping.
///
/// ```
/// use std::time::Duration;
/// use zlink_store_spi::{ManualClock, StoreClock, StoreTime};
/// let clock = ManualClock::new(StoreTime::from_millis(1_000));
/// clock.advance(Duration::from_millis(500));
/// assert_eq!(clock.now().as_millis(), 1_500);
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: StoreTime) -> Self {
        ManualClock(Arc::new(AtomicU64::new(start.as_millis())))
    }

    /// A clock standing at the host's current time.
    pub fn starting_now() -> Self {
        Self::new(StoreTime::host_now())
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the clock.
    pub fn set(&self, to: StoreTime) {
        self.0.store(to.as_millis(), Ordering::SeqCst);
    }
}

impl StoreClock for ManualClock {
    fn now(&self) -> StoreTime {
        StoreTime::from_millis(self.0.load(Ordering::SeqCst))
    }
}
