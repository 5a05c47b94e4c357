//! Errors of the relocation target inventory.

use crate::inventory::entry::MemberKind;
use crate::inventory::format::PageDigest;

/// Which text field of an entry is invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TextField {
    /// The global ActorId or SpotId.
    ObjectId,
    /// The stable type.
    StableType,
}

/// What is wrong with a text field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum TextProblem {
    /// Zero bytes long.
    #[error("empty")]
    Empty,
    /// Longer than 255 UTF-8 bytes.
    #[error("{len} bytes, longer than 255")]
    TooLong {
        /// The length found.
        len: usize,
    },
    /// Not valid UTF-8 (only when decoding bytes).
    #[error("not UTF-8")]
    NotUtf8,
    /// Contains a NUL byte (an object id is a `\0`-separated key preimage segment).
    #[error("contains a NUL byte")]
    ContainsNul,
}

/// The coarse kind of an [`InventoryError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InventoryErrorKind {
    /// The caller's entries or limits are invalid; nothing was built.
    InvalidInput,
    /// Bytes of a page or root cannot be decoded.
    Malformed,
    /// A format version this crate does not read (fails explicitly, never guessed).
    UnsupportedVersion,
    /// Pages and root decode but do not agree with each other (missing, extra, changed or
    /// reordered pages or entries, count or checksum mismatch).
    Integrity,
    /// The inventory is intact but is not the target list the Preparing stage recorded.
    TargetListMismatch,
}

/// The error of building, decoding or verifying a relocation target inventory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InventoryError {
    // ---- invalid input ------------------------------------------------------------------
    /// An object id or stable type is not 1..=255 UTF-8 bytes (or an object id holds NUL).
    #[error("invalid {field:?}: {problem}")]
    InvalidText {
        /// The field.
        field: TextField,
        /// What is wrong.
        problem: TextProblem,
    },
    /// An ObjectGeneration outside the issued range 1..=2^63-2.
    #[error("object generation {value} is outside 1..=2^63-2")]
    GenerationOutOfRange {
        /// The value given.
        value: u64,
    },
    /// Page limits outside 2..=1,024 entries or the byte range a largest entry needs..=1 MiB.
    #[error("page limits of {max_entries} entries and {max_bytes} bytes are out of range")]
    LimitsOutOfRange {
        /// The entry limit given.
        max_entries: usize,
        /// The byte limit given.
        max_bytes: usize,
    },
    /// The builder's input names the same (kind, object id) twice.
    #[error("duplicate {kind:?} entry {id:?}")]
    DuplicateEntry {
        /// The member kind.
        kind: MemberKind,
        /// The object id.
        id: String,
    },
    /// The list has no User Spot entry (a SpotWide inventory is the Spot plus its Actors).
    #[error("the target list has no User Spot entry")]
    MissingSpot,
    /// The list has more than one User Spot entry.
    #[error("the target list has a second User Spot entry {id:?}")]
    MultipleSpots {
        /// The id of the second Spot entry.
        id: String,
    },

    // ---- malformed bytes ----------------------------------------------------------------
    /// The bytes end before their structure does.
    #[error("truncated {what}")]
    Truncated {
        /// Page or root.
        what: &'static str,
    },
    /// Bytes remain after the structure ends.
    #[error("{count} trailing bytes after the {what}")]
    TrailingBytes {
        /// Page or root.
        what: &'static str,
        /// How many.
        count: usize,
    },
    /// Not an inventory page or root (wrong magic).
    #[error("not an inventory {what}")]
    BadMagic {
        /// Page or root.
        what: &'static str,
    },
    /// A page or root of a format version this crate does not read.
    #[error("unsupported inventory {what} format version {version}")]
    UnsupportedVersion {
        /// Page or root.
        what: &'static str,
        /// The version found.
        version: u8,
    },
    /// An encoded page larger than 1 MiB.
    #[error("page of {len} bytes is larger than {max}")]
    PageTooLarge {
        /// Its length.
        len: usize,
        /// The bound (1 MiB).
        max: usize,
    },
    /// A page holding no records or more than 1,024.
    #[error("page holds {count} records, outside 1..={max}")]
    PageRecordCount {
        /// The count found.
        count: usize,
        /// The bound (1,024).
        max: usize,
    },
    /// An unknown member kind byte.
    #[error("unknown member kind {0}")]
    UnknownMemberKind(u8),
    /// An unknown member change byte.
    #[error("unknown member change {0}")]
    UnknownChange(u8),
    /// A stored entry's object id or stable type is not valid text of 1..=255 bytes.
    #[error("stored entry has an invalid {field:?}: {problem}")]
    StoredTextInvalid {
        /// The field.
        field: TextField,
        /// What is wrong.
        problem: TextProblem,
    },
    /// A stored entry's ObjectGeneration is outside 1..=2^63-2.
    #[error("stored entry has object generation {value}, outside 1..=2^63-2")]
    StoredGenerationOutOfRange {
        /// The value found.
        value: u64,
    },
    /// A root whose own fields contradict each other (height, counts, start length).
    #[error("inconsistent root: {0}")]
    RootInconsistent(&'static str),
    /// A page level above the deepest tree this format builds.
    #[error("page level {level} is above {max}")]
    LevelTooHigh {
        /// The level found.
        level: u8,
        /// The bound.
        max: u8,
    },

    // ---- integrity ----------------------------------------------------------------------
    /// A page the tree references is not available.
    #[error("page {digest} is missing")]
    MissingPage {
        /// Its digest.
        digest: PageDigest,
    },
    /// A page was supplied that the tree does not reference.
    #[error("page {digest} is not part of this inventory")]
    ExtraPage {
        /// The reference it was supplied under.
        digest: PageDigest,
    },
    /// Two pages were supplied under the same reference.
    #[error("page {digest} was supplied twice")]
    DuplicatePage {
        /// The reference.
        digest: PageDigest,
    },
    /// The tree references the same page twice.
    #[error("page {digest} is referenced twice")]
    PageReferencedTwice {
        /// The page.
        digest: PageDigest,
    },
    /// A page's bytes do not hash to the digest that references it.
    #[error("page {expected} has checksum {actual}")]
    PageChecksumMismatch {
        /// The digest in the parent or root.
        expected: PageDigest,
        /// The digest of the bytes found.
        actual: PageDigest,
    },
    /// A page's length differs from the length its reference records.
    #[error("page {digest} is {actual} bytes, its reference says {expected}")]
    PageLengthMismatch {
        /// The page.
        digest: PageDigest,
        /// The recorded length.
        expected: u64,
        /// The length found.
        actual: u64,
    },
    /// A page sits at another tree level than its parent (or the root's height) says.
    #[error("page {digest} is at level {actual}, expected {expected}")]
    LevelMismatch {
        /// The page.
        digest: PageDigest,
        /// The level expected.
        expected: u8,
        /// The level found.
        actual: u8,
    },
    /// A page's subtree holds another number of entries or leaf pages than its parent says.
    #[error("page {digest} holds {actual} {what}, its parent says {expected}")]
    SubtreeCountMismatch {
        /// The page.
        digest: PageDigest,
        /// Entries or leaf pages.
        what: &'static str,
        /// The recorded count.
        expected: u64,
        /// The count found.
        actual: u64,
    },
    /// The stored pages hold the same (kind, object id) twice (in one page or across pages).
    #[error("stored pages hold {kind:?} entry {id:?} twice")]
    StoredDuplicate {
        /// The member kind.
        kind: MemberKind,
        /// The object id.
        id: String,
    },
    /// The stored pages hold no User Spot entry.
    #[error("the stored target list has no User Spot entry")]
    StoredSpotMissing,
    /// The stored pages hold more than one User Spot entry.
    #[error("the stored target list has a second User Spot entry {id:?}")]
    StoredSpotRepeated {
        /// The id of the second Spot entry.
        id: String,
    },
    /// Entries are not in strictly increasing (kind, id) order across the pages.
    #[error("entry {next:?} follows {previous:?} out of order")]
    EntriesOutOfOrder {
        /// The earlier entry's id.
        previous: String,
        /// The later entry's id.
        next: String,
    },
    /// The pages hold another number of entries than the root's total count.
    #[error("the pages hold {actual} entries, the root says {expected}")]
    CountMismatch {
        /// The root's total count.
        expected: u64,
        /// The count found.
        actual: u64,
    },
    /// The tree has another number of leaf or index pages than the root says.
    #[error("the tree has {actual} {what}, the root says {expected}")]
    PageCountMismatch {
        /// Leaf or index pages.
        what: &'static str,
        /// The root's count.
        expected: u64,
        /// The count found.
        actual: u64,
    },
    /// The entries do not match the root's content checksum.
    #[error("the entries do not match the root's content checksum")]
    ContentChecksumMismatch,

    // ---- target list --------------------------------------------------------------------
    /// The inventory's content checksum differs from the target-list checksum recorded at
    /// Preparing.
    #[error("the target-list content checksum differs from the one recorded at Preparing")]
    TargetListMismatch,
    /// The SpotWide commit batch would name more keys than one Location Store batch allows.
    #[error("the SpotWide commit needs {keys} keys, more than {max}")]
    CommitTooManyKeys {
        /// Keys needed.
        keys: usize,
        /// The bound (2,048).
        max: usize,
    },
}

impl InventoryError {
    /// The coarse kind of this error.
    pub fn kind(&self) -> InventoryErrorKind {
        use InventoryError as E;
        match self {
            E::InvalidText { .. }
            | E::GenerationOutOfRange { .. }
            | E::LimitsOutOfRange { .. }
            | E::DuplicateEntry { .. }
            | E::MissingSpot
            | E::MultipleSpots { .. }
            | E::CommitTooManyKeys { .. } => InventoryErrorKind::InvalidInput,
            E::Truncated { .. }
            | E::TrailingBytes { .. }
            | E::BadMagic { .. }
            | E::PageTooLarge { .. }
            | E::PageRecordCount { .. }
            | E::UnknownMemberKind(_)
            | E::UnknownChange(_)
            | E::StoredTextInvalid { .. }
            | E::StoredGenerationOutOfRange { .. }
            | E::RootInconsistent(_)
            | E::LevelTooHigh { .. } => InventoryErrorKind::Malformed,
            E::UnsupportedVersion { .. } => InventoryErrorKind::UnsupportedVersion,
            E::MissingPage { .. }
            | E::ExtraPage { .. }
            | E::DuplicatePage { .. }
            | E::PageReferencedTwice { .. }
            | E::PageChecksumMismatch { .. }
            | E::PageLengthMismatch { .. }
            | E::LevelMismatch { .. }
            | E::SubtreeCountMismatch { .. }
            | E::StoredDuplicate { .. }
            | E::StoredSpotMissing
            | E::StoredSpotRepeated { .. }
            | E::EntriesOutOfOrder { .. }
            | E::CountMismatch { .. }
            | E::PageCountMismatch { .. }
            | E::ContentChecksumMismatch => InventoryErrorKind::Integrity,
            E::TargetListMismatch => InventoryErrorKind::TargetListMismatch,
        }
    }

    /// Whether the framework treats this as `DataLost` when it reads a stored inventory
    /// (spec 28 §8: a target-list content checksum mismatch is unrecoverable on retry).
    /// Invalid caller input and an unsupported format version are not data loss.
    pub fn is_data_lost(&self) -> bool {
        matches!(
            self.kind(),
            InventoryErrorKind::Malformed
                | InventoryErrorKind::Integrity
                | InventoryErrorKind::TargetListMismatch
        )
    }
}
