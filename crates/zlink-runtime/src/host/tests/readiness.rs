//! Readiness you can await (`ZLinkHost::ready`, `MeshNode::ready`): a node is ready once a
//! discovery list read after the call began is applied and every peer it must connect to has a
//! Ready connection.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use zlink_codec::records::ObjectRole;
use zlink_store_conformance::{Fault, FaultyLocationStore, LocationOp};
use zlink_store_spi::DynLocationStore;

use super::support::*;
use crate::messaging::ErrorKind;
use crate::status::Waiting;
use zlink_testkit::Harness;

on_every_store!(
    ready_resolves_with_every_serving_node_connected,
    a_node_whose_store_does_not_answer_is_not_ready,
    a_fresh_nodes_first_request_waits_for_the_connection_discovery_is_making,
);

/// Three nodes started back to back: once each host's `ready` resolved, every node calls every
/// other at once — no polling of the status, no sleep.
async fn ready_resolves_with_every_serving_node_connected(h: &Harness) {
    let (ha, a) = start(h, echo_node).await;
    let (hb, b) = start(h, echo_node).await;
    let (hc, c) = start(h, echo_node).await;
    for host in [&ha, &hb, &hc] {
        host.ready(WAIT).await.expect("ready");
    }
    for (from, others) in [(&a, [&b, &c]), (&b, [&a, &c]), (&c, [&a, &b])] {
        assert_eq!(from.status().peers.len(), 2, "{:?}", from.status().peers);
        for to in others {
            let who = from
                .request(to.routing_id(), &Who)
                .await
                .expect("a ready node reaches every peer");
            assert_eq!(&who, &to.routing_id().to_string());
        }
    }
    stop_all(&[&ha, &hb, &hc]).await;
}

/// While the Store does not answer reads, no fresh discovery list can be read: `ready` fails
/// with `DeadlineExceeded` once its time ran out, naming what it waited for; once the Store
/// answers again it resolves.
async fn a_node_whose_store_does_not_answer_is_not_ready(h: &Harness) {
    let faulty = Arc::new(FaultyLocationStore::new(Arc::clone(&h.store)));
    let store: Arc<dyn DynLocationStore> = faulty.clone();
    let (ha, a) = start_on(&store, echo_node).await;
    ha.ready(WAIT).await.expect("ready while the Store answers");
    faulty.set_fault(LocationOp::READS, Fault::UNAVAILABLE);
    let e = a
        .ready(Duration::from_millis(300))
        .await
        .expect_err("no fresh list without Store reads");
    assert_eq!(e.kind(), ErrorKind::DeadlineExceeded);
    assert_eq!(e.waiting, Waiting::DiscoveryList);
    assert_eq!(&e.mesh, a.mesh_name());
    faulty.heal();
    ha.ready(WAIT)
        .await
        .expect("ready once the Store answers again");
    stop_all(&[&ha]).await;
}

/// A node that just started sends to an Actor on a node it has not discovered or connected to
/// yet, without waiting for readiness: the request waits for the fresh discovery read and the
/// first connection (within its own timeout) and is answered — five fresh nodes in a row, each
/// answered once, in order.
async fn a_fresh_nodes_first_request_waits_for_the_connection_discovery_is_making(h: &Harness) {
    let factories = Arc::new(AtomicUsize::new(0));
    let (ha, _a) = counter_server(Arc::clone(&h.store), fast_options(), &factories).await;
    // A places on itself once its list names it.
    ha.ready(WAIT).await.expect("A ready");
    ha.actors()
        .expect("actors")
        .get_or_create("counter", "c1")
        .await
        .expect("created on A");
    for round in 1..=5u64 {
        let (hc, _c) = start(h, |b| b.object_role(ObjectRole::Client)).await;
        let count = hc
            .actors()
            .expect("actors")
            .request("c1", &Incr)
            .await
            .expect("a fresh node's first request is answered");
        assert_eq!(count, round);
        stop_all(&[&hc]).await;
    }
    stop_all(&[&ha]).await;
}
