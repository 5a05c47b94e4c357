//! Property tests of the blob layer on the in-memory Relocation Store, with small chunk limits
//! so that one case exercises many chunks and stripes.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::*;
use proptest::prelude::*;
use zlink_relocation::{BlobArgumentError, BlobError, BlobLayer, BlobLayerConfig, TransferBudget};
use zlink_store_spi::{MemoryRelocationStore, RelocationStore};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn config(limit: usize, stripes: usize) -> BlobLayerConfig {
    BlobLayerConfig::default()
        .with_chunk_limit(limit)
        .unwrap()
        .with_max_stripes(stripes)
        .unwrap()
        .with_budget(TransferBudget::new(64 * 1024).unwrap())
}

/// What to do to one blob of a stored unit.
#[derive(Debug, Clone)]
enum Damage {
    Delete,
    FlipBit {
        at: usize,
        bit: u8,
    },
    Truncate {
        keep: usize,
    },
    Append {
        byte: u8,
    },
    /// Put another chunk's blob (valid envelope, wrong position) in its place.
    SwapWithNext,
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        Just(Damage::Delete),
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Damage::FlipBit { at, bit }),
        any::<usize>().prop_map(|keep| Damage::Truncate { keep }),
        any::<u8>().prop_map(|byte| Damage::Append { byte }),
        Just(Damage::SwapWithNext),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random payload sizes, chunk limits, stripe counts and stripe targets round-trip byte for
    /// byte, with the
    /// planned chunk and stripe counts, even ordered stripes, and every chunk within the limit.
    #[test]
    fn random_sizes_and_chunk_limits_round_trip(
        len in 0usize..6_000,
        limit in 1usize..200,
        stripes in 1usize..=64,
        target in 1usize..400,
        seed in any::<u64>(),
    ) {
        let rt = runtime();
        rt.block_on(async {
            let memory = MemoryRelocationStore::new();
            let config = config(limit, stripes).with_stripe_target(target).unwrap();
            let plan = config.plan(len as u64);
            let blobs = BlobLayer::with_config(Arc::new(memory.clone()), config);
            let u = unit("prop");
            let data = payload(len, seed);
            match plan {
                Err(BlobArgumentError::TooManyChunks { .. }) => {
                    let err = blobs.store(&u, &data).await.unwrap_err();
                    prop_assert!(matches!(err, BlobError::InvalidArgument(_)));
                    prop_assert!(memory.is_empty());
                    return Ok(());
                }
                Err(e) => panic!("{e}"),
                Ok(plan) => {
                    let stored = blobs.store(&u, &data).await.unwrap();
                    prop_assert_eq!(stored.chunk_count, plan.chunks.len());
                    prop_assert_eq!(stored.stripe_count, plan.stripes.len());
                    prop_assert!(stored.stripe_count <= stripes);
                    prop_assert!(plan.chunks.iter().all(|c| c.len as usize <= limit));
                    prop_assert_eq!(memory.len(), plan.chunks.len() + 1);
                    let restored = blobs.restore(&u).await.unwrap();
                    prop_assert_eq!(&restored.to_bytes(), &data);
                    prop_assert_eq!(restored.sha256, stored.sha256);
                    let lens: Vec<u64> = restored.stripes.iter().map(|s| s.end - s.start).collect();
                    let (min, max) = (lens.iter().min().unwrap(), lens.iter().max().unwrap());
                    prop_assert!(max - min <= 1, "uneven stripes {:?}", lens);
                    let mut at = 0;
                    for s in &restored.stripes {
                        prop_assert_eq!(s.start, at);
                        at = s.end;
                    }
                    prop_assert_eq!(at, len as u64);
                    // Stripes are runs of whole chunks holding exactly the stripe's bytes.
                    for (i, s) in restored.stripes.iter().enumerate() {
                        let stripe = restored.stripe(i).unwrap();
                        prop_assert_eq!(
                            &stripe,
                            &data.slice(s.start as usize..s.end as usize)
                        );
                    }
                    blobs.delete(&u).await.unwrap();
                    prop_assert!(memory.is_empty());
                }
            }
            Ok(())
        })?;
    }

    /// Deleting or corrupting any one chunk or the index makes the whole unit DataLost for
    /// restore and for renew; nothing is partially restored.
    #[test]
    fn any_missing_or_corrupt_chunk_or_index_makes_the_whole_unit_data_lost(
        len in 1usize..3_000,
        limit in 1usize..300,
        stripes in 1usize..=64,
        target in any::<prop::sample::Index>(),
        damage in damage(),
        seed in any::<u64>(),
    ) {
        let rt = runtime();
        rt.block_on(async {
            let memory = MemoryRelocationStore::new();
            let blobs = BlobLayer::with_config(Arc::new(memory.clone()), config(limit, stripes));
            let u = unit("lost");
            let data = payload(len, seed);
            let stored = blobs.store(&u, &data).await.unwrap();
            // Target 0 is the index, 1..=n the chunks.
            let t = target.index(stored.chunk_count + 1);
            let victim = if t == 0 { u.clone() } else { chunk(&u, (t - 1) as u16) };
            let original = blob(&memory, &victim).await;
            let replacement = match damage {
                Damage::Delete => None,
                Damage::FlipBit { at, bit } => {
                    if original.is_empty() {
                        Some(Bytes::from_static(b"\x01"))
                    } else {
                        let mut b = original.to_vec();
                        b[at % original.len()] ^= 1 << bit;
                        Some(Bytes::from(b))
                    }
                }
                Damage::Truncate { keep } => Some(original.slice(..keep % original.len())),
                Damage::Append { byte } => {
                    let mut b = original.to_vec();
                    b.push(byte);
                    Some(Bytes::from(b))
                }
                Damage::SwapWithNext => {
                    if stored.chunk_count < 2 || t == 0 {
                        None
                    } else {
                        let next = chunk(&u, (t % stored.chunk_count) as u16);
                        Some(blob(&memory, &next).await)
                    }
                }
            };
            match replacement {
                None => {
                    memory.delete(&victim).await.unwrap();
                }
                Some(bytes) => overwrite(&memory, &victim, bytes).await,
            }
            let err = blobs.restore(&u).await.unwrap_err();
            prop_assert!(err.is_data_lost(), "restore answered {:?}", err);
            prop_assert_eq!(err.kind(), zlink_relocation::BlobErrorKind::DataLost);
            let err = blobs.renew(&u).await.unwrap_err();
            prop_assert!(err.is_data_lost(), "renew answered {:?}", err);
            Ok(())
        })?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Chunk reads complete in a random order (random delays per read): the restored bytes are
    /// identical to the stored ones.
    #[test]
    fn shuffled_completion_order_restores_identical_bytes(
        len in 1usize..4_000,
        limit in 16usize..400,
        stripes in 1usize..=64,
        seed in any::<u64>(),
    ) {
        let rt = runtime();
        rt.block_on(async {
            let memory = MemoryRelocationStore::new();
            let cfg = config(limit, stripes).with_parallelism(256).unwrap();
            let u = unit("shuffle");
            let data = payload(len, seed);
            let stored = BlobLayer::with_config(Arc::new(memory.clone()), cfg.clone())
                .store(&u, &data)
                .await
                .unwrap();
            let delayed = Arc::new(DelayedReads::new(memory.clone(), seed, 4));
            let blobs = BlobLayer::with_config(delayed.clone(), cfg);
            let restored = blobs.restore(&u).await.unwrap();
            prop_assert_eq!(&restored.to_bytes(), &data);
            // Every chunk was read exactly once, in whatever order the delays produced.
            let completed = delayed.completed.lock().unwrap().clone();
            let mut chunks: Vec<String> =
                completed.into_iter().filter(|r| r.contains('#')).collect();
            chunks.sort();
            let expected: Vec<String> = (0..stored.chunk_count as u16)
                .map(|o| chunk(&u, o).to_string())
                .collect();
            prop_assert_eq!(chunks, expected);
            Ok(())
        })?;
    }
}

/// The delaying wrapper does reorder completions (so the shuffled-order property is not
/// vacuous).
#[test]
fn delayed_reads_do_reorder_completions() {
    let rt = runtime();
    rt.block_on(async {
        let memory = MemoryRelocationStore::new();
        let cfg = config(10, 64).with_parallelism(256).unwrap();
        let u = unit("reorder");
        let data = payload(1000, 1);
        BlobLayer::with_config(Arc::new(memory.clone()), cfg.clone())
            .store(&u, &data)
            .await
            .unwrap();
        let delayed = Arc::new(DelayedReads::new(memory.clone(), 42, 20));
        let restored = BlobLayer::with_config(delayed.clone(), cfg)
            .restore(&u)
            .await
            .unwrap();
        assert_eq!(restored.to_bytes(), data);
        let completed = delayed.completed.lock().unwrap().clone();
        let chunks: Vec<String> = completed.into_iter().filter(|r| r.contains('#')).collect();
        let mut sorted = chunks.clone();
        sorted.sort();
        assert_eq!(chunks.len(), 128);
        assert_ne!(chunks, sorted, "reads completed in index order");
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Around the 4,096-chunk bound (payloads of 4,096 chunk limits, give or take a few bytes,
    /// any stripe count): at most 4,096 chunks round-trip, more are rejected before any I/O.
    #[test]
    fn payloads_around_the_4096_chunk_bound_store_or_are_rejected_whole(
        limit in 1usize..4,
        stripes in 1usize..=64,
        delta in -3i64..=3,
        seed in any::<u64>(),
    ) {
        let len = (4096 * limit as i64 + delta).max(0) as usize;
        let rt = runtime();
        rt.block_on(async {
            let memory = MemoryRelocationStore::new();
            let config = config(limit, stripes).with_parallelism(512).unwrap();
            let expected = config.plan(len as u64);
            let blobs = BlobLayer::with_config(Arc::new(memory.clone()), config);
            let u = unit("bound");
            let data = payload(len, seed);
            match expected {
                Ok(plan) => {
                    prop_assert!(plan.chunks.len() <= 4096);
                    let stored = blobs.store(&u, &data).await.unwrap();
                    prop_assert_eq!(stored.chunk_count, plan.chunks.len());
                    prop_assert_eq!(&blobs.restore(&u).await.unwrap().to_bytes(), &data);
                }
                Err(BlobArgumentError::TooManyChunks { actual, max }) => {
                    prop_assert!(actual > 4096 && max == 4096);
                    let err = blobs.store(&u, &data).await.unwrap_err();
                    prop_assert!(matches!(err, BlobError::InvalidArgument(_)));
                    prop_assert!(memory.is_empty());
                }
                Err(e) => panic!("{e}"),
            }
            Ok(())
        })?;
    }
}
