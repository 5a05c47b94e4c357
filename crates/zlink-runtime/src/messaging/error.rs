//! The messaging error type and the 13 common error kinds (spec 06 §19, §20).
//!
//! [`ZLinkError`] is what every messaging operation of this module returns. Each variant says
//! which [`ErrorKind`] it is; an error that crosses the wire as an error reply keeps only its
//! kind and a bounded, sanitised [`ErrorMessage`] (see [`super::error_reply`]).

use std::fmt;
use std::sync::Arc;

use zlink_codec::records::ObjectKind;
use zlink_codec::{CodecError, StableType};
use zlink_transport::TransportErrorKind;

use super::error_parts::{
    CreationError, FramePart, InternalError, InvalidCall, InvalidText, MoveRefusal, PayloadError,
    RelocationStoreError, StaleReason, UnavailableReason, Unconfigured,
};
use super::handler::HandlerKey;
use super::shared_error::SharedError;
use super::target::Target;

/// The 13 common error kinds every language's public error carries (spec 06 §19).
///
/// The set is closed by the spec: no retry flag, no extra kinds. The numeric wire code of
/// each kind is [`ErrorKind::code`] (1..=13, in the order listed here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// No handler, send path, authority or target exists for the request.
    NotFound,
    /// A known target's route is not ready.
    Unavailable,
    /// A target admission seal, a filter or runtime policy rejected the operation.
    Rejected,
    /// New admission is closed because the host is shutting down.
    ShuttingDown,
    /// The operation's allowed deadline passed before it completed.
    DeadlineExceeded,
    /// No eligible node or not enough capacity.
    CapacityExceeded,
    /// An infrastructure failure or a failed handler (details stay on the failing side).
    InternalFailure,
    /// An object kind or stable type conflicts with the stored one.
    TypeMismatch,
    /// The thing being registered or created already exists.
    AlreadyExists,
    /// An invalid argument, state or unsupported operation (a local call error).
    InvalidOperation,
    /// A feature or dependency was used without being configured.
    NotConfigured,
    /// A peer sent something the protocol does not allow (unknown content type, bad frame).
    ProtocolError,
    /// Data the operation depended on was lost.
    DataLost,
}

impl ErrorKind {
    /// Every kind, in code order.
    pub const ALL: [ErrorKind; 13] = [
        Self::NotFound,
        Self::Unavailable,
        Self::Rejected,
        Self::ShuttingDown,
        Self::DeadlineExceeded,
        Self::CapacityExceeded,
        Self::InternalFailure,
        Self::TypeMismatch,
        Self::AlreadyExists,
        Self::InvalidOperation,
        Self::NotConfigured,
        Self::ProtocolError,
        Self::DataLost,
    ];

    /// The kind's wire code (1..=13; 0 is never a kind).
    pub fn code(self) -> u8 {
        match self {
            Self::NotFound => 1,
            Self::Unavailable => 2,
            Self::Rejected => 3,
            Self::ShuttingDown => 4,
            Self::DeadlineExceeded => 5,
            Self::CapacityExceeded => 6,
            Self::InternalFailure => 7,
            Self::TypeMismatch => 8,
            Self::AlreadyExists => 9,
            Self::InvalidOperation => 10,
            Self::NotConfigured => 11,
            Self::ProtocolError => 12,
            Self::DataLost => 13,
        }
    }

    /// The kind of a wire code, or `None` for a code no kind has.
    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.code() == code)
    }

    /// The kind's name as the spec writes it (`"NotFound"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::NotFound => "NotFound",
            Self::Unavailable => "Unavailable",
            Self::Rejected => "Rejected",
            Self::ShuttingDown => "ShuttingDown",
            Self::DeadlineExceeded => "DeadlineExceeded",
            Self::CapacityExceeded => "CapacityExceeded",
            Self::InternalFailure => "InternalFailure",
            Self::TypeMismatch => "TypeMismatch",
            Self::AlreadyExists => "AlreadyExists",
            Self::InvalidOperation => "InvalidOperation",
            Self::NotConfigured => "NotConfigured",
            Self::ProtocolError => "ProtocolError",
            Self::DataLost => "DataLost",
        }
    }
}

/// The common kind of a Location Store failure: no room is `CapacityExceeded` (spec 21 §4;
/// 28 §4), a refused admission `Unavailable` (spec 21 §5), anything else `InternalFailure`.
impl From<&zlink_location::LocationError> for ErrorKind {
    fn from(e: &zlink_location::LocationError) -> Self {
        match e {
            zlink_location::LocationError::CapacityExceeded => Self::CapacityExceeded,
            zlink_location::LocationError::Admission(_) => Self::Unavailable,
            _ => Self::InternalFailure,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A bounded, sanitised error text that may cross the wire in an error reply.
///
/// At most [`ErrorMessage::MAX_LEN`] (256) bytes of UTF-8 with no control characters: control
/// characters (line breaks included) become spaces and longer text is cut at a character
/// boundary, so a remote peer can never inject multi-line or unbounded text into logs.
///
/// ```
/// use zlink_runtime::handler::ErrorMessage;
/// let m = ErrorMessage::sanitise("line one\nline two");
/// assert_eq!(m.as_str(), "line one line two");
/// assert_eq!(ErrorMessage::sanitise(&"x".repeat(300)).as_str().len(), 256);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ErrorMessage(String);

impl ErrorMessage {
    /// Largest message length in UTF-8 bytes.
    pub const MAX_LEN: usize = 256;

    /// Sanitises any text: control characters become spaces, then the text is cut to at most
    /// [`Self::MAX_LEN`] bytes at a character boundary.
    pub fn sanitise(text: &str) -> Self {
        let mut out = String::with_capacity(text.len().min(Self::MAX_LEN));
        for c in text.chars() {
            let c = if c.is_control() { ' ' } else { c };
            if out.len() + c.len_utf8() > Self::MAX_LEN {
                break;
            }
            out.push(c);
        }
        Self(out)
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ErrorMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An application-side failure a handler or filter reports (the cause stays local).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The error of every messaging operation (spec 06 §19, §20).
///
/// Cheap to clone (causes are shared), so one dispatch failure can be both returned to a filter
/// from `next` and turned into the error reply.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ZLinkError {
    /// No handler is registered under the inbound frame's dispatch key; no handler ran.
    #[error("no handler is registered for {key}")]
    NoHandler {
        /// The dispatch key.
        key: HandlerKey,
    },
    /// The same dispatch key was registered twice (a startup configuration error).
    #[error("a handler is already registered for {key}")]
    DuplicateHandler {
        /// The dispatch key.
        key: HandlerKey,
    },
    /// A packet name is invalid (spec 06 §9; see `PacketName`).
    #[error("invalid packet name: {reason}")]
    InvalidPacketName {
        /// Why.
        reason: InvalidText,
    },
    /// A metadata key or value is invalid.
    #[error("invalid metadata key: {reason}")]
    InvalidMetadataKey {
        /// Why.
        reason: InvalidText,
    },
    /// The metadata's total UTF-8 size is above 1,024 bytes (spec 06 §7).
    #[error("metadata is {actual} bytes, more than the {max}-byte bound")]
    MetadataTooLarge {
        /// Its total size.
        actual: usize,
        /// The bound.
        max: usize,
    },
    /// A filter did not call `next` on a request: the handler did not run (spec 06 §10).
    #[error("a handler filter rejected the request")]
    RejectedByFilter,
    /// A filter called `next` a second time; the handler did not run again (spec 06 §10).
    #[error("a handler filter called next more than once")]
    NextCalledTwice,
    /// The wire content type is not a registry key, compared verbatim (spec 06 §12).
    #[error("content type {content_type:?} is not registered")]
    UnknownContentType {
        /// The content type as received.
        content_type: String,
    },
    /// Part of an inbound frame or reply is malformed.
    #[error("malformed {part}: {detail}")]
    MalformedFrame {
        /// Which part.
        part: FramePart,
        /// What is wrong (sanitised, bounded).
        detail: ErrorMessage,
    },
    /// A value could not be encoded to send or reply.
    #[error("encoding a {type_name} value failed")]
    Encode {
        /// The declared type's name (diagnostic only).
        type_name: &'static str,
        /// The codec's error.
        #[source]
        source: SharedError<CodecError>,
    },
    /// A scoped dependency was requested that has no registered factory.
    #[error("no scoped dependency of type {type_name} is configured")]
    DependencyNotConfigured {
        /// The requested type's name (diagnostic only).
        type_name: &'static str,
    },
    /// A handler or filter failed; its cause stays on this side of the wire.
    ///
    /// Also what a request's handler (node-direct, Channel, Actor or Spot) that failed with a
    /// local call error (`InvalidOperation`, `NotConfigured`) ends with: that error is not the
    /// caller's (spec 06 §20), so the request is `InternalFailure` on either node, with the
    /// handler's error as the source on the handler's node.
    #[error("the application handler for packet {packet:?} failed")]
    HandlerFailed {
        /// The packet name.
        packet: String,
        /// The application's error: [`std::error::Error::source`] of this error is it itself
        /// (it downcasts to the application's type).
        #[source]
        source: SharedError,
    },
    /// A handler or filter deliberately completed with a common kind (e.g. `Rejected`).
    #[error("{kind}: {message}")]
    Application {
        /// The kind the application chose.
        kind: ErrorKind,
        /// The message (bounded, sanitised; it crosses the wire).
        message: ErrorMessage,
    },
    /// No route exists for the call: no MeshNode of that MeshName, no peer with that RID, or a
    /// ChannelName not in the process-local route index (spec 06 §6, §20). Nothing was sent.
    #[error("no route to {target}")]
    NoRoute {
        /// The target.
        target: Target,
    },
    /// The target is known but not ready, no channel member is eligible, or the connection
    /// went down before the reply arrived (spec 06 §20). A request that was sent is never
    /// resent to another node.
    #[error("{target} is unavailable: {reason}")]
    Unavailable {
        /// The target.
        target: Target,
        /// Why.
        reason: UnavailableReason,
    },
    /// The host is shutting down: new admission is closed, or shutdown ended the call
    /// (spec 28 §10).
    #[error("the host is shutting down")]
    ShuttingDown,
    /// No reply arrived within the request's reply timeout (spec 06 §7); a late reply is
    /// discarded.
    #[error("no reply within {timeout:?}")]
    ReplyTimeout {
        /// The reply timeout.
        timeout: std::time::Duration,
    },
    /// A one-way send was not admitted to the outbound queue within its send timeout.
    #[error("the send was not admitted within {timeout:?}")]
    SendTimeout {
        /// The send timeout.
        timeout: std::time::Duration,
    },
    /// The encoded message is larger than the transport's fixed frame limit.
    #[error("the encoded message is {len} bytes, more than the {max}-byte frame limit")]
    MessageTooLarge {
        /// The encoded frame length.
        len: usize,
        /// The frame limit.
        max: usize,
    },
    /// A live relocation cannot carry the object's state (spec 28 §5, §8 `StateIncompatible`):
    /// the adapter's capture or the target's restore failed on every allowed attempt, or the
    /// captured state is larger than 64 MiB. The object did not move. Its kind is
    /// `TypeMismatch` (the state does not fit what the target's type can restore), so a
    /// target's refusal keeps its meaning across the wire.
    #[error("the state of {target} cannot be relocated: {reason}")]
    StateIncompatible {
        /// The object.
        target: Target,
        /// Why (bounded, sanitised).
        reason: ErrorMessage,
    },
    /// The peer answered with an error reply: only from another node. A request answered on
    /// the caller's own node (an Actor or Spot there, a MeshNode request to itself, a Channel
    /// request this node serves) ends with the error the handler, a filter or the runtime
    /// failed with instead — its own variant and typed source, of this same kind; the error
    /// reply keeps only the kind and the sanitised text ([`Self::reply_message`]).
    #[error("remote {kind}: {message}")]
    Remote {
        /// The kind the peer reported.
        kind: ErrorKind,
        /// The peer's message (bounded, sanitised).
        message: ErrorMessage,
    },
    /// A request handler completed without a reply (a request always gets one):
    /// `InternalFailure`.
    #[error("the handler produced no reply")]
    NoReply,
    /// An authority fence the work depended on is stale: the record changed, moved or names
    /// another run (spec 21 §7). `Unavailable`: a later call reads the record again.
    #[error("stale authority fence: {reason}")]
    StaleFence {
        /// Which fence and why.
        reason: StaleReason,
    },
    /// The object's mailbox has no room for the message: `CapacityExceeded`.
    #[error("the object's mailbox is full")]
    MailboxFull,
    /// The object's activation is closing and takes no more work: `Unavailable`.
    #[error("the activation is closing")]
    ActivationClosing,
    /// An operational location query (`locate`, `list_locations`: spec 21 §7.4) could not
    /// read the Location Store: `Unavailable` (the table's "Store query failure" row), never
    /// an absent object; the location runtime's typed error is kept as the source.
    #[error("the location query could not read the location store ({:?})", .source.kind())]
    LocationQueryFailed {
        /// The location runtime's error.
        #[source]
        source: SharedError<zlink_location::LocationError>,
    },
    /// A Location Store operation failed. Its kind is the location error's common kind
    /// (`ErrorKind::from(&LocationError)`): no room is `CapacityExceeded` (spec 21 §4; 28 §4),
    /// a refused admission `Unavailable` (spec 21 §5), anything else `InternalFailure`.
    #[error("the location store operation failed ({:?})", .source.kind())]
    LocationStore {
        /// The location runtime's error.
        #[source]
        source: SharedError<zlink_location::LocationError>,
    },
    /// A Relocation Store step failed (its kind is [`RelocationStoreError::kind`]).
    #[error(transparent)]
    RelocationStore(RelocationStoreError),
    /// The transport refused a call: an exhausted id issuer is `InternalFailure`, an argument
    /// beyond its bounds `InvalidOperation`, shutdown `ShuttingDown`, anything else
    /// `Unavailable`.
    #[error("the transport refused the call ({:?})", .source.kind())]
    Transport {
        /// The transport's error.
        #[source]
        source: SharedError<zlink_transport::TransportError>,
    },
    /// The transport refused a manual peer intent: one for the endpoint already exists
    /// (`AlreadyExists`, the kind of every argument refusal of an intent).
    #[error("a manual peer intent for {endpoint} already exists")]
    ManualPeerExists {
        /// The endpoint, as text.
        endpoint: String,
        /// The transport's error.
        #[source]
        source: SharedError<zlink_transport::TransportError>,
    },
    /// A runtime-internal payload (a command body, an object message, a ref, an activation
    /// envelope) is malformed: `ProtocolError`.
    #[error("malformed {what}")]
    MalformedPayload {
        /// Which payload (diagnostic only).
        what: &'static str,
        /// What is wrong with it.
        #[source]
        source: PayloadError,
    },
    /// A runtime-internal step failed: `InternalFailure`.
    #[error(transparent)]
    Internal(InternalError),
    /// The relocation adapter of an object type failed (its capture): `InternalFailure`; the
    /// application's cause stays on this side of the wire.
    #[error("the relocation adapter's {step} failed")]
    AdapterFailed {
        /// Which adapter step.
        step: &'static str,
        /// The application's error: [`std::error::Error::source`] of this error is it itself.
        #[source]
        source: SharedError,
    },
    /// A creation did not give a ref (its kind is [`CreationError::kind`]).
    #[error(transparent)]
    Creation(CreationError),
    /// The object exists as another kind or stable type than the call names: `TypeMismatch`.
    #[error("{target} is a {} of type {:?}", .kind.as_str(), .stable_type.as_str())]
    TypeMismatch {
        /// The object.
        target: Target,
        /// Its stored kind.
        kind: ObjectKind,
        /// Its stored type.
        stable_type: StableType,
    },
    /// A live relocation refused the message or the move, with the kind the relocation layer
    /// gives its typed cause (a follow refusal, a unit-gate refusal, a target's refusal).
    #[error("the relocation refused: {what}")]
    RelocationRefused {
        /// The common kind of the cause.
        kind: ErrorKind,
        /// What was refused (diagnostic only).
        what: &'static str,
        /// The typed cause, when there is one.
        #[source]
        source: Option<SharedError>,
    },
    /// A move's owner change applied and the source handed the object to its new owner `to`,
    /// but the object's record could not be read back to confirm it before
    /// `storeFailureGrace` passed (spec 21 §10): the object moved; only the answer is missing.
    /// `Unavailable`: its location can be read again once the Store answers.
    #[error("{target} moved to {to}, but its record could not be confirmed")]
    MovedUnconfirmed {
        /// The object.
        target: Target,
        /// The node it moved to.
        to: zlink_codec::RoutingId,
        /// The last failed read.
        #[source]
        source: SharedError<zlink_location::LocationError>,
    },
    /// The completion result of this request, which ran on the object's new owner after a
    /// move, was lost before it was delivered (spec 21 §9.3, §10): its stored payload went
    /// missing, or the move went stale (the record named another owner, generation or move)
    /// before the result was recorded, so it is never delivered unrecorded. `DataLost`: the
    /// request ran; sending it again runs it again.
    #[error("the completion result of this request was lost")]
    CompletionLost,
    /// The operation did not finish before its own deadline: `DeadlineExceeded`.
    #[error("the {operation} did not finish before its deadline")]
    DeadlinePassed {
        /// Which operation (diagnostic only).
        operation: &'static str,
    },
    /// The call needs something that is not configured: `NotConfigured`.
    #[error(transparent)]
    NotConfigured(Unconfigured),
    /// A local call with an invalid argument or in a state that does not allow it:
    /// `InvalidOperation`.
    #[error(transparent)]
    InvalidCall(#[from] InvalidCall),
    /// An object timer was not started: the kind is [`TimerError::kind`](super::TimerError::kind).
    #[error(transparent)]
    Timer(#[from] super::TimerError),
}

impl ZLinkError {
    /// The common kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::NoHandler { .. } => ErrorKind::NotFound,
            Self::DuplicateHandler { .. } => ErrorKind::AlreadyExists,
            Self::InvalidPacketName { .. }
            | Self::InvalidMetadataKey { .. }
            | Self::MetadataTooLarge { .. }
            | Self::NextCalledTwice => ErrorKind::InvalidOperation,
            Self::RejectedByFilter => ErrorKind::Rejected,
            Self::UnknownContentType { .. } | Self::MalformedFrame { .. } => {
                ErrorKind::ProtocolError
            }
            Self::Encode { .. } | Self::HandlerFailed { .. } => ErrorKind::InternalFailure,
            Self::DependencyNotConfigured { .. } => ErrorKind::NotConfigured,
            Self::StateIncompatible { .. } => ErrorKind::TypeMismatch,
            Self::Application { kind, .. } | Self::Remote { kind, .. } => *kind,
            Self::NoRoute { .. } => ErrorKind::NotFound,
            Self::Unavailable { .. } => ErrorKind::Unavailable,
            Self::ShuttingDown => ErrorKind::ShuttingDown,
            Self::ReplyTimeout { .. } | Self::SendTimeout { .. } => ErrorKind::DeadlineExceeded,
            Self::MessageTooLarge { .. } => ErrorKind::InvalidOperation,
            Self::NoReply | Self::Internal(_) | Self::AdapterFailed { .. } => {
                ErrorKind::InternalFailure
            }
            Self::StaleFence { .. } | Self::ActivationClosing | Self::MovedUnconfirmed { .. } => {
                ErrorKind::Unavailable
            }
            Self::MailboxFull => ErrorKind::CapacityExceeded,
            Self::LocationStore { source } => ErrorKind::from(&**source),
            Self::LocationQueryFailed { .. } => ErrorKind::Unavailable,
            Self::RelocationStore(e) => e.kind(),
            Self::Transport { source } => match source.kind() {
                TransportErrorKind::Exhausted => ErrorKind::InternalFailure,
                TransportErrorKind::InvalidArgument => ErrorKind::InvalidOperation,
                TransportErrorKind::ShuttingDown => ErrorKind::ShuttingDown,
                _ => ErrorKind::Unavailable,
            },
            Self::ManualPeerExists { .. } => ErrorKind::AlreadyExists,
            Self::MalformedPayload { .. } => ErrorKind::ProtocolError,
            Self::Creation(e) => e.kind(),
            Self::TypeMismatch { .. } => ErrorKind::TypeMismatch,
            Self::DeadlinePassed { .. } => ErrorKind::DeadlineExceeded,
            Self::RelocationRefused { kind, .. } => *kind,
            Self::CompletionLost => ErrorKind::DataLost,
            Self::NotConfigured(_) => ErrorKind::NotConfigured,
            Self::InvalidCall(_) => ErrorKind::InvalidOperation,
            Self::Timer(e) => e.kind(),
        }
    }

    /// A Location Store failure (see [`Self::LocationStore`] for its kind).
    pub(crate) fn location_store(e: zlink_location::LocationError) -> Self {
        Self::LocationStore {
            source: Arc::new(e).into(),
        }
    }

    /// A transport refusal (see [`Self::Transport`] for its kind).
    pub(crate) fn transport(e: zlink_transport::TransportError) -> Self {
        Self::Transport {
            source: Arc::new(e).into(),
        }
    }

    /// A malformed runtime-internal payload `what`.
    pub(crate) fn malformed_payload(what: &'static str) -> impl Fn(PayloadError) -> Self + Copy {
        move |source| Self::MalformedPayload { what, source }
    }

    /// A handler or filter failure whose cause must not cross the wire (`InternalFailure`).
    pub fn handler_failed(packet: &str, source: impl Into<BoxError>) -> Self {
        Self::HandlerFailed {
            packet: packet.to_owned(),
            source: SharedError::from(source.into()),
        }
    }

    /// An application result of a chosen common kind with a message that crosses the wire:
    /// for handlers and filters only (the runtime's own failures are typed variants).
    pub fn application(kind: ErrorKind, message: &str) -> Self {
        Self::Application {
            kind,
            message: ErrorMessage::sanitise(message),
        }
    }

    /// A malformed-frame error with a sanitised detail.
    pub(crate) fn malformed(part: FramePart, detail: impl fmt::Display) -> Self {
        Self::MalformedFrame {
            part,
            detail: ErrorMessage::sanitise(&detail.to_string()),
        }
    }

    /// The message an error reply carries for this error: the error's own text, sanitised.
    /// Causes ([`std::error::Error::source`]) are never included.
    pub fn reply_message(&self) -> ErrorMessage {
        match self {
            Self::Application { message, .. } | Self::Remote { message, .. } => message.clone(),
            other => ErrorMessage::sanitise(&other.to_string()),
        }
    }
}

/// A stale authority fence (`Unavailable`).
impl From<StaleReason> for ZLinkError {
    fn from(reason: StaleReason) -> Self {
        Self::StaleFence { reason }
    }
}

/// A move the relocation machinery refused (`InvalidOperation`).
impl From<MoveRefusal> for ZLinkError {
    fn from(reason: MoveRefusal) -> Self {
        Self::InvalidCall(InvalidCall::Move(reason))
    }
}

#[cfg(test)]
mod tests;
