//! Spec 22 §9 / §10 "Official Redis Provider's Key/Byte Format": the golden fixture
//! `fixtures/golden/store-record-v1.json` consumed as-is — key derivation, the exact member bytes
//! the scripts store (str family, raw bytes, decimal version, unsigned expiry, boolean
//! tombstone), reading fixture members written by another implementation, and explicit per-key
//! errors for unknown tags and malformed members (the key is unreadable, never guessed at).
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{Target, fresh_prefix, hex, key, record_key, seq_key, targets, unhex};
use fred::types::Value;
use serde_json::Value as Json;
use zlink_store_spi::{
    Condition, LocationStore, Mutation, PageLimit, ReadResult, Retention, ScanPrefix, ScanRequest,
    ScanResult, StoreError, StoreKey, UnreadableKey, UnreadableKind, WriteRequest, WriteResult,
};

fn fixture() -> Json {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/golden/store-record-v1.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("fixture JSON")
}

/// The fixture writes NUL as the printable escape `\u0000`.
fn printable(s: &str) -> String {
    s.replace("\\u0000", "\u{0}")
}

struct Vector {
    name: String,
    key: StoreKey,
    value: Vec<u8>,
    version: String,
    expires_at_ms: u64,
    tombstone: bool,
    member_hex: String,
    full_hex: String,
}

fn vectors() -> Vec<Vector> {
    let f = fixture();
    f["valueVectors"]["genericOpaqueRecord"]
        .as_array()
        .expect("vectors")
        .iter()
        .map(|v| Vector {
            name: v["name"].as_str().expect("name").to_owned(),
            key: key(&printable(v["originalKey"].as_str().expect("originalKey"))),
            value: unhex(v["jsonBytesHex"].as_str().expect("jsonBytesHex")),
            version: v["version"].as_str().expect("version").to_owned(),
            expires_at_ms: v["expiresAtMs"]
                .as_str()
                .expect("expiresAtMs")
                .parse()
                .expect("ms"),
            tombstone: v["tombstone"].as_bool().expect("tombstone"),
            member_hex: v["cmsgpackMemberHex"].as_str().expect("member").to_owned(),
            full_hex: v["fullValueHex"].as_str().expect("full").to_owned(),
        })
        .collect()
}

/// The member layout of spec 22 §9, written out independently of the provider (whose members
/// are built by Lua cmsgpack inside Redis).
fn str_family(out: &mut Vec<u8>, b: &[u8]) {
    let n = b.len();
    if n < 32 {
        out.push(0xa0 | n as u8);
    } else if n <= 0xff {
        out.extend([0xd9, n as u8]);
    } else if n <= 0xffff {
        out.push(0xda);
        out.extend((n as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend((n as u32).to_be_bytes());
    }
    out.extend_from_slice(b);
}

fn uint_family(out: &mut Vec<u8>, n: u64) {
    if n < 0x80 {
        out.push(n as u8);
    } else if n <= 0xff {
        out.extend([0xcc, n as u8]);
    } else if n <= 0xffff {
        out.push(0xcd);
        out.extend((n as u16).to_be_bytes());
    } else if n <= 0xffff_ffff {
        out.push(0xce);
        out.extend((n as u32).to_be_bytes());
    } else {
        out.push(0xcf);
        out.extend(n.to_be_bytes());
    }
}

fn member(key: &[u8], raw: &[u8], version: &str, expires_at_ms: u64, tombstone: bool) -> Vec<u8> {
    let mut out = vec![0x01, 0x95];
    str_family(&mut out, key);
    str_family(&mut out, raw);
    str_family(&mut out, version.as_bytes());
    uint_family(&mut out, expires_at_ms);
    out.push(if tombstone { 0xc3 } else { 0xc2 });
    out
}

#[test]
fn reference_layout_reproduces_every_fixture_member() {
    let vs = vectors();
    assert_eq!(vs.len(), 7);
    for v in &vs {
        let m = member(
            v.key.as_bytes(),
            &v.value,
            &v.version,
            v.expires_at_ms,
            v.tombstone,
        );
        assert_eq!(hex(&m), v.full_hex, "{}", v.name);
        assert_eq!(hex(&m[1..]), v.member_hex, "{}", v.name);
    }
}

async fn members(t: &Target, prefix: &str, k: &StoreKey) -> Vec<(Vec<u8>, f64)> {
    t.raw.zset(&record_key(prefix, k.as_bytes())).await
}

fn put(k: &StoreKey, value: &[u8], retention: Option<Retention>) -> WriteRequest {
    let bytes = Bytes::copy_from_slice(value);
    let m = match retention {
        Some(r) => Mutation::put_expiring(k.clone(), bytes, r),
        None => Mutation::put(k.clone(), bytes),
    };
    WriteRequest::new(vec![Condition::Missing(k.clone())], vec![m]).expect("request")
}

fn applied(r: WriteResult) -> (String, u64) {
    match r {
        WriteResult::Applied {
            put_versions,
            store_now,
        } => (
            put_versions
                .first()
                .map(|v| v.to_string())
                .unwrap_or_default(),
            store_now.as_millis(),
        ),
        WriteResult::Conflict { .. } => panic!("unexpected Conflict"),
    }
}

/// Every fixture value vector written through the provider is stored as exactly the fixture's
/// member bytes, with the provider-issued version (and, for the expiring vector, the provider's
/// expiry) in place of the fixture's.
#[tokio::test]
async fn stored_members_match_the_fixture_bytes() {
    for t in targets().await {
        let base = fresh_prefix("golden-bytes");
        for (i, v) in vectors().iter().enumerate() {
            let prefix = format!("{base}-{i}");
            let store = t.store(&prefix).await;
            let want = if v.tombstone {
                // A delete keeps a tombstone member while a snapshot may need the old value.
                let other = key("~other");
                store.write(&put(&other, b"x", None)).await.expect("other");
                store
                    .write(&put(&v.key, b"before", None))
                    .await
                    .expect("before");
                let first = ScanRequest::first(ScanPrefix::all(), PageLimit::new(1).expect("1"));
                let ScanResult::Page(page) = store.scan(&first).await.expect("scan") else {
                    panic!("first page Expired");
                };
                assert!(page.next_cursor.is_some(), "the snapshot must stay live");
                let del = WriteRequest::new(vec![], vec![Mutation::Delete(v.key.clone())])
                    .expect("delete");
                store.write(&del).await.expect("delete");
                let ms = members(&t, &prefix, &v.key).await;
                let (newest, score) = ms.last().cloned().expect("tombstone member");
                let version = format!("{}", score as u64);
                assert_eq!(
                    newest,
                    member(v.key.as_bytes(), b"", &version, 0, true),
                    "{}",
                    v.name
                );
                assert!(
                    store.read(&v.key).await.expect("read").is_missing(),
                    "tombstone reads absent"
                );
                newest
            } else if v.expires_at_ms != 0 {
                let retention = Retention::from_millis(1).expect("1 ms");
                let (version, now) = applied(
                    store
                        .write(&put(&v.key, &v.value, Some(retention)))
                        .await
                        .expect("put"),
                );
                let expected = member(v.key.as_bytes(), &v.value, &version, now + 1, false);
                tokio::time::sleep(Duration::from_millis(5)).await;
                assert!(
                    store.read(&v.key).await.expect("read").is_missing(),
                    "expired reads absent"
                );
                expected
            } else {
                let (version, _) = applied(
                    store
                        .write(&put(&v.key, &v.value, None))
                        .await
                        .expect("put"),
                );
                match store.read(&v.key).await.expect("read") {
                    ReadResult::Found {
                        bytes,
                        version: got,
                        expires_at,
                        ..
                    } => {
                        assert_eq!(bytes.as_ref(), v.value.as_slice());
                        assert_eq!(got.as_str(), version);
                        assert_eq!(expires_at, None);
                    }
                    other => panic!("{}: {other:?}", v.name),
                }
                member(v.key.as_bytes(), &v.value, &version, 0, false)
            };
            // `member` reproduces the fixture's bytes exactly (see
            // `reference_layout_reproduces_every_fixture_member`); here it carries the
            // provider-issued version and expiry in place of the fixture's.
            let stored = members(&t, &prefix, &v.key).await;
            let newest = stored
                .last()
                .map(|(m, _)| m.clone())
                .expect("stored member");
            assert_eq!(hex(&newest), hex(&want), "{} on {}", v.name, t.name);
        }
        for i in 0..vectors().len() {
            t.raw.purge(&format!("{base}-{i}")).await;
        }
    }
}

/// The key-derivation vectors (preimage → SHA-256 → full key) and the counter logical keys
/// name the Redis keys the provider writes, with the fixture's example prefix replaced.
#[tokio::test]
async fn key_derivation_vectors_name_the_stored_keys() {
    let f = fixture();
    let example = f["prefixExample"]
        .as_str()
        .expect("prefixExample")
        .to_owned();
    let mut cases: Vec<(Vec<u8>, String)> = f["keyDerivation"]
        .as_array()
        .expect("keyDerivation")
        .iter()
        .map(|v| {
            let preimage = unhex(v["preimageHex"].as_str().expect("preimageHex"));
            let redis_key = v["redisKey"].as_str().expect("redisKey").to_owned();
            assert_eq!(
                redis_key,
                format!(
                    "{example}:{{zlink-location-v3}}:opaque:{}",
                    v["sha256Hex"].as_str().expect("sha")
                )
            );
            assert_eq!(record_key(&example, &preimage), redis_key);
            (preimage, redis_key)
        })
        .collect();
    for c in f["counterVectors"]["vectors"].as_array().expect("counters") {
        let logical = c["logicalKey"].as_str().expect("logicalKey");
        cases.push((
            logical.as_bytes().to_vec(),
            record_key(&example, logical.as_bytes()),
        ));
    }
    for t in targets().await {
        let prefix = fresh_prefix("golden-keys");
        let store = t.store(&prefix).await;
        for (preimage, redis_key) in &cases {
            let k = StoreKey::from_utf8(preimage).expect("preimage is a key");
            store.write(&put(&k, b"6", None)).await.expect("put");
            let physical = redis_key.replacen(&format!("{example}:"), &format!("{prefix}:"), 1);
            assert_eq!(
                t.raw
                    .cmd("TYPE", vec![physical.as_str().into()])
                    .await
                    .as_string()
                    .as_deref(),
                Some("zset"),
                "{physical} on {}",
                t.name
            );
        }
        t.raw.purge(&prefix).await;
    }
}

/// Members another implementation wrote (the fixture's full value bytes, placed with a plain
/// `ZADD`) read back through the provider: values with their version, the tombstone and the
/// expired variant as absent.
#[tokio::test]
async fn fixture_members_read_back_through_the_provider() {
    for t in targets().await {
        let prefix = fresh_prefix("golden-read");
        let store = t.store(&prefix).await;
        for v in vectors() {
            let rk = record_key(&prefix, v.key.as_bytes());
            t.raw.cmd("DEL", vec![rk.as_str().into()]).await;
            let score: i64 = v.version.parse().expect("version");
            t.raw
                .cmd(
                    "ZADD",
                    vec![
                        rk.as_str().into(),
                        score.into(),
                        Value::Bytes(unhex(&v.full_hex).into()),
                    ],
                )
                .await;
            let r = store.read(&v.key).await.expect("read");
            if v.tombstone || v.expires_at_ms != 0 {
                assert!(r.is_missing(), "{}: {r:?}", v.name);
            } else {
                match r {
                    ReadResult::Found {
                        bytes,
                        version,
                        expires_at,
                        ..
                    } => {
                        assert_eq!(bytes.as_ref(), v.value.as_slice(), "{}", v.name);
                        assert_eq!(version.as_str(), v.version, "{}", v.name);
                        assert_eq!(expires_at, None);
                    }
                    other => panic!("{}: {other:?}", v.name),
                }
                // And a version condition on the fixture's version holds.
                let cas = WriteRequest::new(
                    vec![Condition::Version(v.key.clone(), version_of(&v.version))],
                    vec![Mutation::put(v.key.clone(), "next")],
                )
                .expect("cas");
                assert!(
                    store.write(&cas).await.expect("cas").is_applied(),
                    "{}",
                    v.name
                );
            }
        }
        t.raw.purge(&prefix).await;
    }
}

fn version_of(s: &str) -> zlink_store_spi::StoreVersion {
    zlink_store_spi::StoreVersion::new(s).expect("version")
}

/// `r` is the typed per-key error naming `k` as unreadable for `kind`.
fn assert_unreadable(
    r: Result<impl std::fmt::Debug, StoreError>,
    k: &StoreKey,
    kind: UnreadableKind,
    what: &str,
) {
    match r {
        Err(StoreError::Unreadable(u)) if u == UnreadableKey::new(k.clone(), kind) => {}
        other => panic!("{what}: expected {k:?} unreadable ({kind:?}), got {other:?}"),
    }
}

/// A scan of the whole store lists `k` as unreadable for `kind`, and no item of it.
async fn assert_scanned_unreadable(
    store: &impl LocationStore,
    k: &StoreKey,
    kind: UnreadableKind,
    what: &str,
) {
    let scan = ScanRequest::first(ScanPrefix::all(), PageLimit::LARGEST);
    match store.scan(&scan).await {
        Ok(ScanResult::Page(p)) => {
            assert_eq!(
                p.unreadable,
                vec![UnreadableKey::new(k.clone(), kind)],
                "{what}"
            );
            assert!(p.items.iter().all(|i| &i.key != k), "{what}");
        }
        other => panic!("{what}: expected a page, got {other:?}"),
    }
}

/// Spec 22 §10: "An unrecognized format tag … fails explicitly": a read or a condition that
/// meets a member with another tag fails with the typed error naming that key, a batch whose
/// condition meets one changes nothing (no mutation, no sequence), and a scan lists the key as
/// unreadable.
#[tokio::test]
async fn unknown_format_tag_fails_explicitly() {
    for t in targets().await {
        let prefix = fresh_prefix("golden-tag");
        let store = t.store(&prefix).await;
        let k = key("owner-lease\u{0}owner-a");
        let other = key("other");
        store.write(&put(&k, b"v", None)).await.expect("put");
        let rk = record_key(&prefix, k.as_bytes());
        for tag in [0x00u8, 0x02, 0xff] {
            let mut m = member(k.as_bytes(), b"v", "99", 0, false);
            m[0] = tag;
            t.raw.cmd("DEL", vec![rk.as_str().into()]).await;
            // Scored at the sequence of the one put, so a scan snapshot includes it.
            t.raw
                .cmd(
                    "ZADD",
                    vec![rk.as_str().into(), 1.into(), Value::Bytes(m.into())],
                )
                .await;
            assert_unreadable(store.read(&k).await, &k, UnreadableKind::Corrupt, "read");
            let seq_before = t
                .raw
                .cmd("GET", vec![seq_key(&prefix).as_str().into()])
                .await;
            let req = WriteRequest::new(
                vec![Condition::Missing(k.clone())],
                vec![Mutation::put(other.clone(), "x")],
            )
            .expect("req");
            assert_unreadable(
                store.write(&req).await,
                &k,
                UnreadableKind::Corrupt,
                "condition",
            );
            assert!(
                store.read(&other).await.expect("read").is_missing(),
                "nothing applied"
            );
            let seq_after = t
                .raw
                .cmd("GET", vec![seq_key(&prefix).as_str().into()])
                .await;
            assert_eq!(seq_before, seq_after, "no sequence issued");
            assert_scanned_unreadable(&store, &k, UnreadableKind::Corrupt, "scan").await;
        }
        t.raw.purge(&prefix).await;
    }
}

/// A malformed member (truncated, trailing bytes, a `bin` string, a map, a signed expiry, a
/// member naming another key) or a record key holding another Redis type makes that key
/// unreadable (`Corrupt` / `ForeignType`), never a guess.
#[tokio::test]
async fn malformed_member_fails_explicitly() {
    for t in targets().await {
        let prefix = fresh_prefix("golden-malformed");
        let store = t.store(&prefix).await;
        let k = key("authority\u{0}actor\u{0}user:42");
        store.write(&put(&k, b"v", None)).await.expect("put");
        let rk = record_key(&prefix, k.as_bytes());
        let good = member(k.as_bytes(), b"v", "7", 0, false);
        let mut bin = vec![0x01, 0x95];
        str_family(&mut bin, k.as_bytes());
        bin.extend([0xc4, 0x01, b'v', 0xa1, b'7', 0x00, 0xc2]);
        let mut map = vec![0x01, 0x85];
        for (i, f) in [k.as_bytes(), b"v", b"7"].iter().enumerate() {
            map.push(i as u8 + 1);
            str_family(&mut map, f);
        }
        map.extend([4, 0x00, 5, 0xc2]);
        let mut signed = good.clone();
        let at = signed.len() - 2;
        signed[at] = 0xff; // negative fixint -1 as the expiry
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("empty", vec![]),
            ("tag only", vec![0x01]),
            ("truncated", good[..good.len() - 3].to_vec()),
            ("trailing", [good.clone(), vec![0xc0]].concat()),
            ("bin", bin),
            ("map", map),
            ("signed expiry", signed),
            ("other key", member(b"someone-else", b"v", "7", 0, false)),
        ];
        // A record key holding another Redis type altogether.
        t.raw.cmd("DEL", vec![rk.as_str().into()]).await;
        t.raw
            .cmd("SET", vec![rk.as_str().into(), "a string".into()])
            .await;
        let what = "string under the record key";
        let foreign = UnreadableKind::ForeignType;
        assert_unreadable(store.read(&k).await, &k, foreign, what);
        assert_scanned_unreadable(&store, &k, foreign, what).await;
        let cas = WriteRequest::new(
            vec![Condition::Version(k.clone(), version_of("7"))],
            vec![Mutation::put(key("other"), "x")],
        )
        .expect("cas");
        assert_unreadable(store.write(&cas).await, &k, foreign, what);
        // A put to it is refused before anything is written, naming the key.
        let blind = WriteRequest::new(
            vec![],
            vec![
                Mutation::put(key("other"), "x"),
                Mutation::put(k.clone(), "x"),
            ],
        )
        .expect("put");
        assert_unreadable(store.write(&blind).await, &k, foreign, what);
        assert!(store.read(&key("other")).await.expect("read").is_missing());
        for (name, m) in cases {
            t.raw.cmd("DEL", vec![rk.as_str().into()]).await;
            t.raw
                .cmd(
                    "ZADD",
                    vec![rk.as_str().into(), 1.into(), Value::Bytes(m.into())],
                )
                .await;
            let corrupt = UnreadableKind::Corrupt;
            assert_unreadable(store.read(&k).await, &k, corrupt, name);
            assert_scanned_unreadable(&store, &k, corrupt, name).await;
            // The write script does not compare a member's key with the record key's (only
            // reads and scans do), so a member naming another key is not a condition error.
            if name != "other key" {
                let cas = WriteRequest::new(
                    vec![Condition::Version(k.clone(), version_of("7"))],
                    vec![Mutation::put(k.clone(), "x")],
                )
                .expect("cas");
                assert_unreadable(store.write(&cas).await, &k, corrupt, name);
            }
        }
        t.raw.purge(&prefix).await;
    }
}
