//! The Relocation Store SPI (spec 23): immutable blobs by framework-issued reference.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;

use crate::BoxFuture;
use crate::error::StoreResult;
use crate::types::{BlobRef, Retention, StoreTime};

/// The result of [`RelocationStore::put`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutResult {
    /// The blob was new and is now stored.
    Stored {
        /// When it expires, by the provider clock.
        expires_at: StoreTime,
        /// The provider clock at the put.
        store_now: StoreTime,
    },
    /// Byte-identical bytes were already stored under this reference; nothing changed (the
    /// expiry is the existing one).
    AlreadyStored {
        /// When the existing blob expires.
        expires_at: StoreTime,
        /// The provider clock at the put.
        store_now: StoreTime,
    },
    /// Different bytes are stored under this reference; nothing changed.
    Conflict {
        /// The provider clock at the put.
        store_now: StoreTime,
    },
}

/// The result of [`RelocationStore::read`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlobReadResult {
    /// The blob.
    Found {
        /// Its bytes; immutable while held.
        bytes: Bytes,
        /// When it expires.
        expires_at: StoreTime,
        /// The provider clock at the read.
        store_now: StoreTime,
    },
    /// Absent, deleted or expired by the provider clock.
    Missing {
        /// The provider clock at the read.
        store_now: StoreTime,
    },
}

/// The result of [`RelocationStore::renew`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RenewResult {
    /// The blob now expires at `expires_at` (the provider clock at the renew plus the retention).
    Renewed {
        /// The new expiry.
        expires_at: StoreTime,
        /// The provider clock at the renew.
        store_now: StoreTime,
    },
    /// Absent, deleted or expired; nothing changed.
    Missing {
        /// The provider clock at the renew.
        store_now: StoreTime,
    },
}

/// The result of [`RelocationStore::delete`]: the blob is gone (whether or not it existed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deleted {
    /// The provider clock at the delete.
    pub store_now: StoreTime,
}

/// A Relocation Store provider (spec 23): immutable byte blobs addressed by a framework-issued
/// reference. The provider never interprets bytes and never issues or changes references.
///
/// **Cancellation.** Futures are lazy: dropped before the first poll, no I/O. After that (or on a
/// time-out or transport error) the outcome is unknown; reconstruct it with
/// [`read`](Self::read), or by calling [`put`](Self::put) again with the same reference and
/// bytes (which answers `AlreadyStored` if the first one landed).
pub trait RelocationStore: Send + Sync + fmt::Debug + 'static {
    /// Stores `payload` (at most [`crate::MAX_BLOB_LEN`] bytes) under `reference` for
    /// `retention`, deciding atomically between `Stored`, `AlreadyStored` (byte-identical
    /// payload present) and `Conflict` (different payload present).
    fn put(
        &self,
        reference: &BlobRef,
        payload: &Bytes,
        retention: Retention,
    ) -> impl Future<Output = StoreResult<PutResult>> + Send;

    /// Reads a blob; expired blobs are `Missing`. Never mutates.
    fn read(&self, reference: &BlobRef)
    -> impl Future<Output = StoreResult<BlobReadResult>> + Send;

    /// Sets a live blob's expiry to the provider clock plus `retention`; the bytes never change.
    fn renew(
        &self,
        reference: &BlobRef,
        retention: Retention,
    ) -> impl Future<Output = StoreResult<RenewResult>> + Send;

    /// Deletes a blob; idempotent (deleting an absent blob succeeds).
    fn delete(&self, reference: &BlobRef) -> impl Future<Output = StoreResult<Deleted>> + Send;

    /// Ends the provider's use of its backend (a connection closed once the commands already
    /// sent are answered). The framework root calls it once, after every use of the Store
    /// ended, on a store no one else holds (spec 21 §2). Operations issued afterwards may
    /// fail. Calling it again does nothing more. The default does nothing.
    fn close(&self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// The object-safe companion of [`RelocationStore`], implemented for every `RelocationStore`;
/// `dyn DynRelocationStore` is itself a `RelocationStore`.
pub trait DynRelocationStore: Send + Sync + fmt::Debug + 'static {
    /// Boxed [`RelocationStore::put`].
    fn put_dyn<'a>(
        &'a self,
        reference: &'a BlobRef,
        payload: &'a Bytes,
        retention: Retention,
    ) -> BoxFuture<'a, StoreResult<PutResult>>;
    /// Boxed [`RelocationStore::read`].
    fn read_dyn<'a>(&'a self, reference: &'a BlobRef)
    -> BoxFuture<'a, StoreResult<BlobReadResult>>;
    /// Boxed [`RelocationStore::renew`].
    fn renew_dyn<'a>(
        &'a self,
        reference: &'a BlobRef,
        retention: Retention,
    ) -> BoxFuture<'a, StoreResult<RenewResult>>;
    /// Boxed [`RelocationStore::delete`].
    fn delete_dyn<'a>(&'a self, reference: &'a BlobRef) -> BoxFuture<'a, StoreResult<Deleted>>;
    /// Boxed [`RelocationStore::close`]. The default does nothing.
    fn close_dyn(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

impl<T: RelocationStore> DynRelocationStore for T {
    fn put_dyn<'a>(
        &'a self,
        reference: &'a BlobRef,
        payload: &'a Bytes,
        retention: Retention,
    ) -> BoxFuture<'a, StoreResult<PutResult>> {
        Box::pin(RelocationStore::put(self, reference, payload, retention))
    }
    fn read_dyn<'a>(
        &'a self,
        reference: &'a BlobRef,
    ) -> BoxFuture<'a, StoreResult<BlobReadResult>> {
        Box::pin(RelocationStore::read(self, reference))
    }
    fn renew_dyn<'a>(
        &'a self,
        reference: &'a BlobRef,
        retention: Retention,
    ) -> BoxFuture<'a, StoreResult<RenewResult>> {
        Box::pin(RelocationStore::renew(self, reference, retention))
    }
    fn delete_dyn<'a>(&'a self, reference: &'a BlobRef) -> BoxFuture<'a, StoreResult<Deleted>> {
        Box::pin(RelocationStore::delete(self, reference))
    }
    fn close_dyn(&self) -> BoxFuture<'_, ()> {
        Box::pin(RelocationStore::close(self))
    }
}

impl RelocationStore for dyn DynRelocationStore {
    async fn put(
        &self,
        reference: &BlobRef,
        payload: &Bytes,
        retention: Retention,
    ) -> StoreResult<PutResult> {
        self.put_dyn(reference, payload, retention).await
    }
    async fn read(&self, reference: &BlobRef) -> StoreResult<BlobReadResult> {
        self.read_dyn(reference).await
    }
    async fn renew(&self, reference: &BlobRef, retention: Retention) -> StoreResult<RenewResult> {
        self.renew_dyn(reference, retention).await
    }
    async fn delete(&self, reference: &BlobRef) -> StoreResult<Deleted> {
        self.delete_dyn(reference).await
    }
    async fn close(&self) {
        self.close_dyn().await;
    }
}

impl<S: RelocationStore + ?Sized> RelocationStore for Arc<S> {
    fn put(
        &self,
        reference: &BlobRef,
        payload: &Bytes,
        retention: Retention,
    ) -> impl Future<Output = StoreResult<PutResult>> + Send {
        (**self).put(reference, payload, retention)
    }
    fn read(
        &self,
        reference: &BlobRef,
    ) -> impl Future<Output = StoreResult<BlobReadResult>> + Send {
        (**self).read(reference)
    }
    fn renew(
        &self,
        reference: &BlobRef,
        retention: Retention,
    ) -> impl Future<Output = StoreResult<RenewResult>> + Send {
        (**self).renew(reference, retention)
    }
    fn delete(&self, reference: &BlobRef) -> impl Future<Output = StoreResult<Deleted>> + Send {
        (**self).delete(reference)
    }
    fn close(&self) -> impl Future<Output = ()> + Send {
        (**self).close()
    }
}
