//! The door every piece of new object work passes (spec 21 §5): starting an Actor, Spot or
//! Instance message job, local or from the mesh, and making a factory's activation live.
//! Past the host's local admission deadline the caller gets `Unavailable`
//! ([`UnavailableReason::AdmissionClosed`]) and nothing runs.
//!
//! The check is the admission gate's lock-free [`LocationRuntime::is_admitting`]: one atomic
//! load and one monotonic clock read, no lock and no allocation on the admitted path.

use std::sync::Arc;

use crate::messaging::{UnavailableReason, ZLinkError};
use zlink_location::LocationRuntime;

/// A cheap handle to the host's admission gate (clones share it).
#[derive(Clone)]
pub(crate) struct Door(Option<Arc<LocationRuntime>>);

impl Door {
    /// The door of the host whose location runtime is `location`.
    pub(crate) fn new(location: Arc<LocationRuntime>) -> Self {
        Self(Some(location))
    }

    /// A door without a gate, always open (activations built by unit tests with no location
    /// runtime).
    #[cfg(test)]
    pub(crate) fn unguarded() -> Self {
        Self(None)
    }

    /// Whether new object work may start now.
    pub(crate) fn is_open(&self) -> bool {
        self.0.as_ref().is_none_or(|l| l.is_admitting())
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
