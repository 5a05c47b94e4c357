//! A corpus of deliberately broken records, written raw with fred under a fresh prefix: each
//! key is reported with its reason (field, expected, found), the rest of the store is not,
//! nothing crashes, and the binary exits 1. On the single node and on the Cluster.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use bytes::Bytes;
use fred::interfaces::ClientLike;
use fred::types::Value;
use sha2::{Digest, Sha256};
use support::{Backend, Prefix, cmd, zlink};
use zlink_cli::audit::{HASHTAG, audit};
use zlink_cli::member::encode_member;
use zlink_cli::redis::Raw;

fn sha(b: &[u8]) -> String {
    zlink_codec::lower_hex(&Sha256::digest(b))
}

fn b(v: &[u8]) -> Value {
    Value::Bytes(Bytes::copy_from_slice(v))
}

/// `(logical key or None, Redis key suffix override, what to write, expected field)`.
enum Write {
    /// A record ZSET with one member at this score.
    Member(Vec<u8>, u64),
    /// A plain string at the record key.
    String(&'static [u8]),
    /// A hash at the record key.
    Hash,
}

async fn broken_records_are_each_reported(backend: Backend, test: &str) {
    let prefix = Prefix::new(&backend, test);
    let p = prefix.name.clone();
    let client = backend.client().await;
    let ns = format!("{p}:{HASHTAG}:");
    let seq = format!("{ns}seq");
    let index = format!("{ns}index");
    cmd(&client, "SET", seq.as_bytes(), vec![b(b"100")]).await;

    // Logical key, what is stored at its record key, the field the audit must name and a
    // word its reason must carry.
    let corpus: Vec<(&[u8], Write, &str, &str)> = vec![
        (
            b"authority\0actor\0wrong-type",
            Write::String(b"not a zset"),
            "type",
            "zset",
        ),
        (b"authority\0actor\0a-hash", Write::Hash, "type", "hash"),
        (
            b"zlink:v11:object-counter",
            Write::Member(
                encode_member(b"zlink:v11:object-counter", b"2", 5, 0, false)[..12].to_vec(),
                5,
            ),
            "member[0].originalKey",
            "truncated",
        ),
        (
            b"zlink:v11:owner-counter",
            Write::Member(
                [
                    &[0x07u8][..],
                    &encode_member(b"zlink:v11:owner-counter", b"2", 6, 0, false)[1..],
                ]
                .concat(),
                6,
            ),
            "member[0].tag",
            "unknown version tag 0x07",
        ),
        (
            b"zlink:v11:authority-owner-counter",
            Write::Member(
                encode_member(b"zlink:v11:authority-owner-counter", b"007", 7, 0, false),
                7,
            ),
            "member[0].rawBytes.value",
            "canonical decimal",
        ),
        (
            b"owner-lease\0o",
            Write::Member(
                encode_member(
                    b"owner-lease\0o",
                    br#"{"recordVersion":2,"ownerId":"o","leaseGeneration":"1"}"#,
                    8,
                    4_000_000_000_000,
                    false,
                ),
                8,
            ),
            "member[0].rawBytes.recordVersion",
            "unknown version tag 2",
        ),
        (
            b"owner-lease\0p",
            Write::Member(
                encode_member(
                    b"owner-lease\0p",
                    b"{\"recordVersion\":1,\"ownerId\":\"p\xff\",\"leaseGeneration\":\"1\"}",
                    9,
                    4_000_000_000_000,
                    false,
                ),
                9,
            ),
            "member[0].rawBytes.bytes",
            "UTF-8",
        ),
        (
            b"owner-lease\0q",
            Write::Member(
                encode_member(
                    b"owner-lease\0q",
                    br#"{"recordVersion":1,"ownerId":"q","leaseGeneration":"1"}"#,
                    10,
                    0,
                    false,
                ),
                10,
            ),
            "expiresAtMs",
            "expiry",
        ),
        (
            b"location-index\0actor\0counter\0x",
            Write::Member(
                encode_member(
                    b"location-index\0actor\0counter\0x",
                    br#"{"recordVersion":1,"objectGeneration":"01"}"#,
                    11,
                    0,
                    false,
                ),
                11,
            ),
            "member[0].rawBytes.objectGeneration",
            "canonical decimal",
        ),
        (
            b"mesh-change\0m",
            Write::Member(encode_member(b"mesh-change\0m", b"3", 12, 0, false), 13),
            "member[0].version",
            "score",
        ),
        (
            b"authority\0actor\0elsewhere",
            // A member naming another key than the one its record key hashes.
            Write::Member(
                encode_member(b"authority\0actor\0other", b"x", 14, 0, false),
                14,
            ),
            "member[0].originalKey",
            "sha256hex",
        ),
        (
            b"node-capacity\0m\0zz",
            Write::Member(
                encode_member(
                    b"node-capacity\0m\0zz",
                    br#"{"recordVersion":1,"actors":0,"spots":0,"spotTypes":[]}"#,
                    15,
                    0,
                    false,
                ),
                15,
            ),
            "originalKey.key[2]",
            "hex",
        ),
    ];
    // Every logical key gets its index entry, so each key's own departure is what is found.
    for (logical, write, _, _) in &corpus {
        let h = sha(logical);
        let record = format!("{ns}opaque:{h}");
        let entry = format!("{}.{h}", zlink_codec::lower_hex(logical));
        cmd(
            &client,
            "ZADD",
            index.as_bytes(),
            vec![Value::from(0), b(entry.as_bytes())],
        )
        .await;
        match write {
            Write::Member(m, score) => {
                cmd(
                    &client,
                    "ZADD",
                    record.as_bytes(),
                    vec![Value::from(*score as i64), b(m)],
                )
                .await;
                // A record whose newest member expires carries a Redis TTL, as the provider
                // writes it.
                if zlink_cli::member::decode_member(m).is_ok_and(|d| d.expires_at_ms != 0) {
                    cmd(
                        &client,
                        "PEXPIRE",
                        record.as_bytes(),
                        vec![Value::from(600_000)],
                    )
                    .await;
                }
            }
            Write::String(s) => {
                cmd(&client, "SET", record.as_bytes(), vec![b(s)]).await;
            }
            Write::Hash => {
                cmd(&client, "HSET", record.as_bytes(), vec![b(b"f"), b(b"v")]).await;
            }
        }
    }
    // One conforming lease beside them (with its expiry and TTL), and a foreign key.
    let good = b"owner-lease\0good";
    let gh = sha(good);
    let good_value = br#"{"recordVersion":1,"ownerId":"good","leaseGeneration":"1"}"#;
    cmd(
        &client,
        "ZADD",
        index.as_bytes(),
        vec![
            Value::from(0),
            b(format!("{}.{gh}", zlink_codec::lower_hex(good)).as_bytes()),
        ],
    )
    .await;
    let rk = format!("{ns}opaque:{gh}");
    cmd(
        &client,
        "ZADD",
        rk.as_bytes(),
        vec![
            Value::from(20),
            b(&encode_member(
                good,
                good_value,
                20,
                4_000_000_000_000,
                false,
            )),
        ],
    )
    .await;
    cmd(
        &client,
        "PEXPIRE",
        rk.as_bytes(),
        vec![Value::from(600_000)],
    )
    .await;
    let stray = format!("{p}:stray");
    cmd(&client, "SET", stray.as_bytes(), vec![b(b"?")]).await;
    let _ = client.quit().await;

    let raw = Raw::connect(&backend.target, Duration::from_secs(5))
        .await
        .expect("raw");
    let keys = raw.read_prefix(&p).await.expect("read");
    raw.quit().await;
    let report = audit(&p, &keys);
    let mut expected: Vec<(String, &str, &str)> = corpus
        .iter()
        .map(|(l, _, field, word)| (format!("{ns}opaque:{}", sha(l)), *field, *word))
        .collect();
    expected.push((stray.clone(), "key", "foreign"));
    assert_eq!(
        report.findings.len(),
        expected.len(),
        "{}: {:#?}",
        backend.name,
        report.findings
    );
    for (key, field, word) in &expected {
        let f = report
            .findings
            .iter()
            .find(|f| &f.key == key)
            .unwrap_or_else(|| panic!("{key} not reported: {:#?}", report.findings));
        assert_eq!(f.mismatch.field, *field, "{f}");
        let text = f.to_string();
        assert!(text.contains(word), "{word:?} not in {text}");
    }
    assert_eq!(
        report.census.families.get("owner-lease"),
        Some(&1),
        "{:?}",
        report.census
    );
    assert_eq!(report.census.nonconforming, expected.len());

    // The binary reports every key with its reason and exits 1.
    let out = zlink(&backend, &p, &["audit"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.starts_with("NONCONFORMING "))
            .count(),
        expected.len(),
        "{stdout}"
    );
    let out = zlink(&backend, &p, &["--json", "audit"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["clean"], false);
    assert_eq!(v["findings"].as_array().map(Vec::len), Some(expected.len()));
    // decode names the broken value too, and the good one decodes clean.
    let out = zlink(
        &backend,
        &p,
        &["decode", "zlink:v11:authority-owner-counter"],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = zlink(&backend, &p, &["decode", "owner-lease\\0good"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("leaseGeneration"));

    let name = prefix.name.clone();
    drop(prefix);
    assert_eq!(
        support::keys_left(&backend, &name).await,
        0,
        "the prefix is purged"
    );
}

#[tokio::test]
async fn broken_records_on_redis_are_each_reported_with_their_reason() {
    let test = "broken_redis";
    let Some(backend) = support::single(test) else {
        return;
    };
    broken_records_are_each_reported(backend, test).await;
}

#[tokio::test]
async fn broken_records_on_the_cluster_are_each_reported_with_their_reason() {
    let test = "broken_cluster";
    let Some(backend) = support::cluster(test) else {
        return;
    };
    broken_records_are_each_reported(backend, test).await;
}
