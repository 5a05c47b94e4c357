//! The stores a root was given, and their disposal (spec 21 §2, 22 §7: "once registration
//! succeeds, the Framework is responsible for terminating the Store instance. It first finishes
//! work that uses the Store, then disposes of the instance exactly once").
//!
//! A store is an `Arc` the application may share — between roots in one process, or with its
//! own code. So a root disposes of a store when it is the store's **last owner**: at the end of
//! its shutdown, after every task that used the store ended, it calls the provider's `close`
//! if no one else holds the store (no other root that has not yet ended, no clone the
//! application kept). A store shared by several roots is closed by the last of them to end;
//! one the application still holds is left to the application (dropping the last clone of a
//! Redis provider closes its connection as well).
//!
//! Every part of a root reaches its store through one wrapper ([`Owned`]), so the root counts as
//! one holder of the application's `Arc` however many of its parts hold the wrapper, and
//! `Arc::strong_count` of the application's store tells exactly who else holds it.

use std::collections::BTreeMap;
use std::sync::Arc;

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use zlink_store_spi::{
    BlobReadResult, BlobRef, BoxFuture, Bytes, Deleted, DynLocationStore, DynRelocationStore,
    PutResult, ReadResult, RenewResult, Retention, ScanRequest, ScanResult, StoreKey, StoreResult,
    WriteRequest, WriteResult,
};

/// Per store (keyed by the address of the application's `Arc`): how many live wrappers hold it
/// and how many of those have ended their root. Entries live exactly as long as a wrapper, so
/// an address cannot be reused while it is keyed here.
static HOLDERS: Mutex<BTreeMap<usize, Holders>> = Mutex::new(BTreeMap::new());

#[derive(Debug, Default)]
struct Holders {
    live: usize,
    ended: usize,
    closed: bool,
}

/// The address that keys a store in [`HOLDERS`].
fn address<T: ?Sized>(store: &Arc<T>) -> usize {
    Arc::as_ptr(store).cast::<()>() as usize
}

/// A root's one hold on a store the application gave it.
#[derive(Debug)]
pub(crate) struct Owned<S: ?Sized> {
    inner: Arc<S>,
    /// Whether this root's use ended (counted once in [`Holders::ended`]).
    ended: AtomicBool,
}

impl<S: ?Sized> Owned<S> {
    fn new(inner: Arc<S>) -> Self {
        HOLDERS.lock().entry(address(&inner)).or_default().live += 1;
        Self {
            inner,
            ended: AtomicBool::new(false),
        }
    }

    /// Marks this root's use of the store ended; `Some(store)` when the caller must close it
    /// now: every other holder is a wrapper whose root has ended too, no one else holds the
    /// `Arc`, and it was not closed before. Decided under one lock, so of two roots ending at
    /// once exactly one closes.
    fn end(&self) -> Option<Arc<S>> {
        let mut holders = HOLDERS.lock();
        let h = holders.entry(address(&self.inner)).or_default();
        if !self.ended.swap(true, Ordering::SeqCst) {
            h.ended += 1;
        }
        let last = h.ended >= h.live && Arc::strong_count(&self.inner) == h.live && !h.closed;
        if last {
            h.closed = true;
        }
        last.then(|| self.inner.clone())
    }
}

impl<S: ?Sized> Drop for Owned<S> {
    fn drop(&mut self) {
        let key = address(&self.inner);
        let mut holders = HOLDERS.lock();
        if let Some(h) = holders.get_mut(&key) {
            h.live = h.live.saturating_sub(1);
            if self.ended.load(Ordering::SeqCst) {
                h.ended = h.ended.saturating_sub(1);
            }
            if h.live == 0 {
                holders.remove(&key);
            }
        }
    }
}

impl DynLocationStore for Owned<dyn DynLocationStore> {
    fn read_dyn<'a>(&'a self, key: &'a StoreKey) -> BoxFuture<'a, StoreResult<ReadResult>> {
        self.inner.read_dyn(key)
    }
    fn write_dyn<'a>(
        &'a self,
        request: &'a WriteRequest,
    ) -> BoxFuture<'a, StoreResult<WriteResult>> {
        self.inner.write_dyn(request)
    }
    fn scan_dyn<'a>(&'a self, request: &'a ScanRequest) -> BoxFuture<'a, StoreResult<ScanResult>> {
        self.inner.scan_dyn(request)
    }
    fn read_many_dyn<'a>(
        &'a self,
        keys: &'a [StoreKey],
    ) -> BoxFuture<'a, StoreResult<Vec<ReadResult>>> {
        self.inner.read_many_dyn(keys)
    }
    /// Closing goes through [`RootStores::dispose`] only: a part of the root never closes the
    /// store under the others.
    fn close_dyn(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

impl DynRelocationStore for Owned<dyn DynRelocationStore> {
    fn put_dyn<'a>(
        &'a self,
        reference: &'a BlobRef,
        payload: &'a Bytes,
        retention: Retention,
    ) -> BoxFuture<'a, StoreResult<PutResult>> {
        self.inner.put_dyn(reference, payload, retention)
    }
    fn read_dyn<'a>(
        &'a self,
        reference: &'a BlobRef,
    ) -> BoxFuture<'a, StoreResult<BlobReadResult>> {
        self.inner.read_dyn(reference)
    }
    fn renew_dyn<'a>(
        &'a self,
        reference: &'a BlobRef,
        retention: Retention,
    ) -> BoxFuture<'a, StoreResult<RenewResult>> {
        self.inner.renew_dyn(reference, retention)
    }
    fn delete_dyn<'a>(&'a self, reference: &'a BlobRef) -> BoxFuture<'a, StoreResult<Deleted>> {
        self.inner.delete_dyn(reference)
    }
    /// As for the Location Store: only [`RootStores::dispose`] closes.
    fn close_dyn(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// The stores one root was given, each held through one [`Owned`] wrapper.
#[derive(Debug, Default)]
pub(crate) struct RootStores {
    location: Option<Arc<Owned<dyn DynLocationStore>>>,
    relocation: Option<Arc<Owned<dyn DynRelocationStore>>>,
}

impl RootStores {
    /// Wraps the application's stores; the root's parts are given the returned stores.
    pub(crate) fn take(
        location: Option<Arc<dyn DynLocationStore>>,
        relocation: Option<Arc<dyn DynRelocationStore>>,
    ) -> Self {
        Self {
            location: location.map(|s| Arc::new(Owned::new(s))),
            relocation: relocation.map(|s| Arc::new(Owned::new(s))),
        }
    }

    /// The Location Store as this root's parts hold it.
    pub(crate) fn location(&self) -> Option<Arc<dyn DynLocationStore>> {
        self.location
            .clone()
            .map(|s| s as Arc<dyn DynLocationStore>)
    }

    /// The Relocation Store as this root's parts hold it.
    pub(crate) fn relocation(&self) -> Option<Arc<dyn DynRelocationStore>> {
        self.relocation
            .clone()
            .map(|s| s as Arc<dyn DynRelocationStore>)
    }

    /// Ends this root's use of its stores (call once, after every task of the root ended) and
    /// closes each store this root is the last owner of. Returns how many it closed.
    pub(crate) async fn dispose(&self) -> usize {
        let location = self.location.as_ref().and_then(|s| s.end());
        let relocation = self.relocation.as_ref().and_then(|s| s.end());
        let mut closed = 0;
        if let Some(s) = location {
            s.close_dyn().await;
            closed += 1;
        }
        if let Some(s) = relocation {
            s.close_dyn().await;
            closed += 1;
        }
        if closed > 0 {
            tracing::debug!(closed, "stores this root was the last owner of closed");
        }
        closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use zlink_store_spi::{LocationStore, MemoryLocationStore};

    /// A memory store that counts its closes.
    #[derive(Debug, Default)]
    struct Closing {
        store: MemoryLocationStore,
        closed: Arc<AtomicUsize>,
    }

    impl LocationStore for Closing {
        async fn read(&self, key: &StoreKey) -> StoreResult<ReadResult> {
            self.store.read(key).await
        }
        async fn write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
            self.store.write(request).await
        }
        async fn scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
            self.store.scan(request).await
        }
        async fn close(&self) {
            self.closed.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn closing() -> (Arc<dyn DynLocationStore>, Arc<AtomicUsize>) {
        let s = Closing::default();
        let closed = s.closed.clone();
        (Arc::new(s), closed)
    }

    #[tokio::test]
    async fn a_store_only_the_root_holds_is_closed_once_when_it_ends() {
        let (store, closed) = closing();
        let root = RootStores::take(Some(store), None);
        let part = root.location().expect("store");
        part.close_dyn().await;
        assert_eq!(closed.load(Ordering::SeqCst), 0, "a part never closes");
        assert_eq!(root.dispose().await, 1);
        assert_eq!(root.dispose().await, 0);
        assert_eq!(closed.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_store_the_application_still_holds_is_not_closed() {
        let (store, closed) = closing();
        let root = RootStores::take(Some(store.clone()), None);
        assert_eq!(root.dispose().await, 0);
        assert_eq!(closed.load(Ordering::SeqCst), 0);
        drop(store);
    }

    #[tokio::test]
    async fn a_store_two_roots_share_is_closed_by_the_last_to_end() {
        let (store, closed) = closing();
        let a = RootStores::take(Some(store.clone()), None);
        let b = RootStores::take(Some(store), None);
        assert_eq!(a.dispose().await, 0, "b has not ended");
        assert_eq!(closed.load(Ordering::SeqCst), 0);
        assert_eq!(b.dispose().await, 1);
        assert_eq!(closed.load(Ordering::SeqCst), 1);
        // An ended root dropped first changes nothing.
        drop(a);
        assert_eq!(b.dispose().await, 0);
    }

    #[tokio::test]
    async fn a_root_that_ended_and_was_dropped_no_longer_counts_as_ended() {
        let (store, closed) = closing();
        let a = RootStores::take(Some(store.clone()), None);
        let b = RootStores::take(Some(store.clone()), None);
        assert_eq!(a.dispose().await, 0);
        drop(a);
        let c = RootStores::take(Some(store), None);
        assert_eq!(c.dispose().await, 0, "b still runs");
        assert_eq!(closed.load(Ordering::SeqCst), 0);
        assert_eq!(b.dispose().await, 1);
        assert_eq!(closed.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_root_dropped_without_ending_leaves_the_other_the_last_owner() {
        let (store, closed) = closing();
        let a = RootStores::take(Some(store.clone()), None);
        let b = RootStores::take(Some(store), None);
        drop(a);
        assert_eq!(b.dispose().await, 1);
        assert_eq!(closed.load(Ordering::SeqCst), 1);
    }
}
