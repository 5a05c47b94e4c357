//! Node-direct messaging: payload sizes, replies past a full mailbox, reply timeout and
//! cancellation, NotFound / Unavailable, filters, the command plane, metadata and requests a
//! node sends to itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use zlink_codec::RoutingId;

use super::support::*;
use crate::mesh::node::CallOptions;
use crate::messaging::{ErrorKind, Message, Metadata, Request};
use crate::objects::Actor;
use zlink_codec::records::ObjectRole;
use zlink_testkit::Harness;

/// A byte payload echoed back by its handler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Blob(Vec<u8>);
impl Message for Blob {
    const PACKET: &'static str = "Blob";
}
impl Request for Blob {
    type Reply = Vec<u8>;
}

/// A one-way message whose handler blocks at a gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Hold(u32);
impl Message for Hold {
    const PACKET: &'static str = "Hold";
}

/// A request whose handler blocks at a gate, then echoes its text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Slow(String);
impl Message for Slow {
    const PACKET: &'static str = "Slow";
}
impl Request for Slow {
    type Reply = String;
}

/// An application request whose packet name is the command plane's ping command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct FakePing;
impl Message for FakePing {
    const PACKET: &'static str = "zlink.ping";
}
impl Request for FakePing {
    type Reply = String;
}

/// A request answered with the metadata value of `trace` and the source RID.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ReadMeta;
impl Message for ReadMeta {
    const PACKET: &'static str = "ReadMeta";
}
impl Request for ReadMeta {
    type Reply = (Option<String>, String);
}

/// A shared invocation counter.
#[derive(Debug, Clone, Default)]
struct Count(Arc<AtomicUsize>);

impl Count {
    fn hit(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Deterministic pseudo-random bytes (xorshift).
fn bytes_of(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn unknown_rid() -> RoutingId {
    RoutingId::new(vec![0xee; 16]).expect("rid")
}

on_every_store!(
    filters_wrap_remote_requests_in_order_and_unwind_in_reverse,
    metadata_reaches_the_remote_handler,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_from_one_byte_to_one_mib_round_trip() {
    let h = Harness::memory();
    let echo = |b: crate::host::config::MeshNodeBuilder<_>| {
        b.on_request::<Blob, _, _>(|blob, _ctx| async move { Ok(blob.0) })
    };
    let (ha, a) = start(&h, echo).await;
    let (hb, b) = start(&h, echo).await;
    wait_peers(&a, 1).await;
    for (i, len) in [1usize, 4 << 10, 256 << 10, 1 << 20]
        .into_iter()
        .enumerate()
    {
        let sent = bytes_of(len, 0x9e37_79b9 + i as u64);
        let got = tokio::time::timeout(WAIT, a.request(b.routing_id(), &Blob(sent.clone())))
            .await
            .expect("bounded")
            .unwrap_or_else(|e| panic!("{len} bytes: {e}"));
        assert_eq!(got.len(), len);
        assert_eq!(crc32c::crc32c(&got), crc32c::crc32c(&sent), "{len} bytes");
    }
    stop_all(&[&ha, &hb]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_arrive_while_the_mailbox_is_full() {
    let h = Harness::memory();
    let gate = Gate::new();
    let (started, finished) = (Count::default(), Count::default());
    let (ha, a) = {
        let (gate, started, finished) = (gate.clone(), started.clone(), finished.clone());
        start(&h, move |b| {
            echo_node(b)
                .mailbox_limits(4, 1 << 20)
                .on_send::<Hold, _, _>(move |_, _ctx| {
                    started.hit();
                    let (gate, finished) = (gate.clone(), finished.clone());
                    async move {
                        gate.pass().await;
                        finished.hit();
                        Ok(())
                    }
                })
        })
        .await
    };
    let (hb, b) = start(&h, echo_node).await;
    wait_peers(&a, 1).await;
    wait_peers(&b, 1).await;

    // Six one-way sends: four fill A's mailbox, two wait behind it.
    for i in 0..6 {
        b.send(a.routing_id(), &Hold(i)).await.expect("queued");
    }
    wait_until("A's mailbox is full", || {
        a.status().mailbox_jobs == 4 && started.get() == 4
    })
    .await;

    // A's request to B gets its reply: replies never take a mailbox slot.
    let options = CallOptions::default().reply_timeout(WAIT);
    let reply = a
        .request_with(
            b.routing_id(),
            &Echo {
                text: "through".into(),
            },
            &options,
        )
        .await
        .expect("the reply arrives past the full mailbox");
    assert_eq!(reply, "through");
    assert_eq!(
        a.status().mailbox_jobs,
        4,
        "the mailbox was full throughout"
    );
    assert_eq!(started.get(), 4);

    gate.open();
    wait_until("every blocked send finishes", || {
        finished.get() == 6 && a.status().mailbox_jobs == 0
    })
    .await;
    assert_eq!(started.get(), 6);
    assert_eq!(a.status().mailbox_bytes, 0);
    stop_all(&[&ha, &hb]).await;
}

/// Starts a node answering [`Slow`] after `gate` opens; counts started and finished handlers.
async fn start_slow(
    h: &Harness,
    gate: &Gate,
    started: &Count,
    finished: &Count,
) -> (crate::host::ZLinkHost, crate::mesh::node::MeshNode) {
    let (gate, started, finished) = (gate.clone(), started.clone(), finished.clone());
    start(h, move |b| {
        b.on_request::<Slow, _, _>(move |s, _ctx| {
            started.hit();
            let (gate, finished) = (gate.clone(), finished.clone());
            async move {
                gate.pass().await;
                finished.hit();
                Ok(s.0)
            }
        })
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reply_timeout_ends_the_request_once_and_the_late_reply_is_discarded() {
    let h = Harness::memory();
    let gate = Gate::new();
    let (started, finished) = (Count::default(), Count::default());
    let (ha, a) = start(&h, |b| b).await;
    let (hb, b) = start_slow(&h, &gate, &started, &finished).await;
    wait_peers(&a, 1).await;

    let options = CallOptions::default().reply_timeout(Duration::from_millis(200));
    let err = tokio::time::timeout(
        WAIT,
        a.request_with(b.routing_id(), &Slow("late".into()), &options),
    )
    .await
    .expect("bounded")
    .expect_err("the handler is still blocked");
    assert_eq!(err.kind(), ErrorKind::DeadlineExceeded, "{err}");
    assert_eq!(a.status().pending_requests, 0);
    assert_eq!(started.get(), 1);

    // The handler now replies; the reply finds no pending request and is discarded.
    gate.open();
    wait_until("the late handler finishes", || finished.get() == 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(a.status().pending_requests, 0);
    // The next request gets its own reply, not the late one.
    let fresh = tokio::time::timeout(WAIT, a.request(b.routing_id(), &Slow("fresh".into())))
        .await
        .expect("bounded")
        .expect("a reply");
    assert_eq!(fresh, "fresh");
    assert_eq!(started.get(), 2);
    assert_eq!(a.status().pending_requests, 0);
    stop_all(&[&ha, &hb]).await;
}

/// An Actor that answers [`Slow`] once its gate opens.
struct Holder;
impl Actor for Holder {}

/// A request still waiting for its reply when its own node stops ends once, and nothing stays
/// pending. An object request is no accepted work of its node (shutdown does not wait for it),
/// and the pending table's reaper stops with the node's reply loop: a request the loop had not
/// yet ended when the node's tasks were aborted (its connection's Down event still queued)
/// waited forever, past its own reply timeout — the rare hang of
/// `a_requester_whose_lease_ended_is_confirmed_source_lease_expired`. A request made after the
/// node stopped ends at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_waiting_when_its_node_stops_ends_once_and_none_stays_pending() {
    let h = Harness::memory();
    let (gate, started) = (Gate::new(), Count::default());
    let (hs, _s) = start(&h, {
        let (gate, started) = (gate.clone(), started.clone());
        move |b| {
            b.object_role(ObjectRole::Server)
                .actor_type::<Holder>("holder", move |t| {
                    t.factory(|_ctx| async { Ok(Holder) })
                        .disable_relocation()
                        .on_request::<Slow, _>(move |_h, s, _ctx| {
                            started.hit();
                            let gate = gate.clone();
                            Box::pin(async move {
                                gate.pass().await;
                                Ok(s.0)
                            })
                        })
                })
        }
    })
    .await;
    let (hc, c) = start(&h, |b| b.object_role(ObjectRole::Client)).await;
    wait_peers(&c, 1).await;
    wait_discovered(&[&hs]).await;
    let on_c = hc.actors().expect("manager");
    on_c.get_or_create("holder", "h-1").await.expect("created");

    // Far past the test's bound: only the node's stop can end it.
    let options = CallOptions::default().reply_timeout(Duration::from_secs(3600));
    let call = {
        let (on_c, options) = (on_c.clone(), options.clone());
        tokio::spawn(async move {
            on_c.request_with("h-1", &Slow("held".into()), &options)
                .await
        })
    };
    wait_until("the request is pending and its handler runs", || {
        c.status().pending_requests == 1 && started.get() == 1
    })
    .await;
    hc.shutdown().await;
    assert_eq!(c.status().pending_requests, 0, "ended with its node");
    // Ended by the stop: `ShuttingDown`, or `Unavailable` if the connection's loss was seen
    // first.
    let by_the_stop = |r: Result<String, crate::ZLinkError>| {
        let e = r.expect_err("its node stopped before any reply");
        assert!(
            matches!(e.kind(), ErrorKind::ShuttingDown | ErrorKind::Unavailable),
            "{e}"
        );
    };
    by_the_stop(
        tokio::time::timeout(WAIT, call)
            .await
            .expect("the request ended")
            .expect("joined"),
    );
    by_the_stop(
        tokio::time::timeout(
            WAIT,
            on_c.request_with("h-1", &Slow("late".into()), &options),
        )
        .await
        .expect("a request after the stop ends at once"),
    );
    assert_eq!(c.status().pending_requests, 0);
    gate.open();
    stop_all(&[&hs]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_request_future_removes_it_from_pending() {
    let h = Harness::memory();
    let gate = Gate::new();
    let (started, finished) = (Count::default(), Count::default());
    let (ha, a) = start(&h, |b| b).await;
    let (hb, b) = start_slow(&h, &gate, &started, &finished).await;
    wait_peers(&a, 1).await;

    let call = {
        let (a, target) = (a.clone(), b.routing_id().clone());
        tokio::spawn(async move { a.request(&target, &Slow("dropped".into())).await })
    };
    wait_until("the request is pending and its handler runs", || {
        a.status().pending_requests == 1 && started.get() == 1
    })
    .await;
    call.abort();
    let joined = tokio::time::timeout(WAIT, call).await.expect("bounded");
    assert!(joined.expect_err("aborted").is_cancelled());
    assert_eq!(a.status().pending_requests, 0);

    gate.open();
    wait_until("the handler finishes", || finished.get() == 1).await;
    assert_eq!(a.status().pending_requests, 0);
    stop_all(&[&ha, &hb]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_rid_is_not_found_and_runs_no_handler() {
    let h = Harness::memory();
    let ran = Count::default();
    let node = |ran: Count| {
        move |b: crate::host::config::MeshNodeBuilder<_>| {
            let on_send = ran.clone();
            b.on_request::<Slow, _, _>(move |s, _ctx| {
                ran.hit();
                async move { Ok(s.0) }
            })
            .on_send::<Hold, _, _>(move |_, _ctx| {
                on_send.hit();
                async { Ok(()) }
            })
        }
    };
    let (ha, a) = start(&h, node(ran.clone())).await;
    let (hb, _b) = start(&h, node(ran.clone())).await;
    wait_peers(&a, 1).await;

    let err = a
        .request(&unknown_rid(), &Slow("x".into()))
        .await
        .expect_err("unknown RID");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    let err = a
        .send(&unknown_rid(), &Hold(1))
        .await
        .expect_err("unknown RID");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert_eq!(ran.get(), 0);
    assert_eq!(a.status().pending_requests, 0);
    stop_all(&[&ha, &hb]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn known_peer_without_a_connection_is_unavailable() {
    let h = Harness::memory();
    let (ha, a) = start(&h, |b| b).await;
    // A loopback port with nothing listening.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let endpoint = format!("127.0.0.1:{closed}");
    let rid = RoutingId::new(b"nobody-home".to_vec()).expect("rid");
    a.add_manual_peer(&endpoint, Some(rid.clone()))
        .expect("the intent is added");

    let err = a
        .request(&rid, &Slow("x".into()))
        .await
        .expect_err("no connection");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    let err = a.send(&rid, &Hold(1)).await.expect_err("no connection");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert_eq!(a.status().pending_requests, 0);
    // Once released the RID is no longer known: NotFound.
    assert!(a.release_manual_peer(&endpoint));
    let err = a.request(&rid, &Slow("x".into())).await.expect_err("gone");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    stop_all(&[&ha]).await;
}

/// A node answering `Echo` directly and `Pick`-like channel requests on `lobby`.
fn filtered_node(
    ran: Log,
) -> impl FnOnce(
    crate::host::config::MeshNodeBuilder<crate::messaging::NodeHandler>,
) -> crate::host::config::MeshNodeBuilder<crate::messaging::NodeHandler> {
    move |b| {
        let on_channel = ran.clone();
        b.channel_server(channel("lobby"))
            .on_request::<Echo, _, _>(move |e, _ctx| {
                ran.push("handler");
                async move { Ok(e.text) }
            })
            .on_channel_request::<Echo, _, _>(channel("lobby"), move |e, _ctx| {
                on_channel.push("handler");
                async move { Ok(e.text) }
            })
    }
}

/// An ordered event log shared by filters and handlers.
#[derive(Debug, Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn push(&self, event: impl Into<String>) {
        self.0.lock().push(event.into());
    }
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock())
    }
}

async fn filters_wrap_remote_requests_in_order_and_unwind_in_reverse(h: &Harness) {
    let log = Log::default();
    let root = {
        let (l1, l2) = (log.clone(), log.clone());
        move |r: crate::host::config::ZLinkBuilder<_>| {
            r.filter(move |ctx, next| {
                let l = l1.clone();
                async move {
                    l.push(format!("f1 in {:?}", ctx.dispatch_kind()));
                    let r = next.run().await;
                    l.push("f1 out");
                    r
                }
            })
            .filter(move |_ctx, next| {
                let l = l2.clone();
                async move {
                    l.push("f2 in");
                    let r = next.run().await;
                    l.push("f2 out");
                    r
                }
            })
        }
    };
    let (hb, b) = start_root(h, root, filtered_node(log.clone())).await;
    let (ha, a) = start(h, |b| b.channel_client(channel("lobby"))).await;
    wait_peers(&a, 1).await;

    let reply = a
        .request(
            b.routing_id(),
            &Echo {
                text: "direct".into(),
            },
        )
        .await
        .expect("a reply");
    assert_eq!(reply, "direct");
    assert_eq!(
        log.take(),
        [
            "f1 in NodeDirectRequest",
            "f2 in",
            "handler",
            "f2 out",
            "f1 out"
        ]
    );

    let reply = ha
        .channel_request(
            &channel("lobby"),
            &Echo {
                text: "channel".into(),
            },
        )
        .await
        .expect("a reply");
    assert_eq!(reply, "channel");
    assert_eq!(
        log.take(),
        [
            "f1 in ChannelRequest",
            "f2 in",
            "handler",
            "f2 out",
            "f1 out"
        ]
    );
    stop_all(&[&ha, &hb]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_that_skips_next_rejects_remote_requests_and_no_handler_runs() {
    let h = Harness::memory();
    let log = Log::default();
    let seen = Count::default();
    let root = {
        let seen = seen.clone();
        move |r: crate::host::config::ZLinkBuilder<_>| {
            r.filter(move |_ctx, _next| {
                seen.hit();
                async { Ok(()) }
            })
        }
    };
    let (hb, b) = start_root(&h, root, filtered_node(log.clone())).await;
    let (ha, a) = start(&h, |b| b.channel_client(channel("lobby"))).await;
    wait_peers(&a, 1).await;

    let err = a
        .request(
            b.routing_id(),
            &Echo {
                text: "direct".into(),
            },
        )
        .await
        .expect_err("rejected");
    assert_eq!(err.kind(), ErrorKind::Rejected, "{err}");
    let err = ha
        .channel_request(
            &channel("lobby"),
            &Echo {
                text: "channel".into(),
            },
        )
        .await
        .expect_err("rejected");
    assert_eq!(err.kind(), ErrorKind::Rejected, "{err}");
    assert_eq!(seen.get(), 2, "the filter saw both requests");
    assert!(log.take().is_empty(), "no handler ran");
    stop_all(&[&ha, &hb]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_plane_is_neither_matched_by_handler_keys_nor_filtered() {
    let h = Harness::memory();
    let (handled, filtered) = (Count::default(), Count::default());
    let root = {
        let filtered = filtered.clone();
        move |r: crate::host::config::ZLinkBuilder<_>| {
            r.filter(move |_ctx, next| {
                filtered.hit();
                async move { next.run().await }
            })
        }
    };
    let configure = {
        let handled = handled.clone();
        move |b: crate::host::config::MeshNodeBuilder<_>| {
            b.on_request::<FakePing, _, _>(move |_, _ctx| {
                handled.hit();
                async { Ok("application".to_owned()) }
            })
        }
    };
    let (hb, b) = start_root(&h, root, configure).await;
    let (ha, a) = start(&h, |b| b).await;
    wait_peers(&a, 1).await;

    a.ping(b.routing_id(), WAIT)
        .await
        .expect("the command-plane ping");
    assert_eq!(
        handled.get(),
        0,
        "no application handler ran for the command"
    );
    assert_eq!(filtered.get(), 0, "no filter ran for the command");

    // The same packet name as an application request does reach the filter and the handler.
    let reply = a.request(b.routing_id(), &FakePing).await.expect("a reply");
    assert_eq!(reply, "application");
    assert_eq!((handled.get(), filtered.get()), (1, 1));
    stop_all(&[&ha, &hb]).await;
}

fn meta_node(
    ran: Count,
) -> impl FnOnce(
    crate::host::config::MeshNodeBuilder<crate::messaging::NodeHandler>,
) -> crate::host::config::MeshNodeBuilder<crate::messaging::NodeHandler> {
    move |b| {
        b.on_request::<ReadMeta, _, _>(move |_, ctx| {
            ran.hit();
            let trace = ctx.metadata().get("trace").map(str::to_owned);
            let source = ctx.source_rid().to_string();
            async move { Ok((trace, source)) }
        })
    }
}

async fn metadata_reaches_the_remote_handler(h: &Harness) {
    let ran = Count::default();
    let (ha, a) = start(h, meta_node(Count::default())).await;
    let (hb, b) = start(h, meta_node(ran.clone())).await;
    wait_peers(&a, 1).await;

    let metadata = Metadata::builder()
        .set("trace", "abc-123")
        .build()
        .expect("metadata");
    let options = CallOptions::default().metadata(metadata);
    let (trace, source) = a
        .request_with(b.routing_id(), &ReadMeta, &options)
        .await
        .expect("a reply");
    assert_eq!(trace.as_deref(), Some("abc-123"));
    assert_eq!(source, a.routing_id().to_string());
    let (trace, _) = a.request(b.routing_id(), &ReadMeta).await.expect("a reply");
    assert_eq!(trace, None, "no metadata sent, none seen");
    assert_eq!(ran.get(), 2);
    stop_all(&[&ha, &hb]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_to_its_own_rid_runs_the_same_handler() {
    let h = Harness::memory();
    let (ran_a, ran_b) = (Count::default(), Count::default());
    let (ha, a) = start(&h, meta_node(ran_a.clone())).await;
    let (hb, b) = start(&h, meta_node(ran_b.clone())).await;
    wait_peers(&a, 1).await;

    let metadata = Metadata::builder()
        .set("trace", "self")
        .build()
        .expect("metadata");
    let options = CallOptions::default().metadata(metadata);
    let (trace, source) = a
        .request_with(a.routing_id(), &ReadMeta, &options)
        .await
        .expect("a reply");
    assert_eq!(trace.as_deref(), Some("self"));
    assert_eq!(source, a.routing_id().to_string());
    assert_eq!((ran_a.get(), ran_b.get()), (1, 0));

    // The same request to the peer runs the peer's copy of that handler.
    a.request(b.routing_id(), &ReadMeta).await.expect("a reply");
    assert_eq!((ran_a.get(), ran_b.get()), (1, 1));
    stop_all(&[&ha, &hb]).await;
}
