//! The shared application cause of an error that must stay cheap to clone.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// An application's error shared between clones of the [`ZLinkError`](super::ZLinkError)
/// that holds it (a handler's or a relocation adapter's failure).
///
/// Not an error type itself: the holding variant's [`std::error::Error::source`] is the
/// application's error directly (not a wrapper around it), so it downcasts to the
/// application's type and its own `source` chain continues from there. It dereferences to
/// that error.
///
/// ```
/// use std::error::Error as _;
/// use zlink_runtime::ZLinkError;
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("the ledger is closed")]
/// struct LedgerClosed;
///
/// let err = ZLinkError::handler_failed("Close", LedgerClosed);
/// let source = err.source().expect("the application's error");
/// assert!(source.downcast_ref::<LedgerClosed>().is_some());
/// ```
#[derive(Clone)]
pub struct SharedError(Arc<dyn std::error::Error + Send + Sync + 'static>);

impl SharedError {
    /// Shares `error`.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Arc::new(error))
    }

    /// The shared error, as an `Arc`.
    pub fn as_arc(&self) -> &Arc<dyn std::error::Error + Send + Sync + 'static> {
        &self.0
    }
}

impl Deref for SharedError {
    type Target = dyn std::error::Error + Send + Sync + 'static;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl From<Arc<dyn std::error::Error + Send + Sync + 'static>> for SharedError {
    fn from(error: Arc<dyn std::error::Error + Send + Sync + 'static>) -> Self {
        Self(error)
    }
}

impl From<super::BoxError> for SharedError {
    fn from(error: super::BoxError) -> Self {
        Self(Arc::from(error))
    }
}

impl fmt::Debug for SharedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for SharedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}
