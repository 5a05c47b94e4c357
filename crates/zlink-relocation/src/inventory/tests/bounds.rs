//! Page bounds (entries and bytes), tree levels and the commit batch bound, each at the bound
//! and one past it.

use super::{build_with, craft, entry, members, stored};
use crate::inventory::format::{decode_page, encode_leaf};
use crate::inventory::{
    Inventory, InventoryError, MAX_ENTRY_RECORD_LEN, MAX_LEAF_PAGE_BYTES, MAX_PAGE_BYTES,
    MAX_PAGE_ENTRIES, MemberKind, PAGE_HEADER_LEN, PageLimits, SpotWideCommitKeys,
};

#[test]
fn exactly_1024_entries_make_one_page() {
    // The User Spot plus Actors 1..1023, as in 21 §1.2's example.
    let inventory = Inventory::build(members(1023)).unwrap();
    let root = inventory.root();
    assert_eq!(
        (root.total_count(), root.page_count(), root.height()),
        (1024, 1, 0)
    );
    assert_eq!(inventory.pages().len(), 1);
}

#[test]
fn entry_1025_spills_to_a_second_page() {
    let inventory = Inventory::build(members(1024)).unwrap();
    let root = inventory.root();
    assert_eq!(
        (root.total_count(), root.page_count(), root.height()),
        (1025, 2, 1)
    );
    let counts: Vec<u64> = inventory
        .leaf_pages()
        .map(|p| p.reference().entries())
        .collect();
    assert_eq!(counts, [1024, 1]);
    assert_eq!(root.index_page_count(), 1);
}

#[test]
fn ten_thousand_actors_make_ten_pages_and_one_index_page() {
    let inventory = Inventory::build(members(9_999)).unwrap();
    let root = inventory.root();
    assert_eq!((root.total_count(), root.page_count()), (10_000, 10));
    assert_eq!((root.index_page_count(), root.height()), (1, 1));
    // 2,500 Actors need at least 3 pages (28 §6).
    assert_eq!(
        Inventory::build(members(2_500))
            .unwrap()
            .root()
            .page_count(),
        3
    );
}

/// Entries whose record is exactly 18 bytes (5-byte id, 1-byte stable type).
fn fixed_size_members(count: usize) -> Vec<crate::inventory::InventoryEntry> {
    std::iter::once(entry(MemberKind::UserSpot, "s0000", 1, "t"))
        .chain((1..count).map(|i| entry(MemberKind::Actor, &format!("a{i:04}"), 1, "t")))
        .collect()
}

#[test]
fn page_exactly_at_the_byte_bound_fits() {
    let bound = PAGE_HEADER_LEN + 40 * 18;
    let inventory = build_with(
        PageLimits::new(1024, bound).unwrap(),
        fixed_size_members(40),
    );
    assert_eq!(inventory.root().page_count(), 1);
    assert_eq!(inventory.pages()[0].bytes().len(), bound);
}

#[test]
fn one_byte_over_the_byte_bound_spills_to_a_new_page() {
    let bound = PAGE_HEADER_LEN + 40 * 18;
    let limits = PageLimits::new(1024, bound - 1).unwrap();
    let inventory = build_with(limits, fixed_size_members(40));
    let lens: Vec<usize> = inventory.leaf_pages().map(|p| p.bytes().len()).collect();
    assert_eq!(lens, [PAGE_HEADER_LEN + 39 * 18, PAGE_HEADER_LEN + 18]);
    // And one more entry at the exact bound spills the same way.
    let limits = PageLimits::new(1024, bound).unwrap();
    assert_eq!(
        build_with(limits, fixed_size_members(41))
            .root()
            .page_count(),
        2
    );
}

fn largest_entry(kind: MemberKind, n: usize) -> crate::inventory::InventoryEntry {
    let id = format!("{n:05}{}", "i".repeat(250));
    entry(kind, &id, (1 << 63) - 2, &"t".repeat(255))
}

#[test]
fn largest_entries_fill_1024_per_page_well_within_one_mebibyte() {
    // With the id and stable type bounds no page of 1,024 entries can reach 1 MiB, so one
    // entry always fits an empty page and the entry bound is the one that splits.
    let entries: Vec<_> = std::iter::once(largest_entry(MemberKind::UserSpot, 0))
        .chain((1..1025).map(|n| largest_entry(MemberKind::Actor, n)))
        .collect();
    let inventory = Inventory::build(entries).unwrap();
    let leaves: Vec<_> = inventory.leaf_pages().collect();
    assert_eq!(leaves.len(), 2);
    assert_eq!(leaves[0].bytes().len(), MAX_LEAF_PAGE_BYTES);
    assert_eq!(
        MAX_LEAF_PAGE_BYTES,
        PAGE_HEADER_LEN + 1024 * MAX_ENTRY_RECORD_LEN
    );
    assert_eq!(MAX_ENTRY_RECORD_LEN, 522);
    inventory.root().verify_pages(stored(&inventory)).unwrap();
}

#[test]
fn smallest_byte_limit_still_fits_one_largest_entry() {
    let limits = PageLimits::new(2, PageLimits::MIN_BYTES).unwrap();
    let entries = vec![
        largest_entry(MemberKind::UserSpot, 0),
        largest_entry(MemberKind::Actor, 1),
    ];
    let inventory = build_with(limits, entries);
    assert_eq!(inventory.root().page_count(), 2);
    assert!(
        inventory
            .pages()
            .iter()
            .all(|p| p.bytes().len() <= PageLimits::MIN_BYTES)
    );
    inventory.root().verify_pages(stored(&inventory)).unwrap();
}

#[test]
fn page_limits_outside_the_spec_are_rejected() {
    assert_eq!(PageLimits::default(), PageLimits::SPEC);
    assert!(PageLimits::new(1024, MAX_PAGE_BYTES).is_ok());
    assert!(PageLimits::new(2, PageLimits::MIN_BYTES).is_ok());
    for (entries, bytes) in [
        (1025, MAX_PAGE_BYTES),
        (1024, MAX_PAGE_BYTES + 1),
        (1, MAX_PAGE_BYTES),
        (1024, PageLimits::MIN_BYTES - 1),
    ] {
        assert_eq!(
            PageLimits::new(entries, bytes).unwrap_err(),
            InventoryError::LimitsOutOfRange {
                max_entries: entries,
                max_bytes: bytes
            }
        );
    }
}

#[test]
fn decoder_accepts_1024_records_and_rejects_1025() {
    let at_bound = members(1023);
    assert!(decode_page(&encode_leaf(at_bound.iter())).is_ok());
    let past = members(1024);
    assert_eq!(
        decode_page(&encode_leaf(past.iter())).unwrap_err(),
        InventoryError::PageRecordCount {
            count: 1025,
            max: MAX_PAGE_ENTRIES
        }
    );
    let empty: Vec<crate::inventory::InventoryEntry> = Vec::new();
    assert!(matches!(
        decode_page(&encode_leaf(empty.iter())).unwrap_err(),
        InventoryError::PageRecordCount { count: 0, .. }
    ));
}

#[test]
fn decoder_rejects_a_page_over_one_mebibyte_before_parsing() {
    let mut at_bound = encode_leaf(members(0).iter());
    at_bound.resize(MAX_PAGE_BYTES, 0);
    // At the bound the size is fine; the padding is what is wrong.
    assert!(matches!(
        decode_page(&at_bound).unwrap_err(),
        InventoryError::TrailingBytes { .. }
    ));
    at_bound.push(0);
    assert_eq!(
        decode_page(&at_bound).unwrap_err(),
        InventoryError::PageTooLarge {
            len: MAX_PAGE_BYTES + 1,
            max: MAX_PAGE_BYTES
        }
    );
}

#[test]
fn index_page_holds_max_children_and_one_more_leaf_adds_a_level() {
    let limits = PageLimits::new(4, MAX_PAGE_BYTES).unwrap();
    // 16 entries: 4 leaves under one index page.
    let at = build_with(limits, members(15));
    let root = at.root();
    assert_eq!(
        (root.page_count(), root.index_page_count(), root.height()),
        (4, 1, 1)
    );
    // 17 entries: 5 leaves, two index pages, and a second level above them.
    let past = build_with(limits, members(16));
    let root = past.root();
    assert_eq!(
        (root.page_count(), root.index_page_count(), root.height()),
        (5, 3, 2)
    );
    past.root().verify_pages(stored(&past)).unwrap();
}

fn leaves_of_two(
    entries: Vec<crate::inventory::InventoryEntry>,
) -> Vec<Vec<crate::inventory::InventoryEntry>> {
    entries.chunks(2).map(<[_]>::to_vec).collect()
}

#[test]
fn index_page_of_1024_children_verifies_and_1025_is_rejected() {
    let (root, pages) = craft(&leaves_of_two(members(2047)));
    assert_eq!((root.page_count(), root.height()), (1024, 1));
    root.verify_pages(pages).unwrap();
    let (root, pages) = craft(&leaves_of_two(members(2048)));
    assert_eq!(root.page_count(), 1025);
    assert_eq!(
        root.verify_pages(pages).unwrap_err(),
        InventoryError::PageRecordCount {
            count: 1025,
            max: MAX_PAGE_ENTRIES
        }
    );
}

#[test]
fn commit_batch_fits_2048_keys_and_rejects_one_more() {
    let at = SpotWideCommitKeys::new(SpotWideCommitKeys::MAX_CAPACITY_ROWS).unwrap();
    assert_eq!(at.total(), 2048);
    assert_eq!(SpotWideCommitKeys::new(3).unwrap().total(), 5);
    let err = SpotWideCommitKeys::new(SpotWideCommitKeys::MAX_CAPACITY_ROWS + 1).unwrap_err();
    assert_eq!(
        err,
        InventoryError::CommitTooManyKeys {
            keys: 2049,
            max: 2048
        }
    );
    assert!(SpotWideCommitKeys::new(usize::MAX).is_err());
}
