//! The blob layer over the official Redis Relocation Store: single node and cluster.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::*;
use zlink_redis_relocation::{RedisRelocationOptions, RedisRelocationStore};
use zlink_relocation::{BlobLayer, BlobLayerConfig, DataLost, TransferBudget};
use zlink_store_conformance::live;
use zlink_store_spi::{DynRelocationStore, RelocationStore, Retention};

fn config() -> BlobLayerConfig {
    // 3 MiB in chunks of at most 256 KiB over at most 5 stripes: 15 chunks.
    BlobLayerConfig::default()
        .with_chunk_limit(256 * 1024)
        .unwrap()
        .with_max_stripes(5)
        .unwrap()
        .with_budget(TransferBudget::new(1024 * 1024).unwrap())
        .with_retention(Retention::from_millis(600_000).unwrap())
}

async fn round_trip(store: RedisRelocationStore) {
    let store: Arc<dyn DynRelocationStore> = Arc::new(store);
    let blobs = BlobLayer::with_config(store.clone(), config());
    let u = unit("redis");
    let data = payload(3 * 1024 * 1024 + 5, 77);
    let stored = blobs.store(&u, &data).await.unwrap();
    assert_eq!(stored.stripe_count, 5);
    assert_eq!(stored.chunk_count, 15);
    let restored = blobs.restore(&u).await.unwrap();
    assert!(restored.to_bytes() == data, "restored bytes differ");
    assert_eq!(restored.sha256, stored.sha256);
    let renewed = blobs.renew(&u).await.unwrap();
    assert_eq!(renewed.chunk_count, 15);
    assert!(renewed.expires_at >= stored.expires_at);

    // A chunk overwritten with other bytes (deleted and put again) loses the whole unit.
    let victim = chunk(&u, 7);
    let retention = Retention::from_millis(600_000).unwrap();
    store.delete(&victim).await.unwrap();
    store
        .put(&victim, &Bytes::from_static(b"not a chunk"), retention)
        .await
        .unwrap();
    let err = blobs.restore(&u).await.unwrap_err();
    assert!(
        matches!(
            err.as_data_lost(),
            Some(DataLost::ChunkCorrupt { order: 7, .. })
        ),
        "{err:?}"
    );
    let deleted = blobs.delete(&u).await.unwrap();
    assert_eq!(deleted.chunk_count, 15);
    assert_eq!(
        blobs.restore(&u).await.unwrap_err().as_data_lost(),
        Some(&DataLost::IndexMissing)
    );
}

fn prefix() -> String {
    format!("zlink-test-blobs-{}", uuid::Uuid::new_v4().simple())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blob_layer_round_trips_on_redis_single_node() {
    let Some(url) = live::env_or_skip(
        "ZLINK_TEST_REDIS_URL",
        "blob_layer_round_trips_on_redis_single_node",
    ) else {
        return;
    };
    let options = RedisRelocationOptions::from_url(&url)
        .and_then(|o| o.with_key_prefix(prefix()))
        .unwrap();
    round_trip(RedisRelocationStore::connect(options).await.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blob_layer_round_trips_on_redis_cluster() {
    let Some(seeds) = live::env_or_skip(
        "ZLINK_TEST_REDIS_CLUSTER",
        "blob_layer_round_trips_on_redis_cluster",
    ) else {
        return;
    };
    let options = RedisRelocationOptions::cluster(seeds.split(','))
        .and_then(|o| o.with_key_prefix(prefix()))
        .unwrap();
    round_trip(RedisRelocationStore::connect(options).await.unwrap()).await;
}
