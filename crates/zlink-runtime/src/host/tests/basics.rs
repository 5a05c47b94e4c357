//! Two nodes find each other through the Location Store and exchange node-direct requests.

use super::support::*;
use crate::host::{HostState, ShutdownOutcome};
use crate::messaging::ErrorKind;
use zlink_testkit::Harness;

on_every_store!(nodes_discover_each_other_and_exchange_requests);

async fn nodes_discover_each_other_and_exchange_requests(h: &Harness) {
    let (ha, a) = start(h, echo_node).await;
    let (hb, b) = start(h, echo_node).await;
    wait_peers(&a, 1).await;
    wait_peers(&b, 1).await;
    assert_eq!(ha.state(), HostState::Serving);
    let reply = a
        .request(b.routing_id(), &Echo { text: "hi".into() })
        .await
        .expect("reply");
    assert_eq!(reply, "hi");
    let who = b.request(a.routing_id(), &Who).await.expect("reply");
    assert_eq!(who, a.routing_id().to_string());
    // To itself, through the same dispatcher.
    let own = a.request(a.routing_id(), &Who).await.expect("reply");
    assert_eq!(own, a.routing_id().to_string());

    let rb = hb.shutdown().await;
    assert_eq!(rb.outcome, ShutdownOutcome::Stopped, "{rb:?}");
    let err = b
        .request(a.routing_id(), &Who)
        .await
        .expect_err("after shutdown");
    assert_eq!(err.kind(), ErrorKind::ShuttingDown);
    let ra = ha.shutdown().await;
    assert_eq!(ra.outcome, ShutdownOutcome::Stopped, "{ra:?}");
    assert_eq!(ha.state(), HostState::Stopped);
}
