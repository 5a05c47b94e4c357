//! Orderly close vs half-open detection, reconnect, intents, shutdown.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::support::*;
use crate::{DownReason, HEARTBEAT_INTERVAL, LIVENESS_TIMEOUT, PeerIntent};

#[tokio::test]
async fn orderly_close_is_reported_as_closed() {
    let ((a, mut ai), (b, mut bi)) = connected_pair(config(1, 1), config(2, 1)).await;
    b.shutdown().await;
    let (peer, reason) = expect_down(&mut ai).await;
    assert_eq!(reason, DownReason::Closed);
    assert_eq!(peer.rid, rid(2));
    assert_eq!(expect_down(&mut bi).await.1, DownReason::Local);
    assert!(a.peers().is_empty());
}

#[tokio::test]
async fn closing_one_connection_tells_the_peer() {
    let ((a, mut ai), (_b, mut bi)) = connected_pair(config(1, 1), config(2, 1)).await;
    a.peer(&rid(2)).unwrap().close();
    assert_eq!(expect_down(&mut ai).await.1, DownReason::Local);
    assert_eq!(expect_down(&mut bi).await.1, DownReason::Closed);
}

#[tokio::test]
async fn an_idle_connection_stays_up_past_the_liveness_timeout() {
    let ((a, mut ai), (_b, mut bi)) = connected_pair(config(1, 1), config(2, 1)).await;
    no_event_for(&mut ai, LIVENESS_TIMEOUT + HEARTBEAT_INTERVAL).await;
    no_event_for(&mut bi, Duration::ZERO).await;
    assert!(a.peer(&rid(2)).unwrap().is_ready());
}

#[tokio::test]
async fn a_half_open_peer_is_reported_as_timed_out_within_the_bound() {
    let (b, mut bi) = node(2, 1).await;
    let (a, mut ai) = node(1, 1).await;
    let (proxy, frozen) = freezable_proxy(b.local_addr()).await;
    a.connect(&PeerIntent::new(proxy.to_string()))
        .await
        .unwrap();
    expect_up(&mut ai).await;
    expect_up(&mut bi).await;
    // Neither side's bytes get through any more, and no FIN or RST arrives either.
    frozen.store(true, Ordering::SeqCst);
    let frozen_at = Instant::now();
    let (_, reason_a) = expect_down(&mut ai).await;
    let detected_a = frozen_at.elapsed();
    let (_, reason_b) = expect_down(&mut bi).await;
    let detected_b = frozen_at.elapsed();
    assert_eq!(reason_a, DownReason::TimedOut);
    assert_eq!(reason_b, DownReason::TimedOut);
    // Silence is detected after at least LIVENESS_TIMEOUT minus one heartbeat (the last frame
    // may have passed just before the freeze) and within LIVENESS_TIMEOUT plus a margin.
    for d in [detected_a, detected_b] {
        assert!(d + HEARTBEAT_INTERVAL >= LIVENESS_TIMEOUT, "{d:?}");
        assert!(d <= LIVENESS_TIMEOUT + Duration::from_millis(1500), "{d:?}");
    }
    drop((a, b));
}

#[tokio::test]
async fn an_intent_reconnects_after_the_peer_restarts() {
    let (b1, mut b1i) = node(2, 1).await;
    let addr = endpoint(&b1);
    let (a, mut ai) = node(1, 1).await;
    a.add_intent(PeerIntent::new(addr.clone()).expect_rid(rid(2)))
        .unwrap();
    assert_eq!(expect_up(&mut ai).await.lifecycle_generation, generation(1));
    expect_up(&mut b1i).await;
    b1.shutdown().await;
    assert_eq!(expect_down(&mut ai).await.1, DownReason::Closed);
    drop(b1);
    // The peer host restarts on the same endpoint with the next lifecycle generation.
    let (_b2, mut b2i) = start(config(2, 2).listen(addr)).await;
    let up = expect_up(&mut ai).await;
    assert_eq!(up.rid, rid(2));
    assert_eq!(up.lifecycle_generation, generation(2));
    expect_up(&mut b2i).await;
    assert_eq!(a.intents()[0].learned_rid, Some(rid(2)));
}

#[tokio::test]
async fn an_intent_reconnects_after_a_lost_connection() {
    let (b, mut bi) = node(2, 1).await;
    let (a, mut ai) = node(1, 1).await;
    a.add_intent(PeerIntent::new(endpoint(&b))).unwrap();
    let first = expect_up(&mut ai).await;
    expect_up(&mut bi).await;
    // B drops its end: A sees Closed and dials again; same generation is admitted again.
    b.peer(&rid(1)).unwrap().close();
    assert_eq!(expect_down(&mut ai).await.1, DownReason::Closed);
    let second = expect_up(&mut ai).await;
    assert_ne!(first.connection, second.connection);
    assert_eq!(a.peers().len(), 1);
}

#[tokio::test]
async fn removing_an_intent_closes_and_stops_reconnecting() {
    let (b, mut bi) = node(2, 1).await;
    let (a, mut ai) = node(1, 1).await;
    a.add_intent(PeerIntent::new(endpoint(&b))).unwrap();
    expect_up(&mut ai).await;
    expect_up(&mut bi).await;
    assert!(a.remove_intent(&endpoint(&b)));
    assert!(!a.remove_intent(&endpoint(&b)));
    assert_eq!(expect_down(&mut ai).await.1, DownReason::Local);
    assert_eq!(expect_down(&mut bi).await.1, DownReason::Closed);
    no_event_for(&mut ai, Duration::from_millis(500)).await;
    assert!(a.intents().is_empty());
}

#[tokio::test]
async fn an_intent_keeps_retrying_until_the_peer_appears() {
    // Reserve a port, free it, and point an intent at it before anyone listens.
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap().to_string();
    drop(probe);
    let (a, mut ai) = node(1, 1).await;
    a.add_intent(PeerIntent::new(addr.clone())).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(a.intents()[0].last_error.is_some());
    let (_b, _bi) = start(config(2, 1).listen(addr)).await;
    expect_up(&mut ai).await;
}

#[tokio::test]
async fn shutdown_ends_every_task_and_the_receivers() {
    let ((a, mut ai), (b, _bi)) = connected_pair(config(1, 1), config(2, 1)).await;
    a.add_intent(PeerIntent::new("127.0.0.1:1")).unwrap();
    a.shutdown().await;
    assert!(a.shared.tracker.is_empty());
    assert!(a.shared.tracker.is_closed());
    assert_eq!(expect_down(&mut ai).await.1, DownReason::Local);
    assert!(ai.events.recv().await.is_none());
    assert!(ai.app.recv().await.is_none());
    assert!(ai.replies.recv().await.is_none());
    assert_eq!(
        a.connect(&PeerIntent::new(endpoint(&b)))
            .await
            .unwrap_err()
            .kind(),
        crate::TransportErrorKind::ShuttingDown
    );
    b.shutdown().await;
    assert!(b.shared.tracker.is_empty());
}

#[tokio::test]
async fn a_peer_that_closes_at_once_is_redialed_with_a_growing_delay() {
    let (b, mut bi) = node(2, 1).await;
    let (a, _ai) = node(1, 1).await;
    a.add_intent(PeerIntent::new(endpoint(&b))).unwrap();
    // B closes every connection as soon as it is Ready, for 2 s.
    let mut ups = 0;
    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(2);
    while let Ok(Some(ev)) = tokio::time::timeout_at(until, bi.events.recv()).await {
        if let crate::PeerEvent::Up(info) = ev {
            ups += 1;
            if let Some(p) = b.peer(&info.rid) {
                p.close();
            }
        }
    }
    // Without backoff after a short-lived connection this was a tight loop (hundreds of
    // handshakes); with it: 50 ms, 100 ms, 200 ms, 400 ms, 800 ms, ... (jittered).
    assert!(ups >= 2, "A kept redialing ({ups} connections)");
    assert!(
        ups <= 12,
        "{ups} connections in 2 s: the backoff did not grow"
    );
}
