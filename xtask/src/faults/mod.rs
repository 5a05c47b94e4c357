//! `cargo xtask faults`: the process-level fault suite (issue "one owner and nothing lost under
//! faults"). Each scenario starts a private `redis-server` on a free loopback port and three
//! `mesh_node` Object Server processes (`crates/zlink-runtime/examples/mesh_node`) over it with
//! short leases (TTL 3 s, renew every 500 ms within 500 ms, fencing margin 1 s), creates the
//! counter Actors from the first node, and has it drive one sequential loop of `Probe`
//! requests per Actor while the fault is injected from outside (`kill -9`, SIGSTOP / SIGCONT of
//! a node or of the `redis-server`, foreign data written under the key prefix). Every reply
//! names the answering process, the activation's ObjectGeneration and nonce, and its count;
//! the checker in [`check`] fails the scenario unless no activation answers after another one
//! of the same id took over, counts only rise within an activation, no acknowledged increment
//! is lost without a higher ObjectGeneration, no answer comes past the answering node's
//! admission deadline, every request ends exactly once in a defined kind, every Actor answers
//! again within lease TTL + 5 s of the heal, and every node's shutdown ends `Stopped`.
//!
//! Every loop is bounded in count and time and every address is loopback.

mod check;
mod procs;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use check::Fenced;
use procs::{Node, Redis, signal};

/// The lease timings of every node (ms).
const TTL_MS: u64 = 3_000;
const RENEW_MS: u64 = 500;
const RENEW_TIMEOUT_MS: u64 = 500;
const FENCING_MS: u64 = 1_000;
const POLLING_MS: u64 = 200;

/// The time from the load's start to the fault.
const FAULT_AT: Duration = Duration::from_secs(3);

/// Each Actor's pause between two probes, and one probe's reply timeout.
const PAUSE_MS: u64 = 250;
const PROBE_TIMEOUT_MS: u64 = 2_000;

/// How long every Actor has to answer again after the heal (lease TTL + 5 s).
const REACH_WITHIN_MS: u128 = TTL_MS as u128 + 5_000;

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
    /// The same without persistence: the Store comes back empty.
    RedisRestartEmpty,
    /// A wrong-typed key and a garbage record under the key prefix.
    ForeignKeys,
}

impl Scenario {
    const ALL: [Scenario; 6] = [
        Scenario::OwnerKill,
        Scenario::OwnerStall,
        Scenario::RedisStall,
        Scenario::RedisRestartAof,
        Scenario::RedisRestartEmpty,
        Scenario::ForeignKeys,
    ];

    fn name(self) -> &'static str {
        match self {
            Scenario::OwnerKill => "owner-kill",
            Scenario::OwnerStall => "owner-stall",
            Scenario::RedisStall => "redis-stall",
            Scenario::RedisRestartAof => "redis-restart-aof",
            Scenario::RedisRestartEmpty => "redis-restart-empty",
            Scenario::ForeignKeys => "foreign-keys",
        }
    }

    fn parse(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether the scenario's Redis keeps an append-only file.
    fn aof(self) -> bool {
        !matches!(self, Scenario::RedisRestartEmpty)
    }

    /// How long the load runs: the fault, its duration, the recovery window and a margin.
    fn window(self) -> Duration {
        let fault = match self {
            Scenario::OwnerStall => Duration::from_millis(TTL_MS + 2_000),
            Scenario::RedisStall => Duration::from_millis(2_500),
            Scenario::RedisRestartAof | Scenario::RedisRestartEmpty => Duration::from_secs(2),
            Scenario::OwnerKill | Scenario::ForeignKeys => Duration::ZERO,
        };
        FAULT_AT + fault + Duration::from_millis(TTL_MS + 5_000 + 2_000)
    }
}

/// `cargo xtask faults [--scenario NAME]… [--actors N]`.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let mut scenarios = Vec::new();
    let mut actors = 1_000u64;
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
        let row = run_scenario(&binary, s, actors).unwrap_or_else(|e| Row::failed_to_run(s, e));
        eprintln!("xtask: faults: {}", row.line());
        rows.push(row);
    }
    println!(
        "| scenario | ok | errors by kind | lost | doubles | late | count breaks | unreachable | recovery p50 / max | shutdown | result |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
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

/// One line of the result table.
struct Row {
    scenario: Scenario,
    verdict: check::Verdict,
    shutdown: String,
    passed: bool,
    note: String,
}

impl Row {
    fn failed_to_run(scenario: Scenario, why: String) -> Row {
        Row {
            scenario,
            verdict: check::Verdict::default(),
            shutdown: "-".into(),
            passed: false,
            note: why,
        }
    }

    fn line(&self) -> String {
        let v = &self.verdict;
        let errors: Vec<String> = v.errors.iter().map(|(k, n)| format!("{k} {n}")).collect();
        format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} / {} ms | {} | {}{} |",
            self.scenario.name(),
            v.ok,
            if errors.is_empty() {
                "-".to_owned()
            } else {
                errors.join(", ")
            },
            v.lost,
            v.doubles,
            v.late,
            v.count_breaks,
            v.unreachable,
            v.recovery_p50(),
            v.recovery_max(),
            self.shutdown,
            if self.passed { "pass" } else { "FAIL" },
            if self.note.is_empty() {
                String::new()
            } else {
                format!(": {}", self.note)
            }
        )
    }
}

/// Milliseconds since the Unix epoch (the driver's clock: every process is on this machine).
fn wall_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default()
}

fn node_args(redis: &Redis, prefix: &str) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "--redis".into(),
        redis.url(),
        "--prefix".into(),
        prefix.into(),
        "--objects".into(),
    ];
    for (flag, v) in [
        ("--lease-ttl-ms", TTL_MS),
        ("--lease-renew-ms", RENEW_MS),
        ("--lease-renew-timeout-ms", RENEW_TIMEOUT_MS),
        ("--lease-fencing-ms", FENCING_MS),
        ("--polling-ms", POLLING_MS),
    ] {
        a.push(flag.into());
        a.push(v.to_string());
    }
    a
}

fn run_scenario(binary: &std::path::Path, s: Scenario, actors: u64) -> Result<Row, String> {
    let mut redis = Redis::start(s.aof())?;
    let prefix = format!("faults-{}", s.name());
    let args = node_args(&redis, &prefix);
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
    let window = s.window();
    nodes[driver].send(&format!(
        "LOAD f 0 {actors} {} {PAUSE_MS} {PROBE_TIMEOUT_MS}",
        window.as_millis()
    ))?;
    let load_start = Instant::now();
    std::thread::sleep(FAULT_AT);
    let target = 2;
    let fault_at = wall_ms();
    let lease_room = u128::from(TTL_MS - FENCING_MS);
    let (healed, fenced) = match s {
        Scenario::OwnerKill => {
            nodes[target].kill()?;
            (fault_at, Vec::new())
        }
        Scenario::OwnerStall => {
            let pid = nodes[target].pid();
            signal(pid, "STOP")?;
            std::thread::sleep(Duration::from_millis(TTL_MS + 2_000));
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
        Scenario::RedisRestartAof | Scenario::RedisRestartEmpty => {
            redis.kill()?;
            std::thread::sleep(Duration::from_secs(2));
            redis.restart()?;
            let healed = wall_ms();
            (healed, fence_all(&nodes, fault_at + lease_room, healed))
        }
        Scenario::ForeignKeys => {
            plant_foreign_data(&redis, &prefix)?;
            (fault_at, Vec::new())
        }
    };
    let left = (window + Duration::from_secs(60)).saturating_sub(load_start.elapsed());
    let lines = nodes[driver].collect_until(left, |l| l.starts_with("LOAD-DONE"))?;
    let (by_id, totals) = check::parse(&lines);
    let verdict = check::check(&by_id, totals, healed, &fenced);
    let mut shutdown = Vec::new();
    for (i, n) in nodes.iter_mut().enumerate() {
        if s == Scenario::OwnerKill && i == target {
            continue;
        }
        let line = n
            .quit(Duration::from_secs(60))
            .unwrap_or_else(|e| format!("STOPPED ? ({e})"));
        shutdown.push(line.trim_start_matches("STOPPED ").to_owned());
    }
    let clean = shutdown.iter().all(|o| o == "Stopped");
    let mut note = String::new();
    if by_id.len() as u64 != actors {
        note = format!(
            "{} of {actors} actors answered or failed at all",
            by_id.len()
        );
    }
    let passed = note.is_empty() && clean && verdict.holds(REACH_WITHIN_MS);
    Ok(Row {
        scenario: s,
        verdict,
        shutdown: shutdown.join(" "),
        passed,
        note,
    })
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
fn plant_foreign_data(redis: &Redis, prefix: &str) -> Result<(), String> {
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
    Ok(())
}

/// The `mesh_node` example, built (debug) into this workspace's target directory.
fn mesh_node_binary() -> Result<PathBuf, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let status = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "-p",
            "zlink-runtime",
            "--example",
            "mesh_node",
        ])
        .current_dir(crate::workspace_root())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building examples/mesh_node failed ({status})"));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::workspace_root().join("target"));
    Ok(target.join("debug").join("examples").join("mesh_node"))
}
