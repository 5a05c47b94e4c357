//! The host-wide Application Job Queue (spec 06 §3, §25) between live hosts: with the queue
//! full, senders are held back through transport credit (nothing is refused), a reply to a
//! request already started still arrives, and after the queue drains every message has been
//! handled exactly once, in order.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use zlink_codec::records::ObjectRole;

use super::support::*;
use crate::host::ZLinkHost;
use crate::host::config::ZLink;
use crate::mesh::node::MeshNode;
use crate::messaging::Message;
use crate::objects::Actor;
use zlink_testkit::Harness;

/// The host-wide cap of the server host.
const CAP: u32 = 4;

/// More one-way messages than the sender's queue and the receiver's credit window hold
/// together (4,096 frames each), and many more than the Actor's own mailbox (1,024 jobs).
const MESSAGES: u64 = 10_000;

struct Sink;
impl Actor for Sink {}

#[derive(Debug, Serialize, Deserialize)]
struct Put(u64);
impl Message for Put {
    const PACKET: &'static str = "Put";
}

/// What the server's `sink` Actor saw.
#[derive(Default)]
struct Seen {
    order: Mutex<Vec<u64>>,
    /// The reply the first handler got to its own request while the queue was full.
    reply: Mutex<Option<String>>,
}

/// The server host: one Object Server with the `sink` Actor type and a host-wide cap of
/// [`CAP`]. The handler of `Put(0)` waits at `gate`, then asks the echo node `echo` and waits
/// for its reply before it records anything.
async fn server(
    h: &Harness,
    seen: &Arc<Seen>,
    gate: &Gate,
    echo: &Arc<OnceLock<(MeshNode, zlink_codec::RoutingId)>>,
) -> (ZLinkHost, MeshNode) {
    let (seen, gate, echo) = (Arc::clone(seen), gate.clone(), Arc::clone(echo));
    let host = ZLink::builder()
        .location_store(Arc::clone(&h.store))
        .location_options(fast_options())
        .max_queued_application_jobs(i64::from(CAP))
        .route_mesh(mesh(), move |b| {
            b.object_role(ObjectRole::Server)
                .actor_type::<Sink>("sink", move |t| {
                    t.factory(|_ctx| async { Ok(Sink) })
                        .disable_relocation()
                        .on_send::<Put, _>(move |_s, put, _ctx| {
                            let (seen, gate, echo) =
                                (Arc::clone(&seen), gate.clone(), Arc::clone(&echo));
                            Box::pin(async move {
                                if put.0 == 0 {
                                    gate.pass().await;
                                    let (node, target) = echo.get().expect("echo set").clone();
                                    let text = "while full".to_owned();
                                    let reply = node.request(&target, &Echo { text }).await;
                                    *seen.reply.lock() = Some(reply.expect("the reply arrives"));
                                }
                                seen.order.lock().push(put.0);
                                Ok(())
                            })
                        })
                })
        })
        .build()
        .start()
        .await
        .expect("the server starts");
    let node = host.node(&mesh()).expect("node");
    (host, node)
}

on_every_store!(
    with_the_queue_full_senders_are_held_back_a_started_request_gets_its_reply_and_nothing_is_lost,
    a_host_capped_at_one_job_serves_a_local_call_while_its_receive_loop_is_idle,
);

async fn with_the_queue_full_senders_are_held_back_a_started_request_gets_its_reply_and_nothing_is_lost(
    h: &Harness,
) {
    let seen = Arc::new(Seen::default());
    let gate = Gate::new();
    let echo = Arc::new(OnceLock::new());
    let (hb, nb) = server(h, &seen, &gate, &echo).await;
    let (hc, nc) = start(h, echo_node).await;
    let (ha, na) = start(h, |b| b.object_role(ObjectRole::Client)).await;
    echo.set((nb.clone(), nc.routing_id().clone()))
        .unwrap_or_else(|_| unreachable!("set once"));
    wait_peers(&nb, 2).await;
    wait_peers(&na, 2).await;
    wait_discovered(&[&ha, &hb, &hc]).await;
    let status = hb.application_jobs();
    assert_eq!(status.effective_max, CAP);

    let actors = ha.actors().expect("manager");
    actors.get_or_create("sink", "s").await.expect("created");
    let sender = tokio::spawn({
        let actors = actors.clone();
        async move {
            for i in 0..MESSAGES {
                actors.send("s", &Put(i)).await?;
            }
            Ok::<_, crate::messaging::ZLinkError>(())
        }
    });

    // `Put(0)` runs (at the gate); the ones behind it fill the server's queue to its pause
    // count (80% of 4, rounded up: every permit) and the server stops reading. `Put(0)`
    // returned its permit when it started, so 3 or 4 stay in use — above the resume count
    // (60% of 4, rounded down: 2), so it stays paused: the sender is held back, nothing is
    // refused.
    let full = |s: crate::host::ApplicationJobQueueStatus| {
        s.paused && (CAP as usize - 1..=CAP as usize).contains(&s.in_use)
    };
    wait_until("the server's queue is full and paused", || {
        full(hb.application_jobs())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !sender.is_finished(),
        "the sender is held back while the queue is full"
    );
    let s = hb.application_jobs();
    assert!(full(s), "still full: {s:?}");
    assert!(seen.order.lock().is_empty(), "nothing ran past the first");
    assert_eq!(
        hb.status().application_jobs,
        s,
        "the host status reports it too"
    );

    // The first handler's own request is answered while every permit is in use (06 §25).
    gate.open();
    wait_until("the first handler got its reply", || {
        seen.reply.lock().is_some()
    })
    .await;
    assert_eq!(seen.reply.lock().as_deref(), Some("while full"));

    // The queue drains: every message ran exactly once, in the order it was sent.
    tokio::time::timeout(Duration::from_secs(60), sender)
        .await
        .expect("the sender finishes once the queue drains")
        .expect("task")
        .expect("every send was accepted");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while seen.order.lock().len() < MESSAGES as usize {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} of {MESSAGES} handled",
            seen.order.lock().len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        *seen.order.lock(),
        (0..MESSAGES).collect::<Vec<_>>(),
        "each message handled once, in order"
    );
    assert_eq!(hb.status().dropped_one_way, 0);
    wait_until("the server's queue is empty again", || {
        let s = hb.application_jobs();
        s.in_use == 0 && !s.paused
    })
    .await;
    stop_all(&[&ha, &hb, &hc]).await;
}

/// The smallest cap the spec allows (06 §3: 1) still serves: an idle MeshNode's receive loop
/// holds no permit while it waits for a frame, so a local call's job gets the only one, and
/// the depth of an idle host is 0.
async fn a_host_capped_at_one_job_serves_a_local_call_while_its_receive_loop_is_idle(h: &Harness) {
    let seen = Arc::new(Seen::default());
    let host = ZLink::builder()
        .location_store(Arc::clone(&h.store))
        .location_options(fast_options())
        .max_queued_application_jobs(1)
        .route_mesh(mesh(), {
            let seen = Arc::clone(&seen);
            move |b| {
                b.object_role(ObjectRole::Server)
                    .actor_type::<Sink>("sink", move |t| {
                        t.factory(|_ctx| async { Ok(Sink) })
                            .disable_relocation()
                            .on_send::<Put, _>(move |_s, put, _ctx| {
                                let seen = Arc::clone(&seen);
                                Box::pin(async move {
                                    seen.order.lock().push(put.0);
                                    Ok(())
                                })
                            })
                    })
            }
        })
        .build()
        .start()
        .await
        .expect("the host starts");
    wait_discovered(&[&host]).await;
    assert_eq!(
        host.application_jobs().in_use,
        0,
        "an idle host holds no permit"
    );
    let actors = host.actors().expect("manager");
    actors.get_or_create("sink", "one").await.expect("created");
    for i in 0..3 {
        tokio::time::timeout(Duration::from_secs(5), actors.send("one", &Put(i)))
            .await
            .expect("a local send gets the only permit")
            .expect("accepted");
    }
    wait_until("every send ran", || seen.order.lock().len() == 3).await;
    assert_eq!(*seen.order.lock(), vec![0, 1, 2]);
    wait_until("back to no permit in use", || {
        host.application_jobs().in_use == 0
    })
    .await;
    host.shutdown().await;
}
