//! Concurrency on Redis: exact CAS counting from many tasks, snapshot-consistent scans while
//! batches commit, and a hot key whose history stays bounded while snapshots are live.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::{Target, fresh_prefix, key, record_key, targets};
use zlink_redis_location::RedisLocationStore;
use zlink_store_spi::{
    Condition, LocationStore, LocationStoreExt, Mutation, PageLimit, ReadResult, ScanPage,
    ScanPrefix, ScanRequest, ScanResult, StoreKey, WriteRequest,
};

const TASKS: usize = 64;
const INCREMENTS_PER_TASK: usize = 4;

async fn increment(store: &RedisLocationStore, k: &StoreKey) -> usize {
    for attempt in 1.. {
        let ReadResult::Found { bytes, version, .. } = store.read(k).await.expect("read") else {
            panic!("counter missing");
        };
        let n: u64 = std::str::from_utf8(&bytes)
            .expect("utf8")
            .parse()
            .expect("number");
        let req = WriteRequest::new(
            vec![Condition::Version(k.clone(), version)],
            vec![Mutation::put(k.clone(), Bytes::from((n + 1).to_string()))],
        )
        .expect("request");
        if store.write(&req).await.expect("write").is_applied() {
            return attempt;
        }
    }
    unreachable!()
}

/// 64 tasks on a multi-threaded runtime CAS-increment one key through the provider; the
/// counter ends at exactly the number of increments, and the record holds one version.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cas_increments_from_64_tasks_end_at_the_exact_total() {
    for t in targets().await {
        let prefix = fresh_prefix("cas64");
        let store = Arc::new(t.store(&prefix).await);
        let k = key("counter");
        store
            .write(&WriteRequest::new(vec![], vec![Mutation::put(k.clone(), "0")]).unwrap())
            .await
            .unwrap();
        let mut handles = Vec::new();
        for _ in 0..TASKS {
            let (store, k) = (store.clone(), k.clone());
            handles.push(tokio::spawn(async move {
                let mut attempts = 0;
                for _ in 0..INCREMENTS_PER_TASK {
                    attempts += increment(&store, &k).await;
                }
                attempts
            }));
        }
        let mut attempts = 0;
        for h in handles {
            attempts += h.await.expect("task");
        }
        let total = TASKS * INCREMENTS_PER_TASK;
        let ReadResult::Found { bytes, .. } = store.read(&k).await.unwrap() else {
            panic!()
        };
        assert_eq!(bytes.as_ref(), total.to_string().as_bytes(), "{}", t.name);
        assert!(attempts >= total);
        eprintln!("{}: {total} increments took {attempts} attempts", t.name);
        assert_eq!(
            t.raw.zset(&record_key(&prefix, k.as_bytes())).await.len(),
            1
        );
        t.raw.purge(&prefix).await;
    }
}

const KEYS: usize = 40;
const GENERATIONS: u32 = 60;

fn gen_key(i: usize) -> StoreKey {
    key(&format!("k{i:02}"))
}

/// One generation: every key set to `g` and the extra key present on even generations, all in
/// one batch.
fn generation(g: u32) -> WriteRequest {
    let mut muts: Vec<Mutation> = (0..KEYS)
        .map(|i| Mutation::put(gen_key(i), Bytes::from(g.to_string())))
        .collect();
    muts.push(if g % 2 == 0 {
        Mutation::put(key("k20-extra"), Bytes::from(g.to_string()))
    } else {
        Mutation::Delete(key("k20-extra"))
    });
    WriteRequest::new(vec![], muts).unwrap()
}

async fn scan_consistently(store: &RedisLocationStore, name: &str) -> u32 {
    let items = store
        .scan_all(&ScanPrefix::all(), PageLimit::new(7).unwrap(), 10)
        .await
        .expect("scan")
        .expect("snapshot kept expiring")
        .items;
    let values: Vec<&[u8]> = items
        .iter()
        .filter(|i| i.key != key("k20-extra"))
        .map(|i| i.bytes.as_ref())
        .collect();
    assert_eq!(
        values.len(),
        KEYS,
        "{name}: {} keys in one snapshot",
        values.len()
    );
    assert!(
        values.iter().all(|v| *v == values[0]),
        "{name}: mixed generations {values:?}"
    );
    let g: u32 = std::str::from_utf8(values[0]).unwrap().parse().unwrap();
    let extra = items.iter().find(|i| i.key == key("k20-extra"));
    assert_eq!(
        extra.is_some(),
        g % 2 == 0,
        "{name}: extra key presence at generation {g}"
    );
    if let Some(e) = extra {
        assert_eq!(
            e.bytes.as_ref(),
            values[0],
            "{name}: extra key from another generation"
        );
    }
    let keys: Vec<&StoreKey> = items.iter().map(|i| &i.key).collect();
    assert!(
        keys.windows(2).all(|w| w[0].as_bytes() < w[1].as_bytes()),
        "{name}: key order"
    );
    g
}

/// Scans of many pages running while whole-store batches commit each read one generation
/// only: every key at the same value, the extra key present exactly on even generations.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scans_during_concurrent_writes_stay_snapshot_consistent() {
    for t in targets().await {
        let prefix = fresh_prefix("scan-consistency");
        let store = Arc::new(t.store(&prefix).await);
        store.write(&generation(0)).await.unwrap();
        let writer = {
            let store = store.clone();
            tokio::spawn(async move {
                for g in 1..=GENERATIONS {
                    store.write(&generation(g)).await.expect("generation");
                    tokio::task::yield_now().await;
                }
            })
        };
        let mut scanners = Vec::new();
        for s in 0..3 {
            let store = store.clone();
            let name = format!("{} scanner {s}", t.name);
            scanners.push(tokio::spawn(async move {
                let mut seen = Vec::new();
                for _ in 0..15 {
                    seen.push(scan_consistently(&store, &name).await);
                }
                seen
            }));
        }
        writer.await.unwrap();
        let mut distinct = std::collections::BTreeSet::new();
        for s in scanners {
            distinct.extend(s.await.unwrap());
        }
        eprintln!(
            "{}: scans saw {} distinct generations",
            t.name,
            distinct.len()
        );
        assert_eq!(scan_consistently(&store, t.name).await, GENERATIONS);
        t.raw.purge(&prefix).await;
    }
}

async fn first_page(store: &RedisLocationStore) -> ScanPage {
    match store
        .scan(&ScanRequest::first(
            ScanPrefix::all(),
            PageLimit::new(1).unwrap(),
        ))
        .await
        .unwrap()
    {
        ScanResult::Page(p) => p,
        ScanResult::Expired => panic!("first page Expired"),
    }
}

async fn rest(store: &RedisLocationStore, mut page: ScanPage) -> Vec<(StoreKey, Bytes)> {
    let mut out: Vec<(StoreKey, Bytes)> = page
        .items
        .iter()
        .map(|i| (i.key.clone(), i.bytes.clone()))
        .collect();
    while let Some(c) = page.next_cursor.clone() {
        page = match store
            .scan(&ScanRequest::next(
                ScanPrefix::all(),
                PageLimit::new(1).unwrap(),
                c,
            ))
            .await
            .unwrap()
        {
            ScanResult::Page(p) => p,
            ScanResult::Expired => panic!("live snapshot Expired"),
        };
        out.extend(page.items.iter().map(|i| (i.key.clone(), i.bytes.clone())));
    }
    out
}

async fn history_len(t: &Target, prefix: &str, k: &StoreKey) -> usize {
    t.raw.zset(&record_key(prefix, k.as_bytes())).await.len()
}

/// A hot key written hundreds of times while three snapshots are live keeps at most one
/// version per live snapshot plus the current one; every write succeeds; each snapshot still
/// reads the value it fixed; once the snapshots end, the next write leaves one version.
#[tokio::test]
async fn hot_key_history_stays_bounded_while_snapshots_are_live() {
    for t in targets().await {
        let prefix = fresh_prefix("hot-key");
        let store = t.store(&prefix).await;
        let (hot, cold) = (key("hot"), key("zz-cold"));
        store
            .write(
                &WriteRequest::new(
                    vec![],
                    vec![
                        Mutation::put(hot.clone(), "0"),
                        Mutation::put(cold.clone(), "c"),
                    ],
                )
                .unwrap(),
            )
            .await
            .unwrap();
        let mut snapshots = Vec::new();
        let mut n = 0u32;
        for round in 0..3 {
            // The first page lists "hot" and keeps the snapshot open for "zz-cold".
            snapshots.push((first_page(&store).await, n));
            for _ in 0..150 {
                n += 1;
                store
                    .write(
                        &WriteRequest::new(
                            vec![],
                            vec![Mutation::put(hot.clone(), Bytes::from(n.to_string()))],
                        )
                        .unwrap(),
                    )
                    .await
                    .unwrap();
                let len = history_len(&t, &prefix, &hot).await;
                assert!(
                    len <= round + 2,
                    "{}: {len} versions with {} live snapshots",
                    t.name,
                    round + 1
                );
            }
        }
        for (page, at) in snapshots {
            assert_eq!(page.items[0].bytes.as_ref(), at.to_string().as_bytes());
            let all = rest(&store, page).await;
            assert_eq!(all.len(), 2, "{}: snapshot lost a key", t.name);
        }
        store
            .write(&WriteRequest::new(vec![], vec![Mutation::put(hot.clone(), "last")]).unwrap())
            .await
            .unwrap();
        assert_eq!(
            history_len(&t, &prefix, &hot).await,
            1,
            "{}: history not trimmed",
            t.name
        );
        t.raw.purge(&prefix).await;
    }
}

/// At the live-snapshot limit (256) a hot key keeps accepting writes: its history is bounded by
/// the live snapshots, never by how often it was written.
#[tokio::test]
async fn hot_key_keeps_accepting_writes_at_the_snapshot_limit() {
    for t in targets().await {
        let prefix = fresh_prefix("hot-key-limit");
        let store = t.store(&prefix).await;
        let (hot, cold) = (key("hot"), key("zz-cold"));
        store
            .write(
                &WriteRequest::new(
                    vec![],
                    vec![
                        Mutation::put(hot.clone(), "0"),
                        Mutation::put(cold.clone(), "c"),
                    ],
                )
                .unwrap(),
            )
            .await
            .unwrap();
        for i in 0..300u32 {
            let _ = first_page(&store).await;
            store
                .write(
                    &WriteRequest::new(
                        vec![],
                        vec![Mutation::put(hot.clone(), Bytes::from(i.to_string()))],
                    )
                    .unwrap(),
                )
                .await
                .unwrap();
        }
        let len = history_len(&t, &prefix, &hot).await;
        assert!(len <= 257, "{}: {len} versions", t.name);
        assert!(len > 1, "{}: live snapshots lost their versions", t.name);
        t.raw.purge(&prefix).await;
    }
}
