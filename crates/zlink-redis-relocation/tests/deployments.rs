//! Spec 23: "Both stores register and work on the same Redis and on different Redis
//! deployments." The official Redis Location Store and this Relocation Store, following the
//! publication order of spec 23: store and verify the payload, then CAS the Location Store to
//! point at it; to delete, the Location Store first records end of use, then the payload goes.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use bytes::Bytes;
use fred::prelude::*;
use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
use zlink_redis_relocation::RedisRelocationStore;
use zlink_store_spi::{
    BlobReadResult, BlobRef, Condition, LocationStore, Mutation, PutResult, ReadResult,
    RelocationStore, Retention, StoreKey, WriteRequest, WriteResult,
};

use common::*;

/// Publishes a payload (relocation store first, then the location pointer), consumes it
/// through the pointer, then ends its use (pointer first, then the payload).
async fn publish_consume_retire(location: &RedisLocationStore, relocation: &RedisRelocationStore) {
    let reference = reference("cold-activation");
    let payload = Bytes::from(vec![0xa5u8; 200_000]);
    let pointer_key = StoreKey::new(format!("spot/{}", uuid::Uuid::new_v4().simple())).unwrap();

    // 1. Store and verify the payload.
    let put = relocation
        .put(
            &reference,
            &payload,
            Retention::from_millis(600_000).unwrap(),
        )
        .await
        .unwrap();
    assert!(matches!(put, PutResult::Stored { .. }), "{put:?}");
    let BlobReadResult::Found { bytes, .. } = relocation.read(&reference).await.unwrap() else {
        panic!("payload not readable after put")
    };
    assert_eq!(bytes, payload);

    // 2. Only then point at it with a CAS.
    let publish = WriteRequest::new(
        vec![Condition::Missing(pointer_key.clone())],
        vec![Mutation::put(
            pointer_key.clone(),
            Bytes::from(reference.to_string()),
        )],
    )
    .unwrap();
    let WriteResult::Applied { put_versions, .. } = location.write(&publish).await.unwrap() else {
        panic!("pointer CAS conflicted")
    };

    // A reader follows the pointer to the payload.
    let ReadResult::Found { bytes: pointer, .. } = location.read(&pointer_key).await.unwrap()
    else {
        panic!("pointer missing")
    };
    let followed = BlobRef::from_utf8(&pointer).unwrap();
    let BlobReadResult::Found { bytes, .. } = relocation.read(&followed).await.unwrap() else {
        panic!("pointed-at payload missing")
    };
    assert_eq!(bytes, payload);

    // 3. End of use: the Location Store first, then the payload.
    let retire = WriteRequest::new(
        vec![Condition::Version(
            pointer_key.clone(),
            put_versions[0].clone(),
        )],
        vec![Mutation::Delete(pointer_key.clone())],
    )
    .unwrap();
    assert!(location.write(&retire).await.unwrap().is_applied());
    assert!(location.read(&pointer_key).await.unwrap().is_missing());
    // The payload is still there until it is deleted.
    assert!(matches!(
        relocation.read(&reference).await.unwrap(),
        BlobReadResult::Found { .. }
    ));
    relocation.delete(&reference).await.unwrap();
    assert!(matches!(
        relocation.read(&reference).await.unwrap(),
        BlobReadResult::Missing { .. }
    ));
}

/// Every key under `prefix` on the server behind `client`.
async fn keys_under(client: &Client, prefix: &str) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut keys = Vec::new();
    loop {
        let (next, batch): (String, Vec<String>) = client
            .custom(
                CustomCommand::new_static("SCAN", ClusterHash::Random, false),
                vec![
                    cursor.clone(),
                    "MATCH".to_string(),
                    format!("{prefix}:*"),
                    "COUNT".to_string(),
                    "1000".to_string(),
                ],
            )
            .await
            .unwrap();
        keys.extend(batch);
        if next == "0" {
            return keys;
        }
        cursor = next;
    }
}

use fred::types::{ClusterHash, CustomCommand};

/// Removes what the Location Store keeps after deletes (its internal history) under `prefix`.
async fn purge(client: &Client, prefix: &str) {
    for key in keys_under(client, prefix).await {
        let _: i64 = client.del(key).await.unwrap();
    }
}

async fn location_store(url: &str, prefix: &str) -> RedisLocationStore {
    let options = RedisLocationOptions::from_url(url)
        .unwrap()
        .with_key_prefix(prefix)
        .unwrap();
    RedisLocationStore::connect(options).await.unwrap()
}

#[tokio::test]
async fn location_and_relocation_stores_share_one_redis_with_different_prefixes() {
    let Some(url) =
        single_url("location_and_relocation_stores_share_one_redis_with_different_prefixes")
    else {
        return;
    };
    let (location_prefix, relocation_prefix) = (random_prefix(), random_prefix());
    let location = location_store(&url, &location_prefix).await;
    let relocation =
        connect_single(&url, &relocation_prefix, std::time::Duration::from_secs(10)).await;
    let raw = raw_client(&url).await;

    // While published, each store's keys stay in its own prefix and namespace.
    let reference = reference("probe");
    relocation
        .put(
            &reference,
            &Bytes::from_static(b"x"),
            Retention::from_millis(60_000).unwrap(),
        )
        .await
        .unwrap();
    let key = StoreKey::new("probe").unwrap();
    let put = WriteRequest::new(
        vec![],
        vec![Mutation::put(key.clone(), Bytes::from_static(b"y"))],
    )
    .unwrap();
    assert!(location.write(&put).await.unwrap().is_applied());
    let relocation_keys = keys_under(&raw, &relocation_prefix).await;
    assert_eq!(
        relocation_keys,
        vec![blob_key(&relocation_prefix, &reference)]
    );
    let location_keys = keys_under(&raw, &location_prefix).await;
    assert!(!location_keys.is_empty());
    assert!(
        location_keys
            .iter()
            .all(|k| !k.contains("{zlink-relocation-v1}")),
        "{location_keys:?}"
    );
    relocation.delete(&reference).await.unwrap();
    let delete = WriteRequest::new(vec![], vec![Mutation::Delete(key)]).unwrap();
    assert!(location.write(&delete).await.unwrap().is_applied());

    publish_consume_retire(&location, &relocation).await;
    assert!(keys_under(&raw, &relocation_prefix).await.is_empty());
    location.close().await;
    relocation.close().await;
    purge(&raw, &location_prefix).await;
}

#[tokio::test]
async fn location_and_relocation_stores_work_on_two_different_redis_servers() {
    let test = "location_and_relocation_stores_work_on_two_different_redis_servers";
    let (Some(url), Some(url2)) = (single_url(test), second_url(test)) else {
        return;
    };
    let prefix = random_prefix();
    // The same prefix on purpose: the deployments are independent.
    let location = location_store(&url, &prefix).await;
    let relocation = connect_single(&url2, &prefix, std::time::Duration::from_secs(10)).await;
    let (raw1, raw2) = (raw_client(&url).await, raw_client(&url2).await);

    let reference = reference("elsewhere");
    relocation
        .put(
            &reference,
            &Bytes::from_static(b"z"),
            Retention::from_millis(60_000).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        keys_under(&raw2, &prefix).await,
        vec![blob_key(&prefix, &reference)],
        "the blob is on the second server"
    );
    assert!(
        keys_under(&raw1, &prefix)
            .await
            .iter()
            .all(|k| !k.contains("{zlink-relocation-v1}")),
        "no blob on the first server"
    );
    relocation.delete(&reference).await.unwrap();

    publish_consume_retire(&location, &relocation).await;
    assert!(keys_under(&raw2, &prefix).await.is_empty());
    location.close().await;
    relocation.close().await;
    purge(&raw1, &prefix).await;
}
