//! Relocation Store wrappers for testing the blob layer: recording, delaying, failing and
//! in-flight-measuring stores around the in-memory reference store.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use zlink_store_spi::{
    BlobReadResult, BlobRef, Deleted, MemoryRelocationStore, PutResult, RelocationStore,
    RenewResult, Retention, StoreError, StoreResult,
};

/// One operation seen by [`Recording`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Put(String),
    Read(String),
    Renew(String),
    Delete(String),
}

/// Records every operation, in the order they complete.
#[derive(Debug, Clone, Default)]
pub struct Recording<S> {
    pub inner: S,
    pub log: Arc<Mutex<Vec<Op>>>,
}

impl<S: RelocationStore> Recording<S> {
    pub fn new(inner: S) -> Self {
        Recording {
            inner,
            log: Arc::default(),
        }
    }

    pub fn ops(&self) -> Vec<Op> {
        self.log.lock().unwrap().clone()
    }
}

impl<S: RelocationStore> RelocationStore for Recording<S> {
    async fn put(&self, r: &BlobRef, p: &Bytes, t: Retention) -> StoreResult<PutResult> {
        let out = self.inner.put(r, p, t).await;
        self.log.lock().unwrap().push(Op::Put(r.to_string()));
        out
    }
    async fn read(&self, r: &BlobRef) -> StoreResult<BlobReadResult> {
        let out = self.inner.read(r).await;
        self.log.lock().unwrap().push(Op::Read(r.to_string()));
        out
    }
    async fn renew(&self, r: &BlobRef, t: Retention) -> StoreResult<RenewResult> {
        let out = self.inner.renew(r, t).await;
        self.log.lock().unwrap().push(Op::Renew(r.to_string()));
        out
    }
    async fn delete(&self, r: &BlobRef) -> StoreResult<Deleted> {
        let out = self.inner.delete(r).await;
        self.log.lock().unwrap().push(Op::Delete(r.to_string()));
        out
    }
}

/// A small deterministic generator (xorshift64*).
#[derive(Debug)]
pub struct Rng(AtomicU64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(AtomicU64::new(seed | 1))
    }
    pub fn next(&self) -> u64 {
        let mut x = self.0.load(Ordering::Relaxed);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0.store(x, Ordering::Relaxed);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Delays every read: by a per-reference delay when one is set, else randomly (0..max_ms);
/// records the order in which reads complete.
#[derive(Debug)]
pub struct DelayedReads<S> {
    pub inner: S,
    pub rng: Rng,
    pub max_ms: u64,
    pub fixed: Mutex<HashMap<String, u64>>,
    pub completed: Mutex<Vec<String>>,
}

impl<S: RelocationStore> DelayedReads<S> {
    pub fn new(inner: S, seed: u64, max_ms: u64) -> Self {
        DelayedReads {
            inner,
            rng: Rng::new(seed),
            max_ms,
            fixed: Mutex::default(),
            completed: Mutex::default(),
        }
    }
}

impl<S: RelocationStore> RelocationStore for DelayedReads<S> {
    async fn put(&self, r: &BlobRef, p: &Bytes, t: Retention) -> StoreResult<PutResult> {
        self.inner.put(r, p, t).await
    }
    async fn read(&self, r: &BlobRef) -> StoreResult<BlobReadResult> {
        let fixed = self.fixed.lock().unwrap().get(r.as_str()).copied();
        let ms = fixed.unwrap_or_else(|| self.rng.next() % self.max_ms.max(1));
        tokio::time::sleep(Duration::from_millis(ms)).await;
        let out = self.inner.read(r).await;
        self.completed.lock().unwrap().push(r.to_string());
        out
    }
    async fn renew(&self, r: &BlobRef, t: Retention) -> StoreResult<RenewResult> {
        self.inner.renew(r, t).await
    }
    async fn delete(&self, r: &BlobRef) -> StoreResult<Deleted> {
        self.inner.delete(r).await
    }
}

/// Fails (with a store failure) every put or read of references ending in `suffix`.
#[derive(Debug)]
pub struct Failing<S> {
    pub inner: S,
    pub suffix: String,
    pub fail_puts: bool,
    pub error: fn() -> StoreError,
}

impl<S: RelocationStore> RelocationStore for Failing<S> {
    async fn put(&self, r: &BlobRef, p: &Bytes, t: Retention) -> StoreResult<PutResult> {
        if self.fail_puts && r.as_str().ends_with(&self.suffix) {
            return Err((self.error)());
        }
        self.inner.put(r, p, t).await
    }
    async fn read(&self, r: &BlobRef) -> StoreResult<BlobReadResult> {
        if !self.fail_puts && r.as_str().ends_with(&self.suffix) {
            return Err((self.error)());
        }
        self.inner.read(r).await
    }
    async fn renew(&self, r: &BlobRef, t: Retention) -> StoreResult<RenewResult> {
        self.inner.renew(r, t).await
    }
    async fn delete(&self, r: &BlobRef) -> StoreResult<Deleted> {
        self.inner.delete(r).await
    }
}

/// Measures the encoded bytes of chunk puts and reads (references with a `#`) in flight at
/// once, each held for a short sleep so that operations overlap. (The leading index is read
/// and written once, outside the chunk budget.)
#[derive(Debug, Default)]
pub struct InFlight<S> {
    pub inner: S,
    pub now: AtomicUsize,
    pub max: AtomicUsize,
}

impl<S> InFlight<S> {
    fn hold(&self, bytes: usize) {
        let now = self.now.fetch_add(bytes, Ordering::SeqCst) + bytes;
        self.max.fetch_max(now, Ordering::SeqCst);
    }
    fn release(&self, bytes: usize) {
        self.now.fetch_sub(bytes, Ordering::SeqCst);
    }
}

impl<S: RelocationStore> RelocationStore for InFlight<S> {
    async fn put(&self, r: &BlobRef, p: &Bytes, t: Retention) -> StoreResult<PutResult> {
        let len = if r.as_str().contains('#') { p.len() } else { 0 };
        self.hold(len);
        tokio::time::sleep(Duration::from_millis(2)).await;
        let out = self.inner.put(r, p, t).await;
        self.release(len);
        out
    }
    async fn read(&self, r: &BlobRef) -> StoreResult<BlobReadResult> {
        let out = self.inner.read(r).await;
        let len = match &out {
            Ok(BlobReadResult::Found { bytes, .. }) if r.as_str().contains('#') => bytes.len(),
            _ => 0,
        };
        self.hold(len);
        tokio::time::sleep(Duration::from_millis(2)).await;
        self.release(len);
        out
    }
    async fn renew(&self, r: &BlobRef, t: Retention) -> StoreResult<RenewResult> {
        self.inner.renew(r, t).await
    }
    async fn delete(&self, r: &BlobRef) -> StoreResult<Deleted> {
        self.inner.delete(r).await
    }
}

/// Deterministic pseudo-random payload bytes.
pub fn payload(len: usize, seed: u64) -> Bytes {
    let rng = Rng::new(seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        let x = rng.next().to_le_bytes();
        let take = (len - v.len()).min(8);
        v.extend_from_slice(&x[..take]);
    }
    Bytes::from(v)
}

/// Replaces the blob under `r` in a memory store with `bytes` (delete, then put).
pub async fn overwrite(store: &MemoryRelocationStore, r: &BlobRef, bytes: Bytes) {
    store.delete(r).await.unwrap();
    let put = store
        .put(r, &bytes, Retention::from_millis(3_600_000).unwrap())
        .await
        .unwrap();
    assert!(matches!(put, PutResult::Stored { .. }));
}

/// The blob under `r` in a memory store.
pub async fn blob(store: &MemoryRelocationStore, r: &BlobRef) -> Bytes {
    match store.read(r).await.unwrap() {
        BlobReadResult::Found { bytes, .. } => bytes,
        BlobReadResult::Missing { .. } => panic!("{r} missing"),
    }
}

/// The reference of chunk `order` of unit `unit` (the layer's documented scheme).
pub fn chunk(unit: &BlobRef, order: u16) -> BlobRef {
    BlobRef::new(format!("{unit}#{order:04}")).unwrap()
}

/// A fresh unit reference.
pub fn unit(name: &str) -> BlobRef {
    BlobRef::new(format!("unit-{name}-{}", uuid::Uuid::new_v4().simple())).unwrap()
}
