//! Helpers: nodes on loopback, event waits with timeouts, a freezable TCP proxy.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use zlink_codec::{ChannelName, Generation, MeshName, RoutingId};

use crate::{DownReason, Envelope, Inbound, PeerEvent, PeerInfo, Transport, TransportConfig};

/// Longest a test waits for something that should happen.
pub(crate) const WAIT: Duration = Duration::from_secs(5);

pub(crate) fn rid(b: u8) -> RoutingId {
    RoutingId::new(vec![b]).unwrap()
}

pub(crate) fn generation(g: u64) -> Generation {
    Generation::new(g).unwrap()
}

pub(crate) fn channel(name: &str) -> ChannelName {
    ChannelName::new(name).unwrap()
}

pub(crate) fn config(r: u8, g: u64) -> TransportConfig {
    TransportConfig::new(MeshName::new("test-mesh").unwrap(), rid(r), generation(g))
}

pub(crate) async fn start(config: TransportConfig) -> (Transport, Inbound) {
    Transport::start(config).await.unwrap()
}

pub(crate) async fn node(r: u8, g: u64) -> (Transport, Inbound) {
    start(config(r, g)).await
}

pub(crate) fn endpoint(t: &Transport) -> String {
    t.local_addr().to_string()
}

pub(crate) async fn next_event(inbound: &mut Inbound) -> PeerEvent {
    tokio::time::timeout(WAIT, inbound.events.recv())
        .await
        .expect("no peer event within the wait")
        .expect("event stream ended")
}

pub(crate) async fn expect_up(inbound: &mut Inbound) -> Arc<PeerInfo> {
    match next_event(inbound).await {
        PeerEvent::Up(info) => info,
        other => panic!("expected Up, got {other:?}"),
    }
}

pub(crate) async fn expect_down(inbound: &mut Inbound) -> (Arc<PeerInfo>, DownReason) {
    match next_event(inbound).await {
        PeerEvent::Down { peer, reason } => (peer, reason),
        other => panic!("expected Down, got {other:?}"),
    }
}

pub(crate) async fn no_event_for(inbound: &mut Inbound, d: Duration) {
    if let Ok(Some(e)) = tokio::time::timeout(d, inbound.events.recv()).await {
        panic!("unexpected peer event {e:?}");
    }
}

/// A started pair: `a` (RID 1) dialed `b` (RID 2); both saw Up.
pub(crate) async fn connected_pair(
    a: TransportConfig,
    b: TransportConfig,
) -> ((Transport, Inbound), (Transport, Inbound)) {
    let (bt, mut bi) = start(b).await;
    let (at, mut ai) = start(a).await;
    at.connect(&crate::PeerIntent::new(endpoint(&bt)))
        .await
        .unwrap();
    expect_up(&mut ai).await;
    expect_up(&mut bi).await;
    ((at, ai), (bt, bi))
}

pub(crate) fn one_way(t: &Transport, payload: Bytes) -> Envelope {
    Envelope::one_way(
        t.ids().next_operation_id().unwrap(),
        t.routing_id(),
        t.lifecycle_generation(),
        payload,
    )
}

pub(crate) fn request(t: &Transport, payload: Bytes) -> Envelope {
    Envelope::request(
        t.ids().next_operation_id().unwrap(),
        t.ids().next_reply_route_id().unwrap(),
        t.routing_id(),
        t.lifecycle_generation(),
        payload,
    )
}

/// A TCP proxy for one connection that forwards both ways until frozen; frozen, it neither
/// reads nor writes nor closes (a half-open peer as seen from either end).
pub(crate) async fn freezable_proxy(target: SocketAddr) -> (SocketAddr, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let frozen = Arc::new(AtomicBool::new(false));
    let f = frozen.clone();
    tokio::spawn(async move {
        let Ok((inbound, _)) = listener.accept().await else {
            return;
        };
        drop(listener);
        let Ok(outbound) = TcpStream::connect(target).await else {
            return;
        };
        let (ir, iw) = inbound.into_split();
        let (or, ow) = outbound.into_split();
        tokio::spawn(pump(ir, ow, f.clone()));
        tokio::spawn(pump(or, iw, f));
    });
    (addr, frozen)
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    frozen: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let Ok(n) = from.read(&mut buf).await else {
            return;
        };
        if frozen.load(Ordering::SeqCst) {
            // Hold both halves open forever: no FIN, no RST, no bytes.
            let _keep = (from, to);
            std::future::pending::<()>().await;
            return;
        }
        if n == 0 || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
