//! The Location Store SPI (spec 22 §2–§6): exact read, conditional atomic batch, snapshot scan,
//! and an additive batched exact read (`read_many`).

use std::collections::BTreeSet;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;

use crate::BoxFuture;
use crate::error::{Argument, ArgumentError, StoreResult, UnreadableKey};
use crate::types::{
    PageLimit, Retention, ScanCursor, ScanPrefix, StoreKey, StoreTime, StoreVersion,
    check_read_many_len, check_value_len,
};

/// The result of an exact read: one observation of one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadResult {
    /// The key does not exist, was deleted, or has expired by the provider clock.
    Missing {
        /// The provider clock at the observation.
        store_now: StoreTime,
    },
    /// The key's current value.
    Found {
        /// The stored bytes; immutable while held.
        bytes: Bytes,
        /// The provider-issued version of these bytes.
        version: StoreVersion,
        /// When the value expires, by the provider clock; `None` for a durable value.
        expires_at: Option<StoreTime>,
        /// The provider clock at the observation.
        store_now: StoreTime,
    },
}

impl ReadResult {
    /// The provider clock at the observation.
    pub fn store_now(&self) -> StoreTime {
        match self {
            ReadResult::Missing { store_now } | ReadResult::Found { store_now, .. } => *store_now,
        }
    }

    /// The version, if found.
    pub fn version(&self) -> Option<&StoreVersion> {
        match self {
            ReadResult::Found { version, .. } => Some(version),
            ReadResult::Missing { .. } => None,
        }
    }

    /// The bytes, if found.
    pub fn bytes(&self) -> Option<&Bytes> {
        match self {
            ReadResult::Found { bytes, .. } => Some(bytes),
            ReadResult::Missing { .. } => None,
        }
    }

    /// Whether the key was missing.
    pub fn is_missing(&self) -> bool {
        matches!(self, ReadResult::Missing { .. })
    }
}

/// A condition of a conditional batch. All conditions are checked before any mutation; if one
/// does not hold the whole batch is a [`WriteResult::Conflict`] and nothing changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// Holds only if the key does not exist or has expired. On failure: `Conflict`, no mutation,
    /// no version issued.
    Missing(StoreKey),
    /// Holds only if the key exists, has not expired, and its current version equals the given
    /// one. On failure: `Conflict`, no mutation, no version issued.
    Version(StoreKey, StoreVersion),
}

impl Condition {
    /// The key the condition is about.
    pub fn key(&self) -> &StoreKey {
        match self {
            Condition::Missing(k) | Condition::Version(k, _) => k,
        }
    }

    fn encoded_len(&self) -> usize {
        match self {
            Condition::Missing(k) => k.len(),
            Condition::Version(k, v) => k.len() + v.len(),
        }
    }
}

/// A mutation of a conditional batch, applied only if every condition holds, all in one commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mutation {
    /// Stores `bytes` (at most 1 MiB) under `key` and issues a new version. With a retention the
    /// value expires that long after the commit's StoreNow; without one it is kept until
    /// deleted. Not applied if any condition fails.
    Put {
        /// The key.
        key: StoreKey,
        /// The value, at most [`crate::MAX_VALUE_LEN`] bytes.
        bytes: Bytes,
        /// How long to keep it; `None` keeps it until explicitly deleted.
        retention: Option<Retention>,
    },
    /// Removes the key (a no-op for an absent key). Not applied if any condition fails.
    Delete(StoreKey),
}

impl Mutation {
    /// A durable put.
    pub fn put(key: StoreKey, bytes: impl Into<Bytes>) -> Self {
        Mutation::Put {
            key,
            bytes: bytes.into(),
            retention: None,
        }
    }

    /// A put that expires after `retention`.
    pub fn put_expiring(key: StoreKey, bytes: impl Into<Bytes>, retention: Retention) -> Self {
        Mutation::Put {
            key,
            bytes: bytes.into(),
            retention: Some(retention),
        }
    }

    /// The key the mutation is about.
    pub fn key(&self) -> &StoreKey {
        match self {
            Mutation::Put { key, .. } | Mutation::Delete(key) => key,
        }
    }

    fn encoded_len(&self) -> usize {
        match self {
            Mutation::Put { key, bytes, .. } => key.len() + bytes.len(),
            Mutation::Delete(k) => k.len(),
        }
    }
}

/// A validated conditional atomic batch.
///
/// Bounds (checked by [`WriteRequest::new`], before any I/O): at most
/// [`WriteRequest::MAX_UNIQUE_KEYS`] unique keys across conditions and mutations, at most
/// [`WriteRequest::MAX_ENCODED_LEN`] encoded bytes (the sum of every key, expected version and
/// value length), no key twice within the conditions or within the mutations, every value at
/// most 1 MiB, and at least one condition or mutation.
///
/// ```
/// use zlink_store_spi::{Condition, Mutation, StoreKey, WriteRequest};
/// let k = StoreKey::new("k").unwrap();
/// let ok = WriteRequest::new(vec![Condition::Missing(k.clone())], vec![Mutation::put(k.clone(), "v")]);
/// assert!(ok.is_ok());
/// let twice = WriteRequest::new(vec![], vec![Mutation::put(k.clone(), "a"), Mutation::Delete(k)]);
/// assert!(twice.is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRequest {
    conditions: Vec<Condition>,
    mutations: Vec<Mutation>,
    encoded_len: usize,
    unique_keys: usize,
}

impl WriteRequest {
    /// The most unique keys one batch may name across conditions and mutations.
    pub const MAX_UNIQUE_KEYS: usize = 2048;
    /// The largest encoded batch, 4 MiB.
    pub const MAX_ENCODED_LEN: usize = 4 * 1024 * 1024;

    /// Validates a batch.
    pub fn new(
        conditions: Vec<Condition>,
        mutations: Vec<Mutation>,
    ) -> Result<Self, ArgumentError> {
        if conditions.is_empty() && mutations.is_empty() {
            return Err(ArgumentError::EmptyBatch);
        }
        let mut cond_keys = BTreeSet::new();
        for c in &conditions {
            if !cond_keys.insert(c.key()) {
                return Err(ArgumentError::DuplicateKey {
                    within: "conditions",
                    key: c.key().to_string(),
                });
            }
        }
        let mut mut_keys = BTreeSet::new();
        for m in &mutations {
            if !mut_keys.insert(m.key()) {
                return Err(ArgumentError::DuplicateKey {
                    within: "mutations",
                    key: m.key().to_string(),
                });
            }
            if let Mutation::Put { bytes, .. } = m {
                check_value_len(bytes.len())?;
            }
        }
        let unique_keys = cond_keys.union(&mut_keys).count();
        if unique_keys > Self::MAX_UNIQUE_KEYS {
            return Err(ArgumentError::Length {
                what: Argument::Batch,
                actual: unique_keys,
                min: 1,
                max: Self::MAX_UNIQUE_KEYS,
            });
        }
        let encoded_len = conditions.iter().map(Condition::encoded_len).sum::<usize>()
            + mutations.iter().map(Mutation::encoded_len).sum::<usize>();
        if encoded_len > Self::MAX_ENCODED_LEN {
            return Err(ArgumentError::Length {
                what: Argument::Batch,
                actual: encoded_len,
                min: 0,
                max: Self::MAX_ENCODED_LEN,
            });
        }
        Ok(WriteRequest {
            conditions,
            mutations,
            encoded_len,
            unique_keys,
        })
    }

    /// The conditions, in the order given.
    pub fn conditions(&self) -> &[Condition] {
        &self.conditions
    }

    /// The mutations, in the order given.
    pub fn mutations(&self) -> &[Mutation] {
        &self.mutations
    }

    /// The encoded size used for the 4 MiB bound.
    pub fn encoded_len(&self) -> usize {
        self.encoded_len
    }

    /// How many distinct keys the batch names.
    pub fn unique_keys(&self) -> usize {
        self.unique_keys
    }

    /// The number of `Put` mutations (and so of versions an `Applied` result carries).
    pub fn put_count(&self) -> usize {
        self.mutations
            .iter()
            .filter(|m| matches!(m, Mutation::Put { .. }))
            .count()
    }
}

/// The result of a conditional batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteResult {
    /// Every condition held and every mutation was applied as one commit.
    Applied {
        /// One new version per `Put`, in the order of the puts in the request.
        put_versions: Vec<StoreVersion>,
        /// The provider clock at the commit.
        store_now: StoreTime,
    },
    /// At least one condition did not hold. Nothing changed and no version was issued; which
    /// condition failed is deliberately not reported.
    Conflict {
        /// The provider clock at the check.
        store_now: StoreTime,
    },
}

impl WriteResult {
    /// Whether the batch was applied.
    pub fn is_applied(&self) -> bool {
        matches!(self, WriteResult::Applied { .. })
    }

    /// The provider clock of the result.
    pub fn store_now(&self) -> StoreTime {
        match self {
            WriteResult::Applied { store_now, .. } | WriteResult::Conflict { store_now } => {
                *store_now
            }
        }
    }
}

/// One page request of a snapshot scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanRequest {
    /// Only keys starting with these bytes are listed.
    pub prefix: ScanPrefix,
    /// At most this many items in the page.
    pub limit: PageLimit,
    /// `None` for the first page (which fixes the snapshot); the previous page's `next_cursor`
    /// for a continuation.
    pub cursor: Option<ScanCursor>,
}

impl ScanRequest {
    /// The first page of a new snapshot.
    pub fn first(prefix: ScanPrefix, limit: PageLimit) -> Self {
        ScanRequest {
            prefix,
            limit,
            cursor: None,
        }
    }

    /// A continuation page of the snapshot the cursor belongs to.
    pub fn next(prefix: ScanPrefix, limit: PageLimit, cursor: ScanCursor) -> Self {
        ScanRequest {
            prefix,
            limit,
            cursor: Some(cursor),
        }
    }
}

/// One key of a scan page, as it was at the snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanItem {
    /// The key.
    pub key: StoreKey,
    /// The value at the snapshot.
    pub bytes: Bytes,
    /// Its version.
    pub version: StoreVersion,
    /// Its expiry, if any.
    pub expires_at: Option<StoreTime>,
}

impl ScanItem {
    /// The size this item counts for against the 4 MiB page bound: key, value and version bytes.
    pub fn encoded_len(&self) -> usize {
        self.key.len() + self.bytes.len() + self.version.len()
    }
}

/// One page of a snapshot scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanPage {
    /// Items in key byte order, at most the page limit and at most 4 MiB encoded.
    pub items: Vec<ScanItem>,
    /// Keys of the page's range the provider could not read (another data type, a corrupt
    /// record), in key byte order. They cost only themselves: every other key of the page is
    /// in `items`. Items and unreadable keys together are at most the page limit. A provider
    /// whose storage cannot hold such a key (the in-memory one) always leaves this empty.
    pub unreadable: Vec<UnreadableKey>,
    /// Present when more items remain in the snapshot.
    pub next_cursor: Option<ScanCursor>,
    /// The provider clock when the page was read.
    pub store_now: StoreTime,
}

/// The result of a scan page request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanResult {
    /// A page of the snapshot.
    Page(ScanPage),
    /// The snapshot no longer exists, or the cursor is invalid, foreign (another store, snapshot
    /// or prefix) or garbage. Discard earlier pages and start again from the first page.
    Expired,
}

/// A Location Store provider (spec 22 §2–§6).
///
/// Keys and values are opaque; the provider never interprets them. Implement this trait; hold
/// providers as `Arc<dyn DynLocationStore>` (every `LocationStore` is one through a blanket impl,
/// and `dyn DynLocationStore` is itself a `LocationStore`).
///
/// **Cancellation.** Every returned future is lazy: dropping it before its first poll performs
/// no I/O and commits nothing. Dropping it (or a time-out or transport error) after it started
/// leaves the outcome unknown: the provider never reports success or `Conflict` it did not
/// observe, and the caller reconstructs the outcome with an exact [`read`](Self::read) and a
/// version comparison.
///
/// **Bytes.** Borrowed inputs cannot change while the future runs; a provider that keeps input
/// bytes after the call copies them. Returned [`Bytes`] are immutable while held.
pub trait LocationStore: Send + Sync + fmt::Debug + 'static {
    /// Exact read of one key, as one observation (bytes, version, expiry and StoreNow together).
    /// An expired value reads as `Missing`. A key holding data the provider cannot read is
    /// [`StoreError::Unreadable`](crate::StoreError::Unreadable), carrying the key.
    ///
    /// Cancellation: before the first poll, no I/O; after, nothing changes either way (reads
    /// never mutate), so simply read again.
    fn read(&self, key: &StoreKey) -> impl Future<Output = StoreResult<ReadResult>> + Send;

    /// Conditional atomic batch: checks every condition, then applies every mutation as one
    /// commit that no other caller can observe half-done, or returns `Conflict` having changed
    /// nothing.
    ///
    /// Cancellation: before the first poll, no I/O and no commit; after, the commit may or may
    /// not have happened: reconstruct with an exact read and a version compare.
    fn write(
        &self,
        request: &WriteRequest,
    ) -> impl Future<Output = StoreResult<WriteResult>> + Send;

    /// One page of a snapshot scan. The first page (no cursor) fixes a point in time; every
    /// continuation page reads that same snapshot, unaffected by later writes. Items come in key
    /// byte order; values expired at the snapshot are left out (an item may expire while the
    /// scan runs: scan items are candidates to re-check with an exact read). A key the provider
    /// cannot read is listed in [`ScanPage::unreadable`] and costs only itself: it never fails
    /// the page.
    ///
    /// Cancellation: before the first poll, no I/O; after, the snapshot may or may not have been
    /// created: start again from the first page.
    fn scan(&self, request: &ScanRequest) -> impl Future<Output = StoreResult<ScanResult>> + Send;

    /// Exact reads of many keys in one request (at most
    /// [`MAX_READ_MANY_KEYS`](crate::MAX_READ_MANY_KEYS)): one [`ReadResult`] per key, in the
    /// order given (a key named twice is read twice). Each result is an independent
    /// observation, exactly what [`read`](Self::read) of that key would answer at some instant
    /// during the call, with its own StoreNow; a provider may, but need not, take them all at
    /// one instant. A key the provider cannot read fails the whole call with
    /// [`StoreError::Unreadable`](crate::StoreError::Unreadable) carrying the first such key in
    /// the order given. More keys than the bound is
    /// [`StoreError::InvalidArgument`](crate::StoreError::InvalidArgument) before any I/O; no
    /// keys answers an empty list without I/O.
    ///
    /// The default reads the keys one by one with [`read`](Self::read) (so a provider that
    /// does not override it keeps working); a provider overrides it to answer in one round
    /// trip.
    ///
    /// Cancellation: as [`read`](Self::read) (reads never mutate; simply read again).
    fn read_many(
        &self,
        keys: &[StoreKey],
    ) -> impl Future<Output = StoreResult<Vec<ReadResult>>> + Send {
        async move {
            check_read_many_len(keys.len())?;
            let mut results = Vec::with_capacity(keys.len());
            for key in keys {
                results.push(self.read(key).await?);
            }
            Ok(results)
        }
    }

    /// Ends the provider's use of its backend (a connection closed once the commands already
    /// sent are answered). The framework root calls it once, after every use of the Store
    /// ended, on a store no one else holds (spec 21 §2). Operations issued afterwards may
    /// fail. Calling it again does nothing more. The default does nothing (a provider with
    /// nothing to release).
    fn close(&self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// The object-safe companion of [`LocationStore`], implemented for every `LocationStore`.
///
/// Hold stores as `Arc<dyn DynLocationStore>`; call them through [`LocationStore`], which
/// `dyn DynLocationStore` implements.
pub trait DynLocationStore: Send + Sync + fmt::Debug + 'static {
    /// Boxed [`LocationStore::read`].
    fn read_dyn<'a>(&'a self, key: &'a StoreKey) -> BoxFuture<'a, StoreResult<ReadResult>>;
    /// Boxed [`LocationStore::write`].
    fn write_dyn<'a>(
        &'a self,
        request: &'a WriteRequest,
    ) -> BoxFuture<'a, StoreResult<WriteResult>>;
    /// Boxed [`LocationStore::scan`].
    fn scan_dyn<'a>(&'a self, request: &'a ScanRequest) -> BoxFuture<'a, StoreResult<ScanResult>>;
    /// Boxed [`LocationStore::read_many`]. The default (for a type that implements this trait
    /// without [`LocationStore`]) reads the keys one by one with
    /// [`read_dyn`](Self::read_dyn).
    fn read_many_dyn<'a>(
        &'a self,
        keys: &'a [StoreKey],
    ) -> BoxFuture<'a, StoreResult<Vec<ReadResult>>> {
        Box::pin(async move {
            check_read_many_len(keys.len())?;
            let mut results = Vec::with_capacity(keys.len());
            for key in keys {
                results.push(self.read_dyn(key).await?);
            }
            Ok(results)
        })
    }
    /// Boxed [`LocationStore::close`]. The default does nothing.
    fn close_dyn(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

impl<T: LocationStore> DynLocationStore for T {
    fn read_dyn<'a>(&'a self, key: &'a StoreKey) -> BoxFuture<'a, StoreResult<ReadResult>> {
        Box::pin(LocationStore::read(self, key))
    }
    fn write_dyn<'a>(
        &'a self,
        request: &'a WriteRequest,
    ) -> BoxFuture<'a, StoreResult<WriteResult>> {
        Box::pin(LocationStore::write(self, request))
    }
    fn scan_dyn<'a>(&'a self, request: &'a ScanRequest) -> BoxFuture<'a, StoreResult<ScanResult>> {
        Box::pin(LocationStore::scan(self, request))
    }
    fn read_many_dyn<'a>(
        &'a self,
        keys: &'a [StoreKey],
    ) -> BoxFuture<'a, StoreResult<Vec<ReadResult>>> {
        Box::pin(LocationStore::read_many(self, keys))
    }
    fn close_dyn(&self) -> BoxFuture<'_, ()> {
        Box::pin(LocationStore::close(self))
    }
}

impl LocationStore for dyn DynLocationStore {
    async fn read(&self, key: &StoreKey) -> StoreResult<ReadResult> {
        self.read_dyn(key).await
    }
    async fn write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
        self.write_dyn(request).await
    }
    async fn scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
        self.scan_dyn(request).await
    }
    async fn read_many(&self, keys: &[StoreKey]) -> StoreResult<Vec<ReadResult>> {
        self.read_many_dyn(keys).await
    }
    async fn close(&self) {
        self.close_dyn().await;
    }
}

impl<S: LocationStore + ?Sized> LocationStore for Arc<S> {
    fn read(&self, key: &StoreKey) -> impl Future<Output = StoreResult<ReadResult>> + Send {
        (**self).read(key)
    }
    fn write(
        &self,
        request: &WriteRequest,
    ) -> impl Future<Output = StoreResult<WriteResult>> + Send {
        (**self).write(request)
    }
    fn scan(&self, request: &ScanRequest) -> impl Future<Output = StoreResult<ScanResult>> + Send {
        (**self).scan(request)
    }
    fn read_many(
        &self,
        keys: &[StoreKey],
    ) -> impl Future<Output = StoreResult<Vec<ReadResult>>> + Send {
        (**self).read_many(keys)
    }
    fn close(&self) -> impl Future<Output = ()> + Send {
        (**self).close()
    }
}

/// Every key under a prefix, read from one snapshot by [`LocationStoreExt::scan_all`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScanListing {
    /// The readable items, in key byte order.
    pub items: Vec<ScanItem>,
    /// The keys the provider could not read, in key byte order (see [`ScanPage::unreadable`]).
    pub unreadable: Vec<UnreadableKey>,
}

/// Conveniences over any [`LocationStore`] (implemented for all of them; providers do not
/// implement it).
pub trait LocationStoreExt: LocationStore {
    /// Reads every item under `prefix` from one snapshot, page by page, with the keys the
    /// provider could not read. If the snapshot expires mid-way the pages read so far are
    /// discarded and the scan starts again, at most `max_restarts` times; after that the last
    /// `Expired` is returned as `Ok(None)`.
    fn scan_all(
        &self,
        prefix: &ScanPrefix,
        limit: PageLimit,
        max_restarts: usize,
    ) -> impl Future<Output = StoreResult<Option<ScanListing>>> + Send {
        async move {
            'restart: for _ in 0..=max_restarts {
                let mut listing = ScanListing::default();
                let mut request = ScanRequest::first(prefix.clone(), limit);
                loop {
                    match self.scan(&request).await? {
                        ScanResult::Expired => continue 'restart,
                        ScanResult::Page(page) => {
                            listing.items.extend(page.items);
                            listing.unreadable.extend(page.unreadable);
                            match page.next_cursor {
                                Some(c) => request.cursor = Some(c),
                                None => return Ok(Some(listing)),
                            }
                        }
                    }
                }
            }
            Ok(None)
        }
    }
}

impl<T: LocationStore + ?Sized> LocationStoreExt for T {}
