//! The blob layer against the in-memory Relocation Store (and wrappers around it): store order,
//! whole-or-nothing restore, renew, delete, bounds at and past their limits, the byte budget.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use zlink_relocation::blob::{MAX_CHUNKS, MAX_INDEX_REF_LEN, MAX_STRIPES};
use zlink_relocation::{
    BlobArgumentError, BlobError, BlobLayer, BlobLayerConfig, DataLost, TransferBudget,
};
use zlink_store_spi::MAX_DATA_CHUNK_LEN;
use zlink_store_spi::{
    BlobReadResult, BlobRef, DynRelocationStore, FailureKind, ManualClock, MemoryRelocationStore,
    RelocationStore, Retention, StoreError, StoreErrorKind,
};

fn small(limit: usize, stripes: usize) -> BlobLayerConfig {
    BlobLayerConfig::default()
        .with_chunk_limit(limit)
        .unwrap()
        .with_max_stripes(stripes)
        .unwrap()
        .with_budget(TransferBudget::new(1 << 20).unwrap())
}

fn layer<S: RelocationStore>(store: S, config: BlobLayerConfig) -> BlobLayer<S> {
    BlobLayer::with_config(Arc::new(store), config)
}

/// Spec 23: "Store: write every chunk, re-read and verify each, only then write the index."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_are_written_and_read_back_before_the_index_is_stored() {
    let memory = MemoryRelocationStore::new();
    let recording = Recording::new(memory.clone());
    let log = recording.log.clone();
    let blobs = layer(recording, small(100, 3));
    let u = unit("order");
    let data = payload(1000, 1);
    let stored = blobs.store(&u, &data).await.unwrap();
    assert_eq!(stored.chunk_count, 12);
    assert_eq!(stored.stripe_count, 3);
    let ops = log.lock().unwrap().clone();
    let index_put = ops
        .iter()
        .position(|o| *o == Op::Put(u.to_string()))
        .unwrap();
    assert_eq!(
        index_put,
        ops.len() - 1,
        "the index put is the last operation"
    );
    for order in 0..12u16 {
        let c = chunk(&u, order).to_string();
        let put = ops.iter().position(|o| *o == Op::Put(c.clone())).unwrap();
        let read = ops.iter().position(|o| *o == Op::Read(c.clone())).unwrap();
        assert!(put < read && read < index_put, "chunk {order}: {ops:?}");
    }
    assert_eq!(blobs.restore(&u).await.unwrap().to_bytes(), data);
}

/// Spec 23: "if any chunk fails, no index (orphans expire)."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_chunk_write_leaves_no_index() {
    let memory = MemoryRelocationStore::new();
    let u = unit("fail");
    let failing = Failing {
        inner: memory.clone(),
        suffix: "#0005".into(),
        fail_puts: true,
        error: || StoreError::failure_kind(FailureKind::Unavailable),
    };
    let blobs = layer(failing, small(10, 4));
    let err = blobs.store(&u, &payload(200, 2)).await.unwrap_err();
    assert!(matches!(err, BlobError::Store(_)), "{err:?}");
    assert!(matches!(
        memory.read(&u).await.unwrap(),
        BlobReadResult::Missing { .. }
    ));
    // Restoring the unit finds no index: the unit was never published.
    let reader = layer(memory.clone(), small(10, 4));
    assert_eq!(
        reader.restore(&u).await.unwrap_err().as_data_lost(),
        Some(&DataLost::IndexMissing)
    );
}

/// Spec 23: restore "assemble[s] in index order regardless of completion order": chunk reads
/// are delayed so that they complete in reverse order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reversed_completion_order_restores_identical_bytes() {
    let memory = MemoryRelocationStore::new();
    let u = unit("reverse");
    let data = payload(640, 3);
    let config = small(10, 64).with_parallelism(64).unwrap();
    layer(memory.clone(), config.clone())
        .store(&u, &data)
        .await
        .unwrap();
    let delayed = DelayedReads::new(memory.clone(), 0, 1);
    for order in 0..64u16 {
        delayed
            .fixed
            .lock()
            .unwrap()
            .insert(chunk(&u, order).to_string(), 10 * u64::from(64 - order));
    }
    let delayed = Arc::new(delayed);
    let blobs = BlobLayer::with_config(delayed.clone(), config);
    let restored = blobs.restore(&u).await.unwrap();
    assert_eq!(restored.to_bytes(), data);
    let completed = delayed.completed.lock().unwrap().clone();
    let chunk_reads: Vec<&String> = completed.iter().filter(|r| r.contains('#')).collect();
    assert_eq!(chunk_reads.len(), 64);
    // Reversed (delays 10 ms apart; under load spawning takes a few ms, so allow a little slack).
    let order_of = |r: &String| -> u16 { r.rsplit('#').next().unwrap().parse().unwrap() };
    assert!(order_of(chunk_reads[0]) >= 60, "{chunk_reads:?}");
    assert!(order_of(chunk_reads[63]) <= 3, "{chunk_reads:?}");
}

/// Spec 23: "Renew: verify every chunk exists with its checksum, then extend the index."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renew_verifies_every_chunk_then_extends_the_index() {
    let clock = ManualClock::starting_now();
    let memory = MemoryRelocationStore::with_clock(Arc::new(clock.clone()));
    let recording = Recording::new(memory.clone());
    let log = recording.log.clone();
    let retention = Retention::from_millis(60_000).unwrap();
    let blobs = layer(recording, small(50, 4).with_retention(retention));
    let u = unit("renew");
    let stored = blobs.store(&u, &payload(500, 4)).await.unwrap();
    clock.advance(Duration::from_secs(30));
    log.lock().unwrap().clear();
    let renewed = blobs.renew(&u).await.unwrap();
    assert_eq!(renewed.chunk_count, stored.chunk_count);
    assert_eq!(
        renewed.expires_at.as_millis(),
        stored.expires_at.as_millis() + 30_000
    );
    let ops = log.lock().unwrap().clone();
    assert_eq!(ops.last(), Some(&Op::Renew(u.to_string())));
    let last = ops.len() - 1;
    for order in 0..stored.chunk_count as u16 {
        let c = chunk(&u, order).to_string();
        let read = ops.iter().position(|o| *o == Op::Read(c.clone())).unwrap();
        let renew = ops.iter().position(|o| *o == Op::Renew(c.clone())).unwrap();
        assert!(read < renew && renew < last, "chunk {order}: {ops:?}");
    }
    // 40 s later the original retention would have expired; the renewed unit is whole.
    clock.advance(Duration::from_secs(40));
    assert_eq!(blobs.restore(&u).await.unwrap().to_bytes().len(), 500);
}

/// A corrupt chunk found while renewing is DataLost, and the index is not extended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renew_of_a_unit_with_a_corrupt_chunk_is_data_lost_and_leaves_the_index() {
    let clock = ManualClock::starting_now();
    let memory = MemoryRelocationStore::with_clock(Arc::new(clock.clone()));
    let retention = Retention::from_millis(60_000).unwrap();
    let blobs = layer(memory.clone(), small(50, 2).with_retention(retention));
    let u = unit("renew-bad");
    blobs.store(&u, &payload(300, 5)).await.unwrap();
    let BlobReadResult::Found {
        expires_at: index_expiry,
        ..
    } = memory.read(&u).await.unwrap()
    else {
        panic!()
    };
    let c = chunk(&u, 2);
    let mut bad = blob(&memory, &c).await.to_vec();
    bad[30] ^= 1;
    overwrite(&memory, &c, Bytes::from(bad)).await;
    clock.advance(Duration::from_secs(1));
    let err = blobs.renew(&u).await.unwrap_err();
    assert!(
        matches!(
            err.as_data_lost(),
            Some(DataLost::ChunkCorrupt { order: 2, .. })
        ),
        "{err:?}"
    );
    let BlobReadResult::Found { expires_at, .. } = memory.read(&u).await.unwrap() else {
        panic!()
    };
    assert_eq!(expires_at, index_expiry, "the index was extended");
}

/// Delete removes the index first (no reader can find a partial unit), then every chunk; it is
/// idempotent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_removes_the_index_first_then_every_chunk_and_is_idempotent() {
    let memory = MemoryRelocationStore::new();
    let recording = Recording::new(memory.clone());
    let log = recording.log.clone();
    let blobs = layer(recording, small(10, 4));
    let u = unit("delete");
    let stored = blobs.store(&u, &payload(95, 6)).await.unwrap();
    log.lock().unwrap().clear();
    let deleted = blobs.delete(&u).await.unwrap();
    assert_eq!(deleted.chunk_count, stored.chunk_count);
    let ops = log.lock().unwrap().clone();
    let deletes: Vec<&Op> = ops.iter().filter(|o| matches!(o, Op::Delete(_))).collect();
    assert_eq!(deletes[0], &Op::Delete(u.to_string()));
    assert_eq!(deletes.len(), 1 + stored.chunk_count);
    assert!(memory.is_empty());
    let again = blobs.delete(&u).await.unwrap();
    assert_eq!(again.chunk_count, 0);
    assert_eq!(
        blobs.restore(&u).await.unwrap_err().as_data_lost(),
        Some(&DataLost::IndexMissing)
    );
}

/// Storing the same payload under the same unit again succeeds (a retry after a lost reply);
/// a different payload under a used unit reference is a Conflict and leaves the unit intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_payload_stores_again_and_a_different_one_conflicts() {
    let memory = MemoryRelocationStore::new();
    let blobs = layer(memory.clone(), small(16, 4));
    let u = unit("again");
    let data = payload(100, 7);
    let first = blobs.store(&u, &data).await.unwrap();
    let second = blobs.store(&u, &data).await.unwrap();
    assert_eq!(first.sha256, second.sha256);
    let mut other = data.to_vec();
    other[99] ^= 0xff;
    let err = blobs.store(&u, &Bytes::from(other)).await.unwrap_err();
    assert!(matches!(err, BlobError::Conflict { .. }), "{err:?}");
    assert_eq!(err.kind(), zlink_relocation::BlobErrorKind::Conflict);
    assert_eq!(blobs.restore(&u).await.unwrap().to_bytes(), data);
}

/// Spec 23 bound: at most 4,096 data chunks under one index. At the bound the unit
/// round-trips; one chunk more is an argument error before any I/O.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_thousand_ninety_six_chunks_round_trip_and_one_more_is_rejected_before_io() {
    let memory = MemoryRelocationStore::new();
    let blobs = layer(memory.clone(), small(4, 1).with_parallelism(256).unwrap());
    let u = unit("4096");
    let data = payload(MAX_CHUNKS * 4, 8);
    let stored = blobs.store(&u, &data).await.unwrap();
    assert_eq!(stored.chunk_count, 4096);
    let restored = blobs.restore(&u).await.unwrap();
    assert_eq!(restored.to_bytes(), data);
    assert_eq!(blobs.renew(&u).await.unwrap().chunk_count, 4096);
    assert_eq!(blobs.delete(&u).await.unwrap().chunk_count, 4096);
    assert!(memory.is_empty());

    let past = unit("4097");
    let err = blobs
        .store(&past, &payload(MAX_CHUNKS * 4 + 1, 9))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            BlobError::InvalidArgument(BlobArgumentError::TooManyChunks { actual: 4097, .. })
        ),
        "{err:?}"
    );
    assert_eq!(err.kind(), zlink_relocation::BlobErrorKind::InvalidArgument);
    assert!(memory.is_empty(), "something was written");
}

/// Spec 23 bound: a relocation root splits evenly into at most 64 ordered stripes; order and
/// overall checksum are preserved. 65 is rejected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_even_ordered_stripes_round_trip_and_sixty_five_are_rejected() {
    let memory = MemoryRelocationStore::new();
    let blobs = layer(memory.clone(), small(8, MAX_STRIPES));
    let u = unit("64");
    // 64 stripes of 20 or 21 bytes, 3 chunks each.
    let data = payload(64 * 20 + 17, 10);
    let stored = blobs.store(&u, &data).await.unwrap();
    assert_eq!(stored.stripe_count, 64);
    let restored = blobs.restore(&u).await.unwrap();
    assert_eq!(restored.to_bytes(), data);
    assert_eq!(restored.stripes.len(), 64);
    let mut at = 0;
    for (i, s) in restored.stripes.iter().enumerate() {
        assert_eq!(s.start, at, "stripes are contiguous and ordered");
        assert_eq!(s.end - s.start, if i < 17 { 21 } else { 20 });
        let range = s.start as usize..s.end as usize;
        assert_eq!(restored.stripe(i).unwrap(), data.slice(range));
        assert_eq!(restored.stripe_chunks(i).unwrap().len(), 3);
        at = s.end;
    }
    assert_eq!(at, data.len() as u64);
    assert_eq!(restored.len(), data.len() as u64);
    assert_eq!(restored.sha256, stored.sha256);
    assert_eq!(
        BlobLayerConfig::default().with_max_stripes(65).unwrap_err(),
        BlobArgumentError::Stripes {
            actual: 65,
            max: 64
        }
    );
    assert!(BlobLayerConfig::default().with_max_stripes(0).is_err());
}

/// The chunk limit is 64 MiB by default and at most; with a 64 MiB stripe target a 64 MiB
/// payload is one chunk whose blob is exactly the Relocation Store's 64 MiB + 23-byte maximum.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_chunk_limit_is_64_mib_and_a_64_mib_chunk_round_trips() {
    let config = BlobLayerConfig::default();
    assert_eq!(config.chunk_limit(), MAX_DATA_CHUNK_LEN);
    assert_eq!(config.max_stripes(), 64);
    assert_eq!(config.stripe_target(), 4 * 1024 * 1024);
    assert_eq!(config.budget().bytes(), 256 * 1024 * 1024);
    // By default 64 MiB + 1 byte spreads over 17 stripes of about 4 MiB.
    assert_eq!(
        config
            .plan(MAX_DATA_CHUNK_LEN as u64 + 1)
            .unwrap()
            .chunks
            .len(),
        17
    );
    assert!(
        config
            .clone()
            .with_stripe_target(MAX_DATA_CHUNK_LEN)
            .is_ok()
    );
    assert!(matches!(
        config.clone().with_stripe_target(MAX_DATA_CHUNK_LEN + 1),
        Err(BlobArgumentError::StripeTarget { .. })
    ));
    assert!(config.clone().with_stripe_target(0).is_err());
    let config = config.with_stripe_target(MAX_DATA_CHUNK_LEN).unwrap();
    assert!(config.clone().with_chunk_limit(MAX_DATA_CHUNK_LEN).is_ok());
    assert_eq!(
        config
            .clone()
            .with_chunk_limit(MAX_DATA_CHUNK_LEN + 1)
            .unwrap_err(),
        BlobArgumentError::ChunkLimit {
            actual: MAX_DATA_CHUNK_LEN + 1,
            max: MAX_DATA_CHUNK_LEN
        }
    );
    assert_eq!(
        config
            .plan(MAX_DATA_CHUNK_LEN as u64 + 1)
            .unwrap()
            .chunks
            .len(),
        2
    );

    let memory = MemoryRelocationStore::new();
    let blobs = layer(memory.clone(), config);
    let u = unit("64mib");
    let data = payload(MAX_DATA_CHUNK_LEN, 11);
    let stored = blobs.store(&u, &data).await.unwrap();
    assert_eq!(stored.chunk_count, 1);
    assert_eq!(
        blob(&memory, &chunk(&u, 0)).await.len(),
        zlink_store_spi::MAX_BLOB_LEN
    );
    assert!(blobs.restore(&u).await.unwrap().to_bytes() == data);
    blobs.delete(&u).await.unwrap();
}

/// References: the unit reference may be at most 4,091 bytes (its chunks append `#` and four
/// digits); one more is rejected before any I/O.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unit_reference_of_4091_bytes_works_and_4092_is_rejected_before_io() {
    let memory = MemoryRelocationStore::new();
    let blobs = layer(memory.clone(), small(10, 2));
    let longest = BlobRef::new("r".repeat(MAX_INDEX_REF_LEN)).unwrap();
    let data = payload(35, 12);
    blobs.store(&longest, &data).await.unwrap();
    assert_eq!(blobs.restore(&longest).await.unwrap().to_bytes(), data);
    blobs.delete(&longest).await.unwrap();
    let too_long = BlobRef::new("r".repeat(MAX_INDEX_REF_LEN + 1)).unwrap();
    let err = blobs.store(&too_long, &data).await.unwrap_err();
    assert!(
        matches!(
            err,
            BlobError::InvalidArgument(BlobArgumentError::ReferenceLength { actual: 4092, .. })
        ),
        "{err:?}"
    );
    assert!(memory.is_empty());
}

/// Spec 23: in-flight encoded bytes stay within the budget, while chunks do run in parallel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_bytes_stay_within_the_budget() {
    let memory = MemoryRelocationStore::new();
    let measured = Arc::new(InFlight {
        inner: memory.clone(),
        ..InFlight::default()
    });
    // Chunks of 100 bytes, 123 encoded; room for three at a time.
    let budget = TransferBudget::new(3 * 123).unwrap();
    let config = small(100, 64).with_budget(budget.clone());
    let blobs = BlobLayer::with_config(measured.clone(), config);
    let u = unit("budget");
    let data = payload(6400, 13);
    blobs.store(&u, &data).await.unwrap();
    assert_eq!(blobs.restore(&u).await.unwrap().to_bytes(), data);
    blobs.renew(&u).await.unwrap();
    let max = measured.max.load(std::sync::atomic::Ordering::SeqCst);
    assert!(max <= 3 * 123, "{max} bytes in flight");
    assert!(max >= 2 * 123, "chunks never overlapped ({max})");
    assert_eq!(budget.available(), budget.bytes(), "budget not returned");
}

/// A chunk larger than the whole budget still runs (alone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunk_larger_than_the_budget_runs_alone() {
    let memory = MemoryRelocationStore::new();
    let measured = Arc::new(InFlight {
        inner: memory.clone(),
        ..InFlight::default()
    });
    let budget = TransferBudget::new(50).unwrap();
    let blobs = BlobLayer::with_config(measured.clone(), small(100, 8).with_budget(budget));
    let u = unit("alone");
    let data = payload(800, 14);
    blobs.store(&u, &data).await.unwrap();
    assert_eq!(blobs.restore(&u).await.unwrap().to_bytes(), data);
    let max = measured.max.load(std::sync::atomic::Ordering::SeqCst);
    assert!(max <= 123, "{max}: more than one chunk in flight");
    assert!(TransferBudget::new(0).is_err());
}

/// A store failure or time-out while restoring is a store error (retry), not DataLost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_time_out_while_restoring_is_a_store_error_not_data_lost() {
    let memory = MemoryRelocationStore::new();
    let u = unit("timeout");
    layer(memory.clone(), small(10, 2))
        .store(&u, &payload(50, 15))
        .await
        .unwrap();
    let failing = Failing {
        inner: memory,
        suffix: "#0003".into(),
        fail_puts: false,
        error: || StoreError::TimedOut,
    };
    let err = layer(failing, small(10, 2)).restore(&u).await.unwrap_err();
    match err {
        BlobError::Store(e) => assert_eq!(e.kind(), StoreErrorKind::TimedOut),
        other => panic!("{other:?}"),
    }
}

/// The layer works over `Arc<dyn DynRelocationStore>` as well as over a concrete store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn works_over_an_arc_dyn_relocation_store() {
    let store: Arc<dyn DynRelocationStore> = Arc::new(MemoryRelocationStore::new());
    let blobs = BlobLayer::with_config(store, small(7, 5));
    let u = unit("dyn");
    let data = payload(123, 16);
    blobs.store(&u, &data).await.unwrap();
    assert_eq!(blobs.restore(&u).await.unwrap().to_bytes(), data);
    blobs.renew(&u).await.unwrap();
    blobs.delete(&u).await.unwrap();
}

/// An empty payload is a unit too (one empty chunk).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_payload_round_trips() {
    let memory = MemoryRelocationStore::new();
    let blobs = layer(memory.clone(), BlobLayerConfig::default());
    let u = unit("empty");
    let stored = blobs.store(&u, &Bytes::new()).await.unwrap();
    assert_eq!((stored.chunk_count, stored.stripe_count), (1, 1));
    let restored = blobs.restore(&u).await.unwrap();
    assert!(restored.to_bytes().is_empty());
    assert_eq!(restored.stripes, vec![0..0]);
}
