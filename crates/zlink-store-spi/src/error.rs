//! The one error type of the SPI.

use std::error::Error as StdError;
use std::fmt;

use crate::types::StoreKey;

/// What a caller can branch on when a store operation fails.
///
/// Normal outcomes (`Missing`, `Conflict`, `Expired`, `AlreadyStored`, ...) are result
/// variants, never errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// An input violated a bound or a rule of the SPI. Checked before any I/O: nothing was sent
    /// and nothing changed.
    InvalidArgument,
    /// The provider failed (connection, protocol, an unexpected reply, ...). If the operation
    /// had started, whether it committed is unknown.
    Failure,
    /// The operation did not finish within the provider's operation timeout. If it had started,
    /// whether it committed is unknown: reconstruct with an exact read.
    TimedOut,
    /// The operation was cancelled by the provider or its owner. If it had started, whether it
    /// committed is unknown.
    Cancelled,
    /// One stored key holds data the provider cannot read (see [`UnreadableKey`]). Only that
    /// key is affected; nothing changed.
    Unreadable,
}

/// Why a provider cannot read one stored key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UnreadableKind {
    /// The backend holds the key as another data type than the provider's records: something
    /// other than the provider wrote it.
    ForeignType,
    /// The key holds the provider's data type, but its stored record is not of a format the
    /// provider knows (an unknown format tag, a malformed or truncated record, a record that
    /// names another key). The provider never guesses how to read it.
    Corrupt,
}

impl fmt::Display for UnreadableKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UnreadableKind::ForeignType => "foreign data type",
            UnreadableKind::Corrupt => "corrupt record",
        })
    }
}

/// One stored key the provider cannot read, and why.
///
/// A scan page lists such keys beside its readable items
/// ([`ScanPage::unreadable`](crate::ScanPage::unreadable)); an exact read of one fails with
/// [`StoreError::Unreadable`]. Either way only that key is affected: the provider reports no
/// backend text, only the logical key and the kind.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnreadableKey {
    /// The logical key.
    pub key: StoreKey,
    /// Why it cannot be read.
    pub kind: UnreadableKind,
}

impl UnreadableKey {
    /// `key` cannot be read because of `kind`.
    pub fn new(key: StoreKey, kind: UnreadableKind) -> Self {
        UnreadableKey { key, kind }
    }
}

/// Which input an [`ArgumentError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Argument {
    /// A Location Store key (UTF-8, 1..=1024 bytes).
    Key,
    /// A Location Store value (at most 1 MiB).
    Value,
    /// A provider-issued version (UTF-8, 1..=4096 bytes).
    Version,
    /// A scan prefix (UTF-8, 0..=1024 bytes).
    ScanPrefix,
    /// A scan page limit (1..=1000 items).
    PageLimit,
    /// A scan cursor (UTF-8, 1..=4096 bytes).
    Cursor,
    /// A retention duration (positive, at most [`crate::Retention::MAX`]).
    Retention,
    /// A conditional batch (unique keys and encoded size).
    Batch,
    /// The keys of one `read_many` (at most [`crate::MAX_READ_MANY_KEYS`]).
    ReadMany,
    /// A Relocation Store blob reference (UTF-8, 1..=4096 bytes).
    BlobReference,
    /// A Relocation Store blob payload (at most 64 MiB + 23 bytes).
    BlobPayload,
}

impl fmt::Display for Argument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Argument::Key => "key",
            Argument::Value => "value",
            Argument::Version => "version",
            Argument::ScanPrefix => "scan prefix",
            Argument::PageLimit => "page limit",
            Argument::Cursor => "cursor",
            Argument::Retention => "retention",
            Argument::Batch => "batch",
            Argument::ReadMany => "read-many key list",
            Argument::BlobReference => "blob reference",
            Argument::BlobPayload => "blob payload",
        };
        f.write_str(s)
    }
}

/// An input that the SPI rejects before any I/O.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArgumentError {
    /// A length (bytes, items or keys) outside its allowed range.
    #[error("{what} length {actual} is outside {min}..={max}")]
    Length {
        /// Which input.
        what: Argument,
        /// The length given.
        actual: usize,
        /// Smallest allowed.
        min: usize,
        /// Largest allowed.
        max: usize,
    },
    /// Bytes that must be UTF-8 are not.
    #[error("{what} is not valid UTF-8")]
    NotUtf8 {
        /// Which input.
        what: Argument,
    },
    /// The same key appears twice within the conditions or within the mutations of one batch.
    #[error("key appears twice within the {within} of one batch")]
    DuplicateKey {
        /// `"conditions"` or `"mutations"`.
        within: &'static str,
        /// The repeated key.
        key: String,
    },
    /// A batch with no condition and no mutation.
    #[error("a batch needs at least one condition or mutation")]
    EmptyBatch,
    /// A retention of zero or above [`crate::Retention::MAX`].
    #[error("retention must be positive and at most {max_ms} ms, got {actual_ms} ms")]
    Retention {
        /// The retention given, in whole milliseconds (rounded up).
        actual_ms: u128,
        /// The largest allowed, in milliseconds.
        max_ms: u64,
    },
}

/// Why a provider failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureKind {
    /// The backend could not be reached or the connection broke.
    Unavailable,
    /// The backend answered something the provider cannot interpret: its own bookkeeping in
    /// an unknown format (never guessed at), or an unexpected reply shape. One stored key
    /// that cannot be read is [`StoreError::Unreadable`] instead.
    Format,
    /// The backend refused or failed the command.
    Backend,
    /// The provider's own configuration is invalid (connection URL, key prefix, timeout, ...);
    /// nothing was sent. The source names the option.
    Configuration,
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailureKind::Unavailable => "store unavailable",
            FailureKind::Format => "stored data format error",
            FailureKind::Backend => "store backend error",
            FailureKind::Configuration => "invalid store configuration",
        })
    }
}

/// The error of every Location Store and Relocation Store operation.
///
/// `Display` never contains backend text (commands, keys, scripts); the provider's own error is
/// reachable only through [`std::error::Error::source`] for logs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// See [`StoreErrorKind::InvalidArgument`].
    #[error("invalid store argument: {0}")]
    InvalidArgument(#[from] ArgumentError),
    /// See [`StoreErrorKind::Failure`].
    #[error("{kind}")]
    Failure {
        /// Why it failed.
        kind: FailureKind,
        /// The provider's own error, for logs only.
        #[source]
        source: Option<Box<dyn StdError + Send + Sync + 'static>>,
    },
    /// See [`StoreErrorKind::TimedOut`].
    #[error("store operation timed out; whether it committed is unknown")]
    TimedOut,
    /// See [`StoreErrorKind::Cancelled`].
    #[error("store operation cancelled; whether it committed is unknown")]
    Cancelled,
    /// See [`StoreErrorKind::Unreadable`]. `Display` shows only the kind; the key is in the
    /// value.
    #[error("stored key unreadable: {}", .0.kind)]
    Unreadable(UnreadableKey),
}

impl StoreError {
    /// The kind to branch on.
    pub fn kind(&self) -> StoreErrorKind {
        match self {
            StoreError::InvalidArgument(_) => StoreErrorKind::InvalidArgument,
            StoreError::Failure { .. } => StoreErrorKind::Failure,
            StoreError::TimedOut => StoreErrorKind::TimedOut,
            StoreError::Cancelled => StoreErrorKind::Cancelled,
            StoreError::Unreadable(_) => StoreErrorKind::Unreadable,
        }
    }

    /// A provider failure wrapping the provider's own error.
    pub fn failure<E>(kind: FailureKind, source: E) -> Self
    where
        E: Into<Box<dyn StdError + Send + Sync + 'static>>,
    {
        StoreError::Failure {
            kind,
            source: Some(source.into()),
        }
    }

    /// A provider failure with no underlying error value.
    pub fn failure_kind(kind: FailureKind) -> Self {
        StoreError::Failure { kind, source: None }
    }

    /// The key that cannot be read, if this is [`StoreError::Unreadable`].
    pub fn as_unreadable(&self) -> Option<&UnreadableKey> {
        match self {
            StoreError::Unreadable(u) => Some(u),
            _ => None,
        }
    }

    /// The argument error, if this is one.
    pub fn as_argument(&self) -> Option<&ArgumentError> {
        match self {
            StoreError::InvalidArgument(a) => Some(a),
            _ => None,
        }
    }

    /// Whether the operation may have committed even though it returned this error
    /// (time-outs, cancellations and failures after the operation started). Argument errors
    /// and unreadable keys are decided before anything changes.
    pub fn outcome_unknown(&self) -> bool {
        !matches!(
            self,
            StoreError::InvalidArgument(_) | StoreError::Unreadable(_)
        )
    }
}

/// Result alias of the SPI.
pub type StoreResult<T> = Result<T, StoreError>;
