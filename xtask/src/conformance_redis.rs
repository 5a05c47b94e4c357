//! `cargo xtask conformance --redis URL`: the live golden check of the official Redis Location
//! Store provider (spec 22 §9).
//!
//! Every value vector of the fixture is written through `RedisLocationStore` (a durable put, a
//! put with a 1 ms retention for the expired variant, a delete under a live snapshot for the
//! tombstone), the newest member of its record is read back with a plain `ZRANGE` at the key
//! this module computes from the spec formula `{prefix}:{zlink-location-v3}:opaque:
//! {sha256hex(K)}`, and the bytes are compared with the fixture's `fullValueHex` in which the
//! version (and, for the expired variant, the expiry) is replaced by what the provider issued.
//! Reads through the provider must agree (the value, or absent for the tombstone and the
//! expired variant).
//!
//! Records stay under the prefix it prints, one sub-prefix per vector, for inspection (the
//! tombstone and the expired record carry a Redis TTL of about a minute); the next run deletes
//! them first.

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use fred::clients::Client;
use fred::interfaces::ClientLike;
use fred::types::config::Config;
use fred::types::{Builder, CustomCommand, Value};
use serde_json::Value as Json;
use sha2::{Digest, Sha256};
use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
use zlink_store_spi::{
    Condition, LocationStore, Mutation, PageLimit, ReadResult, Retention, ScanPrefix, ScanRequest,
    ScanResult, StoreKey, WriteRequest, WriteResult,
};

use crate::Tally;

/// The key prefix of the records this check leaves behind; vector `n` uses `{PREFIX}/{name}`.
const PREFIX: &str = "zlink-xtask-conformance";
const HASHTAG: &str = "{zlink-location-v3}";

/// Runs the live golden check against `url`.
pub(crate) fn run(url: &str, fixture: &Path) -> Result<Tally, String> {
    let bytes = std::fs::read(fixture)
        .map_err(|e| format!("cannot read the fixture {}: {e}", fixture.display()))?;
    let f: Json = serde_json::from_slice(&bytes)
        .map_err(|e| format!("the fixture {} is not JSON: {e}", fixture.display()))?;
    let vectors = vectors(&f)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(check_all(url, &vectors))
}

struct Vector {
    name: String,
    key: StoreKey,
    value: Vec<u8>,
    expires_at_ms: u64,
    tombstone: bool,
    full: Vec<u8>,
}

fn vectors(f: &Json) -> Result<Vec<Vector>, String> {
    let list = f["valueVectors"]["genericOpaqueRecord"]
        .as_array()
        .ok_or("fixture: valueVectors.genericOpaqueRecord is not an array")?;
    list.iter()
        .map(|v| {
            let text = |field: &str| {
                v[field]
                    .as_str()
                    .ok_or_else(|| format!("fixture field `{field}` is not a string"))
            };
            let name = text("name")?.to_owned();
            let key = StoreKey::new(text("originalKey")?.replace("\\u0000", "\0"))
                .map_err(|e| format!("{name}: originalKey: {e}"))?;
            let hex = |field: &str| {
                text(field)
                    .and_then(|s| unhex(s).ok_or_else(|| format!("{name}: `{field}` is not hex")))
            };
            Ok(Vector {
                key,
                value: hex("jsonBytesHex")?,
                expires_at_ms: text("expiresAtMs")?
                    .parse()
                    .map_err(|_| format!("{name}: expiresAtMs is not a number"))?,
                tombstone: v["tombstone"]
                    .as_bool()
                    .ok_or_else(|| format!("{name}: tombstone is not a boolean"))?,
                full: hex("fullValueHex")?,
                name,
            })
        })
        .collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `{prefix}:{zlink-location-v3}:opaque:{sha256hex(K)}`, from the spec.
fn record_key(prefix: &str, key: &StoreKey) -> String {
    format!(
        "{prefix}:{HASHTAG}:opaque:{}",
        to_hex(&Sha256::digest(key.as_bytes()))
    )
}

/// The fixture member with its version (and expiry) replaced: `0x01 0x95`, then the three
/// str-family fields kept or replaced, then the expiry and the tombstone flag. Parses the
/// fixture's own bytes, so the key and value encodings are the fixture's, untouched.
fn substituted(full: &[u8], version: &str, expires_at_ms: Option<u64>) -> Result<Vec<u8>, String> {
    fn str_len(b: &[u8], at: usize) -> Option<(usize, usize)> {
        let (head, len) = match *b.get(at)? {
            t @ 0xa0..=0xbf => (1, usize::from(t & 0x1f)),
            0xd9 => (2, usize::from(*b.get(at + 1)?)),
            0xda => (
                3,
                usize::from(u16::from_be_bytes([*b.get(at + 1)?, *b.get(at + 2)?])),
            ),
            0xdb => (
                5,
                u32::from_be_bytes(b.get(at + 1..at + 5)?.try_into().ok()?) as usize,
            ),
            _ => return None,
        };
        Some((head, len))
    }
    fn uint_len(b: &[u8], at: usize) -> Option<usize> {
        Some(match *b.get(at)? {
            0x00..=0x7f => 1,
            0xcc => 2,
            0xcd => 3,
            0xce => 5,
            0xcf => 9,
            _ => return None,
        })
    }
    let bad = || "the fixture member does not have the spec layout".to_string();
    if full.get(..2) != Some(&[0x01, 0x95][..]) {
        return Err(bad());
    }
    let mut at = 2;
    for _ in 0..2 {
        let (h, n) = str_len(full, at).ok_or_else(bad)?;
        at += h + n;
    }
    let mut out = full.get(..at).ok_or_else(bad)?.to_vec();
    let (h, n) = str_len(full, at).ok_or_else(bad)?;
    at += h + n;
    // Versions are short decimals: fixstr.
    if version.len() >= 32 {
        return Err(format!(
            "provider version {version:?} is longer than a fixstr"
        ));
    }
    out.push(0xa0 | version.len() as u8);
    out.extend_from_slice(version.as_bytes());
    let n = uint_len(full, at).ok_or_else(bad)?;
    match expires_at_ms {
        None => out.extend_from_slice(full.get(at..at + n).ok_or_else(bad)?),
        Some(ms) => encode_uint(&mut out, ms),
    }
    at += n;
    out.extend_from_slice(full.get(at..).ok_or_else(bad)?);
    Ok(out)
}

fn encode_uint(out: &mut Vec<u8>, n: u64) {
    match n {
        0..=0x7f => out.push(n as u8),
        0x80..=0xff => out.extend([0xcc, n as u8]),
        0x100..=0xffff => {
            out.push(0xcd);
            out.extend((n as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(0xce);
            out.extend((n as u32).to_be_bytes());
        }
        _ => {
            out.push(0xcf);
            out.extend(n.to_be_bytes());
        }
    }
}

/// A plain client; its commands go to the node that owns the store's hash slot.
struct Raw {
    client: Client,
    slot: u16,
}

impl Raw {
    async fn connect(url: &str) -> Result<Raw, String> {
        let config = Config::from_url(url).map_err(|e| format!("--redis {url}: {e}"))?;
        let client = Builder::from_config(config)
            .build()
            .map_err(|e| e.to_string())?;
        tokio::time::timeout(Duration::from_secs(5), client.init())
            .await
            .map_err(|_| "timed out connecting to Redis".to_string())?
            .map_err(|e| format!("connecting to Redis: {e}"))?;
        Ok(Raw {
            client,
            slot: fred::util::redis_keyslot(HASHTAG.as_bytes()),
        })
    }

    async fn cmd(&self, name: &str, args: Vec<Value>) -> Result<Value, String> {
        let cmd = CustomCommand::new(name.to_owned(), Some(self.slot), false);
        self.client
            .custom::<Value, Value>(cmd, args)
            .await
            .map_err(|e| format!("{name}: {e}"))
    }

    /// Deletes every key of the previous run (all under `{PREFIX}`).
    async fn purge_previous(&self) -> Result<usize, String> {
        let pattern = format!("{PREFIX}*:{HASHTAG}:*");
        let mut cursor = "0".to_owned();
        let mut deleted = 0;
        loop {
            let reply = self
                .cmd(
                    "SCAN",
                    vec![
                        cursor.as_str().into(),
                        "MATCH".into(),
                        pattern.as_str().into(),
                        "COUNT".into(),
                        1000.into(),
                    ],
                )
                .await?
                .into_array();
            let [next, keys] = <[Value; 2]>::try_from(reply).map_err(|_| "SCAN: bad reply")?;
            cursor = next.as_string().ok_or("SCAN: bad cursor")?;
            for k in keys.into_array() {
                self.cmd("DEL", vec![k]).await?;
                deleted += 1;
            }
            if cursor == "0" {
                return Ok(deleted);
            }
        }
    }

    /// The newest member of a record and its score.
    async fn newest(&self, key: &str) -> Result<(Vec<u8>, u64), String> {
        let reply = self
            .cmd(
                "ZRANGE",
                vec![key.into(), (-1).into(), (-1).into(), "WITHSCORES".into()],
            )
            .await?
            .into_array();
        let [member, score] =
            <[Value; 2]>::try_from(reply).map_err(|_| format!("no record at {key}"))?;
        let member = member.as_bytes().ok_or("member is not bytes")?.to_vec();
        let score = score
            .as_str()
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or("score is not an integer")?;
        Ok((member, score))
    }
}

async fn store(url: &str, prefix: &str) -> Result<RedisLocationStore, String> {
    let options = RedisLocationOptions::from_url(url)
        .and_then(|o| o.with_key_prefix(prefix))
        .map_err(|e| format!("--redis {url}: {e}: {:?}", std::error::Error::source(&e)))?;
    RedisLocationStore::connect(options)
        .await
        .map_err(|e| format!("connecting the provider: {e}"))
}

fn applied(r: WriteResult) -> Result<(String, u64), String> {
    match r {
        WriteResult::Applied {
            put_versions,
            store_now,
        } => Ok((
            put_versions
                .first()
                .map(|v| v.to_string())
                .unwrap_or_default(),
            store_now.as_millis(),
        )),
        WriteResult::Conflict { .. } => Err("the provider answered Conflict".into()),
    }
}

fn io<T>(r: zlink_store_spi::StoreResult<T>, what: &str) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

/// Writes one vector under its own prefix and compares the stored member.
async fn check_vector(url: &str, raw: &Raw, v: &Vector) -> Result<String, String> {
    let prefix = format!("{PREFIX}/{}", v.name);
    let store = store(url, &prefix).await?;
    let rk = record_key(&prefix, &v.key);
    let missing = |k: &StoreKey| Condition::Missing(k.clone());
    let expected = if v.tombstone {
        // A delete appends a tombstone member while a scan snapshot may need the old value:
        // open one (two keys, pages of one) before deleting.
        let other = StoreKey::new("~keeps-the-snapshot-open").map_err(|e| e.to_string())?;
        let seed = WriteRequest::new(
            vec![missing(&v.key), missing(&other)],
            vec![
                Mutation::put(v.key.clone(), "before"),
                Mutation::put(other, "x"),
            ],
        )
        .map_err(|e| e.to_string())?;
        applied(io(store.write(&seed).await, "seed")?)?;
        let first = ScanRequest::first(
            ScanPrefix::all(),
            PageLimit::new(1).map_err(|e| e.to_string())?,
        );
        match io(store.scan(&first).await, "scan")? {
            ScanResult::Page(p) if p.next_cursor.is_some() => {}
            other => return Err(format!("could not open a snapshot: {other:?}")),
        }
        let del = WriteRequest::new(vec![], vec![Mutation::Delete(v.key.clone())])
            .map_err(|e| e.to_string())?;
        applied(io(store.write(&del).await, "delete")?)?;
        let (_, score) = raw.newest(&rk).await?;
        substituted(&v.full, &score.to_string(), None)?
    } else if v.expires_at_ms != 0 {
        let retention = Retention::from_millis(1).map_err(|e| e.to_string())?;
        let put = WriteRequest::new(
            vec![missing(&v.key)],
            vec![Mutation::put_expiring(
                v.key.clone(),
                Bytes::from(v.value.clone()),
                retention,
            )],
        )
        .map_err(|e| e.to_string())?;
        let (version, now) = applied(io(store.write(&put).await, "put")?)?;
        tokio::time::sleep(Duration::from_millis(5)).await;
        substituted(&v.full, &version, Some(now + 1))?
    } else {
        let put = WriteRequest::new(
            vec![missing(&v.key)],
            vec![Mutation::put(v.key.clone(), Bytes::from(v.value.clone()))],
        )
        .map_err(|e| e.to_string())?;
        let (version, _) = applied(io(store.write(&put).await, "put")?)?;
        substituted(&v.full, &version, None)?
    };
    let (member, _) = raw.newest(&rk).await?;
    if member != expected {
        let first = member
            .iter()
            .zip(&expected)
            .position(|(a, b)| a != b)
            .unwrap_or(member.len().min(expected.len()));
        return Err(format!(
            "stored member differs from the fixture at byte {first} (expected {} bytes, got {})\n      expected: {}\n      stored:   {}",
            expected.len(),
            member.len(),
            to_hex(&expected[first.saturating_sub(8)..(first + 24).min(expected.len())]),
            to_hex(&member[first.saturating_sub(8)..(first + 24).min(member.len())]),
        ));
    }
    match (
        io(store.read(&v.key).await, "read")?,
        v.tombstone || v.expires_at_ms != 0,
    ) {
        (ReadResult::Missing { .. }, true) => {}
        (ReadResult::Found { bytes, .. }, false) if bytes.as_ref() == v.value.as_slice() => {}
        (other, _) => return Err(format!("read back through the provider: {other:?}")),
    }
    store.close().await;
    Ok(rk)
}

async fn check_all(url: &str, vectors: &[Vector]) -> Result<Tally, String> {
    let raw = Raw::connect(url).await?;
    let deleted = raw.purge_previous().await?;
    println!("redis: deleted {deleted} key(s) of the previous run under `{PREFIX}/…`");
    let mut tally = Tally::default();
    for v in vectors {
        match check_vector(url, &raw, v).await {
            Ok(rk) => {
                tally.passed += 1;
                println!("ok    redis/{}  {}", v.name, rk.replace('\0', "\\0"));
            }
            Err(why) => {
                tally.failed += 1;
                println!("FAIL  redis/{}: {why}", v.name);
            }
        }
    }
    println!(
        "redis: records left under the key prefix `{PREFIX}/<vector name>` for inspection \
         (the tombstone and expired records expire within about a minute); the next run deletes them"
    );
    let _ = raw.client.quit().await;
    Ok(tally)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitution_keeps_the_fixture_bytes_but_version_and_expiry() {
        // ownerLease-expired of the fixture: version "44", expiry 1700000000000 (uint64).
        let full =
            unhex("0195b36f776e65722d6c65617365006f776e65722d61a178a23434cf0000018bcfe56800c2")
                .expect("hex");
        let same = substituted(&full, "44", None).expect("layout");
        assert_eq!(same, full);
        let got = substituted(&full, "7", Some(5)).expect("layout");
        assert_eq!(
            to_hex(&got),
            "0195b36f776e65722d6c65617365006f776e65722d61a178a13705c2"
        );
        assert!(substituted(&full[1..], "7", None).is_err());
    }

    #[test]
    fn every_fixture_vector_round_trips_through_substitution() {
        let f: Json =
            serde_json::from_slice(&std::fs::read(crate::fixture_path()).expect("fixture"))
                .expect("fixture JSON");
        let vs = vectors(&f).expect("vectors");
        assert_eq!(vs.len(), 7);
        for v in vs {
            let version = f["valueVectors"]["genericOpaqueRecord"]
                .as_array()
                .and_then(|a| a.iter().find(|x| x["name"] == v.name.as_str()))
                .and_then(|x| x["version"].as_str())
                .unwrap_or_default()
                .to_owned();
            assert_eq!(
                substituted(&v.full, &version, None).ok(),
                Some(v.full.clone()),
                "{}",
                v.name
            );
            if v.expires_at_ms != 0 {
                let again = substituted(&v.full, &version, Some(v.expires_at_ms)).ok();
                assert_eq!(again, Some(v.full.clone()), "{}", v.name);
            }
        }
    }
}
