//! `cargo xtask bench scale [--actors N] [--redis URL] [--host-relocate] [--million]
//! [--heap]`: what one Actor costs the runtime at N Actors and at 8N in the same run, as a
//! ratio (target ≤ 1.25 each).
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
//! 4. **relocate**: root B (the same type) starts; 2,000 of the n Actors (every n/2,000th)
//!    move from A to B by `relocate_object`, c=16, so the figure at 8N is a move among 8N
//!    Actors, not 8N moves (a host Relocate moves under 1,000 Actors a second on the in-memory
//!    stores: 8N would take many minutes). `--host-relocate`: A's host Relocate (planned
//!    maintenance) moves all n instead. Per Actor: the wall time / moved.
//! 5. **shutdown**: the root with fewer Actors stops first, then the other: its time to the
//!    end of its shutdown / its live Actors is the figure, printed with its outcome, its
//!    self-sweep and its failures. With the in-memory stores, a probe of the Store's key count
//!    splits it into: before the sweep (drain, closing the activations), the sweep, and after
//!    it (descriptor, lease, tasks).
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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use zlink_codec::MeshName;
use zlink_codec::records::ObjectRole;
use zlink_runtime::location::LocationOptions;
use zlink_runtime::{
    Actor, ActorManager, BoxError, Message, Request, ZLink, ZLinkHost,
    relocate::{ActorStateAdapter, RelocateOptions},
};
use zlink_store_spi::{
    DynLocationStore, DynRelocationStore, MemoryLocationStore, MemoryRelocationStore,
};

mod heap;
mod million;
mod watch;

use watch::{LeaseWatch, SweepProbe, describe_report, mib, rss};

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
/// Actors moved by `relocate_object` at each size (every (n / SAMPLE)th one): a host Relocate
/// of 8N Actors takes minutes at the in-memory stores' move rate (`--host-relocate` runs it).
const SAMPLE: usize = 2_000;
/// Concurrent `relocate_object` calls.
const RELOCATE_C: usize = 16;
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
    /// `--host-relocate`: move every Actor by a host Relocate (else a sample by
    /// `relocate_object`).
    host_relocate: bool,
    /// Set by the `--heap` parent for the run inside the dhat build.
    heap_child: bool,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        actors: 0,
        redis: None,
        million: false,
        heap: false,
        host_relocate: false,
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
            "--host-relocate" => parsed.host_relocate = true,
            "--heap-child" => parsed.heap_child = true,
            other => {
                return Err(format!(
                    "bench scale: unknown option `{other}` (known: --actors N, --redis URL, \
                     --host-relocate, --million, --heap)"
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
        return rt.block_on(million::million(&args));
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
    let small = one_size(n, args.host_relocate, args.redis.as_deref()).await?;
    let large = one_size(8 * n, args.host_relocate, args.redis.as_deref()).await?;
    print_table(&small, &large, args.host_relocate);
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

fn print_table(small: &Row, large: &Row, host_relocate: bool) {
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
            if host_relocate {
                "relocate (host Relocate)"
            } else {
                "relocate (relocate_object)"
            },
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
            let (u, p) = (url.clone(), prefix.clone());
            let left = tokio::task::spawn_blocking(move || {
                crate::faults::store::keys_left_by_kind(&zlink_cli::redis::Target::Single(u), &p)
            })
            .await;
            match left {
                Ok(Ok(by_kind)) => {
                    let total: usize = by_kind.values().sum();
                    let kinds: Vec<String> =
                        by_kind.iter().map(|(k, n)| format!("{n} {k}")).collect();
                    println!(
                        "   keys left before the purge: {total}: {}",
                        kinds.join(", ")
                    );
                }
                Ok(Err(e)) => println!("   could not list the keys left: {e}"),
                Err(e) => println!("   could not list the keys left: {e}"),
            }
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
    start_root_with(
        stores,
        k,
        LocationOptions::default().polling_interval(POLLING),
    )
    .await
}

/// [`start_root`] with `options`.
async fn start_root_with(
    stores: &Stores,
    k: usize,
    options: LocationOptions,
) -> Result<ZLinkHost, String> {
    ZLink::builder()
        .location_store(Arc::clone(&stores.location[k]))
        .relocation_store(Arc::clone(&stores.relocation[k]))
        .location_options(options)
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

/// Moves `sample` of the Actors (every (ids / sample)th one) from `host` to `target` by
/// `relocate_object`, c=[`RELOCATE_C`]; the wall time. Each must move.
async fn relocate_sample(
    host: &ZLinkHost,
    actors: &ActorManager,
    ids: &Arc<Vec<String>>,
    sample: usize,
    target: &zlink_codec::RoutingId,
) -> Result<Duration, String> {
    let step = (ids.len() / sample.max(1)).max(1);
    let mut refs = Vec::new();
    for id in ids.iter().step_by(step).take(sample) {
        let r = actors
            .find(id)
            .await
            .map_err(|e| format!("find {id}: {e}"))?
            .ok_or_else(|| format!("{id} is gone"))?;
        refs.push(r);
    }
    let refs = Arc::new(parking_lot::Mutex::new(refs));
    let t = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..RELOCATE_C {
        let (refs, host, target) = (Arc::clone(&refs), host.clone(), target.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let Some(r) = refs.lock().pop() else {
                    return Ok::<(), String>(());
                };
                let id = r.id.clone();
                let moved = host
                    .relocate_object(
                        r,
                        zlink_runtime::relocate::ObjectTarget::Node(target.clone()),
                    )
                    .await
                    .map_err(|e| format!("relocate_object {id}: {e}"))?;
                if moved.target != target {
                    return Err(format!("{id} moved to {}, not B", moved.target));
                }
            }
        }));
    }
    for task in tasks {
        task.await.map_err(to_string)??;
    }
    Ok(t.elapsed())
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
async fn one_size(n: usize, host_relocate: bool, redis: Option<&str>) -> Result<Row, String> {
    println!();
    println!("== {n} Actors ==");
    let stores = Stores::new(redis, 2).await?;
    let mut hosts = Vec::new();
    let measured = measure(n, host_relocate, &stores, &mut hosts).await;
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

async fn measure(
    n: usize,
    host_relocate: bool,
    stores: &Stores,
    hosts: &mut Vec<ZLinkHost>,
) -> Result<Row, String> {
    let mut row = Row {
        n,
        ..Row::default()
    };
    hosts.push(start_root(stores, 0).await?);
    let a = hosts[0].actors().map_err(to_string)?;
    let watch_a = LeaseWatch::start(vec![hosts[0].clone()]);
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
    let (took, moved) = if host_relocate {
        let t = Instant::now();
        let r = hosts[0]
            .relocate(RelocateOptions::planned_maintenance().deadline(RELOCATE_DEADLINE))
            .await
            .map_err(|e| format!("relocate: {e}"))?;
        let took = t.elapsed();
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
        (took, r.moved)
    } else {
        let sample = n.min(SAMPLE);
        let b = hosts[1]
            .node(&mesh()?)
            .ok_or("root B has no node")?
            .routing_id()
            .clone();
        let took = relocate_sample(&hosts[0], &a, &ids, sample, &b).await?;
        println!(
            "   relocate: relocate_object A -> B of {sample} of the {n} Actors (every \
             {}th), c={RELOCATE_C}, in {:.2} s ({:.0} moves/s)",
            n / sample,
            took.as_secs_f64(),
            sample as f64 / took.as_secs_f64()
        );
        (took, sample)
    };
    row.relocate = per(took, moved);

    // The root with fewer Actors stops first; the other one's shutdown is the figure.
    let live = |h: &ZLinkHost| -> u64 { h.status().live.iter().map(|l| l.actors).sum() };
    let order: Vec<usize> = if live(&hosts[0]) >= live(&hosts[1]) {
        vec![1, 0]
    } else {
        vec![0, 1]
    };
    let mut watches = [Some(watch_a), Some(watch_b)];
    for (step, k) in order.into_iter().enumerate() {
        let name = ["A", "B"][k];
        let count = live(&hosts[k]);
        let probe = (step == 1)
            .then(|| stores.memory.clone().map(SweepProbe::start))
            .flatten();
        let t = Instant::now();
        let report = hosts[k].shutdown().await;
        let took = t.elapsed();
        println!(
            "   shutdown of {name} ({count} live Actors): {:.2} s, {}",
            took.as_secs_f64(),
            describe_report(&report)
        );
        if let Some(p) = probe {
            println!("   {}", p.finish(t).await);
        }
        if let Some(w) = watches[k].take() {
            println!("   {name}: {}", w.describe());
        }
        if step == 1 {
            row.shutdown = per(took, usize::try_from(count).unwrap_or(usize::MAX));
        }
    }
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
}
