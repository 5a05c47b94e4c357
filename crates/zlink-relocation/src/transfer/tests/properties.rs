//! Property tests: assembly under any delivery order, corruption, budget and memory accounting,
//! and the byte layouts.

use bytes::Bytes;
use proptest::prelude::*;
use proptest::sample::Index;

use super::super::{
    Assembly, AssemblyError, AssemblyStatus, BudgetScope, ChunkOutcome, InFlightBudget,
    InFlightPermit, PayloadChunk, PayloadClaim, PayloadMemory, PayloadMemoryError,
    PayloadMemoryPermit, PayloadUnit, RestoreHeader, chunk_payload,
};
use super::{binding, data_limit};

/// A small deterministic generator (xorshift64*), so large inputs cost no shrinking.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn bytes(&mut self, len: usize) -> Bytes {
        (0..len)
            .map(|_| self.next() as u8)
            .collect::<Vec<u8>>()
            .into()
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

/// Data bytes per chunk: mostly small (many chunks), at most 2,048 chunks per payload.
fn per_chunk(len: usize) -> impl Strategy<Value = usize> {
    prop_oneof![1usize..=64, 1usize..=4_096, 1usize..=64 * 1024]
        .prop_map(move |n| n.max(len.div_ceil(2_048)).max(1))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn any_payload_in_any_order_with_duplicates_and_foreign_chunks_assembles_exactly(
        (len, per_chunk) in (0usize..=300 * 1024).prop_flat_map(|len| (Just(len), per_chunk(len))),
        seed in any::<u64>(),
        duplicates in 0usize..8,
        foreigners in 0usize..8,
    ) {
        let mut rng = Rng::new(seed);
        let data = rng.bytes(len);
        let (header, chunks) =
            chunk_payload(binding(1), data.clone(), data_limit(per_chunk)).unwrap();
        let chunks: Vec<PayloadChunk> = chunks.collect();
        let mut deliveries = chunks.clone();
        let duplicates = if chunks.is_empty() { 0 } else { duplicates };
        for _ in 0..duplicates {
            deliveries.push(chunks[rng.below(chunks.len())].clone());
        }
        for _ in 0..foreigners {
            // Another attempt's chunk at a real index with a real length, but other bytes.
            let (index, len) = match chunks.len() {
                0 => (0, 1),
                n => {
                    let c = &chunks[rng.below(n)];
                    (c.index(), c.bytes().len())
                }
            };
            let attempt = 2 + rng.below(5) as u64;
            deliveries.push(PayloadChunk::new(binding(attempt), index, rng.bytes(len)).unwrap());
        }
        rng.shuffle(&mut deliveries);

        let mut assembly = Assembly::new(header);
        let (mut completes, mut discarded, mut rejected) = (0, 0, 0);
        for chunk in deliveries {
            match assembly.accept(chunk) {
                Ok(ChunkOutcome::Complete) => completes += 1,
                Ok(ChunkOutcome::Discarded) => discarded += 1,
                Ok(ChunkOutcome::Accepted { .. }) => {}
                Err(AssemblyError::DuplicateChunk { .. }) => rejected += 1,
                Err(other) => prop_assert!(false, "unexpected {other:?}"),
            }
        }
        prop_assert_eq!(completes, usize::from(!chunks.is_empty()));
        prop_assert_eq!(discarded, foreigners);
        prop_assert_eq!(assembly.discarded(), foreigners as u64);
        prop_assert_eq!(rejected, duplicates);
        prop_assert_eq!(assembly.status(), AssemblyStatus::Complete);
        prop_assert_eq!(assembly.payload().unwrap(), data);
    }

    #[test]
    fn any_single_corrupted_byte_gives_checksum_mismatch(
        (len, per_chunk) in (1usize..=64 * 1024).prop_flat_map(|len| (Just(len), per_chunk(len))),
        seed in any::<u64>(),
        at in any::<Index>(),
        flip in 1u8..=255,
    ) {
        let mut rng = Rng::new(seed);
        let data = rng.bytes(len);
        let (header, chunks) =
            chunk_payload(binding(1), data, data_limit(per_chunk)).unwrap();
        let mut chunks: Vec<PayloadChunk> = chunks.collect();
        let pos = at.index(len);
        let (index, offset) = (pos / header.chunk_len() as usize, pos % header.chunk_len() as usize);
        let mut bytes = chunks[index].bytes().to_vec();
        bytes[offset] ^= flip;
        chunks[index] = PayloadChunk::new(binding(1), index as u32, bytes.into()).unwrap();
        rng.shuffle(&mut chunks);

        let mut assembly = Assembly::new(header);
        let mut results: Vec<_> = chunks.into_iter().map(|c| assembly.accept(c)).collect();
        let last = results.pop().unwrap();
        let all_accepted = results.iter().all(|r| matches!(r, Ok(ChunkOutcome::Accepted { .. })));
        prop_assert!(all_accepted);
        let is_mismatch = matches!(last, Err(AssemblyError::ChecksumMismatch { .. }));
        prop_assert!(is_mismatch);
        let payload_refused = matches!(assembly.payload(), Err(AssemblyError::ChecksumMismatch { .. }));
        prop_assert!(payload_refused);
        prop_assert_eq!(assembly.held_bytes(), 0);
    }

    #[test]
    fn budget_accounting_never_exceeds_its_limit_and_returns_to_zero(
        peer_limits in (0u64..=600, 0u64..=600),
        node_limit in 0u64..=900,
        ops in prop::collection::vec((any::<bool>(), 0usize..2, 1u64..=250, any::<Index>()), 0..200),
    ) {
        let peers = [
            InFlightBudget::new(BudgetScope::PeerConnection, peer_limits.0),
            InFlightBudget::new(BudgetScope::PeerConnection, peer_limits.1),
        ];
        let node = InFlightBudget::new(BudgetScope::Node, node_limit);
        let mut held: Vec<(usize, InFlightPermit)> = Vec::new();
        for (reserve, peer, charge, pick) in ops {
            if reserve || held.is_empty() {
                if let Ok(p) = InFlightBudget::try_reserve_pair(&peers[peer], &node, charge) {
                    held.push((peer, p));
                }
            } else {
                held.swap_remove(pick.index(held.len()));
            }
            for (budget, mine) in [
                (&peers[0], held.iter().filter(|(p, _)| *p == 0).map(|(_, h)| h.charge()).collect::<Vec<_>>()),
                (&peers[1], held.iter().filter(|(p, _)| *p == 1).map(|(_, h)| h.charge()).collect()),
                (&node, held.iter().map(|(_, h)| h.charge()).collect()),
            ] {
                let sum: u64 = mine.iter().sum();
                prop_assert_eq!(budget.in_flight(), sum);
                if let Some(limit) = budget.limit() {
                    // Over the limit only by one chunk sent alone.
                    prop_assert!(sum <= limit.get() || mine.len() == 1);
                }
            }
        }
        held.clear();
        prop_assert_eq!((peers[0].in_flight(), peers[1].in_flight(), node.in_flight()), (0, 0, 0));
    }

    #[test]
    fn payload_memory_never_exceeds_its_cap_and_returns_to_zero(
        cap in 1u64..=1_000,
        ops in prop::collection::vec((0u8..3, any::<bool>(), 0u64..=1_500, any::<Index>()), 0..200),
    ) {
        let memory = PayloadMemory::new(cap).unwrap();
        let mut held: Vec<PayloadMemoryPermit> = Vec::new();
        for (op, aggregate, bytes, pick) in ops {
            match op {
                0 => {
                    let unit = if aggregate { PayloadUnit::SpotWideAggregate } else { PayloadUnit::Single };
                    let was_alone = held.iter().any(PayloadMemoryPermit::is_alone);
                    let result = memory.try_reserve(PayloadClaim::exact(unit, bytes));
                    if !aggregate && bytes > cap {
                        let too_large = matches!(result, Err(PayloadMemoryError::SingleUnitTooLarge { .. }));
                        prop_assert!(too_large);
                    } else if was_alone {
                        prop_assert_eq!(result.as_ref().err(), Some(&PayloadMemoryError::HeldAlone));
                    }
                    if let Ok(p) = result {
                        held.push(p);
                    }
                }
                1 if !held.is_empty() => {
                    let i = pick.index(held.len());
                    let current = held[i].bytes();
                    let grew = held[i].shrink_to(bytes).is_err();
                    prop_assert_eq!(grew, bytes > current);
                }
                _ if !held.is_empty() => {
                    held.swap_remove(pick.index(held.len()));
                }
                _ => {}
            }
            let sum: u64 = held.iter().map(PayloadMemoryPermit::bytes).sum();
            let alone = held.iter().filter(|p| p.is_alone()).count();
            prop_assert_eq!(memory.used(), sum);
            prop_assert_eq!(memory.permits(), held.len() as u64);
            prop_assert_eq!(memory.is_held_alone(), alone == 1);
            prop_assert!(alone == 0 || held.len() == 1);
            prop_assert!(sum <= cap || alone == 1);
        }
        held.clear();
        prop_assert_eq!((memory.used(), memory.permits()), (0, 0));
    }

    #[test]
    fn encodings_round_trip(
        relocation in 1u128..,
        attempt in 1u64..,
        len in 0usize..=2_000,
        per_chunk in 1usize..=700,
    ) {
        let b = super::super::TransferBinding::new(
            relocation,
            attempt,
            super::super::SourceFence::new(attempt % 1_000 + 1, 5).unwrap(),
        ).unwrap();
        let (header, chunks) = chunk_payload(b, Rng::new(attempt).bytes(len), data_limit(per_chunk)).unwrap();
        prop_assert_eq!(RestoreHeader::decode(&header.encode()).unwrap(), header);
        for chunk in chunks {
            prop_assert_eq!(PayloadChunk::decode(chunk.encode()).unwrap(), chunk);
        }
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics(
        kind in 0u8..=3,
        version in 0u8..=2,
        rest in prop::collection::vec(any::<u8>(), 0..120),
    ) {
        let mut raw = vec![kind, version];
        raw.extend_from_slice(&rest);
        for len in [0, 1, raw.len()] {
            let _ = RestoreHeader::decode(&raw[..len]);
            let _ = PayloadChunk::decode(Bytes::copy_from_slice(&raw[..len]));
        }
    }
}
