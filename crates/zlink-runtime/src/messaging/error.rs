//! The messaging error type and the 13 common error kinds (spec 06 §19, §20).
//!
//! [`ZLinkError`] is what every messaging operation of this module returns. Each variant says
//! which [`ErrorKind`] it is; an error that crosses the wire as an error reply keeps only its
//! kind and a bounded, sanitised [`ErrorMessage`] (see [`super::error_reply`]).

use std::fmt;
use std::sync::Arc;

use zlink_codec::CodecError;

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

/// Which part of an inbound frame or reply is malformed (a [`ZLinkError::MalformedFrame`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FramePart {
    /// The packet name.
    PacketName,
    /// The metadata bytes.
    Metadata,
    /// The payload bytes (they do not decode as the handler's declared type).
    Payload,
    /// An error reply.
    ErrorReply,
}

impl fmt::Display for FramePart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::PacketName => "packet name",
            Self::Metadata => "metadata",
            Self::Payload => "payload",
            Self::ErrorReply => "error reply",
        })
    }
}

/// Why a packet name or metadata entry is invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InvalidText {
    /// It is empty.
    Empty,
    /// It is longer than its bound.
    TooLong {
        /// Its length in UTF-8 bytes.
        actual: usize,
        /// The bound.
        max: usize,
    },
    /// It contains a control character (NUL included).
    ControlCharacter,
}

impl fmt::Display for InvalidText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("empty"),
            Self::TooLong { actual, max } => write!(f, "{actual} bytes, more than {max}"),
            Self::ControlCharacter => f.write_str("contains a control character"),
        }
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
        /// The dispatch key, as text.
        key: String,
    },
    /// The same dispatch key was registered twice (a startup configuration error).
    #[error("a handler is already registered for {key}")]
    DuplicateHandler {
        /// The dispatch key, as text.
        key: String,
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
        source: Arc<CodecError>,
    },
    /// A scoped dependency was requested that has no registered factory.
    #[error("no scoped dependency of type {type_name} is configured")]
    DependencyNotConfigured {
        /// The requested type's name (diagnostic only).
        type_name: &'static str,
    },
    /// A handler or filter failed; its cause stays on this side of the wire.
    #[error("the application handler for packet {packet:?} failed")]
    HandlerFailed {
        /// The packet name.
        packet: String,
        /// The application's error.
        #[source]
        source: Arc<dyn std::error::Error + Send + Sync + 'static>,
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
        /// The target, as text.
        target: String,
    },
    /// The target is known but not ready, no channel member is eligible, or the connection
    /// went down before the reply arrived (spec 06 §20). A request that was sent is never
    /// resent to another node.
    #[error("{target} is unavailable: {reason}")]
    Unavailable {
        /// The target, as text.
        target: String,
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
        /// The object, as text.
        target: String,
        /// Why (bounded, sanitised).
        reason: ErrorMessage,
    },
    /// The peer answered with an error reply.
    #[error("remote {kind}: {message}")]
    Remote {
        /// The kind the peer reported.
        kind: ErrorKind,
        /// The peer's message (bounded, sanitised).
        message: ErrorMessage,
    },
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
        }
    }

    /// A handler or filter failure whose cause must not cross the wire (`InternalFailure`).
    pub fn handler_failed(packet: &str, source: impl Into<BoxError>) -> Self {
        Self::HandlerFailed {
            packet: packet.to_owned(),
            source: Arc::from(source.into()),
        }
    }

    /// An application result of a chosen common kind with a message that crosses the wire.
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

/// Why a known target is [`ZLinkError::Unavailable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UnavailableReason {
    /// The peer is known (discovered or a manual intent) but has no Ready connection.
    NotConnected,
    /// The channel has registered members but none is Ready with a positive weight.
    NoEligibleMember,
    /// The connection went down after the request was sent; it was not resent.
    ConnectionLost,
    /// The host is not serving yet.
    NotServing,
    /// The owner's local admission deadline has passed (its owner lease could not be renewed
    /// in time, spec 21 §5): it starts no new object work.
    AdmissionClosed,
}

impl fmt::Display for UnavailableReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotConnected => "no ready connection",
            Self::NoEligibleMember => "no ready member with a positive weight",
            Self::ConnectionLost => "the connection went down before the reply",
            Self::NotServing => "the host is not serving",
            Self::AdmissionClosed => "the owner's admission deadline has passed",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_code() {
        let mut codes: Vec<u8> = ErrorKind::ALL.iter().map(|k| k.code()).collect();
        for kind in ErrorKind::ALL {
            assert_eq!(ErrorKind::from_code(kind.code()), Some(kind));
        }
        codes.dedup();
        assert_eq!(codes, (1..=13).collect::<Vec<u8>>());
        assert_eq!(ErrorKind::from_code(0), None);
        assert_eq!(ErrorKind::from_code(14), None);
    }

    #[test]
    fn message_at_the_bound_is_kept_and_one_past_is_cut() {
        let at = "a".repeat(ErrorMessage::MAX_LEN);
        assert_eq!(ErrorMessage::sanitise(&at).as_str(), at);
        let past = "a".repeat(ErrorMessage::MAX_LEN + 1);
        assert_eq!(
            ErrorMessage::sanitise(&past).as_str().len(),
            ErrorMessage::MAX_LEN
        );
    }

    #[test]
    fn message_is_cut_at_a_character_boundary() {
        // 255 ASCII bytes then a 2-byte character: the character does not fit.
        let text = format!("{}é", "a".repeat(255));
        assert_eq!(ErrorMessage::sanitise(&text).as_str().len(), 255);
    }

    #[test]
    fn control_characters_become_spaces() {
        assert_eq!(
            ErrorMessage::sanitise("a\r\nb\0c\u{1b}").as_str(),
            "a  b c "
        );
    }

    #[test]
    fn handler_failure_reply_message_hides_the_cause() {
        let err = ZLinkError::handler_failed("Ping", "database password is hunter2");
        assert_eq!(err.kind(), ErrorKind::InternalFailure);
        assert!(!err.reply_message().as_str().contains("hunter2"));
    }

    #[test]
    fn application_error_keeps_its_chosen_kind() {
        let err = ZLinkError::application(ErrorKind::CapacityExceeded, "full");
        assert_eq!(err.kind(), ErrorKind::CapacityExceeded);
        assert_eq!(err.reply_message().as_str(), "full");
    }
}
