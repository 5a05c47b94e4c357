//! Building the inventory pages and root from a member set (deterministic, order-independent).

use bytes::Bytes;

use crate::inventory::entry::{InventoryEntry, MemberKind};
use crate::inventory::error::InventoryError;
use crate::inventory::format::{
    ContentHasher, INDEX_RECORD_LEN, InventoryRoot, MAX_ENTRY_RECORD_LEN, MAX_PAGE_BYTES,
    MAX_PAGE_ENTRIES, PAGE_HEADER_LEN, PageDigest, PageRef, TargetListChecksum, encode_index,
    encode_leaf, entry_record_len,
};

/// The bounds every page a builder writes respects. The spec's bounds ([`PageLimits::SPEC`]:
/// 1,024 records and 1 MiB) are the default and the maximum; smaller limits exist so tests can
/// reach the byte bound and deep trees with few entries. Readers always accept any page within
/// the spec's bounds, whatever limits wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PageLimits {
    max_entries: usize,
    max_bytes: usize,
}

impl PageLimits {
    /// The spec bounds: at most 1,024 records and 1 MiB per page (21 §1.2).
    pub const SPEC: PageLimits = PageLimits {
        max_entries: MAX_PAGE_ENTRIES,
        max_bytes: MAX_PAGE_BYTES,
    };
    /// The smallest record limit (an index page must merge at least two children).
    pub const MIN_ENTRIES: usize = 2;
    /// The smallest byte limit: a page holding one largest entry (530 bytes).
    pub const MIN_BYTES: usize = PAGE_HEADER_LEN + MAX_ENTRY_RECORD_LEN;

    /// Validates limits: records in 2..=1,024, bytes in 530..=1 MiB.
    pub fn new(max_entries: usize, max_bytes: usize) -> Result<Self, InventoryError> {
        if (Self::MIN_ENTRIES..=MAX_PAGE_ENTRIES).contains(&max_entries)
            && (Self::MIN_BYTES..=MAX_PAGE_BYTES).contains(&max_bytes)
        {
            Ok(Self {
                max_entries,
                max_bytes,
            })
        } else {
            Err(InventoryError::LimitsOutOfRange {
                max_entries,
                max_bytes,
            })
        }
    }

    /// Records per page.
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// Encoded bytes per page.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }
}

impl Default for PageLimits {
    fn default() -> Self {
        Self::SPEC
    }
}

/// One encoded page, ready to be pre-stored as an immutable value under a key the caller
/// derives from [`EncodedPage::digest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedPage {
    reference: PageRef,
    level: u8,
    bytes: Bytes,
}

impl EncodedPage {
    /// The page's SHA-256: its checksum and content address.
    pub fn digest(&self) -> PageDigest {
        self.reference.digest
    }

    /// 0 for a leaf page (entries), 1.. for upper-level (index) pages.
    pub fn level(&self) -> u8 {
        self.level
    }

    /// The reference its parent (or the root) holds.
    pub fn reference(&self) -> PageRef {
        self.reference
    }

    /// The encoded bytes.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }
}

/// A built inventory: the root and every page. Pages are listed leaves first (in entry order),
/// then each upper level bottom-up; the last page is the start page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inventory {
    root: InventoryRoot,
    pages: Vec<EncodedPage>,
}

impl Inventory {
    /// Builds an inventory with the spec's page limits.
    pub fn build(
        entries: impl IntoIterator<Item = InventoryEntry>,
    ) -> Result<Inventory, InventoryError> {
        let mut builder = InventoryBuilder::new();
        builder.extend(entries);
        builder.build()
    }

    /// The root.
    pub fn root(&self) -> &InventoryRoot {
        &self.root
    }

    /// Every page (leaves, then upper levels; the start page last).
    pub fn pages(&self) -> &[EncodedPage] {
        &self.pages
    }

    /// The leaf pages, in entry order.
    pub fn leaf_pages(&self) -> impl Iterator<Item = &EncodedPage> {
        self.pages.iter().filter(|p| p.level == 0)
    }

    /// Splits into the root and the pages.
    pub fn into_parts(self) -> (InventoryRoot, Vec<EncodedPage>) {
        (self.root, self.pages)
    }
}

/// Collects a member set and builds its pages and root. The same set gives the same bytes
/// whatever order it was given in: entries are sorted by (kind, id) — the User Spot first,
/// then Actors by id bytes — and pages are filled greedily in that order.
#[derive(Debug, Clone, Default)]
pub struct InventoryBuilder {
    limits: PageLimits,
    entries: Vec<InventoryEntry>,
}

impl InventoryBuilder {
    /// A builder with the spec's page limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// A builder with other (smaller) page limits.
    pub fn with_limits(limits: PageLimits) -> Self {
        Self {
            limits,
            entries: Vec::new(),
        }
    }

    /// Adds one entry.
    pub fn push(&mut self, entry: InventoryEntry) {
        self.entries.push(entry);
    }

    /// Entries added so far.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry was added.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Sorts and checks the set (no duplicate (kind, id), exactly one User Spot), then writes
    /// the leaf pages, the upper levels until one start page remains, and the root.
    pub fn build(self) -> Result<Inventory, InventoryError> {
        let limits = self.limits;
        let mut entries = self.entries;
        entries.sort_unstable_by(InventoryEntry::cmp_identity);
        check_canonical(entries.iter())?;

        let mut pages = Vec::new();
        let mut hasher = ContentHasher::new();
        let mut refs = Vec::new();
        let mut start = 0;
        let mut bytes = PAGE_HEADER_LEN;
        for (i, entry) in entries.iter().enumerate() {
            hasher.push(entry);
            let len = entry_record_len(entry);
            if i - start == limits.max_entries || bytes + len > limits.max_bytes {
                let page = encode_leaf(entries[start..i].iter());
                refs.push(push_page(&mut pages, 0, page, (i - start) as u64, 1));
                start = i;
                bytes = PAGE_HEADER_LEN;
            }
            bytes += len;
        }
        let last = entries.len() - start;
        refs.push(push_page(
            &mut pages,
            0,
            encode_leaf(entries[start..].iter()),
            last as u64,
            1,
        ));
        let leaf_page_count = refs.len() as u64;

        let per_index = limits
            .max_entries
            .min((limits.max_bytes - PAGE_HEADER_LEN) / INDEX_RECORD_LEN);
        let mut height = 0u8;
        while refs.len() > 1 {
            height += 1;
            refs = refs
                .chunks(per_index)
                .map(|children| {
                    let entries = children.iter().map(|c| c.entries).sum();
                    let leaves = children.iter().map(|c| c.leaf_pages).sum();
                    push_page(
                        &mut pages,
                        height,
                        encode_index(height, children),
                        entries,
                        leaves,
                    )
                })
                .collect();
        }
        let start = refs[0];
        let root = InventoryRoot {
            height,
            total_count: entries.len() as u64,
            leaf_page_count,
            index_page_count: pages.len() as u64 - leaf_page_count,
            content_checksum: hasher.finish(),
            start: start.digest,
            start_len: start.encoded_len,
        };
        tracing::debug!(
            entries = root.total_count,
            leaf_pages = root.leaf_page_count,
            index_pages = root.index_page_count,
            height,
            "built relocation target inventory"
        );
        Ok(Inventory { root, pages })
    }
}

impl Extend<InventoryEntry> for InventoryBuilder {
    fn extend<T: IntoIterator<Item = InventoryEntry>>(&mut self, iter: T) {
        self.entries.extend(iter);
    }
}

fn push_page(
    pages: &mut Vec<EncodedPage>,
    level: u8,
    bytes: Vec<u8>,
    entries: u64,
    leaf_pages: u64,
) -> PageRef {
    let reference = PageRef {
        digest: PageDigest::of(&bytes),
        entries,
        leaf_pages,
        // A page is at most 1 MiB (the limits), so its length fits u32.
        encoded_len: bytes.len() as u32,
    };
    pages.push(EncodedPage {
        reference,
        level,
        bytes: Bytes::from(bytes),
    });
    reference
}

/// Checks entries already sorted by (kind, id): non-empty, the first is the only User Spot,
/// no (kind, id) twice.
fn check_canonical<'a>(
    mut entries: impl Iterator<Item = &'a InventoryEntry>,
) -> Result<(), InventoryError> {
    let mut previous = match entries.next() {
        Some(first) if first.kind() == MemberKind::UserSpot => first,
        _ => return Err(InventoryError::MissingSpot),
    };
    for entry in entries {
        if entry.kind() == previous.kind() && entry.id() == previous.id() {
            return Err(InventoryError::DuplicateEntry {
                kind: entry.kind(),
                id: entry.id().to_string(),
            });
        }
        if entry.kind() == MemberKind::UserSpot {
            return Err(InventoryError::MultipleSpots {
                id: entry.id().to_string(),
            });
        }
        previous = entry;
    }
    Ok(())
}

/// The target-list checksum the Preparing stage records (21 §9.1 "Preparing: … the relocation
/// target list's content checksum"), equal to the built inventory's
/// [`InventoryRoot::content_checksum`].
///
/// It covers, in list order (User Spot first, then Actors by id bytes), every entry's kind,
/// change, ObjectGeneration, id and stable type — exactly the entry records of the leaf pages —
/// and the entry count: `SHA-256("zlink-relocation/target-list/v1\0" ‖ records ‖ u64 BE count)`.
/// It does not cover page boundaries, page digests or the tree shape (those are checked by the
/// page digests and the root's counts), so the same member set gives the same checksum under
/// any page limits. Input order does not matter; duplicates and a missing or second User Spot
/// are rejected as by the builder.
pub fn target_list_checksum(
    entries: &[InventoryEntry],
) -> Result<TargetListChecksum, InventoryError> {
    let mut sorted: Vec<&InventoryEntry> = entries.iter().collect();
    sorted.sort_unstable_by(|a, b| a.cmp_identity(b));
    check_canonical(sorted.iter().copied())?;
    let mut hasher = ContentHasher::new();
    for entry in sorted {
        hasher.push(entry);
    }
    Ok(hasher.finish())
}
