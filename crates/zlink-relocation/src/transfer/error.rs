//! Errors of the direct payload transfer. Every error leaves the value it was raised on
//! unchanged, except [`AssemblyError::ChecksumMismatch`], which ends the assembly.

use super::budget::BudgetScope;
use super::wire::RestoreShape;

/// The broad class of a transfer error, for callers that only branch on what to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransferErrorKind {
    /// A setting, binding value or argument outside its bound; nothing was changed.
    InvalidArgument,
    /// A command-plane message that does not decode or whose declared shape is inconsistent.
    Malformed,
    /// A chunk the assembly refuses (duplicate, out of range, wrong length); nothing changed.
    Rejected,
    /// The assembled payload does not match the declared CRC-32C: nothing is restorable.
    ChecksumMismatch,
    /// A retransmitted Restore with the same binding declares other values (21 §9.1).
    Conflict,
    /// The payload was asked for before every chunk was in.
    Incomplete,
    /// Budget or memory is not available now; retry after a release.
    Unavailable,
    /// The unit can never fit the payload memory cap (`Blocked`).
    TooLarge,
    /// The adapter output exceeds 64 MiB (`Blocked/StateIncompatible`, 28 §5).
    StateIncompatible,
}

/// Which source fence generation is out of range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FenceField {
    /// The source's `AuthorityOwnerGeneration`.
    AuthorityOwnerGeneration,
    /// The source's `OwnerLeaseGeneration`.
    OwnerLeaseGeneration,
}

/// A binding value outside its range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BindingError {
    /// The `RelocationId` is zero.
    #[error("the relocation id must be non-zero")]
    ZeroRelocationId,
    /// The target attempt is zero.
    #[error("the target attempt must be non-zero")]
    ZeroTargetAttempt,
    /// A source fence generation is zero or above 2^63 − 2.
    #[error("{field:?} {value} is outside 1..={max}")]
    GenerationOutOfRange {
        /// Which generation.
        field: FenceField,
        /// The value given.
        value: u64,
        /// The bound (2^63 − 2).
        max: u64,
    },
}

impl BindingError {
    /// The broad class: always [`TransferErrorKind::InvalidArgument`].
    pub fn kind(&self) -> TransferErrorKind {
        TransferErrorKind::InvalidArgument
    }
}

/// A transfer setting outside its bound (a startup configuration error, 06 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// The chunk limit is outside `MIN_CHUNK_LIMIT..=MAX_CHUNK_LIMIT` (above the transport frame
    /// limit minus the envelope allowance, or too small to carry one data byte).
    #[error("chunk limit {actual} is outside {min}..={max} bytes")]
    ChunkLimit {
        /// The limit given.
        actual: usize,
        /// The smallest limit (chunk header + 1 byte).
        min: usize,
        /// The largest limit (16 MiB).
        max: usize,
    },
    /// The payload memory cap (`MaxRelocationPayloadInFlightBytes`) is zero; it must be positive.
    #[error("the relocation payload memory cap must be positive")]
    ZeroPayloadMemoryCap,
}

impl SettingsError {
    /// The broad class: always [`TransferErrorKind::InvalidArgument`].
    pub fn kind(&self) -> TransferErrorKind {
        TransferErrorKind::InvalidArgument
    }
}

/// Why a payload cannot be split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChunkingError {
    /// The payload is longer than one object's Restore payload may be (256 MiB, 28 §5).
    #[error("payload of {actual} bytes exceeds the {max}-byte Restore payload bound")]
    PayloadTooLarge {
        /// The payload length.
        actual: u64,
        /// The bound.
        max: u64,
    },
}

impl ChunkingError {
    /// The broad class: always [`TransferErrorKind::TooLarge`].
    pub fn kind(&self) -> TransferErrorKind {
        TransferErrorKind::TooLarge
    }
}

/// A Restore header or chunk that cannot be built or decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// Shorter than its fixed layout.
    #[error("message of {actual} bytes is shorter than its {needed}-byte layout")]
    Truncated {
        /// Bytes the layout needs.
        needed: usize,
        /// Bytes given.
        actual: usize,
    },
    /// Longer than its fixed layout (a Restore header is exactly 62 bytes).
    #[error("message of {actual} bytes is longer than its {expected}-byte layout")]
    TrailingBytes {
        /// The layout length.
        expected: usize,
        /// Bytes given.
        actual: usize,
    },
    /// The first byte names no transfer message, or the other message.
    #[error("unexpected message kind {0:#04x}")]
    UnexpectedKind(u8),
    /// A format version this crate does not read.
    #[error("unsupported transfer format version {0}")]
    UnsupportedVersion(u8),
    /// A binding value out of range.
    #[error("invalid binding: {0}")]
    Binding(#[from] BindingError),
    /// The declared total length exceeds the Restore payload bound (256 MiB).
    #[error("declared payload of {actual} bytes exceeds the {max}-byte bound")]
    PayloadTooLarge {
        /// The declared length.
        actual: u64,
        /// The bound.
        max: u64,
    },
    /// A chunk (or the declared chunk length) exceeds what one chunk may carry.
    #[error("chunk of {actual} data bytes exceeds the {max}-byte bound")]
    ChunkTooLarge {
        /// The data length.
        actual: u64,
        /// The bound ([`MAX_CHUNK_DATA_LEN`](super::MAX_CHUNK_DATA_LEN)).
        max: u64,
    },
    /// A chunk without data bytes (every chunk carries at least one).
    #[error("chunk carries no data")]
    EmptyChunk,
    /// Total length, chunk length and chunk count do not agree.
    #[error("inconsistent shape: {total_len} bytes in {chunk_count} chunks of {chunk_len}")]
    Shape {
        /// The declared total length.
        total_len: u64,
        /// The declared data length of every chunk but the last.
        chunk_len: u32,
        /// The declared chunk count.
        chunk_count: u32,
    },
}

impl FormatError {
    /// The broad class: always [`TransferErrorKind::Malformed`].
    pub fn kind(&self) -> TransferErrorKind {
        TransferErrorKind::Malformed
    }
}

/// What the target-side assembly refuses or how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AssemblyError {
    /// This chunk index is already in; nothing changed.
    #[error("chunk {index} was already received")]
    DuplicateChunk {
        /// The chunk index.
        index: u32,
    },
    /// The chunk index is not below the declared chunk count; nothing changed.
    #[error("chunk index {index} is outside 0..{chunk_count}")]
    IndexOutOfRange {
        /// The chunk index.
        index: u32,
        /// The declared chunk count.
        chunk_count: u32,
    },
    /// The chunk's data length is not the one its index must have; nothing changed.
    #[error("chunk {index} carries {actual} bytes, its declared length is {expected}")]
    ChunkLengthMismatch {
        /// The chunk index.
        index: u32,
        /// The length the Restore header implies for this index.
        expected: u32,
        /// The length received.
        actual: u32,
    },
    /// Every chunk is in but the payload does not match the declared CRC-32C. The assembly has
    /// ended: nothing is restorable, and no partial payload can be obtained (21 §9.1).
    #[error("assembled payload CRC-32C {actual:#010x} differs from the declared {declared:#010x}")]
    ChecksumMismatch {
        /// The CRC-32C the Restore header declared.
        declared: u32,
        /// The CRC-32C of the assembled bytes.
        actual: u32,
    },
    /// A retransmitted Restore with the same binding declares another length, checksum or
    /// chunking: the existing assembly is neither reused nor overwritten (21 §9.1).
    #[error("retransmitted Restore {retransmitted:?} conflicts with the first {first:?}")]
    Conflict {
        /// What the first Restore declared.
        first: RestoreShape,
        /// What the retransmission declared.
        retransmitted: RestoreShape,
    },
    /// The payload was asked for before every chunk was in.
    #[error("{received} of {expected} chunks received")]
    Incomplete {
        /// Chunks in.
        received: u32,
        /// Chunks declared.
        expected: u32,
    },
}

impl AssemblyError {
    /// The broad class of the error.
    pub fn kind(&self) -> TransferErrorKind {
        match self {
            AssemblyError::DuplicateChunk { .. }
            | AssemblyError::IndexOutOfRange { .. }
            | AssemblyError::ChunkLengthMismatch { .. } => TransferErrorKind::Rejected,
            AssemblyError::ChecksumMismatch { .. } => TransferErrorKind::ChecksumMismatch,
            AssemblyError::Conflict { .. } => TransferErrorKind::Conflict,
            AssemblyError::Incomplete { .. } => TransferErrorKind::Incomplete,
        }
    }
}

/// Why an in-flight reservation was refused; nothing was reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BudgetError {
    /// The charge does not fit beside what is in flight; retry after a release.
    #[error("{scope:?} budget: {charge} bytes do not fit beside {in_flight} of {limit} in flight")]
    Exhausted {
        /// Which budget refused.
        scope: BudgetScope,
        /// The charge asked for.
        charge: u64,
        /// Bytes in flight at the time.
        in_flight: u64,
        /// The budget.
        limit: u64,
    },
    /// A zero charge (every chunk has a positive charge).
    #[error("an in-flight charge must be positive")]
    ZeroCharge,
}

impl BudgetError {
    /// The broad class of the error.
    pub fn kind(&self) -> TransferErrorKind {
        match self {
            BudgetError::Exhausted { .. } => TransferErrorKind::Unavailable,
            BudgetError::ZeroCharge => TransferErrorKind::InvalidArgument,
        }
    }
}

/// Why payload memory was refused or a permit not changed (28 §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PayloadMemoryError {
    /// A single Actor, Instance Spot or Spot-authority unit needs more than the whole cap; it
    /// can never move (only a `SpotWide` aggregate may exceed the cap and run alone).
    #[error("a single unit needing {need} bytes can never fit the {cap}-byte payload memory cap")]
    SingleUnitTooLarge {
        /// Bytes the unit needs up front.
        need: u64,
        /// The cap.
        cap: u64,
    },
    /// The claim does not fit beside what is held now; retry after a release.
    #[error("{need} bytes do not fit beside {used} of {cap} held")]
    Exhausted {
        /// Bytes asked for.
        need: u64,
        /// Bytes held at the time.
        used: u64,
        /// The cap.
        cap: u64,
    },
    /// An oversized `SpotWide` aggregate is moving alone; nothing else starts until it frees
    /// its memory; retry after it does.
    #[error("an oversized SpotWide aggregate holds the payload memory alone")]
    HeldAlone,
    /// One `Capture` output exceeds 64 MiB (`Blocked/StateIncompatible`).
    #[error("adapter output of {actual} bytes exceeds {max} bytes")]
    AdapterOutputTooLarge {
        /// The output length.
        actual: u64,
        /// The bound (64 MiB).
        max: u64,
    },
    /// A permit may shrink after `Capture` but never grow.
    #[error("a payload memory permit of {current} bytes cannot grow to {requested}")]
    WouldGrow {
        /// Bytes the permit holds.
        current: u64,
        /// Bytes asked for.
        requested: u64,
    },
    /// The claim's byte count overflows 64 bits.
    #[error("the payload memory claim overflows")]
    ClaimOverflow,
}

impl PayloadMemoryError {
    /// The broad class of the error.
    pub fn kind(&self) -> TransferErrorKind {
        match self {
            PayloadMemoryError::SingleUnitTooLarge { .. } | PayloadMemoryError::ClaimOverflow => {
                TransferErrorKind::TooLarge
            }
            PayloadMemoryError::Exhausted { .. } | PayloadMemoryError::HeldAlone => {
                TransferErrorKind::Unavailable
            }
            PayloadMemoryError::AdapterOutputTooLarge { .. } => {
                TransferErrorKind::StateIncompatible
            }
            PayloadMemoryError::WouldGrow { .. } => TransferErrorKind::InvalidArgument,
        }
    }
}
