//! Handshake verification, refusal and duplicate collapse (spec 06 §5, guide 10 §2).

use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::net::{TcpListener, TcpStream};
use zlink_codec::MeshName;

use super::support::*;
use crate::handshake::HandshakeIo;
use crate::wire::{self, Hello, PROTOCOL_VERSION, Window};
use crate::{
    HANDSHAKE_TIMEOUT, HandshakeRejection, PeerIntent, TransportError, TransportErrorKind,
};

fn rejection(e: &TransportError) -> (&HandshakeRejection, bool) {
    match e {
        TransportError::Handshake {
            rejection,
            by_remote,
        } => (rejection, *by_remote),
        other => panic!("expected a handshake rejection, got {other:?}"),
    }
}

#[tokio::test]
async fn handshake_rejects_another_mesh_name() {
    let other = crate::TransportConfig::new(MeshName::new("other").unwrap(), rid(2), generation(1));
    let (b, mut bi) = start(other).await;
    let (a, mut ai) = node(1, 1).await;
    let err = a.connect(&PeerIntent::new(endpoint(&b))).await.unwrap_err();
    assert_eq!(err.kind(), TransportErrorKind::HandshakeRejected);
    let (r, by_remote) = rejection(&err);
    assert!(by_remote, "the acceptor checks the dialer's HELLO first");
    assert_eq!(
        r,
        &HandshakeRejection::MeshName {
            expected: "other".into(),
            found: "test-mesh".into()
        }
    );
    no_event_for(&mut ai, Duration::from_millis(200)).await;
    no_event_for(&mut bi, Duration::ZERO).await;
    assert!(a.peers().is_empty() && b.peers().is_empty());
}

#[tokio::test]
async fn handshake_rejects_an_unexpected_routing_id() {
    let (b, mut bi) = node(2, 1).await;
    let (a, _ai) = node(1, 1).await;
    let intent = PeerIntent::new(endpoint(&b)).expect_rid(rid(9));
    let err = a.connect(&intent).await.unwrap_err();
    let (r, by_remote) = rejection(&err);
    assert!(!by_remote);
    assert_eq!(
        r,
        &HandshakeRejection::RoutingId {
            expected: "09".into(),
            found: "02".into()
        }
    );
    no_event_for(&mut bi, Duration::from_millis(200)).await;
}

#[tokio::test]
async fn handshake_rejects_an_unexpected_lifecycle_generation() {
    let (b, _bi) = node(2, 3).await;
    let (a, _ai) = node(1, 1).await;
    let intent = PeerIntent::new(endpoint(&b)).expect_generation(generation(4));
    let err = a.connect(&intent).await.unwrap_err();
    assert_eq!(
        rejection(&err).0,
        &HandshakeRejection::LifecycleGeneration {
            expected: 4,
            found: 3
        }
    );
}

#[tokio::test]
async fn handshake_rejects_a_different_channel_set() {
    let (b, _bi) = start(config(2, 1).channels([channel("chat"), channel("ops")])).await;
    let (a, _ai) = node(1, 1).await;
    let intent = PeerIntent::new(endpoint(&b)).expect_channels([channel("chat")]);
    let err = a.connect(&intent).await.unwrap_err();
    assert_eq!(
        rejection(&err).0,
        &HandshakeRejection::ChannelSet {
            expected: vec!["chat".into()],
            found: vec!["chat".into(), "ops".into()]
        }
    );
    // The exact set is admitted.
    let ok = PeerIntent::new(endpoint(&b)).expect_channels([channel("ops"), channel("chat")]);
    let peer = a.connect(&ok).await.unwrap();
    assert_eq!(peer.info().channels.len(), 2);
}

#[tokio::test]
async fn handshake_rejects_the_nodes_own_routing_id() {
    let (b, _bi) = node(1, 1).await;
    let (a, _ai) = node(1, 1).await;
    let err = a.connect(&PeerIntent::new(endpoint(&b))).await.unwrap_err();
    assert_eq!(rejection(&err).0, &HandshakeRejection::SameRoutingId);
}

#[tokio::test]
async fn handshake_rejects_another_protocol_version() {
    let (b, mut bi) = node(2, 1).await;
    let stream = TcpStream::connect(b.local_addr()).await.unwrap();
    let mut io = HandshakeIo::new(crate::network::Connected::Tcp(stream)).unwrap();
    let mut hello = Hello {
        version: PROTOCOL_VERSION + 1,
        mesh: MeshName::new("test-mesh").unwrap(),
        rid: rid(1),
        generation: generation(1),
        app_window: Window { count: 1, bytes: 1 },
        control_window: Window { count: 1, bytes: 1 },
        channels: Default::default(),
    };
    io.write(hello.encode()).await.unwrap();
    let reply = io.read().await.unwrap();
    assert_eq!(
        wire::decode_reject(reply).unwrap(),
        HandshakeRejection::ProtocolVersion {
            ours: PROTOCOL_VERSION,
            theirs: PROTOCOL_VERSION + 1
        }
    );
    // The connection is closed after the REJECT.
    assert!(io.read().await.is_err());
    no_event_for(&mut bi, Duration::from_millis(100)).await;
    hello.version = PROTOCOL_VERSION;
    assert!(Hello::decode(hello.encode()).is_ok());
}

#[tokio::test]
async fn handshake_rejects_a_stale_lifecycle_generation() {
    let (b5, _b5i) = node(2, 5).await;
    let (a, mut ai) = node(1, 1).await;
    a.connect(&PeerIntent::new(endpoint(&b5))).await.unwrap();
    expect_up(&mut ai).await;
    // A second process claiming RID 2 with an older generation.
    let (b4, mut b4i) = node(2, 4).await;
    let err = a
        .connect(&PeerIntent::new(endpoint(&b4)))
        .await
        .unwrap_err();
    assert_eq!(
        rejection(&err).0,
        &HandshakeRejection::StaleGeneration {
            current: 5,
            found: 4
        }
    );
    no_event_for(&mut b4i, Duration::from_millis(100)).await;
    assert_eq!(a.peers()[0].lifecycle_generation, generation(5));
}

#[tokio::test]
async fn acceptor_applies_the_expectations_of_its_intent() {
    // B (RID 2) expects RID 1 at generation 7; being the larger RID it waits to be dialed.
    let (b, mut bi) = node(2, 1).await;
    let (a, _ai) = node(1, 1).await;
    b.add_intent(
        PeerIntent::new(endpoint(&a))
            .expect_rid(rid(1))
            .expect_generation(generation(7)),
    )
    .unwrap();
    assert!(!b.intents()[0].dials);
    let err = a.connect(&PeerIntent::new(endpoint(&b))).await.unwrap_err();
    let (r, by_remote) = rejection(&err);
    assert!(by_remote);
    assert_eq!(
        r,
        &HandshakeRejection::LifecycleGeneration {
            expected: 7,
            found: 1
        }
    );
    no_event_for(&mut bi, Duration::from_millis(100)).await;
}

#[tokio::test]
async fn handshake_times_out_against_a_silent_listener() {
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            held.push(s);
        }
    });
    let (a, _ai) = node(1, 1).await;
    let started = Instant::now();
    let err = a
        .connect(&PeerIntent::new(addr.to_string()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, TransportError::HandshakeTimedOut(_)),
        "{err:?}"
    );
    assert_eq!(err.kind(), TransportErrorKind::TimedOut);
    let elapsed = started.elapsed();
    assert!(elapsed >= HANDSHAKE_TIMEOUT && elapsed < HANDSHAKE_TIMEOUT + WAIT);
    holder.abort();
}

#[tokio::test]
async fn only_the_smaller_routing_id_dials_when_both_know_each_other() {
    let (a, mut ai) = node(1, 1).await;
    let (b, mut bi) = node(2, 1).await;
    b.add_intent(PeerIntent::new(endpoint(&a)).expect_rid(rid(1)))
        .unwrap();
    a.add_intent(PeerIntent::new(endpoint(&b)).expect_rid(rid(2)))
        .unwrap();
    assert!(a.intents()[0].dials);
    assert!(!b.intents()[0].dials);
    let up_a = expect_up(&mut ai).await;
    let up_b = expect_up(&mut bi).await;
    assert!(up_a.initiated_locally);
    assert!(!up_b.initiated_locally);
    assert_eq!(up_a.local_addr, up_b.remote_addr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simultaneous_connects_collapse_to_one_ready_connection() {
    for round in 0..10 {
        let (a, mut ai) = node(1, 1).await;
        let (b, mut bi) = node(2, 1).await;
        // Intents without a RID: both sides dial at once.
        let (ea, eb) = (endpoint(&a), endpoint(&b));
        let (r1, r2) = tokio::join!(async { a.add_intent(PeerIntent::new(eb)) }, async {
            b.add_intent(PeerIntent::new(ea))
        },);
        r1.unwrap();
        r2.unwrap();
        let up_a = expect_up(&mut ai).await;
        let up_b = expect_up(&mut bi).await;
        // Let every candidate finish its handshake (and the losing dialer back off).
        no_event_for(&mut ai, Duration::from_millis(300)).await;
        no_event_for(&mut bi, Duration::ZERO).await;
        assert_eq!(a.peers().len(), 1, "round {round}");
        assert_eq!(b.peers().len(), 1, "round {round}");
        // Both ends hold the same TCP connection.
        assert_eq!(up_a.local_addr, up_b.remote_addr, "round {round}");
        assert_eq!(up_a.remote_addr, up_b.local_addr, "round {round}");
        assert_ne!(up_a.initiated_locally, up_b.initiated_locally);
        // And it carries traffic.
        let peer = a.peer(&rid(2)).unwrap();
        peer.try_send_app(&one_way(&a, Bytes::from_static(b"x")))
            .unwrap();
        let got = tokio::time::timeout(WAIT, bi.app.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got.envelope().payload().as_ref(), b"x");
        a.shutdown().await;
        b.shutdown().await;
    }
}
