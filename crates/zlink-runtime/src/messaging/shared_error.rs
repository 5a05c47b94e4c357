//! The shared cause of an error that must stay cheap to clone.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// An error shared between clones of the [`ZLinkError`](super::ZLinkError) that holds it as
/// its cause: an application's error of any type (a handler's or a relocation adapter's
/// failure; the default `E`), or a typed error of the runtime's dependencies (a Location
/// Store's, the transport's, the codec's).
///
/// Not an error type itself: the holding variant's [`std::error::Error::source`] is the
/// shared error directly (not a wrapper around it), so it downcasts to its own type and its
/// own `source` chain continues from there. It dereferences to that error.
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
pub struct SharedError<E: ?Sized + 'static = dyn std::error::Error + Send + Sync + 'static>(Arc<E>);

impl SharedError {
    /// Shares the application's `error`.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Arc::new(error))
    }
}

impl<E: ?Sized + 'static> SharedError<E> {
    /// The shared error, as an `Arc`.
    pub fn as_arc(&self) -> &Arc<E> {
        &self.0
    }
}

impl<E: ?Sized + 'static> Clone for SharedError<E> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<E: ?Sized + 'static> Deref for SharedError<E> {
    type Target = E;

    fn deref(&self) -> &E {
        &self.0
    }
}

impl<E: ?Sized + 'static> From<Arc<E>> for SharedError<E> {
    fn from(error: Arc<E>) -> Self {
        Self(error)
    }
}

impl From<super::BoxError> for SharedError {
    fn from(error: super::BoxError) -> Self {
        Self(Arc::from(error))
    }
}

impl<E: ?Sized + fmt::Debug + 'static> fmt::Debug for SharedError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl<E: ?Sized + fmt::Display + 'static> fmt::Display for SharedError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}
