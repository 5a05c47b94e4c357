//! A forwarded request keeps its OperationId, reply route and source (spec 21 §7.3).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use zlink_transport::{Envelope, ReplyStatus};

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_request_is_answered_to_its_source_under_its_own_ids() {
    let ran_on_b = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran_on_b);
    let (hc, c) = start_manual(echo_node).await;
    let c_ep = c.endpoint().to_owned();
    let (hb, b) = start_manual(move |n| {
        n.manual_peer(c_ep)
            .on_request::<Echo, _, _>(move |e, _ctx| {
                counter.fetch_add(1, Ordering::SeqCst);
                async move { Ok(format!("b:{}", e.text)) }
            })
    })
    .await;
    let (b_ep, c_ep) = (b.endpoint().to_owned(), c.endpoint().to_owned());
    let (ha, a) = start_manual(move |n| n.manual_peer(b_ep).manual_peer(c_ep)).await;
    wait_until("A sees B and C, B sees C", || {
        a.status().peers.len() == 2 && b.status().peers.len() == 2
    })
    .await;

    // A's request, built and registered by A, but handed to B, which forwards it to C as is.
    let ai = &a.inner;
    let op = ai.transport.ids().next_operation_id().expect("op");
    let route = ai.transport.ids().next_reply_route_id().expect("route");
    let env = Envelope::request(
        op,
        route,
        &ai.rid,
        ai.generation,
        Bytes::from_static(br#"{"text":"hop"}"#),
    )
    .with_packet_name("Echo")
    .and_then(|e| e.with_content_type("application/json"))
    .expect("envelope");
    let to_b = ai.transport.peer(b.routing_id()).expect("A→B");
    let (_guard, rx) = ai.pending.register(route, op, to_b.info());
    let b_to_c = b.inner.transport.peer(c.routing_id()).expect("B→C");
    b.inner.forward_app(&env, &b_to_c).await.expect("forwarded");

    let reply = tokio::time::timeout(WAIT, rx)
        .await
        .expect("bounded")
        .expect("completed")
        .0
        .expect("a reply");
    assert_eq!(reply.status(), ReplyStatus::Ok);
    assert_eq!(reply.operation_id(), op);
    assert_eq!(reply.reply_route(), route);
    assert_eq!(&reply.payload()[..], br#""hop""#, "C answered, not B");
    assert_eq!(ran_on_b.load(Ordering::SeqCst), 0, "B only forwarded");
    stop_all(&[&ha, &hb, &hc]).await;
}
