//! The door every piece of new object work passes (spec 21 §5): starting an Actor, Spot or
//! Instance message job, local or from the mesh, and making a factory's activation live.
//! Past the host's local admission deadline the caller gets `Unavailable`
//! ([`UnavailableReason::AdmissionClosed`]) and nothing runs.
//!
//! The check is the admission gate's lock-free [`LocationRuntime::is_admitting`]: one atomic
//! load and one monotonic clock read, no lock and no allocation on the admitted path.

use std::sync::Arc;

use super::timer::{TimerConfig, TimerLimits};
use crate::messaging::{UnavailableReason, ZLinkError};
use zlink_location::{AdmissionOp, LocationRuntime};

/// A cheap handle to the host's admission gate (clones share it). It also carries the node's
/// timer limits and counters, so every activation built through the door shares them.
#[derive(Clone)]
pub(crate) struct Door(Option<Arc<LocationRuntime>>, TimerConfig);

impl Door {
    /// The door of the host whose location runtime is `location`.
    pub(crate) fn new(location: Arc<LocationRuntime>) -> Self {
        Self(Some(location), TimerConfig::default())
    }

    /// A door without a gate, always open (activations built by unit tests with no location
    /// runtime).
    #[cfg(test)]
    pub(crate) fn unguarded() -> Self {
        Self(None, TimerConfig::default())
    }

    /// The same door with the node's validated timer limits (fresh counters).
    pub(crate) fn with_timers(self, limits: TimerLimits) -> Self {
        Self(self.0, TimerConfig::new(limits))
    }

    /// The node's timer limits and counters.
    pub(crate) fn timers(&self) -> &TimerConfig {
        &self.1
    }

    /// Whether new object work may start now.
    pub(crate) fn is_open(&self) -> bool {
        self.0.as_ref().is_none_or(|l| l.is_admitting())
    }

    /// Asks the admission gate for a timer tick's start (`AdmissionOp::TimerStart`, spec 21
    /// §5): past the deadline the `Unavailable` refusal.
    pub(crate) fn admit_timer(&self) -> Result<(), ZLinkError> {
        match &self.0 {
            None => Ok(()),
            Some(l) => match l.admit(AdmissionOp::TimerStart) {
                Ok(_) => Ok(()),
                Err(e) => {
                    tracing::debug!(error = %e, "timer tick refused by the admission gate");
                    Err(refused())
                }
            },
        }
    }

    /// `Ok` while new object work may start; past the deadline the `Unavailable` refusal.
    pub(crate) fn check(&self) -> Result<(), ZLinkError> {
        if self.is_open() {
            Ok(())
        } else {
            Err(refused())
        }
    }
}

/// The refusal of new object work past the admission deadline.
pub(crate) fn refused() -> ZLinkError {
    ZLinkError::Unavailable {
        target: "new object work on this host".to_owned(),
        reason: UnavailableReason::AdmissionClosed,
    }
}
