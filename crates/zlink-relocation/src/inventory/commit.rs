//! How many Location Store keys the final SpotWide CAS names (22 §4).

use zlink_store_spi::WriteRequest;

use crate::inventory::error::InventoryError;

/// The keys of the one SpotWide commit batch: the aggregate authority, the record holding the
/// inventory root (start position, total count, content checksum) and the capacity counter
/// rows. The inventory pages are **not** in it: they are pre-stored as immutable values before
/// the commit (22 §4), and the root authenticates every one of them through the digest chain
/// (root → start page → child digests → leaf pages), so conditioning the root's record is
/// enough. The key count therefore does not grow with the page count or the member count; the
/// total number of Actors of one User Spot is not limited by the batch's 2,048-key bound.
///
/// If a caller embeds the root in the aggregate authority record, it needs one key fewer than
/// [`total`](Self::total) counts; this helper counts them separately (the upper bound).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpotWideCommitKeys {
    capacity_rows: usize,
}

impl SpotWideCommitKeys {
    /// The aggregate authority row.
    pub const AGGREGATE_AUTHORITY: usize = 1;
    /// The inventory root record.
    pub const INVENTORY_ROOT: usize = 1;
    /// The most unique keys one Location Store batch may name (2,048).
    pub const MAX_KEYS: usize = WriteRequest::MAX_UNIQUE_KEYS;
    /// The most capacity rows that still fit one batch (2,046).
    pub const MAX_CAPACITY_ROWS: usize =
        Self::MAX_KEYS - Self::AGGREGATE_AUTHORITY - Self::INVENTORY_ROOT;

    /// The keys of a commit touching `capacity_rows` distinct capacity counter rows (e.g. the
    /// target's Actor, Spot and Spot-type counters). More than one batch allows is
    /// [`InventoryError::CommitTooManyKeys`].
    pub fn new(capacity_rows: usize) -> Result<Self, InventoryError> {
        let keys = capacity_rows.saturating_add(Self::AGGREGATE_AUTHORITY + Self::INVENTORY_ROOT);
        if capacity_rows > Self::MAX_CAPACITY_ROWS {
            return Err(InventoryError::CommitTooManyKeys {
                keys,
                max: Self::MAX_KEYS,
            });
        }
        Ok(Self { capacity_rows })
    }

    /// The capacity counter rows.
    pub fn capacity_rows(&self) -> usize {
        self.capacity_rows
    }

    /// Every key the batch names (at most 2,048).
    pub fn total(&self) -> usize {
        Self::AGGREGATE_AUTHORITY + Self::INVENTORY_ROOT + self.capacity_rows
    }
}
