//! `cargo xtask faults`: the process-level fault suite (issue "one owner and nothing lost under
//! faults"). Each scenario starts a private `redis-server` on a free loopback port (the
//! [`failover`] scenarios a private Redis Cluster with replicas) and three
//! `mesh_node` Object Server processes (`crates/zlink-runtime/examples/mesh_node`) over it with
//! short leases (TTL 3 s, renew every 500 ms within 500 ms, fencing margin 1 s; two scenarios
//! run the default leases of spec 21 §5 instead: TTL 15 s, renew every 5 s within 3 s,
//! fencing margin 5 s), creates the
//! counter Actors from the first node, and has it drive one sequential loop of `Probe`
//! requests per Actor while the fault is injected from outside (`kill -9`, SIGSTOP / SIGCONT of
//! a node or of the `redis-server`, foreign data written under the key prefix, a Redis restart
//! in the middle of a host Relocate, a cluster failover that loses acknowledged writes).
//! Every reply names the answering process, the
//! activation's ObjectGeneration and nonce, and its count; the checker in [`check`] fails the
//! scenario unless no activation answers after another one of the same id took over, counts
//! only rise within an activation, no acknowledged increment is lost without a higher
//! ObjectGeneration, no answer comes past the answering node's admission deadline, every
//! request ends exactly once in a defined kind, every Actor answers again within lease
//! TTL + 5 s of the heal, a host Relocate ends in a defined result, once the load ended every
//! node's capacity row adds up to its live activations (read from outside, [`store`]), every
//! node's shutdown ends `Stopped`, and what is left under the prefix afterwards is only what
//! `docs/formats.md` §12 documents as staying.
//!
//! Every loop is bounded in count and time and every address is loopback.

mod check;
mod cluster;
mod failover;
pub(crate) mod procs;
mod row;
pub(crate) mod store;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use check::Fenced;
use procs::{Node, Redis, signal};
use row::Row;

/// The lease timings of a scenario's nodes (ms).
#[derive(Debug, Clone, Copy)]
struct Leases {
    ttl: u64,
    renew: u64,
    renew_timeout: u64,
    fencing: u64,
    /// Whether the nodes are given these timings as flags; `false`: they run the runtime's
    /// defaults, which these values are.
    flags: bool,
}

/// The short leases most scenarios run with.
const SHORT_LEASES: Leases = Leases {
    ttl: 3_000,
    renew: 500,
    renew_timeout: 500,
    fencing: 1_000,
    flags: true,
};

/// The default leases (spec 21 §5; `LocationOptions::default()`), given as no flag at all.
const DEFAULT_LEASES: Leases = Leases {
    ttl: 15_000,
    renew: 5_000,
    renew_timeout: 3_000,
    fencing: 5_000,
    flags: false,
};

const POLLING_MS: u64 = 200;

/// How long the driver waits for every Redis client to be connected again after a restart.
const RECONNECT_LIMIT: Duration = Duration::from_secs(10);

/// The time from the load's start to the fault.
const FAULT_AT: Duration = Duration::from_secs(3);

/// Each Actor's pause between two probes, and one probe's reply timeout.
const PAUSE_MS: u64 = 250;
const PROBE_TIMEOUT_MS: u64 = 2_000;

/// How long every Actor has to answer again after the heal: lease TTL + 5 s.
fn reach_within_ms(leases: Leases) -> u128 {
    u128::from(leases.ttl) + 5_000
}

/// `redis-restart-mid-relocate`: how long after the host Relocate starts the `redis-server`
/// is killed (by default; `--relocate-lead-ms`), and the Relocate's deadline.
const RELOCATE_LEAD: Duration = Duration::from_millis(300);
const RELOCATE_DEADLINE: Duration = Duration::from_secs(20);

/// How long the capacity comparison after the load may wait for a release or sweep that
/// was still landing.
const CAPACITY_SETTLE: Duration = Duration::from_secs(5);

/// The scenarios, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    /// `kill -9` of an owner node.
    OwnerKill,
    /// SIGSTOP of an owner node past its lease TTL, then SIGCONT.
    OwnerStall,
    /// SIGSTOP of the `redis-server` past the fencing window, then SIGCONT.
    RedisStall,
    /// `kill -9` of the `redis-server` and a restart 2 s later, with AOF (`appendfsync always`).
    RedisRestartAof,
    /// The same with the default leases (TTL 15 s): the outage is far inside the fencing
    /// window, so nothing may be refused for the lease and nothing lost.
    RedisRestartAofDefaultLeases,
    /// The same without persistence: the Store comes back empty.
    RedisRestartEmpty,
    /// A wrong-typed key and a garbage record under the key prefix.
    ForeignKeys,
    /// A host Relocate of one node (every Actor `PreserveStateWith`) and, a short time into
    /// it, `kill -9` of the `redis-server` and a restart 2 s later, with AOF.
    RedisRestartMidRelocate,
    /// On a Redis Cluster with replicas: the replica of the store's master held back while a
    /// node creates fresh Actors, the master killed, the replica promoted without the
    /// held-back writes ([`failover`]).
    ClusterFailoverLostWrites,
    /// The same with the default leases.
    ClusterFailoverLostWritesDefaultLeases,
}

impl Scenario {
    const ALL: [Scenario; 10] = [
        Scenario::OwnerKill,
        Scenario::OwnerStall,
        Scenario::RedisStall,
        Scenario::RedisRestartAof,
        Scenario::RedisRestartAofDefaultLeases,
        Scenario::RedisRestartEmpty,
        Scenario::ForeignKeys,
        Scenario::RedisRestartMidRelocate,
        Scenario::ClusterFailoverLostWrites,
        Scenario::ClusterFailoverLostWritesDefaultLeases,
    ];

    fn name(self) -> &'static str {
        match self {
            Scenario::OwnerKill => "owner-kill",
            Scenario::OwnerStall => "owner-stall",
            Scenario::RedisStall => "redis-stall",
            Scenario::RedisRestartAof => "redis-restart-aof",
            Scenario::RedisRestartAofDefaultLeases => "redis-restart-aof-default-leases",
            Scenario::RedisRestartEmpty => "redis-restart-empty",
            Scenario::ForeignKeys => "foreign-keys",
            Scenario::RedisRestartMidRelocate => "redis-restart-mid-relocate",
            Scenario::ClusterFailoverLostWrites => "cluster-failover-lost-writes",
            Scenario::ClusterFailoverLostWritesDefaultLeases => {
                "cluster-failover-lost-writes-default-leases"
            }
        }
    }

    fn parse(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether the scenario's Redis keeps an append-only file.
    fn aof(self) -> bool {
        !matches!(self, Scenario::RedisRestartEmpty)
    }

    /// The scenario's lease timings.
    fn leases(self) -> Leases {
        match self {
            Scenario::RedisRestartAofDefaultLeases
            | Scenario::ClusterFailoverLostWritesDefaultLeases => DEFAULT_LEASES,
            _ => SHORT_LEASES,
        }
    }

    /// Whether the scenario restarts the `redis-server` (and measures the reconnect).
    fn restarts_redis(self) -> bool {
        matches!(
            self,
            Scenario::RedisRestartAof
                | Scenario::RedisRestartAofDefaultLeases
                | Scenario::RedisRestartEmpty
                | Scenario::RedisRestartMidRelocate
        )
    }

    /// Whether the scenario runs on its own Redis Cluster ([`failover`]).
    fn on_cluster(self) -> bool {
        matches!(
            self,
            Scenario::ClusterFailoverLostWrites | Scenario::ClusterFailoverLostWritesDefaultLeases
        )
    }

    /// How long the load runs: the fault, its duration, the recovery window and a margin.
    fn window(self, lead: Duration) -> Duration {
        let ttl = self.leases().ttl;
        let fault = match self {
            Scenario::ClusterFailoverLostWrites
            | Scenario::ClusterFailoverLostWritesDefaultLeases => {
                return failover::window(self.leases());
            }
            Scenario::OwnerStall => Duration::from_millis(ttl + 2_000),
            Scenario::RedisStall => Duration::from_millis(2_500),
            Scenario::RedisRestartAof
            | Scenario::RedisRestartAofDefaultLeases
            | Scenario::RedisRestartEmpty => Duration::from_secs(2),
            Scenario::RedisRestartMidRelocate => lead + Duration::from_secs(2),
            Scenario::OwnerKill | Scenario::ForeignKeys => Duration::ZERO,
        };
        FAULT_AT + fault + Duration::from_millis(ttl + 5_000 + 2_000)
    }
}

/// `cargo xtask faults [--scenario NAME]… [--actors N] [--relocate-lead-ms N]`.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let mut scenarios = Vec::new();
    let mut actors = 1_000u64;
    let mut lead = RELOCATE_LEAD;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--scenario" => {
                let name = it.next().ok_or("--scenario needs a name")?;
                scenarios.push(Scenario::parse(name).ok_or_else(|| {
                    let names: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
                    format!("unknown scenario `{name}` (known: {})", names.join(", "))
                })?);
            }
            "--actors" => {
                actors = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| (1..=10_000).contains(n))
                    .ok_or("--actors needs a number in 1..=10000")?;
            }
            "--relocate-lead-ms" => {
                lead = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| *n <= 10_000)
                    .map(Duration::from_millis)
                    .ok_or("--relocate-lead-ms needs a number in 0..=10000")?;
            }
            other => return Err(format!("faults: unknown argument `{other}`")),
        }
    }
    if scenarios.is_empty() {
        scenarios = Scenario::ALL.to_vec();
    }
    let binary = mesh_node_binary()?;
    let started = Instant::now();
    let mut rows = Vec::new();
    for s in scenarios {
        eprintln!("xtask: faults: == {} ({actors} actors)", s.name());
        let row = if s.on_cluster() {
            failover::run_scenario(&binary, s, actors)
        } else {
            run_scenario(&binary, s, actors, lead)
        }
        .unwrap_or_else(|e| Row::failed_to_run(s, e));
        eprintln!("xtask: faults: {}", row.line());
        rows.push(row);
    }
    println!("{}", row::HEADER);
    for r in &rows {
        println!("{}", r.line());
    }
    let failed = rows.iter().filter(|r| !r.passed).count();
    println!(
        "{} passed, {failed} failed ({:.0} s)",
        rows.len() - failed,
        started.elapsed().as_secs_f64()
    );
    if failed == 0 {
        Ok(())
    } else {
        Err(format!("{failed} fault scenario(s) failed"))
    }
}

/// Milliseconds since the Unix epoch (the driver's clock: every process is on this machine).
fn wall_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default()
}

fn node_args(url: &str, prefix: &str, leases: Leases) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "--redis".into(),
        url.into(),
        "--prefix".into(),
        prefix.into(),
        "--objects".into(),
        "--polling-ms".into(),
        POLLING_MS.to_string(),
    ];
    if leases.flags {
        for (flag, v) in [
            ("--lease-ttl-ms", leases.ttl),
            ("--lease-renew-ms", leases.renew),
            ("--lease-renew-timeout-ms", leases.renew_timeout),
            ("--lease-fencing-ms", leases.fencing),
        ] {
            a.push(flag.into());
            a.push(v.to_string());
        }
    }
    a
}

/// Waits (bounded by [`RECONNECT_LIMIT`]) until `redis` has `clients` connected clients again
/// after its restart `restarted`, polling every 10 ms; how long that took (ms).
fn reconnected(redis: &Redis, clients: u64, restarted: Instant) -> String {
    while restarted.elapsed() < RECONNECT_LIMIT {
        if redis.clients().is_ok_and(|n| n >= clients) {
            return format!("{} ms", restarted.elapsed().as_millis());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    format!("> {} ms", RECONNECT_LIMIT.as_millis())
}

fn run_scenario(
    binary: &std::path::Path,
    s: Scenario,
    actors: u64,
    lead: Duration,
) -> Result<Row, String> {
    let mut redis = Redis::start(s.aof())?;
    let prefix = format!("faults-{}", s.name());
    let leases = s.leases();
    let mut args = node_args(&redis.url(), &prefix, leases);
    if s == Scenario::RedisRestartMidRelocate {
        // A host Relocate needs every type to move: the counters keep their state.
        args.extend(["--relocation".into(), "preserve".into()]);
    }
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(Node::start(binary, &args, Duration::from_secs(60))?);
    }
    for n in &mut nodes {
        wait_peers(n, 2)?;
    }
    let driver = 0;
    nodes[driver].send(&format!("ACTORS f 0 {actors}"))?;
    let done =
        nodes[driver].wait_for(Duration::from_secs(120), |l| l.starts_with("ACTORS-DONE"))?;
    if done != format!("ACTORS-DONE {actors} 0") {
        return Err(format!("creating the actors: {done}"));
    }
    let window = s.window(lead);
    nodes[driver].send(&format!(
        "LOAD f 0 {actors} {} {PAUSE_MS} {PROBE_TIMEOUT_MS}",
        window.as_millis()
    ))?;
    let load_start = Instant::now();
    std::thread::sleep(FAULT_AT);
    let target = 2;
    let lease_room = u128::from(leases.ttl - leases.fencing);
    // The clients connected before a restart: every one of them must be back after it.
    let clients = if s.restarts_redis() {
        redis.clients()?
    } else {
        0
    };
    let mut restarted = None;
    let mut planted = Vec::new();
    let mut relocate_sent = None;
    let mut fault_at = wall_ms();
    let (healed, fenced) = match s {
        Scenario::OwnerKill => {
            nodes[target].kill()?;
            (fault_at, Vec::new())
        }
        Scenario::OwnerStall => {
            let pid = nodes[target].pid();
            signal(pid, "STOP")?;
            std::thread::sleep(Duration::from_millis(leases.ttl + 2_000));
            signal(pid, "CONT")?;
            let fenced = vec![Fenced {
                node: nodes[target].rid.clone(),
                from: fault_at + lease_room,
                until: u128::MAX,
            }];
            (wall_ms(), fenced)
        }
        Scenario::RedisStall => {
            let pid = redis.pid().ok_or("redis-server is not running")?;
            signal(pid, "STOP")?;
            std::thread::sleep(Duration::from_millis(2_500));
            signal(pid, "CONT")?;
            let healed = wall_ms();
            (healed, fence_all(&nodes, fault_at + lease_room, healed))
        }
        Scenario::RedisRestartAof
        | Scenario::RedisRestartAofDefaultLeases
        | Scenario::RedisRestartEmpty => {
            redis.kill()?;
            std::thread::sleep(Duration::from_secs(2));
            // The fence ends as the new server starts: a node may renew as soon as it listens,
            // which under load can be well before this suite's own ping gets through.
            let back = wall_ms();
            redis.restart()?;
            restarted = Some(Instant::now());
            (wall_ms(), fence_all(&nodes, fault_at + lease_room, back))
        }
        Scenario::ForeignKeys => {
            planted = plant_foreign_data(&redis, &prefix)?;
            (fault_at, Vec::new())
        }
        Scenario::RedisRestartMidRelocate => {
            nodes[target].send(&format!("RELOCATE {}", RELOCATE_DEADLINE.as_millis()))?;
            relocate_sent = Some(Instant::now());
            std::thread::sleep(lead);
            fault_at = wall_ms();
            redis.kill()?;
            std::thread::sleep(Duration::from_secs(2));
            // The fence ends as the new server starts: a node may renew as soon as it listens,
            // which under load can be well before this suite's own ping gets through.
            let back = wall_ms();
            redis.restart()?;
            restarted = Some(Instant::now());
            (wall_ms(), fence_all(&nodes, fault_at + lease_room, back))
        }
        Scenario::ClusterFailoverLostWrites | Scenario::ClusterFailoverLostWritesDefaultLeases => {
            return Err("a cluster scenario runs in `failover`".into());
        }
    };
    let reconnect = restarted.map_or_else(|| "-".to_owned(), |t| reconnected(&redis, clients, t));
    let left = (window + Duration::from_secs(60)).saturating_sub(load_start.elapsed());
    let lines = nodes[driver].collect_until(left, |l| l.starts_with("LOAD-DONE"))?;
    if let Some(dir) = std::env::var_os("ZLINK_FAULTS_LOG_DIR") {
        // The driver's lines beside the node logs, for a look at a failed run.
        let path = PathBuf::from(dir).join(format!("load-{}.txt", s.name()));
        let _ = std::fs::write(&path, lines.join("\n"));
    }
    let (by_id, totals) = check::parse(&lines);
    let verdict = check::check(&by_id, totals, healed, &fenced, fault_at);
    let mut notes = Vec::new();
    let relocate = match relocate_sent {
        Some(sent) => {
            let limit =
                (RELOCATE_DEADLINE + Duration::from_secs(10)).saturating_sub(sent.elapsed());
            let line = nodes[target]
                .wait_for(limit, |l| {
                    l.starts_with("RELOCATED") || l.starts_with("RELOCATE-ERR")
                })
                .unwrap_or_else(|e| format!("RELOCATE-ERR ({e})"));
            let outcome = line.trim_start_matches("RELOCATED ").to_owned();
            if !check::defined_relocation(&line) {
                notes.push(format!("the host Relocate ended `{line}`"));
            }
            outcome
        }
        None => "-".to_owned(),
    };
    let killed = (s == Scenario::OwnerKill).then_some(target);
    if let Some(k) = killed {
        // A killed node never withdraws its descriptor (docs/formats.md §12).
        let key = format!("mesh-node\0demo\0{}", nodes[k].rid);
        planted.push(zlink_cli::finding::show_bytes(key.as_bytes()));
    }
    let capacity = capacity_breaks(&mut nodes, killed, &redis.url(), &prefix, actors)
        .unwrap_or_else(|e| vec![format!("reading the capacity rows: {e}")]);
    let mut shutdown = Vec::new();
    for (i, n) in nodes.iter_mut().enumerate() {
        if killed == Some(i) {
            continue;
        }
        let line = n
            .quit(Duration::from_secs(60))
            .unwrap_or_else(|e| format!("STOPPED ? ({e})"));
        shutdown.push(line.trim_start_matches("STOPPED ").to_owned());
    }
    let clean = shutdown.iter().all(|o| o == "Stopped");
    let target = zlink_cli::redis::Target::Single(redis.url());
    let keys = store::keys_left(&target, &prefix)
        .map(|keys| check::unexpected_left(&keys, &planted, wall_ms()))
        .unwrap_or_else(|e| vec![format!("listing the keys left: {e}")]);
    if by_id.len() as u64 != actors {
        notes.push(format!(
            "{} of {actors} actors answered or failed at all",
            by_id.len()
        ));
    }
    notes.extend(capacity.iter().take(3).cloned());
    notes.extend(keys.iter().take(3).cloned());
    let passed = notes.is_empty() && clean && verdict.holds(reach_within_ms(leases));
    Ok(Row {
        scenario: s,
        verdict,
        relocate,
        reconnect,
        capacity: capacity.len(),
        keys_left: keys.len(),
        twice_creating: "-".into(),
        gap: "-".into(),
        shutdown: shutdown.join(" "),
        passed,
        note: notes.join("; "),
    })
}

/// Asks every node that runs (all but `killed`) what it has live and compares it with its
/// capacity row ([`check::capacity_breaks`]). The load has ended, so nothing is created or
/// moved any more, but a release or sweep started just before may still be landing: the
/// comparison is repeated (bounded) until it holds, and its last breaks are returned.
fn capacity_breaks(
    nodes: &mut [Node],
    killed: Option<usize>,
    url: &str,
    prefix: &str,
    actors: u64,
) -> Result<Vec<String>, String> {
    let rids: Vec<String> = nodes.iter().map(|n| n.rid.clone()).collect();
    let end = Instant::now() + CAPACITY_SETTLE;
    loop {
        let mut live = Vec::with_capacity(nodes.len());
        for (i, n) in nodes.iter_mut().enumerate() {
            if killed == Some(i) {
                live.push(None);
                continue;
            }
            n.send("LIVE")?;
            let line = n.wait_for(Duration::from_secs(10), |l| l.starts_with("LIVE "))?;
            let w: Vec<u64> = line
                .split_whitespace()
                .skip(1)
                .filter_map(|v| v.parse().ok())
                .collect();
            match w.as_slice() {
                [a, s] => live.push(Some((*a, *s))),
                _ => return Err(format!("a node answered `{line}`")),
            }
        }
        let rows = store::capacity_rows(url, prefix, "demo", &rids)?;
        let counted: Vec<check::NodeCapacity> = rids
            .iter()
            .zip(live)
            .zip(rows)
            .map(|((node, live), row)| check::NodeCapacity {
                node: node.clone(),
                live,
                row,
            })
            .collect();
        let breaks = check::capacity_breaks(&counted, actors);
        if breaks.is_empty() || Instant::now() >= end {
            return Ok(breaks);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Every node is fenced from `from` until `until`: its Store was unreachable.
fn fence_all(nodes: &[Node], from: u128, until: u128) -> Vec<Fenced> {
    nodes
        .iter()
        .map(|n| Fenced {
            node: n.rid.clone(),
            from,
            until,
        })
        .collect()
}

/// Waits (bounded) until `node` sees `peers` Ready peers.
fn wait_peers(node: &mut Node, peers: usize) -> Result<(), String> {
    let end = Instant::now() + Duration::from_secs(60);
    while Instant::now() < end {
        node.send("PEERS")?;
        let line = node.wait_for(Duration::from_secs(10), |l| l.starts_with("PEERS "))?;
        if line == format!("PEERS {peers}") {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(format!("a node did not see {peers} peers within 60 s"))
}

/// Writes, under the run's key prefix and in the Redis provider's layout, one key of the wrong
/// Redis type (a plain string where the provider keeps its records) and one record whose
/// bytes are no zlink record: both listed by the provider's scan index, as real damage is.
/// Returns what it planted as the keys-left check names it (the garbage record's logical key,
/// the wrong-typed key's Redis name): nothing deletes either.
fn plant_foreign_data(redis: &Redis, prefix: &str) -> Result<Vec<String>, String> {
    use zlink_store_spi::{LocationStore, Mutation, StoreKey, WriteRequest};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let key = |s: &str| StoreKey::new(s).map_err(|e| e.to_string());
    let (garbage, foreign) = (
        key("authority\0actor\0zz-garbage")?,
        key("authority\0actor\0zz-foreign")?,
    );
    rt.block_on(async {
        let options = zlink_redis_location::RedisLocationOptions::from_url(&redis.url())
            .and_then(|o| o.with_key_prefix(prefix.to_owned()))
            .map_err(|e| e.to_string())?;
        let store = zlink_redis_location::RedisLocationStore::connect(options)
            .await
            .map_err(|e| e.to_string())?;
        let puts = vec![
            Mutation::put(garbage.clone(), "garbage"),
            Mutation::put(foreign.clone(), "x"),
        ];
        let write = WriteRequest::new(vec![], puts).map_err(|e| e.to_string())?;
        store.write(&write).await.map_err(|e| e.to_string())?;
        Ok::<(), String>(())
    })?;
    use sha2::{Digest, Sha256};
    let sha: String = Sha256::digest(foreign.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let record = format!("{prefix}:{{zlink-location-v3}}:opaque:{sha}");
    redis.cli(&["DEL", &record])?;
    let set = redis.cli(&["SET", &record, "foreign"])?;
    if set != "OK" {
        return Err(format!("planting the foreign key: SET answered {set}"));
    }
    let show = zlink_cli::finding::show_bytes;
    Ok(vec![show(garbage.as_bytes()), show(record.as_bytes())])
}

/// The `mesh_node` example in the dev profile, the binary `cargo test --workspace` has just
/// built (no second, optimised build of every crate). The bounds the scenarios check (every
/// Actor answering again within lease TTL + 5 s of a failover, say) are stated for a deployed
/// build; the dev profile compiles every dependency optimised (`[profile.dev.package."*"]` in
/// the workspace `Cargo.toml`), which is where the CPU went: with unoptimised dependencies the
/// 2-core CI machine was CPU-bound after the Cluster failover (recovery max 5-12 s), with
/// optimised ones it answers as fast as a release build (1.6-1.7 s against 1.5-1.9 s).
fn mesh_node_binary() -> Result<PathBuf, String> {
    crate::examples::example_binary("zlink-runtime", "mesh_node", false)
}
