//! The transport-neutral inbound application frame and the dispatch outcome (spec 06 §9, §20).
//!
//! The mesh transport fills an [`InboundFrame`] from a received application frame and hands it
//! to the [`Dispatcher`](super::Dispatcher); the [`DispatchOutcome`] says what, if anything,
//! goes back to the sender. Nothing here knows sockets, queues or peer lifecycles.

use bytes::Bytes;

use super::context::{InboundTarget, RouteKind};
use super::error::{ErrorKind, ZLinkError};
use super::error_reply::ErrorReply;

/// The transport's correlation of a request with its reply (for example OperationId and
/// ReplyRouteId). Opaque here: the dispatcher hands it back unchanged in the outcome.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Correlation(Bytes);

impl Correlation {
    /// Wraps the transport's correlation bytes.
    pub fn new(bytes: impl Into<Bytes>) -> Self {
        Self(bytes.into())
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// Whether the sender waits for a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReplyExpectation {
    /// A one-way send: nothing goes back, whatever happens.
    None,
    /// A request: exactly one reply or error reply goes back under this correlation.
    Reply(Correlation),
}

/// An inbound application frame, as the mesh transport received it.
///
/// `packet`, `content_type`, `metadata` and `payload` are the raw bytes off the wire; the
/// dispatcher validates each (packet name bounds, verbatim content-type lookup,
/// `metadata-v1`) so a malformed frame becomes a `ProtocolError`, not a panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InboundFrame {
    /// Which handler namespace the frame addresses and where it came from.
    pub target: InboundTarget,
    /// Send (no reply) or request (reply under a correlation).
    pub expect: ReplyExpectation,
    /// The packet name, UTF-8.
    pub packet: Bytes,
    /// The payload's content type, exactly as received.
    pub content_type: Bytes,
    /// The metadata in `metadata-v1` form (empty for no metadata).
    pub metadata: Bytes,
    /// The payload bytes.
    pub payload: Bytes,
}

impl InboundFrame {
    /// Send or request.
    pub(crate) fn route_kind(&self) -> RouteKind {
        match self.expect {
            ReplyExpectation::None => RouteKind::Send,
            ReplyExpectation::Reply(_) => RouteKind::Request,
        }
    }
}

/// How a one-way send's dispatch ended. Nothing is sent back to the sender in any case; the
/// transport may record it (drop metrics, message-flow records).
#[derive(Debug, Clone)]
pub(crate) enum SendEnd {
    /// The handler ran and completed normally.
    Handled,
    /// A filter did not call `next`: the handler did not run and the dispatch just ended.
    EndedByFilter,
    /// The dispatch failed (no handler, bad frame, failed handler or filter).
    Failed(ZLinkError),
}

/// What a dispatch produced.
#[derive(Debug, Clone)]
pub(crate) enum DispatchOutcome {
    /// A request's business reply, to send back under `correlation`.
    Reply {
        /// The request's correlation (the mesh answers under the frame's own; the messaging
        /// tests check the two agree).
        #[cfg_attr(
            not(test),
            expect(dead_code, reason = "checked by the messaging tests")
        )]
        correlation: Correlation,
        /// The reply's canonical content type.
        content_type: String,
        /// The encoded reply.
        payload: Vec<u8>,
    },
    /// A request's error reply, to send back under `correlation`.
    ErrorReply {
        /// The request's correlation (the mesh answers under the frame's own; the messaging
        /// tests check the two agree).
        #[cfg_attr(
            not(test),
            expect(dead_code, reason = "checked by the messaging tests")
        )]
        correlation: Correlation,
        /// What the dispatch failed with, as it failed (a filter's refusal is
        /// [`ZLinkError::RejectedByFilter`], a request handler without a reply
        /// [`ZLinkError::NoReply`]). To another node it goes as [`request_error_reply`]; a
        /// caller on this node gets [`same_node_error`].
        error: ZLinkError,
    },
    /// A one-way send ended; nothing goes back.
    NoReply(SendEnd),
}

/// The error reply a request's dispatch that failed with `error` sends to another node: its
/// kind and sanitised text, never its cause. Local call errors (invalid argument/state,
/// missing configuration) are not remote results (spec 06 §20): a handler or filter that fails
/// with one answers `InternalFailure`, keeping only the sanitised text.
pub(crate) fn request_error_reply(error: &ZLinkError) -> ErrorReply {
    let reply = ErrorReply::from_error(error);
    if is_local_call_error(error) {
        tracing::warn!(%error, "request dispatch failed with a local error");
        return ErrorReply::new(ErrorKind::InternalFailure, reply.message().clone());
    }
    reply
}

/// What a caller on this node gets when its request to this node (`packet`) failed with
/// `error` in the dispatch: the error itself, of the kind [`request_error_reply`] gives a
/// caller on another node ([`handler_error`] for a local call error of the handler or a
/// filter).
pub(crate) fn same_node_error(error: ZLinkError, packet: &str) -> ZLinkError {
    handler_error(error, packet)
}

/// The result of a request whose handler (or filter) for `packet` failed with `error`. A
/// local call error (invalid argument/state, missing configuration) is no result of the
/// caller's own call (spec 06 §20: a local call error is not turned into a remote error
/// reply): it becomes [`ZLinkError::HandlerFailed`] (`InternalFailure`, the kind of a failed
/// handler) with the error as its source. Any other error is the result as it is. Actor and
/// Spot handlers' errors go through it where the handler returns, so a caller on either node
/// sees the kind a node-direct request's caller sees; the runtime's own refusals around the
/// handler (no object, route, mailbox room) never do.
pub(crate) fn handler_error(error: ZLinkError, packet: &str) -> ZLinkError {
    if is_local_call_error(&error) {
        tracing::warn!(%error, packet, "a request handler failed with a local call error");
        return ZLinkError::HandlerFailed {
            packet: packet.to_owned(),
            source: super::SharedError::new(error),
        };
    }
    error
}

/// An error of kind `InvalidOperation` or `NotConfigured`: a local call's.
fn is_local_call_error(error: &ZLinkError) -> bool {
    matches!(
        error.kind(),
        ErrorKind::InvalidOperation | ErrorKind::NotConfigured
    )
}
