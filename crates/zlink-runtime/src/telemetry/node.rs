//! The messaging instruments of one MeshNode, resolved once when the node is built: the
//! per-message path only increments a held handle (no registry lookup per message).

use std::time::Instant;

use metrics::{Counter, Histogram};

use super::labels::{CallOutcome, DropReason, MessageKind, SendPath};
use super::names;

/// Sent, received and dropped messages and request latency of one MeshNode.
#[derive(Debug, Clone)]
pub(crate) struct NodeMetrics {
    /// `[kind][path]`: request/one-way × remote/local.
    sent: [[Counter; 2]; 2],
    /// `[kind]`.
    received: [Counter; 2],
    /// In [`DropReason::ALL`] order.
    dropped: [Counter; DropReason::ALL.len()],
    /// `[outcome]`: ok, failed.
    request_duration: [Histogram; 2],
}

const KINDS: [MessageKind; 2] = [MessageKind::Request, MessageKind::OneWay];
const PATHS: [SendPath; 2] = [SendPath::Remote, SendPath::Local];
const OUTCOMES: [CallOutcome; 2] = [CallOutcome::Ok, CallOutcome::Failed];

fn kind_index(kind: MessageKind) -> usize {
    match kind {
        MessageKind::Request => 0,
        MessageKind::OneWay => 1,
    }
}

impl NodeMetrics {
    /// Resolves every handle with the recorder installed now (none: no-op handles).
    pub(crate) fn new() -> Self {
        super::describe();
        Self {
            sent: KINDS.map(|k| {
                PATHS.map(|p| {
                    metrics::counter!(names::MESSAGES_SENT, "kind" => k.as_str(), "path" => p.as_str())
                })
            }),
            received: KINDS
                .map(|k| metrics::counter!(names::MESSAGES_RECEIVED, "kind" => k.as_str())),
            dropped: DropReason::ALL
                .map(|r| metrics::counter!(names::MESSAGES_DROPPED, "reason" => r.as_str())),
            request_duration: OUTCOMES.map(|o| {
                metrics::histogram!(names::REQUEST_DURATION, "outcome" => o.as_str())
            }),
        }
    }

    /// One message sent.
    pub(crate) fn sent(&self, kind: MessageKind, path: SendPath) {
        let p = match path {
            SendPath::Remote => 0,
            SendPath::Local => 1,
        };
        self.sent[kind_index(kind)][p].increment(1);
    }

    /// One message arrived from a peer.
    pub(crate) fn received(&self, kind: MessageKind) {
        self.received[kind_index(kind)].increment(1);
    }

    /// One inbound message dropped for `reason`.
    pub(crate) fn dropped(&self, reason: DropReason) {
        let i = DropReason::ALL
            .iter()
            .position(|r| *r == reason)
            .unwrap_or(0);
        self.dropped[i].increment(1);
    }

    /// A request sent at `started` ended now, answered (`ok`) or not.
    pub(crate) fn request_ended(&self, started: Instant, ok: bool) {
        let i = if ok { 0 } else { 1 };
        self.request_duration[i].record(started.elapsed().as_secs_f64());
    }
}
