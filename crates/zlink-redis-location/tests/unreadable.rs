//! Corrupt or foreign data under the store's namespace: a record key holding another Redis
//! type, or a record member that is not of the provider's format, costs that key only. A scan
//! lists it in `ScanPage::unreadable` beside the page's other items; an exact read of it is
//! the typed per-key `StoreError::Unreadable` (and so is a `read_many` naming it); every other key reads, writes and scans as
//! before.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Target, fresh_prefix, key, record_key, targets};
use fred::types::Value;
use zlink_redis_location::RedisLocationStore;
use zlink_store_spi::{
    LocationStore, LocationStoreExt, Mutation, PageLimit, ScanItem, ScanPrefix, ScanRequest,
    ScanResult, StoreError, StoreKey, UnreadableKey, UnreadableKind, WriteRequest,
};

async fn put_all(store: &RedisLocationStore, keys: &[StoreKey]) {
    let req = WriteRequest::new(
        vec![],
        keys.iter().map(|k| Mutation::put(k.clone(), "v")).collect(),
    )
    .unwrap();
    store.write(&req).await.unwrap();
}

fn keys_of(items: &[ScanItem]) -> Vec<StoreKey> {
    items.iter().map(|i| i.key.clone()).collect()
}

/// `p/a`, `p/b`, `p/c` written through the store, then `p/b`'s record key replaced by `plant`.
async fn plant(t: &Target, prefix: &str, store: &RedisLocationStore, plant: &str, v: Value) {
    put_all(store, &[key("p/a"), key("p/b"), key("p/c")]).await;
    let rk = record_key(prefix, b"p/b");
    t.raw.del(&rk).await;
    let args = match plant {
        "SET" => vec![rk.as_str().into(), v],
        _ => vec![rk.as_str().into(), 1.into(), v],
    };
    t.raw.cmd(plant, args).await;
}

/// Every readable item and unreadable key under `p/`, one page of `limit` at a time; also
/// checks each page holds at most `limit` entries.
async fn paged(store: &RedisLocationStore, limit: usize) -> (Vec<StoreKey>, Vec<UnreadableKey>) {
    let prefix = ScanPrefix::new("p/").unwrap();
    let limit = PageLimit::new(limit).unwrap();
    let mut request = ScanRequest::first(prefix.clone(), limit);
    let (mut items, mut unreadable) = (Vec::new(), Vec::new());
    loop {
        let ScanResult::Page(page) = store.scan(&request).await.unwrap() else {
            panic!("snapshot expired");
        };
        assert!(page.items.len() + page.unreadable.len() <= limit.get());
        items.extend(keys_of(&page.items));
        unreadable.extend(page.unreadable);
        match page.next_cursor {
            Some(c) => request = ScanRequest::next(prefix.clone(), limit, c),
            None => return (items, unreadable),
        }
    }
}

async fn assert_only_b_unreadable(store: &RedisLocationStore, kind: UnreadableKind, what: &str) {
    let want = vec![UnreadableKey::new(key("p/b"), kind)];
    let listing = store
        .scan_all(&ScanPrefix::new("p/").unwrap(), PageLimit::LARGEST, 3)
        .await
        .unwrap_or_else(|e| panic!("{what}: scan failed: {e:?}"))
        .expect("snapshot");
    assert_eq!(
        keys_of(&listing.items),
        vec![key("p/a"), key("p/c")],
        "{what}"
    );
    assert_eq!(listing.unreadable, want, "{what}");
    // Page by page the unreadable key takes its place in the page limit.
    assert_eq!(
        paged(store, 1).await,
        (vec![key("p/a"), key("p/c")], want.clone()),
        "{what}"
    );
    match store.read(&key("p/b")).await {
        Err(StoreError::Unreadable(u)) => assert_eq!(vec![u], want, "{what}"),
        other => panic!("{what}: expected an unreadable key, got {other:?}"),
    }
    assert!(
        store.read(&key("p/a")).await.unwrap().bytes().is_some(),
        "{what}"
    );
    // A batched read naming it fails with that key, as its exact read does; without it the
    // other keys read.
    match store.read_many(&[key("p/a"), key("p/b"), key("p/c")]).await {
        Err(StoreError::Unreadable(u)) => assert_eq!(vec![u], want, "{what}"),
        other => panic!("{what}: read_many: expected an unreadable key, got {other:?}"),
    }
    let others = store.read_many(&[key("p/a"), key("p/c")]).await.unwrap();
    assert!(others.iter().all(|r| r.bytes().is_some()), "{what}");
    // Other keys still write.
    put_all(store, &[key("p/a"), key("p/d")]).await;
}

/// A plain Redis string planted at the record key of `p/b` (which the scan index lists): a
/// scan of the whole prefix returns `p/a` and `p/c` and names `p/b` as a foreign type.
#[tokio::test]
async fn a_wrong_typed_key_costs_only_that_key_in_a_scan() {
    for t in targets().await {
        let prefix = fresh_prefix("unreadable-type");
        let store = t.store(&prefix).await;
        plant(&t, &prefix, &store, "SET", Value::from("foreign")).await;
        assert_only_b_unreadable(&store, UnreadableKind::ForeignType, t.name).await;
        t.raw.purge(&prefix).await;
    }
}

/// A record member that is not of the record format — an unknown tag, truncated, naming
/// another key, a key that is not UTF-8 — costs only its key: `Corrupt`.
#[tokio::test]
async fn a_corrupt_record_costs_only_that_key_in_a_scan() {
    for t in targets().await {
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("unknown tag", b"\x02\x95\xa3p/b\xa1v\xa11\x00\xc2".to_vec()),
            ("truncated", b"\x01\x95\xa3p/b\xa5v".to_vec()),
            ("other key", b"\x01\x95\xa3p/x\xa1v\xa11\x00\xc2".to_vec()),
            (
                "key not UTF-8",
                b"\x01\x95\xa3p/\xff\xa1v\xa11\x00\xc2".to_vec(),
            ),
            ("a plain string", b"garbage".to_vec()),
        ];
        for (name, m) in cases {
            let prefix = fresh_prefix("unreadable-corrupt");
            let store = t.store(&prefix).await;
            plant(&t, &prefix, &store, "ZADD", Value::Bytes(m.into())).await;
            let what = format!("{} {name}", t.name);
            assert_only_b_unreadable(&store, UnreadableKind::Corrupt, &what).await;
            t.raw.purge(&prefix).await;
        }
    }
}
