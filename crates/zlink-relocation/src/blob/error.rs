//! Errors of the blob layer.

use zlink_store_spi::{BlobRef, StoreError};

/// An input or configuration the blob layer rejects before any I/O (nothing is written).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BlobArgumentError {
    /// The payload is larger than 256 GiB.
    #[error("payload of {actual} bytes exceeds the {max}-byte whole-payload bound")]
    PayloadTooLarge {
        /// The payload length.
        actual: u64,
        /// The bound (256 GiB).
        max: u64,
    },
    /// The payload would need more than 4,096 data chunks at the configured chunk limit.
    #[error("payload needs {actual} data chunks, more than {max}")]
    TooManyChunks {
        /// Chunks needed.
        actual: u64,
        /// The bound (4,096).
        max: usize,
    },
    /// The chunk limit is outside 1..=64 MiB.
    #[error("chunk limit {actual} is outside 1..={max} bytes")]
    ChunkLimit {
        /// The limit given.
        actual: usize,
        /// The bound (64 MiB).
        max: usize,
    },
    /// The stripe target length is outside 1..=64 MiB.
    #[error("stripe target {actual} is outside 1..={max} bytes")]
    StripeTarget {
        /// The target given.
        actual: usize,
        /// The bound (64 MiB).
        max: usize,
    },
    /// The stripe count is outside 1..=64.
    #[error("stripe count {actual} is outside 1..={max}")]
    Stripes {
        /// The count given.
        actual: usize,
        /// The bound (64).
        max: usize,
    },
    /// The index reference leaves no room for the chunk suffix (`#` and 4 digits).
    #[error("index reference of {actual} bytes is longer than {max}")]
    ReferenceLength {
        /// The reference length.
        actual: usize,
        /// The longest allowed (4,091 bytes).
        max: usize,
    },
    /// The in-flight byte budget is zero (or too large to represent).
    #[error("the in-flight byte budget must be between 1 byte and {max} bytes, got {actual}")]
    Budget {
        /// The budget given.
        actual: usize,
        /// The largest representable budget.
        max: usize,
    },
    /// The parallelism is outside 1..=4096.
    #[error("parallelism {actual} is outside 1..={max}")]
    Parallelism {
        /// The value given.
        actual: usize,
        /// The bound (4,096).
        max: usize,
    },
}

/// Why a chunk blob does not match what the index says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvelopeError {
    /// Shorter than the 23-byte envelope.
    #[error("shorter than its envelope")]
    Truncated,
    /// Not a chunk envelope.
    #[error("not a chunk envelope")]
    BadMagic,
    /// An envelope version this crate does not read.
    #[error("unsupported envelope version {0}")]
    UnsupportedVersion(u8),
    /// Not a data chunk.
    #[error("unexpected envelope kind {0}")]
    WrongKind(u8),
    /// The envelope header does not match its own checksum.
    #[error("envelope header checksum mismatch")]
    HeaderChecksum,
    /// The envelope names another stripe, order or chunk count than the index.
    #[error("envelope belongs to another position or unit")]
    Misplaced,
    /// The data length differs from the envelope or the index.
    #[error("data length mismatch")]
    Length,
    /// The data does not match its CRC-32C.
    #[error("data checksum mismatch")]
    DataChecksum,
}

/// Why a leading index cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IndexFormatError {
    /// Shorter than its own structure says.
    #[error("truncated")]
    Truncated,
    /// Not a leading index.
    #[error("not a leading index")]
    BadMagic,
    /// A format version this crate does not read.
    #[error("unsupported index format version {0}")]
    UnsupportedVersion(u8),
    /// The index does not match its trailing CRC-32C.
    #[error("index checksum mismatch")]
    Checksum,
    /// A stripe count outside 1..=64.
    #[error("stripe count {0} outside 1..=64")]
    StripeCount(usize),
    /// A chunk count outside 1..=4096.
    #[error("chunk count {0} outside 1..=4096")]
    ChunkCount(usize),
    /// A total length above 256 GiB.
    #[error("total length {0} above 256 GiB")]
    TotalTooLarge(u64),
    /// A chunk reference that is not a valid reference.
    #[error("invalid chunk reference")]
    Reference,
    /// The structure is inconsistent.
    #[error("inconsistent layout: {0}")]
    Layout(&'static str),
}

/// Why a stored unit is lost: the whole unit is unusable, never partially restored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DataLost {
    /// The leading index is absent or expired.
    #[error("the leading index is missing")]
    IndexMissing,
    /// The leading index cannot be decoded or is inconsistent.
    #[error("the leading index is corrupt: {0}")]
    IndexCorrupt(IndexFormatError),
    /// A data chunk is absent or expired.
    #[error("data chunk {order} is missing")]
    ChunkMissing {
        /// Its order in the index.
        order: u16,
    },
    /// A data chunk does not match the index.
    #[error("data chunk {order} is corrupt: {error}")]
    ChunkCorrupt {
        /// Its order in the index.
        order: u16,
        /// What is wrong with it.
        error: EnvelopeError,
    },
    /// Every chunk matched, but the assembled payload does not match the index's overall
    /// CRC-32C and SHA-256.
    #[error("the assembled payload does not match the overall checksums")]
    Checksum,
}

/// The error of every blob layer operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BlobError {
    /// Rejected before any I/O; nothing was written.
    #[error("invalid blob layer argument: {0}")]
    InvalidArgument(#[from] BlobArgumentError),
    /// The unit is lost as a whole (missing or corrupt chunk or index, checksum mismatch).
    #[error("data lost: {0}")]
    DataLost(#[from] DataLost),
    /// Different bytes are already stored under a reference of this unit (the unit reference
    /// was reused for another payload). No index was written by this call.
    #[error("different bytes are already stored under {reference}")]
    Conflict {
        /// The chunk or index reference.
        reference: BlobRef,
    },
    /// A blob just written could not be read back identical (it vanished or changed); the
    /// store did not keep what it acknowledged. No index was written by this call.
    #[error("{reference} could not be verified after it was written")]
    NotVerified {
        /// The chunk or index reference.
        reference: BlobRef,
    },
    /// The store failed, timed out or was cancelled; the outcome of writes is unknown (storing
    /// again with the same reference and payload is safe).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The broad class of a [`BlobError`], for callers that branch on what to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BlobErrorKind {
    /// An argument was rejected before any I/O; nothing was written.
    InvalidArgument,
    /// The unit is lost as a whole.
    DataLost,
    /// The reference already holds other bytes.
    Conflict,
    /// What was written could not be read back identical.
    NotVerified,
    /// The store failed, timed out or was cancelled; retrying the same call is safe.
    Store,
}

impl BlobError {
    /// The broad class of this error.
    pub fn kind(&self) -> BlobErrorKind {
        match self {
            BlobError::InvalidArgument(_) => BlobErrorKind::InvalidArgument,
            BlobError::DataLost(_) => BlobErrorKind::DataLost,
            BlobError::Conflict { .. } => BlobErrorKind::Conflict,
            BlobError::NotVerified { .. } => BlobErrorKind::NotVerified,
            BlobError::Store(_) => BlobErrorKind::Store,
        }
    }

    /// The data-loss reason, if this is one.
    pub fn as_data_lost(&self) -> Option<&DataLost> {
        match self {
            BlobError::DataLost(d) => Some(d),
            _ => None,
        }
    }

    /// Whether this is [`BlobError::DataLost`].
    pub fn is_data_lost(&self) -> bool {
        matches!(self, BlobError::DataLost(_))
    }
}
