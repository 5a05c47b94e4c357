//! Public peer-facing types: identities, events, intents and the per-peer send handle.

use std::collections::BTreeSet;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use zlink_codec::{ChannelName, Generation, RoutingId};

use crate::connection::Connection;
use crate::envelope::{Envelope, Reply};
use crate::error::{Lane, TransportError};
use crate::lane::{OutFrame, Pushed};
use crate::wire::kind;

/// Identifies one TCP connection within one transport instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnectionId(pub(crate) u64);

impl ConnectionId {
    /// The number.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conn#{}", self.0)
    }
}

/// A Ready peer connection as the handshake established it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeerInfo {
    /// The peer's RoutingId.
    pub rid: RoutingId,
    /// The peer's lifecycle generation (one per host run).
    pub lifecycle_generation: Generation,
    /// The peer's immutable ChannelName set.
    pub channels: BTreeSet<ChannelName>,
    /// This connection.
    pub connection: ConnectionId,
    /// This side's socket address.
    pub local_addr: SocketAddr,
    /// The peer's socket address.
    pub remote_addr: SocketAddr,
    /// Whether this side dialed.
    pub initiated_locally: bool,
}

/// Why a Ready connection went down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DownReason {
    /// The peer closed in order (it sent `GOODBYE`).
    Closed,
    /// No frame arrived for [`crate::LIVENESS_TIMEOUT`]: a half-open or stalled peer.
    TimedOut,
    /// The socket ended or failed without a `GOODBYE`.
    ConnectionLost,
    /// The peer broke the frame layout (including a frame over [`crate::MAX_FRAME_LEN`]).
    Protocol,
    /// A connection from a newer lifecycle generation of the same peer replaced this one.
    Superseded,
    /// This side closed it (shutdown, intent removed, [`PeerHandle::close`]).
    Local,
}

/// A peer connection became Ready or went down.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum PeerEvent {
    /// A connection passed the handshake and is Ready.
    Up(Arc<PeerInfo>),
    /// A Ready connection went down (sent once per connection).
    Down {
        /// The connection that went down.
        peer: Arc<PeerInfo>,
        /// Why.
        reason: DownReason,
    },
}

/// A connect intent (spec 06 §5): an endpoint, optionally with what the handshake must find
/// there. With an expected RID, the side with the smaller RID dials and the other waits to be
/// dialed (guide 10 §2); without one, this side dials.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeerIntent {
    /// `host:port`.
    pub endpoint: String,
    /// The RoutingId the handshake must report, when known.
    pub expected_rid: Option<RoutingId>,
    /// The lifecycle generation the handshake must report, when known (from a descriptor).
    pub expected_generation: Option<Generation>,
    /// The ChannelName set the handshake must report, when known (from a descriptor).
    pub expected_channels: Option<BTreeSet<ChannelName>>,
    /// The security identity the peer's descriptor publishes, when known: a TLS peer's
    /// certificate must be valid for its name (checked on both ends of the handshake).
    pub expected_identity: Option<crate::tls::SecurityIdentity>,
    /// Dial even when an expected RID is smaller than this node's (a manual peer: the side
    /// holding the intent initiates; duplicate candidates still collapse to one).
    pub always_dial: bool,
}

impl PeerIntent {
    /// An intent for `endpoint` with no expectations.
    pub fn new(endpoint: impl Into<String>) -> Self {
        Self {
            endpoint: endpoint.into(),
            expected_rid: None,
            expected_generation: None,
            expected_channels: None,
            expected_identity: None,
            always_dial: false,
        }
    }

    /// Dials whatever the RIDs' order (a manual peer's intent, spec 06 §5).
    pub fn always_dial(mut self) -> Self {
        self.always_dial = true;
        self
    }

    /// Requires the handshake to report `rid`.
    pub fn expect_rid(mut self, rid: RoutingId) -> Self {
        self.expected_rid = Some(rid);
        self
    }

    /// Requires the handshake to report lifecycle generation `generation`.
    pub fn expect_generation(mut self, generation: Generation) -> Self {
        self.expected_generation = Some(generation);
        self
    }

    /// Requires the peer to prove this security identity (its descriptor's): a TLS peer's
    /// certificate must be valid for the name; a plaintext transport refuses a TLS peer and
    /// the reverse.
    pub fn expect_identity(mut self, identity: crate::tls::SecurityIdentity) -> Self {
        self.expected_identity = Some(identity);
        self
    }

    /// Requires the handshake to report exactly these ChannelNames.
    pub fn expect_channels(mut self, channels: impl IntoIterator<Item = ChannelName>) -> Self {
        self.expected_channels = Some(channels.into_iter().collect());
        self
    }
}

/// An intent and what the transport learned about it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct IntentStatus {
    /// The intent.
    pub intent: PeerIntent,
    /// Whether this side dials for it (otherwise it waits to be dialed).
    pub dials: bool,
    /// The RoutingId found at the endpoint by the last handshake, if any.
    pub learned_rid: Option<RoutingId>,
    /// The last dial error, if the last attempt failed.
    pub last_error: Option<String>,
}

/// Sends to one Ready peer connection. Cheap to clone; becomes unavailable (sends fail with
/// [`TransportError::Unavailable`]) once that connection goes down, even if the peer comes
/// back on a new connection — fetch a fresh handle with [`crate::Transport::peer`].
#[derive(Clone)]
pub struct PeerHandle {
    pub(crate) conn: Arc<Connection>,
}

impl fmt::Debug for PeerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerHandle")
            .field("peer", &self.conn.info)
            .finish()
    }
}

impl PeerHandle {
    /// The connection's identity.
    pub fn info(&self) -> &Arc<PeerInfo> {
        &self.conn.info
    }

    /// Whether the connection is still Ready.
    pub fn is_ready(&self) -> bool {
        !self.conn.is_down()
    }

    /// Queues an application frame if the application lane has room on both axes;
    /// otherwise [`TransportError::Full`] and nothing changed.
    pub fn try_send_app(&self, envelope: &Envelope) -> Result<(), TransportError> {
        let frame = envelope.encode(kind::APP)?;
        self.conn.app.try_push(frame.into())?;
        self.conn.wake();
        Ok(())
    }

    /// Queues an application frame, waiting (in arrival order) for room. Dropping the future
    /// before it completes withdraws the frame unless it was already admitted.
    pub async fn send_app(&self, envelope: &Envelope) -> Result<(), TransportError> {
        let frame = envelope.encode(kind::APP)?;
        self.push_wait(Lane::App, frame.into()).await
    }

    /// Queues a framework control frame if the control lane has room.
    pub fn try_send_control(&self, envelope: &Envelope) -> Result<(), TransportError> {
        let frame = envelope.encode(kind::CONTROL)?;
        self.conn.control.try_push(frame.into())?;
        self.conn.wake();
        Ok(())
    }

    /// Queues a framework control frame, waiting for room.
    pub async fn send_control(&self, envelope: &Envelope) -> Result<(), TransportError> {
        let frame = envelope.encode(kind::CONTROL)?;
        self.push_wait(Lane::Control, frame.into()).await
    }

    /// Queues a framework control frame whose payload is `prefix` followed by the envelope's
    /// payload, waiting for room: the same frame as [`Self::send_control`] with that joined
    /// payload, without building the joined payload first. Its encoded length is
    /// [`Envelope::encoded_len`] plus `prefix.len()`. The envelope's payload is not copied:
    /// the frame shares it until it is written (a large one straight from its own buffer).
    pub async fn send_control_prefixed(
        &self,
        envelope: &Envelope,
        prefix: &[u8],
    ) -> Result<(), TransportError> {
        let frame = envelope.encode_split(kind::CONTROL, prefix)?;
        self.push_wait(Lane::Control, frame).await
    }

    /// Queues a reply or error reply on the reply lane: never refused for room, never behind
    /// application or control frames, written before them (the completion path, spec 06 §3).
    pub fn send_reply(&self, reply: &Reply) -> Result<(), TransportError> {
        let frame = reply.encode()?;
        self.conn.reply.try_push(frame.into())?;
        self.conn.wake();
        Ok(())
    }

    /// (frames, bytes) reserved on a lane: queued or being written.
    pub fn queue_usage(&self, lane: Lane) -> (usize, usize) {
        match lane {
            Lane::App => self.conn.app.usage(),
            Lane::Control => self.conn.control.usage(),
            Lane::Reply => self.conn.reply.usage(),
        }
    }

    /// Closes the connection in order (`GOODBYE`); the peer sees
    /// [`DownReason::Closed`]. An intent for it reconnects.
    pub fn close(&self) {
        self.conn.close(DownReason::Local);
    }

    async fn push_wait(&self, lane: Lane, frame: OutFrame) -> Result<(), TransportError> {
        let l = match lane {
            Lane::App => &self.conn.app,
            _ => &self.conn.control,
        };
        match l.push(frame)? {
            Pushed::Queued => {
                self.conn.wake();
                Ok(())
            }
            Pushed::Waiting(rx) => {
                let r = rx.await.unwrap_or(Err(TransportError::Unavailable));
                // Admission happened on the writer's release path, which keeps writing.
                r
            }
        }
    }
}
