//! Tests of the relocation target inventory.

use bytes::Bytes;

use crate::inventory::format::{ContentHasher, PageRef, encode_index, encode_leaf};
use crate::inventory::{
    Inventory, InventoryBuilder, InventoryEntry, InventoryRoot, MemberKind, ObjectGeneration,
    ObjectId, PageDigest, PageLimits, StableType,
};

mod bounds;
mod entries;
mod format;
mod properties;
mod tamper;

pub(super) fn entry(kind: MemberKind, id: &str, generation: u64, ty: &str) -> InventoryEntry {
    InventoryEntry::new(
        kind,
        ObjectId::new(id).unwrap(),
        ObjectGeneration::new(generation).unwrap(),
        StableType::new(ty).unwrap(),
    )
}

pub(super) fn spot(id: &str) -> InventoryEntry {
    entry(MemberKind::UserSpot, id, 7, "room")
}

pub(super) fn actor(id: &str) -> InventoryEntry {
    entry(MemberKind::Actor, id, 3, "player")
}

/// The User Spot `spot` and `actors` Actors `a00000`, `a00001`, ….
pub(super) fn members(actors: usize) -> Vec<InventoryEntry> {
    std::iter::once(spot("spot"))
        .chain((0..actors).map(|i| actor(&format!("a{i:05}"))))
        .collect()
}

pub(super) fn build_with(limits: PageLimits, entries: Vec<InventoryEntry>) -> Inventory {
    let mut builder = InventoryBuilder::with_limits(limits);
    builder.extend(entries);
    builder.build().unwrap()
}

/// The pages as a store would return them: (reference, bytes).
pub(super) fn stored(inventory: &Inventory) -> Vec<(PageDigest, Bytes)> {
    inventory
        .pages()
        .iter()
        .map(|p| (p.digest(), p.bytes().clone()))
        .collect()
}

/// A hand-made, internally consistent tree (digests, counts and content checksum all match
/// the pages) over leaves given verbatim — no sorting or checks — so that the verifier's
/// structural checks can be reached. One leaf gives height 0, several a single index level.
pub(super) fn craft(leaves: &[Vec<InventoryEntry>]) -> (InventoryRoot, Vec<(PageDigest, Bytes)>) {
    let mut pages = Vec::new();
    let mut refs = Vec::new();
    let mut hasher = ContentHasher::new();
    for leaf in leaves {
        leaf.iter().for_each(|e| hasher.push(e));
        let bytes = encode_leaf(leaf.iter());
        refs.push(page_ref(&bytes, leaf.len() as u64, 1));
        pages.push(bytes);
    }
    craft_over(pages, refs, hasher)
}

pub(super) fn page_ref(bytes: &[u8], entries: u64, leaf_pages: u64) -> PageRef {
    PageRef {
        digest: PageDigest::of(bytes),
        entries,
        leaf_pages,
        encoded_len: bytes.len() as u32,
    }
}

/// Finishes a crafted tree over already encoded leaves and their references (which may lie).
pub(super) fn craft_over(
    mut pages: Vec<Vec<u8>>,
    refs: Vec<PageRef>,
    hasher: ContentHasher,
) -> (InventoryRoot, Vec<(PageDigest, Bytes)>) {
    let total: u64 = refs.iter().map(|r| r.entries).sum();
    let leaf_page_count = refs.len() as u64;
    let (height, start, index_pages) = if refs.len() == 1 {
        (0, refs[0], 0)
    } else {
        let index = encode_index(1, &refs);
        let start = page_ref(&index, total, leaf_page_count);
        pages.push(index);
        (1, start, 1)
    };
    let root = InventoryRoot {
        height,
        total_count: total,
        leaf_page_count,
        index_page_count: index_pages,
        content_checksum: hasher.finish(),
        start: start.digest,
        start_len: start.encoded_len,
    };
    let stored = pages
        .into_iter()
        .map(|b| (PageDigest::of(&b), Bytes::from(b)))
        .collect();
    (root, stored)
}
