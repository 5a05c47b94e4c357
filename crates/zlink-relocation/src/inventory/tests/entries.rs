//! Entry field bounds and the builder's input rules.

use super::{actor, entry, members, spot};
use crate::inventory::{
    Inventory, InventoryError, InventoryErrorKind, MemberKind, ObjectGeneration, ObjectId,
    StableType, TextField, TextProblem, target_list_checksum,
};

fn text_problem(err: InventoryError) -> (TextField, TextProblem) {
    match err {
        InventoryError::InvalidText { field, problem } => (field, problem),
        other => panic!("expected InvalidText, got {other:?}"),
    }
}

#[test]
fn object_id_accepts_255_bytes_and_rejects_256() {
    assert_eq!(ObjectId::new("x".repeat(255)).unwrap().len(), 255);
    // Multi-byte characters count in UTF-8 bytes: 85 × 3 = 255, one more byte is 256.
    assert_eq!(ObjectId::new("€".repeat(85)).unwrap().len(), 255);
    assert!(ObjectId::new("€".repeat(85) + "x").is_err());
    let err = ObjectId::new("x".repeat(256)).unwrap_err();
    assert_eq!(err.kind(), InventoryErrorKind::InvalidInput);
    assert_eq!(
        text_problem(err),
        (TextField::ObjectId, TextProblem::TooLong { len: 256 })
    );
}

#[test]
fn object_id_rejects_empty_nul_and_invalid_utf8() {
    assert_eq!(
        text_problem(ObjectId::new("").unwrap_err()),
        (TextField::ObjectId, TextProblem::Empty)
    );
    assert_eq!(
        text_problem(ObjectId::new("a\0b").unwrap_err()),
        (TextField::ObjectId, TextProblem::ContainsNul)
    );
    assert_eq!(
        text_problem(ObjectId::from_utf8(&[0x61, 0xff]).unwrap_err()),
        (TextField::ObjectId, TextProblem::NotUtf8)
    );
}

#[test]
fn object_ids_compare_exactly_without_case_folding() {
    assert_ne!(
        ObjectId::new("User:1").unwrap(),
        ObjectId::new("user:1").unwrap()
    );
    assert!(ObjectId::new("B").unwrap() < ObjectId::new("a").unwrap());
}

#[test]
fn stable_type_accepts_255_bytes_and_rejects_256_and_empty() {
    assert!(StableType::new("t".repeat(255)).is_ok());
    assert_eq!(
        text_problem(StableType::new("t".repeat(256)).unwrap_err()),
        (TextField::StableType, TextProblem::TooLong { len: 256 })
    );
    assert_eq!(
        text_problem(StableType::new("").unwrap_err()),
        (TextField::StableType, TextProblem::Empty)
    );
}

#[test]
fn generation_accepts_1_to_2_pow_63_minus_2_only() {
    assert_eq!(ObjectGeneration::new(1).unwrap().get(), 1);
    assert_eq!(
        ObjectGeneration::new((1 << 63) - 2).unwrap().get(),
        ObjectGeneration::MAX
    );
    for bad in [0, (1u64 << 63) - 1, u64::MAX] {
        assert_eq!(
            ObjectGeneration::new(bad).unwrap_err(),
            InventoryError::GenerationOutOfRange { value: bad }
        );
    }
}

#[test]
fn duplicate_member_is_rejected_whatever_its_other_fields() {
    let mut input = members(3);
    input.push(entry(MemberKind::Actor, "a00001", 99, "other"));
    let err = Inventory::build(input.clone()).unwrap_err();
    assert_eq!(
        err,
        InventoryError::DuplicateEntry {
            kind: MemberKind::Actor,
            id: "a00001".into()
        }
    );
    assert_eq!(err.kind(), InventoryErrorKind::InvalidInput);
    assert!(!err.is_data_lost());
    assert_eq!(target_list_checksum(&input).unwrap_err(), err);
}

#[test]
fn actor_may_share_the_spot_id_string() {
    let inventory = Inventory::build(vec![spot("same"), actor("same")]).unwrap();
    assert_eq!(inventory.root().total_count(), 2);
}

#[test]
fn list_without_user_spot_is_rejected() {
    assert_eq!(
        Inventory::build(vec![actor("a")]).unwrap_err(),
        InventoryError::MissingSpot
    );
    assert_eq!(
        Inventory::build(Vec::new()).unwrap_err(),
        InventoryError::MissingSpot
    );
}

#[test]
fn second_user_spot_is_rejected() {
    let err = Inventory::build(vec![spot("s1"), actor("a"), spot("s2")]).unwrap_err();
    assert_eq!(err, InventoryError::MultipleSpots { id: "s2".into() });
}

#[test]
fn spot_without_actors_is_one_entry_one_page() {
    let inventory = Inventory::build(vec![spot("lonely")]).unwrap();
    let root = inventory.root();
    assert_eq!(
        (root.total_count(), root.page_count(), root.height()),
        (1, 1, 0)
    );
    assert_eq!(root.start(), inventory.pages()[0].digest());
}
