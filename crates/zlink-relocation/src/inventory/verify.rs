//! Reading and verifying a stored inventory against its root.

use zlink_store_spi::entropy::{HashMap, HashSet};

use crate::inventory::entry::{InventoryEntry, MemberKind};
use crate::inventory::error::InventoryError;
use crate::inventory::format::{
    ContentHasher, DecodedPage, InventoryRoot, PageDigest, PageRef, decode_page,
};

/// An inventory whose every page matched the root: the entries in list order (the User Spot
/// first, then its Actors by id bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedInventory {
    root: InventoryRoot,
    entries: Vec<InventoryEntry>,
}

impl VerifiedInventory {
    /// The root it was verified against.
    pub fn root(&self) -> &InventoryRoot {
        &self.root
    }

    /// Every entry in list order.
    pub fn entries(&self) -> &[InventoryEntry] {
        &self.entries
    }

    /// The User Spot entry (always the first).
    pub fn spot(&self) -> &InventoryEntry {
        // Verification guarantees at least the User Spot entry.
        &self.entries[0]
    }

    /// The member Actor entries, by id.
    pub fn actors(&self) -> &[InventoryEntry] {
        &self.entries[1..]
    }

    /// The entries.
    pub fn into_entries(self) -> Vec<InventoryEntry> {
        self.entries
    }
}

/// Checks the list order and the User Spot rule entry by entry.
fn check_order(
    previous: Option<&InventoryEntry>,
    next: &InventoryEntry,
) -> Result<(), InventoryError> {
    let Some(previous) = previous else {
        return match next.kind() {
            MemberKind::UserSpot => Ok(()),
            _ => Err(InventoryError::StoredSpotMissing),
        };
    };
    match previous.cmp_identity(next) {
        std::cmp::Ordering::Less if next.kind() == MemberKind::UserSpot => {
            Err(InventoryError::StoredSpotRepeated {
                id: next.id().to_string(),
            })
        }
        std::cmp::Ordering::Less => Ok(()),
        std::cmp::Ordering::Equal => Err(InventoryError::StoredDuplicate {
            kind: next.kind(),
            id: next.id().to_string(),
        }),
        std::cmp::Ordering::Greater => Err(InventoryError::EntriesOutOfOrder {
            previous: previous.id().to_string(),
            next: next.id().to_string(),
        }),
    }
}

impl InventoryRoot {
    /// Verifies the inventory page by page, fetching each page by its digest (the caller maps
    /// a digest to its store key and reads it). Walks the tree from the start page in list
    /// order and checks: every referenced page is present, has the recorded length and
    /// digest, sits at the expected level and holds the counts its parent records; no page is
    /// referenced twice; entries are strictly increasing by (kind, id) across all pages with
    /// the User Spot first and only once; and the totals — entries, leaf pages, index pages —
    /// and the content checksum equal the root's. Any mismatch is a typed error and nothing is
    /// returned.
    pub fn verify_with<F, B>(&self, mut fetch: F) -> Result<VerifiedInventory, InventoryError>
    where
        F: FnMut(&PageDigest) -> Option<B>,
        B: AsRef<[u8]>,
    {
        self.check_shape()?;
        let mut stack: Vec<(PageRef, u8, bool)> = vec![(self.start_ref(), self.height, true)];
        let mut seen = HashSet::default();
        let (mut leaf_pages, mut index_pages) = (0u64, 0u64);
        let mut entries: Vec<InventoryEntry> = Vec::new();
        let mut hasher = ContentHasher::new();
        while let Some((reference, level, is_start)) = stack.pop() {
            let digest = reference.digest;
            if !seen.insert(digest) {
                return Err(InventoryError::PageReferencedTwice { digest });
            }
            let page = fetch(&digest).ok_or(InventoryError::MissingPage { digest })?;
            let bytes = page.as_ref();
            if bytes.len() as u64 != u64::from(reference.encoded_len) {
                return Err(InventoryError::PageLengthMismatch {
                    digest,
                    expected: u64::from(reference.encoded_len),
                    actual: bytes.len() as u64,
                });
            }
            let actual = PageDigest::of(bytes);
            if actual != digest {
                return Err(InventoryError::PageChecksumMismatch {
                    expected: digest,
                    actual,
                });
            }
            let (found_level, subtree_entries, subtree_leaves) = match decode_page(bytes)? {
                DecodedPage::Leaf(page_entries) => {
                    leaf_pages += 1;
                    let count = page_entries.len() as u64;
                    for entry in page_entries {
                        check_order(entries.last(), &entry)?;
                        hasher.push(&entry);
                        entries.push(entry);
                    }
                    (0, count, 1)
                }
                DecodedPage::Index {
                    level: found,
                    children,
                } => {
                    index_pages += 1;
                    let sum = |f: fn(&PageRef) -> u64| {
                        children
                            .iter()
                            .try_fold(0u64, |acc, c| acc.checked_add(f(c)))
                    };
                    let counts = (sum(|c| c.entries), sum(|c| c.leaf_pages));
                    if found == level {
                        let below = level - 1;
                        stack.extend(children.iter().rev().map(|c| (*c, below, false)));
                    }
                    // An overflowing sum cannot equal any recorded u64 count.
                    (
                        found,
                        counts.0.unwrap_or(u64::MAX),
                        counts.1.unwrap_or(u64::MAX),
                    )
                }
            };
            if found_level != level {
                return Err(InventoryError::LevelMismatch {
                    digest,
                    expected: level,
                    actual: found_level,
                });
            }
            // The start page's counts are the root's totals, checked after the walk.
            if !is_start {
                for (what, expected, actual) in [
                    ("entries", reference.entries, subtree_entries),
                    ("leaf pages", reference.leaf_pages, subtree_leaves),
                ] {
                    if expected != actual {
                        return Err(InventoryError::SubtreeCountMismatch {
                            digest,
                            what,
                            expected,
                            actual,
                        });
                    }
                }
            }
        }
        if entries.len() as u64 != self.total_count {
            return Err(InventoryError::CountMismatch {
                expected: self.total_count,
                actual: entries.len() as u64,
            });
        }
        for (what, expected, actual) in [
            ("leaf pages", self.leaf_page_count, leaf_pages),
            ("index pages", self.index_page_count, index_pages),
        ] {
            if expected != actual {
                return Err(InventoryError::PageCountMismatch {
                    what,
                    expected,
                    actual,
                });
            }
        }
        if hasher.finish() != self.content_checksum {
            return Err(InventoryError::ContentChecksumMismatch);
        }
        Ok(VerifiedInventory {
            root: *self,
            entries,
        })
    }

    /// Verifies a set of pages as read from a store: `(reference, bytes)` pairs, in any order,
    /// where the reference is the digest the page was stored and read under. Besides every
    /// check of [`verify_with`](Self::verify_with), two pages under one reference are
    /// [`InventoryError::DuplicatePage`] and a page the tree does not reference is
    /// [`InventoryError::ExtraPage`].
    pub fn verify_pages<I, B>(&self, pages: I) -> Result<VerifiedInventory, InventoryError>
    where
        I: IntoIterator<Item = (PageDigest, B)>,
        B: AsRef<[u8]>,
    {
        let mut by_ref: HashMap<PageDigest, B> = HashMap::default();
        for (digest, bytes) in pages {
            if by_ref.insert(digest, bytes).is_some() {
                return Err(InventoryError::DuplicatePage { digest });
            }
        }
        let verified = self.verify_with(|digest| by_ref.remove(digest))?;
        if let Some(digest) = by_ref.keys().min() {
            return Err(InventoryError::ExtraPage { digest: *digest });
        }
        Ok(verified)
    }
}
