//! The ractor_cluster side of `cargo xtask bench ractor`: the same three shapes as
//! `cargo xtask bench mesh` (one-way 64 B, request/response at c=1 and c=64) between two
//! ractor_cluster nodes in two processes on loopback, and a same-process ractor call at c=1.
//!
//! Modes:
//!
//! - `server [--max-seconds N]`: a `NodeServer` on 127.0.0.1 (a free port) with one actor in
//!   the process group `ractor-peer.echo` that answers `Echo` (an RPC `call`), counts one-way
//!   `Blob` casts and answers `Count`. Prints `READY port=P`; exits when a client casts `Stop`,
//!   when its stdin closes (its parent is gone) or after N seconds (default 1800).
//! - `client --connect ADDR`: a `NodeServer` of its own, `client_connect` to the server, and
//!   the server's actor found through the process group (a `RemoteActor`). Prints `READY`.
//! - `local`: the same actor spawned in this process. Prints `READY`.
//!
//! `client` and `local` then read commands from stdin, one a line, and run each bounded in
//! time: `oneway S` (cast `Blob` for S seconds, then wait until `Count` shows every one
//! handled), `rr C S` (C tasks `call` `Echo` in a loop for S seconds), `report` (one line per
//! case run so far, over all its runs: `RESULT case=NAME n=N secs=T rate=R [p50_us=.. p99_us=..]`)
//! and `stop` (casts `Stop` to the server, then exits; stdin closing does the same). Each run
//! answers `ROUND case=NAME n=N secs=T` or `ERROR text`.
//!
//! Runtimes match the zlink side: the server on a 2-worker tokio runtime (like the
//! `mesh_node` example), the client on a current-thread runtime (like the `bench mesh`
//! client), `local` on a 2-worker runtime (like `bench objects --case same-node`). The
//! allocator is mimalloc, as in both zlink processes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use ractor_cluster::RactorClusterMessage;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// The same global allocator as the zlink processes beside it.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The process group the server's actor joins and the client looks it up in.
const GROUP: &str = "ractor-peer.echo";
/// The cluster cookie both nodes share.
const COOKIE: &str = "ractor-peer";
/// Payload bytes of `Blob` and `Echo`.
const PAYLOAD: usize = 64;
/// How long setup steps (the connection, the lookup, the one-way drain) may take.
const SETUP: Duration = Duration::from_secs(30);
/// The longest run one command may ask for.
const MAX_RUN: f64 = 60.0;
/// The timeout of every `call`.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// One-way casts between two yields to the runtime.
const BATCH: u64 = 256;
/// One-way casts between two `Count` checks while sending.
const CHECK_EVERY: u64 = 16_384;
/// The most one-way casts let be unhandled at once (ractor's mailboxes are unbounded).
const MAX_IN_FLIGHT: u64 = 65_536;
/// Concurrency limit of `rr C S`.
const MAX_C: usize = 1024;

/// The bench actor's messages, serialisable for a remote node.
#[derive(RactorClusterMessage)]
enum BenchMsg {
    /// One-way: counted.
    Blob(String),
    /// Request: answered with its text.
    #[rpc]
    Echo(String, RpcReplyPort<String>),
    /// Request: how many `Blob`s have been handled.
    #[rpc]
    Count(RpcReplyPort<u64>),
    /// Stops the actor (and so the server process).
    Stop,
}

/// Answers `Echo`, counts `Blob`; its state is the count.
struct EchoActor {
    /// Join the process group (the server's actor; the local one stays out of it).
    join: bool,
}

impl Actor for EchoActor {
    type Msg = BenchMsg;
    type State = u64;
    type Arguments = ();

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        _: (),
    ) -> Result<Self::State, ActorProcessingErr> {
        if self.join {
            ractor::pg::join(GROUP.to_owned(), vec![myself.get_cell()]);
        }
        Ok(0)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        count: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            BenchMsg::Blob(_) => *count += 1,
            BenchMsg::Echo(text, reply) => {
                let _ = reply.send(text);
            }
            BenchMsg::Count(reply) => {
                let _ = reply.send(*count);
            }
            BenchMsg::Stop => myself.stop(None),
        }
        Ok(())
    }
}

type Error = Box<dyn std::error::Error>;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let multi = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    };
    match args.first().map(String::as_str) {
        Some("server") => {
            let max = match arg("--max-seconds") {
                Some(n) => n
                    .parse::<u64>()
                    .map_err(|e| format!("--max-seconds: {e}"))?,
                None => 1800,
            };
            multi()?.block_on(server(Duration::from_secs(max)))
        }
        Some("client") => {
            let addr = arg("--connect").ok_or("client needs --connect ADDR")?;
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(client(&addr))
        }
        Some("local") => multi()?.block_on(local()),
        _ => Err(
            "usage: ractor-peer server [--max-seconds N] | client --connect ADDR | local".into(),
        ),
    }
}

/// A free loopback port (bound and released; the NodeServer binds it next).
fn free_port() -> Result<u16, Error> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

async fn node_server(
    name: &str,
) -> Result<(ActorRef<ractor_cluster::NodeServerMessage>, u16), Error> {
    let port = free_port()?;
    let server = ractor_cluster::NodeServer::new(
        port,
        COOKIE.to_owned(),
        name.to_owned(),
        "localhost".to_owned(),
        None,
        Some(ractor_cluster::node::NodeConnectionMode::Isolated),
    )
    .with_listen_addr(std::net::IpAddr::from([127, 0, 0, 1]));
    let (node, _) = Actor::spawn(None, server, ()).await?;
    Ok((node, port))
}

async fn say(line: &str) -> Result<(), Error> {
    let mut out = tokio::io::stdout();
    out.write_all(format!("{line}\n").as_bytes()).await?;
    out.flush().await?;
    Ok(())
}

async fn server(max: Duration) -> Result<(), Error> {
    let (node, port) = node_server("ractor-peer-server").await?;
    let (actor, handle) = Actor::spawn(None, EchoActor { join: true }, ()).await?;
    // The parent closes stdin to stop this process (or dies, which closes it too).
    let (eof_tx, eof_rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        let _ = eof_tx.send(());
    });
    say(&format!("READY port={port}")).await?;
    tokio::select! {
        _ = handle => {}
        _ = eof_rx => actor.stop(None),
        _ = tokio::time::sleep(max) => actor.stop(None),
    }
    node.stop(None);
    Ok(())
}

async fn client(addr: &str) -> Result<(), Error> {
    let (node, _) = node_server("ractor-peer-client").await?;
    ractor_cluster::client_connect(&node, addr.to_owned()).await?;
    let deadline = Instant::now() + SETUP;
    let target = loop {
        let remote = ractor::pg::get_members(&GROUP.to_owned())
            .into_iter()
            .find(|cell| !cell.get_id().is_local());
        if let Some(cell) = remote {
            break ActorRef::<BenchMsg>::from(cell);
        }
        if Instant::now() >= deadline {
            return Err(format!("no remote member of {GROUP} after {SETUP:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    commands(&target).await;
    let _ = target.cast(BenchMsg::Stop);
    // Lets the session write the Stop before the process ends (the server also stops when
    // its stdin closes).
    tokio::time::sleep(Duration::from_millis(200)).await;
    node.stop(None);
    Ok(())
}

async fn local() -> Result<(), Error> {
    let (target, handle) = Actor::spawn(None, EchoActor { join: false }, ()).await?;
    commands(&target).await;
    target.stop(None);
    let _ = tokio::time::timeout(SETUP, handle).await;
    Ok(())
}

/// What the runs of one case measured, over all of them.
#[derive(Default)]
struct Tally {
    n: u64,
    elapsed: Duration,
    /// Per-request latencies (request cases only).
    samples: Vec<Duration>,
}

/// Reads and runs commands until `stop` or the end of stdin.
async fn commands(target: &ActorRef<BenchMsg>) {
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    if say("READY").await.is_err() {
        return;
    }
    while let Ok(Some(line)) = lines.next_line().await {
        let words: Vec<&str> = line.split_whitespace().collect();
        let reply = match words.as_slice() {
            ["stop"] => break,
            ["report"] => Ok(report(&tallies)),
            ["oneway", s] => match seconds(s) {
                Ok(d) => one_way(target, d)
                    .await
                    .map(|(n, t)| round(&mut tallies, "oneway", n, t, Vec::new())),
                Err(e) => Err(e),
            },
            ["rr", c, s] => match (c.parse::<usize>(), seconds(s)) {
                (Ok(c), Ok(d)) if (1..=MAX_C).contains(&c) => {
                    request_response(target, c, d).await.map(|(samples, t)| {
                        let n = samples.len() as u64;
                        round(&mut tallies, &format!("c{c}"), n, t, samples)
                    })
                }
                _ => Err(format!("rr needs C in 1..={MAX_C} and S in (0, {MAX_RUN}]")),
            },
            _ => Err(format!("unknown command {line:?}")),
        };
        let text = reply.unwrap_or_else(|e| format!("ERROR {e}"));
        if say(&text).await.is_err() {
            return;
        }
    }
}

fn seconds(s: &str) -> Result<Duration, String> {
    s.parse::<f64>()
        .ok()
        .filter(|s| *s > 0.0 && *s <= MAX_RUN)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("seconds must be in (0, {MAX_RUN}], not {s:?}"))
}

/// Adds one run to its case's tally; its `ROUND` line.
fn round(
    tallies: &mut BTreeMap<String, Tally>,
    case: &str,
    n: u64,
    elapsed: Duration,
    samples: Vec<Duration>,
) -> String {
    let tally = tallies.entry(case.to_owned()).or_default();
    tally.n += n;
    tally.elapsed += elapsed;
    tally.samples.extend(samples);
    format!("ROUND case={case} n={n} secs={:.6}", elapsed.as_secs_f64())
}

/// One `RESULT` line per case (latency percentiles as `bench mesh` takes them), then `END`.
fn report(tallies: &BTreeMap<String, Tally>) -> String {
    let mut out = String::new();
    for (case, t) in tallies {
        let secs = t.elapsed.as_secs_f64();
        out.push_str(&format!(
            "RESULT case={case} n={} secs={secs:.6} rate={:.1}",
            t.n,
            t.n as f64 / secs
        ));
        if !t.samples.is_empty() {
            let mut sorted = t.samples.clone();
            sorted.sort_unstable();
            let at = |q: f64| {
                let i = ((sorted.len() as f64 * q) as usize).min(sorted.len() - 1);
                sorted[i].as_secs_f64() * 1e6
            };
            out.push_str(&format!(" p50_us={:.2} p99_us={:.2}", at(0.50), at(0.99)));
        }
        out.push('\n');
    }
    out.push_str("END");
    out
}

async fn count(target: &ActorRef<BenchMsg>) -> Result<u64, String> {
    match target.call(BenchMsg::Count, Some(CALL_TIMEOUT)).await {
        Ok(ractor::rpc::CallResult::Success(n)) => Ok(n),
        Ok(_) => Err("Count timed out or its sender went away".into()),
        Err(e) => Err(format!("Count: {e}")),
    }
}

/// Casts `Blob`s for `d`, then waits until the actor has handled all of them. Since ractor's
/// mailboxes are unbounded, the sender checks `Count` every `CHECK_EVERY` casts and waits while
/// more than `MAX_IN_FLIGHT` are unhandled (the flow control zlink's `send` has built in).
async fn one_way(target: &ActorRef<BenchMsg>, d: Duration) -> Result<(u64, Duration), String> {
    let before = count(target).await?;
    let text = "x".repeat(PAYLOAD);
    let started = Instant::now();
    let mut sent: u64 = 0;
    while started.elapsed() < d {
        for _ in 0..BATCH {
            target
                .cast(BenchMsg::Blob(text.clone()))
                .map_err(|e| format!("cast: {e}"))?;
        }
        sent += BATCH;
        tokio::task::yield_now().await;
        if sent % CHECK_EVERY == 0 {
            let deadline = Instant::now() + SETUP;
            while before + sent - count(target).await?.min(before + sent) > MAX_IN_FLIGHT {
                if Instant::now() >= deadline {
                    return Err("the actor stopped handling one-way messages".into());
                }
            }
        }
    }
    let deadline = Instant::now() + SETUP;
    while count(target).await? < before + sent {
        if Instant::now() >= deadline {
            return Err("the actor did not handle every one-way message".into());
        }
        tokio::task::yield_now().await;
    }
    Ok((sent, started.elapsed()))
}

/// `c` tasks `call` `Echo` in a loop for `d`; every call's latency.
async fn request_response(
    target: &ActorRef<BenchMsg>,
    c: usize,
    d: Duration,
) -> Result<(Vec<Duration>, Duration), String> {
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(c);
    for _ in 0..c {
        let target = target.clone();
        tasks.push(tokio::spawn(async move {
            let text = "x".repeat(PAYLOAD);
            let mut samples = Vec::new();
            while started.elapsed() < d {
                let t = Instant::now();
                let reply = target
                    .call(|r| BenchMsg::Echo(text.clone(), r), Some(CALL_TIMEOUT))
                    .await;
                samples.push(t.elapsed());
                match reply {
                    Ok(ractor::rpc::CallResult::Success(echo)) if echo.len() == PAYLOAD => {}
                    Ok(ractor::rpc::CallResult::Success(_)) => return Err("wrong echo".into()),
                    Ok(_) => return Err("Echo timed out or its sender went away".to_owned()),
                    Err(e) => return Err(format!("Echo: {e}")),
                }
            }
            Ok::<_, String>(samples)
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.map_err(|e| e.to_string())??);
    }
    Ok((all, started.elapsed()))
}
