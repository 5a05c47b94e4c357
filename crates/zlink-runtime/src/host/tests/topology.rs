//! Topology: manual peers (with and without a Location Store), the peer-connection rule of
//! spec 06 §4, peers leaving discovery, `storeFailureGrace`, status snapshots and lifecycle
//! generations of a fixed routing id.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use zlink_codec::RoutingId;
use zlink_codec::records::{HostState, ObjectRole};
use zlink_store_conformance::{Fault, FaultyLocationStore, LocationOp};
use zlink_store_spi::DynLocationStore;

use super::support::short_lease;
use super::support::*;
use crate::host::ShutdownOutcome;
use crate::host::config::Topology;
use crate::mesh::node::MeshNode;
use crate::messaging::ErrorKind;
use zlink_testkit::Harness;

fn rid(bytes: &[u8]) -> RoutingId {
    RoutingId::new(bytes.to_vec()).expect("rid")
}

/// Asks `target` through `from` who it is.
async fn who(from: &MeshNode, target: &RoutingId) -> Result<String, ErrorKind> {
    from.request(target, &Who).await.map_err(|e| e.kind())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_topology_without_a_store_connects_by_endpoint_and_by_expected_rid() {
    let (hf, f) = start_manual(|b| echo_node(b).fixed_routing_id(b"fixed-f".to_vec())).await;
    let (hw, w) = start_manual(echo_node).await;
    assert_eq!(f.routing_id(), &rid(b"fixed-f"));
    assert_eq!(f.status().topology, Topology::Manual);
    assert_eq!(f.status().object_role, ObjectRole::None);

    // Endpoint-only intent to F, endpoint + expected RID intent to W.
    let (f_ep, w_ep) = (f.endpoint().to_owned(), w.endpoint().to_owned());
    let w_rid = w.routing_id().as_bytes().to_vec();
    let (ha, a) = start_manual(move |b| {
        echo_node(b)
            .manual_peer(f_ep)
            .manual_peer_expecting(w_ep, w_rid)
    })
    .await;
    wait_until("both manual peers ready", || {
        a.manual_peers().iter().all(|m| m.ready)
    })
    .await;
    let manual = a.manual_peers();
    assert_eq!(manual.len(), 2);
    assert_eq!(manual[0].expected_rid, None);
    assert_eq!(manual[0].learned_rid.as_ref(), Some(f.routing_id()));
    assert_eq!(manual[1].expected_rid.as_ref(), Some(w.routing_id()));
    assert_eq!(manual[1].learned_rid.as_ref(), Some(w.routing_id()));

    assert_eq!(
        who(&a, f.routing_id()).await,
        Ok(f.routing_id().to_string())
    );
    assert_eq!(
        who(&a, w.routing_id()).await,
        Ok(w.routing_id().to_string())
    );
    // Replies flow both ways over the one connection.
    wait_until("F sees A", || f.status().peers.len() == 1).await;
    assert_eq!(
        who(&f, a.routing_id()).await,
        Ok(a.routing_id().to_string())
    );

    for h in [ha, hw, hf] {
        assert_eq!(h.shutdown().await.outcome, ShutdownOutcome::Stopped);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_peer_with_a_wrong_expected_rid_never_becomes_ready() {
    let (hf, f) = start_manual(|b| echo_node(b).fixed_routing_id(b"fixed-f".to_vec())).await;
    let f_ep = f.endpoint().to_owned();
    let (hc, c) =
        start_manual(move |b| echo_node(b).manual_peer_expecting(f_ep, b"someone-else".to_vec()))
            .await;
    wait_until("the mismatching handshake is recorded", || {
        c.manual_peers()[0].last_error.is_some()
    })
    .await;
    // Several redial rounds later it is still not admitted.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let s = c.status();
    assert!(s.peers.is_empty(), "{:?}", s.peers);
    let m = &s.manual_peers[0];
    assert!(!m.ready);
    assert!(m.last_error.is_some());
    assert_eq!(m.expected_rid, Some(rid(b"someone-else")));

    // The expected RID is known but has no connection; F's RID is not a peer at all: the
    // wrong node answers neither.
    assert_eq!(
        who(&c, &rid(b"someone-else")).await,
        Err(ErrorKind::Unavailable)
    );
    assert_eq!(who(&c, f.routing_id()).await, Err(ErrorKind::NotFound));

    hc.shutdown().await;
    hf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_peers_are_added_listed_and_released_at_runtime() {
    let (hb, b) = start_manual(echo_node).await;
    let (ha, a) = start_manual(echo_node).await;
    assert!(a.manual_peers().is_empty());

    a.add_manual_peer(b.endpoint(), None).expect("added");
    wait_until("the runtime peer is ready", || {
        a.manual_peers().first().is_some_and(|m| m.ready)
    })
    .await;
    let listed = a.manual_peers();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].endpoint.to_string(), b.endpoint());
    assert_eq!(listed[0].learned_rid.as_ref(), Some(b.routing_id()));
    assert_eq!(
        who(&a, b.routing_id()).await,
        Ok(b.routing_id().to_string())
    );

    // The same endpoint twice is refused, with or without an expected RID.
    let twice = a
        .add_manual_peer(b.endpoint(), None)
        .expect_err("duplicate");
    assert_eq!(twice.kind(), ErrorKind::AlreadyExists);
    let twice = a
        .add_manual_peer(b.endpoint(), Some(b.routing_id().clone()))
        .expect_err("duplicate");
    assert_eq!(twice.kind(), ErrorKind::AlreadyExists);
    assert_eq!(a.manual_peers().len(), 1);

    // Invalid endpoints are refused and leave no intent behind.
    for bad in ["127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", ":5000", ""] {
        let err = a.add_manual_peer(bad, None).expect_err(bad);
        assert_eq!(err.kind(), ErrorKind::InvalidOperation, "{bad}");
    }
    assert_eq!(a.manual_peers().len(), 1);

    // Release closes the connection and removes the intent.
    assert!(a.release_manual_peer(b.endpoint()));
    assert!(a.manual_peers().is_empty());
    wait_until("the released peer's connection closed", || {
        a.status().peers.is_empty() && b.status().peers.is_empty()
    })
    .await;
    assert_eq!(who(&a, b.routing_id()).await, Err(ErrorKind::NotFound));
    assert!(!a.release_manual_peer(b.endpoint()), "released twice");

    // It can be added again afterwards.
    a.add_manual_peer(b.endpoint(), Some(b.routing_id().clone()))
        .expect("re-added");
    wait_until("the re-added peer is ready", || {
        a.manual_peers().first().is_some_and(|m| m.ready)
    })
    .await;
    ha.shutdown().await;
    hb.shutdown().await;
}

on_every_store!(
    object_clients_without_server_membership_never_connect,
    object_clients_connect_when_one_has_a_weight_zero_server_membership,
    peer_whose_lease_expired_is_dropped,
    peer_whose_lease_expired_is_dropped_even_when_it_dials,
    store_failure_grace_keeps_current_peers,
    status_snapshot_reports_the_node_and_its_peers,
);

/// The command-plane ping (Object Clients carry no node-direct handlers).
async fn ping(from: &MeshNode, target: &RoutingId) -> Result<(), ErrorKind> {
    from.ping(target, WAIT).await.map_err(|e| e.kind())
}

/// Waits until `from` knows `target` from discovery: a ping is `Unavailable` (known, not
/// Ready) rather than `NotFound`.
async fn wait_known_not_ready(from: &MeshNode, target: &RoutingId) {
    for _ in 0..100 {
        match ping(from, target).await {
            Err(ErrorKind::Unavailable) => return,
            Err(ErrorKind::NotFound) => tokio::time::sleep(Duration::from_millis(50)).await,
            other => panic!("unexpected answer {other:?}"),
        }
    }
    panic!("{target} never appeared in discovery");
}

async fn object_clients_without_server_membership_never_connect(h: &Harness) {
    let (ha, a) = start(h, |b| b.object_role(ObjectRole::Client)).await;
    let (hb, b) = start(h, |b| b.object_role(ObjectRole::Client)).await;
    // Both see each other in discovery, and still no connection is made.
    wait_known_not_ready(&a, b.routing_id()).await;
    wait_known_not_ready(&b, a.routing_id()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(a.status().peers.is_empty(), "{:?}", a.status().peers);
    assert!(b.status().peers.is_empty(), "{:?}", b.status().peers);
    assert_eq!(ping(&a, b.routing_id()).await, Err(ErrorKind::Unavailable));
    ha.shutdown().await;
    hb.shutdown().await;
}

async fn object_clients_connect_when_one_has_a_weight_zero_server_membership(h: &Harness) {
    let (ha, a) = start(h, |b| {
        b.object_role(ObjectRole::Client)
            .channel_server_weighted(channel("lobby"), 0)
    })
    .await;
    let (hb, b) = start(h, |b| b.object_role(ObjectRole::Client)).await;
    wait_peers(&a, 1).await;
    wait_peers(&b, 1).await;
    assert_eq!(ping(&b, a.routing_id()).await, Ok(()));
    assert_eq!(ping(&a, b.routing_id()).await, Ok(()));
    let seen = &b.status().peers[0];
    assert_eq!(&seen.routing_id, a.routing_id());
    assert_eq!(
        seen.weights,
        Some(BTreeMap::from([(channel("lobby"), 0)])),
        "weight 0 is announced, and the connection exists anyway"
    );
    ha.shutdown().await;
    hb.shutdown().await;
}

async fn peer_whose_lease_expired_is_dropped(h: &Harness) {
    // A's RID sorts first ("a-…" < "b-…"), so A is the dialing side of the connection.
    lease_expired_peer_is_dropped(h, "a", "b").await;
}

async fn peer_whose_lease_expired_is_dropped_even_when_it_dials(h: &Harness) {
    // B's RID sorts first, so B dials, and redials after A closes it: A must refuse to keep
    // a peer its list no longer names.
    lease_expired_peer_is_dropped(h, "b", "a").await;
}

async fn lease_expired_peer_is_dropped(
    h: &Harness,
    prefix_a: &'static str,
    prefix_b: &'static str,
) {
    let options = short_lease().polling_interval(Duration::from_millis(100));
    let start_with = |store: Arc<dyn DynLocationStore>, prefix: &'static str| {
        let options = options.clone();
        async move {
            let host = crate::host::config::ZLink::builder()
                .location_store(store)
                .location_options(options)
                .route_mesh(mesh(), |b| echo_node(b).routing_id_prefix(prefix))
                .build()
                .start()
                .await
                .expect("the host starts");
            let node = host.node(&mesh()).expect("node");
            (host, node)
        }
    };
    let (ha, a) = start_with(h.store.clone(), prefix_a).await;
    let faulty = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let (hb, b) = start_with(faulty.clone(), prefix_b).await;
    wait_peers(&a, 1).await;
    assert_eq!(
        who(&a, b.routing_id()).await,
        Ok(b.routing_id().to_string())
    );

    // B's lease renewals (writes) fail from now on; B's lease runs out while A renews.
    faulty.set_fault([LocationOp::Write], Fault::UNAVAILABLE);
    let mut dropped = false;
    for _ in 0..60 {
        h.advance_store_time(Duration::from_millis(100)).await;
        tokio::time::sleep(Duration::from_millis(150)).await;
        if a.status().peers.is_empty() {
            dropped = true;
            break;
        }
    }
    assert!(dropped, "A still has {:?}", a.status().peers);
    // It stays dropped: a redial is closed again as soon as A re-reads its list.
    let mut listed_again = 0;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if !a.status().peers.is_empty() {
            listed_again += 1;
        }
    }
    assert!(
        listed_again <= 2,
        "the expired peer was back in {listed_again} of 10 samples"
    );
    assert_eq!(ha.state(), HostState::Serving, "A kept its own lease");
    let after = who(&a, b.routing_id()).await;
    assert!(
        matches!(after, Err(ErrorKind::NotFound | ErrorKind::Unavailable)),
        "the dropped peer is no target: {after:?}"
    );
    faulty.heal();
    ha.shutdown().await;
    hb.shutdown().await;
}

async fn store_failure_grace_keeps_current_peers(h: &Harness) {
    let faulty = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let store: Arc<dyn DynLocationStore> = faulty.clone();
    let (ha, a) = start_on(&store, echo_node).await;
    let (hb, b) = start(h, echo_node).await;
    wait_peers(&a, 1).await;

    // A's discovery reads fail for many polling intervals (well inside the 30 s grace).
    let scans = faulty.scans() + faulty.reads();
    faulty.set_fault(LocationOp::READS, Fault::UNAVAILABLE);
    for _ in 0..50 {
        if faulty.scans() + faulty.reads() >= scans + 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        faulty.scans() + faulty.reads() >= scans + 5,
        "discovery kept reading"
    );
    let peers = a.status().peers;
    assert_eq!(peers.len(), 1);
    assert_eq!(&peers[0].routing_id, b.routing_id());
    assert_eq!(
        who(&a, b.routing_id()).await,
        Ok(b.routing_id().to_string())
    );
    assert_eq!(
        who(&b, a.routing_id()).await,
        Ok(a.routing_id().to_string())
    );

    faulty.heal();
    assert_eq!(ha.shutdown().await.outcome, ShutdownOutcome::Stopped);
    hb.shutdown().await;
}

async fn status_snapshot_reports_the_node_and_its_peers(h: &Harness) {
    let (ha, a) = start(h, |b| {
        echo_node(b)
            .routing_id_prefix("stat")
            .channel_server_weighted(channel("lobby"), 250)
            .channel_server_weighted(channel("chat"), 0)
            .channel_client(channel("shop"))
            .placement_weight(300)
            .object_role(ObjectRole::Server)
    })
    .await;
    let (hb, b) = start(h, echo_node).await;
    wait_peers(&a, 1).await;
    wait_peers(&b, 1).await;

    let host = ha.status();
    assert_eq!(host.state, HostState::Serving);
    assert_eq!(host.nodes.len(), 1);
    let s = &host.nodes[0];
    assert_eq!(s.mesh, mesh());
    assert_eq!(&s.routing_id, a.routing_id());
    assert!(
        s.routing_id.as_bytes().starts_with(b"stat-"),
        "{:?}",
        s.routing_id
    );
    assert_eq!(s.lifecycle_generation, a.lifecycle_generation());
    assert_eq!(s.topology, Topology::Automatic);
    assert_eq!(s.object_role, ObjectRole::Server);
    assert_eq!(s.placement_weight, 300);
    let servers = BTreeMap::from([(channel("lobby"), 250), (channel("chat"), 0)]);
    assert_eq!(s.channel_servers, servers);
    assert_eq!(s.channel_clients, BTreeSet::from([channel("shop")]));
    assert!(s.manual_peers.is_empty());
    assert_eq!(s.pending_requests, 0);
    // The endpoint carries the port actually bound.
    let port: u16 = s
        .endpoint
        .strip_prefix("127.0.0.1:")
        .and_then(|p| p.parse().ok())
        .expect("127.0.0.1:<port>");
    assert_ne!(port, 0);
    assert_eq!(s.endpoint, a.endpoint());
    tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("the advertised port accepts");

    // B's view of A: RID, generation, memberships and announced weights.
    let peers = b.status().peers;
    assert_eq!(peers.len(), 1);
    let p = &peers[0];
    assert_eq!(&p.routing_id, a.routing_id());
    assert_eq!(p.lifecycle_generation, a.lifecycle_generation());
    assert_eq!(p.channels, servers.keys().cloned().collect::<BTreeSet<_>>());
    assert_eq!(p.weights.as_ref(), Some(&servers));
    assert_eq!(p.remote_addr.ip().to_string(), "127.0.0.1");

    // A weight change shows in both snapshots.
    a.set_channel_weight(&channel("lobby"), 40)
        .await
        .expect("weight");
    assert_eq!(a.status().channel_servers[&channel("lobby")], 40);
    wait_until("B learns the new weight", || {
        b.status().peers[0]
            .weights
            .as_ref()
            .is_some_and(|w| w[&channel("lobby")] == 40)
    })
    .await;
    ha.shutdown().await;
    hb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_fixed_rid_presents_a_larger_generation_and_is_accepted_again() {
    let fixed = b"fixed-r".to_vec();
    let f1_rid = fixed.clone();
    let (h1, f1) = start_manual(move |b| echo_node(b).fixed_routing_id(f1_rid)).await;
    let port = f1.endpoint().rsplit(':').next().expect("port").to_owned();
    let port: u16 = port.parse().expect("port");
    let (ep, expected) = (f1.endpoint().to_owned(), fixed.clone());
    let (ha, a) = start_manual(move |b| echo_node(b).manual_peer_expecting(ep, expected)).await;
    wait_until("A connects to the first lifecycle", || {
        a.status().peers.len() == 1
    })
    .await;
    let g1 = f1.lifecycle_generation();
    assert_eq!(a.status().peers[0].lifecycle_generation, g1);
    assert_eq!(h1.shutdown().await.outcome, ShutdownOutcome::Stopped);

    let f2_rid = fixed.clone();
    let (h2, f2) = start_manual(move |b| echo_node(b).fixed_routing_id(f2_rid).port(port)).await;
    assert_eq!(f2.routing_id(), f1.routing_id());
    let g2 = f2.lifecycle_generation();
    assert!(g2 > g1, "{g2:?} > {g1:?}");
    wait_until("A accepts the second lifecycle", || {
        a.status()
            .peers
            .first()
            .is_some_and(|p| p.lifecycle_generation == g2)
    })
    .await;
    assert_eq!(
        who(&a, f2.routing_id()).await,
        Ok(f2.routing_id().to_string())
    );
    ha.shutdown().await;
    h2.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn automatic_node_admits_a_manual_peer_its_list_does_not_name() {
    let h = Harness::memory();
    let (hm, m) = start_manual(echo_node).await;
    let ep = m.endpoint().to_owned();
    let (ha, a) = start(&h, move |b| echo_node(b).manual_peer(ep)).await;
    wait_until("the manual peer is admitted", || {
        a.status().peers.len() == 1
    })
    .await;
    assert_eq!(
        who(&a, m.routing_id()).await,
        Ok(m.routing_id().to_string())
    );
    // The discovery loop keeps it: the list never names it, the manual intent does.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(a.status().peers.len(), 1);
    ha.shutdown().await;
    hm.shutdown().await;
}
