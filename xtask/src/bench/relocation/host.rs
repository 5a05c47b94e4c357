//! Case 2, `host`: host Relocate of N small Actors (default 10,000) under a steady request
//! load, in this process.
//!
//! Three ZLink roots run on one tokio multi-thread runtime (2 workers), each over its own
//! connections to the Redis Location and Relocation Stores under a fresh key prefix: A and B
//! are Object Servers of the same application version registering `bench.cell`
//! (PreserveStateWith: an 8-byte counter; `Touch` adds one and returns it), C is an Object
//! Client. A starts alone and creates the N Actors through its own manager (c=64), so every
//! one lands on A; then B and C start. C requests each Actor once (its route cache now names
//! A), then C keeps c=64 loops of `Touch` requests going over the N Actors:
//!
//! - **before**: for S seconds (the baseline, same load, same run);
//! - **during**: from the start of `A.relocate(PlannedMaintenance)` until it returns — every
//!   Actor moves to B, the only target;
//! - **after**: for S seconds once A is `Relocated` (every Actor on B).
//!
//! Figures: moves per second (`moved` / the Relocate's wall time), request p50/p99 of each
//! window, p99 during / p99 before as a ratio, and every request error by kind. The state
//! moved with the Actors: a sample of them answers a count past the warm-up's.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use zlink_codec::RoutingId;
use zlink_codec::records::ObjectRole;
use zlink_runtime::Actor;
use zlink_runtime::ActorManager;
use zlink_runtime::BoxError;
use zlink_runtime::MeshNode;
use zlink_runtime::Message;
use zlink_runtime::Request;
use zlink_runtime::ZLinkHost;
use zlink_runtime::relocate::ActorStateAdapter;
use zlink_runtime::relocate::RelocateOptions;

use super::{Args, mesh, ms, to_string};

/// Worker threads of the runtime the three roots run on.
pub(super) const WORKERS: usize = 2;
/// The concurrency of the creation and of the request load.
const C: usize = 64;
const CELL: &str = "bench.cell";
/// How long the roots may take to see each other.
const SETUP: Duration = Duration::from_secs(30);
/// A pause once all see each other, so each has read the others' descriptors.
const SETTLE: Duration = Duration::from_millis(500);
/// The Relocate's deadline.
const RELOCATE_DEADLINE: Duration = Duration::from_secs(600);
/// Actors whose owner and state are checked after the move.
const CHECKED: usize = 100;

/// A counter.
struct Cell {
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
struct Touch;
impl Message for Touch {
    const PACKET: &'static str = "Touch";
}
impl Request for Touch {
    type Reply = u64;
}

pub(super) async fn run(args: &Args) -> Result<(), String> {
    let prefix = super::fresh_prefix("host");
    println!();
    println!(
        "2. host: host Relocate of {} Actors (PreserveStateWith, 8-byte state) from A to B, \
         roots A, B (Object Servers) and C (Object Client, the load) in this process on one \
         tokio runtime ({WORKERS} workers), Redis at {} (key prefix {prefix}); request load \
         c={C} from C",
        args.actors, args.url
    );
    let mut hosts = Vec::new();
    let result = on_redis(args, &prefix, &mut hosts).await;
    for h in hosts.iter().rev() {
        let report = h.shutdown().await;
        if !report.failures.is_empty() {
            println!("   shutdown: {:?}", report.failures);
        }
    }
    drop(hosts);
    super::purge(&args.url, &prefix).await;
    result
}

/// Starts one root over its own connections; `server`: an Object Server registering the cell.
async fn start_root(url: &str, prefix: &str, server: bool) -> Result<ZLinkHost, String> {
    super::start_root(url, prefix, move |n| {
        if server {
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
        } else {
            n.object_role(ObjectRole::Client)
        }
    })
    .await
}

fn node(host: &ZLinkHost) -> Result<MeshNode, String> {
    host.node(&mesh()?)
        .ok_or_else(|| "a root has no node".to_owned())
}

async fn wait_peers(node: &MeshNode, n: usize) -> Result<(), String> {
    let deadline = Instant::now() + SETUP;
    while node
        .status()
        .peers
        .iter()
        .filter(|p| p.weights.is_some())
        .count()
        < n
    {
        if Instant::now() >= deadline {
            return Err(format!(
                "{} has fewer than {n} Ready peers after {SETUP:?}",
                node.routing_id()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

async fn on_redis(args: &Args, prefix: &str, hosts: &mut Vec<ZLinkHost>) -> Result<(), String> {
    hosts.push(start_root(&args.url, prefix, true).await?);
    let a = node(&hosts[0])?;
    let t = Instant::now();
    let ids = populate(
        &hosts[0].actors().map_err(to_string)?,
        a.routing_id(),
        args.actors,
    )
    .await?;
    println!(
        "   {} Actors created on A (alone) in {:.2} s",
        ids.len(),
        t.elapsed().as_secs_f64()
    );
    hosts.push(start_root(&args.url, prefix, true).await?);
    hosts.push(start_root(&args.url, prefix, false).await?);
    let nodes = [node(&hosts[0])?, node(&hosts[1])?, node(&hosts[2])?];
    for n in &nodes {
        wait_peers(n, 2).await?;
    }
    tokio::time::sleep(SETTLE).await;
    let b = nodes[1].routing_id().clone();
    let client = hosts[2].actors().map_err(to_string)?;
    // One request to each Actor: C's route cache names A for all of them.
    let warm = run_load(&client, &ids, Window::Once).await?;
    if !warm.errors.is_empty() {
        return Err(format!("warming: {:?}", warm.errors));
    }
    let d = Duration::from_secs_f64(args.seconds);
    let before = run_load(&client, &ids, Window::For(d)).await?;
    let host_a = hosts[0].clone();
    let during = run_load(&client, &ids, Window::Relocate(host_a)).await?;
    let after = run_load(&client, &ids, Window::For(d)).await?;
    let relocated = during.relocated.clone().ok_or("no relocate result")?;
    report(&before, &during, &after, &relocated);
    check_moved(&client, &ids, &b).await?;
    let c = hosts[1].status().completions;
    let left =
        super::super::count_keys(&args.url, &format!("{prefix}:*zlink-completion/*")).await?;
    println!(
        "   completion records on B (requests held at a seal, relayed, finished after the owner \
         change): recorded {}, delivered {} (already ended {}, requester gone {}), data lost {}; \
         completion payload keys left in the Relocation Store: {left}",
        c.recorded, c.terminal_received, c.already_terminal, c.source_lease_expired, c.data_lost
    );
    Ok(())
}

/// Creates `n` Actors through A's manager (c=64); each must land on A.
async fn populate(
    actors: &ActorManager,
    a: &RoutingId,
    n: usize,
) -> Result<Arc<Vec<String>>, String> {
    let ids: Arc<Vec<String>> = Arc::new((0..n).map(|i| format!("cell-{i}")).collect());
    // The first creation is retried until A's placement lists A itself (its descriptor read).
    let deadline = Instant::now() + SETUP;
    loop {
        match actors.get_or_create(CELL, &ids[0]).await {
            Ok(_) => break,
            Err(e) if Instant::now() >= deadline => {
                return Err(format!("creating {}: {e}", ids[0]));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let mut tasks = Vec::new();
    for j in 0..C {
        let (actors, ids, a) = (actors.clone(), Arc::clone(&ids), a.clone());
        tasks.push(tokio::spawn(async move {
            for id in ids.iter().skip(j).step_by(C) {
                let r = actors
                    .get_or_create(CELL, id)
                    .await
                    .map_err(|e| format!("creating {id}: {e}"))?;
                if r.node != a {
                    return Err(format!("{id} landed on {}, not on A", r.node));
                }
            }
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(to_string)??;
    }
    Ok(ids)
}

/// How long a load runs.
enum Window {
    /// One request to each Actor.
    Once,
    /// For this long.
    For(Duration),
    /// While this host relocates (the samples kept are those started after the Relocate
    /// began).
    Relocate(ZLinkHost),
}

/// A finished host Relocate: outcome/reason, moved, remaining, wall time, interruptions.
type Relocated = (
    String,
    usize,
    usize,
    Duration,
    zlink_runtime::status::InterruptionSummary,
);

/// What one load window saw.
struct Load {
    /// Latencies of the requests that succeeded.
    samples: Vec<Duration>,
    /// Failed requests by error kind.
    errors: BTreeMap<String, usize>,
    elapsed: Duration,
    /// The Relocate's result and wall time (`Window::Relocate`).
    relocated: Option<Relocated>,
}

/// `C` loops of `Touch` over `ids` (loop j: ids j, j+C, …, wrapping) for the window.
async fn run_load(
    actors: &ActorManager,
    ids: &Arc<Vec<String>>,
    window: Window,
) -> Result<Load, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let once = matches!(window, Window::Once);
    let mut tasks = Vec::with_capacity(C);
    let started = Instant::now();
    for j in 0..C {
        let (actors, ids, stop) = (actors.clone(), Arc::clone(ids), Arc::clone(&stop));
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut errors = Vec::new();
            let mut k = j % ids.len();
            let mut sent = 0usize;
            while !stop.load(Ordering::Relaxed) {
                if once && (sent > 0 && k < C || j >= ids.len()) {
                    break;
                }
                let t = Instant::now();
                match actors.request(&ids[k], &Touch).await {
                    Ok(_) => samples.push((t, t.elapsed())),
                    Err(e) => errors.push((t, format!("{:?}", e.kind()))),
                }
                sent += 1;
                k = (k + C) % ids.len();
            }
            (samples, errors)
        }));
    }
    let (from, relocated) = match window {
        Window::Once => (started, None),
        Window::For(d) => {
            tokio::time::sleep(d).await;
            (started, None)
        }
        Window::Relocate(host) => {
            // Let the load reach its steady state first.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let from = Instant::now();
            let r = host
                .relocate(RelocateOptions::planned_maintenance().deadline(RELOCATE_DEADLINE))
                .await;
            let took = from.elapsed();
            let r = match r {
                Ok(r) => r,
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    return Err(format!("relocate: {e}"));
                }
            };
            let outcome = format!("{:?}/{:?}", r.outcome, r.reason);
            (
                from,
                Some((outcome, r.moved, r.remaining, took, r.interruption)),
            )
        }
    };
    if !once {
        stop.store(true, Ordering::Relaxed);
    }
    let mut until = Instant::now();
    let mut results = Vec::with_capacity(tasks.len());
    for t in tasks {
        results.push(t.await.map_err(to_string)?);
    }
    if once {
        until = Instant::now();
    }
    let (mut samples, mut errors) = (Vec::new(), BTreeMap::new());
    for (s, e) in results {
        samples.extend(
            s.into_iter()
                .filter(|(t, _)| *t >= from && *t < until)
                .map(|(_, l)| l),
        );
        for (_, kind) in e.into_iter().filter(|(t, _)| *t >= from && *t < until) {
            *errors.entry(kind).or_insert(0) += 1;
        }
    }
    samples.sort_unstable();
    Ok(Load {
        samples,
        errors,
        elapsed: until - from,
        relocated,
    })
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    sorted
        .get(((sorted.len() as f64 * q) as usize).min(sorted.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

fn print_window(name: &str, l: &Load) {
    println!(
        "   {name:<34} {:>7} ok in {:>6.2} s {:>9.0} /s   p50 {:>8.2} ms   p99 {:>8.2} ms   max \
         {:>8.2} ms   errors {:?}",
        l.samples.len(),
        l.elapsed.as_secs_f64(),
        l.samples.len() as f64 / l.elapsed.as_secs_f64(),
        ms(quantile(&l.samples, 0.50)),
        ms(quantile(&l.samples, 0.99)),
        ms(l.samples.last().copied().unwrap_or_default()),
        l.errors
    );
}

fn report(before: &Load, during: &Load, after: &Load, relocated: &Relocated) {
    let (outcome, moved, remaining, took, interruption) = relocated;
    println!(
        "   host Relocate: {outcome}, moved {moved}, remaining {remaining}, wall {:.2} s -> \
         {:.0} moves/s",
        took.as_secs_f64(),
        *moved as f64 / took.as_secs_f64()
    );
    print_window("requests before the move (A)", before);
    print_window("requests during the move", during);
    print_window("requests after the move (B)", after);
    let p99 = |l: &Load| quantile(&l.samples, 0.99).as_secs_f64();
    println!(
        "   request p99 during / before = {:.2}x, p50 during / before = {:.2}x",
        p99(during) / p99(before),
        quantile(&during.samples, 0.5).as_secs_f64() / quantile(&before.samples, 0.5).as_secs_f64()
    );
    // Per-unit interruption (spec 28 §5: the unit's seal to the target's signal that processing
    // starts), from the runtime's histogram (bucket upper bounds, each twice the previous).
    println!(
        "   per-unit interruption over {} units: p50 <= {:.2} ms, p99 <= {:.2} ms, max {:.2} ms \
         (target < 1 s)",
        interruption.count,
        ms(interruption.p50),
        ms(interruption.p99),
        ms(interruption.max)
    );
}

/// A sample of the Actors is owned by B and answers a count past the warm-up's (the state
/// moved with it).
async fn check_moved(actors: &ActorManager, ids: &[String], b: &RoutingId) -> Result<(), String> {
    let step = (ids.len() / CHECKED).max(1);
    for id in ids.iter().step_by(step) {
        let owner = actors
            .find(id)
            .await
            .map_err(|e| format!("find {id}: {e}"))?
            .ok_or_else(|| format!("{id} is gone after the move"))?
            .node;
        if &owner != b {
            return Err(format!("{id} is on {owner} after the move, not on B"));
        }
        let n = actors
            .request(id, &Touch)
            .await
            .map_err(|e| format!("request {id} after the move: {e}"))?;
        if n < 2 {
            return Err(format!(
                "{id} answered {n} after the move: its state was lost"
            ));
        }
    }
    println!(
        "   checked {} Actors after the move: on B, state kept",
        ids.len().div_ceil(step)
    );
    Ok(())
}
