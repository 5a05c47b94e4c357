//! The location runtime's error type, one level above the vocabulary it names (identities,
//! generation kinds, admission and configuration refusals); nothing below this module returns
//! it.

use zlink_store_spi::{ArgumentError, StoreError, StoreVersion};

use super::admission::AdmissionRefused;
use super::generation::GenerationKind;
use super::identity::{ObjectKind, StableType};
use super::options::ConfigError;

/// What kind of error a [`LocationError`] is, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Invalid configuration, found at startup before any Store request.
    Configuration,
    /// The admission gate refused new work (spec 21 §5).
    AdmissionRefused,
    /// A generation counter is exhausted (spec 21 §3.2).
    GenerationExhausted,
    /// No capacity for the bundle (spec 21 §3.3).
    CapacityExceeded,
    /// An invalid combination of inputs, detected before any Store request.
    InvalidOperation,
    /// A stored record could not be read as its format says.
    CorruptRecord,
    /// The Store answered something its contract forbids.
    StoreContractViolation,
    /// A value to store is outside the Store's bounds.
    OutOfBounds,
    /// The descriptor publisher's Revision is exhausted.
    RevisionExhausted,
    /// This host's owner lease is gone.
    LeaseLost,
    /// Conditional batches kept conflicting past the retry budget.
    Contended,
    /// The runtime has stopped.
    Stopped,
    /// A list continuation token's snapshot is gone (expired, or the Store no longer knows
    /// it): start a new cycle without a token (spec 21 §6.2 ScanExpired).
    ScanExpired,
    /// A Store request failed.
    Store,
}

/// Which stored row a [`LocationError::CorruptRecord`] or [`LocationError::Decode`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RecordName {
    /// An authority record (spec 21 §3.3).
    Authority,
    /// An owner-lease record (spec 21 §3.1).
    OwnerLease,
    /// A MeshNode, ClientServer or fanout descriptor.
    Descriptor,
    /// A generation counter row (spec 22 §8).
    GenerationCounter,
    /// A descriptor change-number row (runtime-private).
    ChangeNumber,
    /// A node's allocation row (runtime-private).
    NodeCapacity,
    /// A relocation target capacity reservation row (runtime-private).
    CapacityReservation,
    /// A lookup index row (runtime-private).
    LocationIndex,
    /// A creation-operation-terminal-v1 record (spec 21 §7).
    CreationTerminal,
    /// A creation deadline row of a `Reserved` record (runtime-private, spec 21 §7).
    CreationDeadline,
    /// A `PerActor` User Spot move record (spec 21 §8, runtime-private).
    PerActorMove,
}

impl std::fmt::Display for RecordName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RecordName::Authority => "authority",
            RecordName::OwnerLease => "owner lease",
            RecordName::Descriptor => "descriptor",
            RecordName::GenerationCounter => "generation counter",
            RecordName::ChangeNumber => "descriptor change number",
            RecordName::NodeCapacity => "node capacity",
            RecordName::CapacityReservation => "capacity reservation",
            RecordName::LocationIndex => "location index",
            RecordName::CreationTerminal => "creation terminal",
            RecordName::CreationDeadline => "creation deadline",
            RecordName::PerActorMove => "PerActor User Spot move",
        })
    }
}

/// Something the Store answered that its contract (spec 22 §3) forbids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ContractViolation {
    /// An applied write returned fewer versions than it had `Put` mutations.
    MissingPutVersion,
    /// A batched read (`read_many`) answered another number of results than it had keys.
    ReadManyCount,
}

impl std::fmt::Display for ContractViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ContractViolation::MissingPutVersion => {
                "an applied write returned fewer versions than it had puts"
            }
            ContractViolation::ReadManyCount => {
                "a batched read returned another number of results than it had keys"
            }
        })
    }
}

/// Which slot count of a capacity bundle is out of range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SlotKind {
    /// Actor slots.
    Actor,
    /// Spot slots.
    Spot,
    /// Slots of one Spot kind and stable type.
    SpotType,
}

/// Why an operation was refused before any Store request: the inputs do not make sense
/// together.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidOperation {
    /// The target node does not offer this kind and stable type.
    #[error("the target does not offer {kind} {stable_type}")]
    TargetDoesNotOffer {
        /// The object kind.
        kind: ObjectKind,
        /// The stable type.
        stable_type: StableType,
    },
    /// A relocation target is the object's current owner.
    #[error("the relocation target is the current owner")]
    TargetIsCurrentOwner,
    /// The target host run is another lease generation of this very host.
    #[error("the target host run is a different generation of this host")]
    TargetIsAnotherRunOfThisHost,
    /// A ReservationId of 0 (spec 21 §8.1: non-zero).
    #[error("a ReservationId is non-zero")]
    ZeroReservationId,
    /// NewOwner is run by the reservation's target host run only.
    #[error("NewOwner is run by the reservation's target host run")]
    NotTheReservationTarget,
    /// The reservation was made for another object, kind or capacity.
    #[error("the reservation was made for another object or capacity")]
    ReservationForAnotherObject,
    /// A lifecycle generation outside `1..=2^63-1`.
    #[error("lifecycle generation {0} outside 1..=2^63-1")]
    LifecycleGenerationOutOfRange(u64),
    /// A slot count above `2^31-1`.
    #[error("{kind:?} slots {value} above 2^31-1")]
    SlotsOutOfRange {
        /// Which count.
        kind: SlotKind,
        /// The value given.
        value: u32,
    },
    /// A spot-type slot needs a Spot kind and a positive count.
    #[error("a spot-type slot needs a Spot kind and a positive count")]
    InvalidSpotTypeSlot,
    /// A capacity bundle needs at least one positive slot (spec 21 §3.3).
    #[error("a capacity bundle needs at least one positive slot")]
    EmptyBundle,
    /// The descriptor key is held by another live host.
    #[error("the descriptor key is held by another live host")]
    DescriptorHeldByLiveHost,
    /// The recovery sweep was asked to sweep this host's current run (use the self-sweep).
    #[error("the recovery sweep reclaims another run's rows, not this host's current run")]
    RecoveryOfOwnRun,
    /// A takeover of a dead run's Instance Spot names a target that is not the host run
    /// running it, or names this host's own run as the dead one (spec 21 §7.1).
    #[error("a takeover moves a dead run's record to the run performing it")]
    TakeoverNotByThisRun,
    /// A record to write is outside the record bounds (spec 21 §3.4).
    #[error("record out of bounds: {0}")]
    RecordOutOfBounds(#[source] zlink_codec::CodecError),
    /// A runtime-private row could not be encoded (nothing is written in its place).
    #[error("the {record} row could not be encoded")]
    RowEncoding {
        /// Which row.
        record: RecordName,
    },
    /// The runtime was started outside a tokio runtime.
    #[error("the location runtime needs a tokio runtime")]
    NoTokioRuntime,
    /// A location list page size outside `1..=1000` (spec 21 §7.4).
    #[error("page size {0} outside 1..=1000")]
    PageSizeOutOfRange(u32),
    /// Bytes that are not a continuation token this runtime issued.
    #[error("malformed page token")]
    MalformedPageToken,
    /// A continuation token issued for a list read with another filter.
    #[error("the page token belongs to a list read with another filter")]
    PageTokenForAnotherList,
}

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
    InvalidOperation(#[from] InvalidOperation),
    /// A stored row could not be read as its format says; the runtime never guesses how to
    /// read it.
    #[error("stored {record} record is malformed or of an unknown version")]
    CorruptRecord {
        /// Which row.
        record: RecordName,
    },
    /// A stored record was rejected by the codec (an unknown `recordVersion`, a malformed or
    /// out-of-bounds value); the runtime never guesses how to read it.
    #[error("stored {record} record rejected: {source}")]
    Decode {
        /// Which record.
        record: RecordName,
        /// The codec's reason.
        #[source]
        source: zlink_codec::CodecError,
    },
    /// The Store answered something its contract forbids.
    #[error("the location store broke its contract: {0}")]
    StoreContract(ContractViolation),
    /// A request could not be built within the Store's bounds.
    #[error("out of the store's bounds: {0}")]
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
    /// The snapshot a list continuation token reads is gone: start a new cycle without a token
    /// (spec 21 §6.2).
    #[error("the list snapshot expired: start a new cycle")]
    ScanExpired,
    /// A Store request failed; if it had started, whether it committed is unknown.
    #[error("location store: {0}")]
    Store(#[from] StoreError),
}

impl LocationError {
    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            LocationError::Config(_) => ErrorKind::Configuration,
            LocationError::Admission(_) => ErrorKind::AdmissionRefused,
            LocationError::GenerationExhausted { .. } => ErrorKind::GenerationExhausted,
            LocationError::CapacityExceeded => ErrorKind::CapacityExceeded,
            LocationError::InvalidOperation(_) => ErrorKind::InvalidOperation,
            LocationError::CorruptRecord { .. } | LocationError::Decode { .. } => {
                ErrorKind::CorruptRecord
            }
            LocationError::StoreContract(_) => ErrorKind::StoreContractViolation,
            LocationError::Argument(_) => ErrorKind::OutOfBounds,
            LocationError::RevisionExhausted => ErrorKind::RevisionExhausted,
            LocationError::LeaseLost => ErrorKind::LeaseLost,
            LocationError::Contended => ErrorKind::Contended,
            LocationError::Stopped => ErrorKind::Stopped,
            LocationError::ScanExpired => ErrorKind::ScanExpired,
            LocationError::Store(_) => ErrorKind::Store,
        }
    }

    /// A record that did not decode as the named kind.
    pub fn corrupt(record: RecordName) -> Self {
        LocationError::CorruptRecord { record }
    }

    pub(crate) fn decode(record: RecordName) -> impl FnOnce(zlink_codec::CodecError) -> Self {
        move |source| LocationError::Decode { record, source }
    }
}

/// The version the Store returned for the `index`-th `Put` of an applied write; a missing one
/// breaks the Store contract (one version per put, in order).
pub(crate) fn put_version(
    versions: &[StoreVersion],
    index: usize,
) -> Result<StoreVersion, LocationError> {
    versions
        .get(index)
        .cloned()
        .ok_or(LocationError::StoreContract(
            ContractViolation::MissingPutVersion,
        ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_has_a_kind_and_no_backend_text() {
        let cases = [
            (LocationError::CapacityExceeded, ErrorKind::CapacityExceeded),
            (
                LocationError::InvalidOperation(InvalidOperation::ZeroReservationId),
                ErrorKind::InvalidOperation,
            ),
            (
                LocationError::corrupt(RecordName::NodeCapacity),
                ErrorKind::CorruptRecord,
            ),
            (
                LocationError::StoreContract(ContractViolation::MissingPutVersion),
                ErrorKind::StoreContractViolation,
            ),
            (LocationError::LeaseLost, ErrorKind::LeaseLost),
            (LocationError::Stopped, ErrorKind::Stopped),
            (LocationError::Store(StoreError::TimedOut), ErrorKind::Store),
        ];
        for (error, kind) in cases {
            assert_eq!(error.kind(), kind, "{error}");
            assert!(!error.to_string().is_empty());
        }
    }
}
