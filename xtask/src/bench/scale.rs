//! `cargo xtask bench scale [--actors N] [--redis URL] [--million] [--heap]`: what one Actor
//! costs the runtime at N Actors and at 8N in the same run, as a ratio (target ≤ 1.25 each).
//!
//! For each size n (N, then 8N; default N = 50,000), on fresh stores (the embedded in-memory
//! Location and Relocation Stores by default, or Redis at `URL` under a fresh key prefix,
//! purged at the end), in this process on one tokio runtime (2 workers):
//!
//! 1. **create**: root A (an Object Server registering `scale.cell`, an 8-byte counter that
//!    is PreserveStateWith) starts alone; n fresh ids are created by `get_or_create` through
//!    A's manager (c=64), so every one lands on A. Per Actor: the wall time / n.
//! 2. **request**: one `Touch` request to each Actor through A's manager (c=64).
//! 3. **memory**: the process's resident set (VmRSS of `/proc/self/status`) after the requests
//!    minus before the creations, / n: the runtime's idle activations, records and caches,
//!    plus — with the in-memory stores — the Store's own records (mimalloc, the allocator of
//!    every bench binary, keeps some freed pages; see `--heap` for exact heap bytes).
//! 4. **relocate**: root B (the same type) starts; A's host Relocate (planned maintenance)
//!    moves all n Actors to B. Per Actor: the Relocate's wall time / moved.
//! 5. **shutdown**: A (relocated, nothing left) stops, then B (n Actors): B's time to the end
//!    of its shutdown / n, with its outcome, its self-sweep and its failures. With the
//!    in-memory stores, a probe of the Store's key count splits it into: before the sweep
//!    (drain, closing the activations), the sweep, and after it (descriptor, lease, tasks).
//!
//! Each root's owner lease health (`ZLinkHost::location_health`) is sampled every 20 ms for
//! the whole run: any sample `Renewing` or `Expired` is a lease at risk or lost, counted.
//!
//! `--million`: 1,000,000 Actors (or `--actors N`) on one root: created, requested once
//! each, shut down within the default 30 s Shutdown deadline; prints each phase, the lease
//! samples, and the peak RSS (VmHWM).
//!
//! `--heap` (`heap.rs`): the exact heap bytes per idle Actor, split between the runtime and the
//! in-memory Location Store, and the allocation sites that hold them, from a `dhat` profile
//! (the bench re-runs itself from a build of xtask with the `dhat` feature, whose global
//! allocator is dhat's).

use super::options;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use zlink_codec::MeshName;
use zlink_codec::records::ObjectRole;
use zlink_runtime::location::LocationOptions;
use zlink_runtime::{
    Actor, ActorManager, ActorStateAdapter, BoxError, Message, RelocateOptions, Request, ZLink,
    ZLinkHost,
};
use zlink_store_spi::{
    DynLocationStore, DynRelocationStore, MemoryLocationStore, MemoryRelocationStore,
};

mod heap;

/// Worker threads of the runtime the roots run on.
const WORKERS: usize = 2;
/// Concurrency of the creations and of the requests.
const C: usize = 64;
const CELL: &str = "scale.cell";
/// How often each root reads the discovery list.
const POLLING: Duration = Duration::from_millis(100);
/// How long the roots may take to see each other.
const SETUP: Duration = Duration::from_secs(30);
/// The Relocate's deadline (8N Actors may take minutes).
const RELOCATE_DEADLINE: Duration = Duration::from_secs(1800);
/// The largest N (8N is then 1,000,000).
const MAX_N: usize = 125_000;
/// The target of every 8N / N ratio.
const TARGET_RATIO: f64 = 1.25;

/// A counter.
pub(super) struct Cell {
    n: u64,
}
impl Actor for Cell {}

/// The counter as 8 bytes, little-endian.
struct CellAdapter;
impl ActorStateAdapter<Cell> for CellAdapter {
    fn capture(&self, cell: &Cell) -> Result<Vec<u8>, BoxError> {
        Ok(cell.n.to_le_bytes().to_vec())
    }
    fn restore(&self, bytes: &[u8]) -> Result<Cell, BoxError> {
        let n = <[u8; 8]>::try_from(bytes).map_err(|_| "a cell's state is 8 bytes")?;
        Ok(Cell {
            n: u64::from_le_bytes(n),
        })
    }
}

/// Adds one to the counter; replies with the new count.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Touch;
impl Message for Touch {
    const PACKET: &'static str = "Touch";
}
impl Request for Touch {
    type Reply = u64;
}

#[derive(Debug, Clone, PartialEq)]
struct Args {
    actors: usize,
    redis: Option<String>,
    million: bool,
    heap: bool,
    /// Set by the `--heap` parent for the run inside the dhat build.
    heap_child: bool,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        actors: 0,
        redis: None,
        million: false,
        heap: false,
        heap_child: false,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--actors" => {
                parsed.actors = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| (1..=1_000_000).contains(n))
                    .ok_or("bench scale: --actors needs a number in 1..=1000000")?;
            }
            "--redis" => parsed.redis = Some(options::url("scale", it.next())?),
            "--million" => parsed.million = true,
            "--heap" => parsed.heap = true,
            "--heap-child" => parsed.heap_child = true,
            other => {
                return Err(format!(
                    "bench scale: unknown option `{other}` (known: --actors N, --redis URL, \
                     --million, --heap)"
                ));
            }
        }
    }
    if parsed.million && parsed.heap {
        return Err("bench scale: --million and --heap do not go together".into());
    }
    if parsed.actors == 0 {
        parsed.actors = if parsed.million {
            1_000_000
        } else if parsed.heap {
            heap::DEFAULT_ACTORS
        } else {
            50_000
        };
    }
    if !parsed.million && !parsed.heap && parsed.actors > MAX_N {
        return Err(format!(
            "bench scale: --actors is N, run with 8N after it: at most {MAX_N}"
        ));
    }
    Ok(parsed)
}

fn to_string(e: impl std::fmt::Display) -> String {
    e.to_string()
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let args = parse(args)?;
    if args.heap && !args.heap_child {
        return heap::rerun_with_dhat(args.actors, args.redis.as_deref());
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .map_err(to_string)?;
    if args.heap {
        return rt.block_on(heap::profile(args.actors, args.redis.as_deref()));
    }
    if args.million {
        return rt.block_on(million(&args));
    }
    rt.block_on(n_and_8n(&args))
}

/// The per-Actor figures of one size.
#[derive(Debug, Clone, Copy, Default)]
struct Row {
    n: usize,
    create: Duration,
    request: Duration,
    /// Resident bytes per idle Actor.
    memory: f64,
    relocate: Duration,
    shutdown: Duration,
}

async fn n_and_8n(args: &Args) -> Result<(), String> {
    let n = args.actors;
    println!(
        "scale bench ({} build, in-process, {WORKERS} tokio workers): per-Actor cost at N = {n} \
         and 8N = {}, {}",
        mode(),
        8 * n,
        backend_name(args.redis.as_deref())
    );
    let small = one_size(n, args.redis.as_deref()).await?;
    let large = one_size(8 * n, args.redis.as_deref()).await?;
    print_table(&small, &large);
    Ok(())
}

fn mode() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

fn backend_name(redis: Option<&str>) -> String {
    match redis {
        None => "embedded in-memory Location and Relocation Stores".to_owned(),
        Some(url) => format!("Redis Location and Relocation Stores at {url}"),
    }
}

fn print_table(small: &Row, large: &Row) {
    println!();
    println!(
        "per Actor                  {:>14} {:>14} {:>10}",
        format!("N = {}", small.n),
        format!("8N = {}", large.n),
        "8N / N"
    );
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let rows: [(&str, f64, f64, &str); 5] = [
        ("create", us(small.create), us(large.create), "us"),
        ("request", us(small.request), us(large.request), "us"),
        (
            "relocate (host Relocate)",
            us(small.relocate),
            us(large.relocate),
            "us",
        ),
        (
            "shutdown (to Stopped)",
            us(small.shutdown),
            us(large.shutdown),
            "us",
        ),
        ("memory (RSS, idle)", small.memory, large.memory, "B"),
    ];
    for (name, a, b, unit) in rows {
        let ratio = b / a;
        println!(
            "{name:<26} {:>11.2} {unit:<2} {:>11.2} {unit:<2} {ratio:>9.2}x{}",
            a,
            b,
            if ratio <= TARGET_RATIO {
                ""
            } else {
                "  (over the 1.25x target)"
            }
        );
    }
}

/// The stores of one size's roots.
struct Stores {
    location: Vec<Arc<dyn DynLocationStore>>,
    relocation: Vec<Arc<dyn DynRelocationStore>>,
    /// The in-memory Location Store (its key count marks the shutdown's sweep).
    memory: Option<MemoryLocationStore>,
    /// The Redis URL and key prefix to purge.
    redis: Option<(String, String)>,
}

impl Stores {
    /// Stores for `roots` roots: one shared in-memory pair, or a connection pair each to Redis
    /// under a fresh prefix.
    async fn new(redis: Option<&str>, roots: usize) -> Result<Self, String> {
        let Some(url) = redis else {
            let memory = MemoryLocationStore::new();
            let location: Arc<dyn DynLocationStore> = Arc::new(memory.clone());
            let relocation: Arc<dyn DynRelocationStore> = Arc::new(MemoryRelocationStore::new());
            return Ok(Self {
                location: vec![location; roots],
                relocation: vec![relocation; roots],
                memory: Some(memory),
                redis: None,
            });
        };
        use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
        use zlink_redis_relocation::{RedisRelocationOptions, RedisRelocationStore};
        let prefix = format!("zlink-bench-scale-{}", uuid::Uuid::new_v4().simple());
        let mut stores = Self {
            location: Vec::new(),
            relocation: Vec::new(),
            memory: None,
            redis: Some((url.to_owned(), prefix.clone())),
        };
        for _ in 0..roots {
            let o = RedisLocationOptions::from_url(url)
                .and_then(|o| o.with_key_prefix(prefix.clone()))
                .map_err(|e| format!("--redis {url}: {e}"))?;
            let l = RedisLocationStore::connect(o)
                .await
                .map_err(|e| format!("connecting to {url}: {e}"))?;
            let o = RedisRelocationOptions::from_url(url)
                .and_then(|o| o.with_key_prefix(prefix.clone()))
                .map_err(|e| format!("--redis {url}: {e}"))?;
            let r = RedisRelocationStore::connect(o)
                .await
                .map_err(|e| format!("connecting to {url}: {e}"))?;
            stores.location.push(Arc::new(l));
            stores.relocation.push(Arc::new(r));
        }
        Ok(stores)
    }

    /// Deletes what a Redis run wrote.
    async fn purge(self) {
        let redis = self.redis.clone();
        drop(self);
        if let Some((url, prefix)) = redis {
            match super::purge_prefix(&url, &prefix).await {
                Ok(n) => println!("   purged {n} Redis key(s) under {prefix}"),
                Err(e) => println!("   could not purge {prefix}: {e}"),
            }
        }
    }
}

pub(super) fn mesh() -> Result<MeshName, String> {
    MeshName::new("scale").map_err(to_string)
}

/// Starts root `k` of `stores`: an Object Server registering the cell.
async fn start_root(stores: &Stores, k: usize) -> Result<ZLinkHost, String> {
    ZLink::builder()
        .location_store(Arc::clone(&stores.location[k]))
        .relocation_store(Arc::clone(&stores.relocation[k]))
        .location_options(LocationOptions::default().polling_interval(POLLING))
        .application_version(1)
        .route_mesh(mesh()?, |n| {
            n.object_role(ObjectRole::Server)
                .actor_type::<Cell>(CELL, |t| {
                    t.factory(|_ctx| async { Ok(Cell { n: 0 }) })
                        .preserve_state_with(CellAdapter)
                        .on_request::<Touch, _>(|c, _t, _ctx| {
                            Box::pin(async move {
                                c.n += 1;
                                Ok(c.n)
                            })
                        })
                })
        })
        .build()
        .start()
        .await
        .map_err(|e| format!("a root did not start: {e}"))
}

/// The owner lease health of some roots, sampled every 20 ms until dropped.
pub(super) struct LeaseWatch {
    /// Samples whose lease was `Renewing` (a renew failed) or `Expired` (lost).
    renewing: Arc<AtomicU64>,
    expired: Arc<AtomicU64>,
    samples: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl LeaseWatch {
    pub(super) fn start(hosts: Vec<ZLinkHost>) -> Self {
        let w = Self {
            renewing: Arc::default(),
            expired: Arc::default(),
            samples: Arc::default(),
            stop: Arc::default(),
        };
        let (renewing, expired, samples, stop) = (
            Arc::clone(&w.renewing),
            Arc::clone(&w.expired),
            Arc::clone(&w.samples),
            Arc::clone(&w.stop),
        );
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                for h in &hosts {
                    if let Some(health) = h.location_health() {
                        samples.fetch_add(1, Ordering::Relaxed);
                        match health.owner_lease.state {
                            zlink_runtime::status::LeaseState::Renewing => {
                                renewing.fetch_add(1, Ordering::Relaxed);
                            }
                            zlink_runtime::status::LeaseState::Expired => {
                                expired.fetch_add(1, Ordering::Relaxed);
                            }
                            _ => {}
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        w
    }

    /// Samples taken, `Renewing` ones, `Expired` ones.
    pub(super) fn counts(&self) -> (u64, u64, u64) {
        (
            self.samples.load(Ordering::Relaxed),
            self.renewing.load(Ordering::Relaxed),
            self.expired.load(Ordering::Relaxed),
        )
    }

    pub(super) fn describe(&self) -> String {
        let (samples, renewing, expired) = self.counts();
        format!(
            "owner lease sampled {samples} times every 20 ms: {renewing} Renewing (a renew \
             failed), {expired} Expired (lost)"
        )
    }
}

impl Drop for LeaseWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// VmRSS and VmHWM of this process, in bytes (0 when `/proc` cannot be read).
pub(super) fn rss() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

pub(super) fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The first creation, retried until the root's placement lists itself (its own descriptor
/// read); the probe is destroyed again so that only the measured Actors stay.
pub(super) async fn first_creation(actors: &ActorManager) -> Result<(), String> {
    let deadline = Instant::now() + SETUP;
    loop {
        match actors.get_or_create(CELL, "probe").await {
            Ok(r) => {
                actors
                    .destroy(&r)
                    .await
                    .map_err(|e| format!("destroying the probe: {e}"))?;
                return Ok(());
            }
            Err(e) if Instant::now() >= deadline => return Err(format!("creating a probe: {e}")),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// The ids of `n` Actors.
pub(super) fn ids(n: usize) -> Arc<Vec<String>> {
    Arc::new((0..n).map(|i| format!("cell-{i}")).collect())
}

/// Runs `job` for every id on C tasks; the wall time.
pub(super) async fn each<F, Fut>(ids: &Arc<Vec<String>>, job: F) -> Result<Duration, String>
where
    F: Fn(String) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), String>> + Send,
{
    let job = Arc::new(job);
    let next = Arc::new(AtomicUsize::new(0));
    let t = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..C {
        let (job, next, ids) = (Arc::clone(&job), Arc::clone(&next), Arc::clone(ids));
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(id) = ids.get(i) else {
                    return Ok::<(), String>(());
                };
                if let Err(e) = job(id.clone()).await {
                    next.store(ids.len(), Ordering::Relaxed);
                    return Err(e);
                }
            }
        }));
    }
    for task in tasks {
        task.await.map_err(to_string)??;
    }
    Ok(t.elapsed())
}

/// Creates every id on the root of `actors`.
pub(super) async fn create_all(
    actors: &ActorManager,
    ids: &Arc<Vec<String>>,
) -> Result<Duration, String> {
    let actors = actors.clone();
    each(ids, move |id| {
        let actors = actors.clone();
        async move {
            actors
                .get_or_create(CELL, &id)
                .await
                .map(drop)
                .map_err(|e| format!("creating {id}: {e}"))
        }
    })
    .await
}

/// One `Touch` to every id; each must answer 1 (its first).
pub(super) async fn touch_all(
    actors: &ActorManager,
    ids: &Arc<Vec<String>>,
) -> Result<Duration, String> {
    let actors = actors.clone();
    each(ids, move |id| {
        let actors = actors.clone();
        async move {
            match actors.request(&id, &Touch).await {
                Ok(1) => Ok(()),
                Ok(n) => Err(format!("{id} answered {n}, not 1")),
                Err(e) => Err(format!("request {id}: {e}")),
            }
        }
    })
    .await
}

/// Per Actor.
fn per(d: Duration, n: usize) -> Duration {
    d / u32::try_from(n.max(1)).unwrap_or(u32::MAX)
}

/// One size: create, request, memory, relocate, shutdown.
async fn one_size(n: usize, redis: Option<&str>) -> Result<Row, String> {
    println!();
    println!("== {n} Actors ==");
    let stores = Stores::new(redis, 2).await?;
    let mut hosts = Vec::new();
    let measured = measure(n, &stores, &mut hosts).await;
    // A failed run still stops what it started.
    for h in &hosts {
        if h.status().shutdown.is_none() {
            let _ = h.shutdown().await;
        }
    }
    drop(hosts);
    stores.purge().await;
    measured
}

async fn measure(n: usize, stores: &Stores, hosts: &mut Vec<ZLinkHost>) -> Result<Row, String> {
    let mut row = Row {
        n,
        ..Row::default()
    };
    hosts.push(start_root(stores, 0).await?);
    let a = hosts[0].actors().map_err(to_string)?;
    let mut watch_a = Some(LeaseWatch::start(vec![hosts[0].clone()]));
    first_creation(&a).await?;
    let ids = ids(n);
    let (rss0, _) = rss();
    let took = create_all(&a, &ids).await?;
    row.create = per(took, n);
    println!(
        "   create:   {n} Actors on A in {:.2} s ({:.0}/s)",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64()
    );
    let took = touch_all(&a, &ids).await?;
    row.request = per(took, n);
    println!(
        "   request:  one to each in {:.2} s ({:.0}/s)",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64()
    );
    let (rss1, _) = rss();
    row.memory = rss1.saturating_sub(rss0) as f64 / n as f64;
    println!(
        "   memory:   RSS {:.1} MiB before the creations, {:.1} MiB idle after the requests: \
         {:.0} B per Actor",
        mib(rss0),
        mib(rss1),
        row.memory
    );

    hosts.push(start_root(stores, 1).await?);
    wait_ready_peers(hosts).await?;
    let watch_b = LeaseWatch::start(vec![hosts[1].clone()]);
    let t = Instant::now();
    let r = hosts[0]
        .relocate(RelocateOptions::planned_maintenance().deadline(RELOCATE_DEADLINE))
        .await
        .map_err(|e| format!("relocate: {e}"))?;
    let took = t.elapsed();
    row.relocate = per(took, r.moved);
    println!(
        "   relocate: host Relocate A -> B {:?}/{:?}, moved {}, remaining {} in {:.2} s \
         ({:.0} moves/s)",
        r.outcome,
        r.reason,
        r.moved,
        r.remaining,
        took.as_secs_f64(),
        r.moved as f64 / took.as_secs_f64()
    );
    if r.moved != n {
        return Err(format!("the Relocate moved {} of {n} Actors", r.moved));
    }

    let t = Instant::now();
    let report_a = hosts[0].shutdown().await;
    println!(
        "   shutdown of A (relocated, nothing live): {:.2} s, {}",
        t.elapsed().as_secs_f64(),
        describe_report(&report_a)
    );
    if let Some(w) = watch_a.take() {
        println!("   A: {}", w.describe());
    }
    let probe = stores.memory.clone().map(SweepProbe::start);
    let t = Instant::now();
    let report_b = hosts[1].shutdown().await;
    let took = t.elapsed();
    row.shutdown = per(took, n);
    println!(
        "   shutdown of B ({n} Actors): {:.2} s, {}",
        took.as_secs_f64(),
        describe_report(&report_b)
    );
    if let Some(p) = probe {
        println!("   {}", p.finish(t).await);
    }
    println!("   B: {}", watch_b.describe());
    Ok(row)
}

/// Waits (bounded) until each root sees every other as a Ready peer, then two discovery reads
/// more so each one's placement lists the others.
async fn wait_ready_peers(hosts: &[ZLinkHost]) -> Result<(), String> {
    let mesh = mesh()?;
    let deadline = Instant::now() + SETUP;
    for h in hosts {
        let node = h.node(&mesh).ok_or("a root has no node")?;
        while node
            .status()
            .peers
            .iter()
            .filter(|p| p.weights.is_some())
            .count()
            < hosts.len() - 1
        {
            if Instant::now() >= deadline {
                return Err(format!("no Ready peers after {SETUP:?}"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    tokio::time::sleep(POLLING * 3).await;
    Ok(())
}

pub(super) fn describe_report(r: &zlink_runtime::status::ShutdownReport) -> String {
    let sweep = r
        .sweep
        .as_ref()
        .map(|s| format!("swept {} authority row(s)", s.removed))
        .unwrap_or_else(|| "no sweep".to_owned());
    let failures: Vec<String> = r.failures.iter().map(|f| f.to_string()).collect();
    format!(
        "{:?}/{:?}, {sweep}, {} abandoned, {} failure(s){}",
        r.outcome,
        r.reason,
        r.abandoned,
        failures.len(),
        if failures.is_empty() {
            String::new()
        } else {
            format!(": {}", failures.join("; "))
        }
    )
}

/// The in-memory Location Store's key count, read every 5 ms during a shutdown: the sweep is
/// the span over which it falls.
pub(super) struct SweepProbe {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<(Instant, usize)>>,
}

impl SweepProbe {
    pub(super) fn start(store: MemoryLocationStore) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let task = tokio::spawn(async move {
            let mut seen = vec![(Instant::now(), store.key_count())];
            while !s.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(5)).await;
                let keys = store.key_count();
                if seen.last().is_none_or(|(_, k)| *k != keys) {
                    seen.push((Instant::now(), keys));
                }
            }
            seen.push((Instant::now(), store.key_count()));
            seen
        });
        Self { stop, task }
    }

    /// The phases of a shutdown that started at `started`: before the first fall of the key
    /// count, while it falls, and after its last fall.
    pub(super) async fn finish(self, started: Instant) -> String {
        self.stop.store(true, Ordering::Relaxed);
        let Ok(seen) = self.task.await else {
            return "sweep probe failed".to_owned();
        };
        let Some((_, first_keys)) = seen.first().copied() else {
            return "sweep probe saw nothing".to_owned();
        };
        let Some((end, last_keys)) = seen.last().copied() else {
            return "sweep probe saw nothing".to_owned();
        };
        let falls: Vec<Instant> = seen
            .windows(2)
            .filter(|w| w[1].1 < w[0].1)
            .map(|w| w[1].0)
            .collect();
        let (Some(first), Some(last)) = (falls.first(), falls.last()) else {
            return format!("store keys {first_keys} -> {last_keys}: no sweep seen");
        };
        let s = |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64();
        format!(
            "phases by the Store's key count ({first_keys} -> {last_keys}): before the sweep \
             (drain, closing activations) {:.2} s, sweep {:.2} s, after it (descriptor, lease, \
             tasks) {:.2} s",
            s(started, *first),
            s(*first, *last),
            s(*last, end)
        )
    }
}

/// `--million`: N Actors (default 1,000,000) on one root.
async fn million(args: &Args) -> Result<(), String> {
    let n = args.actors;
    println!(
        "scale bench --million ({} build, in-process, {WORKERS} tokio workers): {n} Actors on \
         one root, {}",
        mode(),
        backend_name(args.redis.as_deref())
    );
    let stores = Stores::new(args.redis.as_deref(), 1).await?;
    let mut hosts = Vec::new();
    let result = million_on(n, &stores, &mut hosts).await;
    for h in &hosts {
        if h.status().shutdown.is_none() {
            let _ = h.shutdown().await;
        }
    }
    drop(hosts);
    stores.purge().await;
    result
}

async fn million_on(n: usize, stores: &Stores, hosts: &mut Vec<ZLinkHost>) -> Result<(), String> {
    let started = Instant::now();
    hosts.push(start_root(stores, 0).await?);
    let host = hosts[0].clone();
    let watch = LeaseWatch::start(vec![host.clone()]);
    let actors = host.actors().map_err(to_string)?;
    first_creation(&actors).await?;
    let ids = ids(n);
    let (rss0, _) = rss();
    let took = create_all(&actors, &ids).await?;
    println!(
        "create:   {n} Actors in {:.2} s ({:.0}/s, {:.2} us each)",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64(),
        per(took, n).as_secs_f64() * 1e6
    );
    let took = touch_all(&actors, &ids).await?;
    println!(
        "request:  one to each in {:.2} s ({:.0}/s, {:.2} us each)",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64(),
        per(took, n).as_secs_f64() * 1e6
    );
    let (rss1, peak) = rss();
    println!(
        "memory:   RSS {:.0} MiB before the creations, {:.0} MiB idle ({:.0} B per Actor), \
         peak so far {:.0} MiB",
        mib(rss0),
        mib(rss1),
        rss1.saturating_sub(rss0) as f64 / n as f64,
        mib(peak)
    );
    let live: u64 = host.status().live.iter().map(|l| l.actors).sum();
    let probe = stores.memory.clone().map(SweepProbe::start);
    let t = Instant::now();
    let report = host.shutdown().await;
    let took = t.elapsed();
    println!(
        "shutdown: {live} live Actors, {:.2} s (default deadline 30 s), {}",
        took.as_secs_f64(),
        describe_report(&report)
    );
    if let Some(p) = probe {
        println!("          {}", p.finish(t).await);
    }
    let (_, renewing, expired) = watch.counts();
    println!("lease:    {}", watch.describe());
    let (_, peak) = rss();
    println!(
        "peak RSS {:.0} MiB; total {:.1} s",
        mib(peak),
        started.elapsed().as_secs_f64()
    );
    let stopped = report.outcome == zlink_runtime::status::ShutdownOutcome::Stopped;
    if stopped && renewing + expired == 0 && took <= Duration::from_secs(30) {
        println!(
            "million: passed (Stopped within the deadline, no lease sample Renewing or Expired)"
        );
    } else {
        println!("million: NOT passed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::bench::options::args;

    #[test]
    fn options_parse_and_unknown_ones_are_refused() {
        let a = parse(&args(&["--actors", "1000", "--redis", "redis://h"])).unwrap();
        assert_eq!((a.actors, a.redis.as_deref()), (1000, Some("redis://h")));
        assert_eq!(parse(&[]).unwrap().actors, 50_000);
        let m = parse(&args(&["--million"])).unwrap();
        assert!(m.million && m.actors == 1_000_000);
        assert_eq!(parse(&args(&["--actors", "125000"])).unwrap().actors, MAX_N);
        assert!(parse(&args(&["--actors", "125001"])).is_err());
        assert!(parse(&args(&["--million", "--actors", "125001"])).is_ok());
        assert!(parse(&args(&["--actors", "0"])).is_err());
        assert!(parse(&args(&["--heap", "--million"])).is_err());
        assert!(parse(&args(&["--fast"])).is_err());
    }

    #[test]
    fn the_status_file_gives_the_resident_set() {
        let (rss, peak) = rss();
        assert!(rss > 0 && peak >= rss);
    }
}
