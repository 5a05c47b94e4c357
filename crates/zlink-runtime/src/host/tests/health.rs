//! Health and readiness of a running host (guide-10 §4): Store health, owner-lease health,
//! `is_peer_ready`, and every connection intent with its state in `NodeStatus`.

use std::sync::Arc;
use std::time::Duration;

use zlink_codec::records::ObjectRole;
use zlink_store_conformance::{Fault, FaultyLocationStore, LocationOp, PrivateRedis};
use zlink_store_spi::{DynLocationStore, MemoryLocationStore};

use super::support::*;
use crate::host::ZLinkHost;
use crate::host::config::ZLink;
use crate::mesh::node::{ConnectionState, PeerRole};
use zlink_location::LeaseState;

/// A root with one Object Server over `store` with the short test lease (renew every 100 ms,
/// admission deadline 500 ms after the last renew).
async fn server_over(store: Arc<dyn DynLocationStore>) -> ZLinkHost {
    ZLink::builder()
        .location_store(store)
        .location_options(short_lease().polling_interval(Duration::from_millis(100)))
        .route_mesh(mesh(), |n| n.object_role(ObjectRole::Server))
        .build()
        .start()
        .await
        .expect("the host starts")
}

/// Waits (polling every 20 ms, at most 10 s) until `cond` holds for `host`.
async fn wait_for(what: &str, host: &ZLinkHost, cond: impl Fn(&ZLinkHost) -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond(host) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting: {what} (health {:?})",
            host.location_health()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn lease_state(host: &ZLinkHost) -> Option<LeaseState> {
    host.location_health().map(|h| h.owner_lease.state)
}

/// The fields move through an outage and back: healthy; the Store failing (and for how
/// long), the lease renewing, then expired past the admission deadline; healthy again.
async fn health_follows_an_outage_and_recovery(
    host: &ZLinkHost,
    outage: impl AsyncFnOnce(),
    heal: impl AsyncFnOnce(),
) {
    wait_for("a renew succeeded", host, |h| {
        h.store_healthy() && h.owner_lease_healthy()
    })
    .await;
    let health = host
        .location_health()
        .expect("a Location Store is registered");
    assert!(health.store.last_success_age.is_some());
    assert_eq!(health.store.failing_for, None);
    assert_eq!(health.owner_lease.state, LeaseState::Held);
    assert!(
        health.owner_lease.admission_deadline_in.is_some(),
        "a held lease has an admission deadline ahead"
    );
    assert_eq!(health.owner_lease.admission_deadline_passed_for, None);
    assert!(host.status().health.is_some(), "HostStatus reports it too");

    outage().await;
    wait_for("the Store reads as failing", host, |h| !h.store_healthy()).await;
    wait_for("the lease is past its admission deadline", host, |h| {
        lease_state(h) == Some(LeaseState::Expired)
    })
    .await;
    let health = host.location_health().expect("health");
    assert!(health.store.failing_for.is_some());
    assert!(health.store.consecutive_failures > 0);
    assert_eq!(health.owner_lease.admission_deadline_in, None);
    let passed = health
        .owner_lease
        .admission_deadline_passed_for
        .expect("an expired lease says how long ago its deadline passed");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let later = host.location_health().expect("health").owner_lease;
    if later.state == LeaseState::Expired {
        assert!(
            later
                .admission_deadline_passed_for
                .is_some_and(|p| p >= passed),
            "the time past the deadline only grows while it stays expired"
        );
    }
    assert!(!host.owner_lease_healthy());

    heal().await;
    wait_for("the Store answers again", host, ZLinkHost::store_healthy).await;
    wait_for(
        "the lease is held again",
        host,
        ZLinkHost::owner_lease_healthy,
    )
    .await;
    let health = host.location_health().expect("health");
    assert_eq!(health.store.failing_for, None);
    assert_eq!(health.store.consecutive_failures, 0);
    assert!(health.owner_lease.admission_deadline_in.is_some());
    assert_eq!(health.owner_lease.admission_deadline_passed_for, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_and_lease_health_follow_a_store_outage_and_its_end() {
    let memory: Arc<dyn DynLocationStore> = Arc::new(MemoryLocationStore::new());
    let faulty = Arc::new(FaultyLocationStore::new(memory));
    let host = server_over(faulty.clone()).await;
    health_follows_an_outage_and_recovery(
        &host,
        async || faulty.set_fault(LocationOp::ALL, Fault::UNAVAILABLE),
        async || faulty.heal(),
    )
    .await;
    stop_all(&[&host]).await;
}

/// Live: a private `redis-server` paused (SIGSTOP) and resumed (SIGCONT).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_and_lease_health_follow_a_paused_and_resumed_redis() {
    // Runs where the live Redis tests run (those machines have `redis-server`).
    if std::env::var_os("ZLINK_TEST_REDIS_URL").is_none() {
        return;
    }
    let redis = PrivateRedis::start().await.expect("redis-server starts");
    let options = zlink_redis_location::RedisLocationOptions::from_url(&redis.url())
        .expect("url")
        .with_operation_timeout(Duration::from_millis(200))
        .expect("timeout");
    let store: Arc<dyn DynLocationStore> = Arc::new(
        zlink_redis_location::RedisLocationStore::connect(options)
            .await
            .expect("connects"),
    );
    let host = server_over(store).await;
    health_follows_an_outage_and_recovery(
        &host,
        async || redis.pause().await.expect("paused"),
        async || redis.resume().await.expect("resumed"),
    )
    .await;
    stop_all(&[&host]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_location_store_health_reports_nothing_and_answers_healthy() {
    let (host, _node) = start_manual(|b| b).await;
    assert!(host.location_health().is_none());
    assert!(host.status().health.is_none());
    assert!(host.store_healthy());
    assert!(host.owner_lease_healthy());
    stop_all(&[&host]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_status_shows_every_intent_with_its_state_and_peer_readiness_by_role() {
    let store: Arc<dyn DynLocationStore> = Arc::new(MemoryLocationStore::new());
    let (server, server_node) = start_on(&store, |b| b.object_role(ObjectRole::Server)).await;
    let (c1, c1_node) = start_on(&store, |b| b.object_role(ObjectRole::Client)).await;
    let (c2, c2_node) = start_on(&store, |b| b.object_role(ObjectRole::Client)).await;
    wait_peers(&c1_node, 1).await;
    let server_rid = server_node.routing_id().clone();
    let c2_rid = c2_node.routing_id().clone();
    // Both Object Clients list each other, but need no connection (spec 06 §4).
    wait_until("c1 lists the server and c2", || {
        c1_node.status().connections.len() == 2
    })
    .await;
    let status = c1_node.status();
    assert_eq!(status.peers.len(), 1, "only the server is a Ready peer");
    let of = |rid: &zlink_codec::RoutingId| {
        status
            .connections
            .iter()
            .find(|c| c.routing_id.as_ref() == Some(rid))
            .cloned()
            .expect("listed")
    };
    let to_server = of(&server_rid);
    assert_eq!(to_server.state, ConnectionState::Ready);
    assert_eq!(to_server.object_role, Some(ObjectRole::Server));
    assert!(to_server.endpoint.is_some());
    let to_c2 = of(&c2_rid);
    assert_eq!(to_c2.state, ConnectionState::NotRequired);
    assert_eq!(to_c2.object_role, Some(ObjectRole::Client));
    assert!(!to_c2.manual);

    assert!(c1.is_peer_ready(&mesh(), &PeerRole::ObjectServer, None));
    assert!(c1.is_peer_ready(&mesh(), &PeerRole::Any, Some(&server_rid)));
    assert!(!c1.is_peer_ready(&mesh(), &PeerRole::ObjectClient, None));
    assert!(!c1.is_peer_ready(&mesh(), &PeerRole::Any, Some(&c2_rid)));
    assert!(!c1.is_peer_ready(&mesh(), &PeerRole::ChannelServer(channel("none")), None));
    let other = zlink_codec::MeshName::new("other").expect("mesh");
    assert!(
        !c1.is_peer_ready(&other, &PeerRole::Any, None),
        "unknown MeshName"
    );
    wait_until("the server sees c2 as a Ready Object Client", || {
        server.is_peer_ready(&mesh(), &PeerRole::ObjectClient, Some(&c2_rid))
    })
    .await;
    stop_all(&[&c2, &c1, &server]).await;
}
