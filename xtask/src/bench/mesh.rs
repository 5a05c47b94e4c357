//! `cargo xtask bench mesh [--seconds S]`: two MeshNodes in separate processes on loopback
//! (manual topology, no Location Store), each case beside the raw framed-TCP baseline of
//! `bench transport` measured in the same run, as a ratio `zlink/raw`.
//!
//! The server is `crates/zlink-runtime/examples/mesh_node/main.rs` (built in release; a 2-worker
//! tokio runtime), answering `Echo` and counting one-way `Blob`s; the raw server is
//! `zlink-transport`'s `peer --raw`. This process is the client: a ZLink root whose MeshNode
//! has the server as its manual peer, on a current-thread tokio runtime. Payloads are 64
//! bytes of text (the root's codec is JSON).
//!
//! - one-way: `MeshNode::send` of `Blob` for S seconds; the figure is messages per second until
//!   the server's `Count` reply shows every one handled.
//! - request/response at c=1 and c=64: c tasks each send `Echo` and await the reply in a loop;
//!   replies per second and per-request latency p50/p99.
//!
//! Beside raw, every case also runs the codec-fair baseline (`raw_json.rs`: raw framed TCP with
//! the same serde JSON encode and decode per message, server `peer --raw-json`), so a line
//! reads `zlink/raw` and `zlink/json` — framework cost apart from codec cost.
//!
//! Every case also runs over mesh TLS (a second server process and client node with
//! certificates from one CA generated for the run), alternating rounds with the plaintext
//! run; its line reports `tls/plain`. And every case runs with MessagePack as the payload
//! codec of both ends (a third server process, `mesh_node --msgpack`, and client node), in
//! the same alternating rounds; its line reports `msgpack/json` against the plaintext JSON run.

use super::options;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use zlink_codec::payload::{PayloadCodec, Selector};
use zlink_codec::{MeshName, RoutingId};
use zlink_runtime::MeshNode;
use zlink_runtime::Message;
use zlink_runtime::Request;
use zlink_runtime::ZLink;
use zlink_runtime::ZLinkHost;
use zlink_runtime::config::{MeshTls, Topology};

use super::raw_json;
use super::transport::{
    Count, Latency, ROUNDS, Samples, Server, peer_binary, raw_one_way, raw_request_response,
};

/// `Echo` of the example: returns its bytes.
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

/// `Blob` of the example: a one-way message it counts.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Blob {
    bytes: String,
}
impl Message for Blob {
    const PACKET: &'static str = "Blob";
}

/// `Count` of the example: how many `Blob`s it has handled.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct CountBlobs;
impl Message for CountBlobs {
    const PACKET: &'static str = "Count";
}
impl Request for CountBlobs {
    type Reply = u64;
}

const PAYLOAD: usize = 64;
/// How long the setup steps (peer Ready, the one-way drain) may take.
const SETUP: Duration = Duration::from_secs(30);

fn parse(args: &[String]) -> Result<f64, String> {
    let mut seconds = 3.0;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--seconds" => seconds = options::seconds("mesh", it.next())?,
            other => {
                return Err(format!(
                    "bench mesh: unknown option `{other}` (known: --seconds S)"
                ));
            }
        }
    }
    Ok(seconds)
}

/// The `mesh_node` example, built in release.
pub(super) fn mesh_node_binary() -> Result<PathBuf, String> {
    crate::examples::example_binary("zlink-runtime", "mesh_node", true)
}

/// The MeshNode server process; closing its stdin (on drop) shuts it down in order.
pub(super) struct MeshServer {
    child: Child,
    pub(super) rid: RoutingId,
    pub(super) endpoint: String,
}

impl MeshServer {
    pub(super) fn spawn(binary: &PathBuf, extra: &[&str]) -> Result<Self, String> {
        let mut child = Command::new(binary)
            .args(["--port", "0", "--fixed-rid", "02"])
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
        let mut words = line.split_whitespace();
        let (Some("READY"), Some(_), Some(endpoint)) = (words.next(), words.next(), words.next())
        else {
            let _ = child.kill();
            return Err(format!("unexpected mesh_node output {line:?}"));
        };
        Ok(Self {
            child,
            rid: RoutingId::new(vec![2]).map_err(|e| e.to_string())?,
            endpoint: endpoint.to_owned(),
        })
    }
}

impl Drop for MeshServer {
    fn drop(&mut self) {
        super::transport::stop_child(&mut self.child, Duration::from_secs(5));
    }
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let seconds = parse(args)?;
    let mesh_bin = mesh_node_binary()?;
    let peer_bin = peer_binary()?;
    let server = MeshServer::spawn(&mesh_bin, &[])?;
    let pki = Pki::generate()?;
    let tls_dir = pki.dir.to_string_lossy().into_owned();
    let tls_server = MeshServer::spawn(&mesh_bin, &["--tls", &tls_dir, "--tls-name", SERVER])?;
    let mp_server = MeshServer::spawn(&mesh_bin, &["--msgpack"])?;
    let raw = Server::spawn(&peer_bin, &["--raw"])?;
    let json = Server::spawn(&peer_bin, &["--raw-json"])?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let d = Duration::from_secs_f64(seconds);
    println!(
        "mesh bench: {PAYLOAD} B payloads, {seconds:.1} s per case, two processes on loopback, node-direct calls"
    );
    rt.block_on(async {
        let (host, node) = client(&server.endpoint, None, false).await?;
        let (tls_host, tls_node) = client(&tls_server.endpoint, Some(pki.client()?), false).await?;
        let (mp_host, mp_node) = client(&mp_server.endpoint, None, true).await?;
        let text = "x".repeat(PAYLOAD);
        let raw_payload = Bytes::from(vec![0xa5u8; PAYLOAD]);

        let (mut z, mut t, mut r) = (Count::default(), Count::default(), Count::default());
        let (mut j, mut m) = (Count::default(), Count::default());
        for _ in 0..ROUNDS {
            z.add(one_way(&node, &server.rid, &text, d / ROUNDS).await?);
            t.add(one_way(&tls_node, &tls_server.rid, &text, d / ROUNDS).await?);
            m.add(one_way(&mp_node, &mp_server.rid, &text, d / ROUNDS).await?);
            r.add(raw_one_way(&raw.addr, &raw_payload, d / ROUNDS).await?);
            j.add(raw_json::one_way(&json.addr, &text, d / ROUNDS).await?);
        }
        print_throughput("one-way send", z.per_sec(), r.per_sec(), j.per_sec());
        print_tls("one-way send (TLS)", t.per_sec(), z.per_sec());
        print_msgpack("one-way send (msgpack)", m.per_sec(), z.per_sec());
        for c in [1usize, 64] {
            let (mut z, mut t, mut r) =
                (Samples::default(), Samples::default(), Samples::default());
            let (mut j, mut m) = (Samples::default(), Samples::default());
            for _ in 0..ROUNDS {
                z.add(request_response(&node, &server.rid, &text, c, d / ROUNDS).await?);
                t.add(request_response(&tls_node, &tls_server.rid, &text, c, d / ROUNDS).await?);
                m.add(request_response(&mp_node, &mp_server.rid, &text, c, d / ROUNDS).await?);
                r.add(raw_request_response(&raw.addr, &raw_payload, c, d / ROUNDS).await?);
                j.add(raw_json::request_response(&json.addr, &text, c, d / ROUNDS).await?);
            }
            let (z, t) = (z.latency(), t.latency());
            print_latency(
                &format!("request/response c={c}"),
                &z,
                &r.latency(),
                &j.latency(),
            );
            print_tls(&format!("req/resp c={c} (TLS)"), t.per_sec, z.per_sec);
            print_msgpack(
                &format!("req/resp c={c} (msgpack)"),
                m.latency().per_sec,
                z.per_sec,
            );
        }
        for h in [host, tls_host, mp_host] {
            let report = h.shutdown().await;
            if !report.failures.is_empty() {
                return Err(format!("client shutdown: {:?}", report.failures));
            }
        }
        Ok::<(), String>(())
    })?;
    drop((server, tls_server, mp_server, raw, json));
    Ok(())
}

fn print_throughput(case: &str, zlink: f64, raw: f64, json: f64) {
    println!(
        "{case:<24} zlink {zlink:>10.0} msg/s   raw {raw:>10.0} msg/s   raw+json {json:>10.0} msg/s   zlink/raw = {:.2}x   zlink/json = {:.2}x",
        zlink / raw,
        zlink / json
    );
}

fn print_tls(case: &str, tls: f64, plain: f64) {
    println!(
        "{case:<24} zlink {tls:>10.0} msg/s   plain {plain:>10.0} msg/s   tls/plain = {:.2}x",
        tls / plain
    );
}

fn print_msgpack(case: &str, msgpack: f64, json: f64) {
    println!(
        "{case:<24} zlink {msgpack:>10.0} msg/s   json {json:>10.0} msg/s   msgpack/json = {:.2}x",
        msgpack / json
    );
}

/// The TLS server's identity name.
const SERVER: &str = "mesh-server";
/// The TLS client's identity name.
const CLIENT: &str = "mesh-client";

/// A CA and the two node certificates of the TLS run, written to a directory the server
/// process reads (`--tls DIR --tls-name NAME`); removed on drop.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn generate() -> Result<Self, String> {
        let dir = std::env::temp_dir().join(format!("zlink-bench-mesh-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let key = rcgen::KeyPair::generate().map_err(to_string)?;
        let mut params = rcgen::CertificateParams::new(Vec::new()).map_err(to_string)?;
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = rcgen::CertifiedIssuer::self_signed(params, key).map_err(to_string)?;
        let write = |file: String, text: String| {
            std::fs::write(dir.join(&file), text).map_err(|e| format!("{file}: {e}"))
        };
        write("ca.pem".into(), ca.pem())?;
        for name in [SERVER, CLIENT] {
            let key = rcgen::KeyPair::generate().map_err(to_string)?;
            let cert = rcgen::CertificateParams::new(vec![name.to_owned()])
                .map_err(to_string)?
                .signed_by(&key, &ca)
                .map_err(to_string)?;
            write(format!("{name}.pem"), cert.pem())?;
            write(format!("{name}.key"), key.serialize_pem())?;
        }
        Ok(Self { dir })
    }

    fn client(&self) -> Result<MeshTls, String> {
        let read =
            |file: String| std::fs::read(self.dir.join(&file)).map_err(|e| format!("{file}: {e}"));
        MeshTls::from_pem(
            &read("ca.pem".into())?,
            &read(format!("{CLIENT}.pem"))?,
            &read(format!("{CLIENT}.key"))?,
            CLIENT,
        )
        .map_err(to_string)
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn print_latency(case: &str, z: &Latency, r: &Latency, j: &Latency) {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "{case:<24} zlink {:>10.0} msg/s p50 {:>7.1} us p99 {:>7.1} us   raw {:>10.0} msg/s p50 {:>7.1} us p99 {:>7.1} us   raw+json {:>10.0} msg/s p50 {:>7.1} us   zlink/raw = {:.2}x   zlink/json = {:.2}x",
        z.per_sec,
        us(z.p50),
        us(z.p99),
        r.per_sec,
        us(r.p50),
        us(r.p99),
        j.per_sec,
        us(j.p50),
        z.per_sec / r.per_sec,
        z.per_sec / j.per_sec
    );
}

fn to_string(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The client root: one MeshNode (fixed RID 01) whose manual peer is the server; returns once
/// the peer is Ready with its weights known.
pub(super) async fn client(
    endpoint: &str,
    tls: Option<MeshTls>,
    msgpack: bool,
) -> Result<(ZLinkHost, MeshNode), String> {
    let mesh = MeshName::new("demo").map_err(to_string)?;
    let mut builder = ZLink::builder();
    if msgpack {
        builder = builder.codec(PayloadCodec::message_pack(), Selector::any());
    }
    let host = builder
        .route_mesh(mesh.clone(), |n| {
            let n = n
                .topology(Topology::Manual)
                .fixed_routing_id(vec![1])
                .port(0)
                .manual_peer(endpoint);
            match tls {
                Some(tls) => n.tls(tls),
                None => n,
            }
        })
        .build()
        .start()
        .await
        .map_err(to_string)?;
    let node = host.node(&mesh).ok_or("no client node")?;
    let deadline = Instant::now() + SETUP;
    while !node.status().peers.iter().any(|p| p.weights.is_some()) {
        if Instant::now() >= deadline {
            return Err("the server never became a Ready peer".into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok((host, node))
}

async fn handled(node: &MeshNode, server: &RoutingId) -> Result<u64, String> {
    node.request(server, &CountBlobs).await.map_err(to_string)
}

/// Sends `Blob`s for `d`, then waits until the server has handled all of them.
pub(super) async fn one_way(
    node: &MeshNode,
    server: &RoutingId,
    text: &str,
    d: Duration,
) -> Result<(u64, Duration), String> {
    let before = handled(node, server).await?;
    let blob = Blob {
        bytes: text.to_owned(),
    };
    let started = Instant::now();
    let mut sent: u64 = 0;
    while started.elapsed() < d {
        for _ in 0..256 {
            node.send(server, &blob).await.map_err(to_string)?;
            sent += 1;
        }
    }
    let deadline = Instant::now() + SETUP;
    while handled(node, server).await? < before + sent {
        if Instant::now() >= deadline {
            return Err("the server did not handle every one-way message".into());
        }
        tokio::task::yield_now().await;
    }
    Ok((sent, started.elapsed()))
}

/// `c` loops of request → reply for `d`; every request's latency.
pub(super) async fn request_response(
    node: &MeshNode,
    server: &RoutingId,
    text: &str,
    c: usize,
    d: Duration,
) -> Result<(Vec<Duration>, Duration), String> {
    let echo = Rc::new(Echo {
        bytes: text.to_owned(),
    });
    let started = Instant::now();
    let local = tokio::task::LocalSet::new();
    let mut loops = Vec::with_capacity(c);
    for _ in 0..c {
        let (node, server, echo) = (node.clone(), server.clone(), Rc::clone(&echo));
        loops.push(local.spawn_local(async move {
            let mut samples = Vec::new();
            while started.elapsed() < d {
                let t = Instant::now();
                let reply = node.request(&server, &*echo).await.map_err(to_string)?;
                samples.push(t.elapsed());
                if reply.len() != echo.bytes.len() {
                    return Err("wrong echo".to_string());
                }
            }
            Ok::<_, String>(samples)
        }));
    }
    let all = local
        .run_until(async {
            let mut all = Vec::new();
            for l in loops {
                all.extend(l.await.map_err(to_string)??);
            }
            Ok::<_, String>(all)
        })
        .await?;
    Ok((all, started.elapsed()))
}
