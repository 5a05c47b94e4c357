#![doc = include_str!("../README.md")]

pub mod entropy;
mod error;
mod location;
#[cfg(feature = "memory")]
pub mod memory;
mod relocation;
mod types;

use std::future::Future;
use std::pin::Pin;

pub use error::{
    Argument, ArgumentError, FailureKind, StoreError, StoreErrorKind, StoreResult, UnreadableKey,
    UnreadableKind,
};
pub use location::{
    Condition, DynLocationStore, LocationStore, LocationStoreExt, Mutation, ReadResult, ScanItem,
    ScanListing, ScanPage, ScanRequest, ScanResult, WriteRequest, WriteResult,
};
pub use relocation::{
    BlobReadResult, Deleted, DynRelocationStore, PutResult, RelocationStore, RenewResult,
};
pub use types::{
    BLOB_ENVELOPE_LEN, BlobRef, MAX_BLOB_LEN, MAX_DATA_CHUNK_LEN, MAX_PAGE_ENCODED_LEN,
    MAX_READ_MANY_KEYS, MAX_VALUE_LEN, PageLimit, Retention, ScanCursor, ScanPrefix, StoreKey,
    StoreTime, StoreVersion, check_blob_len, check_read_many_len, check_value_len,
};

#[cfg(feature = "memory")]
pub use memory::{
    ForeignCheckpoint, ManualClock, MemoryCheckpoint, MemoryLocationStore, MemoryRelocationStore,
    StoreClock, SystemClock,
};

/// A boxed, `Send` future: what the object-safe companion traits return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

pub use bytes::Bytes;
