//! The relocation target inventory of a `SpotWide` User Spot (spec 21 §1.2, §8, §9.1; 22 §4;
//! 28 §6): the Spot and every member Actor at the seal, as bounded, immutable pages under an
//! upper-level root. Pure: it produces and parses bytes; storing them is the caller's business.
//!
//! - [`InventoryEntry`]: which object moves (kind, [`ObjectId`], [`ObjectGeneration`],
//!   [`StableType`], [`MemberChange`]).
//! - [`InventoryBuilder`] / [`Inventory::build`]: sorted, deduplicated, paged (≤ 1,024 records
//!   and ≤ 1 MiB per page), with upper-level index pages until one start page remains, and an
//!   [`InventoryRoot`] (start position, total count, content checksum, page counts).
//! - [`InventoryRoot::verify_with`] / [`InventoryRoot::verify_pages`]: every page against the
//!   root; any mismatch is a typed [`InventoryError`].
//! - [`target_list_checksum`]: the checksum the Preparing stage records.
//! - [`SpotWideCommitKeys`]: the keys of the one SpotWide commit batch.
//!
//! The byte format is documented in the crate README ("Relocation target inventory").

mod build;
mod commit;
mod entry;
mod error;
mod format;
mod verify;

#[cfg(test)]
mod tests;

pub use build::{EncodedPage, Inventory, InventoryBuilder, PageLimits, target_list_checksum};
pub use commit::SpotWideCommitKeys;
pub use entry::{
    InventoryEntry, MAX_TEXT_LEN, MemberChange, MemberKind, ObjectGeneration, ObjectId, StableType,
};
pub use error::{InventoryError, InventoryErrorKind, TextField, TextProblem};
pub use format::{
    ENTRY_FIXED_LEN, FORMAT_VERSION, INDEX_RECORD_LEN, InventoryRoot, MAX_ENTRY_RECORD_LEN,
    MAX_HEIGHT, MAX_LEAF_PAGE_BYTES, MAX_PAGE_BYTES, MAX_PAGE_ENTRIES, PAGE_HEADER_LEN, PageDigest,
    PageRef, ROOT_LEN, TargetListChecksum,
};
pub use verify::VerifiedInventory;
