//! One ZLink root whose Object Server MeshNode (mesh `relocation`, automatic topology over the
//! Redis Location Store, a Redis Relocation Store under the same key prefix) registers the
//! Actor types `blob` and `blob-shared`, both PreserveStateWith with one immutable byte buffer
//! as their state: `blob`'s adapter copies it on capture and on restore (as an application
//! whose state is an owned buffer does); `blob-shared`'s overrides `capture_bytes` and
//! `restore_bytes` and moves it without a copy on either side. The process `cargo xtask bench relocation --case big-state` runs, driven line by
//! line over stdin.
//!
//! ```text
//! relocation_peer --redis redis://127.0.0.1:6379 --prefix bench-1 --version 1
//! ```
//!
//! When serving it prints exactly one line `READY <rid-hex>`, then reads commands, one per
//! line, each run to its end before the next is read:
//!
//! - `PEERS` → `PEERS <n>` (Ready peers whose weights are known)
//! - `FILL <id> <bytes> [blob|blob-shared]` → `get_or_create` of the Actor `<id>` of that type
//!   (default `blob`), then a request that fills its state with `<bytes>` pseudo-random bytes:
//!   `FILLED <owner-rid-hex> <crc32c-hex>` or `ERR <what>`
//! - `RELOCATE [deadline-ms]` → host Relocate (PlannedMaintenance, default deadline 60 s):
//!   `RELOCATED <outcome> <reason> <moved> <millis>` (millis of the whole call, 3 decimals) or
//!   `ERR <what>`
//! - `CHECK <id>` → a request to the Actor answering its state's length and CRC-32C:
//!   `CHECKED <len> <crc32c-hex> <owner-rid-hex>` or `ERR <what>`
//! - `SINK` → binds a raw TCP listener on 127.0.0.1 and prints `SINK <port>`; its one
//!   connection reads an 8-byte big-endian length and that many bytes into one buffer, then
//!   writes one byte back (the raw-socket baseline of the benchmark)
//! - `SEND <port> <bytes>` → connects to a `SINK`, then sends `<bytes>` bytes framed so and
//!   waits for the one-byte answer: `SENT <millis>` (from after the connect to the answer)
//! - `QUIT` → graceful shutdown, prints `STOPPED <outcome>` and exits 0 (so does end of input)
//!
//! Logs (`RUST_LOG`, default `warn`) go to stderr.

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::{Arg, Command};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zlink_codec::MeshName;
use zlink_codec::records::ObjectRole;
use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
use zlink_redis_relocation::{RedisRelocationOptions, RedisRelocationStore};
use zlink_runtime::Actor;
use zlink_runtime::ActorManager;
use zlink_runtime::BoxError;
use zlink_runtime::Message;
use zlink_runtime::Request;
use zlink_runtime::ZLink;
use zlink_runtime::ZLinkHost;
use zlink_runtime::config::ActorType;
use zlink_runtime::location::LocationOptions;
use zlink_runtime::relocate::ActorStateAdapter;
use zlink_runtime::relocate::RelocateOptions;

/// The Actor type whose adapter copies the state (capture and restore).
const BLOB: &str = "blob";
/// The Actor type whose adapter moves the state without copying it.
const BLOB_SHARED: &str = "blob-shared";

/// How long `FILL` retries a creation that finds no eligible node.
const PLACEMENT_WAIT: Duration = Duration::from_secs(30);

/// An Actor whose whole state is its bytes.
struct BlobActor {
    state: Bytes,
}
impl Actor for BlobActor {}

/// The `blob` adapter: captures a copy of the bytes and restores a copy of what came, as an
/// application whose state is an owned buffer does.
struct CopyingAdapter;
impl ActorStateAdapter<BlobActor> for CopyingAdapter {
    fn capture(&self, actor: &BlobActor) -> Result<Vec<u8>, BoxError> {
        Ok(actor.state.to_vec())
    }
    fn restore(&self, bytes: &[u8]) -> Result<BlobActor, BoxError> {
        Ok(BlobActor {
            state: Bytes::copy_from_slice(bytes),
        })
    }
}

/// The `blob-shared` adapter: the state is immutable shared bytes, so the capture hands them
/// over as they are and the restore keeps the payload it is given (no copy on either side).
struct SharedAdapter;
impl ActorStateAdapter<BlobActor> for SharedAdapter {
    fn capture(&self, actor: &BlobActor) -> Result<Vec<u8>, BoxError> {
        Ok(actor.state.to_vec())
    }
    fn restore(&self, bytes: &[u8]) -> Result<BlobActor, BoxError> {
        Ok(BlobActor {
            state: Bytes::copy_from_slice(bytes),
        })
    }
    fn capture_bytes(&self, actor: &BlobActor) -> Result<Bytes, BoxError> {
        Ok(actor.state.clone())
    }
    fn restore_bytes(&self, bytes: Bytes) -> Result<BlobActor, BoxError> {
        Ok(BlobActor { state: bytes })
    }
}

/// The `blob` or `blob-shared` type: the same factory and handlers, `adapter` to move it.
fn blob_type(
    t: ActorType<BlobActor>,
    adapter: impl ActorStateAdapter<BlobActor>,
) -> ActorType<BlobActor> {
    t.factory(|_ctx| async {
        Ok(BlobActor {
            state: Bytes::new(),
        })
    })
    .preserve_state_with(adapter)
    .on_request::<Fill, _>(|a, f, _ctx| {
        Box::pin(async move {
            a.state = Bytes::from(pseudo_random(usize::try_from(f.len).unwrap_or(0)));
            Ok(crc32c::crc32c(&a.state))
        })
    })
    .on_request::<Check, _>(|a, _c, _ctx| {
        Box::pin(async move { Ok((a.state.len() as u64, crc32c::crc32c(&a.state))) })
    })
}

/// Replaces the state with `len` pseudo-random bytes; replies with their CRC-32C.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Fill {
    len: u64,
}
impl Message for Fill {
    const PACKET: &'static str = "Fill";
}
impl Request for Fill {
    type Reply = u32;
}

/// The state's length and CRC-32C.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Check;
impl Message for Check {
    const PACKET: &'static str = "Check";
}
impl Request for Check {
    type Reply = (u64, u32);
}

/// `len` bytes of a xorshift sequence (not compressible, the same for the same `len`).
fn pseudo_random(len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Prints one whole line on stdout and flushes it (the driver reads lines).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn cli() -> Command {
    let opt = |name: &'static str, help: &'static str| Arg::new(name).long(name).help(help);
    Command::new("relocation_peer")
        .about("One Object Server root with the `blob` Actor type, driven over stdin")
        .arg(
            opt("redis", "Redis URL (Location and Relocation Store)")
                .default_value("redis://127.0.0.1:6379"),
        )
        .arg(opt("prefix", "Redis key prefix").default_value("zlink-relocation-peer"))
        .arg(
            opt("version", "the root's application version")
                .value_parser(clap::value_parser!(u64))
                .default_value("1"),
        )
        .arg(
            opt("polling-ms", "pollingInterval in milliseconds")
                .value_parser(clap::value_parser!(u64).range(1..))
                .default_value("100"),
        )
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
    let mesh = MeshName::new("relocation")?;
    let url = args
        .get_one::<String>("redis")
        .ok_or("--redis needs a URL")?;
    let prefix = args
        .get_one::<String>("prefix")
        .cloned()
        .unwrap_or_default();
    let version = *args.get_one::<u64>("version").unwrap_or(&1);
    let polling = Duration::from_millis(*args.get_one::<u64>("polling-ms").unwrap_or(&100));
    let location = RedisLocationStore::connect(
        RedisLocationOptions::from_url(url)?.with_key_prefix(prefix.clone())?,
    )
    .await?;
    let relocation = RedisRelocationStore::connect(
        RedisRelocationOptions::from_url(url)?.with_key_prefix(prefix)?,
    )
    .await?;
    let host = ZLink::builder()
        .location_store(Arc::new(location))
        .relocation_store(Arc::new(relocation))
        .location_options(LocationOptions::default().polling_interval(polling))
        .application_version(version)
        .route_mesh(mesh.clone(), |n| {
            n.routing_id_prefix("peer")
                .object_role(ObjectRole::Server)
                .actor_type::<BlobActor>(BLOB, |t| blob_type(t, CopyingAdapter))
                .actor_type::<BlobActor>(BLOB_SHARED, |t| blob_type(t, SharedAdapter))
        })
        .build()
        .start()
        .await?;
    let node = host.node(&mesh).ok_or("the node is missing")?;
    let actors = host.actors()?;
    say(&format!("READY {}", node.routing_id()));

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
        let words: Vec<&str> = line.split_whitespace().collect();
        let reply = match words.as_slice() {
            ["QUIT"] => break,
            ["PEERS"] => {
                let n = node
                    .status()
                    .peers
                    .iter()
                    .filter(|p| p.weights.is_some())
                    .count();
                format!("PEERS {n}")
            }
            ["FILL", id, len, rest @ ..] => match (len.parse::<u64>(), rest) {
                (Ok(len), []) => fill(&actors, BLOB, id, len).await,
                (Ok(len), [t]) if *t == BLOB || *t == BLOB_SHARED => {
                    fill(&actors, t, id, len).await
                }
                _ => "BAD FILL <id> <bytes> [blob|blob-shared]".to_owned(),
            },
            ["RELOCATE", rest @ ..] => {
                let ms = rest.first().and_then(|m| m.parse().ok()).unwrap_or(60_000);
                relocate(&host, Duration::from_millis(ms)).await
            }
            ["CHECK", id] => check(&actors, id).await,
            ["SINK"] => sink().await,
            ["SEND", port, len] => match (port.parse::<u16>(), len.parse::<usize>()) {
                (Ok(port), Ok(len)) => send(port, len).await,
                _ => "BAD SEND <port> <bytes>".to_owned(),
            },
            [] => continue,
            _ => format!("BAD {line}"),
        };
        say(&reply);
    }
    let report = host.shutdown().await;
    say(&format!("STOPPED {:?}", report.outcome));
    Ok(())
}

/// Creates the Actor (retried for up to [`PLACEMENT_WAIT`] while placement does not list this
/// node yet: its own descriptor is read on the next poll) and fills it.
async fn fill(actors: &ActorManager, stable_type: &str, id: &str, len: u64) -> String {
    let deadline = Instant::now() + PLACEMENT_WAIT;
    let owner = loop {
        match actors.get_or_create(stable_type, id).await {
            Ok(r) => break r.node,
            Err(e) if Instant::now() >= deadline => return format!("ERR create: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    match actors.request(id, &Fill { len }).await {
        Ok(crc) => format!("FILLED {owner} {crc:08x}"),
        Err(e) => format!("ERR fill: {e}"),
    }
}

async fn relocate(host: &ZLinkHost, deadline: Duration) -> String {
    let started = Instant::now();
    match host
        .relocate(RelocateOptions::planned_maintenance().deadline(deadline))
        .await
    {
        Ok(r) => format!(
            "RELOCATED {:?} {:?} {} {:.3}",
            r.outcome,
            r.reason,
            r.moved,
            started.elapsed().as_secs_f64() * 1e3
        ),
        Err(e) => format!("ERR relocate: {e}"),
    }
}

async fn check(actors: &ActorManager, id: &str) -> String {
    let owner = match actors.find(id).await {
        Ok(Some(r)) => r.node,
        Ok(None) => return format!("ERR {id} does not exist"),
        Err(e) => return format!("ERR find: {e}"),
    };
    match actors.request(id, &Check).await {
        Ok((len, crc)) => format!("CHECKED {len} {crc:08x} {owner}"),
        Err(e) => format!("ERR check: {e}"),
    }
}

/// Binds the raw listener and serves its one connection on a task of its own.
async fn sink() -> String {
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => return format!("ERR bind: {e}"),
    };
    let port = match listener.local_addr() {
        Ok(a) => a.port(),
        Err(e) => return format!("ERR bind: {e}"),
    };
    tokio::spawn(async move {
        let result = async {
            let (mut s, _) = listener.accept().await?;
            s.set_nodelay(true)?;
            let len = s.read_u64().await?;
            let mut buf = vec![0u8; usize::try_from(len).unwrap_or(0)];
            s.read_exact(&mut buf).await?;
            s.write_u8(1).await?;
            s.flush().await?;
            Ok::<usize, std::io::Error>(buf.len())
        }
        .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "the raw sink failed");
        }
    });
    format!("SINK {port}")
}

/// Sends `len` bytes to the sink on `port`; the time from after the connect to its answer.
async fn send(port: u16, len: usize) -> String {
    let payload = pseudo_random(len);
    let result = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        s.set_nodelay(true)?;
        let started = Instant::now();
        s.write_u64(len as u64).await?;
        s.write_all(&payload).await?;
        s.flush().await?;
        let _ack = s.read_u8().await?;
        Ok::<Duration, std::io::Error>(started.elapsed())
    }
    .await;
    match result {
        Ok(d) => format!("SENT {:.3}", d.as_secs_f64() * 1e3),
        Err(e) => format!("ERR send: {e}"),
    }
}
