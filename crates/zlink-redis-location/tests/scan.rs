//! Spec 22 §5 on Redis: snapshot lifetime and limits, bounded work per page, cursors that
//! belong to one store.
#![allow(clippy::unwrap_used)]

mod common;

use common::{fresh_prefix, key, targets};
use zlink_redis_location::RedisLocationStore;
use zlink_store_spi::{
    LocationStore, Mutation, PageLimit, ScanCursor, ScanPage, ScanPrefix, ScanRequest, ScanResult,
    StoreKey, WriteRequest,
};

fn one() -> PageLimit {
    PageLimit::new(1).unwrap()
}

async fn first(store: &RedisLocationStore, prefix: &ScanPrefix, limit: PageLimit) -> ScanPage {
    match store
        .scan(&ScanRequest::first(prefix.clone(), limit))
        .await
        .unwrap()
    {
        ScanResult::Page(p) => p,
        ScanResult::Expired => panic!("first page Expired"),
    }
}

async fn next(
    store: &RedisLocationStore,
    prefix: &ScanPrefix,
    limit: PageLimit,
    c: ScanCursor,
) -> ScanResult {
    store
        .scan(&ScanRequest::next(prefix.clone(), limit, c))
        .await
        .unwrap()
}

async fn put_all(store: &RedisLocationStore, keys: &[StoreKey]) {
    for chunk in keys.chunks(WriteRequest::MAX_UNIQUE_KEYS) {
        let req = WriteRequest::new(
            vec![],
            chunk
                .iter()
                .map(|k| Mutation::put(k.clone(), "v"))
                .collect(),
        )
        .unwrap();
        store.write(&req).await.unwrap();
    }
}

/// 256 snapshots stay live together; the 257th ends the oldest, whose cursor then answers
/// `Expired` while the others keep working.
#[tokio::test]
async fn snapshot_beyond_the_live_limit_ends_the_oldest() {
    for t in targets().await {
        let prefix = fresh_prefix("snapshot-limit");
        let store = t.store(&prefix).await;
        put_all(&store, &[key("a"), key("b"), key("c")]).await;
        let all = ScanPrefix::all();
        let mut cursors = Vec::new();
        for _ in 0..256 {
            cursors.push(
                first(&store, &all, one())
                    .await
                    .next_cursor
                    .expect("cursor"),
            );
        }
        // At the limit every snapshot is live: the oldest still pages (to "b", with more).
        let ScanResult::Page(p) = next(&store, &all, one(), cursors[0].clone()).await else {
            panic!("{}: oldest snapshot ended at the limit", t.name);
        };
        assert_eq!(p.items[0].key, key("b"));
        let oldest = p.next_cursor.expect("cursor");
        // One past the limit: the oldest ends, the next oldest lives on.
        let _past = first(&store, &all, one())
            .await
            .next_cursor
            .expect("cursor");
        assert_eq!(
            next(&store, &all, one(), oldest).await,
            ScanResult::Expired,
            "{}",
            t.name
        );
        match next(&store, &all, one(), cursors[1].clone()).await {
            ScanResult::Page(p) => assert_eq!(p.items[0].key, key("b")),
            ScanResult::Expired => panic!("{}: second-oldest snapshot ended", t.name),
        }
        t.raw.purge(&prefix).await;
    }
}

/// A page's work is bounded: 5,000 keys created after the snapshot between two of its keys are
/// skipped a bounded number of index entries per call (short or empty pages with a cursor),
/// and the scan still returns exactly the snapshot.
#[tokio::test]
async fn page_work_is_bounded_when_many_keys_are_invisible() {
    for t in targets().await {
        let prefix = fresh_prefix("bounded-work");
        let store = t.store(&prefix).await;
        put_all(&store, &[key("a"), key("b"), key("c")]).await;
        let all = ScanPrefix::all();
        let page = first(&store, &all, one()).await;
        assert_eq!(page.items[0].key, key("a"));
        let later: Vec<StoreKey> = (0..5000).map(|i| key(&format!("a/{i:04}"))).collect();
        put_all(&store, &later).await;
        let mut seen = vec![page.items[0].key.clone()];
        let mut cursor = page.next_cursor;
        let mut pages = 1;
        while let Some(c) = cursor {
            let ScanResult::Page(p) = next(&store, &all, one(), c).await else {
                panic!("{}: live snapshot Expired", t.name);
            };
            pages += 1;
            assert!(p.items.len() <= 1);
            seen.extend(p.items.iter().map(|i| i.key.clone()));
            cursor = p.next_cursor;
        }
        assert_eq!(seen, vec![key("a"), key("b"), key("c")], "{}", t.name);
        // 2 × limit + 64 index entries per call at most: 5,000 invisible keys need many calls.
        assert!(pages >= 5000 / 66, "{}: only {pages} pages", t.name);
        t.raw.purge(&prefix).await;
    }
}

/// A cursor belongs to the store (prefix) that issued it: another store on the same Redis
/// answers `Expired` for it, and a finished scan's cursor answers `Expired`.
#[tokio::test]
async fn cursor_of_another_store_or_a_finished_scan_is_expired() {
    for t in targets().await {
        let (pa, pb) = (fresh_prefix("cursor-a"), fresh_prefix("cursor-b"));
        let (a, b) = (t.store(&pa).await, t.store(&pb).await);
        put_all(&a, &[key("k1"), key("k2"), key("k3")]).await;
        put_all(&b, &[key("k1"), key("k2"), key("k3")]).await;
        let all = ScanPrefix::all();
        let c = first(&a, &all, one()).await.next_cursor.expect("cursor");
        assert_eq!(
            next(&b, &all, one(), c.clone()).await,
            ScanResult::Expired,
            "{}",
            t.name
        );
        // Finish the scan on its own store; its cursors are then spent.
        let ScanResult::Page(p2) = next(&a, &all, one(), c.clone()).await else {
            panic!()
        };
        let c2 = p2.next_cursor.expect("cursor");
        let ScanResult::Page(p3) = next(&a, &all, one(), c2).await else {
            panic!()
        };
        assert!(p3.next_cursor.is_none());
        assert_eq!(
            next(&a, &all, one(), c).await,
            ScanResult::Expired,
            "{}",
            t.name
        );
        t.raw.purge(&pa).await;
        t.raw.purge(&pb).await;
    }
}

/// Cursors stay within 4,096 bytes even for 1,024-byte keys, and a scan over such keys pages
/// through them in byte order.
#[tokio::test]
async fn cursors_of_the_longest_keys_fit_their_bound() {
    for t in targets().await {
        let prefix = fresh_prefix("long-keys");
        let store = t.store(&prefix).await;
        let keys: Vec<StoreKey> = (0..3)
            .map(|i| {
                key(&format!(
                    "{i}{}",
                    "\u{e9}".repeat(StoreKey::MAX_LEN / 2 - 1)
                ))
            })
            .collect();
        assert!(keys.iter().all(|k| k.len() == StoreKey::MAX_LEN - 1));
        let longest = key(&"\u{0}".repeat(StoreKey::MAX_LEN));
        let mut all_keys = keys.clone();
        all_keys.insert(0, longest);
        put_all(&store, &all_keys).await;
        let all = ScanPrefix::all();
        let mut page = first(&store, &all, one()).await;
        let mut seen = page.items.iter().map(|i| i.key.clone()).collect::<Vec<_>>();
        while let Some(c) = page.next_cursor.clone() {
            assert!(c.len() <= ScanCursor::MAX_LEN);
            let ScanResult::Page(p) = next(&store, &all, one(), c).await else {
                panic!()
            };
            seen.extend(p.items.iter().map(|i| i.key.clone()));
            page = p;
        }
        assert_eq!(seen, all_keys, "{}", t.name);
        t.raw.purge(&prefix).await;
    }
}
