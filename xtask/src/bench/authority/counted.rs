//! A Location Store wrapper that counts what the runtime asks of the store: reads, write
//! batches and the authority operations each batch carries, and can keep a copy of the batches.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use zlink_redis_location::RedisLocationStore;
use zlink_store_spi::{
    LocationStore, Mutation, ReadResult, ScanRequest, ScanResult, StoreKey, StoreResult,
    WriteRequest, WriteResult,
};

/// Counts since the store was made; [`Counts::since`] gives the work of one window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Counts {
    /// Exact reads.
    pub(super) reads: u64,
    /// Scan pages.
    pub(super) scans: u64,
    /// Write batches that carry at least one authority row.
    pub(super) authority_batches: u64,
    /// Authority rows written by those batches: one per Reserve or Commit.
    pub(super) authority_ops: u64,
    /// Every other write batch (owner lease renewals, ...).
    pub(super) other_writes: u64,
}

impl Counts {
    /// The work done between `earlier` and `self`.
    pub(super) fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            reads: self.reads - earlier.reads,
            scans: self.scans - earlier.scans,
            authority_batches: self.authority_batches - earlier.authority_batches,
            authority_ops: self.authority_ops - earlier.authority_ops,
            other_writes: self.other_writes - earlier.other_writes,
        }
    }

    /// Every store call (each is one script call on Redis).
    pub(super) fn calls(&self) -> u64 {
        self.reads + self.scans + self.authority_batches + self.other_writes
    }

    /// The mean number of authority operations per authority batch.
    pub(super) fn ops_per_batch(&self) -> f64 {
        if self.authority_batches == 0 {
            0.0
        } else {
            self.authority_ops as f64 / self.authority_batches as f64
        }
    }
}

/// Whether `key` is an authority row (`authority\0...`, Location Runtime §3.4).
pub(super) fn is_authority(key: &StoreKey, prefix: &str) -> bool {
    key.as_bytes().starts_with(prefix.as_bytes())
}

/// The counting wrapper.
#[derive(Debug)]
pub(super) struct Counted {
    inner: RedisLocationStore,
    authority_prefix: String,
    reads: AtomicU64,
    scans: AtomicU64,
    authority_batches: AtomicU64,
    authority_ops: AtomicU64,
    other_writes: AtomicU64,
    capturing: AtomicBool,
    captured: Mutex<Vec<WriteRequest>>,
}

impl Counted {
    pub(super) fn new(inner: RedisLocationStore) -> Self {
        Counted {
            inner,
            authority_prefix: zlink_codec::keys::prefix::authorities(),
            reads: AtomicU64::new(0),
            scans: AtomicU64::new(0),
            authority_batches: AtomicU64::new(0),
            authority_ops: AtomicU64::new(0),
            other_writes: AtomicU64::new(0),
            capturing: AtomicBool::new(false),
            captured: Mutex::new(Vec::new()),
        }
    }

    pub(super) fn counts(&self) -> Counts {
        Counts {
            reads: self.reads.load(Ordering::Relaxed),
            scans: self.scans.load(Ordering::Relaxed),
            authority_batches: self.authority_batches.load(Ordering::Relaxed),
            authority_ops: self.authority_ops.load(Ordering::Relaxed),
            other_writes: self.other_writes.load(Ordering::Relaxed),
        }
    }

    /// Starts keeping a copy of every authority batch.
    pub(super) fn start_capture(&self) {
        if let Ok(mut c) = self.captured.lock() {
            c.clear();
        }
        self.capturing.store(true, Ordering::SeqCst);
    }

    /// Stops keeping copies; returns the authority batches kept, in the order they were sent.
    pub(super) fn stop_capture(&self) -> Vec<WriteRequest> {
        self.capturing.store(false, Ordering::SeqCst);
        self.captured
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default()
    }

    /// The authority rows a batch writes.
    pub(super) fn authority_rows(&self, request: &WriteRequest) -> usize {
        request
            .mutations()
            .iter()
            .filter(|m| is_authority(Mutation::key(m), &self.authority_prefix))
            .count()
    }

    /// The authority row prefix.
    pub(super) fn authority_prefix(&self) -> &str {
        &self.authority_prefix
    }
}

impl LocationStore for Counted {
    async fn read(&self, key: &StoreKey) -> StoreResult<ReadResult> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.inner.read(key).await
    }

    async fn write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
        let rows = self.authority_rows(request);
        if rows == 0 {
            self.other_writes.fetch_add(1, Ordering::Relaxed);
        } else {
            self.authority_batches.fetch_add(1, Ordering::Relaxed);
            self.authority_ops.fetch_add(rows as u64, Ordering::Relaxed);
            if self.capturing.load(Ordering::Relaxed) {
                if let Ok(mut c) = self.captured.lock() {
                    c.push(request.clone());
                }
            }
        }
        self.inner.write(request).await
    }

    async fn scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
        self.scans.fetch_add(1, Ordering::Relaxed);
        self.inner.scan(request).await
    }
}
