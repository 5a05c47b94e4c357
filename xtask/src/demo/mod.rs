//! `cargo xtask demo [--redis URL [--keep]] [--metrics ADDR] [--actors N] [--requests N] [--instances N] [--concurrency N]`:
//! three ZLink roots in one process, each with one Object Server MeshNode on mesh `demo`
//! (placement weights 100, 200 and 300), sharing one Location Store and one Relocation Store:
//! the embedded in-memory stores by default, or the Redis Location and Relocation Stores at
//! `URL` under a fresh key prefix deleted at the end (kept with `--keep`, for `zlink audit`).
//!
//! The demo waits (bounded) until every node has its two peers, creates `N` Counter Actors by
//! `get_or_create` spread over the three roots' Actor managers, sends the requests by global id
//! (`Incr`, which returns the new count) spread over every manager and every Actor, then reads
//! every counter once more (`Get`) and fails unless each holds exactly the requests sent to it
//! (so their sum is the number of requests). Then it relocates root 1 under load
//! (`relocate.rs`): roots 2 and 3 each run two concurrent sequential streams of numbered
//! `Step` requests to every Actor of root 1 while `relocate(planned_maintenance)` moves them
//! (the Counter type is PreserveStateWith, a JSON adapter); it prints what moved, the steps
//! accepted, answered, refused (by error kind) and timed out, and fails unless none was lost
//! (answered but never run), duplicated, run out of order or run without its answer, each
//! Actor's state is the sum of its steps, its `Incr` count came along and it is on root 2 or
//! 3. This comes before the Instance Spots because a host with a live Spot cannot relocate
//! yet (`StateIncompatible`). Then it creates `--instances` Room Instance Spots (default 100)
//! by cold activation — on roots 2 and 3, root 1 being relocated: a first `Join` by global id
//! with Instance intent, spread over the three roots' Spot managers, each of which must be
//! answered by the new Spot (1 member); a second `Join` from another root must reach the same
//! Spot (2 members). It prints where the Actors (at creation) and Instance Spots were placed
//! against the weights, creation, activation and request throughput, request latency, and
//! each root's shutdown.
//!
//! `--metrics ADDR` installs a Prometheus recorder before the roots are built and serves it on
//! `ADDR` (`metrics.rs`); after the shutdown the demo scrapes it once and fails unless it
//! shows every instrument `docs/metrics.md` lists.
//!
//! `--release` runs the demo from an optimised build of xtask (built on first use); without
//! it the demo runs from the debug build `cargo xtask` uses.
//!
//! Only the public API of `zlink-runtime` is used.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use zlink_codec::records::ObjectRole;
use zlink_codec::{MeshName, RoutingId};
use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
use zlink_redis_relocation::{RedisRelocationOptions, RedisRelocationStore};
use zlink_runtime::ActorManager;
use zlink_runtime::ZLink;
use zlink_runtime::ZLinkHost;
use zlink_runtime::location::LocationOptions;
use zlink_store_spi::{
    DynLocationStore, DynRelocationStore, MemoryLocationStore, MemoryRelocationStore,
};

use self::relocate::{Counter, Get, Incr};

pub(crate) mod metrics;
mod relocate;
mod rooms;

/// The placement weights of the three roots' Object Server nodes.
const WEIGHTS: [i64; 3] = [100, 200, 300];
/// How often each root reads the discovery list (short, so the roots find each other quickly).
const POLLING: Duration = Duration::from_millis(200);
/// How long the roots may take to see each other.
const SETUP: Duration = Duration::from_secs(20);
/// The registered Actor type.
const COUNTER: &str = "counter";

/// What the demo is asked to do.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) redis: Option<String>,
    pub(crate) actors: usize,
    pub(crate) requests: usize,
    /// Instance Spots created by cold activation.
    pub(crate) instances: usize,
    pub(crate) concurrency: usize,
    /// Whether to draw progress bars (on a terminal only).
    pub(crate) progress: bool,
    /// With `--redis`: keep the records under the demo's prefix (for `zlink audit`).
    pub(crate) keep: bool,
    /// `--metrics ADDR`: serve Prometheus text on `ADDR` and scrape it at the end
    /// (`metrics.rs`).
    pub(crate) metrics: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            redis: None,
            actors: 10_000,
            requests: 100_000,
            instances: 100,
            concurrency: 64,
            progress: true,
            keep: false,
            metrics: None,
        }
    }
}

fn parse(args: &[String]) -> Result<Config, String> {
    let mut cfg = Config::default();
    let mut it = args.iter();
    let number = |v: Option<&String>, flag: &str, max: usize| {
        v.and_then(|n| n.parse::<usize>().ok())
            .filter(|n| (1..=max).contains(n))
            .ok_or(format!("demo: {flag} needs a number, 1..={max}"))
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--redis" => cfg.redis = Some(it.next().ok_or("demo: --redis needs a URL")?.clone()),
            "--actors" => cfg.actors = number(it.next(), "--actors", 1_000_000)?,
            "--requests" => cfg.requests = number(it.next(), "--requests", 100_000_000)?,
            "--instances" => cfg.instances = number(it.next(), "--instances", 1_000_000)?,
            "--concurrency" => cfg.concurrency = number(it.next(), "--concurrency", 10_000)?,
            "--keep" => cfg.keep = true,
            "--metrics" => {
                cfg.metrics = Some(it.next().ok_or("demo: --metrics needs host:port")?.clone())
            }
            other => {
                return Err(format!(
                    "demo: unknown option `{other}` (known: --redis URL, --keep, --metrics ADDR, --actors N, --requests N, --instances N, --concurrency N, --release)"
                ));
            }
        }
    }
    Ok(cfg)
}

/// What a successful demo measured.
#[derive(Debug)]
pub(crate) struct Summary {
    /// Actors owned by each node, in root order.
    pub(crate) owned: Vec<usize>,
    /// Instance Spots owned by each node, in root order.
    pub(crate) spots_owned: Vec<usize>,
    /// The sum of every counter read at the end.
    pub(crate) counted: u64,
    /// Requests answered.
    pub(crate) requests: usize,
    /// The relocation of root 1 under load.
    pub(crate) relocation: relocate::Relocation,
    /// With `--metrics`: each documented instrument and its series in the final scrape.
    pub(crate) metrics: Vec<(String, usize)>,
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    if args.iter().any(|a| a == "--release") {
        let rest: Vec<&String> = args.iter().filter(|a| *a != "--release").collect();
        if cfg!(debug_assertions) {
            // Run this command again from an optimised build of xtask.
            return crate::rerun_in_release("demo", &rest, "demo");
        }
        let rest: Vec<String> = rest.into_iter().cloned().collect();
        return run(&rest);
    }
    let cfg = parse(args)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let summary = rt.block_on(demo(&cfg))?;
    println!(
        "demo passed: {} of {} requests answered and counted by {} actors; {} actors relocated \
         under {} sequenced requests, none lost, duplicated or out of order; {} instance spots \
         activated by their first message",
        summary.counted,
        summary.requests,
        summary.owned.iter().sum::<usize>(),
        summary.relocation.moved,
        summary.relocation.answered,
        summary.spots_owned.iter().sum::<usize>()
    );
    Ok(())
}

/// Runs the whole demo on the current tokio runtime (a multi-thread one).
pub(crate) async fn demo(cfg: &Config) -> Result<Summary, String> {
    let started = Instant::now();
    let prefix = format!("zlink-demo-{}", uuid::Uuid::new_v4().simple());
    let stores: Vec<Stores> = match &cfg.redis {
        None => {
            println!("zlink demo: 3 roots, embedded in-memory Location and Relocation Stores");
            let location: Arc<dyn DynLocationStore> = Arc::new(MemoryLocationStore::new());
            let relocation: Arc<dyn DynRelocationStore> = Arc::new(MemoryRelocationStore::new());
            vec![(location, relocation); WEIGHTS.len()]
        }
        Some(url) => {
            println!(
                "zlink demo: 3 roots, Redis Location and Relocation Stores at {url}, key prefix {prefix}"
            );
            let mut stores = Vec::new();
            for _ in WEIGHTS {
                let options = RedisLocationOptions::from_url(url)
                    .and_then(|o| o.with_key_prefix(prefix.clone()))
                    .map_err(|e| e.to_string())?;
                let location = RedisLocationStore::connect(options)
                    .await
                    .map_err(|e| format!("cannot connect to {url}: {e}"))?;
                let options = RedisRelocationOptions::from_url(url)
                    .and_then(|o| o.with_key_prefix(prefix.clone()))
                    .map_err(|e| e.to_string())?;
                let relocation = RedisRelocationStore::connect(options)
                    .await
                    .map_err(|e| format!("cannot connect to {url}: {e}"))?;
                stores.push((
                    Arc::new(location) as Arc<dyn DynLocationStore>,
                    Arc::new(relocation) as Arc<dyn DynRelocationStore>,
                ));
            }
            stores
        }
    };
    println!(
        "{} actors, {} requests, {} instance spots, concurrency {}",
        cfg.actors, cfg.requests, cfg.instances, cfg.concurrency
    );
    // The recorder goes in before any root is built (the runtime resolves its handles then).
    let endpoint = match &cfg.metrics {
        Some(addr) => Some(metrics::start(addr).await?),
        None => None,
    };
    let result = match start_roots(&stores).await {
        Ok(hosts) => {
            let result = run_on(cfg, &hosts).await;
            let stopped = shut_down(&hosts).await;
            result.and_then(|summary| stopped.map(|()| summary))
        }
        Err(e) => Err(e),
    };
    // Scraped after the shutdown, so the shutdown results show too.
    let result = match (result, endpoint) {
        (Ok(mut summary), Some(addr)) => metrics::report(addr).await.map(|shown| {
            summary.metrics = shown;
            summary
        }),
        (result, _) => result,
    };
    if let (Some(url), true) = (&cfg.redis, cfg.keep) {
        drop(stores);
        println!(
            "kept the Redis keys under {prefix}: `cargo run -p zlink-cli -- --redis {url} --prefix {prefix} audit`"
        );
    } else if let Some(url) = &cfg.redis {
        drop(stores);
        match crate::bench::purge_prefix(url, &prefix).await {
            Ok(n) => println!("purged {n} Redis key(s) under {prefix}"),
            Err(e) => println!("could not purge {prefix}: {e}"),
        }
    }
    println!("total elapsed {:.2} s", started.elapsed().as_secs_f64());
    result
}

/// One root's Location Store and Relocation Store.
type Stores = (Arc<dyn DynLocationStore>, Arc<dyn DynRelocationStore>);

fn mesh() -> Result<MeshName, String> {
    MeshName::new("demo").map_err(|e| e.to_string())
}

/// Starts one root per weight, each over its stores; stops the ones started if one fails.
async fn start_roots(stores: &[Stores]) -> Result<Vec<ZLinkHost>, String> {
    let mesh = mesh()?;
    let mut hosts = Vec::new();
    for ((store, relocation), weight) in stores.iter().zip(WEIGHTS) {
        let started = ZLink::builder()
            .location_store(Arc::clone(store))
            .relocation_store(Arc::clone(relocation))
            .location_options(LocationOptions::default().polling_interval(POLLING))
            .route_mesh(mesh.clone(), |n| {
                n.object_role(ObjectRole::Server)
                    .placement_weight(weight)
                    .actor_type::<Counter>(COUNTER, relocate::counter_type)
                    .instance_spot_type::<rooms::Room>(rooms::ROOM, rooms::room_type)
            })
            .build()
            .start()
            .await;
        match started {
            Ok(host) => hosts.push(host),
            Err(e) => {
                let _ = shut_down(&hosts).await;
                return Err(format!("a root did not start: {e}"));
            }
        }
    }
    Ok(hosts)
}

/// Waits (bounded) until every node has every other as a Ready peer, then two more discovery
/// reads so each one's placement candidates name all three.
async fn wait_for_mesh(hosts: &[ZLinkHost]) -> Result<(), String> {
    let mesh = mesh()?;
    let deadline = Instant::now() + SETUP;
    for host in hosts {
        let node = host.node(&mesh).ok_or("a root has no demo node")?;
        loop {
            let s = node.status();
            let ready = s.peers.iter().filter(|p| p.weights.is_some()).count();
            if ready >= hosts.len() - 1 {
                break;
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "node {} sees {ready} Ready peer(s) after {SETUP:?}, expected {}",
                    s.routing_id,
                    hosts.len() - 1
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    tokio::time::sleep(POLLING * 2 + POLLING / 2).await;
    Ok(())
}

fn bar(cfg: &Config, len: usize, what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(
        Some(len as u64),
        if cfg.progress {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        },
    );
    let style =
        ProgressStyle::with_template("{prefix:>9} [{bar:40}] {pos}/{len} {per_sec} eta {eta}")
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix(what.to_owned());
    bar
}

fn actor_id(i: usize) -> String {
    format!("counter-{i}")
}

/// Runs `total` jobs on `concurrency` tasks; `job(i)` is the i-th one.
async fn parallel<T, F, Fut>(
    concurrency: usize,
    total: usize,
    job: F,
) -> Result<Vec<(usize, T)>, String>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<T, String>> + Send,
{
    let job = Arc::new(job);
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..concurrency.min(total.max(1)) {
        let (job, next) = (Arc::clone(&job), Arc::clone(&next));
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    return Ok::<_, String>(out);
                }
                out.push((i, job(i).await?));
            }
        }));
    }
    let mut all = Vec::with_capacity(total);
    let mut first_error = None;
    for t in tasks {
        match t.await.map_err(|e| e.to_string()) {
            Ok(Ok(out)) => all.extend(out),
            Ok(Err(e)) | Err(e) => {
                // The other tasks stop as soon as they see the end of the range.
                next.store(total, Ordering::Relaxed);
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(all),
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// A RoutingId to print: its text when it is printable ASCII (the default `node-…` form), else
/// its hex; at most 16 characters.
fn short(rid: &RoutingId) -> String {
    let bytes = rid.as_bytes();
    let text = if bytes.iter().all(|b| b.is_ascii_graphic()) {
        String::from_utf8_lossy(bytes).into_owned()
    } else {
        rid.to_hex()
    };
    text.chars().take(16).collect()
}

async fn run_on(cfg: &Config, hosts: &[ZLinkHost]) -> Result<Summary, String> {
    let t = Instant::now();
    wait_for_mesh(hosts).await?;
    println!(
        "mesh formed: every node has {} Ready peers ({:.2} s)",
        hosts.len() - 1,
        t.elapsed().as_secs_f64()
    );
    let managers: Arc<Vec<ActorManager>> = Arc::new(
        hosts
            .iter()
            .map(|h| h.actors().map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?,
    );

    // Create every Actor, spread over the three managers.
    let bar_create = bar(cfg, cfg.actors, "create");
    let t = Instant::now();
    let refs = {
        let (managers, pb) = (Arc::clone(&managers), bar_create.clone());
        parallel(cfg.concurrency, cfg.actors, move |i| {
            let (m, pb) = (managers[i % managers.len()].clone(), pb.clone());
            async move {
                let id = actor_id(i);
                let r = m
                    .get_or_create(COUNTER, &id)
                    .await
                    .map_err(|e| format!("get_or_create {id}: {e}"))?;
                pb.inc(1);
                Ok(r)
            }
        })
        .await?
    };
    let create_secs = t.elapsed().as_secs_f64();
    bar_create.finish_and_clear();
    println!("created {} actors in {create_secs:.2} s", refs.len());

    // The requests: request i goes to actor i % actors through manager i % 3.
    let bar_req = bar(cfg, cfg.requests, "requests");
    let actors = cfg.actors;
    let t = Instant::now();
    let latencies = {
        let (managers, pb) = (Arc::clone(&managers), bar_req.clone());
        parallel(cfg.concurrency, cfg.requests, move |i| {
            let (m, pb) = (managers[i % managers.len()].clone(), pb.clone());
            async move {
                let id = actor_id(i % actors);
                let sent = Instant::now();
                let count = m
                    .request(&id, &Incr)
                    .await
                    .map_err(|e| format!("Incr {id}: {e}"))?;
                let latency = sent.elapsed();
                if count == 0 {
                    return Err(format!("Incr {id} returned 0"));
                }
                pb.inc(1);
                Ok(latency)
            }
        })
        .await?
    };
    let request_secs = t.elapsed().as_secs_f64();
    bar_req.finish_and_clear();
    println!(
        "answered {} requests in {request_secs:.2} s",
        latencies.len()
    );

    // Read every counter once more; each must hold exactly the requests sent to it.
    let bar_check = bar(cfg, cfg.actors, "check");
    let t = Instant::now();
    let counts = {
        let (managers, pb) = (Arc::clone(&managers), bar_check.clone());
        parallel(cfg.concurrency, cfg.actors, move |i| {
            let (m, pb) = (managers[(i + 1) % managers.len()].clone(), pb.clone());
            async move {
                let id = actor_id(i);
                let n = m
                    .request(&id, &Get)
                    .await
                    .map_err(|e| format!("Get {id}: {e}"))?;
                pb.inc(1);
                Ok(n)
            }
        })
        .await?
    };
    bar_check.finish_and_clear();
    let check_secs = t.elapsed().as_secs_f64();
    let mut counted = 0u64;
    let mut wrong = Vec::new();
    // Request i went to actor i % actors.
    let expected =
        |i: usize| (cfg.requests / actors + usize::from(i < cfg.requests % actors)) as u64;
    for (i, n) in &counts {
        counted += n;
        if *n != expected(*i) {
            wrong.push(format!("{}={n} (expected {})", actor_id(*i), expected(*i)));
        }
    }

    // Relocate root 1 under load; its Actors' Incr counts must come along.
    let rids: Vec<RoutingId> = hosts
        .iter()
        .map(|h| {
            h.status()
                .nodes
                .first()
                .map(|n| n.routing_id.clone())
                .ok_or("a root has no node")
        })
        .collect::<Result<_, _>>()?;
    let on_source: Vec<(String, u64)> = refs
        .iter()
        .filter(|(_, r)| r.node == rids[0])
        .map(|(i, _)| (actor_id(*i), expected(*i)))
        .collect();
    let relocation =
        relocate::relocate_under_load(hosts, &managers, &rids, &on_source, cfg.concurrency).await?;

    // Instance Spots by cold activation (root 1 is relocated: no new object is placed there):
    // the first Join by global id with Instance intent creates the room on a node chosen by
    // weight and is answered by it (1 member); a second Join from another root reaches the
    // same room (2 members).
    let (spot_nodes, spot_secs) = rooms::activate(cfg, hosts).await?;

    // Where the Actors and Instance Spots went.
    let mut by_node: BTreeMap<&RoutingId, usize> = BTreeMap::new();
    for (_, r) in &refs {
        *by_node.entry(&r.node).or_default() += 1;
    }
    let owned: Vec<usize> = rids
        .iter()
        .map(|rid| by_node.get(rid).copied().unwrap_or(0))
        .collect();
    let elsewhere = refs.len() - owned.iter().sum::<usize>();
    let spots_owned: Vec<usize> = rids
        .iter()
        .map(|rid| spot_nodes.iter().filter(|(_, n)| n == rid).count())
        .collect();
    let spots_elsewhere = spot_nodes.len() - spots_owned.iter().sum::<usize>();
    let weight_total: i64 = WEIGHTS.iter().sum();
    println!();
    println!(
        "{:<4} {:<16} {:>6} {:>8} {:>12} {:>8} {:>11} {:>12}",
        "root",
        "node RID",
        "weight",
        "actors",
        "actor share",
        "spots",
        "spot share",
        "weight share"
    );
    for (k, rid) in rids.iter().enumerate() {
        println!(
            "{:<4} {:<16} {:>6} {:>8} {:>11.1}% {:>8} {:>10.1}% {:>11.1}%",
            k + 1,
            short(rid),
            WEIGHTS[k],
            owned[k],
            100.0 * owned[k] as f64 / refs.len().max(1) as f64,
            spots_owned[k],
            100.0 * spots_owned[k] as f64 / spot_nodes.len().max(1) as f64,
            100.0 * WEIGHTS[k] as f64 / weight_total as f64
        );
    }
    println!(
        "(actors where they were created — root 1's {} then moved to roots 2 and 3; instance \
         spots created after that, so none on root 1)",
        relocation.moved
    );
    if elsewhere > 0 {
        println!("{elsewhere} actor(s) on a node that is none of the three");
    }
    if spots_elsewhere > 0 {
        println!("{spots_elsewhere} instance spot(s) on a node that is none of the three");
    }
    let mut sorted: Vec<Duration> = latencies.into_iter().map(|(_, d)| d).collect();
    sorted.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!();
    println!(
        "creation   {:>10.0} actors/s",
        refs.len() as f64 / create_secs
    );
    println!(
        "activation {:>10.0} instance spots/s (first Join, second Join, find)",
        spot_nodes.len() as f64 / spot_secs
    );
    println!(
        "requests   {:>10.0} req/s   p50 {:.3} ms   p99 {:.3} ms",
        sorted.len() as f64 / request_secs,
        ms(percentile(&sorted, 0.50)),
        ms(percentile(&sorted, 0.99))
    );
    println!(
        "check      sum of all counters {counted} = {} requests: {} ({} Get requests, {check_secs:.2} s)",
        cfg.requests,
        if wrong.is_empty() && counted == cfg.requests as u64 {
            "ok"
        } else {
            "WRONG"
        },
        counts.len()
    );
    if !wrong.is_empty() || counted != cfg.requests as u64 {
        wrong.truncate(10);
        return Err(format!(
            "the counters do not add up: sum {counted}, expected {}; e.g. {}",
            cfg.requests,
            wrong.join(", ")
        ));
    }
    if elsewhere > 0 || spots_elsewhere > 0 {
        return Err(format!(
            "{elsewhere} actor(s) and {spots_elsewhere} instance spot(s) placed outside the demo's roots"
        ));
    }
    Ok(Summary {
        owned,
        spots_owned,
        counted,
        requests: sorted.len(),
        relocation,
        metrics: Vec::new(),
    })
}

/// Shuts every root down (concurrently) and prints each outcome; fails if one failed.
async fn shut_down(hosts: &[ZLinkHost]) -> Result<(), String> {
    let mut reports = Vec::new();
    for host in hosts {
        let host = host.clone();
        reports.push(tokio::spawn(async move {
            let rid = host
                .status()
                .nodes
                .first()
                .map(|n| short(&n.routing_id))
                .unwrap_or_default();
            (rid, host.shutdown().await)
        }));
    }
    let t = Instant::now();
    let mut failed = Vec::new();
    for (k, r) in reports.into_iter().enumerate() {
        let (rid, report) = r.await.map_err(|e| e.to_string())?;
        let sweep = report
            .sweep
            .as_ref()
            .map(|s| format!("swept {} authority row(s)", s.removed))
            .unwrap_or_else(|| "no sweep".to_owned());
        println!(
            "shutdown root {} ({rid}): {:?}, {sweep}, {} abandoned, {} failure(s){}",
            k + 1,
            report.outcome,
            report.abandoned,
            report.failures.len(),
            if report.failures.is_empty() {
                String::new()
            } else {
                let lines: Vec<String> = report.failures.iter().map(|f| f.to_string()).collect();
                format!(": {}", lines.join("; "))
            }
        );
        if !report.failures.is_empty() {
            failed.push(format!("root {}: {:?}", k + 1, report.failures));
        }
    }
    println!(
        "shutdown of every root took {:.2} s",
        t.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("shutdown failures: {}", failed.join(", ")))
    }
}

#[cfg(test)]
mod tests;
