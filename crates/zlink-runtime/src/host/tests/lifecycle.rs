//! Host lifecycle: the spec 28 §9 shutdown order and what it leaves in the Store, waiting for
//! accepted work, forced teardown, hosted services, and configuration errors that touch
//! neither sockets nor the Store.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use zlink_codec::records::HostState;
use zlink_store_conformance::FaultyLocationStore;
use zlink_store_spi::{DynLocationStore, StoreKey, StoreVersion};

type Snapshot = BTreeMap<StoreKey, (Bytes, StoreVersion)>;

use super::support::*;
use crate::host::config::{
    HostedFuture, HostedService, MeshNodeBuilder, StartupError, StartupErrorKind, Topology, ZLink,
};
use crate::host::{ShutdownOutcome, ShutdownReason};
use crate::messaging::{ErrorKind, Message, NodeHandler, Request};
use zlink_testkit::Harness;

/// A request whose handler sleeps `ms` milliseconds before replying "done".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Slow {
    ms: u64,
}
impl Message for Slow {
    const PACKET: &'static str = "Slow";
}
impl Request for Slow {
    type Reply = String;
}

fn slow_node(b: MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler> {
    echo_node(b).on_request::<Slow, _, _>(|s, _ctx| async move {
        tokio::time::sleep(Duration::from_millis(s.ms)).await;
        Ok("done".to_owned())
    })
}

/// A free loopback port (bound once and released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

fn port_is_bindable(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

on_every_store!(
    shutdown_removes_descriptor_and_lease_and_peers_stop_selecting_the_draining_node,
    hosted_service_start_failure_stops_started_services_and_leaves_no_rows,
);

async fn shutdown_removes_descriptor_and_lease_and_peers_stop_selecting_the_draining_node(
    h: &Harness,
) {
    let lobby = channel("lobby");
    let before = h.snapshot().await;
    let (ha, a) = start(h, |b| {
        slow_node(b)
            .channel_server(channel("lobby"))
            .on_channel_request::<Echo, _, _>(channel("lobby"), |e, _ctx| async move {
                Ok(format!("lobby:{}", e.text))
            })
    })
    .await;
    let (hb, b) = start(h, |b| echo_node(b).channel_client(channel("lobby"))).await;
    wait_peers(&b, 1).await;
    let during = h.snapshot().await;
    assert!(
        during.len() > before.len(),
        "lease and descriptor rows are written"
    );
    let reply = hb
        .channel_request(&lobby, &Echo { text: "x".into() })
        .await
        .expect("A serves the channel");
    assert_eq!(reply, "lobby:x");

    // Accepted work keeps A draining for a while.
    let slow = tokio::spawn({
        let (b, a_rid) = (b.clone(), a.routing_id().clone());
        async move { b.request(&a_rid, &Slow { ms: 1500 }).await }
    });
    wait_until("A runs the slow handler", || a.status().mailbox_jobs == 1).await;
    let shutdown = tokio::spawn({
        let ha = ha.clone();
        async move { ha.shutdown().await }
    });
    wait_until("A drains", || ha.state() == HostState::Draining).await;

    // A new call on A after shutdown began is ShuttingDown.
    let err = a.request(b.routing_id(), &Who).await.expect_err("draining");
    assert_eq!(err.kind(), ErrorKind::ShuttingDown);
    // B learns weight 0 and stops selecting A for channel calls.
    wait_until("B sees A's weights at 0", || {
        b.status().peers.iter().any(|p| {
            p.weights
                .as_ref()
                .is_some_and(|w| w.get(&lobby) == Some(&0))
        })
    })
    .await;
    let err = hb
        .channel_request(&lobby, &Echo { text: "y".into() })
        .await
        .expect_err("no selectable member");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err:?}");

    // The accepted request still completes, then shutdown ends cleanly.
    let done = tokio::time::timeout(WAIT, slow)
        .await
        .expect("bounded")
        .expect("task");
    assert_eq!(done.expect("accepted work finishes"), "done");
    let report = tokio::time::timeout(WAIT, shutdown)
        .await
        .expect("bounded")
        .expect("task");
    assert_eq!(report.outcome, ShutdownOutcome::Stopped, "{report:?}");
    assert_eq!(report.reason, ShutdownReason::None);
    assert_eq!(report.abandoned, 0);
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert!(report.sweep.is_some(), "the self-sweep ran");
    assert_eq!(ha.state(), HostState::Stopped);
    let err = a.request(b.routing_id(), &Who).await.expect_err("stopped");
    assert_eq!(err.kind(), ErrorKind::ShuttingDown);

    // Only B's rows remain: A's lease and descriptor rows are gone.
    let rb = hb.shutdown().await;
    assert_eq!(rb.outcome, ShutdownOutcome::Stopped, "{rb:?}");
    assert_only_counters_remain(&before, &h.snapshot().await);
}

/// `after` holds exactly the keys of `before` plus the two runtime-private change-number rows
/// that must survive a host (the MeshName's change number and the owner-generation counter):
/// no lease, descriptor or authority row is left.
fn assert_only_counters_remain(before: &Snapshot, after: &Snapshot) {
    let mut expected: BTreeSet<String> = before.keys().map(|k| k.as_str().to_owned()).collect();
    expected.insert(format!("mesh-change\0{}", mesh().as_str()));
    expected.insert("zlink:v11:owner-counter".to_owned());
    let remaining: BTreeSet<String> = after.keys().map(|k| k.as_str().to_owned()).collect();
    assert_eq!(remaining, expected, "only change-number rows remain");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_for_accepted_work_to_finish() {
    let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&finished);
    let (hs, s) = start_manual(move |b| {
        b.on_request::<Slow, _, _>(move |r, _ctx| {
            let flag = Arc::clone(&flag);
            async move {
                tokio::time::sleep(Duration::from_millis(r.ms)).await;
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
                Ok("done".to_owned())
            }
        })
    })
    .await;
    let ep = s.endpoint().to_owned();
    let (hc, c) = start_manual(move |b| echo_node(b).manual_peer(ep)).await;
    wait_until("C connects", || c.status().peers.len() == 1).await;
    let call = tokio::spawn({
        let (c, rid) = (c.clone(), s.routing_id().clone());
        async move { c.request(&rid, &Slow { ms: 300 }).await }
    });
    wait_until("the handler runs", || s.status().mailbox_jobs == 1).await;
    let report = hs.shutdown().await;
    assert!(
        finished.load(std::sync::atomic::Ordering::SeqCst),
        "shutdown returned only after the accepted handler finished"
    );
    assert_eq!(report.outcome, ShutdownOutcome::Stopped, "{report:?}");
    assert_eq!(report.reason, ShutdownReason::None);
    assert_eq!(report.abandoned, 0);
    // The reply was written before the connection closed, and the caller completes it before
    // handling the connection's end (one loop, replies first).
    let reply = tokio::time::timeout(WAIT, call)
        .await
        .expect("bounded")
        .expect("task")
        .expect("the accepted request gets its reply");
    assert_eq!(reply, "done");
    hc.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_past_its_deadline_is_force_stopped_and_concurrent_calls_share_the_report() {
    let (hs, s) = start_manual(slow_node).await;
    let ep = s.endpoint().to_owned();
    let (hc, c) = start_manual(move |b| echo_node(b).manual_peer(ep)).await;
    wait_until("C connects", || c.status().peers.len() == 1).await;
    let call = tokio::spawn({
        let (c, rid) = (c.clone(), s.routing_id().clone());
        async move { c.request(&rid, &Slow { ms: 20_000 }).await }
    });
    wait_until("the handler runs", || s.status().mailbox_jobs == 1).await;

    let (r1, r2) = tokio::join!(
        hs.shutdown_within(Duration::from_millis(200)),
        hs.shutdown_within(Duration::from_secs(30)),
    );
    let r3 = hs.shutdown().await;
    assert_eq!(r1.outcome, ShutdownOutcome::ForceStopped, "{r1:?}");
    assert_eq!(r1.reason, ShutdownReason::DeadlineExceeded);
    assert!(r1.abandoned >= 1, "{r1:?}");
    for r in [&r2, &r3] {
        assert_eq!(r.outcome, r1.outcome);
        assert_eq!(r.reason, r1.reason);
        assert_eq!(r.abandoned, r1.abandoned);
        let lines = |r: &crate::status::ShutdownReport| {
            r.failures.iter().map(|f| f.to_string()).collect::<Vec<_>>()
        };
        assert_eq!(lines(r), lines(&r1));
    }
    assert_eq!(hs.state(), HostState::Stopped);
    // The caller's request ends (it is never answered "done").
    let result = tokio::time::timeout(WAIT, call)
        .await
        .expect("bounded")
        .expect("task");
    assert!(result.is_err(), "{result:?}");
    hc.shutdown().await;
}

/// A hosted service recording its stages into a shared log.
#[derive(Debug)]
struct Recorder {
    name: &'static str,
    fail_start: bool,
    log: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    fn new(name: &'static str, fail_start: bool, log: &Arc<Mutex<Vec<String>>>) -> Arc<Self> {
        Arc::new(Self {
            name,
            fail_start,
            log: Arc::clone(log),
        })
    }
}

impl HostedService for Recorder {
    fn name(&self) -> &str {
        self.name
    }
    fn start(&self) -> HostedFuture<'_> {
        Box::pin(async move {
            self.log.lock().push(format!("start {}", self.name));
            if self.fail_start {
                return Err("refused".into());
            }
            Ok(())
        })
    }
    fn stop_request(&self) -> HostedFuture<'_> {
        Box::pin(async move {
            self.log.lock().push(format!("stop_request {}", self.name));
            Ok(())
        })
    }
    fn stop(&self) -> HostedFuture<'_> {
        Box::pin(async move {
            self.log.lock().push(format!("stop {}", self.name));
            Ok(())
        })
    }
}

fn log_of(log: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    log.lock().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosted_services_start_in_order_before_serving_and_stop_in_reverse() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let host = ZLink::builder()
        .hosted_service(Recorder::new("a", false, &log))
        .hosted_service(Recorder::new("b", false, &log))
        .hosted_service(Recorder::new("c", false, &log))
        .route_mesh(mesh(), |b| echo_node(b).topology(Topology::Manual))
        .build()
        .start()
        .await
        .expect("starts");
    assert_eq!(host.state(), HostState::Serving);
    assert_eq!(log_of(&log), ["start a", "start b", "start c"]);
    let report = host.shutdown().await;
    assert_eq!(report.outcome, ShutdownOutcome::Stopped, "{report:?}");
    assert_eq!(
        log_of(&log),
        [
            "start a",
            "start b",
            "start c",
            "stop_request c",
            "stop_request b",
            "stop_request a",
            "stop c",
            "stop b",
            "stop a",
        ]
    );
}

async fn hosted_service_start_failure_stops_started_services_and_leaves_no_rows(h: &Harness) {
    let before = h.snapshot().await;
    let log = Arc::new(Mutex::new(Vec::new()));
    let port = free_port();
    let err = ZLink::builder()
        .location_store(h.store.clone())
        .location_options(fast_options())
        .hosted_service(Recorder::new("a", false, &log))
        .hosted_service(Recorder::new("b", false, &log))
        .hosted_service(Recorder::new("c", true, &log))
        .hosted_service(Recorder::new("d", false, &log))
        .route_mesh(mesh(), |b| echo_node(b).port(port))
        .build()
        .start()
        .await
        .expect_err("c fails to start");
    assert_eq!(err.kind(), StartupErrorKind::HostedService, "{err}");
    assert!(!err.is_configuration(), "{err}");
    assert!(
        matches!(&err, StartupError::Hosted(e) if e.failure.service == "c"),
        "{err:?}"
    );
    assert_eq!(
        log_of(&log),
        [
            "start a",
            "start b",
            "start c",
            "stop_request b",
            "stop_request a",
            "stop b",
            "stop a",
        ]
    );
    assert_only_counters_remain(&before, &h.snapshot().await);
    assert!(port_is_bindable(port), "the listener was closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_errors_fail_before_any_bind_or_store_request() {
    let h = Harness::memory();
    let counting = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let store: Arc<dyn DynLocationStore> = counting.clone();
    let port = free_port();
    let root = || {
        ZLink::builder()
            .location_store(Arc::clone(&store))
            .location_options(fast_options())
    };
    let cases: Vec<(&str, ZLink<NodeHandler>, StartupErrorKind)> = vec![
        (
            "duplicate MeshName",
            root()
                .route_mesh(mesh(), |b| b.port(port))
                .route_mesh(mesh(), |b| b)
                .build(),
            StartupErrorKind::Duplicate,
        ),
        (
            "bad routing-id prefix",
            root()
                .route_mesh(mesh(), |b| b.port(port).routing_id_prefix("no spaces"))
                .build(),
            StartupErrorKind::InvalidFormat,
        ),
        (
            "fixed RID with automatic topology",
            root()
                .route_mesh(mesh(), |b| b.port(port).fixed_routing_id(b"fixed".to_vec()))
                .build(),
            StartupErrorKind::InvalidCombination,
        ),
    ];
    for (what, zlink, kind) in cases {
        let err = zlink.start().await.expect_err(what);
        assert!(err.is_configuration(), "{what}: {err}");
        assert_eq!(err.kind(), kind, "{what}: {err}");
        assert_eq!(
            (counting.reads(), counting.writes(), counting.scans()),
            (0, 0, 0),
            "{what}: no Store request"
        );
        assert!(port_is_bindable(port), "{what}: nothing bound the port");
    }
    assert!(h.snapshot().await.is_empty());
}
