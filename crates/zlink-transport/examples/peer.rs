//! A standalone transport node for multi-process tests and benchmarks.
//!
//! Listens, optionally connects to a peer, answers every request with a reply carrying the same
//! payload, and counts one-way frames. Prints `listening <addr>` on stdout once bound and runs
//! until stdin closes (then shuts down in order).
//!
//! `--raw` runs the baseline instead: a bare `LengthDelimitedCodec` server where a frame whose
//! first byte is 1 is echoed back and any other frame is only counted; replies are written once
//! per read batch (the transport's flush policy).
//!
//! `--raw-json` is the codec-fair baseline: the same raw server, but every frame's body (after
//! its tag byte) is decoded as the JSON `{"bytes": "…"}` the MeshNode bench sends, and a
//! request's reply is that text encoded as a JSON string (what a MeshNode `Echo` handler does).

// An example binary: its stdout is its interface.
#![allow(clippy::print_stdout)]

use std::collections::BTreeSet;
use std::io::Write;

use bytes::BytesMut;
use clap::{Arg, ArgAction, Command};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec};
use zlink_codec::{ChannelName, Generation, MeshName, RoutingId};
use zlink_transport::{
    ConnectionId, MAX_FRAME_LEN, PeerHandle, PeerIntent, Reply, ReplyStatus, Transport,
    TransportConfig,
};

/// mimalloc: the binaries set the allocator, never a library (docs/performance.md has the
/// figure it bought).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn cli() -> Command {
    Command::new("peer")
        .about("zlink-transport node: echoes requests, counts one-way frames")
        .arg(
            Arg::new("listen")
                .long("listen")
                .default_value("127.0.0.1:0")
                .help("host:port to listen on (port 0: ephemeral)"),
        )
        .arg(
            Arg::new("rid")
                .long("rid")
                .default_value("02")
                .help("RoutingId, lowercase hex"),
        )
        .arg(Arg::new("mesh").long("mesh").default_value("bench"))
        .arg(Arg::new("generation").long("generation").default_value("1"))
        .arg(
            Arg::new("channel")
                .long("channel")
                .action(ArgAction::Append)
                .help("a ChannelName of this node (repeatable)"),
        )
        .arg(
            Arg::new("connect")
                .long("connect")
                .action(ArgAction::Append)
                .help("host:port of a peer to keep connected (repeatable)"),
        )
        .arg(
            Arg::new("raw")
                .long("raw")
                .action(ArgAction::SetTrue)
                .help("run the raw LengthDelimitedCodec baseline server instead"),
        )
        .arg(
            Arg::new("raw-json")
                .long("raw-json")
                .action(ArgAction::SetTrue)
                .help("the raw baseline with a serde JSON decode (and reply encode) per frame"),
        )
}

/// The message body of the codec-fair baseline (the MeshNode bench's `Echo` / `Blob`).
#[derive(serde::Deserialize)]
struct Text {
    bytes: String,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), BoxError> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let m = cli().get_matches();
    let arg = |name: &str| m.get_one::<String>(name).cloned().unwrap_or_default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    if m.get_flag("raw") || m.get_flag("raw-json") {
        return rt.block_on(raw_server(arg("listen"), m.get_flag("raw-json")));
    }
    let config = TransportConfig::new(
        MeshName::new(arg("mesh"))?,
        RoutingId::from_hex(&arg("rid"))?,
        Generation::parse(&arg("generation"))?,
    )
    .listen(arg("listen"))
    .channels(
        m.get_many::<String>("channel")
            .into_iter()
            .flatten()
            .map(|c| ChannelName::new(c.as_str()))
            .collect::<Result<BTreeSet<_>, _>>()?,
    );
    let connect: Vec<String> = m
        .get_many::<String>("connect")
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    rt.block_on(node(config, connect))
}

async fn announce(addr: std::net::SocketAddr) -> Result<(), BoxError> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening {addr}")?;
    out.flush()?;
    Ok(())
}

/// Resolves when stdin reaches end of file (the parent closed it or exited).
async fn stdin_closed() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let mut stdin = std::io::stdin().lock();
        while let Ok(n) = std::io::Read::read(&mut stdin, &mut buf) {
            if n == 0 {
                break;
            }
        }
        let _ = tx.send(());
    });
    let _ = rx.await;
}

async fn node(config: TransportConfig, connect: Vec<String>) -> Result<(), BoxError> {
    let (transport, mut inbound) = Transport::start(config).await?;
    for endpoint in connect {
        transport.add_intent(PeerIntent::new(endpoint))?;
    }
    announce(transport.local_addr()).await?;
    let mut events = inbound.events;
    tokio::spawn(async move {
        while let Some(e) = events.recv().await {
            tracing::info!(?e, "peer event");
        }
    });
    let mut one_way: u64 = 0;
    let mut current: Option<(ConnectionId, PeerHandle)> = None;
    let stop = stdin_closed();
    tokio::pin!(stop);
    loop {
        let frame = tokio::select! {
            () = &mut stop => break,
            f = inbound.app.recv() => match f { Some(f) => f, None => break },
        };
        let Some(reply) = Reply::to(
            frame.envelope(),
            ReplyStatus::Ok,
            frame.envelope().payload().clone(),
        ) else {
            one_way += 1;
            continue;
        };
        let info = frame.peer();
        if current.as_ref().is_none_or(|(c, _)| *c != info.connection) {
            current = transport.peer(&info.rid).map(|p| (info.connection, p));
        }
        if let Some((_, peer)) = &current {
            if let Err(e) = peer.send_reply(&reply) {
                tracing::warn!(error = %e, "reply not sent");
            }
        }
    }
    tracing::info!(one_way, "stopping");
    transport.shutdown().await;
    Ok(())
}

fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME_LEN)
        .new_codec()
}

async fn raw_server(listen: String, json: bool) -> Result<(), BoxError> {
    let listener = TcpListener::bind(listen.as_str()).await?;
    announce(listener.local_addr()?).await?;
    let stop = stdin_closed();
    tokio::pin!(stop);
    loop {
        let (stream, _) = tokio::select! {
            () = &mut stop => return Ok(()),
            r = listener.accept() => r?,
        };
        tokio::spawn(async move {
            if let Err(e) = raw_connection(stream, json).await {
                tracing::debug!(error = %e, "raw connection ended");
            }
        });
    }
}

async fn raw_connection(mut stream: TcpStream, json: bool) -> Result<(), BoxError> {
    stream.set_nodelay(true)?;
    let mut codec = codec();
    let mut rbuf = BytesMut::with_capacity(128 * 1024);
    let mut wbuf = BytesMut::with_capacity(128 * 1024);
    loop {
        rbuf.reserve(64 * 1024);
        if stream.read_buf(&mut rbuf).await? == 0 {
            return Ok(());
        }
        while let Some(frame) = codec.decode(&mut rbuf)? {
            let request = frame.first() == Some(&1);
            if json {
                let text: Text = serde_json::from_slice(frame.get(1..).unwrap_or_default())?;
                if request {
                    let mut reply = vec![1u8];
                    serde_json::to_writer(&mut reply, &text.bytes)?;
                    codec.encode(bytes::Bytes::from(reply), &mut wbuf)?;
                }
            } else if request {
                codec.encode(frame.freeze(), &mut wbuf)?;
            }
        }
        if !wbuf.is_empty() {
            stream.write_all(&wbuf).await?;
            wbuf.clear();
        }
    }
}
