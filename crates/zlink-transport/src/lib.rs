#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod config;
mod connection;
mod envelope;
mod error;
mod handshake;
mod ids;
mod inbound;
mod lane;
mod network;
mod peer;
mod stream;
mod tls;
mod transport;
mod wire;

#[cfg(test)]
mod tests;

pub use config::{
    RECONNECT_BACKOFF_MAX, RECONNECT_BACKOFF_MIN, STABLE_CONNECTION, TransportConfig,
};
pub use envelope::{Envelope, MAX_METADATA_LEN, MAX_NAME_LEN, Reply, ReplyStatus};
pub use error::{HandshakeRejection, Lane, TransportError, TransportErrorKind};
pub use ids::{IdIssuer, OperationId, ReplyRouteId};
pub use inbound::{FrameReceiver, Inbound, InboundFrame, InboundReply, ReplyReceiver};
pub use lane::QueueLimits;
pub use network::{NetFuture, NetListener, NetStream, Network};
pub use peer::{
    ConnectionId, DownReason, IntentStatus, PeerEvent, PeerHandle, PeerInfo, PeerIntent,
};
pub use tls::{MeshTls, MeshTlsError, MeshTlsErrorKind, SecurityIdentity};
pub use transport::Transport;
pub use wire::{
    HANDSHAKE_TIMEOUT, HEARTBEAT_INTERVAL, LIVENESS_TIMEOUT, MAX_FRAME_LEN, PROTOCOL_VERSION,
    Window,
};
