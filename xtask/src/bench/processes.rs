//! `cargo xtask bench processes [--nodes 4,32] [--idle-seconds S] [--polling-ms M]`: what an
//! idle mesh of real `mesh_node` processes costs one Redis (issue 38: "32 `mesh_node` processes
//! on one Redis, idle, default polling").
//!
//! For each mesh size K, on a private `redis-server` of its own (loopback, no persistence):
//! K release `mesh_node` Object Server processes under one key prefix, each with the default
//! location options but the polling interval (`--polling-ms`, default 1,000 ms, the spec's
//! default). Measured per K:
//!
//! - **full mesh**: from the moment the last process printed `READY`, how long until every
//!   process lists the K - 1 others as Ready peers (`PEERS`, asked every 50 ms), in ms and in
//!   polling intervals;
//! - **idle**: over S seconds (default 12) with nothing else happening, per node per polling
//!   interval, from `INFO commandstats`: the **Store calls** (script calls, `EVALSHA` + `EVAL`:
//!   the Redis Location Store makes every read, scan and batch one script call — discovery
//!   polls, lease reads and lease renewals alike), the **records read** inside them
//!   (`ZREVRANGE` + `ZREVRANGEBYSCORE`, one per record a script reads), and every command by
//!   name (Redis counts the commands a script runs as well as the script call; the benchmark's
//!   own `INFO` calls are left out); and the CPU Redis used (`INFO cpu`, user + system) as a
//!   share of one core.
//!
//! The baseline is the smallest K of the run: the ratio of the largest K's Store calls (and
//! records read) per node per poll to the smallest's shows whether a node's cost grows with
//! the mesh (1.0x: it does not). Target (issue 38): ≤ 3 Store calls per node per idle poll,
//! full mesh within 2 polls.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::faults::procs::{Node, Redis};

struct Args {
    nodes: Vec<usize>,
    idle: Duration,
    polling: Duration,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        nodes: vec![4, 32],
        idle: Duration::from_secs(12),
        polling: Duration::from_millis(1000),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--nodes" => {
                parsed.nodes = value("--nodes")?
                    .split(',')
                    .map(|n| n.parse::<usize>().map_err(|e| format!("--nodes: {e}")))
                    .collect::<Result<_, _>>()?;
                if parsed.nodes.iter().any(|&k| k < 2) {
                    return Err("--nodes: every mesh size is at least 2".into());
                }
            }
            "--idle-seconds" => {
                let s: u64 = value("--idle-seconds")?
                    .parse()
                    .map_err(|e| format!("--idle-seconds: {e}"))?;
                parsed.idle = Duration::from_secs(s.max(1));
            }
            "--polling-ms" => {
                let ms: u64 = value("--polling-ms")?
                    .parse()
                    .map_err(|e| format!("--polling-ms: {e}"))?;
                parsed.polling = Duration::from_millis(ms.max(1));
            }
            other => return Err(format!("bench processes: unknown argument `{other}`")),
        }
    }
    parsed.nodes.sort_unstable();
    parsed.nodes.dedup();
    Ok(parsed)
}

/// What one mesh size measured.
struct Measured {
    nodes: usize,
    full_mesh: Duration,
    /// Commands per node per polling interval, by command name, over the idle window.
    per_poll: BTreeMap<String, f64>,
    /// Redis CPU over the idle window, as a share of one core.
    cpu: f64,
}

impl Measured {
    fn sum(&self, commands: &[&str]) -> f64 {
        commands.iter().filter_map(|c| self.per_poll.get(*c)).sum()
    }

    /// Store calls (script calls) per node per poll.
    fn calls(&self) -> f64 {
        self.sum(&["evalsha", "eval"])
    }

    /// Records read inside the scripts per node per poll.
    fn reads(&self) -> f64 {
        self.sum(&["zrevrange", "zrevrangebyscore"])
    }
}

/// Runs the benchmark (see the module doc).
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let args = parse(args)?;
    let binary = crate::examples::example_binary("zlink-runtime", "mesh_node", true)?;
    let mut results = Vec::new();
    for &k in &args.nodes {
        eprintln!("bench processes: {k} mesh_node processes");
        results.push(one_mesh(&binary, k, &args)?);
    }
    print(&results, &args);
    Ok(())
}

fn one_mesh(binary: &std::path::Path, k: usize, args: &Args) -> Result<Measured, String> {
    let redis = Redis::start(false)?;
    let url = redis.url();
    let node_args: Vec<String> = vec![
        "--redis".into(),
        url.clone(),
        "--prefix".into(),
        "bench-procs".into(),
        "--objects".into(),
        "--polling-ms".into(),
        args.polling.as_millis().to_string(),
    ];
    let mut nodes = Vec::with_capacity(k);
    for _ in 0..k {
        nodes.push(Node::start(binary, &node_args, Duration::from_secs(60))?);
    }
    let last_ready = Instant::now();
    let full_mesh =
        wait_full_mesh(&mut nodes, k, args.polling * 20)?.saturating_duration_since(last_ready);
    // Let the joins' own work (first lease reads, connections) settle before the window.
    std::thread::sleep(args.polling * 2);
    let (calls0, cpu0) = (commandstats(&redis)?, cpu_seconds(&redis)?);
    std::thread::sleep(args.idle);
    let (calls1, cpu1) = (commandstats(&redis)?, cpu_seconds(&redis)?);
    let polls = args.idle.as_secs_f64() / args.polling.as_secs_f64();
    let mut per_poll = BTreeMap::new();
    for (cmd, after) in &calls1 {
        let before = calls0.get(cmd).copied().unwrap_or(0);
        // The benchmark's own reads of the counters.
        let own = if cmd == "info" { 2 } else { 0 };
        let n = after.saturating_sub(before).saturating_sub(own);
        if n > 0 {
            per_poll.insert(cmd.clone(), n as f64 / k as f64 / polls);
        }
    }
    let cpu = (cpu1 - cpu0) / args.idle.as_secs_f64();
    for node in &mut nodes {
        let stopped = node.quit(Duration::from_secs(30))?;
        if stopped != "STOPPED Stopped" {
            return Err(format!("a node ended `{stopped}`"));
        }
    }
    Ok(Measured {
        nodes: k,
        full_mesh,
        per_poll,
        cpu,
    })
}

/// Asks every node `PEERS` until each lists the `k - 1` others; the instant all did.
fn wait_full_mesh(nodes: &mut [Node], k: usize, limit: Duration) -> Result<Instant, String> {
    let end = Instant::now() + limit;
    let mut meshed = vec![false; nodes.len()];
    while Instant::now() < end {
        for (node, done) in nodes.iter_mut().zip(meshed.iter_mut()) {
            if *done {
                continue;
            }
            node.send("PEERS")?;
            let line = node.wait_for(Duration::from_secs(5), |l| l.starts_with("PEERS "))?;
            let peers: usize = line
                .split_whitespace()
                .nth(1)
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("an unreadable line `{line}`"))?;
            *done = peers + 1 >= k;
        }
        if meshed.iter().all(|d| *d) {
            return Ok(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("no full mesh of {k} nodes within {limit:?}"))
}

/// `INFO commandstats`: calls per command name.
fn commandstats(redis: &Redis) -> Result<BTreeMap<String, u64>, String> {
    let info = redis.cli(&["INFO", "commandstats"])?;
    let mut out = BTreeMap::new();
    for line in info.lines() {
        // cmdstat_evalsha:calls=12,usec=...
        let Some(rest) = line.strip_prefix("cmdstat_") else {
            continue;
        };
        let Some((name, fields)) = rest.split_once(':') else {
            continue;
        };
        let calls = fields
            .split(',')
            .find_map(|f| f.strip_prefix("calls="))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .ok_or_else(|| format!("INFO commandstats line `{line}`"))?;
        out.insert(name.to_owned(), calls);
    }
    Ok(out)
}

/// `INFO cpu`: the server's user + system CPU seconds so far.
fn cpu_seconds(redis: &Redis) -> Result<f64, String> {
    let info = redis.cli(&["INFO", "cpu"])?;
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .ok_or_else(|| format!("INFO cpu has no `{name}`"))
    };
    Ok(field("used_cpu_sys:")? + field("used_cpu_user:")?)
}

fn print(results: &[Measured], args: &Args) {
    let poll_ms = args.polling.as_millis();
    println!(
        "\n## Idle mesh of mesh_node processes on one Redis (polling {poll_ms} ms, idle {} s)\n",
        args.idle.as_secs()
    );
    println!(
        "| nodes | full mesh after the last READY | Store calls per node per poll | records read per node per poll | every command per node per poll | Redis CPU (one core) |"
    );
    println!("|---:|---|---:|---:|---|---:|");
    for m in results {
        let by: Vec<String> = m
            .per_poll
            .iter()
            .map(|(c, n)| format!("{c} {n:.2}"))
            .collect();
        println!(
            "| {} | {} ms ({:.1} polls) | {:.2} | {:.2} | {} | {:.1} % |",
            m.nodes,
            m.full_mesh.as_millis(),
            m.full_mesh.as_secs_f64() / args.polling.as_secs_f64(),
            m.calls(),
            m.reads(),
            by.join(", "),
            m.cpu * 100.0
        );
    }
    if let (Some(first), Some(last)) = (results.first(), results.last()) {
        if first.nodes != last.nodes && first.calls() > 0.0 && first.reads() > 0.0 {
            println!(
                "\nper node per poll, {} nodes / {} nodes: Store calls {:.2}x, records read {:.2}x (1.00x: a node's cost does not grow with the mesh); target ≤ 3 Store calls per node per poll, full mesh ≤ 2 polls",
                last.nodes,
                first.nodes,
                last.calls() / first.calls(),
                last.reads() / first.reads()
            );
        }
    }
}
