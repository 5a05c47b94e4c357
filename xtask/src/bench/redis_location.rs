//! `cargo xtask bench redis-location [--redis URL] [--seconds N]`: the Redis Location Store
//! against the bare Redis floor.
//!
//! Four operations — a single-key conditional write (Missing condition and put of a fresh key,
//! 256-byte value), an exact read (256-byte value), a 16-key batch (16 puts of 256 bytes) and a
//! scan page (first page of 100 keys of 256 bytes) — each at concurrency 1 and 50, for N
//! seconds (default 2): throughput and p50/p99 latency through `RedisLocationStore`, printed
//! beside `redis-benchmark` running the very same `EVALSHA` in the same run (same script, same
//! keys and value sizes: the command line is captured from the provider with `MONITOR`; for the
//! fresh-key write the key-derived arguments become `__rand_int__`), as a ratio
//! provider / raw. Target: ≥ 0.8×. Each figure is the median of three alternating rounds
//! (provider, then `redis-benchmark` with as many requests), so load elsewhere on the machine
//! hits both sides alike. (`cargo xtask bench` runs from an optimized build.)
//!
//! Needs a single Redis node (default `redis://127.0.0.1:6379`) and `redis-benchmark` and
//! `redis-cli` on the `PATH`. Everything is written under a fresh key prefix, deleted at the end.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use fred::interfaces::ClientLike;
use fred::types::config::Config;
use fred::types::{Builder, Value};
use sha2::{Digest, Sha256};
use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
use zlink_store_spi::{
    Condition, LocationStore, Mutation, PageLimit, ScanPrefix, ScanRequest, ScanResult, StoreKey,
    WriteRequest,
};

mod raw;

#[cfg(test)]
use raw::monitor_args;
pub(super) use raw::{Checker, Monitor, raw_benchmark, replace_all, without_nul};
use raw::{capture, randomized};

const VALUE_LEN: usize = 256;
const BATCH: usize = 16;
const SCAN_KEYS: usize = 100;
const CONCURRENCY: [usize; 2] = [1, 50];
const DEFAULT_URL: &str = "redis://127.0.0.1:6379";
/// Each figure is the median of this many alternating rounds (provider, then raw), so a load
/// change on the machine hits both sides alike.
const ROUNDS: u32 = 3;
/// Conditional writes built ahead of each measurement round (more than a round performs).
const PREPARED_WRITES: usize = 60_000;

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let mut url = DEFAULT_URL.to_owned();
    let mut seconds = 2u64;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--redis" => url = it.next().ok_or("--redis needs a URL")?.clone(),
            "--seconds" => {
                seconds = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .filter(|s| (1..=30).contains(s))
                    .ok_or("--seconds needs a number of seconds, 1..=30")?;
            }
            other => {
                return Err(format!(
                    "bench redis-location: unknown option `{other}` (known: --redis URL, --seconds N)"
                ));
            }
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(bench(&url, Duration::from_secs(seconds)))
}

/// Host, port and password of a single-node URL, for `redis-cli` and `redis-benchmark`.
pub(super) struct Endpoint {
    host: String,
    port: u16,
    user: Option<String>,
    password: Option<String>,
}

impl Endpoint {
    pub(super) fn parse(url: &str) -> Result<Endpoint, String> {
        let rest = url
            .strip_prefix("redis://")
            .ok_or("bench redis-location needs a redis:// URL of a single node")?;
        let rest = rest.split('/').next().unwrap_or_default();
        let (auth, hostport) = match rest.rsplit_once('@') {
            Some((a, h)) => (Some(a), h),
            None => (None, rest),
        };
        let (user, password) = match auth.map(|a| a.split_once(':')) {
            Some(Some((u, p))) => ((!u.is_empty()).then(|| u.to_owned()), Some(p.to_owned())),
            Some(None) => (None, auth.map(str::to_owned)),
            None => (None, None),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) => (
                h.to_owned(),
                p.parse().map_err(|_| format!("bad port in {url}"))?,
            ),
            None => (hostport.to_owned(), 6379),
        };
        Ok(Endpoint {
            host,
            port,
            user,
            password,
        })
    }

    pub(super) fn args(&self) -> Vec<String> {
        let mut a = vec![
            "-h".to_owned(),
            self.host.clone(),
            "-p".to_owned(),
            self.port.to_string(),
        ];
        if let Some(u) = &self.user {
            a.extend(["--user".to_owned(), u.clone()]);
        }
        if let Some(p) = &self.password {
            a.extend(["-a".to_owned(), p.clone(), "--no-auth-warning".to_owned()]);
        }
        a
    }
}

fn key(s: String) -> Result<StoreKey, String> {
    StoreKey::new(s).map_err(|e| e.to_string())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn value() -> Bytes {
    Bytes::from(vec![b'x'; VALUE_LEN])
}

/// The four operations, as requests the provider runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Write,
    Read,
    Batch,
    Scan,
}

impl Op {
    const ALL: [Op; 4] = [Op::Write, Op::Read, Op::Batch, Op::Scan];

    fn name(self) -> &'static str {
        match self {
            Op::Write => "conditional write (1 key)",
            Op::Read => "exact read",
            Op::Batch => "16-key batch",
            Op::Scan => "scan page (100 items)",
        }
    }
}

struct Fixture {
    store: RedisLocationStore,
    read_key: StoreKey,
    batch: WriteRequest,
    scan: ScanRequest,
    fresh: AtomicU64,
    /// Conditional writes built before a measurement (building a request is the caller's work,
    /// as building the command line is not part of `redis-benchmark`'s figure).
    prepared: std::sync::Mutex<Vec<WriteRequest>>,
}

/// A fresh key of the conditional write; the 12 digits match `__rand_int__`.
fn write_key(n: u64) -> Result<StoreKey, String> {
    key(format!("bench/w/{n:012}"))
}

impl Fixture {
    /// A conditional write of a key never written before.
    fn fresh_write(&self) -> Result<WriteRequest, String> {
        let k = write_key(self.fresh.fetch_add(1, Ordering::Relaxed) + 1)?;
        WriteRequest::new(
            vec![Condition::Missing(k.clone())],
            vec![Mutation::put(k, value())],
        )
        .map_err(|e| e.to_string())
    }

    /// Builds `n` fresh conditional writes ahead of a measurement.
    fn prepare(&self, n: usize) -> Result<(), String> {
        let mut reqs = Vec::with_capacity(n);
        for _ in 0..n {
            reqs.push(self.fresh_write()?);
        }
        // Popped from the end: keep key order ascending.
        reqs.reverse();
        *self.prepared.lock().map_err(|_| "poisoned")? = reqs;
        Ok(())
    }

    async fn once(&self, op: Op) -> Result<(), String> {
        let fail = |e: zlink_store_spi::StoreError| format!("{}: {e}", op.name());
        match op {
            Op::Write => {
                let prepared = self.prepared.lock().ok().and_then(|mut p| p.pop());
                let req = match prepared {
                    Some(r) => r,
                    None => self.fresh_write()?,
                };
                if !self.store.write(&req).await.map_err(fail)?.is_applied() {
                    return Err("conditional write on a fresh key conflicted".into());
                }
            }
            Op::Read => {
                if self
                    .store
                    .read(&self.read_key)
                    .await
                    .map_err(fail)?
                    .is_missing()
                {
                    return Err("read key missing".into());
                }
            }
            Op::Batch => {
                self.store.write(&self.batch).await.map_err(fail)?;
            }
            Op::Scan => match self.store.scan(&self.scan).await.map_err(fail)? {
                ScanResult::Page(p) if p.items.len() == SCAN_KEYS && p.next_cursor.is_none() => {}
                other => return Err(format!("unexpected scan page: {other:?}")),
            },
        }
        Ok(())
    }
}

pub(super) struct Figures {
    pub(super) ops_per_sec: f64,
    p50_ms: f64,
    p99_ms: f64,
    ops: usize,
}

/// The round with the median throughput.
fn median(mut rounds: Vec<Figures>) -> Figures {
    rounds.sort_by(|a, b| a.ops_per_sec.total_cmp(&b.ops_per_sec));
    let mid = rounds.len() / 2;
    rounds.swap_remove(mid)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

/// `concurrency` tasks run `op` back to back for `run_for`.
async fn measure(
    fx: &Arc<Fixture>,
    op: Op,
    concurrency: usize,
    run_for: Duration,
) -> Result<Figures, String> {
    let start = Instant::now();
    let deadline = start + run_for;
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let fx = fx.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while Instant::now() < deadline {
                let t = Instant::now();
                fx.once(op).await?;
                lat.push(t.elapsed());
            }
            Ok::<_, String>(lat)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.map_err(|e| e.to_string())??);
    }
    let elapsed = start.elapsed().as_secs_f64();
    all.sort_unstable();
    Ok(Figures {
        ops_per_sec: all.len() as f64 / elapsed,
        p50_ms: percentile(&all, 0.50),
        p99_ms: percentile(&all, 0.99),
        ops: all.len(),
    })
}

async fn seed(store: &RedisLocationStore) -> Result<Fixture, String> {
    let read_key = key("bench/read".into())?;
    let scan_keys: Vec<StoreKey> = (0..SCAN_KEYS)
        .map(|i| key(format!("bench/scan/{i:03}")))
        .collect::<Result<_, _>>()?;
    let mut muts: Vec<Mutation> = scan_keys
        .iter()
        .map(|k| Mutation::put(k.clone(), value()))
        .collect();
    muts.push(Mutation::put(read_key.clone(), value()));
    let seed = WriteRequest::new(vec![], muts).map_err(|e| e.to_string())?;
    store
        .write(&seed)
        .await
        .map_err(|e| format!("seeding: {e}"))?;
    let batch = WriteRequest::new(
        vec![],
        (0..BATCH)
            .map(|i| Ok(Mutation::put(key(format!("bench/batch/{i:02}"))?, value())))
            .collect::<Result<_, String>>()?,
    )
    .map_err(|e| e.to_string())?;
    let scan = ScanRequest::first(
        ScanPrefix::new("bench/scan/").map_err(|e| e.to_string())?,
        PageLimit::new(SCAN_KEYS).map_err(|e| e.to_string())?,
    );
    Ok(Fixture {
        store: store.clone(),
        read_key,
        batch,
        scan,
        fresh: AtomicU64::new(0),
        prepared: std::sync::Mutex::new(Vec::new()),
    })
}

async fn bench(url: &str, run_for: Duration) -> Result<(), String> {
    let ep = Endpoint::parse(url)?;
    let prefix = format!(
        "zlink-bench-{}-{}",
        std::process::id(),
        zlink_store_spi::StoreTime::host_now().as_millis()
    );
    let options = RedisLocationOptions::from_url(url)
        .and_then(|o| o.with_key_prefix(prefix.clone()))
        .map_err(|e| format!("--redis {url}: {e}"))?;
    let store = RedisLocationStore::connect(options)
        .await
        .map_err(|e| format!("connecting to {url}: {e}"))?;
    let fx = Arc::new(seed(&store).await?);
    let result = run_all(&ep, url, &fx, &prefix, run_for).await;
    store.close().await;
    let deleted = super::purge_prefix(url, &prefix).await?;
    println!("deleted {deleted} benchmark key(s) under `{prefix}`");
    result
}

async fn run_all(
    ep: &Endpoint,
    url: &str,
    fx: &Arc<Fixture>,
    prefix: &str,
    run_for: Duration,
) -> Result<(), String> {
    let commands = capture(ep, fx, prefix).await?;
    let checker = Checker::connect(url).await?;
    println!(
        "Redis Location Store vs redis-benchmark running the same EVALSHA ({VALUE_LEN}-byte values, {}s per figure)",
        run_for.as_secs()
    );
    println!(
        "{:<27} {:>3}  {:>10} {:>8} {:>8}   {:>10} {:>8} {:>8}   {:>6}",
        "operation", "c", "store/s", "p50 ms", "p99 ms", "raw/s", "p50 ms", "p99 ms", "ratio"
    );
    let mut worst = f64::INFINITY;
    for (op, args) in &commands {
        let mut runs = 0u32;
        let mut raw_args = || -> Result<Vec<Vec<u8>>, String> {
            runs += 1;
            let args = if *op == Op::Write {
                randomized(args, &write_key(1)?, runs)
            } else {
                args.clone()
            };
            Ok(args.into_iter().map(without_nul).collect())
        };
        checker.verify(*op, &raw_args()?).await?;
        for c in CONCURRENCY {
            let mut ours = Vec::new();
            let mut raw = Vec::new();
            for _ in 0..ROUNDS {
                if *op == Op::Write {
                    fx.prepare(PREPARED_WRITES)?;
                }
                let o = measure(fx, *op, c, run_for / ROUNDS).await?;
                let n = o.ops.max(200);
                let before = if *op == Op::Write {
                    checker.records(prefix).await?
                } else {
                    0
                };
                raw.push(raw_benchmark(ep, &raw_args()?, c, n)?);
                if *op == Op::Write {
                    // Every raw write must have created its record (a few random keys may
                    // repeat and conflict); a failing script would look fast and prove nothing.
                    let created = checker.records(prefix).await? - before;
                    if created * 100 < n * 99 {
                        return Err(format!(
                            "redis-benchmark applied {created} of {n} writes: the raw command is not equivalent"
                        ));
                    }
                }
                ours.push(o);
            }
            let (ours, raw) = (median(ours), median(raw));
            let ratio = ours.ops_per_sec / raw.ops_per_sec;
            worst = worst.min(ratio);
            println!(
                "{:<27} {:>3}  {:>10.0} {:>8.3} {:>8.3}   {:>10.0} {:>8.3} {:>8.3}   {:>5.2}x",
                op.name(),
                c,
                ours.ops_per_sec,
                ours.p50_ms,
                ours.p99_ms,
                raw.ops_per_sec,
                raw.p50_ms,
                raw.p99_ms,
                ratio
            );
        }
    }
    println!("lowest ratio {worst:.2}x (target >= 0.80x)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monitor_lines_parse_with_escapes() {
        let line = r#"1700000000.000001 [0 127.0.0.1:5000] "EVALSHA" "ab" "1" "k\x00\"q\\" "v w""#;
        let args = monitor_args(line).expect("parses");
        assert_eq!(
            args,
            vec![
                b"EVALSHA".to_vec(),
                b"ab".to_vec(),
                b"1".to_vec(),
                b"k\0\"q\\".to_vec(),
                b"v w".to_vec()
            ]
        );
        assert!(monitor_args("OK").is_none());
    }

    #[test]
    fn fresh_write_arguments_become_random() {
        let k = write_key(1).expect("key");
        let sha = hex(&Sha256::digest(k.as_bytes()));
        let args = vec![
            format!("p:{{zlink-location-v3}}:opaque:{sha}").into_bytes(),
            k.as_bytes().to_vec(),
            format!("{}.{sha}", hex(k.as_bytes())).into_bytes(),
            b"xxxx".to_vec(),
        ];
        let r = randomized(&args, &k, 7);
        assert_eq!(
            r[0],
            b"p:{zlink-location-v3}:opaque:r7-__rand_int__".to_vec()
        );
        assert_eq!(r[1], b"bench/w/r7-__rand_int__".to_vec());
        assert_eq!(r[2], b"r7-__rand_int__.r7-__rand_int__".to_vec());
        assert_eq!(r[3], b"xxxx".to_vec());
    }

    #[test]
    fn endpoints_parse() {
        let e = Endpoint::parse("redis://u:p@h:7000/2").expect("url");
        assert_eq!(
            (
                e.host.as_str(),
                e.port,
                e.user.as_deref(),
                e.password.as_deref()
            ),
            ("h", 7000, Some("u"), Some("p"))
        );
        let e = Endpoint::parse("redis://127.0.0.1").expect("url");
        assert_eq!((e.host.as_str(), e.port), ("127.0.0.1", 6379));
        assert!(Endpoint::parse("redis-cluster://h:1").is_err());
    }
}
