//! The host's local monotonic clock, injectable so lease stalls can be tested without sleeping.
//!
//! [`SystemMonotonic`] reads tokio's clock: outside a runtime with a paused clock that is
//! `std::time::Instant` itself (the same call, no cost added); inside one (the deterministic
//! simulation's hosts, a `start_paused` test) it is that runtime's virtual time, so an
//! admission deadline passes when the simulated lease does.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// A local monotonic clock: time elapsed since an arbitrary, fixed origin. It never goes back.
///
/// The admission deadline (spec 21 §5) lives on this clock, never on the Store's wall clock.
pub trait MonotonicClock: Send + Sync + fmt::Debug + 'static {
    /// The time elapsed since this clock's origin.
    fn now(&self) -> Duration;
}

/// The host's monotonic clock (tokio's [`Instant`]: the system's, or a paused runtime's).
#[derive(Debug, Clone, Copy)]
pub struct SystemMonotonic {
    origin: Instant,
}

impl SystemMonotonic {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        SystemMonotonic {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemMonotonic {
    fn default() -> Self {
        Self::new()
    }
}

impl MonotonicClock for SystemMonotonic {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// A monotonic clock that only moves when told to; clones share the same time.
///
/// ```
/// use std::time::Duration;
/// use zlink_location::{ManualMonotonic, MonotonicClock};
/// let clock = ManualMonotonic::new();
/// clock.advance(Duration::from_millis(1500));
/// assert_eq!(clock.now(), Duration::from_millis(1500));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualMonotonic(Arc<AtomicU64>);

impl ManualMonotonic {
    /// A clock standing at its origin.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward (saturating at `u64::MAX` nanoseconds).
    pub fn advance(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let _ = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
                Some(v.saturating_add(nanos))
            });
    }
}

impl MonotonicClock for ManualMonotonic {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::SeqCst))
    }
}

/// A shared clock handle.
pub(crate) type SharedClock = Arc<dyn MonotonicClock>;
