//! RouteMesh Channel calls: weighted select-one over Server members, runtime weight changes,
//! NotFound / Unavailable, and a member host stopping with a request in flight.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use zlink_codec::{ChannelName, RoutingId};

use super::support::*;
use crate::host::{ShutdownOutcome, ZLinkHost};
use crate::mesh::node::{CallOptions, MeshNode};
use crate::messaging::{ErrorKind, Message, Request};
use zlink_testkit::Harness;

/// A channel request its server answers with its own RID.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Pick;
impl Message for Pick {
    const PACKET: &'static str = "Pick";
}
impl Request for Pick {
    type Reply = String;
}

fn lobby() -> ChannelName {
    channel("lobby")
}

/// A Server member of [`lobby`] that counts the requests its handler ran.
struct Server {
    host: ZLinkHost,
    node: MeshNode,
    hits: Arc<AtomicUsize>,
}

impl Server {
    fn rid(&self) -> String {
        self.node.routing_id().to_string()
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

async fn start_server(h: &Harness, weight: i64) -> Server {
    let hits = Arc::new(AtomicUsize::new(0));
    let me: Arc<OnceLock<String>> = Arc::new(OnceLock::new());
    let (counter, rid) = (Arc::clone(&hits), Arc::clone(&me));
    let (host, node) = start(h, move |b| {
        b.channel_server_weighted(lobby(), weight)
            .on_channel_request::<Pick, _, _>(lobby(), move |_, _ctx| {
                counter.fetch_add(1, Ordering::SeqCst);
                let rid = rid.get().cloned().unwrap_or_default();
                async move { Ok(rid) }
            })
    })
    .await;
    me.set(node.routing_id().to_string()).expect("set once");
    Server { host, node, hits }
}

async fn start_caller(h: &Harness) -> (ZLinkHost, MeshNode) {
    start(h, |b| b.channel_client(lobby())).await
}

/// The weight of `lobby` that `caller` currently sees announced by `server`.
fn seen_weight(caller: &MeshNode, server: &RoutingId) -> Option<u16> {
    caller
        .status()
        .peers
        .into_iter()
        .find(|p| &p.routing_id == server)
        .and_then(|p| p.weights)
        .and_then(|w| w.get(&lobby()).copied())
}

/// Sends `n` channel requests from `caller` and tallies the RIDs that answered.
async fn tally(caller: &ZLinkHost, n: usize) -> HashMap<String, usize> {
    let mut seen = HashMap::new();
    for _ in 0..n {
        let rid = tokio::time::timeout(WAIT, caller.channel_request(&lobby(), &Pick))
            .await
            .expect("bounded")
            .expect("a reply");
        *seen.entry(rid).or_insert(0) += 1;
    }
    seen
}

on_every_store!(
    equal_weights_split_channel_requests_evenly,
    channel_requests_follow_the_weight_ratio,
    set_channel_weight_changes_selection_at_runtime,
);

async fn equal_weights_split_channel_requests_evenly(h: &Harness) {
    let s1 = start_server(h, 100).await;
    let s2 = start_server(h, 100).await;
    let (hc, caller) = start_caller(h).await;
    wait_peers(&caller, 2).await;

    let seen = tally(&hc, 400).await;
    let (a, b) = (s1.hits(), s2.hits());
    println!("equal weights: 400 requests split {a} / {b}");
    assert_eq!(a + b, 400);
    assert!((140..=260).contains(&a), "server 1 got {a} of 400");
    assert!((140..=260).contains(&b), "server 2 got {b} of 400");
    // What the caller saw is what the servers counted.
    assert_eq!(seen.get(&s1.rid()).copied().unwrap_or(0), a);
    assert_eq!(seen.get(&s2.rid()).copied().unwrap_or(0), b);
    stop_all(&[&hc, &s1.host, &s2.host]).await;
}

async fn channel_requests_follow_the_weight_ratio(h: &Harness) {
    let heavy = start_server(h, 300).await;
    let light = start_server(h, 100).await;
    let (hc, caller) = start_caller(h).await;
    wait_peers(&caller, 2).await;

    let seen = tally(&hc, 800).await;
    let (a, b) = (heavy.hits(), light.hits());
    println!("weights 300:100: 800 requests split {a} / {b}");
    assert_eq!(a + b, 800);
    assert!(
        (520..=680).contains(&a),
        "the weight-300 member got {a} of 800"
    );
    assert_eq!(seen.get(&heavy.rid()).copied().unwrap_or(0), a);
    assert_eq!(seen.get(&light.rid()).copied().unwrap_or(0), b);
    stop_all(&[&hc, &heavy.host, &light.host]).await;
}

async fn set_channel_weight_changes_selection_at_runtime(h: &Harness) {
    let s1 = start_server(h, 100).await;
    let s2 = start_server(h, 100).await;
    let (hc, caller) = start_caller(h).await;
    wait_peers(&caller, 2).await;
    let (r1, r2) = (s1.node.routing_id().clone(), s2.node.routing_id().clone());

    s1.node
        .set_channel_weight(&lobby(), 0)
        .await
        .expect("weight 0 is accepted");
    wait_until("the caller sees server 1 at weight 0", || {
        seen_weight(&caller, &r1) == Some(0)
    })
    .await;
    let seen = tally(&hc, 60).await;
    assert_eq!(s1.hits(), 0, "{seen:?}");
    assert_eq!(s2.hits(), 60, "{seen:?}");

    // And back the other way.
    s1.node
        .set_channel_weight(&lobby(), 10_000)
        .await
        .expect("accepted");
    s2.node
        .set_channel_weight(&lobby(), 0)
        .await
        .expect("accepted");
    wait_until("the caller sees the swapped weights", || {
        seen_weight(&caller, &r1) == Some(10_000) && seen_weight(&caller, &r2) == Some(0)
    })
    .await;
    tally(&hc, 60).await;
    assert_eq!(s1.hits(), 60);
    assert_eq!(s2.hits(), 60);
    stop_all(&[&hc, &s1.host, &s2.host]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weight_zero_member_is_never_selected() {
    let h = Harness::memory();
    let idle = start_server(&h, 0).await;
    let busy = start_server(&h, 1).await;
    let (hc, caller) = start_caller(&h).await;
    wait_peers(&caller, 2).await;
    assert_eq!(seen_weight(&caller, idle.node.routing_id()), Some(0));

    tally(&hc, 100).await;
    assert_eq!(idle.hits(), 0);
    assert_eq!(busy.hits(), 100);
    stop_all(&[&hc, &idle.host, &busy.host]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_range_weights_are_refused_and_change_nothing() {
    let h = Harness::memory();
    let s = start_server(&h, 250).await;
    let weight = || s.node.status().channel_servers.get(&lobby()).copied();
    for bad in [-1, 10_001, i64::MAX, i64::MIN] {
        let err = s
            .node
            .set_channel_weight(&lobby(), bad)
            .await
            .expect_err("out of range");
        assert_eq!(err.kind(), ErrorKind::InvalidOperation, "{bad}: {err}");
        assert_eq!(weight(), Some(250), "{bad} changed the weight");
    }
    // A ChannelName this node is no Server member of is refused too.
    let err = s
        .node
        .set_channel_weight(&channel("elsewhere"), 5)
        .await
        .expect_err("not a membership");
    assert_eq!(err.kind(), ErrorKind::InvalidOperation);
    assert!(
        !s.node
            .status()
            .channel_servers
            .contains_key(&channel("elsewhere"))
    );

    for good in [0, 10_000] {
        s.node
            .set_channel_weight(&lobby(), good)
            .await
            .expect("in range");
        assert_eq!(weight(), u16::try_from(good).ok());
    }
    stop_all(&[&s.host]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_not_in_the_route_index_is_not_found() {
    let h = Harness::memory();
    let s = start_server(&h, 100).await;
    let err = s
        .host
        .channel_request(&channel("nowhere"), &Pick)
        .await
        .expect_err("no such channel");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    let err = s
        .host
        .channel_send(&channel("nowhere"), &Pick)
        .await
        .expect_err("no such channel");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert_eq!(s.hits(), 0);
    stop_all(&[&s.host]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_without_an_eligible_member_is_unavailable() {
    let h = Harness::memory();
    // A Channel Client alone: the channel is in the route index, but no member exists.
    let (hc, caller) = start_caller(&h).await;
    let err = hc
        .channel_request(&lobby(), &Pick)
        .await
        .expect_err("no member");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");

    // A Ready member at weight 0 is still no eligible member.
    let idle = start_server(&h, 0).await;
    wait_peers(&caller, 1).await;
    let err = hc
        .channel_request(&lobby(), &Pick)
        .await
        .expect_err("weight 0 only");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    let err = hc
        .channel_send(&lobby(), &Pick)
        .await
        .expect_err("weight 0 only");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert_eq!(idle.hits(), 0);
    stop_all(&[&hc, &idle.host]).await;
}

/// Two Server members whose handlers record who ran and then block at `gate`.
async fn start_blocking_server(
    h: &Harness,
    ran: Arc<Mutex<Vec<String>>>,
    gate: Gate,
) -> (ZLinkHost, MeshNode) {
    let me: Arc<OnceLock<String>> = Arc::new(OnceLock::new());
    let rid = Arc::clone(&me);
    let (host, node) = start(h, move |b| {
        b.channel_server(lobby())
            .on_channel_request::<Pick, _, _>(lobby(), move |_, _ctx| {
                let rid = rid.get().cloned().unwrap_or_default();
                ran.lock().push(rid.clone());
                let gate = gate.clone();
                async move {
                    gate.pass().await;
                    Ok(rid)
                }
            })
    })
    .await;
    me.set(node.routing_id().to_string()).expect("set once");
    (host, node)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_in_flight_on_a_stopped_member_ends_once_and_is_not_replayed() {
    let h = Harness::memory();
    let ran = Arc::new(Mutex::new(Vec::new()));
    let gate = Gate::new();
    let (h1, n1) = start_blocking_server(&h, Arc::clone(&ran), gate.clone()).await;
    let (h2, n2) = start_blocking_server(&h, Arc::clone(&ran), gate.clone()).await;
    let (hc, caller) = start_caller(&h).await;
    wait_peers(&caller, 2).await;

    let call = {
        let hc = hc.clone();
        let options = CallOptions::default().reply_timeout(Duration::from_secs(5));
        tokio::spawn(async move { hc.channel_request_with(&lobby(), &Pick, &options).await })
    };
    wait_until("a member's handler runs", || ran.lock().len() == 1).await;
    let chosen = ran.lock()[0].clone();
    let (stopping, survivor) = if chosen == n1.routing_id().to_string() {
        (&h1, &n2)
    } else {
        (&h2, &n1)
    };
    let report = tokio::time::timeout(WAIT, stopping.shutdown_within(Duration::from_millis(200)))
        .await
        .expect("shutdown ends");
    assert_eq!(report.outcome, ShutdownOutcome::ForceStopped, "{report:?}");

    let result = tokio::time::timeout(WAIT, call)
        .await
        .expect("the request ends")
        .expect("the task ran");
    let err = result.expect_err("the member stopped before answering");
    println!(
        "in-flight request on a stopped member ended with {:?}: {err}",
        err.kind()
    );
    assert!(
        matches!(
            err.kind(),
            ErrorKind::ShuttingDown | ErrorKind::Unavailable | ErrorKind::DeadlineExceeded
        ),
        "{err}"
    );
    // The caller waits for the stopped peer to go and the request was never handed to the
    // survivor: only the first member's handler ever ran.
    wait_until("the stopped member leaves the caller's peers", || {
        caller.status().peers.len() == 1
    })
    .await;
    assert_eq!(caller.status().pending_requests, 0);
    assert_eq!(*ran.lock(), vec![chosen.clone()]);

    // The survivor still serves new requests.
    gate.open();
    let reply = tokio::time::timeout(WAIT, hc.channel_request(&lobby(), &Pick))
        .await
        .expect("bounded")
        .expect("the survivor answers");
    assert_eq!(reply, survivor.routing_id().to_string());
    assert_eq!(ran.lock().len(), 2);
    stop_all(&[&hc, &h1, &h2]).await;
}
