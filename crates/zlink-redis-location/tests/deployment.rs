//! Deployment shapes (spec 22 §7, §9, §10): a Location Store and a Relocation-style store on
//! one Redis under different prefixes, stores on separate servers, one hash slot per store on a
//! cluster, scripts reloaded after a flush, and a public API of two types.
#![allow(clippy::unwrap_used)]

mod common;

use bytes::Bytes;
use common::{HASHTAG, Target, fresh_prefix, key, targets};
use fred::types::Value;
use zlink_redis_location::RedisLocationStore;
use zlink_store_spi::{
    Condition, LocationStore, LocationStoreExt, Mutation, PageLimit, ReadResult, ScanPrefix,
    ScanRequest, ScanResult, StoreKey, WriteRequest,
};

async fn put(store: &RedisLocationStore, k: &StoreKey, v: &str) {
    let req = WriteRequest::new(
        vec![],
        vec![Mutation::put(k.clone(), Bytes::from(v.to_owned()))],
    )
    .unwrap();
    assert!(store.write(&req).await.unwrap().is_applied());
}

async fn value(store: &RedisLocationStore, k: &StoreKey) -> Option<Vec<u8>> {
    match store.read(k).await.unwrap() {
        ReadResult::Found { bytes, .. } => Some(bytes.to_vec()),
        ReadResult::Missing { .. } => None,
    }
}

async fn keys_of(store: &RedisLocationStore) -> Vec<StoreKey> {
    store
        .scan_all(&ScanPrefix::all(), PageLimit::LARGEST, 3)
        .await
        .unwrap()
        .unwrap()
        .items
        .into_iter()
        .map(|i| i.key)
        .collect()
}

/// Spec 22 §9–§10: a Location Store and a Relocation Store use different key namespaces on the
/// same Redis. Two stores with different prefixes on one server are independent — same logical
/// key, different values, separate scans, separate versions — and leave a Relocation Store's
/// `{zlink-relocation-v1}` keys alone.
#[tokio::test]
async fn location_and_relocation_prefixes_share_one_redis() {
    for t in targets().await {
        let base = fresh_prefix("shared");
        let (pl, pr) = (format!("{base}-location"), format!("{base}-relocation"));
        let location = t.store(&pl).await;
        let relocation_style = t.store(&pr).await;
        let blob_key = format!("{pr}:{{zlink-relocation-v1}}:blob:reloc-ref-0001");
        let blob_slot = fred::util::redis_keyslot(blob_key.as_bytes());
        let set = vec![
            blob_key.as_str().into(),
            Value::Bytes(Bytes::from_static(b"\xca\xfe\xba\xbe")),
        ];
        t.raw.try_cmd_at(blob_slot, "SET", set).await.unwrap();
        let k = key("authority\u{0}spot\u{0}room:1");
        put(&location, &k, "location").await;
        put(&relocation_style, &k, "relocation").await;
        put(&location, &key("only-location"), "x").await;
        assert_eq!(
            value(&location, &k).await.as_deref(),
            Some(&b"location"[..])
        );
        assert_eq!(
            value(&relocation_style, &k).await.as_deref(),
            Some(&b"relocation"[..])
        );
        assert_eq!(
            keys_of(&location).await,
            vec![k.clone(), key("only-location")]
        );
        assert_eq!(keys_of(&relocation_style).await, vec![k.clone()]);
        // A Missing condition in one namespace is unaffected by the other's key.
        let req = WriteRequest::new(
            vec![Condition::Missing(key("only-location"))],
            vec![Mutation::put(key("only-location"), "y")],
        )
        .unwrap();
        assert!(
            relocation_style.write(&req).await.unwrap().is_applied(),
            "{}",
            t.name
        );
        let del = WriteRequest::new(vec![], vec![Mutation::Delete(k.clone())]).unwrap();
        location.write(&del).await.unwrap();
        assert_eq!(value(&location, &k).await, None);
        assert_eq!(
            value(&relocation_style, &k).await.as_deref(),
            Some(&b"relocation"[..])
        );
        let blob = t
            .raw
            .try_cmd_at(blob_slot, "GET", vec![blob_key.as_str().into()])
            .await
            .unwrap();
        assert_eq!(
            blob.as_bytes(),
            Some(&b"\xca\xfe\xba\xbe"[..]),
            "{}",
            t.name
        );
        t.raw.del(&blob_key).await;
        t.raw.purge(&pl).await;
        t.raw.purge(&pr).await;
    }
}

/// The same prefix on two independent servers names two independent stores.
#[tokio::test]
async fn stores_on_separate_servers_are_independent() {
    let (Some(one), Some(two)) = (common::single().await, common::second().await) else {
        return;
    };
    let prefix = fresh_prefix("separate");
    let (a, b) = (one.store(&prefix).await, two.store(&prefix).await);
    let k = key("k");
    put(&a, &k, "one").await;
    assert_eq!(value(&b, &k).await, None);
    put(&b, &k, "two").await;
    assert_eq!(value(&a, &k).await.as_deref(), Some(&b"one"[..]));
    assert_eq!(value(&b, &k).await.as_deref(), Some(&b"two"[..]));
    one.raw.purge(&prefix).await;
    two.raw.purge(&prefix).await;
}

async fn all_keys_in_one_slot(t: &Target) {
    let prefix = fresh_prefix("one-slot");
    let store = t.store(&prefix).await;
    let keys: Vec<StoreKey> = (0..50).map(|i| key(&format!("k{i}"))).collect();
    let req = WriteRequest::new(
        vec![],
        keys.iter().map(|k| Mutation::put(k.clone(), "v")).collect(),
    )
    .unwrap();
    store.write(&req).await.unwrap();
    // An open snapshot, so the snapshot keys exist too.
    let first = ScanRequest::first(ScanPrefix::all(), PageLimit::new(1).unwrap());
    assert!(
        matches!(store.scan(&first).await.unwrap(), ScanResult::Page(p) if p.next_cursor.is_some())
    );
    let names = t.raw.keys_under(&prefix).await;
    assert!(names.len() >= 50 + 4, "{}: {names:?}", t.name);
    let slot = fred::util::redis_keyslot(HASHTAG.as_bytes());
    for name in &names {
        assert!(name.starts_with(&format!("{prefix}:{HASHTAG}:")), "{name}");
        assert_eq!(fred::util::redis_keyslot(name.as_bytes()), slot, "{name}");
        if t.name == "cluster" {
            let s = t
                .raw
                .int("CLUSTER", vec!["KEYSLOT".into(), name.as_str().into()])
                .await;
            assert_eq!(s, i64::from(slot), "{name}");
        }
    }
    t.raw.purge(&prefix).await;
}

/// Spec 22 §9: every key of a store — records, sequence, index, snapshots — carries the
/// `{zlink-location-v3}` hashtag, so on a cluster every script touches one slot.
#[tokio::test]
async fn every_key_of_a_store_hashes_to_one_slot() {
    for t in targets().await {
        all_keys_in_one_slot(&t).await;
    }
}

/// After `SCRIPT FLUSH` (a restarted or failed-over server) every operation still works: the
/// script is sent again on `NOSCRIPT`.
#[tokio::test]
async fn scripts_are_sent_again_after_a_script_flush() {
    for t in targets().await {
        let prefix = fresh_prefix("noscript");
        let store = t.store(&prefix).await;
        let k = key("k");
        for round in 0..2 {
            t.raw.cmd("SCRIPT", vec!["FLUSH".into()]).await;
            put(&store, &k, &format!("v{round}")).await;
            t.raw.cmd("SCRIPT", vec!["FLUSH".into()]).await;
            assert_eq!(
                value(&store, &k).await,
                Some(format!("v{round}").into_bytes())
            );
            t.raw.cmd("SCRIPT", vec!["FLUSH".into()]).await;
            assert_eq!(keys_of(&store).await, vec![k.clone()], "{}", t.name);
        }
        t.raw.purge(&prefix).await;
    }
}

/// Spec 22 §10: "The Redis provider's public declaration has no authority/reservation/aggregate
/// DTO, script, or key-layout type": the crate exports exactly the store, its options, the
/// options' durability setting with its error source, and their TLS settings with their error.
#[test]
fn public_api_is_the_store_and_its_options() {
    let lib = include_str!("../src/lib.rs");
    let public: Vec<&str> = lib
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("pub ") || l.starts_with("pub("))
        .collect();
    assert_eq!(
        public,
        vec![
            "pub use durability::{Durability, NotReplicated};",
            "pub use options::RedisLocationOptions;",
            "pub use store::RedisLocationStore;",
            "pub use zlink_redis_tls::{RedisTlsConfig, TlsConfigError, TlsConfigErrorKind, TlsRefusal};"
        ]
    );
    for l in lib.lines() {
        assert!(!l.trim_start().starts_with("pub mod"), "{l}");
    }
    // The two types are usable as the SPI and nothing else is needed to name them.
    fn is_location_store<S: LocationStore>() {}
    is_location_store::<RedisLocationStore>();
    let _ = std::any::type_name::<zlink_redis_location::RedisLocationOptions>();
}

/// Spec 22 §7: disposal happens once however often it is asked for — `close` twice, clones
/// dropped after it — and operations on a closed store fail within the operation timeout
/// instead of hanging.
#[tokio::test]
async fn closing_twice_is_harmless_and_closed_stores_fail_fast() {
    for t in targets().await {
        let prefix = fresh_prefix("close");
        let store = t
            .store_with(&prefix, std::time::Duration::from_millis(500))
            .await;
        let clone = store.clone();
        put(&store, &key("k"), "v").await;
        store.close().await;
        clone.close().await;
        let started = std::time::Instant::now();
        let r = clone.read(&key("k")).await;
        assert!(r.is_err(), "{}: read after close: {r:?}", t.name);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "{}",
            t.name
        );
        drop(store);
        drop(clone);
        t.raw.purge(&prefix).await;
    }
}
