//! Property tests: bounds, round trip, totals, order independence and corruption detection
//! over random member sets (random id lengths 1..=255, multi-byte characters, random limits).

use std::collections::HashSet;

use bytes::Bytes;
use proptest::prelude::*;

use super::{build_with, stored};
use crate::inventory::format::entry_record_len;
use crate::inventory::{
    InventoryEntry, InventoryRoot, MAX_PAGE_BYTES, MAX_PAGE_ENTRIES, MemberKind, ObjectGeneration,
    ObjectId, PageLimits, ROOT_LEN, StableType, target_list_checksum,
};

/// SplitMix64: a small deterministic generator, so one `u64` seed describes a whole set.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// 1..=255 bytes of printable ASCII with some 2- and 3-byte characters, never NUL.
    fn text(&mut self) -> String {
        let target = 1 + self.below(255) as usize;
        let mut s = String::with_capacity(target);
        while s.len() < target {
            let c = match self.below(20) {
                0 => 'é',
                1 => '€',
                _ => char::from(b'!' + self.below(94) as u8),
            };
            if s.len() + c.len_utf8() <= target {
                s.push(c);
            } else {
                s.push('x');
            }
        }
        s
    }
}

/// One User Spot and `actors` distinct Actors, in a shuffled order.
fn random_members(seed: u64, actors: usize) -> Vec<InventoryEntry> {
    let mut rng = Rng(seed);
    let make = |kind, rng: &mut Rng, id: String| {
        let generation = ObjectGeneration::new(1 + rng.below(ObjectGeneration::MAX)).unwrap();
        let ty = StableType::new(rng.text()).unwrap();
        InventoryEntry::new(kind, ObjectId::new(id).unwrap(), generation, ty)
    };
    let spot_id = rng.text();
    let mut out = vec![make(MemberKind::UserSpot, &mut rng, spot_id)];
    let mut ids = HashSet::new();
    while ids.len() < actors {
        let id = rng.text();
        if ids.insert(id.clone()) {
            out.push(make(MemberKind::Actor, &mut rng, id));
        }
    }
    shuffle(&mut out, &mut rng);
    out
}

fn shuffle<T>(items: &mut [T], rng: &mut Rng) {
    for i in (1..items.len()).rev() {
        items.swap(i, rng.below(i as u64 + 1) as usize);
    }
}

fn limits() -> impl Strategy<Value = PageLimits> {
    prop_oneof![
        Just(PageLimits::SPEC),
        (2usize..=MAX_PAGE_ENTRIES, PageLimits::MIN_BYTES..=64 * 1024)
            .prop_map(|(entries, bytes)| PageLimits::new(entries, bytes).unwrap()),
        (2usize..=8, PageLimits::MIN_BYTES..=2048)
            .prop_map(|(entries, bytes)| PageLimits::new(entries, bytes).unwrap()),
    ]
}

fn record_count(page: &[u8]) -> usize {
    usize::from(u16::from_be_bytes([page[6], page[7]]))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn pages_respect_both_bounds_round_trip_and_match_root_totals(
        seed in any::<u64>(),
        actors in 0usize..5_000,
        limits in limits(),
    ) {
        let input = random_members(seed, actors);
        let inventory = build_with(limits, input.clone());
        let root = inventory.root();

        let mut digests = HashSet::new();
        for page in inventory.pages() {
            let bytes = page.bytes();
            prop_assert!(bytes.len() <= limits.max_bytes() && bytes.len() <= MAX_PAGE_BYTES);
            let count = record_count(bytes);
            prop_assert!((1..=limits.max_entries()).contains(&count));
            prop_assert!(count <= MAX_PAGE_ENTRIES);
            prop_assert!(digests.insert(page.digest()), "two pages share a digest");
        }

        let mut expected = input.clone();
        expected.sort_by(InventoryEntry::cmp_identity);
        let verified = root.verify_pages(stored(&inventory)).unwrap();
        prop_assert_eq!(verified.entries(), &expected[..]);
        prop_assert_eq!(root.total_count(), actors as u64 + 1);
        let leaves: Vec<_> = inventory.leaf_pages().collect();
        prop_assert_eq!(root.page_count(), leaves.len() as u64);
        prop_assert_eq!(
            root.index_page_count(),
            (inventory.pages().len() - leaves.len()) as u64
        );
        prop_assert_eq!(target_list_checksum(&input).unwrap(), root.content_checksum());
        prop_assert_eq!(InventoryRoot::decode(&root.encode()).unwrap(), *root);

        // Greedy and therefore canonical: every leaf but the last is full by one bound.
        let mut first = 0usize;
        for pair in leaves.windows(2) {
            let count = record_count(pair[0].bytes());
            first += count;
            let next_len = entry_record_len(&expected[first]);
            prop_assert!(
                count == limits.max_entries() || pair[0].bytes().len() + next_len > limits.max_bytes()
            );
        }
    }

    #[test]
    fn any_input_order_gives_the_same_pages_and_root(
        seed in any::<u64>(),
        reorder in any::<u64>(),
        actors in 0usize..2_000,
        limits in limits(),
    ) {
        let input = random_members(seed, actors);
        let mut other = input.clone();
        shuffle(&mut other, &mut Rng(reorder));
        prop_assert_eq!(build_with(limits, input), build_with(limits, other));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn any_single_byte_corruption_of_any_page_is_detected(
        seed in any::<u64>(),
        actors in 0usize..300,
        entries in 2usize..=16,
        bytes in PageLimits::MIN_BYTES..=4096,
        page in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        let limits = PageLimits::new(entries, bytes).unwrap();
        let inventory = build_with(limits, random_members(seed, actors));
        let mut pages = stored(&inventory);
        let victim = page.index(pages.len());
        let mut damaged = pages[victim].1.to_vec();
        let offset = at.index(damaged.len());
        damaged[offset] ^= flip;
        pages[victim].1 = Bytes::from(damaged);
        let err = inventory.root().verify_pages(pages).unwrap_err();
        prop_assert!(err.is_data_lost(), "{:?}", err);
    }

    #[test]
    fn any_single_byte_corruption_of_the_root_is_detected(
        seed in any::<u64>(),
        actors in 0usize..300,
        entries in 2usize..=16,
        at in 0usize..ROOT_LEN,
        flip in 1u8..=255,
    ) {
        let limits = PageLimits::new(entries, 4096).unwrap();
        let inventory = build_with(limits, random_members(seed, actors));
        let mut root = inventory.root().encode().to_vec();
        root[at] ^= flip;
        let outcome = InventoryRoot::decode(&root)
            .and_then(|root| root.verify_pages(stored(&inventory)));
        prop_assert!(outcome.is_err());
    }
}

#[test]
fn random_members_cover_short_and_longest_ids() {
    let set = random_members(7, 3_000);
    let lens: Vec<usize> = set.iter().map(|e| e.id().len()).collect();
    assert!(lens.iter().any(|&l| l <= 2));
    assert!(lens.contains(&255));
    assert!(
        set.iter()
            .any(|e| e.id().as_str().chars().any(|c| c.len_utf8() > 1))
    );
}
