//! The node's receive loops: peer events, application frames (through the mailbox, the
//! dispatcher and its filters), control frames (the command plane) and replies (the completion
//! path, which no application queue, mailbox or permit can block).

use std::sync::Arc;
use std::task::Poll;

use bytes::Bytes;
use tokio::sync::mpsc;
use zlink_codec::ChannelName;
use zlink_codec::records::HostState;
use zlink_transport::{
    Envelope, FrameReceiver, InboundReply, PeerEvent, PeerInfo, Reply, ReplyReceiver, ReplyStatus,
};

use super::control;
use super::core::{NodeInner, log_send_end};
use super::lifecycle::WorkGuard;
use super::mailbox::{MailboxPermit, job_cost};
use crate::messaging::{
    Cancellation, Correlation, DispatchOutcome, ErrorReply, InboundFrame, InboundTarget,
    ReplyExpectation, Started, ZLinkError,
};
use crate::telemetry::labels::{DropReason, MessageKind};

/// Peer lifecycle and the completion path, on one loop so that a reply read before its
/// connection went down always completes its request (or is relayed) first: replies are
/// taken before events (biased), and every reply already delivered is taken before an event
/// is handled. A connection that went down ends the requests still waiting on it with
/// `Unavailable`, and the routes of requests this node forwarded for it.
pub(crate) async fn peers_and_replies(
    node: Arc<NodeInner>,
    mut events: mpsc::UnboundedReceiver<PeerEvent>,
    mut replies: ReplyReceiver,
) {
    // The pending table's reapers (reply timeouts, forwarded routes' deadlines) live as long
    // as this loop; when it ends (the node stops) no reply can be relayed any more.
    let _reaper = AbortOnDrop(tokio::spawn(super::pending::reap(Arc::clone(
        &node.pending,
    ))));
    let forwarded = Arc::clone(&node.pending);
    let _routes_reaper = AbortOnDrop(tokio::spawn(async move {
        forwarded.forwarded.reap().await;
    }));
    let _routes = EndAllOnDrop(Arc::clone(&node.pending));
    let (mut events_open, mut replies_open) = (true, true);
    while events_open || replies_open {
        tokio::select! {
            biased;
            r = replies.recv(), if replies_open => match r {
                Some(r) => reply_arrived(&node, r),
                None => replies_open = false,
            },
            e = events.recv(), if events_open => match e {
                Some(event) => {
                    while let Some(r) = replies.try_recv() {
                        reply_arrived(&node, r);
                    }
                    peer_event(&node, event);
                }
                None => events_open = false,
            },
        }
    }
}

/// A reply read from a connection: it completes this node's own request — one from another
/// node than the request went to is marked answered elsewhere — or, answering a request this
/// node forwarded, is relayed to that request's caller; otherwise it is discarded and counted.
fn reply_arrived(node: &NodeInner, inbound: InboundReply) {
    let from = Arc::clone(inbound.peer());
    if let Some(reply) = node
        .pending
        .try_complete_from(inbound.into_reply(), &from.rid)
    {
        node.pending.forwarded.relay(reply, &node.transport);
    }
}

/// Ends every forwarded route and every request of this node still waiting when dropped (the
/// node's reply loop ended, or was aborted as the node stopped: no reply, Down event or reply
/// timeout can end them any more).
struct EndAllOnDrop(Arc<super::pending::Pending>);

impl Drop for EndAllOnDrop {
    fn drop(&mut self) {
        let ended = self.0.forwarded.clear();
        if ended > 0 {
            tracing::debug!(ended, "forwarded routes ended: the node stopped");
        }
        let ended = self.0.stop();
        if ended > 0 {
            tracing::debug!(ended, "requests still waiting ended: the node stopped");
        }
    }
}

/// Aborts its task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn peer_event(node: &NodeInner, event: PeerEvent) {
    match event {
        PeerEvent::Up(info) => {
            let Some(handle) = node.transport.peer(&info.rid) else {
                return;
            };
            if handle.info().connection != info.connection {
                return;
            }
            tracing::info!(mesh = %node.mesh, peer = %info.rid, "peer ready");
            let discovery = node.descriptor.is_some();
            let mut confirmed = node.peers.write().up(handle.clone(), discovery);
            if !confirmed {
                // A manual intent's handshake may just have learned this RID.
                super::handle::refresh_manual_rids(node);
                confirmed = node.peers.read().ready(&info.rid).is_some();
            }
            if !confirmed {
                // Re-read the list now: a node that left it is closed, a new one confirmed.
                node.discovery_wake.notify_one();
            }
            let weights = control::weights_payload(&node.weights.read());
            if let Err(e) = node.send_control(&handle, control::WEIGHTS, weights) {
                tracing::debug!(peer = %info.rid, %e, "weights announcement not sent");
            }
        }
        PeerEvent::Down { peer, reason } => {
            tracing::info!(mesh = %node.mesh, peer = %peer.rid, ?reason, "peer down");
            node.peers.write().down(&peer);
            let ended = node.pending.connection_lost(peer.connection);
            if ended > 0 {
                tracing::info!(peer = %peer.rid, ended, "requests ended: connection lost");
            }
            let routes = node.pending.forwarded.connection_lost(peer.connection);
            if routes > 0 {
                tracing::debug!(peer = %peer.rid, routes, "forwarded routes ended: the caller's connection was lost");
            }
        }
        _ => {}
    }
}

/// Runs control frames (never an application job): one-way commands in arrival order on this
/// loop (a later weight announcement always wins), requests each in its own task.
pub(crate) async fn control_frames(node: Arc<NodeInner>, mut rx: FrameReceiver) {
    while let Some(frame) = rx.recv().await {
        if frame.envelope().reply_route().is_none() {
            control::handle(Arc::clone(&node), frame).await;
        } else {
            tokio::spawn(control::handle(Arc::clone(&node), frame));
        }
    }
}

/// Application frames: each takes a host Application Job Queue permit once it is received
/// and then waits for mailbox room (both hold the sender back through the transport's credit),
/// then is admitted and dispatched in its own task. A refused record returns its permit at once.
pub(crate) async fn app_frames(node: Arc<NodeInner>, mut rx: FrameReceiver) {
    node.life.serving().await;
    loop {
        // Application Job Queue pressure (06 §3): while the host's queue is paused this loop
        // reads nothing, and at its cap it holds the one frame it read until a permit is free
        // and reads no further, so the transport's credit holds the senders back. The permit
        // travels with the frame's job. An idle loop holds none: a local call's job can take
        // the last permit even at the smallest cap.
        node.jobs.running().await;
        let Some(frame) = rx.recv().await else {
            break;
        };
        let job = node.jobs.acquire().await;
        // The connection's shared info, not a copy of its RoutingId.
        let peer = Arc::clone(frame.peer());
        let peer_rid = &peer.rid;
        let env = frame.into_envelope();
        let address = env.address_bytes();
        let objects_address = address == super::core::ACTOR_ADDRESS.as_bytes()
            || address == super::core::SPOT_ADDRESS.as_bytes();
        node.metrics.received(if env.reply_route().is_some() {
            MessageKind::Request
        } else {
            MessageKind::OneWay
        });
        match node.life.state() {
            HostState::Serving | HostState::Relocating => {}
            // Every stateful object left: node-direct requests are refused (no local owner);
            // object messages still reach the follow windows or are answered by the record.
            HostState::Relocated if objects_address => {}
            HostState::Relocated => {
                let refused = ZLinkError::Unavailable {
                    target: crate::messaging::Target::ThisHost,
                    reason: crate::messaging::UnavailableReason::Relocated,
                };
                node.metrics.dropped(DropReason::NotServing);
                answer(&node, peer_rid, &env, Err(refused));
                continue;
            }
            _ => {
                node.metrics.dropped(DropReason::NotServing);
                answer(&node, peer_rid, &env, Err(ZLinkError::ShuttingDown));
                continue;
            }
        }
        let cost = job_cost(env.payload().len(), env.metadata().len());
        let permit = node.mailbox.reserve(cost).await;
        let work = match node.life.admit() {
            Ok(w) => w,
            Err(e) => {
                node.metrics.dropped(DropReason::NotAdmitted);
                answer(&node, peer_rid, &env, Err(e));
                continue;
            }
        };
        if objects_address {
            // Submitted to the Actor's mailbox here, in arrival order (one sender's messages
            // keep their order); only the wait for the reply runs in its own task.
            let Some(objects) = node.objects.get() else {
                let err = ZLinkError::NoRoute {
                    target: crate::messaging::Target::Objects,
                };
                node.metrics.dropped(DropReason::NoRoute);
                answer(&node, peer_rid, &env, Err(err));
                continue;
            };
            if let Some(rest) = objects.deliver(
                Arc::clone(&node),
                peer_rid.clone(),
                env,
                job,
                Box::new((permit, work)),
            ) {
                tokio::spawn(rest);
            }
            continue;
        }
        // The Application Job Queue permit returns before the first filter runs.
        let mut job = job;
        job.release();
        dispatch(&node, peer, env, (permit, work));
    }
}

/// Dispatches one application frame. The synchronous part (addressing, handler lookup,
/// decoding, the handler call) runs here and the handler's future is polled once (no task, no
/// large future state built and moved); a handler that completes at once is answered here,
/// one that waits goes on in its own task (polled there with the task's waker). A panic on
/// this first poll ends the job alone, as a panicking task would; its guards drop.
fn dispatch(
    node: &Arc<NodeInner>,
    peer: Arc<PeerInfo>,
    env: Envelope,
    guards: (MailboxPermit, WorkGuard),
) {
    let cancel = Cancellation::new();
    let first = super::inline::contained(|| {
        let frame = inbound_frame(node, &peer.rid, &env)?;
        let mut running = match node.dispatcher.start(frame, cancel.clone()) {
            Started::Done(outcome) => {
                finish(node, &peer.rid, &env, outcome);
                return None;
            }
            Started::Running(running) => running,
        };
        match super::inline::poll_once(&mut running) {
            Poll::Ready(outcome) => {
                finish(node, &peer.rid, &env, outcome);
                None
            }
            Poll::Pending => Some(running),
        }
    });
    let Some(Some(running)) = first else { return };
    let node = Arc::clone(node);
    tokio::spawn(async move {
        let _guards = guards;
        // Biased: the dispatch is polled before the force signal, as on the first poll.
        tokio::select! {
            biased;
            outcome = running => finish(&node, &peer.rid, &env, outcome),
            () = node.life.force().cancelled() => {
                cancel.cancel();
                answer(&node, &peer.rid, &env, Err(ZLinkError::ShuttingDown));
            }
        }
    });
}

/// The dispatcher's frame for an application envelope; `None` (answered) when its address is
/// not a valid ChannelName.
fn inbound_frame(
    node: &NodeInner,
    peer_rid: &zlink_codec::RoutingId,
    env: &Envelope,
) -> Option<InboundFrame> {
    let target = if env.address_bytes().is_empty() {
        InboundTarget::NodeDirect {
            mesh: node.mesh.clone(),
            source: env.source_rid().clone(),
            target: node.rid.clone(),
        }
    } else {
        match ChannelName::new(env.address()) {
            Ok(channel) => InboundTarget::Channel {
                channel,
                mesh: Some(node.mesh.clone()),
            },
            Err(e) => {
                let err = ZLinkError::malformed_payload("channel address")(e.into());
                node.metrics.dropped(DropReason::NoRoute);
                answer(node, peer_rid, env, Err(err));
                return None;
            }
        }
    };
    Some(InboundFrame {
        target,
        expect: match env.reply_route() {
            Some(_) => ReplyExpectation::Reply(Correlation::new(Bytes::new())),
            None => ReplyExpectation::None,
        },
        packet: env.packet_name_bytes().clone(),
        content_type: env.content_type_bytes().clone(),
        metadata: env.metadata().clone(),
        payload: env.payload().clone(),
    })
}

/// Answers a dispatch that ended: its reply or error reply (a one-way's end is logged).
fn finish(
    node: &NodeInner,
    peer_rid: &zlink_codec::RoutingId,
    env: &Envelope,
    outcome: DispatchOutcome,
) {
    match outcome {
        DispatchOutcome::Reply {
            content_type,
            payload,
            ..
        } => answer(node, peer_rid, env, Ok((content_type, payload))),
        DispatchOutcome::ErrorReply { error, .. } => send_reply(
            node,
            peer_rid,
            env.source_rid(),
            Reply::to(
                env,
                ReplyStatus::Error,
                Bytes::from(crate::messaging::request_error_reply(&error).encode()),
            ),
        ),
        DispatchOutcome::NoReply(_) => log_send_end(&node.metrics, &outcome),
    }
}

/// Sends a request's reply or error reply (nothing for a one-way).
pub(crate) fn answer(
    node: &NodeInner,
    peer_rid: &zlink_codec::RoutingId,
    env: &Envelope,
    result: Result<(String, Vec<u8>), ZLinkError>,
) {
    if let Some(r) = reply_for(env, result) {
        send_reply(node, peer_rid, env.source_rid(), Some(r));
    }
}

/// The reply (or error reply) `result` makes for the request `env`; `None` for a one-way or a
/// content type the reply cannot carry (logged).
pub(crate) fn reply_for(
    env: &Envelope,
    result: Result<(String, Vec<u8>), ZLinkError>,
) -> Option<Reply> {
    let reply = match result {
        Ok((ct, payload)) => Reply::to(env, ReplyStatus::Ok, Bytes::from(payload)).map(|r| {
            match crate::messaging::static_content_type(&ct) {
                Some(st) => r.with_content_type_static(st),
                None => r.with_content_type_bytes(crate::messaging::content_type_bytes(&ct)),
            }
        }),
        Err(e) => {
            if env.reply_route().is_none() {
                tracing::debug!(error = %e, packet = env.packet_name(), "one-way frame not dispatched");
            }
            Reply::to(
                env,
                ReplyStatus::Error,
                Bytes::from(ErrorReply::from_error(&e).encode()),
            )
            .map(Ok)
        }
    };
    match reply {
        Some(Ok(r)) => Some(r),
        Some(Err(e)) => {
            tracing::warn!(%e, "reply content type rejected");
            None
        }
        None => None,
    }
}

/// Sends a reply to the request's original source when it is a Ready peer (a forwarded
/// request keeps its source, OperationId and reply route, spec 21 §7.3), else back on the
/// connection the request arrived on — for a forwarded request the forwarding node's, which
/// relays it to the caller (`forward.rs`).
fn send_reply(
    node: &NodeInner,
    peer_rid: &zlink_codec::RoutingId,
    source: &zlink_codec::RoutingId,
    reply: Option<Reply>,
) {
    let Some(reply) = reply else { return };
    let direct = (source != peer_rid)
        .then(|| node.transport.peer(source))
        .flatten();
    match direct.or_else(|| node.transport.peer(peer_rid)) {
        Some(p) => {
            if let Err(e) = p.send_reply(&reply) {
                tracing::debug!(peer = %peer_rid, %e, "reply not sent");
            }
        }
        None => tracing::debug!(peer = %peer_rid, "reply dropped: the connection is gone"),
    }
}
