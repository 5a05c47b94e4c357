//! `cargo xtask bench discovery [--redis URL] [--nodes 4,16,32] [--interval-ms M]
//! [--idle-seconds S]`: what MeshNode discovery costs the Location Store (issue 38), under the
//! polling rule before issue 38 and the one after, measured in the same run.
//!
//! For each mesh size K: K location runtimes (K hosts, each with its own owner lease, renewed
//! by its renew loop, and its own MeshNode descriptor) on one Redis under a fresh key prefix,
//! each polling discovery every M ms (default 200). Every host's Store is wrapped in a counter
//! of the calls it makes (a `read_many` is one call, as it is one script call on Redis), so the
//! figures are Store calls per node per poll, split into exact reads, scan pages and batched
//! reads. Lease renewals are writes and are not counted.
//!
//! - **before**: the rule before issue 38, replayed call for call over the same SPI: every poll
//!   reads the change number, every page of the descriptor list, the change number again, then
//!   one exact read per descriptor's owner lease (K + 3 calls for one page).
//! - **after**: `zlink_location::Discovery` as the runtime polls it: the change number only,
//!   unless it moved (a full read with one batched lease read) or a listed lease's expiry is
//!   within the fencing margin + polling interval of the Store clock (one batched lease read).
//!
//! Phases, per rule and K (each on its own prefix and hosts): the first poll of every host
//! after all have published (polls until each lists all K: **full mesh**), an idle window of S
//! seconds (default 6; calls per node per poll), a host joining (polls until every other host
//! lists it), and that host stopping (its renew loop dropped, its lease row left to expire:
//! polls after the expiry until no host lists it). Lease timings are the defaults scaled by
//! 1/5 (renew 1 s, TTL 3 s, fencing margin 1 s, renew timeout 0.6 s) so that the idle window
//! covers the lease re-read cycle: with the default 15 s TTL and 1 s polling the ratio of
//! polls to lease reads is the same. Target: after ≤ 3 calls per node per idle poll, full mesh
//! and a joiner within 2 polls.
//!
//! Needs a Redis (default `ZLINK_TEST_REDIS_URL`, else `redis://127.0.0.1:6379`); everything is
//! written under fresh key prefixes, deleted at the end.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use zlink_codec::Generation;
use zlink_codec::keys::LogicalKey;
use zlink_codec::records::{
    ActivationConcurrency, DescriptorCapacity, HostState, MeshNodeDescriptor, MeshNodeRecord,
    ObjectRole, OwnerLeaseRecord, SlotUsage,
};
use zlink_location::{Discovery, LocationOptions, LocationRuntime, MeshName, RoutingId};
use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
use zlink_store_spi::{
    LocationStore, LocationStoreExt, PageLimit, ReadResult, ScanPrefix, ScanRequest, ScanResult,
    StoreKey, StoreResult, WriteRequest, WriteResult,
};

const MESH: &str = "bench";

struct Args {
    url: String,
    nodes: Vec<usize>,
    interval: Duration,
    idle: Duration,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        url: std::env::var("ZLINK_TEST_REDIS_URL")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_string()),
        nodes: vec![4, 16, 32],
        interval: Duration::from_millis(200),
        idle: Duration::from_secs(6),
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--redis" => parsed.url = super::options::url("discovery", it.next())?,
            "--nodes" => {
                parsed.nodes = it
                    .next()
                    .map(|list| {
                        list.split(',')
                            .map(|n| {
                                n.trim()
                                    .parse::<usize>()
                                    .ok()
                                    .filter(|n| (2..=200).contains(n))
                            })
                            .collect::<Option<Vec<_>>>()
                    })
                    .and_then(|n| n.filter(|n| !n.is_empty()))
                    .ok_or("bench discovery: --nodes needs a list like 4,16,32 (each 2..=200)")?;
            }
            "--interval-ms" => {
                parsed.interval = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| (50..=2000).contains(n))
                    .map(Duration::from_millis)
                    .ok_or("bench discovery: --interval-ms needs a number, 50..=2000")?;
            }
            "--idle-seconds" => {
                let s = super::options::seconds("discovery", it.next())?;
                parsed.idle = Duration::from_secs_f64(s);
            }
            other => {
                return Err(format!(
                    "bench discovery: unknown option `{other}` (known: --redis URL, --nodes LIST, --interval-ms M, --idle-seconds S)"
                ));
            }
        }
    }
    Ok(parsed)
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let args = parse(args)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(bench(&args))
}

/// The polling rule under measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    Before,
    After,
}

impl Rule {
    fn name(self) -> &'static str {
        match self {
            Rule::Before => "before",
            Rule::After => "after",
        }
    }
}

/// What one rule did for one mesh size.
#[derive(Debug, Clone, Copy)]
struct Figures {
    /// Per node per idle poll.
    calls: f64,
    reads: f64,
    scans: f64,
    batches: f64,
    /// The most polls any host needed to list all K after the first publish.
    full_mesh: u64,
    /// The most polls any host needed to list a host that joined.
    join: u64,
    /// The most polls after the expiry any host needed to drop a host whose lease expired.
    drop: u64,
}

async fn bench(args: &Args) -> Result<(), String> {
    println!(
        "bench discovery: polling every {} ms, idle window {:.1} s, lease TTL 3 s (renew 1 s, fencing margin 1 s)",
        args.interval.as_millis(),
        args.idle.as_secs_f64()
    );
    println!(
        "{:>4}  {:>6}  {:>15}  {:>6}  {:>6}  {:>8}  {:>10}  {:>11}  {:>13}",
        "K",
        "rule",
        "calls/node/poll",
        "reads",
        "scans",
        "batches",
        "full mesh",
        "joiner seen",
        "expired drop"
    );
    let mut summary = Vec::new();
    for &k in &args.nodes {
        let mut row = Vec::new();
        for rule in [Rule::Before, Rule::After] {
            let prefix = format!("zlbench-discovery-{}", uuid::Uuid::new_v4().simple());
            let result = measure(args, &prefix, k, rule).await;
            // Best effort: a failed purge leaves keys under a unique prefix, never a wrong result.
            let _ = super::purge_prefix(&args.url, &prefix).await;
            let f = result?;
            println!(
                "{k:>4}  {:>6}  {:>15.2}  {:>6.2}  {:>6.2}  {:>8.2}  {:>4} polls  {:>5} polls  {:>7} polls",
                rule.name(),
                f.calls,
                f.reads,
                f.scans,
                f.batches,
                f.full_mesh,
                f.join,
                f.drop
            );
            row.push(f);
        }
        if let [before, after] = row[..] {
            summary.push((k, before, after));
        }
    }
    println!();
    for (k, before, after) in summary {
        println!(
            "K = {k:>3}: {:.2} calls per node per idle poll after, {:.2} before ({:.3}x); mesh-wide {:.0} calls/s after, {:.0} before",
            after.calls,
            before.calls,
            after.calls / before.calls,
            after.calls * k as f64 / args.interval.as_secs_f64(),
            before.calls * k as f64 / args.interval.as_secs_f64(),
        );
    }
    Ok(())
}

/// Lease timings: the defaults scaled by 1/5, polling at `interval`.
fn options(interval: Duration) -> LocationOptions {
    LocationOptions::default()
        .owner_lease_renew_interval(Duration::from_millis(1000))
        .owner_lease_renew_timeout(Duration::from_millis(600))
        .owner_lease_ttl(Duration::from_millis(3000))
        .owner_lease_fencing_margin(Duration::from_millis(1000))
        .polling_interval(interval)
}

/// One host: its runtime (lease and renew loop), its counted Store and its poller.
struct Node {
    rt: LocationRuntime,
    counted: Arc<Counted>,
    poller: Arc<Poller>,
    rid: RoutingId,
}

async fn node(
    store: &RedisLocationStore,
    options: &LocationOptions,
    rule: Rule,
    rid: u16,
) -> Result<Node, String> {
    let counted = Arc::new(Counted::new(store.clone()));
    let rt = LocationRuntime::builder(counted.clone())
        .options(options.clone())
        .start()
        .await
        .map_err(|e| e.to_string())?;
    let d = descriptor(rid)?;
    rt.descriptor_publisher(d.clone())
        .map_err(|e| e.to_string())?
        .publish(d.clone())
        .await
        .map_err(|e| e.to_string())?;
    let mesh = mesh()?;
    let poller = Arc::new(match rule {
        Rule::After => Poller::After(rt.discovery(&mesh).map_err(|e| e.to_string())?),
        Rule::Before => Poller::Before(Before::new(counted.clone(), &mesh)?),
    });
    Ok(Node {
        rt,
        counted,
        poller,
        rid: d.routing_id,
    })
}

async fn measure(args: &Args, prefix: &str, k: usize, rule: Rule) -> Result<Figures, String> {
    let store = RedisLocationStore::connect(
        RedisLocationOptions::from_url(&args.url)
            .map_err(|e| e.to_string())?
            .with_key_prefix(prefix)
            .map_err(|e| e.to_string())?,
    )
    .await
    .map_err(|e| e.to_string())?;
    let options = options(args.interval);
    let mut nodes = Vec::with_capacity(k);
    for rid in 0..k {
        nodes.push(node(&store, &options, rule, rid as u16 + 1).await?);
    }
    let all: Vec<RoutingId> = nodes.iter().map(|n| n.rid.clone()).collect();

    // Every host polls in its own loop; each keeps its last list and its poll count.
    let stop = Arc::new(AtomicBool::new(false));
    let loops: Vec<Arc<Loop>> = nodes
        .iter()
        .map(|n| Arc::new(Loop::new(n.poller.clone())))
        .collect();
    let mut tasks = Vec::new();
    for l in &loops {
        tasks.push(tokio::spawn(run_loop(
            l.clone(),
            args.interval,
            stop.clone(),
        )));
    }
    let full_mesh = polls_until(&loops, args.interval, |list| {
        all.iter().all(|r| list.contains(r))
    })
    .await?;

    // The idle window.
    let counts = |nodes: &[Node]| nodes.iter().map(|n| n.counted.counts()).sum::<Counts>();
    let polls = |loops: &[Arc<Loop>]| loops.iter().map(|l| l.polls()).sum::<u64>();
    let (c0, p0) = (counts(&nodes), polls(&loops));
    tokio::time::sleep(args.idle).await;
    let (c1, p1) = (counts(&nodes), polls(&loops));
    let d = c1.since(&c0);
    let per_poll = |n: u64| n as f64 / (p1 - p0).max(1) as f64;

    // A host joins, then stops renewing.
    let joiner = node(&store, &options, rule, k as u16 + 1).await?;
    let join = polls_until(&loops, args.interval, |list| list.contains(&joiner.rid)).await?;
    let lease_key = StoreKey::new(
        LogicalKey::owner_lease(
            &joiner
                .rt
                .host_run()
                .ok_or("joiner holds no lease")?
                .owner_id,
        )
        .as_str(),
    )
    .map_err(|e| e.to_string())?;
    let joiner_rid = joiner.rid.clone();
    drop(joiner);
    // Its renew loop is gone: the expiry read now is the last one.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let expires = match store.read(&lease_key).await.map_err(|e| e.to_string())? {
        ReadResult::Found {
            expires_at: Some(e),
            store_now,
            ..
        } => Instant::now() + Duration::from_millis(store_now.millis_until(e)),
        other => return Err(format!("the joiner's lease row read {other:?}")),
    };
    tokio::time::sleep_until(expires.into()).await;
    let drop = polls_until(&loops, args.interval, |list| !list.contains(&joiner_rid)).await?;

    stop.store(true, Ordering::SeqCst);
    for t in tasks {
        t.await.map_err(|e| e.to_string())?;
    }
    for n in nodes {
        let _ = n.rt.release_lease().await;
    }
    store.close().await;
    Ok(Figures {
        calls: per_poll(d.calls()),
        reads: per_poll(d.reads),
        scans: per_poll(d.scans),
        batches: per_poll(d.batches),
        full_mesh,
        join,
        drop,
    })
}

/// Polls every loop makes from now until its list satisfies `done`; the most any loop needed.
/// Bounded: 100 polling intervals.
async fn polls_until(
    loops: &[Arc<Loop>],
    interval: Duration,
    done: impl Fn(&[RoutingId]) -> bool,
) -> Result<u64, String> {
    let start: Vec<u64> = loops.iter().map(|l| l.polls()).collect();
    let mut needed: Vec<Option<u64>> = vec![None; loops.len()];
    let deadline = Instant::now() + interval * 100;
    while needed.iter().any(Option::is_none) {
        if Instant::now() > deadline {
            return Err("bench discovery: a list did not converge within 100 polls".into());
        }
        for ((l, s), n) in loops.iter().zip(&start).zip(needed.iter_mut()) {
            if n.is_none() {
                let (polls, list) = l.last();
                if polls > *s && done(&list) {
                    *n = Some(polls - s);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(needed.into_iter().flatten().max().unwrap_or(0))
}

/// One host's discovery loop state: polls done and the last list.
struct Loop {
    poller: Arc<Poller>,
    state: parking_lot::Mutex<(u64, Vec<RoutingId>)>,
}

impl Loop {
    fn new(poller: Arc<Poller>) -> Self {
        Loop {
            poller,
            state: parking_lot::Mutex::new((0, Vec::new())),
        }
    }

    fn polls(&self) -> u64 {
        self.state.lock().0
    }

    fn last(&self) -> (u64, Vec<RoutingId>) {
        self.state.lock().clone()
    }
}

async fn run_loop(l: Arc<Loop>, interval: Duration, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        match l.poller.poll().await {
            Ok(list) => {
                let mut s = l.state.lock();
                s.0 += 1;
                s.1 = list;
            }
            Err(e) => eprintln!("bench discovery: a poll failed: {e}"),
        }
        tokio::time::sleep(interval).await;
    }
}

enum Poller {
    Before(Before),
    After(Discovery),
}

impl Poller {
    /// One poll: the routing ids of the listed live nodes.
    async fn poll(&self) -> Result<Vec<RoutingId>, String> {
        match self {
            Poller::After(d) => Ok(d
                .refresh()
                .await
                .map_err(|e| e.to_string())?
                .nodes
                .into_iter()
                .map(|n| n.record.descriptor.routing_id)
                .collect()),
            Poller::Before(b) => b.poll().await,
        }
    }
}

/// The polling rule before issue 38, call for call: the change number, every page, the change
/// number again (the pages used only when both match), then one exact read per descriptor's
/// owner lease.
struct Before {
    store: Arc<Counted>,
    prefix: ScanPrefix,
    change: StoreKey,
}

impl Before {
    fn new(store: Arc<Counted>, mesh: &MeshName) -> Result<Self, String> {
        Ok(Before {
            store,
            prefix: ScanPrefix::new(zlink_codec::keys::prefix::mesh_nodes_of(mesh))
                .map_err(|e| e.to_string())?,
            change: StoreKey::new(format!("mesh-change\0{}", mesh.as_str()))
                .map_err(|e| e.to_string())?,
        })
    }

    async fn change_number(&self) -> Result<Option<zlink_store_spi::StoreVersion>, String> {
        Ok(self
            .store
            .read(&self.change)
            .await
            .map_err(|e| e.to_string())?
            .version()
            .cloned())
    }

    async fn poll(&self) -> Result<Vec<RoutingId>, String> {
        for _ in 0..16 {
            let before = self.change_number().await?;
            let Some(listing) = self
                .store
                .scan_all(&self.prefix, PageLimit::LARGEST, 0)
                .await
                .map_err(|e| e.to_string())?
            else {
                continue;
            };
            if self.change_number().await? != before {
                continue;
            }
            let mut live = Vec::new();
            for item in listing.items {
                let Ok(record) = MeshNodeRecord::decode(&item.bytes) else {
                    continue;
                };
                let key = StoreKey::new(LogicalKey::owner_lease(&record.owner_id).as_str())
                    .map_err(|e| e.to_string())?;
                let lease = self.store.read(&key).await.map_err(|e| e.to_string())?;
                let held = lease
                    .bytes()
                    .and_then(|b| OwnerLeaseRecord::decode(b).ok())
                    .is_some_and(|l| {
                        l.owner_id == record.owner_id
                            && l.lease_generation == record.lease_generation
                    });
                if held {
                    live.push(record.descriptor.routing_id);
                }
            }
            return Ok(live);
        }
        Err("the descriptor list kept changing".into())
    }
}

/// Store calls, counted by [`Counted`].
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    reads: u64,
    scans: u64,
    batches: u64,
}

impl Counts {
    fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            reads: self.reads - earlier.reads,
            scans: self.scans - earlier.scans,
            batches: self.batches - earlier.batches,
        }
    }

    /// Every read-side call (each one script call on Redis).
    fn calls(&self) -> u64 {
        self.reads + self.scans + self.batches
    }
}

impl std::iter::Sum for Counts {
    fn sum<I: Iterator<Item = Counts>>(iter: I) -> Counts {
        iter.fold(Counts::default(), |a, b| Counts {
            reads: a.reads + b.reads,
            scans: a.scans + b.scans,
            batches: a.batches + b.batches,
        })
    }
}

/// Counts one host's read-side Store calls; writes (lease renewals, publishes) pass uncounted.
#[derive(Debug)]
struct Counted {
    inner: RedisLocationStore,
    reads: AtomicU64,
    scans: AtomicU64,
    batches: AtomicU64,
}

impl Counted {
    fn new(inner: RedisLocationStore) -> Self {
        Counted {
            inner,
            reads: AtomicU64::new(0),
            scans: AtomicU64::new(0),
            batches: AtomicU64::new(0),
        }
    }

    fn counts(&self) -> Counts {
        Counts {
            reads: self.reads.load(Ordering::Relaxed),
            scans: self.scans.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
        }
    }
}

impl LocationStore for Counted {
    async fn read(&self, key: &StoreKey) -> StoreResult<ReadResult> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.inner.read(key).await
    }
    async fn write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
        self.inner.write(request).await
    }
    async fn scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
        self.scans.fetch_add(1, Ordering::Relaxed);
        self.inner.scan(request).await
    }
    async fn read_many(&self, keys: &[StoreKey]) -> StoreResult<Vec<ReadResult>> {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.inner.read_many(keys).await
    }
}

fn mesh() -> Result<MeshName, String> {
    MeshName::new(MESH).map_err(|e| e.to_string())
}

/// A serving MeshNode descriptor of `mesh` with routing id `rid` (two bytes).
fn descriptor(rid: u16) -> Result<MeshNodeDescriptor, String> {
    let slots = SlotUsage {
        active: 0,
        reserved: 0,
        limit: 0,
    };
    Ok(MeshNodeDescriptor {
        mesh_name: mesh()?,
        routing_id: RoutingId::new(rid.to_be_bytes().to_vec()).map_err(|e| e.to_string())?,
        lifecycle_generation: Generation::MIN,
        endpoint: format!("tcp://127.0.0.1:{}", 20_000 + u32::from(rid)),
        entry_spot_id: None,
        channel_weights: BTreeMap::new(),
        application_version: 1,
        object_capabilities: Vec::new(),
        object_role: ObjectRole::Server,
        placement_weight: 100,
        capacity: DescriptorCapacity {
            actors: slots,
            spots: slots,
            spot_types: Vec::new(),
        },
        activation_concurrency: ActivationConcurrency {
            active: 0,
            limit: 128,
        },
        maintenance_wave: None,
        state: HostState::Serving,
        security_identity: "bench".into(),
        updated_at_epoch_ms: 0,
    })
}
