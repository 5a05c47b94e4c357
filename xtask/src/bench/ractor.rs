//! `cargo xtask bench ractor [--seconds S] [--redis URL] [--case mesh|same-node]`: zlink beside
//! ractor_cluster, the Rust actor peer, measured the same way in the same run, as a ratio
//! `zlink/ractor`.
//!
//! The ractor side is the standalone project `benches/ractor-peer` (not a workspace member, so
//! CI never compiles ractor), built here in release under `<target>/ractor-peer`. Its three
//! processes take commands on stdin and answer one line each (`ROUND …`, `RESULT …`):
//!
//! - **mesh** (the shapes of `bench mesh`, two processes on loopback, 64 B payloads): the zlink
//!   side is `bench mesh`'s own code (`mesh_node` example server, current-thread client node);
//!   the ractor side a `ractor-peer server` (a `NodeServer` with an actor in a process group)
//!   and a `ractor-peer client` (its own `NodeServer`, `client_connect`, the server's actor as a
//!   `RemoteActor` from the process group). One-way send for S seconds until the server counts
//!   every message (msg/s), and request/response at c=1 and c=64 (req/s, p50, p99).
//! - **same-node** (Actor request at c=1): the zlink side is `bench objects --case same-node`'s
//!   figure (root A requests its own Actors by id; two roots on a Redis Location Store, which
//!   this case therefore needs: `cargo xtask services`); the ractor side `ractor-peer local`, a
//!   `call` to an actor in the same process. Both on a 2-worker tokio runtime.
//!
//! Every case alternates zlink and ractor rounds (8 rounds, S/8 seconds each), so load
//! elsewhere on the machine falls on both alike; ratios are printed over all rounds and as the
//! median of the per-round pairs.

use super::options;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use super::mesh;
use super::objects;
use super::transport::{Count, Latency, ROUNDS, Samples, stop_child};

/// How long a peer process may take to start, connect and find its target.
const SETUP: Duration = Duration::from_secs(30);
/// Payload bytes both sides send (`bench mesh`'s and `bench objects`').
const PAYLOAD: usize = 64;
/// The cases `--case` picks from.
const CASES: [&str; 2] = ["mesh", "same-node"];

/// The parsed options.
#[derive(Debug)]
struct Args {
    seconds: f64,
    url: String,
    /// Only this case (`mesh`, `same-node`), or both.
    case: Option<String>,
}

impl Args {
    fn runs(&self, case: &str) -> bool {
        options::runs(self.case.as_deref(), case)
    }
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        seconds: 3.0,
        url: objects::DEFAULT_URL.to_owned(),
        case: None,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--seconds" => parsed.seconds = options::seconds("ractor", it.next())?,
            "--redis" => parsed.url = options::url("ractor", it.next())?,
            "--case" => parsed.case = Some(options::case("ractor", it.next(), &CASES)?),
            other => {
                return Err(format!(
                    "bench ractor: unknown option `{other}` (known: --seconds S, --redis URL, \
                     --case mesh|same-node)"
                ));
            }
        }
    }
    Ok(parsed)
}

/// One `RESULT` line of the peer: a case over all its rounds.
#[derive(Debug, PartialEq)]
struct Outcome {
    case: String,
    /// Messages or requests handled.
    n: u64,
    secs: f64,
    /// Per second.
    rate: f64,
    /// Request cases only.
    p50_us: Option<f64>,
    p99_us: Option<f64>,
}

impl Outcome {
    /// The figure as `bench mesh` holds it (0 for a one-way case's latencies).
    fn latency(&self) -> Latency {
        let us = |v: Option<f64>| Duration::from_secs_f64(v.unwrap_or(0.0).max(0.0) / 1e6);
        Latency {
            per_sec: self.rate,
            p50: us(self.p50_us),
            p99: us(self.p99_us),
        }
    }
}

/// Reads `RESULT case=NAME n=N secs=T rate=R [p50_us=P p99_us=Q]`.
fn parse_result(line: &str) -> Result<Outcome, String> {
    let bad = || format!("not a RESULT line: {line:?}");
    let mut words = line.split_whitespace();
    if words.next() != Some("RESULT") {
        return Err(bad());
    }
    let mut fields = std::collections::HashMap::new();
    for word in words {
        let (k, v) = word.split_once('=').ok_or_else(bad)?;
        fields.insert(k, v);
    }
    let num = |k: &str| -> Result<Option<f64>, String> {
        fields
            .get(k)
            .map(|v| {
                v.parse::<f64>()
                    .ok()
                    .filter(|n| n.is_finite())
                    .ok_or_else(bad)
            })
            .transpose()
    };
    Ok(Outcome {
        case: fields.get("case").ok_or_else(bad)?.to_string(),
        n: fields
            .get("n")
            .and_then(|v| v.parse().ok())
            .ok_or_else(bad)?,
        secs: num("secs")?.ok_or_else(bad)?,
        rate: num("rate")?.ok_or_else(bad)?,
        p50_us: num("p50_us")?,
        p99_us: num("p99_us")?,
    })
}

/// Reads `ROUND case=NAME n=N secs=T`: the round's rate.
fn parse_round(line: &str) -> Result<f64, String> {
    let bad = || format!("peer: {line}");
    let rest = line.strip_prefix("ROUND ").ok_or_else(bad)?;
    let field = |k: &str| {
        rest.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(bad)
    };
    Ok(field("n=")? / field("secs=")?)
}

/// The `ractor-peer` binary, built in release under `<target>/ractor-peer` from the
/// committed `Cargo.lock`.
fn peer_binary() -> Result<PathBuf, String> {
    let root = crate::workspace_root();
    let target = crate::examples::target_dir().join("ractor-peer");
    let status = crate::examples::cargo()
        .args([
            "build",
            "--quiet",
            "--release",
            "--locked",
            "--manifest-path",
        ])
        .arg(root.join("benches/ractor-peer/Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(&root)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building benches/ractor-peer failed ({status})"));
    }
    Ok(target.join("release").join("ractor-peer"))
}

/// The ractor_cluster version `benches/ractor-peer/Cargo.lock` pins.
fn ractor_version(lock: &str) -> Option<&str> {
    let at = lock.find("name = \"ractor_cluster\"")?;
    let rest = &lock[at..];
    let line = rest.lines().nth(1)?;
    line.strip_prefix("version = \"")?.strip_suffix('"')
}

/// The `ractor-peer server` process; closing its stdin (on drop) stops it.
struct PeerServer {
    child: Child,
    addr: String,
}

impl PeerServer {
    fn spawn(binary: &Path) -> Result<Self, String> {
        let mut child = Command::new(binary)
            .args(["server", "--max-seconds", "3600"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        let Some(port) = line.trim().strip_prefix("READY port=") else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("unexpected ractor-peer server output {line:?}"));
        };
        let addr = format!("127.0.0.1:{port}");
        Ok(Self { child, addr })
    }
}

impl Drop for PeerServer {
    fn drop(&mut self) {
        stop_child(&mut self.child, Duration::from_secs(5));
    }
}

/// A `ractor-peer client` or `local` process, driven one command at a time (async, so the
/// zlink nodes of this process keep running while it measures).
struct Driver {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl Driver {
    async fn spawn(binary: &Path, args: &[&str]) -> Result<Self, String> {
        let mut child = tokio::process::Command::new(binary)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut driver = Self {
            child,
            stdin,
            lines: tokio::io::BufReader::new(stdout).lines(),
        };
        match driver.line(SETUP).await?.as_str() {
            "READY" => Ok(driver),
            other => Err(format!("ractor-peer {args:?}: {other}")),
        }
    }

    async fn line(&mut self, within: Duration) -> Result<String, String> {
        match tokio::time::timeout(within, self.lines.next_line()).await {
            Ok(Ok(Some(line))) => Ok(line),
            Ok(Ok(None)) => Err("ractor-peer exited".into()),
            Ok(Err(e)) => Err(format!("ractor-peer: {e}")),
            Err(_) => Err(format!("ractor-peer said nothing for {within:?}")),
        }
    }

    async fn send(&mut self, command: &str) -> Result<(), String> {
        self.stdin
            .write_all(format!("{command}\n").as_bytes())
            .await
            .map_err(|e| format!("ractor-peer: {e}"))
    }

    /// Runs one round of `command` (`d` long); its rate.
    async fn round(&mut self, command: &str, d: Duration) -> Result<f64, String> {
        self.send(command).await?;
        parse_round(&self.line(d + 2 * SETUP).await?)
    }

    /// Every case's figure over all its rounds.
    async fn report(&mut self) -> Result<Vec<Outcome>, String> {
        self.send("report").await?;
        let mut outcomes = Vec::new();
        for _ in 0..16 {
            let line = self.line(SETUP).await?;
            if line == "END" {
                return Ok(outcomes);
            }
            outcomes.push(parse_result(&line)?);
        }
        Err("ractor-peer: report without END".into())
    }

    /// Asks the process to stop (a client casts `Stop` to its server first); kills it if it
    /// has not exited within `SETUP`.
    async fn stop(mut self) {
        let _ = self.send("stop").await;
        if tokio::time::timeout(SETUP, self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

fn outcome<'a>(outcomes: &'a [Outcome], case: &str) -> Result<&'a Outcome, String> {
    outcomes
        .iter()
        .find(|o| o.case == case)
        .ok_or_else(|| format!("ractor-peer reported no `{case}`"))
}

/// One table row: a case's zlink and ractor figures and the per-round rate ratios.
struct Row {
    case: String,
    zlink: Latency,
    ractor: Latency,
    paired: Vec<f64>,
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let args = parse(args)?;
    let peer = peer_binary()?;
    let lock =
        std::fs::read_to_string(crate::workspace_root().join("benches/ractor-peer/Cargo.lock"))
            .unwrap_or_default();
    let version = ractor_version(&lock).unwrap_or("?");
    let d = Duration::from_secs_f64(args.seconds);
    println!(
        "ractor bench: zlink beside ractor_cluster {version}, {} B payloads, {:.1} s per case \
         per side in {ROUNDS} alternating rounds",
        PAYLOAD, args.seconds
    );
    let (mut rows, mut failed) = (Vec::new(), None);
    if args.runs("mesh") {
        let mesh_bin = mesh::mesh_node_binary()?;
        let server = mesh::MeshServer::spawn(&mesh_bin, &[])?;
        let ractor_server = PeerServer::spawn(&peer)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rows.extend(rt.block_on(mesh_cases(&peer, &server, &ractor_server.addr, d))?);
        drop((server, ractor_server));
    }
    if args.runs("same-node") {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(objects::WORKERS)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        // A failure here (no Redis, say) still leaves the mesh rows to print.
        match rt.block_on(same_node(&peer, &args.url, d)) {
            Ok(row) => rows.push(row),
            Err(e) => {
                failed = Some(format!(
                    "bench ractor: same-node: {e} (it needs Redis at {}: `cargo xtask services`)",
                    args.url
                ));
            }
        }
    }
    if !rows.is_empty() {
        println!();
        print_table(&rows);
    }
    failed.map_or(Ok(()), Err)
}

/// The three `bench mesh` shapes, zlink and ractor rounds alternating.
async fn mesh_cases(
    peer: &Path,
    server: &mesh::MeshServer,
    ractor_addr: &str,
    d: Duration,
) -> Result<Vec<Row>, String> {
    let (host, node) = mesh::client(&server.endpoint, None, false).await?;
    let mut driver = match Driver::spawn(peer, &["client", "--connect", ractor_addr]).await {
        Ok(driver) => driver,
        Err(e) => {
            let _ = host.shutdown().await;
            return Err(e);
        }
    };
    let text = "x".repeat(PAYLOAD);
    let slice = d / ROUNDS;
    let secs = slice.as_secs_f64();
    let mut rows = Vec::new();
    let result = async {
        let (mut z, mut paired) = (Count::default(), Vec::new());
        for _ in 0..ROUNDS {
            let (n, t) = mesh::one_way(&node, &server.rid, &text, slice).await?;
            let r = driver.round(&format!("oneway {secs}"), slice).await?;
            paired.push(n as f64 / t.as_secs_f64() / r);
            z.add((n, t));
        }
        let oneway = z.per_sec();
        let mut zlink_rr = Vec::new();
        for c in [1usize, 64] {
            let (mut z, mut paired) = (Samples::default(), Vec::new());
            for _ in 0..ROUNDS {
                let round = mesh::request_response(&node, &server.rid, &text, c, slice).await?;
                let r = driver.round(&format!("rr {c} {secs}"), slice).await?;
                paired.push(objects::per_sec(&round) / r);
                z.add(round);
            }
            zlink_rr.push((c, z.latency(), paired));
        }
        let outcomes = driver.report().await?;
        let r = outcome(&outcomes, "oneway")?;
        rows.push(Row {
            case: "one-way send (msg/s)".into(),
            zlink: Latency {
                per_sec: oneway,
                p50: Duration::ZERO,
                p99: Duration::ZERO,
            },
            ractor: r.latency(),
            paired,
        });
        for (c, zlink, paired) in zlink_rr {
            rows.push(Row {
                case: format!("request/response c={c}"),
                zlink,
                ractor: outcome(&outcomes, &format!("c{c}"))?.latency(),
                paired,
            });
        }
        Ok::<(), String>(())
    }
    .await;
    driver.stop().await;
    let report = host.shutdown().await;
    result?;
    if !report.failures.is_empty() {
        return Err(format!("client shutdown: {:?}", report.failures));
    }
    Ok(rows)
}

/// zlink's same-node Actor request (`bench objects --case same-node`: two roots on Redis, A
/// requests its own Actors) beside a ractor `call` in one process, c=1.
async fn same_node(peer: &Path, url: &str, d: Duration) -> Result<Row, String> {
    let prefix = format!("zlink-bench-ractor-{}", uuid::Uuid::new_v4().simple());
    println!("same-node: Redis Location Store at {url} (key prefix {prefix})");
    let mut stores = Vec::new();
    for _ in 0..2 {
        stores.push(objects::connect(url, &prefix).await?);
    }
    let result = match objects::start_roots(&stores).await {
        Ok(hosts) => {
            let measured = same_node_rounds(peer, &hosts, d).await;
            let stopped = objects::shut_down(&hosts).await;
            measured.and_then(|row| stopped.map(|()| row))
        }
        Err(e) => Err(e),
    };
    for s in &stores {
        s.close().await;
    }
    drop(stores);
    match super::purge_prefix(url, &prefix).await {
        Ok(n) => println!("purged {n} Redis key(s) under {prefix}"),
        Err(e) => println!("could not purge {prefix}: {e}"),
    }
    result
}

async fn same_node_rounds(
    peer: &Path,
    hosts: &[zlink_runtime::ZLinkHost],
    d: Duration,
) -> Result<Row, String> {
    let mesh_name = objects::mesh()?;
    let a = hosts[0].node(&mesh_name).ok_or("root A has no node")?;
    let b = hosts[1].node(&mesh_name).ok_or("root B has no node")?;
    let actors = hosts[0].actors().map_err(|e| e.to_string())?;
    let t = Instant::now();
    objects::wait_for_mesh(&a, &b, &actors).await?;
    println!("nodes A and B ready in {:.2} s", t.elapsed().as_secs_f64());
    let targets: Arc<Vec<String>> =
        objects::populate(&actors, "same", objects::LOCAL_TYPE, objects::C).await?;
    let mut driver = Driver::spawn(peer, &["local"]).await?;
    let slice = d / ROUNDS;
    let secs = slice.as_secs_f64();
    let result = async {
        let (mut z, mut paired) = (Samples::default(), Vec::new());
        for _ in 0..ROUNDS {
            let round = objects::actor_load(&actors, &targets, 1, slice).await?;
            let r = driver.round(&format!("rr 1 {secs}"), slice).await?;
            paired.push(objects::per_sec(&round) / r);
            z.add(round);
        }
        let outcomes = driver.report().await?;
        Ok::<_, String>(Row {
            case: format!("same-node c=1 ({} Actors)", targets.len()),
            zlink: z.latency(),
            ractor: outcome(&outcomes, "c1")?.latency(),
            paired,
        })
    }
    .await;
    driver.stop().await;
    result
}

fn print_table(rows: &[Row]) {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "{:<30} {:>30}   {:>30}   {:>12}  {:>8}",
        "case", "zlink", "ractor_cluster", "zlink/ractor", "median"
    );
    for row in rows {
        let side = |l: &Latency| {
            if l.p50.is_zero() {
                format!("{:>10.0} /s", l.per_sec)
            } else {
                format!(
                    "{:>10.0} /s p50 {:>5.1} p99 {:>6.1}",
                    l.per_sec,
                    us(l.p50),
                    us(l.p99)
                )
            }
        };
        println!(
            "{:<30} {:>30}   {:>30}   {:>11.2}x  {:>7.2}x",
            row.case,
            side(&row.zlink),
            side(&row.ractor),
            row.zlink.per_sec / row.ractor.per_sec,
            objects::median(row.paired.clone())
        );
    }
    println!(
        "(rates per second, latencies in us; median: of the {ROUNDS} paired rounds' rate ratios)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::bench::options::args;

    #[test]
    fn options_parse_and_unknown_ones_are_refused() {
        let a = parse(&args(&[
            "--seconds",
            "1.5",
            "--redis",
            "redis://127.0.0.1:6390",
            "--case",
            "mesh",
        ]))
        .unwrap();
        assert_eq!(a.seconds, 1.5);
        assert_eq!(a.url, "redis://127.0.0.1:6390");
        assert!(a.runs("mesh") && !a.runs("same-node"));
        let all = parse(&[]).unwrap();
        assert_eq!((all.seconds, all.url.as_str()), (3.0, objects::DEFAULT_URL));
        assert!(CASES.iter().all(|c| all.runs(c)));
        assert!(parse(&args(&["--seconds", "0"])).is_err());
        assert!(parse(&args(&["--seconds", "61"])).is_err());
        assert!(parse(&args(&["--seconds"])).is_err());
        assert!(parse(&args(&["--case", "everything"])).is_err());
        assert!(parse(&args(&["--fast"])).is_err());
    }

    #[test]
    fn result_lines_parse_with_and_without_latencies() {
        let r = parse_result("RESULT case=c64 n=120 secs=0.5 rate=240.0 p50_us=2.50 p99_us=9.75")
            .unwrap();
        assert_eq!(
            r,
            Outcome {
                case: "c64".into(),
                n: 120,
                secs: 0.5,
                rate: 240.0,
                p50_us: Some(2.5),
                p99_us: Some(9.75),
            }
        );
        let l = r.latency();
        assert_eq!((l.per_sec, l.p50), (240.0, Duration::from_nanos(2_500)));
        let o = parse_result("RESULT case=oneway n=7 secs=1.000000 rate=7.0").unwrap();
        assert_eq!((o.p50_us, o.p99_us), (None, None));
        assert!(parse_result("ROUND case=c1 n=1 secs=1").is_err());
        assert!(parse_result("RESULT case=c1 n=x secs=1 rate=1").is_err());
        assert!(parse_result("RESULT case=c1 n=1 secs=1").is_err());
        assert!(parse_result("RESULT case=c1 n=1 secs=1 rate=NaN").is_err());
        assert!(parse_result("RESULT n=1 secs=1 rate=1").is_err());
        assert!(parse_result("RESULT case=c1 junk").is_err());
    }

    #[test]
    fn round_lines_give_their_rate_and_errors_pass_through() {
        assert_eq!(parse_round("ROUND case=c1 n=300 secs=0.5").unwrap(), 600.0);
        let e = parse_round("ERROR Echo timed out").unwrap_err();
        assert!(e.contains("Echo timed out"), "{e}");
    }

    #[test]
    fn the_pinned_ractor_cluster_version_is_read_from_the_lock_file() {
        let lock = "[[package]]\nname = \"ractor\"\nversion = \"0.16.5\"\n\n[[package]]\n\
                    name = \"ractor_cluster\"\nversion = \"0.16.5\"\nsource = \"x\"\n";
        assert_eq!(ractor_version(lock), Some("0.16.5"));
        assert_eq!(ractor_version(""), None);
    }
}
