//! The raw script baseline: the two scripts of a Reserve+Commit pair (a Reserve batch and a
//! Commit batch, as the runtime sent them) replayed by `redis-benchmark` with fresh keys per
//! call, in a variant whose conditions all hold.
//!
//! A variant is built from two captured batches of one kind (two Reserves, or two Commits, of
//! different objects): keys both name (the generation counters, the capacity row, the owner
//! lease) are *shared* and appear once; every other key belongs to the operation and appears
//! once per operation, so a variant of `m` operations has the shape of a batch the runtime
//! coalesces from `m` operations. Every key becomes a fresh key of the same length, every
//! condition `Missing` (which then holds), every mutation keeps its kind, value bytes and
//! retention. The variant is sent once through the provider while `MONITOR` records its
//! `EVALSHA`; in that command line each key, its hex and its SHA-256 become `__rand_int__`
//! placeholders of the same length (`redis-benchmark` draws each occurrence anew), so every
//! call writes fresh keys. Replays run under their own key prefix, which is purged after each
//! run: the keys deleted count the rows created, and a run that did not create (nearly) every
//! row of every call fails the benchmark, so the cheap `Conflict` path is never what is timed.

use std::collections::HashSet;

use sha2::{Digest, Sha256};
use zlink_redis_location::RedisLocationStore;
use zlink_store_spi::{Condition, LocationStore, Mutation, StoreKey, WriteRequest};

use super::super::redis_location::{
    Checker, Endpoint, Monitor, raw_benchmark, replace_all, without_nul,
};

/// One kind of batch (Reserve or Commit) as the runtime sent it for two different objects.
#[derive(Debug, Clone)]
pub(super) struct Pair {
    pub(super) first: WriteRequest,
    pub(super) second: WriteRequest,
}

/// A fresh-key variant: the request, its keys (in slot order) and the rows one call creates.
#[derive(Debug, Clone)]
pub(super) struct Variant {
    pub(super) request: WriteRequest,
    keys: Vec<StoreKey>,
    tag: char,
    /// Rows one applied call creates (its puts).
    pub(super) rows: usize,
}

fn keys_of(r: &WriteRequest) -> Vec<StoreKey> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for k in r
        .conditions()
        .iter()
        .map(Condition::key)
        .chain(r.mutations().iter().map(Mutation::key))
    {
        if seen.insert(k.clone()) {
            out.push(k.clone());
        }
    }
    out
}

/// The fresh key of slot `slot` of variant `tag`, as long as `like` (at least 10 bytes).
fn slot_key(tag: char, slot: usize, like: &StoreKey) -> Result<StoreKey, String> {
    let mut s = format!("zlb{tag}{slot:05}");
    while s.len() < like.len() {
        s.push('_');
    }
    StoreKey::new(s).map_err(|e| e.to_string())
}

/// The variant of `pair` with `ops` operations; `tag` keeps the keys of variants apart.
pub(super) fn variant(pair: &Pair, ops: usize, tag: char) -> Result<Variant, String> {
    let second: HashSet<StoreKey> = keys_of(&pair.second).into_iter().collect();
    let own: Vec<StoreKey> = keys_of(&pair.first);
    let mut keys = Vec::new();
    // Each key of the first batch, mapped to its variant keys (one, or one per operation).
    let mut mapped: Vec<(StoreKey, Vec<StoreKey>)> = Vec::new();
    for k in own {
        let n = if second.contains(&k) { 1 } else { ops };
        let mut vs = Vec::with_capacity(n);
        for _ in 0..n {
            let v = slot_key(tag, keys.len(), &k)?;
            keys.push(v.clone());
            vs.push(v);
        }
        mapped.push((k, vs));
    }
    let of = |k: &StoreKey| -> &[StoreKey] {
        mapped
            .iter()
            .find(|(o, _)| o == k)
            .map(|(_, v)| v.as_slice())
            .unwrap_or(&[])
    };
    let mut conditions = Vec::new();
    for c in pair.first.conditions() {
        conditions.extend(of(c.key()).iter().cloned().map(Condition::Missing));
    }
    let mut mutations = Vec::new();
    let mut rows = 0;
    for m in pair.first.mutations() {
        for v in of(m.key()) {
            mutations.push(match m {
                Mutation::Put {
                    bytes, retention, ..
                } => {
                    rows += 1;
                    Mutation::Put {
                        key: v.clone(),
                        bytes: bytes.clone(),
                        retention: *retention,
                    }
                }
                Mutation::Delete(_) => Mutation::Delete(v.clone()),
            });
        }
    }
    let request = WriteRequest::new(conditions, mutations).map_err(|e| e.to_string())?;
    Ok(Variant {
        request,
        keys,
        tag,
        rows,
    })
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A placeholder of slot `slot` of variant `tag` in run `run`, `len` bytes long (or as short
/// as it can be).
fn placeholder(run: u32, tag: char, slot: usize, len: usize) -> String {
    let head = format!("r{run}{tag}{slot:05}");
    let pad = len.saturating_sub(head.len() + "__rand_int__".len());
    format!("{head}{}__rand_int__", "0".repeat(pad))
}

/// The captured command line with every key of the variant made random per call; NUL bytes
/// (which a command line cannot carry) become 0x01, the length unchanged.
pub(super) fn randomized(args: &[Vec<u8>], variant: &Variant, run: u32) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = args.to_vec();
    for (slot, k) in variant.keys.iter().enumerate() {
        let sha = hex(&Sha256::digest(k.as_bytes()));
        let hx = hex(k.as_bytes());
        let subs = [
            (sha.clone(), placeholder(run, variant.tag, slot, sha.len())),
            (hx.clone(), placeholder(run, variant.tag, slot, hx.len())),
            (k.to_string(), placeholder(run, variant.tag, slot, k.len())),
        ];
        for a in &mut out {
            for (from, to) in &subs {
                *a = replace_all(a, from.as_bytes(), to.as_bytes());
            }
        }
    }
    out.into_iter().map(without_nul).collect()
}

/// Sends each variant once through `store` while `redis-cli MONITOR` watches; returns the
/// `EVALSHA` command line each one sent (recognised by `prefix`).
pub(super) async fn capture(
    ep: &Endpoint,
    store: &RedisLocationStore,
    prefix: &str,
    variants: &[&Variant],
) -> Result<Vec<Vec<Vec<u8>>>, String> {
    let monitor = Monitor::start(ep)?;
    let mut captured = Vec::new();
    for v in variants {
        let applied = store
            .write(&v.request)
            .await
            .map_err(|e| format!("variant batch: {e}"))?
            .is_applied();
        if !applied {
            return Err("a fresh-key variant conflicted".into());
        }
        captured.push(monitor.next_evalsha(prefix, "the variant batch")?);
    }
    Ok(captured)
}

/// `EVALSHA` and `EVAL` calls and their microseconds so far (`INFO commandstats`).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ScriptStats {
    pub(super) calls: u64,
    pub(super) usec: u64,
}

impl ScriptStats {
    pub(super) fn since(&self, earlier: &ScriptStats) -> ScriptStats {
        ScriptStats {
            calls: self.calls.saturating_sub(earlier.calls),
            usec: self.usec.saturating_sub(earlier.usec),
        }
    }
}

/// Parses the script lines of `INFO commandstats`.
pub(super) fn parse_commandstats(text: &str) -> ScriptStats {
    let mut s = ScriptStats::default();
    for line in text.lines() {
        let Some(rest) = line
            .strip_prefix("cmdstat_evalsha:")
            .or_else(|| line.strip_prefix("cmdstat_eval:"))
        else {
            continue;
        };
        for field in rest.trim().split(',') {
            match field.split_once('=') {
                Some(("calls", v)) => s.calls += v.parse::<u64>().unwrap_or(0),
                Some(("usec", v)) => s.usec += v.parse::<u64>().unwrap_or(0),
                _ => {}
            }
        }
    }
    s
}

pub(super) async fn script_stats(checker: &Checker) -> Result<ScriptStats, String> {
    let reply = checker
        .cmd(&[b"INFO".to_vec(), b"commandstats".to_vec()])
        .await?;
    let text = reply.as_string().ok_or("INFO: not text")?;
    Ok(parse_commandstats(&text))
}

/// One replay of a variant's command line.
#[derive(Debug, Clone, Copy)]
pub(super) struct Replay {
    pub(super) calls_per_sec: f64,
    pub(super) usec_per_call: f64,
}

/// Where replays run: the server, a plain client of it, and the key prefix of the variants.
pub(super) struct RawTarget<'a> {
    pub(super) ep: &'a Endpoint,
    pub(super) url: &'a str,
    pub(super) checker: &'a Checker,
    pub(super) prefix: &'a str,
}

/// Replays `args` (a randomized variant) `n` times on `concurrency` connections, and checks
/// that every call created its rows (keys under the prefix are purged before and counted
/// after).
pub(super) async fn replay(
    target: &RawTarget<'_>,
    variant: &Variant,
    args: &[Vec<u8>],
    concurrency: usize,
    n: usize,
) -> Result<Replay, String> {
    let RawTarget {
        ep,
        url,
        checker,
        prefix,
    } = *target;
    super::super::purge_prefix(url, prefix).await?;
    let before = script_stats(checker).await?;
    let figures = raw_benchmark(ep, args, concurrency, n)?;
    let stats = script_stats(checker).await?.since(&before);
    // The sequence and the scan index are the two keys that are not rows.
    let rows = super::super::purge_prefix(url, prefix)
        .await?
        .saturating_sub(2);
    let want = n * variant.rows;
    if rows * 100 < want * 99 {
        return Err(format!(
            "the raw replay created {rows} of {want} rows: its calls did not all apply"
        ));
    }
    if stats.calls < n as u64 {
        return Err(format!(
            "INFO commandstats counted {} script calls for {n} replayed",
            stats.calls
        ));
    }
    Ok(Replay {
        calls_per_sec: figures.ops_per_sec,
        usec_per_call: stats.usec as f64 / stats.calls as f64,
    })
}

/// Runs the randomized command once (placeholders filled) and checks that it applied.
pub(super) async fn verify(checker: &Checker, args: &[Vec<u8>]) -> Result<(), String> {
    let filled: Vec<Vec<u8>> = args
        .iter()
        .map(|a| replace_all(a, b"__rand_int__", b"999999999999"))
        .collect();
    let reply = checker.cmd(&filled).await?.into_array();
    if reply.first().and_then(fred::types::Value::as_i64) == Some(1) {
        Ok(())
    } else {
        Err(format!("the raw replay does not apply: {reply:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> StoreKey {
        StoreKey::new(s).unwrap()
    }

    #[test]
    fn variant_repeats_own_keys_and_keeps_shared_ones_once() {
        let shared = k("zlink:v11:object-counter");
        let batch = |id: &str| {
            WriteRequest::new(
                vec![
                    Condition::Missing(k(id)),
                    Condition::Version(shared.clone(), "7".try_into().unwrap()),
                ],
                vec![
                    Mutation::put(k(id), "record"),
                    Mutation::put(shared.clone(), "8"),
                ],
            )
            .unwrap()
        };
        let pair = Pair {
            first: batch("authority\0actor\0a"),
            second: batch("authority\0actor\0b"),
        };
        let v = variant(&pair, 3, 'r').unwrap();
        assert_eq!(v.keys.len(), 4);
        assert_eq!(v.rows, 4);
        assert_eq!(v.request.conditions().len(), 4);
        assert!(
            v.request
                .conditions()
                .iter()
                .all(|c| matches!(c, Condition::Missing(_)))
        );
        // Fresh keys keep the length of the keys they stand for.
        assert_eq!(v.keys[0].len(), "authority\0actor\0a".len());
        assert_eq!(v.keys[3].len(), shared.len());
    }

    #[test]
    fn randomized_keys_keep_their_length_and_lose_nuls() {
        let pair = Pair {
            first: WriteRequest::new(
                vec![],
                vec![Mutation::put(k("a-long-own-key-number-1"), "v\0")],
            )
            .unwrap(),
            second: WriteRequest::new(
                vec![],
                vec![Mutation::put(k("a-long-own-key-number-2"), "v\0")],
            )
            .unwrap(),
        };
        let v = variant(&pair, 1, 'c').unwrap();
        let key = &v.keys[0];
        let sha = hex(&Sha256::digest(key.as_bytes()));
        let args = vec![
            format!("p:opaque:{sha}").into_bytes(),
            key.as_bytes().to_vec(),
            b"v\0".to_vec(),
        ];
        let r = randomized(&args, &v, 2);
        assert_eq!(r[0].len(), args[0].len());
        assert!(r[0].ends_with(b"__rand_int__"));
        assert_eq!(r[1].len(), key.len());
        assert!(r[1].starts_with(b"r2c00000"));
        assert_eq!(r[2], b"v\x01".to_vec());
    }

    #[test]
    fn commandstats_sum_both_script_commands() {
        let text = "# Commandstats\r\ncmdstat_evalsha:calls=10,usec=400,usec_per_call=40.00,rejected_calls=0,failed_calls=0\r\ncmdstat_eval:calls=1,usec=50,usec_per_call=50.00\r\ncmdstat_get:calls=3,usec=3\r\n";
        let s = parse_commandstats(text);
        assert_eq!((s.calls, s.usec), (11, 450));
    }
}
