//! Each way a stored inventory can disagree with its root is detected as its own typed error,
//! and nothing is returned.

use bytes::Bytes;

use super::{actor, build_with, craft, craft_over, members, page_ref, spot, stored};
use crate::inventory::format::{ContentHasher, encode_index, encode_leaf};
use crate::inventory::{
    Inventory, InventoryError, InventoryErrorKind, InventoryRoot, MemberKind, PageDigest,
    PageLimits,
};

/// 3 leaves (2, 2, 1 entries) under 2 + 1 index pages: height 2.
fn tree() -> Inventory {
    build_with(PageLimits::new(2, 4096).unwrap(), members(4))
}

fn expect_lost(result: Result<impl std::fmt::Debug, InventoryError>) -> InventoryError {
    let err = result.unwrap_err();
    assert!(err.is_data_lost(), "{err:?} should be data loss");
    err
}

/// The root re-decoded after changing bytes `at..` of its encoding.
fn root_with(inventory: &Inventory, at: usize, bytes: &[u8]) -> InventoryRoot {
    let mut encoded = inventory.root().encode().to_vec();
    encoded[at..at + bytes.len()].copy_from_slice(bytes);
    InventoryRoot::decode(&encoded).unwrap()
}

#[test]
fn corrupted_page_byte_is_a_page_checksum_mismatch() {
    let inventory = tree();
    let mut pages = stored(&inventory);
    let target = pages[1].0;
    let mut bytes = pages[1].1.to_vec();
    bytes[12] ^= 0x40;
    pages[1].1 = Bytes::from(bytes);
    let err = expect_lost(inventory.root().verify_pages(pages));
    assert!(
        matches!(err, InventoryError::PageChecksumMismatch { expected, .. } if expected == target)
    );
    assert_eq!(err.kind(), InventoryErrorKind::Integrity);
}

#[test]
fn missing_page_is_detected() {
    let inventory = tree();
    let mut pages = stored(&inventory);
    let (gone, _) = pages.remove(2);
    let err = expect_lost(inventory.root().verify_pages(pages));
    assert_eq!(err, InventoryError::MissingPage { digest: gone });
}

#[test]
fn extra_page_is_detected() {
    let inventory = tree();
    let mut pages = stored(&inventory);
    let stray = Inventory::build(vec![spot("other")]).unwrap();
    let (digest, bytes) = stored(&stray).remove(0);
    pages.push((digest, bytes));
    let err = expect_lost(inventory.root().verify_pages(pages));
    assert_eq!(err, InventoryError::ExtraPage { digest });
}

#[test]
fn page_supplied_twice_is_detected() {
    let inventory = tree();
    let mut pages = stored(&inventory);
    pages.push(pages[0].clone());
    let err = expect_lost(inventory.root().verify_pages(pages));
    assert_eq!(
        err,
        InventoryError::DuplicatePage {
            digest: inventory.pages()[0].digest()
        }
    );
}

#[test]
fn root_total_count_disagreement_is_a_count_mismatch() {
    let inventory = tree();
    let root = root_with(&inventory, 6, &6u64.to_be_bytes());
    let err = expect_lost(root.verify_pages(stored(&inventory)));
    assert_eq!(
        err,
        InventoryError::CountMismatch {
            expected: 6,
            actual: 5
        }
    );
}

#[test]
fn root_page_count_disagreement_is_a_page_count_mismatch() {
    let inventory = tree();
    let root = root_with(&inventory, 14, &4u64.to_be_bytes());
    let err = expect_lost(root.verify_pages(stored(&inventory)));
    assert_eq!(
        err,
        InventoryError::PageCountMismatch {
            what: "leaf pages",
            expected: 4,
            actual: 3
        }
    );
    let root = root_with(&inventory, 22, &4u64.to_be_bytes());
    let err = expect_lost(root.verify_pages(stored(&inventory)));
    assert_eq!(
        err,
        InventoryError::PageCountMismatch {
            what: "index pages",
            expected: 4,
            actual: 3
        }
    );
}

#[test]
fn root_content_checksum_disagreement_is_detected() {
    let inventory = tree();
    let flipped = inventory.root().content_checksum().as_bytes()[0] ^ 0x01;
    let root = root_with(&inventory, 30, &[flipped]);
    let err = expect_lost(root.verify_pages(stored(&inventory)));
    assert_eq!(err, InventoryError::ContentChecksumMismatch);
}

#[test]
fn root_start_length_disagreement_is_a_length_mismatch() {
    let inventory = tree();
    let len = inventory.root().start_len() + 1;
    let root = root_with(&inventory, 94, &len.to_be_bytes());
    let err = expect_lost(root.verify_pages(stored(&inventory)));
    assert!(
        matches!(err, InventoryError::PageLengthMismatch { expected, .. } if expected == u64::from(len))
    );
}

#[test]
fn root_height_disagreement_is_a_level_mismatch() {
    let inventory = tree();
    assert_eq!(inventory.root().height(), 2);
    let root = root_with(&inventory, 5, &[1]);
    let err = expect_lost(root.verify_pages(stored(&inventory)));
    assert!(matches!(
        err,
        InventoryError::LevelMismatch {
            expected: 1,
            actual: 2,
            ..
        }
    ));
}

#[test]
fn root_start_of_another_inventory_is_a_missing_page() {
    let inventory = tree();
    let other = tree_of(members(5));
    let err = expect_lost(other.root().verify_pages(stored(&inventory)));
    assert_eq!(
        err,
        InventoryError::MissingPage {
            digest: other.root().start()
        }
    );
}

fn tree_of(entries: Vec<crate::inventory::InventoryEntry>) -> Inventory {
    build_with(PageLimits::new(2, 4096).unwrap(), entries)
}

#[test]
fn duplicate_id_across_pages_is_detected() {
    let (root, pages) = craft(&[vec![spot("s"), actor("a")], vec![actor("a"), actor("b")]]);
    let err = expect_lost(root.verify_pages(pages));
    assert_eq!(
        err,
        InventoryError::StoredDuplicate {
            kind: MemberKind::Actor,
            id: "a".into()
        }
    );
}

#[test]
fn duplicate_id_within_a_page_is_detected() {
    let (root, pages) = craft(&[vec![spot("s"), actor("a"), actor("a")]]);
    let err = expect_lost(root.verify_pages(pages));
    assert_eq!(
        err,
        InventoryError::StoredDuplicate {
            kind: MemberKind::Actor,
            id: "a".into()
        }
    );
}

#[test]
fn pages_out_of_order_are_detected() {
    let (root, pages) = craft(&[vec![spot("s"), actor("c")], vec![actor("b")]]);
    let err = expect_lost(root.verify_pages(pages));
    assert_eq!(
        err,
        InventoryError::EntriesOutOfOrder {
            previous: "c".into(),
            next: "b".into()
        }
    );
}

#[test]
fn stored_list_without_a_user_spot_is_detected() {
    let (root, pages) = craft(&[vec![actor("a"), actor("b")]]);
    assert_eq!(
        expect_lost(root.verify_pages(pages)),
        InventoryError::StoredSpotMissing
    );
}

#[test]
fn stored_list_with_two_user_spots_is_detected() {
    let (root, pages) = craft(&[vec![spot("s")], vec![spot("t"), actor("a")]]);
    let err = expect_lost(root.verify_pages(pages));
    assert_eq!(err, InventoryError::StoredSpotRepeated { id: "t".into() });
}

#[test]
fn parent_count_disagreeing_with_its_child_is_detected() {
    let leaves = [vec![spot("s"), actor("a")], vec![actor("b")]];
    let mut hasher = ContentHasher::new();
    let mut pages = Vec::new();
    let mut refs = Vec::new();
    for leaf in &leaves {
        leaf.iter().for_each(|e| hasher.push(e));
        let bytes = encode_leaf(leaf.iter());
        // The index page claims 3 entries for the first leaf (it holds 2).
        let claimed = if refs.is_empty() {
            3
        } else {
            leaf.len() as u64
        };
        refs.push(page_ref(&bytes, claimed, 1));
        pages.push(bytes);
    }
    let first = refs[0].digest();
    let (root, stored) = craft_over(pages, refs, hasher);
    let err = expect_lost(root.verify_pages(stored));
    assert_eq!(
        err,
        InventoryError::SubtreeCountMismatch {
            digest: first,
            what: "entries",
            expected: 3,
            actual: 2
        }
    );
}

#[test]
fn page_referenced_twice_is_detected() {
    let leaf = [spot("s"), actor("a")];
    let bytes = encode_leaf(leaf.iter());
    let child = page_ref(&bytes, 2, 1);
    let index = encode_index(1, &[child, child]);
    let start = page_ref(&index, 4, 2);
    let mut hasher = ContentHasher::new();
    leaf.iter().chain(leaf.iter()).for_each(|e| hasher.push(e));
    let root = InventoryRoot {
        height: 1,
        total_count: 4,
        leaf_page_count: 2,
        index_page_count: 1,
        content_checksum: hasher.finish(),
        start: start.digest(),
        start_len: start.encoded_len(),
    };
    let pages = [(PageDigest::of(&bytes), bytes), (start.digest(), index)];
    let err = expect_lost(root.verify_pages(pages));
    assert_eq!(
        err,
        InventoryError::PageReferencedTwice {
            digest: child.digest()
        }
    );
}

#[test]
fn leaf_where_an_index_page_belongs_is_a_level_mismatch() {
    let (root, pages) = craft(&[vec![spot("s")], vec![actor("a")]]);
    let leaf = pages[0].clone();
    // A root that claims the first leaf is the top of a height-1 tree.
    let mut encoded = root.encode().to_vec();
    encoded[62..94].copy_from_slice(leaf.0.as_bytes());
    encoded[94..98].copy_from_slice(&(leaf.1.len() as u32).to_be_bytes());
    let lying = InventoryRoot::decode(&encoded).unwrap();
    let err = expect_lost(lying.verify_with(|d| (*d == leaf.0).then(|| leaf.1.clone())));
    assert!(matches!(
        err,
        InventoryError::LevelMismatch {
            expected: 1,
            actual: 0,
            ..
        }
    ));
}

#[test]
fn intact_inventory_of_another_member_set_fails_the_recorded_target_list() {
    let recorded = Inventory::build(members(3))
        .unwrap()
        .root()
        .content_checksum();
    let inventory = Inventory::build(members(4)).unwrap();
    let verified = inventory.root().verify_pages(stored(&inventory)).unwrap();
    let err = verified.root().check_target_list(&recorded).unwrap_err();
    assert_eq!(err, InventoryError::TargetListMismatch);
    assert_eq!(err.kind(), InventoryErrorKind::TargetListMismatch);
    assert!(err.is_data_lost());
    let same = Inventory::build(members(3)).unwrap();
    same.root().check_target_list(&recorded).unwrap();
}
