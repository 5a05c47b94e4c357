//! One ZLink root with one MeshNode on the mesh `demo`, driven line by line over stdin — the
//! process the multi-process tests (`tests/mesh_process.rs`) and `cargo xtask bench mesh` run.
//!
//! ```text
//! mesh_node --redis redis://127.0.0.1:6379 --prefix demo-1     # automatic topology (Redis)
//! mesh_node --port 7000 --fixed-rid 0a0b --manual-peer 127.0.0.1:7001   # manual topology
//! mesh_node --redis redis://127.0.0.1:6379 --objects --lease-ttl-ms 3000 \
//!     --lease-renew-ms 500 --lease-renew-timeout-ms 500 --lease-fencing-ms 1000 \
//!     --polling-ms 200                                           # Object Server (Actors)
//! ```
//!
//! The node answers `Echo` (returns its bytes), `Slow` (sleeps `millis`, then replies; prints
//! `SLOW-RAN <millis>` when its handler starts) and `Count` (how many `Blob` one-way messages
//! arrived). When serving it prints exactly one line `READY <rid-hex> <host:port>`, then reads
//! commands, one per line (each runs on its own task; replies print as they end):
//!
//! - `PEERS` → `PEERS <n>` (Ready peers whose weights are known)
//! - `REQ <rid> <text> [timeout-ms]` → `REPLY <text>` or `ERR <kind>`
//! - `SLOW <rid> <millis> [timeout-ms]` → `REPLY slept <millis>` or `ERR <kind>`
//! - `BLAST <rid> <n>` → sends `n` one-way `Blob`s (64 bytes of text), then asks `Count` until
//!   the peer handled all of them: `BLASTED <n> <seconds>` (the profile driver of
//!   `docs/performance.md`: a fixed message count, not a fixed time)
//! - `ECHOS <rid> <n> <c>` → `n` `Echo` requests of 64 bytes, `c` in flight:
//!   `ECHOED <n> <seconds>` or `ERR <kind>`
//! - `QUIT` → graceful shutdown, prints `STOPPED <outcome>` and exits 0 (so does end of input)
//!
//! With `--objects` (automatic topology only) the node is also an Object Server registering the
//! Actor type `counter` (`Incr` adds one and returns the count; `Step {seq}` applies a step,
//! counting a duplicate when `seq` is not above the last one and a gap when it skips one;
//! `Totals` returns the step record; `counter.rs`). `--relocation preserve|recreate|disable`
//! chooses its relocation policy (default `disable`; `preserve` captures and restores the
//! counter as JSON; a policy other than `disable` connects a Redis Relocation Store on the same
//! key prefix). These commands drive its Actor manager:
//!
//! - `ACTORS <prefix> <first> <count>` → `get_or_create` of the ids `<prefix>-<i>` for `i` in
//!   `first..first+count` (32 at a time); per id `ACTOR <id> <generation> <node-rid-hex>` or
//!   `ACTOR-ERR <id> <kind>`, then `ACTORS-DONE <ok> <failed>` after all of them
//! - `GET <id>…` → the same for the listed ids
//! - `INCR <id> [timeout-ms]` → a request to the Actor: `REPLY <count>` or `ERR <kind>`
//! - `TOTALS <id>` → `TOTALS <id> <applied> <sum> <dups> <gaps>` or `ERR <kind>`
//! - `STREAM <prefix> <first> <count> <millis>` → per id of `ACTORS`' range, one sequential
//!   loop of `Step` requests `seq` = 1, 2, … for `millis` ms (all ids at once); a refused step
//!   is sent again with the same `seq` after 20 ms; a timed-out one ends its id's loop (it may
//!   have run). Then per id `STREAMED <id> <last-seq-answered>` (and
//!   `STREAM-WRONG <id> <seq> <reply>` for a reply that is not its `seq`,
//!   `STREAM-TIMEOUT <id> <seq>` for a step that timed out), per error kind
//!   `STREAM-REFUSED <kind> <n>`, and last `STREAM-DONE <answered> <refused> <timeouts>`
//!   (`actors.rs`)
//! - `LOAD <prefix> <first> <count> <millis> <pause-ms> <timeout-ms>` → per id of `ACTORS`'
//!   range, one sequential loop of `Probe` requests (`pause-ms` apart, each with a
//!   `timeout-ms` reply timeout) for `millis` ms; every request ends in exactly one line:
//!   `P <id> <sent-ms> <answered-ms> <node-rid-hex> <generation> <activation-nonce> <count>
//!   <late-ms>` (late-ms: how long past the answering node's admission deadline its handler
//!   started, by that node's own lease state; 0 when before it) or
//!   `E <id> <sent-ms> <ended-ms> <kind> [ConnectionLost]` (wall-clock milliseconds; after `NotFound` the loop
//!   asks `get_or_create` for the id), then `LOAD-DONE <answered> <failed>` — what
//!   `cargo xtask faults` checks its invariants on
//! - `RELOCATE [deadline-ms]` → a PlannedMaintenance host Relocate of this node's host:
//!   `RELOCATED <outcome> <reason> <moved> <remaining>` (then `QUIT` stops the host)
//! - `LIVE` → `LIVE <actors> <spots>`: the activations live on this node now
//!   (`HostStatus::live`), which `cargo xtask faults` compares with the node's capacity row
//! - `LIVE-IDS` → `LIVE-IDS <id>:<n>…`: every id with a counter activation in this process
//!   and how many (counted from the factory or a restored activation's first probe until
//!   the activation is dropped), which `cargo xtask faults` reads to find an id live twice
//! - `METRICS` → `METRICS <host:port>`: where `--metrics ADDR` serves Prometheus text
//!   (`prometheus.rs`; every GET answers the runtime's instruments, `docs/metrics.md`)
//!
//! `--lease-ttl-ms`, `--lease-renew-ms`, `--lease-renew-timeout-ms`, `--lease-fencing-ms` and
//! `--polling-ms` set the root's location options (`ownerLeaseTtl`, `ownerLeaseRenewInterval`,
//! `ownerLeaseRenewTimeout`, `ownerLeaseFencingMargin`, `pollingInterval`; validated at
//! startup), so tests can let a killed node's lease expire quickly.
//!
//! `--msgpack` makes MessagePack the payload codec of every declared type (JSON by default);
//! both ends of a call need the same choice.
//!
//! `--tls DIR --tls-name NAME` speaks mesh TLS: `DIR/ca.pem` is the CA, `DIR/NAME.pem` and
//! `DIR/NAME.key` this node's certificate (valid for the DNS name `NAME`) and key.
//!
//! Logs (`RUST_LOG`, default `warn`) go to stderr.

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clap::{Arg, ArgAction, Command};
use serde::{Deserialize, Serialize};
use zlink_codec::payload::{PayloadCodec, Selector};
use zlink_codec::records::ObjectRole;
use zlink_codec::{MeshName, RoutingId};
use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
use zlink_redis_relocation::{RedisRelocationOptions, RedisRelocationStore};
use zlink_runtime::CallOptions;
use zlink_runtime::MeshNode;
use zlink_runtime::Message;
use zlink_runtime::Request;
use zlink_runtime::ZLink;
use zlink_runtime::ZLinkHost;
use zlink_runtime::config::Topology;
use zlink_runtime::location::LocationOptions;
use zlink_runtime::relocate::RelocateOptions;

mod actors;
mod counter;
mod prometheus;

/// mimalloc: the binaries set the allocator, never a library (docs/performance.md has the
/// figure it bought).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use counter::{COUNTER, Counter, Policy};

/// Returns its bytes (text: the root's codec is JSON, where a byte array would triple).
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

/// Sleeps `millis`, then replies with them.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Slow {
    millis: u64,
}
impl Message for Slow {
    const PACKET: &'static str = "Slow";
}
impl Request for Slow {
    type Reply = u64;
}

/// A one-way message; the node counts them.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Blob {
    bytes: String,
}
impl Message for Blob {
    const PACKET: &'static str = "Blob";
}

/// How many `Blob`s arrived.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Count;
impl Message for Count {
    const PACKET: &'static str = "Count";
}
impl Request for Count {
    type Reply = u64;
}

/// Prints one whole line on stdout and flushes it (the driver reads lines).
pub(crate) fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn cli() -> Command {
    let opt = |name: &'static str, help: &'static str| Arg::new(name).long(name).help(help);
    Command::new("mesh_node")
        .about("One MeshNode on mesh `demo`, driven over stdin")
        .arg(opt(
            "redis",
            "Redis URL: automatic topology through Redis discovery",
        ))
        .arg(opt("prefix", "Redis key prefix").default_value("zlink-demo"))
        .arg(opt(
            "tls",
            "mesh TLS: a directory holding ca.pem, <name>.pem and <name>.key (with --tls-name)",
        ))
        .arg(opt(
            "tls-name",
            "mesh TLS: this node's identity (the DNS name its certificate is for)",
        ))
        .arg(
            opt(
                "manual-peer",
                "host:port of a manual peer (manual topology)",
            )
            .action(ArgAction::Append),
        )
        .arg(opt(
            "fixed-rid",
            "fixed routing id in hex (manual topology)",
        ))
        .arg(
            opt("port", "listen port (0: any)")
                .value_parser(clap::value_parser!(u16))
                .default_value("0"),
        )
        .arg(
            opt(
                "msgpack",
                "MessagePack as the payload codec of every declared type (default JSON)",
            )
            .action(ArgAction::SetTrue),
        )
        .arg(
            opt(
                "objects",
                "Object Server mode: the `counter` Actor type and the Actor commands",
            )
            .action(ArgAction::SetTrue),
        )
        .arg(
            opt(
                "relocation",
                "relocation policy of the `counter` type (with --objects)",
            )
            .value_parser(Policy::NAMES)
            .default_value("disable"),
        )
        .arg(millis(opt("lease-ttl-ms", "ownerLeaseTtl in milliseconds")))
        .arg(millis(opt(
            "lease-renew-ms",
            "ownerLeaseRenewInterval in milliseconds",
        )))
        .arg(millis(opt(
            "lease-renew-timeout-ms",
            "ownerLeaseRenewTimeout in milliseconds",
        )))
        .arg(millis(opt(
            "lease-fencing-ms",
            "ownerLeaseFencingMargin in milliseconds",
        )))
        .arg(millis(opt("polling-ms", "pollingInterval in milliseconds")).default_value("200"))
        .arg(opt(
            "metrics",
            "host:port of a Prometheus endpoint (GET answers the runtime's metrics; port 0: any)",
        ))
}

fn millis(arg: Arg) -> Arg {
    arg.value_parser(clap::value_parser!(u64).range(1..))
}

/// The location options the arguments set (the rest keep their defaults).
fn location_options(args: &clap::ArgMatches) -> LocationOptions {
    let ms = |name: &str| args.get_one::<u64>(name).map(|v| Duration::from_millis(*v));
    let mut o = LocationOptions::default();
    if let Some(d) = ms("lease-ttl-ms") {
        o = o.owner_lease_ttl(d);
    }
    if let Some(d) = ms("lease-renew-ms") {
        o = o.owner_lease_renew_interval(d);
    }
    if let Some(d) = ms("lease-renew-timeout-ms") {
        o = o.owner_lease_renew_timeout(d);
    }
    if let Some(d) = ms("lease-fencing-ms") {
        o = o.owner_lease_fencing_margin(d);
    }
    if let Some(d) = ms("polling-ms") {
        o = o.polling_interval(d);
    }
    o
}

fn parse_hex(s: &str) -> Option<Vec<u8>> {
    if s.is_empty() || s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let args = cli().get_matches();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(run(args))
}

async fn run(args: clap::ArgMatches) -> Result<(), Box<dyn std::error::Error>> {
    let mesh = MeshName::new("demo")?;
    // Before the root is built: the runtime resolves its metric handles when it builds nodes.
    let metrics = match args.get_one::<String>("metrics") {
        Some(addr) => Some(prometheus::install_and_serve(addr).await?),
        None => None,
    };
    let blobs = Arc::new(AtomicU64::new(0));
    let (counter, counted) = (Arc::clone(&blobs), Arc::clone(&blobs));
    let port = *args.get_one::<u16>("port").unwrap_or(&0);
    let peers: Vec<String> = args
        .get_many::<String>("manual-peer")
        .map(|v| v.cloned().collect())
        .unwrap_or_default();
    let fixed = match args.get_one::<String>("fixed-rid") {
        Some(h) => Some(parse_hex(h).ok_or("--fixed-rid needs an even-length hex string")?),
        None => None,
    };
    let objects = args.get_flag("objects");
    let tls = match (
        args.get_one::<String>("tls"),
        args.get_one::<String>("tls-name"),
    ) {
        (Some(dir), Some(name)) => {
            let dir = std::path::Path::new(dir);
            let read = |file: String| std::fs::read(dir.join(file));
            Some(zlink_runtime::config::MeshTls::from_pem(
                &read("ca.pem".into())?,
                &read(format!("{name}.pem"))?,
                &read(format!("{name}.key"))?,
                name,
            )?)
        }
        (None, None) => None,
        _ => return Err("--tls and --tls-name go together".into()),
    };
    let policy = args
        .get_one::<String>("relocation")
        .and_then(|p| Policy::parse(p))
        .unwrap_or(Policy::Disable);
    // The node's routing id and host, known once the root started (the Probe replies name
    // the node and say whether its admission deadline had passed).
    let serving = Arc::new(counter::Serving::default());
    let serving_for_counter = Arc::clone(&serving);
    let mut builder = ZLink::builder();
    if args.get_flag("msgpack") {
        builder = builder.codec(PayloadCodec::message_pack(), Selector::any());
    }
    let automatic = if let Some(url) = args.get_one::<String>("redis") {
        let prefix = args
            .get_one::<String>("prefix")
            .cloned()
            .unwrap_or_default();
        let store = RedisLocationStore::connect(
            RedisLocationOptions::from_url(url)?.with_key_prefix(prefix.clone())?,
        )
        .await?;
        if objects && policy != Policy::Disable {
            // RecreateOnRelocation and PreserveStateWith need a Relocation Store.
            let relocation = RedisRelocationStore::connect(
                RedisRelocationOptions::from_url(url)?.with_key_prefix(prefix)?,
            )
            .await?;
            builder = builder.relocation_store(Arc::new(relocation));
        }
        builder = builder
            .location_store(Arc::new(store))
            .location_options(location_options(&args));
        fixed.is_none() && peers.is_empty()
    } else {
        false
    };
    if objects && !automatic {
        return Err("--objects needs automatic topology (--redis without manual peers)".into());
    }
    let host = builder
        .route_mesh(mesh.clone(), move |mut n| {
            n = n.routing_id_prefix("demo").port(port);
            if !automatic {
                n = n.topology(Topology::Manual);
            }
            if let Some(rid) = fixed {
                n = n.fixed_routing_id(rid);
            }
            for p in peers {
                n = n.manual_peer(p);
            }
            if let Some(tls) = tls {
                n = n.tls(tls);
            }
            if objects {
                n = n.object_role(ObjectRole::Server).actor_type::<Counter>(
                    COUNTER,
                    counter::counter_type(policy, serving_for_counter),
                );
            }
            n.on_request::<Echo, _, _>(|e, _ctx| async move { Ok(e.bytes) })
                .on_request::<Slow, _, _>(|s, _ctx| async move {
                    say(&format!("SLOW-RAN {}", s.millis));
                    tokio::time::sleep(Duration::from_millis(s.millis)).await;
                    Ok(s.millis)
                })
                .on_send::<Blob, _, _>(move |_b, _ctx| {
                    counter.fetch_add(1, Ordering::Relaxed);
                    async { Ok(()) }
                })
                .on_request::<Count, _, _>(move |_c, _ctx| {
                    let n = counted.load(Ordering::Relaxed);
                    async move { Ok(n) }
                })
        })
        .build()
        .start()
        .await?;
    let node = host.node(&mesh).ok_or("the demo node is missing")?;
    let _ = serving.rid.set(node.routing_id().to_string());
    let _ = serving.host.set(host.clone());
    let actors = if objects { Some(host.actors()?) } else { None };
    say(&format!("READY {} {}", node.routing_id(), node.endpoint()));

    // stdin on a plain thread (lines into a channel); end of input counts as QUIT.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    while let Some(line) = rx.recv().await {
        let words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        match words.first().map(String::as_str) {
            Some("QUIT") => break,
            Some("ACTORS" | "GET" | "INCR" | "TOTALS" | "STREAM" | "LOAD") => match &actors {
                Some(actors) => {
                    let actors = actors.clone();
                    tokio::spawn(async move { say(&actors::actor_command(&actors, &words).await) });
                }
                None => say(&format!("BAD {} (needs --objects)", words.join(" "))),
            },
            Some("LIVE-IDS") => say(&counter::live_ids()),
            Some("LIVE") => {
                let (actors, spots) = host
                    .status()
                    .live
                    .iter()
                    .fold((0, 0), |(a, s), l| (a + l.actors, s + l.spots));
                say(&format!("LIVE {actors} {spots}"));
            }
            Some("METRICS") => match metrics {
                Some(addr) => say(&format!("METRICS {addr}")),
                None => say("BAD METRICS (needs --metrics ADDR)"),
            },
            Some("RELOCATE") => {
                let host = host.clone();
                tokio::spawn(async move { say(&relocate(&host, &words).await) });
            }
            Some(_) => {
                let node = node.clone();
                tokio::spawn(async move { say(&command(&node, &words).await) });
            }
            None => {}
        }
    }
    let report = host.shutdown().await;
    say(&format!("STOPPED {:?}", report.outcome));
    Ok(())
}

/// `RELOCATE [deadline-ms]`: a PlannedMaintenance host Relocate; returns
/// `RELOCATED <outcome> <reason> <moved> <remaining>` or `RELOCATE-ERR <kind>`.
async fn relocate(host: &ZLinkHost, words: &[String]) -> String {
    let mut options = RelocateOptions::planned_maintenance();
    match words.get(1).map(|ms| ms.parse::<u64>()) {
        None => {}
        Some(Ok(ms)) => options = options.deadline(Duration::from_millis(ms)),
        Some(Err(_)) => return "BAD RELOCATE [deadline-ms]".into(),
    }
    match host.relocate(options).await {
        Ok(r) => format!(
            "RELOCATED {:?} {:?} {} {}",
            r.outcome, r.reason, r.moved, r.remaining
        ),
        Err(e) => format!("RELOCATE-ERR {:?}", e.kind()),
    }
}

/// Runs one command line; returns the line to print.
async fn command(node: &MeshNode, words: &[String]) -> String {
    let arg = |i: usize| words.get(i).map(String::as_str);
    let options = |i: usize| {
        let mut o = CallOptions::default();
        if let Some(ms) = arg(i).and_then(|t| t.parse().ok()) {
            o = o.reply_timeout(Duration::from_millis(ms));
        }
        o
    };
    let target = |i: usize| {
        arg(i)
            .and_then(parse_hex)
            .and_then(|b| RoutingId::new(b).ok())
    };
    match (arg(0), target(1)) {
        (Some("PEERS"), _) => {
            let n = node
                .status()
                .peers
                .iter()
                .filter(|p| p.weights.is_some())
                .count();
            format!("PEERS {n}")
        }
        (Some("REQ"), Some(rid)) if words.len() >= 3 => {
            let echo = Echo {
                bytes: arg(2).unwrap_or_default().to_owned(),
            };
            match node.request_with(&rid, &echo, &options(3)).await {
                Ok(b) => format!("REPLY {b}"),
                Err(e) => format!("ERR {}", e.kind()),
            }
        }
        (Some("BLAST"), Some(rid)) => match arg(2).and_then(|n| n.parse().ok()) {
            Some(n) => match blast(node, &rid, n).await {
                Ok(secs) => format!("BLASTED {n} {secs:.3}"),
                Err(e) => format!("ERR {}", e.kind()),
            },
            None => "BAD BLAST <rid> <n>".into(),
        },
        (Some("ECHOS"), Some(rid)) => {
            let n = arg(2).and_then(|n| n.parse().ok());
            let c = arg(3).and_then(|c| c.parse().ok()).filter(|c| *c > 0);
            let (Some(n), Some(c)) = (n, c) else {
                return "BAD ECHOS <rid> <n> <c>".into();
            };
            match echos(node, &rid, n, c).await {
                Ok(secs) => format!("ECHOED {n} {secs:.3}"),
                Err(e) => format!("ERR {}", e.kind()),
            }
        }
        (Some("SLOW"), Some(rid)) => {
            let Some(millis) = arg(2).and_then(|m| m.parse().ok()) else {
                return "BAD SLOW <rid> <millis> [timeout-ms]".into();
            };
            match node.request_with(&rid, &Slow { millis }, &options(3)).await {
                Ok(m) => format!("REPLY slept {m}"),
                Err(e) => format!("ERR {}", e.kind()),
            }
        }
        _ => format!("BAD {}", words.join(" ")),
    }
}

/// The profile payload: 64 bytes of text.
fn payload() -> String {
    "x".repeat(64)
}

/// `BLAST`: `n` one-way `Blob`s, then `Count` until the peer handled them all; seconds taken.
async fn blast(node: &MeshNode, rid: &RoutingId, n: u64) -> Result<f64, zlink_runtime::ZLinkError> {
    let before = node.request(rid, &Count).await?;
    let blob = Blob { bytes: payload() };
    let started = std::time::Instant::now();
    for _ in 0..n {
        node.send(rid, &blob).await?;
    }
    while node.request(rid, &Count).await? < before + n {
        // Coarse: the polls should not weigh in a per-message profile.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// `ECHOS`: `n` `Echo` requests, `c` loops in flight; seconds taken.
async fn echos(
    node: &MeshNode,
    rid: &RoutingId,
    n: u64,
    c: u64,
) -> Result<f64, zlink_runtime::ZLinkError> {
    let left = Arc::new(AtomicU64::new(n));
    let started = std::time::Instant::now();
    let loops: Vec<_> = (0..c)
        .map(|_| {
            let (node, rid, left) = (node.clone(), rid.clone(), Arc::clone(&left));
            tokio::spawn(async move {
                let echo = Echo { bytes: payload() };
                while left
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| l.checked_sub(1))
                    .is_ok()
                {
                    node.request(&rid, &echo).await?;
                }
                Ok::<(), zlink_runtime::ZLinkError>(())
            })
        })
        .collect();
    for l in loops {
        match l.await {
            Ok(r) => r?,
            Err(_) => return Err(zlink_runtime::ZLinkError::ShuttingDown),
        }
    }
    Ok(started.elapsed().as_secs_f64())
}
