//! `cargo xtask bench objects [--redis URL] [--seconds S] [--case NAME]`: the Actor layer over
//! the Redis Location Store, each figure beside a baseline measured in the same run, as a
//! ratio (`--case create|cross-node|same-node|route-cache` runs one figure;
//! `--case cross-node --metrics` runs figure 2 with metrics on against off,
//! `objects_metrics.rs`).
//!
//! Two ZLink roots run in this process on one tokio multi-thread runtime (2 workers), each
//! with one Object Server MeshNode (A and B) on mesh `bench`, each over its own connection to
//! the Redis Location Store at `URL` (default `redis://127.0.0.1:6379`) under a fresh key
//! prefix, purged at the end. Actor type `bench.local` is registered on A only and
//! `bench.remote` on B only, so placement decides nothing: every creation below is made
//! through A's Actor manager and lands where its type lives. Both nodes also answer the
//! node-direct `Echo`. Payloads are 64 bytes of text (the roots' codec is JSON).
//!
//! 1. **Create latency** (c=1, fresh ids, `ActorManager::create`): landing on B (remote: the
//!    creation runs over `zlink.actor.create`) and on A (local), p50 against the sum of the
//!    Store and mesh work a remote creation needs, each part measured alone in the same run:
//!    a reserve-shaped and a commit-shaped conditional batch and three exact reads through
//!    `DynLocationStore` on a third connection to the same Redis, and one node-direct `Echo`
//!    round trip A→B. Target: create p50 ≤ 1.5× that sum.
//! 2. **Cross-node request throughput** at c=64 with a warm route cache (A requests Actors
//!    owned by B), against node-direct `Echo` requests A→B at c=64. Target: ≥ 0.8×.
//! 3. **Same-node request/reply latency** at c=1 (A requests Actors owned by A), against a
//!    bare tokio `mpsc` + `oneshot` round trip with a task that answers.
//! 4. **Route-cache hit resolve** (`RouteCache::get` through the `testing` facade) against a
//!    plain `HashMap::get` of the same keys in the same order, on one thread with no root
//!    running, at 1,000 keys (the tables stay in the CPU caches) and 10,000 (they do not).
//!    Target: ≥ 0.3×.
//!
//! Every figure alternates its two sides over 8 rounds (S/8 seconds each, default S = 3), so
//! load elsewhere on the machine falls on both alike; ratios are printed over all rounds and
//! as the median of the per-round pairs.

use super::options;
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use zlink_codec::records::ObjectRole;
use zlink_codec::{MeshName, ObjectId, RoutingId};
use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
use zlink_runtime::Actor;
use zlink_runtime::ActorManager;
use zlink_runtime::MeshNode;
use zlink_runtime::Message;
use zlink_runtime::Request;
use zlink_runtime::ZLink;
use zlink_runtime::ZLinkHost;
use zlink_runtime::testing::RouteCacheBench;
use zlink_store_spi::{
    Condition, DynLocationStore, Mutation, ReadResult, Retention, StoreKey, StoreVersion,
    WriteRequest, WriteResult,
};

use super::transport::{Latency, ROUNDS, Samples};

mod load;
mod route_cache;
mod spi_baseline;

pub(crate) use load::actor_load;
use load::{mpsc_load, node_load};
use route_cache::route_cache;
use spi_baseline::SpiBaseline;

pub(super) const DEFAULT_URL: &str = "redis://127.0.0.1:6379";
const PAYLOAD: usize = 64;
/// The concurrency of the throughput figure.
pub(super) const C: usize = 64;
/// Worker threads of the runtime both roots run on.
pub(super) const WORKERS: usize = 2;
pub(super) const LOCAL_TYPE: &str = "bench.local";
pub(super) const REMOTE_TYPE: &str = "bench.remote";
/// How long the roots may take to see each other.
const SETUP: Duration = Duration::from_secs(30);
/// How many of B's Actors the throughput figure spreads its requests over.
pub(super) const THROUGHPUT_ACTORS: usize = 1024;
/// Key counts of the route-cache figure: one whose table stays in the CPU caches, one
/// (the demo's Actor count) whose does not.
const CACHE_KEYS: [usize; 2] = [1_000, 10_000];
/// Bytes of the baseline's authority record, lookup index, generation counters, allocation
/// row and leases: about what the runtime writes for one Actor (read off a live run).
const RECORD_LEN: usize = 480;
const INDEX_LEN: usize = 45;
const COUNTER_LEN: usize = 3;
const ROW_LEN: usize = 56;
const LEASE_LEN: usize = 100;

/// Returns its bytes: the node-direct request and the Actor request alike.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Echo {
    bytes: String,
}
impl Message for Echo {
    const PACKET: &'static str = "Echo";
}
impl Request for Echo {
    type Reply = String;
}

/// The Actor of both types: answers `Echo`.
struct EchoActor;
impl Actor for EchoActor {}

struct Args {
    url: String,
    seconds: f64,
    /// Only this figure (`create`, `cross-node`, `same-node`, `route-cache`), or all.
    case: Option<String>,
    /// `--metrics`: figure 2 with a recorder on against off (`objects_metrics.rs`).
    metrics: bool,
}

const CASES: [&str; 4] = ["create", "cross-node", "same-node", "route-cache"];

impl Args {
    fn runs(&self, case: &str) -> bool {
        options::runs(self.case.as_deref(), case)
    }
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        url: DEFAULT_URL.to_owned(),
        seconds: 3.0,
        case: None,
        metrics: false,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--redis" => parsed.url = options::url("objects", it.next())?,
            "--seconds" => parsed.seconds = options::seconds("objects", it.next())?,
            "--metrics" => parsed.metrics = true,
            "--case" => parsed.case = Some(options::case("objects", it.next(), &CASES)?),
            other => {
                return Err(format!(
                    "bench objects: unknown option `{other}` (known: --redis URL, --seconds S, \
                     --case create|cross-node|same-node|route-cache, --metrics)"
                ));
            }
        }
    }
    Ok(parsed)
}

fn to_string(e: impl std::fmt::Display) -> String {
    e.to_string()
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let args = parse(args)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .map_err(to_string)?;
    rt.block_on(bench(&args))
}

pub(super) async fn connect(url: &str, prefix: &str) -> Result<RedisLocationStore, String> {
    let options = RedisLocationOptions::from_url(url)
        .and_then(|o| o.with_key_prefix(prefix.to_owned()))
        .map_err(|e| format!("--redis {url}: {e}"))?;
    RedisLocationStore::connect(options)
        .await
        .map_err(|e| format!("connecting to {url}: {e}"))
}

async fn bench(args: &Args) -> Result<(), String> {
    let prefix = format!("zlink-bench-objects-{}", uuid::Uuid::new_v4().simple());
    let mode = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!(
        "objects bench ({mode} build, in-process): each figure alternates its two sides over \
         {ROUNDS} rounds, {:.1} s per side; {PAYLOAD} B payloads",
        args.seconds
    );
    let d = Duration::from_secs_f64(args.seconds);
    if args.metrics {
        // Only figure 2, metrics on against off (a global recorder: nothing else runs).
        if args.case.as_deref() != Some("cross-node") {
            return Err("bench objects: --metrics goes with --case cross-node".into());
        }
        return super::objects_metrics::cross_node_on_off(&args.url, d / ROUNDS).await;
    }
    if ["create", "cross-node", "same-node"]
        .iter()
        .any(|c| args.runs(c))
    {
        on_redis(args, &prefix, d).await?;
    }
    if args.runs("route-cache") {
        for keys in CACHE_KEYS {
            route_cache(keys, d)?;
        }
    }
    Ok(())
}

/// Figures 1–3: the two roots on Redis under `prefix`, purged at the end.
async fn on_redis(args: &Args, prefix: &str, d: Duration) -> Result<(), String> {
    println!(
        "Object Server nodes A and B in two ZLink roots of this process on one tokio \
         multi-thread runtime ({WORKERS} workers), Redis Location Store at {} (key prefix \
         {prefix})",
        args.url
    );
    let mut stores = Vec::new();
    for _ in 0..3 {
        stores.push(connect(&args.url, prefix).await?);
    }
    let result = match start_roots(&stores[..2]).await {
        Ok(hosts) => {
            let spi: Arc<dyn DynLocationStore> = Arc::new(stores[2].clone());
            let measured = measure(args, &hosts, spi, d).await;
            let stopped = shut_down(&hosts).await;
            measured.and(stopped)
        }
        Err(e) => Err(e),
    };
    for s in &stores {
        s.close().await;
    }
    drop(stores);
    match super::purge_prefix(&args.url, prefix).await {
        Ok(n) => println!("purged {n} Redis key(s) under {prefix}"),
        Err(e) => println!("could not purge {prefix}: {e}"),
    }
    println!();
    result
}

pub(super) fn mesh() -> Result<MeshName, String> {
    MeshName::new("bench").map_err(to_string)
}

/// Starts root A (type `bench.local`) over `stores[0]` and root B (type `bench.remote`) over
/// `stores[1]`; stops the first if the second fails.
pub(super) async fn start_roots(stores: &[RedisLocationStore]) -> Result<Vec<ZLinkHost>, String> {
    let mesh = mesh()?;
    let mut hosts = Vec::new();
    for (store, stable_type) in stores.iter().zip([LOCAL_TYPE, REMOTE_TYPE]) {
        let store: Arc<dyn DynLocationStore> = Arc::new(store.clone());
        let started = ZLink::builder()
            .location_store(store)
            .route_mesh(mesh.clone(), |n| {
                n.object_role(ObjectRole::Server)
                    .actor_type::<EchoActor>(stable_type, |t| {
                        t.factory(|_ctx| async { Ok(EchoActor) })
                            .disable_relocation()
                            .on_request::<Echo, _>(|_a, e, _ctx| {
                                Box::pin(async move { Ok(e.bytes) })
                            })
                    })
                    .on_request::<Echo, _, _>(|e, _ctx| async move { Ok(e.bytes) })
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

pub(super) async fn shut_down(hosts: &[ZLinkHost]) -> Result<(), String> {
    let mut failures = Vec::new();
    for h in hosts {
        let report = h.shutdown().await;
        if !report.failures.is_empty() {
            failures.push(format!("{:?}", report.failures));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("shutdown: {}", failures.join("; ")))
    }
}

/// Waits (bounded) until A and B are Ready peers and A's placement finds each type's node
/// (one probe creation per type, retried while discovery has not listed the node yet).
pub(super) async fn wait_for_mesh(
    a: &MeshNode,
    b: &MeshNode,
    actors: &ActorManager,
) -> Result<(), String> {
    let deadline = Instant::now() + SETUP;
    for node in [a, b] {
        while !node.status().peers.iter().any(|p| p.weights.is_some()) {
            if Instant::now() >= deadline {
                return Err(format!(
                    "node {} has no Ready peer after {SETUP:?}",
                    node.routing_id()
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    for (stable_type, owner) in [(LOCAL_TYPE, a), (REMOTE_TYPE, b)] {
        let id = format!("probe-{stable_type}");
        loop {
            match actors.get_or_create(stable_type, &id).await {
                Ok(r) if &r.node == owner.routing_id() => break,
                Ok(r) => {
                    return Err(format!(
                        "{stable_type} landed on {}, not {}",
                        r.node,
                        owner.routing_id()
                    ));
                }
                Err(e) if Instant::now() >= deadline => {
                    return Err(format!("{stable_type} cannot be created: {e}"));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
    Ok(())
}

fn echo() -> Echo {
    Echo {
        bytes: "x".repeat(PAYLOAD),
    }
}

/// Runs figures 1–3 (those `args` selects).
async fn measure(
    args: &Args,
    hosts: &[ZLinkHost],
    spi: Arc<dyn DynLocationStore>,
    d: Duration,
) -> Result<(), String> {
    let mesh = mesh()?;
    let a = hosts[0].node(&mesh).ok_or("root A has no node")?;
    let b = hosts[1].node(&mesh).ok_or("root B has no node")?;
    let actors = hosts[0].actors().map_err(to_string)?;
    let t = Instant::now();
    wait_for_mesh(&a, &b, &actors).await?;
    println!(
        "nodes: A {} (type {LOCAL_TYPE}), B {} (type {REMOTE_TYPE}); ready in {:.2} s",
        short(a.routing_id()),
        short(b.routing_id()),
        t.elapsed().as_secs_f64()
    );
    let slice = d / ROUNDS;
    if args.runs("create") {
        create_latency(&a, &b, &actors, spi, slice).await?;
    }
    if args.runs("cross-node") {
        let targets = populate(&actors, "cross", REMOTE_TYPE, THROUGHPUT_ACTORS).await?;
        cross_node(&a, &b, &actors, &targets, slice).await?;
    }
    if args.runs("same-node") {
        let targets = populate(&actors, "same", LOCAL_TYPE, C).await?;
        same_node(&actors, &targets, slice).await?;
    }
    Ok(())
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

/// Figure 1: creations landing on B and on A beside the Store and mesh work they need.
async fn create_latency(
    a: &MeshNode,
    b: &MeshNode,
    actors: &ActorManager,
    spi: Arc<dyn DynLocationStore>,
    slice: Duration,
) -> Result<(), String> {
    let mut spi = SpiBaseline::seed(spi).await?;
    let mut next = 0u64;
    let (mut remote, mut local) = (Samples::default(), Samples::default());
    let (mut reserve, mut commit, mut read, mut rtt) = (
        Samples::default(),
        Samples::default(),
        Samples::default(),
        Samples::default(),
    );
    let mut paired = Vec::new();
    for _ in 0..ROUNDS {
        let remote_round = creations(actors, REMOTE_TYPE, b.routing_id(), &mut next, slice).await?;
        local.add(creations(actors, LOCAL_TYPE, a.routing_id(), &mut next, slice).await?);
        let (r, c) = spi.batches(slice).await?;
        let read_round = spi.reads(slice).await?;
        let rtt_round = node_load(a, b.routing_id(), 1, slice).await?;
        let round_sum = p50(&r) + p50(&c) + 3 * p50(&read_round) + p50(&rtt_round);
        paired.push(ratio(p50(&remote_round), round_sum));
        remote.add(remote_round);
        reserve.add(r);
        commit.add(c);
        read.add(read_round);
        rtt.add(rtt_round);
    }
    let (remote, local) = (remote.latency(), local.latency());
    let (reserve, commit, read, rtt) = (
        reserve.latency(),
        commit.latency(),
        read.latency(),
        rtt.latency(),
    );
    let store_sum = reserve.p50 + commit.p50 + 3 * read.p50;
    let sum = store_sum + rtt.p50;
    println!();
    println!("1. actor create latency, c=1, fresh ids, created through A's manager:");
    print_lat("create landing on B (remote)", &remote);
    print_lat("create landing on A (local)", &local);
    println!("   baseline parts, each measured alone in the same run:");
    print_lat("  reserve-shaped batch", &reserve);
    print_lat("  commit-shaped batch", &commit);
    print_lat("  exact read", &read);
    print_lat("  node-direct request A->B", &rtt);
    println!(
        "   spec sum = reserve + commit + 3 x read + node-direct request = {:.1} us \
         (Store part {:.1} us)",
        us(sum),
        us(store_sum)
    );
    println!(
        "   remote create p50 / spec sum = {:.2}x over all rounds, {:.2}x median of the \
         {ROUNDS} paired rounds (target <= 1.5x)",
        ratio(remote.p50, sum),
        median(paired)
    );
    println!(
        "   local create p50 / spec sum = {:.2}x, / its Store part = {:.2}x (a local creation \
         needs no mesh round trip)",
        ratio(local.p50, sum),
        ratio(local.p50, store_sum)
    );
    Ok(())
}

/// Figure 2: A requests Actors owned by B at c=64 (route cache warm) beside node-direct
/// requests A→B at c=64.
async fn cross_node(
    a: &MeshNode,
    b: &MeshNode,
    actors: &ActorManager,
    targets: &Arc<Vec<String>>,
    slice: Duration,
) -> Result<(), String> {
    let (mut z, mut n) = (Samples::default(), Samples::default());
    let mut paired = Vec::new();
    for _ in 0..ROUNDS {
        warm(actors, targets).await?;
        let actor = actor_load(actors, targets, C, slice).await?;
        let node = node_load(a, b.routing_id(), C, slice).await?;
        paired.push(per_sec(&actor) / per_sec(&node));
        z.add(actor);
        n.add(node);
    }
    let (z, n) = (z.latency(), n.latency());
    println!();
    println!(
        "2. cross-node request/reply, c={C}, A -> {} Actors owned by B, route cache warm:",
        targets.len()
    );
    print_lat("actor request A->B", &z);
    print_lat("node-direct request A->B", &n);
    println!(
        "   actor / node-direct throughput = {:.2}x over all rounds, {:.2}x median of the {ROUNDS} \
         paired rounds (target >= 0.8x)",
        z.per_sec / n.per_sec,
        median(paired)
    );
    Ok(())
}

/// Figure 3: A requests Actors owned by A at c=1 beside a tokio channel round trip.
async fn same_node(
    actors: &ActorManager,
    targets: &Arc<Vec<String>>,
    slice: Duration,
) -> Result<(), String> {
    let (mut z, mut m) = (Samples::default(), Samples::default());
    for _ in 0..ROUNDS {
        z.add(actor_load(actors, targets, 1, slice).await?);
        m.add(mpsc_load(slice).await?);
    }
    let (z, m) = (z.latency(), m.latency());
    println!();
    println!(
        "3. same-node request/reply, c=1, A -> {} Actors owned by A:",
        targets.len()
    );
    print_lat("actor request A->A", &z);
    print_lat("tokio mpsc + oneshot", &m);
    println!(
        "   actor p50 / mpsc p50 = {:.2}x, p99 / p99 = {:.2}x, throughput actor / mpsc = {:.2}x",
        ratio(z.p50, m.p50),
        ratio(z.p99, m.p99),
        z.per_sec / m.per_sec
    );
    println!();
    Ok(())
}

/// Creates `n` Actors `{tag}-{i}` of `stable_type` through A's manager, c=64; returns their ids.
pub(super) async fn populate(
    actors: &ActorManager,
    tag: &str,
    stable_type: &'static str,
    n: usize,
) -> Result<Arc<Vec<String>>, String> {
    let ids: Arc<Vec<String>> = Arc::new((0..n).map(|i| format!("{tag}-{i}")).collect());
    let mut tasks = Vec::new();
    for j in 0..C {
        let (actors, ids) = (actors.clone(), Arc::clone(&ids));
        tasks.push(tokio::spawn(async move {
            for id in ids.iter().skip(j).step_by(C) {
                actors
                    .get_or_create(stable_type, id)
                    .await
                    .map_err(|e| format!("creating {id}: {e}"))?;
            }
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(to_string)??;
    }
    Ok(ids)
}

/// The median latency of one round.
fn p50((samples, _): &(Vec<Duration>, Duration)) -> Duration {
    let mut sorted = samples.clone();
    sorted.sort_unstable();
    sorted.get(sorted.len() / 2).copied().unwrap_or_default()
}

/// Requests per second of one round.
pub(super) fn per_sec((samples, elapsed): &(Vec<Duration>, Duration)) -> f64 {
    samples.len() as f64 / elapsed.as_secs_f64()
}

pub(super) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

pub(super) fn print_lat(case: &str, l: &Latency) {
    println!(
        "   {case:<34} {:>9.0} /s   p50 {:>8.1} us   p99 {:>8.1} us",
        l.per_sec,
        us(l.p50),
        us(l.p99)
    );
}

/// Creates fresh Actors of `stable_type` one after another for `d`; each must land on `owner`.
async fn creations(
    actors: &ActorManager,
    stable_type: &'static str,
    owner: &RoutingId,
    next: &mut u64,
    d: Duration,
) -> Result<(Vec<Duration>, Duration), String> {
    let (actors, owner, first) = (actors.clone(), owner.clone(), *next);
    let task = tokio::spawn(async move {
        let mut samples = Vec::new();
        let started = Instant::now();
        let mut n = first;
        while started.elapsed() < d {
            n += 1;
            let id = format!("{stable_type}-{n}");
            let t = Instant::now();
            let r = actors
                .create(stable_type, &id)
                .await
                .map_err(|e| format!("create {id}: {e}"))?;
            samples.push(t.elapsed());
            if r.node != owner {
                return Err(format!("{id} landed on {}, not {owner}", r.node));
            }
        }
        Ok::<_, String>((samples, started.elapsed(), n))
    });
    let (samples, elapsed, n) = task.await.map_err(to_string)??;
    *next = n;
    Ok((samples, elapsed))
}

/// One request to every target (fills the route cache).
pub(super) async fn warm(actors: &ActorManager, targets: &Arc<Vec<String>>) -> Result<(), String> {
    let mut tasks = Vec::new();
    for j in 0..C {
        let (actors, targets) = (actors.clone(), Arc::clone(targets));
        tasks.push(tokio::spawn(async move {
            let echo = echo();
            for id in targets.iter().skip(j).step_by(C) {
                actors
                    .request(id, &echo)
                    .await
                    .map_err(|e| format!("warming {id}: {e}"))?;
            }
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(to_string)??;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::bench::options::args;

    #[test]
    fn options_parse_and_unknown_ones_are_refused() {
        let a = parse(&args(&[
            "--redis",
            "redis://127.0.0.1:6390",
            "--seconds",
            "1.5",
            "--case",
            "cross-node",
        ]))
        .unwrap();
        assert_eq!(a.url, "redis://127.0.0.1:6390");
        assert_eq!(a.seconds, 1.5);
        assert!(a.runs("cross-node") && !a.runs("create"));
        assert!(!a.metrics);
        let m = parse(&args(&["--case", "cross-node", "--metrics"])).unwrap();
        assert!(m.metrics && m.runs("cross-node"));
        let all = parse(&[]).unwrap();
        assert_eq!(all.url, DEFAULT_URL);
        assert!(CASES.iter().all(|c| all.runs(c)));
        assert!(parse(&args(&["--seconds", "0"])).is_err());
        assert!(parse(&args(&["--case", "everything"])).is_err());
        assert!(parse(&args(&["--fast"])).is_err());
    }

    #[test]
    fn the_median_of_paired_rounds_is_the_middle_value() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(Vec::new()).is_nan());
    }
}
