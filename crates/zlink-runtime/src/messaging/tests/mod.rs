//! Behaviour tests of the messaging core, one per spec 06 §25 item of "Handler registration
//! and dispatch" and "Codec" (classic fanout excepted), plus the rules behind them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use zlink_codec::payload::Registry;
use zlink_codec::{ChannelName, MeshName, RoutingId};

use super::*;

mod codecs;
mod dispatch;
mod filters;

/// A request with a JSON-friendly shape.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct Ping {
    pub(super) n: u32,
}
impl Message for Ping {
    const PACKET: &'static str = "Ping";
}
impl Request for Ping {
    type Reply = Pong;
}

/// Ping's reply.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct Pong {
    pub(super) n: u32,
}

/// A one-way message.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct Note {
    pub(super) text: String,
}
impl Message for Note {
    const PACKET: &'static str = "Note";
}

pub(super) fn mesh() -> MeshName {
    MeshName::new("game").unwrap()
}

pub(super) fn channel(name: &str) -> ChannelName {
    ChannelName::new(name).unwrap()
}

pub(super) fn node_target() -> InboundTarget {
    InboundTarget::NodeDirect {
        mesh: mesh(),
        source: RoutingId::new(*b"src").unwrap(),
        target: RoutingId::new(*b"dst").unwrap(),
    }
}

pub(super) fn channel_target(name: &str) -> InboundTarget {
    InboundTarget::Channel {
        channel: channel(name),
        mesh: Some(mesh()),
    }
}

pub(super) fn correlation() -> Correlation {
    Correlation::new(&b"op-1"[..])
}

/// A request frame carrying `payload` as JSON.
pub(super) fn request<T: serde::Serialize>(
    target: InboundTarget,
    packet: &str,
    payload: &T,
) -> InboundFrame {
    InboundFrame {
        target,
        expect: ReplyExpectation::Reply(correlation()),
        packet: Bytes::copy_from_slice(packet.as_bytes()),
        content_type: Bytes::from_static(b"application/json"),
        metadata: Bytes::new(),
        payload: Bytes::from(serde_json::to_vec(payload).unwrap()),
    }
}

/// A send frame carrying `payload` as JSON.
pub(super) fn send<T: serde::Serialize>(
    target: InboundTarget,
    packet: &str,
    payload: &T,
) -> InboundFrame {
    InboundFrame {
        expect: ReplyExpectation::None,
        ..request(target, packet, payload)
    }
}

/// Dispatches with a fresh cancellation signal.
pub(super) async fn dispatch(d: &Dispatcher, frame: InboundFrame) -> DispatchOutcome {
    d.dispatch(frame, Cancellation::new()).await
}

/// The error reply of an outcome (panics otherwise).
pub(super) fn error_reply(outcome: DispatchOutcome) -> ErrorReply {
    match outcome {
        DispatchOutcome::ErrorReply {
            correlation: c,
            error,
        } => {
            assert_eq!(c, correlation());
            // What another node receives.
            crate::messaging::request_error_reply(&error)
        }
        other => panic!("expected an error reply, got {other:?}"),
    }
}

/// The decoded typed reply of an outcome (panics otherwise).
pub(super) fn reply<R: Request>(d: &Dispatcher, outcome: DispatchOutcome) -> R::Reply {
    match outcome {
        DispatchOutcome::Reply {
            correlation: c,
            content_type,
            payload,
        } => {
            assert_eq!(c, correlation());
            decode_reply::<R>(
                d.codecs(),
                InboundReply::Reply {
                    content_type: content_type.as_bytes(),
                    payload: &payload,
                },
            )
            .unwrap()
        }
        other => panic!("expected a reply, got {other:?}"),
    }
}

/// Counts how many times something ran, was created or was dropped.
#[derive(Debug, Clone, Default)]
pub(super) struct Counter(Arc<AtomicUsize>);

impl Counter {
    pub(super) fn bump(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    pub(super) fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Bumps `dropped` exactly when dropped; bumps `created` when made.
#[derive(Debug)]
pub(super) struct Tracked {
    dropped: Counter,
}

impl Tracked {
    pub(super) fn new(created: &Counter, dropped: &Counter) -> Self {
        created.bump();
        Self {
            dropped: dropped.clone(),
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.dropped.bump();
    }
}

/// A JSON-only ping dispatcher whose node request handler bumps `runs`.
pub(super) fn counting_ping(runs: &Counter) -> DispatcherBuilder {
    let runs = runs.clone();
    Dispatcher::builder(Registry::json_only()).node_request::<Ping, _, _>(mesh(), move |p, _| {
        let runs = runs.clone();
        async move {
            runs.bump();
            Ok(Pong { n: p.n + 1 })
        }
    })
}
