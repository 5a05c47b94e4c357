//! Live tests of the Redis Relocation Store on the 3-master Redis Cluster
//! (`ZLINK_TEST_REDIS_CLUSTER`).

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use bytes::Bytes;
use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};
use zlink_store_spi::{BlobReadResult, PutResult, RelocationStore, Retention};

use common::*;

/// Spec 23: the `{zlink-relocation-v1}` hashtag pins the whole blob domain to one slot, so each
/// one-key script is atomic on the cluster; the value there is the raw bytes.
#[tokio::test]
async fn cluster_keeps_every_blob_of_a_prefix_in_one_slot_as_raw_bytes() {
    let Some(seeds) =
        cluster_seeds("cluster_keeps_every_blob_of_a_prefix_in_one_slot_as_raw_bytes")
    else {
        return;
    };
    let prefix = random_prefix();
    let store = connect_cluster(&seeds, &prefix).await;
    let raw = raw_cluster_client(&seeds).await;
    let retention = Retention::from_millis(3_600_000).unwrap();
    let mut refs = Vec::new();
    for i in 0..8u8 {
        let r = reference(&format!("slot-{i}"));
        let payload = Bytes::from(vec![i; 1000 + usize::from(i)]);
        let put = store.put(&r, &payload, retention).await.unwrap();
        assert!(matches!(put, PutResult::Stored { .. }), "{put:?}");
        let key = blob_key(&prefix, &r);
        let slot: i64 = raw
            .custom(
                CustomCommand::new_static("CLUSTER", ClusterHash::Random, false),
                vec!["KEYSLOT".to_string(), key.clone()],
            )
            .await
            .unwrap();
        assert_eq!(slot as u16, blob_slot(), "{key}");
        let stored: Option<Bytes> = raw.get(&key).await.unwrap();
        assert_eq!(stored, Some(payload.clone()));
        match store.read(&r).await.unwrap() {
            BlobReadResult::Found { bytes, .. } => assert_eq!(bytes, payload),
            other => panic!("{other:?}"),
        }
        refs.push(r);
    }
    for r in &refs {
        store.delete(r).await.unwrap();
    }
}
