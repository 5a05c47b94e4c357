//! `cargo xtask bench transport [--seconds S] [--payload BYTES]`: the MeshNode transport
//! (`zlink-transport`) between two processes on loopback, each case beside a raw
//! `LengthDelimitedCodec` stream measured in the same run, as a ratio (target: at least 0.7x).
//!
//! The server is the crate's example binary (`examples/peer.rs`, built in release), once as a
//! transport node and once with `--raw`; this process is the client. Both sides use a
//! current-thread tokio runtime.
//!
//! - one-way: the client sends 64-byte payloads for S seconds, then one request; the figure is
//!   frames per second until that request's reply arrives (the server has taken every frame out
//!   by then). The transport client enqueues with `try_send_app` (falling back to `send_app`
//!   when the lane is full) and its writer task writes a batch when nothing more is ready or
//!   64 KiB are gathered; the raw client encodes frames into a buffer and writes it whenever it
//!   reaches 64 KiB (the same flush bound, without a queue between).
//! - request/response at c=1 and c=64: c requests in flight; each reply lets the next request
//!   go. Figures: replies per second and per-request latency p50/p99. The raw server echoes a
//!   frame whose first byte is 1, writing once per read batch.

use super::options;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec};
use zlink_codec::{Generation, MeshName, RoutingId};
use zlink_transport::{
    Envelope, Inbound, MAX_FRAME_LEN, PeerEvent, PeerHandle, PeerIntent, Transport,
    TransportConfig, TransportErrorKind,
};

struct Args {
    seconds: f64,
    payload: usize,
    /// Only this case (`one-way`, `c1`, `c64`), or all.
    case: Option<String>,
}

impl Args {
    fn runs(&self, case: &str) -> bool {
        options::runs(self.case.as_deref(), case)
    }
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        seconds: 2.0,
        payload: 64,
        case: None,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--seconds" => parsed.seconds = options::seconds("transport", it.next())?,
            "--payload" => {
                parsed.payload = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| *n > 0 && *n <= 1 << 20)
                    .ok_or("bench transport: --payload needs 1..=1048576 bytes")?;
            }
            "--case" => {
                parsed.case = Some(options::case(
                    "transport",
                    it.next(),
                    &["one-way", "c1", "c64"],
                )?)
            }
            other => {
                return Err(format!(
                    "bench transport: unknown option `{other}` (known: --seconds S, --payload BYTES, --case one-way|c1|c64)"
                ));
            }
        }
    }
    Ok(parsed)
}

/// The example binary, built in release.
pub(crate) fn peer_binary() -> Result<PathBuf, String> {
    crate::examples::example_binary("zlink-transport", "peer", true)
}

/// A server process; closing its stdin (on drop) makes it shut down.
pub(crate) struct Server {
    child: Child,
    pub(crate) addr: String,
}

impl Server {
    pub(crate) fn spawn(binary: &PathBuf, extra: &[&str]) -> Result<Self, String> {
        let mut child = Command::new(binary)
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        let addr = line
            .trim()
            .strip_prefix("listening ")
            .ok_or_else(|| format!("unexpected server output {line:?}"))?
            .to_string();
        Ok(Self { child, addr })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        stop_child(&mut self.child, Duration::from_secs(3));
    }
}

/// Ends a benchmark server process in order: closes its stdin (its signal to shut down),
/// waits up to `grace` for it to exit, then kills it.
pub(crate) fn stop_child(child: &mut std::process::Child, grace: Duration) {
    drop(child.stdin.take());
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let args = parse(args)?;
    if cfg!(debug_assertions) {
        println!(
            "warning: this is a debug build; for meaningful figures run \
             `cargo run --release -p xtask -- bench transport`"
        );
    }
    let binary = peer_binary()?;
    let zlink = Server::spawn(&binary, &["--rid", "02"])?;
    let raw = Server::spawn(&binary, &["--raw"])?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let d = Duration::from_secs_f64(args.seconds);
    println!(
        "transport bench: {} B payloads, {:.1} s per case, two processes on loopback",
        args.payload, args.seconds
    );
    rt.block_on(async {
        let (client, mut inbound, peer) = zlink_client(&zlink.addr).await?;
        let payload = Bytes::from(vec![0xa5u8; args.payload]);

        if args.runs("one-way") {
            let (mut z, mut r) = (Count::default(), Count::default());
            for _ in 0..ROUNDS {
                z.add(zlink_one_way(&client, &mut inbound, &peer, &payload, d / ROUNDS).await?);
                r.add(raw_one_way(&raw.addr, &payload, d / ROUNDS).await?);
            }
            print_throughput("one-way", z.per_sec(), r.per_sec());
        }
        for c in [1usize, 64] {
            if !args.runs(&format!("c{c}")) {
                continue;
            }
            let (mut z, mut r) = (Samples::default(), Samples::default());
            for _ in 0..ROUNDS {
                z.add(
                    zlink_request_response(&client, &mut inbound, &peer, &payload, c, d / ROUNDS)
                        .await?,
                );
                r.add(raw_request_response(&raw.addr, &payload, c, d / ROUNDS).await?);
            }
            print_latency(
                &format!("request/response c={c}"),
                &z.latency(),
                &r.latency(),
            );
        }
        client.shutdown().await;
        Ok::<(), String>(())
    })?;
    drop((zlink, raw));
    Ok(())
}

fn print_throughput(case: &str, zlink: f64, raw: f64) {
    println!(
        "{case:<26} zlink {:>12.0} msg/s   raw {:>12.0} msg/s   ratio {:.2}x",
        zlink,
        raw,
        zlink / raw
    );
}

/// Each case alternates transport and raw rounds, so load from elsewhere on the machine falls
/// on both alike.
pub(crate) const ROUNDS: u32 = 8;

#[derive(Default)]
pub(crate) struct Count {
    n: u64,
    elapsed: Duration,
}

impl Count {
    pub(crate) fn add(&mut self, (n, elapsed): (u64, Duration)) {
        self.n += n;
        self.elapsed += elapsed;
    }

    pub(crate) fn per_sec(&self) -> f64 {
        self.n as f64 / self.elapsed.as_secs_f64()
    }
}

#[derive(Default)]
pub(crate) struct Samples {
    samples: Vec<Duration>,
    elapsed: Duration,
}

impl Samples {
    pub(crate) fn add(&mut self, (samples, elapsed): (Vec<Duration>, Duration)) {
        self.samples.extend(samples);
        self.elapsed += elapsed;
    }

    pub(crate) fn latency(self) -> Latency {
        latency(self.samples, self.elapsed)
    }
}

pub(crate) struct Latency {
    pub(crate) per_sec: f64,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
}

fn latency(mut samples: Vec<Duration>, elapsed: Duration) -> Latency {
    samples.sort_unstable();
    let at = |q: f64| {
        samples
            .get(((samples.len() as f64 * q) as usize).min(samples.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    Latency {
        per_sec: samples.len() as f64 / elapsed.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
    }
}

fn print_latency(case: &str, z: &Latency, r: &Latency) {
    println!(
        "{case:<26} zlink {:>12.0} msg/s p50 {:>7.1} us p99 {:>7.1} us   raw {:>12.0} msg/s p50 {:>7.1} us p99 {:>7.1} us   ratio {:.2}x",
        z.per_sec,
        z.p50.as_secs_f64() * 1e6,
        z.p99.as_secs_f64() * 1e6,
        r.per_sec,
        r.p50.as_secs_f64() * 1e6,
        r.p99.as_secs_f64() * 1e6,
        z.per_sec / r.per_sec
    );
}

fn to_string(e: impl std::fmt::Display) -> String {
    e.to_string()
}

async fn zlink_client(server: &str) -> Result<(Transport, Inbound, PeerHandle), String> {
    let config = TransportConfig::new(
        MeshName::new("bench").map_err(to_string)?,
        RoutingId::new(vec![1]).map_err(to_string)?,
        Generation::MIN,
    );
    let (t, mut inbound) = Transport::start(config).await.map_err(to_string)?;
    let peer = t
        .connect(&PeerIntent::new(server))
        .await
        .map_err(to_string)?;
    match inbound.events.recv().await {
        Some(PeerEvent::Up(_)) => {}
        other => return Err(format!("expected Up, got {other:?}")),
    }
    Ok((t, inbound, peer))
}

fn envelope(t: &Transport, payload: &Bytes, request: bool) -> Result<Envelope, String> {
    let ids = t.ids();
    let op = ids.next_operation_id().map_err(to_string)?;
    Ok(if request {
        let route = ids.next_reply_route_id().map_err(to_string)?;
        Envelope::request(
            op,
            route,
            t.routing_id(),
            t.lifecycle_generation(),
            payload.clone(),
        )
    } else {
        Envelope::one_way(
            op,
            t.routing_id(),
            t.lifecycle_generation(),
            payload.clone(),
        )
    })
}

async fn zlink_one_way(
    t: &Transport,
    inbound: &mut Inbound,
    peer: &PeerHandle,
    payload: &Bytes,
    d: Duration,
) -> Result<(u64, Duration), String> {
    let started = Instant::now();
    let mut sent: u64 = 0;
    'outer: loop {
        for _ in 0..1024 {
            let e = envelope(t, payload, false)?;
            match peer.try_send_app(&e) {
                Ok(()) => {}
                Err(err) if err.kind() == TransportErrorKind::Full => {
                    peer.send_app(&e).await.map_err(to_string)?;
                }
                Err(err) => return Err(err.to_string()),
            }
            sent += 1;
        }
        if started.elapsed() >= d {
            break 'outer;
        }
    }
    let sync = envelope(t, payload, true)?;
    peer.send_app(&sync).await.map_err(to_string)?;
    let reply = inbound.replies.recv().await.ok_or("no reply")?;
    if reply.reply().operation_id() != sync.operation_id() {
        return Err("unexpected reply".into());
    }
    Ok((sent, started.elapsed()))
}

async fn zlink_request_response(
    t: &Transport,
    inbound: &mut Inbound,
    peer: &PeerHandle,
    payload: &Bytes,
    c: usize,
    d: Duration,
) -> Result<(Vec<Duration>, Duration), String> {
    let mut in_flight: VecDeque<Instant> = VecDeque::with_capacity(c);
    let mut samples = Vec::new();
    let started = Instant::now();
    for _ in 0..c {
        in_flight.push_back(Instant::now());
        peer.send_app(&envelope(t, payload, true)?)
            .await
            .map_err(to_string)?;
    }
    let mut stopping = false;
    while let Some(sent_at) = in_flight.pop_front() {
        inbound.replies.recv().await.ok_or("no reply")?;
        samples.push(sent_at.elapsed());
        if !stopping && started.elapsed() >= d {
            stopping = true;
        }
        if !stopping {
            in_flight.push_back(Instant::now());
            peer.send_app(&envelope(t, payload, true)?)
                .await
                .map_err(to_string)?;
        }
    }
    Ok((samples, started.elapsed()))
}

fn raw_codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME_LEN)
        .new_codec()
}

/// A raw frame: tag byte (1 request, 0 one-way) then the payload.
fn raw_frame(tag: u8, payload: &Bytes) -> Bytes {
    let mut b = BytesMut::with_capacity(1 + payload.len());
    b.put_u8(tag);
    b.put_slice(payload);
    b.freeze()
}

async fn raw_connect(addr: &str) -> Result<TcpStream, String> {
    let s = TcpStream::connect(addr).await.map_err(to_string)?;
    s.set_nodelay(true).map_err(to_string)?;
    Ok(s)
}

pub(crate) async fn raw_one_way(
    addr: &str,
    payload: &Bytes,
    d: Duration,
) -> Result<(u64, Duration), String> {
    let mut s = raw_connect(addr).await?;
    let mut codec = raw_codec();
    let mut buf = BytesMut::with_capacity(128 * 1024);
    let started = Instant::now();
    let mut sent: u64 = 0;
    loop {
        for _ in 0..1024 {
            codec
                .encode(raw_frame(0, payload), &mut buf)
                .map_err(to_string)?;
            sent += 1;
            if buf.len() >= 64 * 1024 {
                s.write_all(&buf).await.map_err(to_string)?;
                buf.clear();
            }
        }
        if started.elapsed() >= d {
            break;
        }
    }
    codec
        .encode(raw_frame(1, payload), &mut buf)
        .map_err(to_string)?;
    s.write_all(&buf).await.map_err(to_string)?;
    let mut rbuf = BytesMut::with_capacity(4096);
    loop {
        if codec.decode(&mut rbuf).map_err(to_string)?.is_some() {
            break;
        }
        if s.read_buf(&mut rbuf).await.map_err(to_string)? == 0 {
            return Err("raw server closed".into());
        }
    }
    Ok((sent, started.elapsed()))
}

pub(crate) async fn raw_request_response(
    addr: &str,
    payload: &Bytes,
    c: usize,
    d: Duration,
) -> Result<(Vec<Duration>, Duration), String> {
    let mut s = raw_connect(addr).await?;
    let mut codec = raw_codec();
    let mut wbuf = BytesMut::with_capacity(64 * 1024);
    let mut rbuf = BytesMut::with_capacity(64 * 1024);
    let mut in_flight: VecDeque<Instant> = VecDeque::with_capacity(c);
    let mut samples = Vec::new();
    let started = Instant::now();
    for _ in 0..c {
        in_flight.push_back(Instant::now());
        codec
            .encode(raw_frame(1, payload), &mut wbuf)
            .map_err(to_string)?;
    }
    s.write_all(&wbuf).await.map_err(to_string)?;
    wbuf.clear();
    let mut stopping = false;
    while !in_flight.is_empty() {
        rbuf.reserve(64 * 1024);
        if s.read_buf(&mut rbuf).await.map_err(to_string)? == 0 {
            return Err("raw server closed".into());
        }
        while codec.decode(&mut rbuf).map_err(to_string)?.is_some() {
            let sent_at = in_flight.pop_front().ok_or("reply without a request")?;
            samples.push(sent_at.elapsed());
            if !stopping && started.elapsed() >= d {
                stopping = true;
            }
            if !stopping {
                in_flight.push_back(Instant::now());
                codec
                    .encode(raw_frame(1, payload), &mut wbuf)
                    .map_err(to_string)?;
            }
        }
        if !wbuf.is_empty() {
            s.write_all(&wbuf).await.map_err(to_string)?;
            wbuf.clear();
        }
    }
    Ok((samples, started.elapsed()))
}
