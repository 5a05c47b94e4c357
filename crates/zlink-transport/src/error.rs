//! The crate's one error type.

use std::fmt;
use std::io;

/// What went wrong, coarse enough to branch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportErrorKind {
    /// An argument breaks a bound (frame too large, metadata too long, bad limits).
    InvalidArgument,
    /// The handshake refused the connection (mismatch, duplicate, stale generation).
    HandshakeRejected,
    /// A bounded queue has no room for the frame (spec 06 §11: count and bytes axes).
    Full,
    /// The peer connection is not Ready (closed, superseded or never established).
    Unavailable,
    /// The transport is shutting down or has shut down.
    ShuttingDown,
    /// A bounded wait (handshake) ran out.
    TimedOut,
    /// The remote sent bytes that break the frame layout of `docs/transport.md`.
    Protocol,
    /// A socket operation failed.
    Io,
    /// The id issuer has no unused value left (spec 21 §9.3: the runtime cannot proceed).
    Exhausted,
}

/// Which queue of a peer connection refused a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Lane {
    /// Application frames (handlers, filters, mailboxes).
    App,
    /// Framework control frames (creation, restore, chunks, cutover, follow).
    Control,
    /// Replies and error replies (the completion path).
    Reply,
}

impl fmt::Display for Lane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Lane::App => "application",
            Lane::Control => "control",
            Lane::Reply => "reply",
        })
    }
}

/// Why a handshake refused a connection. Each has a one-byte code on the wire
/// (`docs/transport.md`, `REJECT`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandshakeRejection {
    /// The remote speaks another protocol version (or sent no `HELLO` magic).
    ProtocolVersion {
        /// The version this side speaks.
        ours: u8,
        /// The version the remote sent.
        theirs: u8,
    },
    /// The remote belongs to another RouteMesh.
    MeshName {
        /// This side's MeshName.
        expected: String,
        /// The remote's MeshName.
        found: String,
    },
    /// The remote's RoutingId is not the one the intent expects (spec 06 §5).
    RoutingId {
        /// Expected RoutingId (hex).
        expected: String,
        /// The remote's RoutingId (hex).
        found: String,
    },
    /// The remote uses this side's own RoutingId.
    SameRoutingId,
    /// The remote's lifecycle generation is not the one the intent expects.
    LifecycleGeneration {
        /// The expected generation.
        expected: u64,
        /// The remote's generation.
        found: u64,
    },
    /// The remote's lifecycle generation is older than the one already Ready for its RID.
    StaleGeneration {
        /// The generation of the Ready connection.
        current: u64,
        /// The remote's generation.
        found: u64,
    },
    /// The remote's ChannelName set differs from the expected (immutable) set.
    ChannelSet {
        /// Expected names.
        expected: Vec<String>,
        /// The remote's names.
        found: Vec<String>,
    },
    /// A Ready connection for the same peer and lifecycle generation already exists: this
    /// candidate collapses into it (guide 10 §2).
    Duplicate,
    /// The handshake bytes are malformed.
    Malformed(String),
    /// The remote's security identity is not the one its descriptor publishes: its
    /// certificate is not valid for the published name, or one side speaks TLS and the other
    /// does not (spec 06 §5, §23).
    SecurityIdentity {
        /// The identity expected.
        expected: String,
        /// What the remote presented.
        found: String,
    },
}

impl HandshakeRejection {
    /// The one-byte wire code of the rejection.
    pub fn code(&self) -> u8 {
        match self {
            Self::ProtocolVersion { .. } => 1,
            Self::MeshName { .. } => 2,
            Self::RoutingId { .. } => 3,
            Self::SameRoutingId => 4,
            Self::LifecycleGeneration { .. } => 5,
            Self::StaleGeneration { .. } => 6,
            Self::ChannelSet { .. } => 7,
            Self::Duplicate => 8,
            Self::Malformed(_) => 9,
            Self::SecurityIdentity { .. } => 10,
        }
    }
}

impl fmt::Display for HandshakeRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ProtocolVersion { ours, theirs } => {
                write!(f, "protocol version {theirs} (this side speaks {ours})")
            }
            Self::MeshName { expected, found } => {
                write!(f, "MeshName {found:?}, expected {expected:?}")
            }
            Self::RoutingId { expected, found } => {
                write!(f, "RoutingId {found}, expected {expected}")
            }
            Self::SameRoutingId => f.write_str("the remote uses this node's own RoutingId"),
            Self::LifecycleGeneration { expected, found } => {
                write!(f, "lifecycle generation {found}, expected {expected}")
            }
            Self::StaleGeneration { current, found } => write!(
                f,
                "lifecycle generation {found} is older than the Ready connection's {current}"
            ),
            Self::ChannelSet { expected, found } => {
                write!(f, "ChannelName set {found:?}, expected {expected:?}")
            }
            Self::Duplicate => f.write_str("a Ready connection to this peer already exists"),
            Self::Malformed(why) => write!(f, "malformed handshake: {why}"),
            Self::SecurityIdentity { expected, found } => {
                write!(f, "security identity {found}, expected {expected}")
            }
        }
    }
}

/// The error of every fallible operation of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// A frame would exceed [`crate::MAX_FRAME_LEN`].
    #[error("frame of {len} bytes exceeds the frame limit of {max} bytes")]
    FrameTooLarge {
        /// The frame body length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A field of an envelope breaks its bound.
    #[error("{field}: {len} bytes, more than {max}")]
    FieldTooLong {
        /// The field.
        field: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// An argument is invalid for another reason.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A bounded lane has no room (both axes are reserved together; neither changed).
    #[error("{lane} queue full ({count} frames / {bytes} bytes queued)")]
    Full {
        /// The lane.
        lane: Lane,
        /// Frames queued when the send was refused.
        count: usize,
        /// Bytes queued when the send was refused.
        bytes: usize,
    },
    /// The peer connection is closed or was replaced.
    #[error("peer connection unavailable")]
    Unavailable,
    /// The transport is shutting down.
    #[error("transport is shutting down")]
    ShuttingDown,
    /// The handshake refused the connection.
    #[error("handshake rejected by {}: {rejection}", if *.by_remote { "the remote" } else { "this side" })]
    Handshake {
        /// Why.
        rejection: HandshakeRejection,
        /// `true` when the remote sent the rejection, `false` when this side refused.
        by_remote: bool,
    },
    /// The handshake did not finish within [`crate::HANDSHAKE_TIMEOUT`].
    #[error("handshake did not finish within {0:?}")]
    HandshakeTimedOut(std::time::Duration),
    /// The remote broke the frame layout.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A socket operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: &'static str,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The TLS handshake failed (no certificate, one not issued by the CA, one not valid for
    /// the expected identity, or the remote does not speak TLS).
    #[error("{context} failed: {source}")]
    Tls {
        /// Which side of the TLS handshake.
        context: &'static str,
        /// The cause (rustls' error inside the I/O error).
        #[source]
        source: io::Error,
    },
    /// The id issuer is exhausted.
    #[error("{0} exhausted within this transport run")]
    Exhausted(&'static str),
}

impl TransportError {
    /// The kind to branch on.
    pub fn kind(&self) -> TransportErrorKind {
        match self {
            Self::FrameTooLarge { .. } | Self::FieldTooLong { .. } | Self::InvalidArgument(_) => {
                TransportErrorKind::InvalidArgument
            }
            Self::Full { .. } => TransportErrorKind::Full,
            Self::Unavailable => TransportErrorKind::Unavailable,
            Self::ShuttingDown => TransportErrorKind::ShuttingDown,
            Self::Handshake { .. } | Self::Tls { .. } => TransportErrorKind::HandshakeRejected,
            Self::HandshakeTimedOut(_) => TransportErrorKind::TimedOut,
            Self::Protocol(_) => TransportErrorKind::Protocol,
            Self::Io { .. } => TransportErrorKind::Io,
            Self::Exhausted(_) => TransportErrorKind::Exhausted,
        }
    }

    /// The handshake rejection, if this is one.
    pub fn rejection(&self) -> Option<&HandshakeRejection> {
        match self {
            Self::Handshake { rejection, .. } => Some(rejection),
            _ => None,
        }
    }

    pub(crate) fn io(context: &'static str, source: io::Error) -> Self {
        Self::Io { context, source }
    }
}
