//! The audit of every Redis key under one Location Store prefix against the provider's layout
//! (spec 22 §8–§9) and the runtime's record formats (spec 21 §3.4, `docs/formats.md`). Pure:
//! it judges [`RawKey`]s already read (see [`crate::redis`] for the reading) and returns every
//! nonconforming key with its reason, and a census.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use crate::family::{Family, classify};
use crate::finding::{Finding, Mismatch, show_bytes};
use crate::member::{Member, canonical_decimal, decode_member};
use crate::value::check_value;

/// The hashtag every key of the official provider carries.
pub const HASHTAG: &str = "{zlink-location-v3}";
/// The namespace of the official Redis Relocation Store, which may share the prefix.
pub const RELOCATION_NAMESPACE: &str = "{zlink-relocation-v1}";

/// One Redis key as read.
#[derive(Debug, Clone, PartialEq)]
pub struct RawKey {
    /// The key name.
    pub name: Vec<u8>,
    /// Its value.
    pub value: RawValue,
    /// Its Redis TTL in milliseconds (`PTTL`: -1 none, -2 gone).
    pub pttl_ms: i64,
}

/// A Redis value as read.
#[derive(Debug, Clone, PartialEq)]
pub enum RawValue {
    /// A string.
    String(Vec<u8>),
    /// A sorted set: members with their scores, in score order.
    ZSet(Vec<(Vec<u8>, f64)>),
    /// Another type (its `TYPE` name), not read further.
    Other(String),
    /// Gone between the scan and the read.
    Missing,
}

impl RawValue {
    fn type_name(&self) -> &str {
        match self {
            RawValue::String(_) => "string",
            RawValue::ZSet(_) => "zset",
            RawValue::Other(t) => t,
            RawValue::Missing => "none",
        }
    }
}

/// What a key under the prefix is meant to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// `…:opaque:{sha256hex(K)}`: the record of a logical key.
    Record(String),
    /// `…:seq`.
    Seq,
    /// `…:index`.
    Index,
    /// `…:snapshots`.
    Snapshots,
    /// `…:snapshot-seq`.
    SnapshotSeq,
    /// `{prefix}:{zlink-relocation-v1}:…`: a Relocation Store key sharing the prefix (counted,
    /// not audited).
    RelocationStore,
    /// Anything else under the prefix.
    Foreign,
}

impl Role {
    fn as_str(&self) -> &'static str {
        match self {
            Role::Record(_) => "record",
            Role::Seq => "seq",
            Role::Index => "index",
            Role::Snapshots => "snapshots",
            Role::SnapshotSeq => "snapshot-seq",
            Role::RelocationStore => "relocation-store",
            Role::Foreign => "foreign",
        }
    }
}

/// The role of Redis key `name` of the store under `prefix`.
pub fn role_of(prefix: &str, name: &[u8]) -> Role {
    let ns = format!("{prefix}:{HASHTAG}:");
    let Some(rest) = name.strip_prefix(ns.as_bytes()) else {
        if name.starts_with(format!("{prefix}:{RELOCATION_NAMESPACE}:").as_bytes()) {
            return Role::RelocationStore;
        }
        return Role::Foreign;
    };
    match rest {
        b"seq" => Role::Seq,
        b"index" => Role::Index,
        b"snapshots" => Role::Snapshots,
        b"snapshot-seq" => Role::SnapshotSeq,
        _ => match rest.strip_prefix(b"opaque:") {
            Some(sha) => Role::Record(String::from_utf8_lossy(sha).into_owned()),
            None => Role::Foreign,
        },
    }
}

/// Counts of what the audit read.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Census {
    /// Redis keys under the prefix.
    pub keys: usize,
    /// Record keys (`…:opaque:…`).
    pub records: usize,
    /// Live records by family (newest member neither a tombstone nor undecodable).
    pub families: BTreeMap<String, usize>,
    /// Records whose newest member is a tombstone.
    pub tombstones: usize,
    /// Older members kept for live snapshots.
    pub history_members: usize,
    /// Scan-index entries.
    pub index_entries: usize,
    /// Scan-index entries whose record key is gone (expired records; scans remove them).
    pub dangling_index_entries: usize,
    /// Relocation Store keys sharing the prefix (not audited).
    pub relocation_store_keys: usize,
    /// Keys under the prefix outside the provider's layout.
    pub foreign: usize,
    /// Keys with at least one finding.
    pub nonconforming: usize,
}

/// The audit's result.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Every nonconforming key, with its reason (one finding per key: the first departure).
    pub findings: Vec<Finding>,
    /// The census.
    pub census: Census,
}

impl Report {
    /// Whether every key conforms.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }
}

fn lower_hex(bytes: &[u8]) -> String {
    zlink_codec::lower_hex(bytes)
}

fn unhex(s: &[u8]) -> Option<Vec<u8>> {
    fn d(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    if s.len() % 2 != 0 {
        return None;
    }
    s.chunks_exact(2)
        .map(|p| Some(d(p[0])? << 4 | d(p[1])?))
        .collect()
}

fn is_sha(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn integral(score: f64) -> Option<u64> {
    (score >= 0.0 && score.fract() == 0.0 && score < 9.007_199_254_740_992e15)
        .then_some(score as u64)
}

/// Audits every key read under `prefix` (see the module docs).
pub fn audit(prefix: &str, keys: &[RawKey]) -> Report {
    let mut report = Report::default();
    report.census.keys = keys.len();
    let names: BTreeSet<&[u8]> = keys.iter().map(|k| k.name.as_slice()).collect();
    let mut seq: Option<u64> = None;
    let mut index: BTreeSet<Vec<u8>> = BTreeSet::new();
    // Helpers first: the sequence bounds every version, the index every record.
    for k in keys {
        let role = role_of(prefix, &k.name);
        let result = match role {
            Role::Seq | Role::SnapshotSeq => check_counter_string(k).map(|v| {
                if role == Role::Seq {
                    seq = Some(v);
                }
            }),
            Role::Index => check_index(prefix, k, &names, &mut index, &mut report.census),
            Role::Snapshots => check_snapshots(k),
            Role::Foreign => {
                report.census.foreign += 1;
                Err(Mismatch::new(
                    "key",
                    format!(
                        "a key of the provider's layout ({prefix}:{HASHTAG}:opaque:…, seq, index, snapshots, snapshot-seq)"
                    ),
                    format!("a foreign {} key", k.value.type_name()),
                ))
            }
            Role::RelocationStore => {
                report.census.relocation_store_keys += 1;
                continue;
            }
            Role::Record(_) => continue,
        };
        if let Err(m) = result {
            report.findings.push(Finding {
                key: show_bytes(&k.name),
                role: role.as_str().to_owned(),
                logical_key: None,
                mismatch: m,
            });
        }
    }
    for k in keys {
        let Role::Record(sha) = role_of(prefix, &k.name) else {
            continue;
        };
        report.census.records += 1;
        let mut logical = None;
        if let Err(m) = check_record(k, &sha, seq, &index, &mut logical, &mut report.census) {
            report.findings.push(Finding {
                key: show_bytes(&k.name),
                role: "record".to_owned(),
                logical_key: logical.map(|l: Vec<u8>| show_bytes(&l)),
                mismatch: m,
            });
        }
    }
    report.findings.sort_by(|a, b| a.key.cmp(&b.key));
    report.census.nonconforming = report.findings.len();
    report
}

fn check_counter_string(k: &RawKey) -> Result<u64, Mismatch> {
    match &k.value {
        RawValue::String(b) => canonical_decimal(b).ok_or_else(|| {
            Mismatch::new(
                "value",
                "canonical decimal in 1..=2^63-1",
                format!("\"{}\"", show_bytes(b)),
            )
        }),
        other => Err(Mismatch::new("type", "string", other.type_name())),
    }
}

fn check_index(
    prefix: &str,
    k: &RawKey,
    names: &BTreeSet<&[u8]>,
    index: &mut BTreeSet<Vec<u8>>,
    census: &mut Census,
) -> Result<(), Mismatch> {
    let RawValue::ZSet(members) = &k.value else {
        return Err(Mismatch::new("type", "zset", k.value.type_name()));
    };
    for (i, (m, score)) in members.iter().enumerate() {
        let field = format!("member[{i}] {:?}", show_bytes(m));
        if *score != 0.0 {
            return Err(Mismatch::new(field, "score 0", score.to_string()));
        }
        let dot = m
            .iter()
            .rposition(|&b| b == b'.')
            .ok_or_else(|| Mismatch::new(field.clone(), "hex(K) \".\" sha256hex(K)", "no `.`"))?;
        let (key_hex, sha) = (&m[..dot], &m[dot + 1..]);
        let key = unhex(key_hex).ok_or_else(|| {
            Mismatch::at(
                field.clone(),
                0,
                "lowercase hex of the logical key",
                format!("\"{}\"", show_bytes(key_hex)),
            )
        })?;
        if key.is_empty()
            || key.len() > crate::member::MAX_KEY_LEN
            || std::str::from_utf8(&key).is_err()
        {
            return Err(Mismatch::new(
                field,
                "a UTF-8 logical key of 1..=1024 bytes",
                format!("\"{}\"", show_bytes(&key)),
            ));
        }
        let want = lower_hex(&Sha256::digest(&key));
        if sha != want.as_bytes() {
            return Err(Mismatch::at(field, dot + 1, want, show_bytes(sha)));
        }
        let record = format!("{prefix}:{HASHTAG}:opaque:{want}");
        if !names.contains(record.as_bytes()) {
            census.dangling_index_entries += 1;
        }
        index.insert(key);
    }
    census.index_entries = members.len();
    Ok(())
}

fn check_snapshots(k: &RawKey) -> Result<(), Mismatch> {
    let RawValue::ZSet(members) = &k.value else {
        return Err(Mismatch::new("type", "zset", k.value.type_name()));
    };
    for (i, (m, score)) in members.iter().enumerate() {
        if integral(*score).is_none() {
            return Err(Mismatch::new(
                format!("member[{i}]"),
                "an integral expiry score",
                score.to_string(),
            ));
        }
        let text = std::str::from_utf8(m).unwrap_or("");
        let parts: Vec<&str> = text.split(':').collect();
        let ok = parts.len() == 5
            && parts[0].len() == 20
            && parts[..3]
                .iter()
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            && parts[3..]
                .iter()
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_hexdigit()));
        if !ok {
            return Err(Mismatch::new(
                format!("member[{i}]"),
                "{creation:020}:{boundary}:{takenAt}:{nonce hex}:{sha1 hex}",
                format!("\"{}\"", show_bytes(m)),
            ));
        }
    }
    Ok(())
}

fn check_record(
    k: &RawKey,
    sha: &str,
    seq: Option<u64>,
    index: &BTreeSet<Vec<u8>>,
    logical: &mut Option<Vec<u8>>,
    census: &mut Census,
) -> Result<(), Mismatch> {
    if !is_sha(sha) {
        return Err(Mismatch::new(
            "key",
            "opaque:{64 lowercase hex digits}",
            format!("opaque:{sha}"),
        ));
    }
    let RawValue::ZSet(members) = &k.value else {
        return Err(Mismatch::new("type", "zset", k.value.type_name()));
    };
    if members.is_empty() {
        return Err(Mismatch::new("members", "at least one member", "none"));
    }
    let mut decoded: Vec<Member> = Vec::with_capacity(members.len());
    for (i, (bytes, score)) in members.iter().enumerate() {
        let d = decode_member(bytes).map_err(|m| m.within(&format!("member[{i}]"), None))?;
        let field = format!("member[{i}].version");
        if integral(*score) != Some(d.version) {
            return Err(Mismatch::new(
                field,
                format!("the member's score ({score})"),
                d.version.to_string(),
            ));
        }
        if let Some(s) = seq {
            if d.version > s {
                return Err(Mismatch::new(
                    field,
                    format!("at most the sequence ({s})"),
                    d.version.to_string(),
                ));
            }
        }
        decoded.push(d);
    }
    let newest = decoded
        .last()
        .ok_or_else(|| Mismatch::new("members", "one", "none"))?;
    *logical = Some(newest.original_key.clone());
    for (i, d) in decoded.iter().enumerate() {
        let want = lower_hex(&Sha256::digest(&d.original_key));
        if want != sha {
            return Err(Mismatch::new(
                format!("member[{i}].originalKey"),
                format!("a key whose sha256hex is {sha}"),
                format!("\"{}\" (sha256hex {want})", show_bytes(&d.original_key)),
            ));
        }
    }
    if !index.contains(&newest.original_key) {
        return Err(Mismatch::new(
            "index",
            "an entry hex(K).sha256hex(K) in the scan index",
            "none",
        ));
    }
    census.history_members += decoded.len() - 1;
    let expires = newest.expires_at_ms != 0;
    if (expires || newest.tombstone) && k.pttl_ms < 0 {
        return Err(Mismatch::new(
            "ttl",
            "a Redis TTL (the newest member expires or is a tombstone)",
            "no TTL",
        ));
    }
    if newest.tombstone {
        census.tombstones += 1;
        return Ok(());
    }
    let family = classify(&newest.original_key).map_err(|m| m.within("originalKey", None))?;
    if let Some(rule) = family.expiry_rule() {
        if rule != expires {
            return Err(Mismatch::new(
                "expiresAtMs",
                if rule {
                    "an expiry (non-zero)"
                } else {
                    "0 (durable)"
                },
                newest.expires_at_ms.to_string(),
            ));
        }
    }
    // The offset of rawBytes' body in the member, so value offsets point into the member.
    let raw = newest.fields.iter().find(|f| f.name == "rawBytes");
    let body = raw.map(|f| f.offset + f.len - newest.raw_bytes.len());
    check_value(family, &newest.original_key, &newest.raw_bytes)
        .map_err(|m| m.within(&format!("member[{}].rawBytes", decoded.len() - 1), body))?;
    *census
        .families
        .entry(family.as_str().to_owned())
        .or_default() += 1;
    Ok(())
}

/// The families the census lists, in order.
pub fn families() -> impl Iterator<Item = &'static str> {
    Family::ALL.iter().map(|f| f.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::encode_member;

    const P: &str = "t";

    fn record(key: &[u8], value: &[u8], version: u64) -> RawKey {
        let sha = lower_hex(&Sha256::digest(key));
        RawKey {
            name: format!("{P}:{HASHTAG}:opaque:{sha}").into_bytes(),
            value: RawValue::ZSet(vec![(
                encode_member(key, value, version, 0, false),
                version as f64,
            )]),
            pttl_ms: -1,
        }
    }

    fn helpers(keys: &[&[u8]], seq: u64) -> Vec<RawKey> {
        let members = keys
            .iter()
            .map(|k| {
                let m = format!("{}.{}", lower_hex(k), lower_hex(&Sha256::digest(k)));
                (m.into_bytes(), 0.0)
            })
            .collect();
        vec![
            RawKey {
                name: format!("{P}:{HASHTAG}:seq").into_bytes(),
                value: RawValue::String(seq.to_string().into_bytes()),
                pttl_ms: -1,
            },
            RawKey {
                name: format!("{P}:{HASHTAG}:index").into_bytes(),
                value: RawValue::ZSet(members),
                pttl_ms: -1,
            },
        ]
    }

    const LEASE: &[u8] = b"owner-lease\0o";

    #[test]
    fn a_conforming_store_is_clean() {
        let mut keys = helpers(&[b"zlink:v11:owner-counter"], 3);
        keys.push(record(b"zlink:v11:owner-counter", b"2", 3));
        let r = audit(P, &keys);
        assert!(r.is_clean(), "{:?}", r.findings);
        assert_eq!(r.census.families.get("counter"), Some(&1));
    }

    #[test]
    fn each_departure_is_one_finding_with_its_field() {
        let cases: Vec<(RawKey, &str)> = vec![
            (
                record(b"zlink:v11:owner-counter", b"02", 3),
                "member[0].rawBytes.value",
            ),
            (
                record(b"zlink:v11:owner-counter", b"2", 9),
                "member[0].version",
            ),
            (
                record(
                    b"owner-lease\0o",
                    br#"{"recordVersion":1,"ownerId":"o","leaseGeneration":"1"}"#,
                    3,
                ),
                "expiresAtMs",
            ),
            (record(b"nobody\0x", b"1", 3), "originalKey.key"),
            (
                RawKey {
                    name: format!("{P}:{HASHTAG}:opaque:{}", "0".repeat(64)).into_bytes(),
                    value: RawValue::String(b"x".to_vec()),
                    pttl_ms: -1,
                },
                "type",
            ),
            (
                RawKey {
                    name: b"t:stray".to_vec(),
                    value: RawValue::String(b"x".to_vec()),
                    pttl_ms: -1,
                },
                "key",
            ),
        ];
        for (k, field) in cases {
            let mut keys = helpers(&[b"zlink:v11:owner-counter", LEASE, b"nobody\0x"], 3);
            keys.push(k.clone());
            let r = audit(P, &keys);
            assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
            assert_eq!(r.findings[0].mismatch.field, field, "{:?}", r.findings[0]);
        }
    }

    #[test]
    fn relocation_store_keys_sharing_the_prefix_are_counted_not_judged() {
        let mut keys = helpers(&[], 1);
        keys.push(RawKey {
            name: format!("{P}:{RELOCATION_NAMESPACE}:blob:x").into_bytes(),
            value: RawValue::String(b"blob".to_vec()),
            pttl_ms: -1,
        });
        let r = audit(P, &keys);
        assert!(r.is_clean(), "{:?}", r.findings);
        assert_eq!(r.census.relocation_store_keys, 1);
    }

    #[test]
    fn a_record_missing_from_the_index_is_reported() {
        let mut keys = helpers(&[], 3);
        keys.push(record(b"zlink:v11:owner-counter", b"2", 3));
        let r = audit(P, &keys);
        assert_eq!(r.findings[0].mismatch.field, "index");
    }

    #[test]
    fn value_offsets_point_into_the_member() {
        let mut keys = helpers(&[b"zlink:v11:owner-counter"], 3);
        keys.push(record(b"zlink:v11:owner-counter", b"x", 3));
        let bad = record(
            LEASE,
            br#"{"recordVersion":1,"ownerId":"o","leaseGeneration":"1"} "#,
            3,
        );
        let mut keys2 = helpers(&[LEASE], 3);
        let RawValue::ZSet(mut m) = bad.value.clone() else {
            unreachable!()
        };
        // Give the lease an expiry so the value itself is judged.
        m[0].0 = encode_member(
            LEASE,
            br#"{"recordVersion":1,"ownerId":"o","leaseGeneration":"1"} "#,
            3,
            99,
            false,
        );
        keys2.push(RawKey {
            value: RawValue::ZSet(m),
            pttl_ms: 5,
            ..bad
        });
        let r = audit(P, &keys2);
        let f = &r.findings[0].mismatch;
        // 2 (tag, array) + 1 + 13 (key) + 2 (str8 header) = 18; the trailing space is value byte 55.
        assert_eq!(
            (f.field.as_str(), f.offset),
            ("member[0].rawBytes.bytes", Some(18 + 55))
        );
        assert!(!audit(P, &keys).is_clean());
    }
}
