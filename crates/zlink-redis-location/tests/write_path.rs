//! The write script on live Redis (spec 22 §4, §9): what it learns from the keys a condition
//! read (type, existence, a durable newest member), the snapshot registry read only when a
//! record that exists is written, and helper keys of another type. Checked case by case and as
//! a property over random batches against a model.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{Target, fresh_prefix, hex, key, record_key, targets};
use fred::types::Value;
use proptest::prelude::*;
use sha2::{Digest, Sha256};
use zlink_redis_location::RedisLocationStore;
use zlink_store_spi::{
    Condition, FailureKind, LocationStore, Mutation, PageLimit, ReadResult, Retention, ScanCursor,
    ScanPrefix, ScanRequest, ScanResult, StoreError, StoreKey, StoreVersion, WriteRequest,
    WriteResult,
};

const HASHTAG: &str = "{zlink-location-v3}";

fn index_key(prefix: &str) -> String {
    format!("{prefix}:{HASHTAG}:index")
}

fn snapshots_key(prefix: &str) -> String {
    format!("{prefix}:{HASHTAG}:snapshots")
}

fn index_member(k: &StoreKey) -> String {
    format!(
        "{}.{}",
        hex(k.as_bytes()),
        hex(&Sha256::digest(k.as_bytes()))
    )
}

async fn pttl(t: &Target, prefix: &str, k: &StoreKey) -> i64 {
    t.raw
        .int("PTTL", vec![Value::from(record_key(prefix, k.as_bytes()))])
        .await
}

async fn write(store: &RedisLocationStore, c: Vec<Condition>, m: Vec<Mutation>) -> WriteResult {
    store
        .write(&WriteRequest::new(c, m).unwrap())
        .await
        .unwrap()
}

fn version(r: WriteResult) -> StoreVersion {
    match r {
        WriteResult::Applied { put_versions, .. } => put_versions[0].clone(),
        other => panic!("not applied: {other:?}"),
    }
}

/// The first page (limit 1) of a scan of everything: a live snapshot when more pages follow.
async fn open_snapshot(store: &RedisLocationStore) -> Option<ScanCursor> {
    match store
        .scan(&ScanRequest::first(
            ScanPrefix::all(),
            PageLimit::new(1).unwrap(),
        ))
        .await
        .unwrap()
    {
        ScanResult::Page(p) => p.next_cursor,
        ScanResult::Expired => panic!("first page Expired"),
    }
}

/// A durable put leaves the record without a Redis TTL and an expiring put sets one, whatever
/// the record held before: a durable or expiring value read by a `Version` condition, an
/// expired value or a tombstone read by a `Missing` condition.
#[tokio::test]
async fn puts_leave_the_redis_ttl_their_retention_asks_for() {
    for t in targets().await {
        let prefix = fresh_prefix("write-ttl");
        let store = t.store(&prefix).await;
        let long = Retention::from_millis(10_000).unwrap();
        let (a, b, c, d) = (key("a"), key("b"), key("c"), key("d"));

        // Durable over durable, then expiring over durable, then durable over expiring.
        let v = version(write(&store, vec![], vec![Mutation::put(a.clone(), "1")]).await);
        let v = version(
            write(
                &store,
                vec![Condition::Version(a.clone(), v)],
                vec![Mutation::put(a.clone(), "2")],
            )
            .await,
        );
        assert_eq!(pttl(&t, &prefix, &a).await, -1, "{}", t.name);
        let v = version(
            write(
                &store,
                vec![Condition::Version(a.clone(), v)],
                vec![Mutation::put_expiring(a.clone(), "3", long)],
            )
            .await,
        );
        let ttl = pttl(&t, &prefix, &a).await;
        assert!(ttl > 10_000, "{}: expiring put TTL {ttl}", t.name);
        write(
            &store,
            vec![Condition::Version(a.clone(), v)],
            vec![Mutation::put(a.clone(), "4")],
        )
        .await;
        assert_eq!(pttl(&t, &prefix, &a).await, -1, "{}", t.name);

        // Durable over an expired value (its key outlives the expiry).
        write(
            &store,
            vec![],
            vec![Mutation::put_expiring(
                b.clone(),
                "short",
                Retention::from_millis(1).unwrap(),
            )],
        )
        .await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(pttl(&t, &prefix, &b).await > 0, "{}", t.name);
        let applied = write(
            &store,
            vec![Condition::Missing(b.clone())],
            vec![Mutation::put(b.clone(), "durable")],
        )
        .await;
        assert!(applied.is_applied(), "{}", t.name);
        assert_eq!(pttl(&t, &prefix, &b).await, -1, "{}", t.name);
        assert_eq!(
            store.read(&b).await.unwrap().bytes().map(|x| x.as_ref()),
            Some(&b"durable"[..])
        );

        // Durable over a tombstone: a delete while a snapshot is live keeps the record (with a
        // TTL) for the snapshot.
        write(
            &store,
            vec![],
            vec![Mutation::put(c.clone(), "c"), Mutation::put(d.clone(), "d")],
        )
        .await;
        assert!(open_snapshot(&store).await.is_some(), "{}", t.name);
        write(&store, vec![], vec![Mutation::Delete(c.clone())]).await;
        assert!(pttl(&t, &prefix, &c).await > 0, "{}: tombstone TTL", t.name);
        let applied = write(
            &store,
            vec![Condition::Missing(c.clone())],
            vec![Mutation::put(c.clone(), "again")],
        )
        .await;
        assert!(applied.is_applied(), "{}", t.name);
        assert_eq!(pttl(&t, &prefix, &c).await, -1, "{}", t.name);
        t.raw.purge(&prefix).await;
    }
}

fn assert_format_failure(r: Result<WriteResult, StoreError>, what: &str) {
    assert!(
        matches!(
            r,
            Err(StoreError::Failure {
                kind: FailureKind::Format,
                ..
            })
        ),
        "{what}: {r:?}"
    );
}

/// The scan index or the snapshot registry holding another Redis type fails a batch that
/// would use it with a format error before any command writes: nothing applied, no sequence.
#[tokio::test]
async fn foreign_type_under_a_helper_key_aborts_before_any_write() {
    for t in targets().await {
        let prefix = fresh_prefix("write-helper-type");
        let store = t.store(&prefix).await;
        let seed = key("seed");
        let v = version(write(&store, vec![], vec![Mutation::put(seed.clone(), "s")]).await);
        let put_new = || {
            WriteRequest::new(
                vec![Condition::Version(seed.clone(), v.clone())],
                vec![Mutation::put(key("new"), "n")],
            )
            .unwrap()
        };
        let put_existing = || {
            WriteRequest::new(
                vec![Condition::Version(seed.clone(), v.clone())],
                vec![Mutation::put(seed.clone(), "t")],
            )
            .unwrap()
        };
        let delete = || WriteRequest::new(vec![], vec![Mutation::Delete(seed.clone())]).unwrap();

        let index = index_key(&prefix);
        let saved = t.raw.cmd("DUMP", vec![index.as_str().into()]).await;
        t.raw.cmd("DEL", vec![index.as_str().into()]).await;
        t.raw
            .cmd("SET", vec![index.as_str().into(), "x".into()])
            .await;
        let before = t.raw.state(&prefix).await;
        for (name, req) in [("new record", put_new()), ("delete", delete())] {
            assert_format_failure(store.write(&req).await, name);
            assert_eq!(t.raw.state(&prefix).await, before, "{}: {name}", t.name);
        }
        t.raw.cmd("DEL", vec![index.as_str().into()]).await;
        t.raw
            .cmd("RESTORE", vec![index.as_str().into(), 0.into(), saved])
            .await;

        let snaps = snapshots_key(&prefix);
        t.raw
            .cmd("SET", vec![snaps.as_str().into(), "x".into()])
            .await;
        let before = t.raw.state(&prefix).await;
        for (name, req) in [("existing record", put_existing()), ("delete", delete())] {
            assert_format_failure(store.write(&req).await, name);
            assert_eq!(t.raw.state(&prefix).await, before, "{}: {name}", t.name);
        }
        // A batch writing new records only needs neither the registry nor its type.
        assert!(store.write(&put_new()).await.unwrap().is_applied());
        t.raw.purge(&prefix).await;
    }
}

/// MessagePack str family, as Lua `cmsgpack` writes it.
fn str_family(out: &mut Vec<u8>, b: &[u8]) {
    match b.len() {
        n if n < 32 => out.push(0xa0 | n as u8),
        n if n <= 0xff => out.extend([0xd9, n as u8]),
        n if n <= 0xffff => out.extend([0xda, (n >> 8) as u8, n as u8]),
        n => {
            out.push(0xdb);
            out.extend((n as u32).to_be_bytes());
        }
    }
    out.extend_from_slice(b);
}

/// A stored member with the expiry in the given MessagePack unsigned form.
fn raw_member(k: &StoreKey, value: &[u8], version: &str, expiry: &[u8]) -> Vec<u8> {
    let mut m = vec![0x01, 0x95];
    str_family(&mut m, k.as_bytes());
    str_family(&mut m, value);
    str_family(&mut m, version.as_bytes());
    m.extend_from_slice(expiry);
    m.push(0xc2);
    m
}

/// The script reads every length form a member may use: values at each str-family bound read
/// by a `Version` condition, and expiries in each unsigned form (the small ones long past, so
/// `Missing` holds; the uint64 one far ahead, so the `Version` holds).
#[tokio::test]
async fn conditions_read_every_length_form_of_a_member() {
    for t in targets().await {
        let prefix = fresh_prefix("write-forms");
        let store = t.store(&prefix).await;
        let k = key("forms");
        let rk = record_key(&prefix, k.as_bytes());
        let mut cases: Vec<(Vec<u8>, bool)> = Vec::new();
        for len in [0usize, 31, 32, 255, 256, 65_535, 65_536] {
            cases.push((raw_member(&k, &vec![b'v'; len], "7", &[0x00]), true));
        }
        for expiry in [
            &[0x05][..],
            &[0xcc, 0xc8],
            &[0xcd, 0xea, 0x60],
            &[0xce, 0xee, 0x6b, 0x28, 0x00],
        ] {
            cases.push((raw_member(&k, b"v", "7", expiry), false));
        }
        // uint64 expiries a minute past and a minute ahead (Redis runs on this host's clock),
        // and 2^52 ms, far ahead.
        let now = zlink_store_spi::StoreTime::host_now().as_millis();
        for (at, live) in [(now - 60_000, false), (now + 60_000, true), (1 << 52, true)] {
            let mut expiry = vec![0xcf];
            expiry.extend(at.to_be_bytes());
            cases.push((raw_member(&k, b"v", "7", &expiry), live));
        }
        for (n, (member, live)) in cases.into_iter().enumerate() {
            t.raw.del(&rk).await;
            t.raw
                .cmd(
                    "ZADD",
                    vec![rk.as_str().into(), 7.into(), Value::Bytes(member.into())],
                )
                .await;
            let condition = if live {
                Condition::Version(k.clone(), StoreVersion::new("7").unwrap())
            } else {
                Condition::Missing(k.clone())
            };
            let r = store
                .write(
                    &WriteRequest::new(vec![condition], vec![Mutation::put(k.clone(), "next")])
                        .unwrap(),
                )
                .await;
            assert!(
                matches!(r, Ok(WriteResult::Applied { .. })),
                "{}: case {n}: {r:?}",
                t.name
            );
        }
        t.raw.purge(&prefix).await;
    }
}

// ---- The property: random batches against a model. ----

const KEYS: usize = 4;

#[derive(Debug, Clone, Copy)]
enum Cond {
    None,
    Missing,
    Current,
    Stale,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Durable,
    Expiring,
    Delete,
}

#[derive(Debug, Clone)]
enum Step {
    /// A batch of (key index, mutation kind, condition) on distinct keys.
    Batch(Vec<(usize, Kind, Cond)>),
    /// Opens a snapshot (first page of a scan of everything, limit 1).
    Snapshot,
}

fn step() -> impl Strategy<Value = Step> {
    let cond = prop_oneof![
        Just(Cond::None),
        Just(Cond::Missing),
        Just(Cond::Current),
        Just(Cond::Stale)
    ];
    let kind = prop_oneof![
        3 => Just(Kind::Durable),
        1 => Just(Kind::Expiring),
        2 => Just(Kind::Delete)
    ];
    prop_oneof![
        8 => prop::collection::vec((0..KEYS, kind, cond), 1..4).prop_map(|mut ops| {
            let mut seen = [false; KEYS];
            ops.retain(|(k, _, _)| !std::mem::replace(&mut seen[*k], true));
            Step::Batch(ops)
        }),
        1 => Just(Step::Snapshot),
    ]
}

/// What the model holds for one key: value, version, durable.
type Model = BTreeMap<usize, (Vec<u8>, StoreVersion, bool)>;

fn model_key(i: usize) -> StoreKey {
    key(&format!("k{i}"))
}

/// Every item of a scan from `cursor` on.
async fn drain(store: &RedisLocationStore, mut cursor: ScanCursor) -> Vec<(StoreKey, Vec<u8>)> {
    let mut items = Vec::new();
    loop {
        let req = ScanRequest::next(ScanPrefix::all(), PageLimit::new(1).unwrap(), cursor);
        match store.scan(&req).await.unwrap() {
            ScanResult::Page(p) => {
                items.extend(p.items.into_iter().map(|i| (i.key, i.bytes.to_vec())));
                match p.next_cursor {
                    Some(c) => cursor = c,
                    None => return items,
                }
            }
            ScanResult::Expired => panic!("snapshot expired"),
        }
    }
}

async fn run_steps(t: &Target, steps: &[Step]) {
    let prefix = fresh_prefix("write-model");
    let store = t.store(&prefix).await;
    let mut model: Model = BTreeMap::new();
    let mut stale: BTreeMap<usize, StoreVersion> = BTreeMap::new();
    // Open snapshots: the first item, the cursor, and the model when they were opened.
    let mut snapshots: Vec<(ScanCursor, Model)> = Vec::new();
    let long = Retention::from_millis(600_000).unwrap();
    for (n, step) in steps.iter().enumerate() {
        let ops = match step {
            Step::Snapshot => {
                if model.len() >= 2 {
                    let cursor = open_snapshot(&store).await.expect("more pages");
                    snapshots.push((cursor, model.clone()));
                }
                continue;
            }
            Step::Batch(ops) => ops,
        };
        let mut conditions = Vec::new();
        let mut mutations = Vec::new();
        let mut holds = true;
        for &(i, kind, cond) in ops {
            let k = model_key(i);
            let current = model.get(&i).map(|(_, v, _)| v.clone());
            match cond {
                Cond::None => {}
                Cond::Missing => {
                    holds &= current.is_none();
                    conditions.push(Condition::Missing(k.clone()));
                }
                Cond::Current => match current {
                    Some(v) => conditions.push(Condition::Version(k.clone(), v)),
                    None => conditions.push(Condition::Missing(k.clone())),
                },
                Cond::Stale => {
                    let v = stale
                        .get(&i)
                        .cloned()
                        .unwrap_or_else(|| StoreVersion::new("0").unwrap());
                    holds &= current.as_ref() == Some(&v);
                    conditions.push(Condition::Version(k.clone(), v));
                }
            }
            let value = format!("v{n}-{i}").into_bytes();
            mutations.push(match kind {
                Kind::Durable => Mutation::put(k, value),
                Kind::Expiring => Mutation::put_expiring(k, value, long),
                Kind::Delete => Mutation::Delete(k),
            });
        }
        let before = if holds {
            None
        } else {
            Some(t.raw.state(&prefix).await)
        };
        let r = write(&store, conditions, mutations).await;
        assert_eq!(r.is_applied(), holds, "{}: step {n} {step:?}", t.name);
        match (r, before) {
            (WriteResult::Applied { put_versions, .. }, _) => {
                let version = put_versions.first().cloned();
                for &(i, kind, _) in ops {
                    if let Some(old) = model.remove(&i) {
                        stale.insert(i, old.1);
                    }
                    if let (Some(v), false) = (&version, matches!(kind, Kind::Delete)) {
                        let value = format!("v{n}-{i}").into_bytes();
                        model.insert(i, (value, v.clone(), matches!(kind, Kind::Durable)));
                    }
                }
            }
            (_, Some(before)) => {
                assert_eq!(
                    t.raw.state(&prefix).await,
                    before,
                    "{}: a conflict wrote",
                    t.name
                )
            }
            (other, None) => panic!("{other:?}"),
        }
    }
    // Every key reads as the model says; a record key that exists has its index member and
    // keeps at most its newest member and one per live snapshot; a durable value has no Redis
    // TTL and an expiring one has one.
    for i in 0..KEYS {
        let k = model_key(i);
        let read = store.read(&k).await.unwrap();
        match (model.get(&i), &read) {
            (None, ReadResult::Missing { .. }) => {}
            (Some((value, v, durable)), ReadResult::Found { bytes, version, .. }) => {
                assert_eq!((bytes.as_ref(), version), (value.as_slice(), v));
                let ttl = pttl(t, &prefix, &k).await;
                assert_eq!(ttl == -1, *durable, "{}: key {i} TTL {ttl}", t.name);
            }
            (want, got) => panic!("{}: key {i}: model {want:?}, store {got:?}", t.name),
        }
        let rk = record_key(&prefix, k.as_bytes());
        let members = t.raw.int("ZCARD", vec![rk.as_str().into()]).await;
        assert!(
            members <= 1 + snapshots.len() as i64,
            "{}: key {i} keeps {members} members with {} snapshots",
            t.name,
            snapshots.len()
        );
        if t.raw.int("EXISTS", vec![rk.as_str().into()]).await == 1 {
            let score = t
                .raw
                .cmd(
                    "ZSCORE",
                    vec![index_key(&prefix).into(), index_member(&k).into()],
                )
                .await;
            assert!(
                !matches!(score, Value::Null),
                "{}: key {i} exists without its index member",
                t.name
            );
        }
    }
    // Every snapshot reads the model of when it was opened.
    for (cursor, at) in snapshots {
        let mut items = drain(&store, cursor).await;
        // The first page's item is not in the drained rest: compare what follows it.
        items.sort();
        let mut want: Vec<(StoreKey, Vec<u8>)> = at
            .iter()
            .map(|(i, (value, _, _))| (model_key(*i), value.clone()))
            .collect();
        want.sort();
        // The first page held the smallest key.
        want.remove(0);
        assert_eq!(items, want, "{}: snapshot", t.name);
    }
    t.raw.purge(&prefix).await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random batches (durable and expiring puts, deletes; no, Missing, current or stale
    /// conditions) with snapshots opened between them apply exactly when the model says, a
    /// conflict writes nothing, every read agrees with the model, every record key has its
    /// index member, Redis TTLs follow the newest value's retention, and every snapshot reads
    /// the state of when it was opened.
    #[test]
    fn random_batches_agree_with_a_model(steps in prop::collection::vec(step(), 1..30)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            for t in targets().await {
                run_steps(&t, &steps).await;
            }
        });
    }
}
