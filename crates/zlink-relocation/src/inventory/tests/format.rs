//! The byte format (pinned layout), round trips, determinism and root decoding.

use sha2::{Digest, Sha256};

use super::{actor, build_with, members, spot, stored};
use crate::inventory::format::decode_page;
use crate::inventory::{
    FORMAT_VERSION, Inventory, InventoryError, InventoryErrorKind, InventoryRoot, PageDigest,
    PageLimits, ROOT_LEN, TargetListChecksum, target_list_checksum,
};

#[test]
fn leaf_page_bytes_follow_the_documented_layout() {
    let inventory = Inventory::build(vec![actor("a"), spot("s")]).unwrap();
    let page = inventory.pages()[0].bytes();
    let expected: Vec<u8> = [
        &b"ZLIP"[..],
        &[1, 0, 0, 2],                   // version 1, level 0, 2 records
        &[1, 1, 0, 0, 0, 0, 0, 0, 0, 7], // User Spot, FollowOwner, generation 7
        &[1, b's', 4],
        b"room",
        &[2, 1, 0, 0, 0, 0, 0, 0, 0, 3], // Actor, FollowOwner, generation 3
        &[1, b'a', 6],
        b"player",
    ]
    .concat();
    assert_eq!(&page[..], &expected[..]);
    assert_eq!(inventory.root().start(), PageDigest::of(&expected));
}

#[test]
fn content_checksum_is_sha256_of_domain_records_and_count() {
    let inventory = Inventory::build(vec![actor("a"), spot("s")]).unwrap();
    let records = &inventory.pages()[0].bytes()[8..];
    let mut sha = Sha256::new();
    sha.update(b"zlink-relocation/target-list/v1\0");
    sha.update(records);
    sha.update(2u64.to_be_bytes());
    let expected = TargetListChecksum::from_bytes(sha.finalize().into());
    assert_eq!(inventory.root().content_checksum(), expected);
    assert_eq!(
        target_list_checksum(&[spot("s"), actor("a")]).unwrap(),
        expected
    );
}

#[test]
fn root_bytes_follow_the_documented_layout() {
    let inventory = build_with(PageLimits::new(2, 4096).unwrap(), members(4));
    let root = inventory.root();
    let bytes = root.encode();
    assert_eq!(bytes.len(), ROOT_LEN);
    assert_eq!(
        &bytes[..6],
        &[b'Z', b'L', b'I', b'R', FORMAT_VERSION, root.height()]
    );
    assert_eq!(&bytes[6..14], &5u64.to_be_bytes());
    assert_eq!(&bytes[14..22], &3u64.to_be_bytes()); // leaf pages
    assert_eq!(&bytes[22..30], &root.index_page_count().to_be_bytes());
    assert_eq!(&bytes[30..62], root.content_checksum().as_bytes());
    assert_eq!(&bytes[62..94], root.start().as_bytes());
    assert_eq!(&bytes[94..98], &root.start_len().to_be_bytes());
    assert_eq!(InventoryRoot::decode(&bytes).unwrap(), *root);
}

#[test]
fn index_page_records_digest_counts_and_length_of_each_child() {
    let inventory = build_with(PageLimits::new(2, 4096).unwrap(), members(2));
    let leaves: Vec<_> = inventory.leaf_pages().collect();
    let start = inventory.pages().last().unwrap();
    assert_eq!(start.level(), 1);
    let mut expected = vec![b'Z', b'L', b'I', b'P', 1, 1, 0, 2];
    for leaf in &leaves {
        let r = leaf.reference();
        expected.extend_from_slice(r.digest().as_bytes());
        expected.extend_from_slice(&r.entries().to_be_bytes());
        expected.extend_from_slice(&1u64.to_be_bytes());
        expected.extend_from_slice(&r.encoded_len().to_be_bytes());
    }
    assert_eq!(&start.bytes()[..], &expected[..]);
}

#[test]
fn round_trip_returns_the_sorted_entries() {
    let inventory = build_with(PageLimits::new(3, 4096).unwrap(), members(10));
    let verified = inventory.root().verify_pages(stored(&inventory)).unwrap();
    assert_eq!(verified.entries(), &members(10)[..]);
    assert_eq!(verified.spot(), &spot("spot"));
    assert_eq!(verified.actors().len(), 10);
    assert_eq!(verified.root(), inventory.root());
    let root = InventoryRoot::decode(&inventory.root().encode()).unwrap();
    let again = root
        .verify_with(|d| {
            inventory
                .pages()
                .iter()
                .find(|p| p.digest() == *d)
                .map(|p| p.bytes().clone())
        })
        .unwrap();
    assert_eq!(again.into_entries(), members(10));
}

#[test]
fn input_order_does_not_change_pages_or_root() {
    let forward = members(2_100);
    let mut backward = forward.clone();
    backward.reverse();
    let mut interleaved: Vec<_> = forward.iter().skip(1).step_by(2).cloned().collect();
    interleaved.extend(forward.iter().step_by(2).cloned());
    let a = Inventory::build(forward).unwrap();
    let b = Inventory::build(backward).unwrap();
    let c = Inventory::build(interleaved).unwrap();
    assert_eq!(a, b);
    assert_eq!(a, c);
}

#[test]
fn content_checksum_does_not_depend_on_page_limits() {
    let one = Inventory::build(members(50)).unwrap();
    let many = build_with(PageLimits::new(2, 4096).unwrap(), members(50));
    assert_ne!(one.root().start(), many.root().start());
    assert_eq!(
        one.root().content_checksum(),
        many.root().content_checksum()
    );
    assert_eq!(
        target_list_checksum(&members(50)).unwrap(),
        one.root().content_checksum()
    );
}

#[test]
fn any_field_change_changes_the_target_list_checksum() {
    let base = target_list_checksum(&[spot("s"), actor("a")]).unwrap();
    let variants = [
        vec![spot("s"), actor("b")],
        vec![spot("t"), actor("a")],
        vec![
            spot("s"),
            super::entry(crate::inventory::MemberKind::Actor, "a", 4, "player"),
        ],
        vec![
            spot("s"),
            super::entry(crate::inventory::MemberKind::Actor, "a", 3, "playes"),
        ],
        vec![spot("s")],
        vec![spot("s"), actor("a"), actor("c")],
    ];
    for variant in variants {
        assert_ne!(target_list_checksum(&variant).unwrap(), base, "{variant:?}");
    }
}

#[test]
fn root_decoding_rejects_magic_version_length_and_inconsistency() {
    let bytes = Inventory::build(members(1))
        .unwrap()
        .root()
        .encode()
        .to_vec();
    let mut magic = bytes.clone();
    magic[0] = b'X';
    assert_eq!(
        InventoryRoot::decode(&magic).unwrap_err(),
        InventoryError::BadMagic { what: "root" }
    );
    let mut version = bytes.clone();
    version[4] = 2;
    let err = InventoryRoot::decode(&version).unwrap_err();
    assert_eq!(
        err,
        InventoryError::UnsupportedVersion {
            what: "root",
            version: 2
        }
    );
    assert_eq!(err.kind(), InventoryErrorKind::UnsupportedVersion);
    assert!(!err.is_data_lost());
    assert_eq!(
        InventoryRoot::decode(&bytes[..ROOT_LEN - 1]).unwrap_err(),
        InventoryError::Truncated { what: "root" }
    );
    let mut long = bytes.clone();
    long.push(0);
    assert_eq!(
        InventoryRoot::decode(&long).unwrap_err(),
        InventoryError::TrailingBytes {
            what: "root",
            count: 1
        }
    );
    let mut height = bytes.clone();
    height[5] = 1; // one leaf page, no index page, but height 1
    assert!(matches!(
        InventoryRoot::decode(&height).unwrap_err(),
        InventoryError::RootInconsistent(_)
    ));
    let mut empty = bytes;
    empty[6..14].copy_from_slice(&0u64.to_be_bytes());
    assert!(matches!(
        InventoryRoot::decode(&empty).unwrap_err(),
        InventoryError::RootInconsistent(_)
    ));
}

#[test]
fn page_decoding_rejects_unknown_bytes() {
    let page = Inventory::build(members(0)).unwrap().pages()[0]
        .bytes()
        .to_vec();
    let cases: [(usize, u8, InventoryError); 5] = [
        (0, b'X', InventoryError::BadMagic { what: "page" }),
        (
            4,
            9,
            InventoryError::UnsupportedVersion {
                what: "page",
                version: 9,
            },
        ),
        (5, 65, InventoryError::LevelTooHigh { level: 65, max: 64 }),
        (8, 3, InventoryError::UnknownMemberKind(3)),
        (9, 2, InventoryError::UnknownChange(2)),
    ];
    for (at, byte, expected) in cases {
        let mut bad = page.clone();
        bad[at] = byte;
        assert_eq!(decode_page(&bad).unwrap_err(), expected);
    }
    let mut zero_generation = page.clone();
    zero_generation[10..18].copy_from_slice(&0u64.to_be_bytes());
    assert_eq!(
        decode_page(&zero_generation).unwrap_err(),
        InventoryError::StoredGenerationOutOfRange { value: 0 }
    );
    let mut nul_id = page.clone();
    nul_id[19] = 0;
    let err = decode_page(&nul_id).unwrap_err();
    assert_eq!(
        err,
        InventoryError::StoredTextInvalid {
            field: crate::inventory::TextField::ObjectId,
            problem: crate::inventory::TextProblem::ContainsNul
        }
    );
    assert!(err.is_data_lost());
    assert_eq!(
        decode_page(&page[..page.len() - 1]).unwrap_err(),
        InventoryError::Truncated { what: "page" }
    );
}
