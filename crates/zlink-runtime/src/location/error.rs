//! The location runtime's error type.

use zlink_store_spi::{ArgumentError, StoreError};

use super::admission::AdmissionRefused;
use super::generation::GenerationKind;
use super::options::ConfigError;

/// What can go wrong in the location runtime. Normal outcomes (`Conflict`, `Stale`, `Missing`)
/// are result variants of the operations, never errors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocationError {
    /// A configuration error found at startup, before any Store request.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The admission gate refused new work (spec 21 §5).
    #[error(transparent)]
    Admission(#[from] AdmissionRefused),
    /// A generation counter holds its sentinel `2^63-1` (or too few values remain for a
    /// block). Nothing changed in the Store; repeating gives the same result.
    #[error("{kind} counter is exhausted")]
    GenerationExhausted {
        /// Which counter.
        kind: GenerationKind,
    },
    /// No placement candidate (or the chosen target) has the capacity the bundle needs.
    #[error("capacity exceeded")]
    CapacityExceeded,
    /// An invalid combination of inputs, detected before any Store request.
    #[error("invalid operation: {0}")]
    InvalidOperation(String),
    /// A stored record could not be decoded (an unknown `recordVersion` included); the
    /// runtime never guesses how to read it.
    #[error("stored {what} record is malformed or of an unknown version")]
    CorruptRecord {
        /// Which record.
        what: &'static str,
    },
    /// A stored record was rejected by the codec (an unknown `recordVersion`, a malformed or
    /// out-of-bounds value); the runtime never guesses how to read it.
    #[error("stored {what} record rejected: {source}")]
    Decode {
        /// Which record.
        what: &'static str,
        /// The codec's reason.
        #[source]
        source: zlink_codec::CodecError,
    },
    /// A record could not be built within the Store's bounds.
    #[error("record out of bounds: {0}")]
    Argument(#[from] ArgumentError),
    /// The descriptor publisher is in the Error state (its Revision would pass `2^63-1`) and
    /// publishes nothing more.
    #[error("descriptor revision exhausted: publisher is in the Error state")]
    RevisionExhausted,
    /// The host's own owner lease is gone from the Store (expired or released).
    #[error("owner lease lost")]
    LeaseLost,
    /// Conditional batches kept conflicting on shared rows (counters, capacity) past the retry
    /// budget; nothing of this operation was applied.
    #[error("store contention: retry budget exhausted")]
    Contended,
    /// The location runtime has been shut down.
    #[error("location runtime stopped")]
    Stopped,
    /// A Store request failed; if it had started, whether it committed is unknown.
    #[error("location store: {0}")]
    Store(#[from] StoreError),
}
