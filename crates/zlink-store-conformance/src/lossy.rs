//! Wrappers that lose replies: for providers with no natural way to make a reply go missing.

use bytes::Bytes;
use zlink_store_spi::{
    BlobReadResult, BlobRef, Deleted, LocationStore, PutResult, ReadResult, RelocationStore,
    RenewResult, Retention, ScanRequest, ScanResult, StoreError, StoreKey, StoreResult,
    WriteRequest, WriteResult,
};

/// A Location Store whose writes are applied by the inner store and then answer
/// [`StoreError::TimedOut`], as if the reply had been lost on the way back. Reads and scans pass
/// through.
#[derive(Debug, Clone)]
pub struct LossyLocationStore<S> {
    inner: S,
}

impl<S: LocationStore> LossyLocationStore<S> {
    /// Wraps a store (usually a clone sharing the data of the store under test).
    pub fn new(inner: S) -> Self {
        LossyLocationStore { inner }
    }
}

impl<S: LocationStore> LocationStore for LossyLocationStore<S> {
    async fn read(&self, key: &StoreKey) -> StoreResult<ReadResult> {
        self.inner.read(key).await
    }

    async fn write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
        self.inner.write(request).await?;
        Err(StoreError::TimedOut)
    }

    async fn scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
        self.inner.scan(request).await
    }
}

/// A Relocation Store whose puts are applied by the inner store and then answer
/// [`StoreError::TimedOut`]. Everything else passes through.
#[derive(Debug, Clone)]
pub struct LossyRelocationStore<S> {
    inner: S,
}

impl<S: RelocationStore> LossyRelocationStore<S> {
    /// Wraps a store (usually a clone sharing the data of the store under test).
    pub fn new(inner: S) -> Self {
        LossyRelocationStore { inner }
    }
}

impl<S: RelocationStore> RelocationStore for LossyRelocationStore<S> {
    async fn put(
        &self,
        reference: &BlobRef,
        payload: &Bytes,
        retention: Retention,
    ) -> StoreResult<PutResult> {
        self.inner.put(reference, payload, retention).await?;
        Err(StoreError::TimedOut)
    }

    async fn read(&self, reference: &BlobRef) -> StoreResult<BlobReadResult> {
        self.inner.read(reference).await
    }

    async fn renew(&self, reference: &BlobRef, retention: Retention) -> StoreResult<RenewResult> {
        self.inner.renew(reference, retention).await
    }

    async fn delete(&self, reference: &BlobRef) -> StoreResult<Deleted> {
        self.inner.delete(reference).await
    }
}
