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

/// Parses one `MONITOR` line into its arguments (undoing Redis's `sdscatrepr` quoting).
pub(super) fn monitor_args(line: &str) -> Option<Vec<Vec<u8>>> {
    let rest = &line[line.find("] ")? + 2..];
    let b = rest.as_bytes();
    let mut args = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b' ' {
            i += 1;
            continue;
        }
        if b[i] != b'"' {
            return None;
        }
        i += 1;
        let mut arg = Vec::new();
        loop {
            match *b.get(i)? {
                b'"' => {
                    i += 1;
                    break;
                }
                b'\\' => {
                    let c = *b.get(i + 1)?;
                    i += 2;
                    arg.push(match c {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'a' => 7,
                        b'b' => 8,
                        b'x' => {
                            let h = std::str::from_utf8(b.get(i..i + 2)?).ok()?;
                            i += 2;
                            u8::from_str_radix(h, 16).ok()?
                        }
                        other => other,
                    });
                }
                c => {
                    arg.push(c);
                    i += 1;
                }
            }
        }
        args.push(arg);
    }
    Some(args)
}

/// Runs one of each operation through the provider while `redis-cli MONITOR` watches, and
/// returns the `EVALSHA` command line each one sent.
async fn capture(
    ep: &Endpoint,
    fx: &Fixture,
    prefix: &str,
) -> Result<Vec<(Op, Vec<Vec<u8>>)>, String> {
    let monitor = Monitor::start(ep)?;
    let mut captured = Vec::new();
    for op in Op::ALL {
        fx.once(op).await?;
        let args = monitor.next_evalsha(prefix, &format!("the {} command", op.name()))?;
        captured.push((op, args));
    }
    Ok(captured)
}

/// A `redis-cli MONITOR` session whose `OK` was seen, its lines read on a thread; the child
/// and the thread end when it is dropped.
pub(super) struct Monitor {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Monitor {
    /// Starts MONITOR and waits (at most 5 s) for its `OK` before anything is sent.
    pub(super) fn start(ep: &Endpoint) -> Result<Monitor, String> {
        let mut child = Command::new("redis-cli")
            .args(ep.args())
            .arg("MONITOR")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run redis-cli: {e}"))?;
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("redis-cli: no stdout".into());
        };
        let (tx, lines) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let monitor = Monitor {
            child,
            lines,
            reader: Some(reader),
        };
        let ok = monitor
            .lines
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| "redis-cli MONITOR did not start")?;
        if ok.trim() != "OK" {
            return Err(format!("redis-cli MONITOR: {ok}"));
        }
        Ok(monitor)
    }

    /// The arguments of the next `EVALSHA` carrying `prefix`, waiting at most 5 s; `what`
    /// names the expected command in the error.
    pub(super) fn next_evalsha(&self, prefix: &str, what: &str) -> Result<Vec<Vec<u8>>, String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .map_err(|_| format!("MONITOR did not show {what}"))?;
            let Some(args) = monitor_args(&line) else {
                continue;
            };
            let ours = args
                .first()
                .is_some_and(|c| c.eq_ignore_ascii_case(b"EVALSHA"))
                && args.iter().any(|a| a.starts_with(prefix.as_bytes()));
            if ours {
                return Ok(args);
            }
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// Replaces every occurrence of `from` in `hay` by `to`.
pub(super) fn replace_all(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while i < hay.len() {
        if !from.is_empty() && hay[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

/// The raw command of the fresh-key write: the key, its hex and its SHA-256 become random,
/// tagged with `run` (`redis-benchmark` may draw the same random numbers in every run).
fn randomized(args: &[Vec<u8>], k: &StoreKey, run: u32) -> Vec<Vec<u8>> {
    let sha = hex(&Sha256::digest(k.as_bytes()));
    let hx = hex(k.as_bytes());
    let tagged = format!("r{run}-__rand_int__");
    let tagged_key = format!("bench/w/r{run}-__rand_int__");
    args.iter()
        .map(|a| {
            let a = replace_all(a, sha.as_bytes(), tagged.as_bytes());
            let a = replace_all(&a, hx.as_bytes(), tagged.as_bytes());
            replace_all(&a, k.as_bytes(), tagged_key.as_bytes())
        })
        .collect()
}

/// `arg` with each NUL byte, which a command line cannot carry, made 0x01: the same length,
/// and the same work for the scripts, which treat member heads (whose length headers may hold
/// a NUL) as opaque bytes.
pub(super) fn without_nul(mut arg: Vec<u8>) -> Vec<u8> {
    for b in &mut arg {
        if *b == 0 {
            *b = 1;
        }
    }
    arg
}

/// `redis-benchmark` running `args` with `concurrency` connections, `n` requests.
pub(super) fn raw_benchmark(
    ep: &Endpoint,
    args: &[Vec<u8>],
    concurrency: usize,
    n: usize,
) -> Result<Figures, String> {
    use std::os::unix::ffi::OsStrExt;
    let out = Command::new("redis-benchmark")
        .args(ep.args())
        .args([
            "-c",
            &concurrency.to_string(),
            "-n",
            &n.to_string(),
            "-r",
            // `__rand_int__` draws from 0..r; r must fit a C int.
            "2000000000",
            "--csv",
        ])
        .args(args.iter().map(|a| std::ffi::OsStr::from_bytes(a)))
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run redis-benchmark: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text
        .lines()
        .rfind(|l| l.starts_with('"') && !l.starts_with("\"test\""))
        .ok_or_else(|| format!("redis-benchmark printed no result: {text}"))?;
    // "test","rps","avg","min","p50","p95","p99","max"; the test (the command) may itself
    // hold `","`, so the figures are taken from the end.
    let mut fields: Vec<f64> = last
        .trim_matches('"')
        .rsplitn(8, "\",\"")
        .take(7)
        .map(|f| f.parse::<f64>().unwrap_or(f64::NAN))
        .collect();
    fields.reverse();
    if fields.len() != 7 || fields.iter().any(|f| f.is_nan()) {
        return Err(format!("unexpected redis-benchmark output: {last}"));
    }
    Ok(Figures {
        ops_per_sec: fields[0],
        p50_ms: fields[3],
        p99_ms: fields[5],
        ops: n,
    })
}

/// A plain client to check what the raw commands do.
pub(super) struct Checker {
    client: fred::clients::Client,
}

impl Checker {
    pub(super) async fn connect(url: &str) -> Result<Checker, String> {
        let config = Config::from_url(url).map_err(|e| e.to_string())?;
        let client = Builder::from_config(config)
            .build()
            .map_err(|e| e.to_string())?;
        client.init().await.map_err(|e| e.to_string())?;
        Ok(Checker { client })
    }

    pub(super) async fn cmd(&self, args: &[Vec<u8>]) -> Result<Value, String> {
        let (name, rest) = args.split_first().ok_or("empty command")?;
        let name = String::from_utf8_lossy(name).into_owned();
        let rest: Vec<Value> = rest
            .iter()
            .map(|a| Value::Bytes(Bytes::from(a.clone())))
            .collect();
        self.client
            .custom::<Value, Value>(fred::types::CustomCommand::new(name, None, false), rest)
            .await
            .map_err(|e| format!("raw command failed: {e}"))
    }

    /// How many records exist under `prefix` (`{prefix}:{zlink-location-v3}:opaque:*`).
    async fn records(&self, prefix: &str) -> Result<usize, String> {
        let pattern = format!("{prefix}:{{zlink-location-v3}}:opaque:*");
        let mut cursor = "0".to_owned();
        let mut n = 0;
        loop {
            let args: Vec<Vec<u8>> = ["SCAN", &cursor, "MATCH", &pattern, "COUNT", "10000"]
                .iter()
                .map(|s| s.as_bytes().to_vec())
                .collect();
            let reply = self.cmd(&args).await?.into_array();
            let [next, keys] = <[Value; 2]>::try_from(reply).map_err(|_| "SCAN: bad reply")?;
            cursor = next.as_string().ok_or("SCAN: bad cursor")?;
            n += keys.into_array().len();
            if cursor == "0" {
                return Ok(n);
            }
        }
    }

    /// Runs the raw command once (placeholders filled) and checks it does the operation's work:
    /// a write or batch applies, a read finds the value, a scan page holds every key.
    async fn verify(&self, op: Op, args: &[Vec<u8>]) -> Result<(), String> {
        let filled: Vec<Vec<u8>> = args
            .iter()
            .map(|a| replace_all(a, b"__rand_int__", b"999999999999"))
            .collect();
        let reply = self.cmd(&filled).await?.into_array();
        let ok = match op {
            Op::Write | Op::Batch => reply.first().and_then(Value::as_i64) == Some(1),
            Op::Read => reply.len() == 3,
            Op::Scan => {
                reply.first().and_then(Value::as_i64) == Some(1) && reply.len() == 4 + SCAN_KEYS
            }
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "the raw {} command does not do the operation: {reply:?}",
                op.name()
            ))
        }
    }
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
