//! What a transport is started with ([`TransportConfig`]) and the reconnect timing of its
//! intents.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use zlink_codec::{ChannelName, Generation, MeshName, RoutingId};

use crate::error::TransportError;
use crate::lane::QueueLimits;
use crate::network::Network;
use crate::tls::{MeshTls, SecurityIdentity};
use crate::wire::Window;

/// The first reconnect delay of an intent after a failed attempt (before jitter).
pub const RECONNECT_BACKOFF_MIN: Duration = Duration::from_millis(50);
/// The largest reconnect delay (before jitter); each failure doubles the delay up to this.
pub const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// A connection that ends sooner than this after its handshake does not reset the reconnect
/// backoff: a peer that admits and then closes at once is redialed with a growing delay, not
/// in a tight loop.
pub const STABLE_CONNECTION: Duration = Duration::from_secs(1);

/// What a transport is started with. MeshName, RoutingId, lifecycle generation, listen
/// endpoint and the ChannelName set cannot change after start (spec 06 §4).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TransportConfig {
    /// The RouteMesh.
    pub mesh: MeshName,
    /// This node's RoutingId.
    pub rid: RoutingId,
    /// This host run's lifecycle generation.
    pub lifecycle_generation: Generation,
    /// This node's immutable ChannelName set (told to peers in the handshake).
    pub channels: BTreeSet<ChannelName>,
    /// `host:port` to listen on; port 0 binds an ephemeral port.
    pub listen: String,
    /// Per-peer application lane bound (default 4,096 frames / 64 MiB).
    pub app_queue: QueueLimits,
    /// Per-peer control lane bound (default 1,024 frames / 64 MiB).
    pub control_queue: QueueLimits,
    /// Application frames a peer may have delivered here and not yet taken out
    /// (default 4,096 frames / 16 MiB).
    pub app_window: Window,
    /// Control frames a peer may have delivered here and not yet taken out
    /// (default 1,024 frames / 32 MiB).
    pub control_window: Window,
    /// TLS for every peer connection (`None`: plain TCP). Both ends must agree: a TLS
    /// transport neither dials nor admits a plaintext peer.
    pub tls: Option<MeshTls>,
    /// Where the listener binds and peers are dialed (`None`: tokio's TCP). A replaced network
    /// (the simulation's) speaks plain frames only: with `tls` set, start fails.
    pub network: Option<Arc<dyn Network>>,
    /// The seed of the reconnect jitter and of the OperationId salt (`None`: drawn at random).
    /// A simulation fixes it so a run replays.
    pub seed: Option<u64>,
}

impl TransportConfig {
    /// A configuration with the defaults, listening on `127.0.0.1:0`.
    pub fn new(mesh: MeshName, rid: RoutingId, lifecycle_generation: Generation) -> Self {
        Self {
            mesh,
            rid,
            lifecycle_generation,
            channels: BTreeSet::new(),
            listen: "127.0.0.1:0".into(),
            app_queue: QueueLimits {
                count: 4096,
                bytes: 64 << 20,
            },
            control_queue: QueueLimits {
                count: 1024,
                bytes: 64 << 20,
            },
            app_window: Window {
                count: 4096,
                bytes: 16 << 20,
            },
            control_window: Window {
                count: 1024,
                bytes: 32 << 20,
            },
            tls: None,
            network: None,
            seed: None,
        }
    }

    /// Binds and dials on `network` instead of tokio's TCP (`network.rs`).
    pub fn network(mut self, network: Arc<dyn Network>) -> Self {
        self.network = Some(network);
        self
    }

    /// Fixes the seed of the reconnect jitter and of the OperationId salt.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Speaks TLS on every peer connection, with these settings.
    pub fn tls(mut self, tls: MeshTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The identity this node's descriptor publishes (`tls:{name}` or `plaintext:{rid}`).
    pub fn security_identity(&self) -> SecurityIdentity {
        match &self.tls {
            Some(tls) => tls.identity(),
            None => SecurityIdentity::Plaintext,
        }
    }

    /// Sets the listen endpoint.
    pub fn listen(mut self, endpoint: impl Into<String>) -> Self {
        self.listen = endpoint.into();
        self
    }

    /// Sets the ChannelName set.
    pub fn channels(mut self, channels: impl IntoIterator<Item = ChannelName>) -> Self {
        self.channels = channels.into_iter().collect();
        self
    }

    /// Sets the application lane bound.
    pub fn app_queue(mut self, limits: QueueLimits) -> Self {
        self.app_queue = limits;
        self
    }

    /// Sets the control lane bound.
    pub fn control_queue(mut self, limits: QueueLimits) -> Self {
        self.control_queue = limits;
        self
    }

    /// Sets the application receive window granted to peers.
    pub fn app_window(mut self, window: Window) -> Self {
        self.app_window = window;
        self
    }

    /// Sets the control receive window granted to peers.
    pub fn control_window(mut self, window: Window) -> Self {
        self.control_window = window;
        self
    }

    pub(crate) fn validate(&self) -> Result<(), TransportError> {
        for q in [self.app_queue, self.control_queue] {
            QueueLimits::new(q.count, q.bytes)?;
        }
        for w in [self.app_window, self.control_window] {
            if w.count == 0 || w.bytes == 0 {
                return Err(TransportError::InvalidArgument(
                    "receive windows must be at least 1 frame and 1 byte".into(),
                ));
            }
        }
        if self.network.is_some() && self.tls.is_some() {
            return Err(TransportError::InvalidArgument(
                "TLS over a replaced network is not supported".into(),
            ));
        }
        if self.channels.len() > usize::from(u16::MAX) {
            return Err(TransportError::InvalidArgument(
                "more than 65,535 ChannelNames".into(),
            ));
        }
        Ok(())
    }
}
