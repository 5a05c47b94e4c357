//! The transport: listener, peer table, intents with reconnect, shutdown.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;
use zlink_codec::{ChannelName, Generation, RoutingId};

use crate::config::{
    RECONNECT_BACKOFF_MAX, RECONNECT_BACKOFF_MIN, STABLE_CONNECTION, TransportConfig,
};
use crate::connection::{Connection, ConnectionParams, InboundSenders};
use crate::error::{HandshakeRejection, TransportError};
use crate::handshake::{self, Decline, HandshakeIo};
use crate::ids::IdIssuer;
use crate::inbound::{FrameReceiver, Inbound, ReplyReceiver};
use crate::network::Listener;
use crate::peer::{
    ConnectionId, DownReason, IntentStatus, PeerEvent, PeerHandle, PeerInfo, PeerIntent,
};
use crate::wire::{Hello, PROTOCOL_VERSION};

struct IntentEntry {
    intent: PeerIntent,
    dials: bool,
    learned_rid: Option<RoutingId>,
    last_error: Option<String>,
    cancel: CancellationToken,
}

struct PeerTable {
    peers: BTreeMap<RoutingId, Arc<Connection>>,
    shutting_down: bool,
}

/// State shared by the transport handle and its tasks.
pub(crate) struct Shared {
    config: TransportConfig,
    local_addr: SocketAddr,
    ids: IdIssuer,
    table: Mutex<PeerTable>,
    intents: Mutex<BTreeMap<String, IntentEntry>>,
    events: Mutex<Option<mpsc::UnboundedSender<PeerEvent>>>,
    inbound: Mutex<Option<InboundSenders>>,
    cancel: CancellationToken,
    pub(crate) tracker: TaskTracker,
    next_conn: AtomicU64,
    rng: Mutex<u64>,
}

impl Shared {
    pub(crate) fn rid(&self) -> &RoutingId {
        &self.config.rid
    }

    /// This transport's TLS settings, if it speaks TLS.
    pub(crate) fn tls(&self) -> Option<&crate::tls::MeshTls> {
        self.config.tls.as_ref()
    }

    /// The replaced network this transport binds and dials on, if any (`network.rs`).
    pub(crate) fn network(&self) -> Option<&dyn crate::network::Network> {
        self.config.network.as_deref()
    }

    /// This transport's security identity.
    pub(crate) fn identity(&self) -> crate::tls::SecurityIdentity {
        self.config.security_identity()
    }

    pub(crate) fn hello(&self) -> Hello {
        Hello {
            version: PROTOCOL_VERSION,
            mesh: self.config.mesh.clone(),
            rid: self.config.rid.clone(),
            generation: self.config.lifecycle_generation,
            app_window: self.config.app_window,
            control_window: self.config.control_window,
            channels: self.config.channels.clone(),
        }
    }

    pub(crate) fn emit(&self, event: PeerEvent) {
        if let Some(tx) = self.events.lock().as_ref() {
            let _ = tx.send(event);
        }
    }

    pub(crate) fn inbound_senders(&self) -> InboundSenders {
        match self.inbound.lock().as_ref() {
            Some(s) => InboundSenders {
                app: s.app.clone(),
                control: s.control.clone(),
                reply: s.reply.clone(),
            },
            // After shutdown: senders whose receivers are gone (sends are dropped).
            None => InboundSenders {
                app: mpsc::unbounded_channel().0,
                control: mpsc::unbounded_channel().0,
                reply: mpsc::unbounded_channel().0,
            },
        }
    }

    /// Records the RID the handshake found at an intent's endpoint.
    pub(crate) fn learned(&self, endpoint: &str, rid: &RoutingId) {
        if let Some(e) = self.intents.lock().get_mut(endpoint) {
            e.learned_rid = Some(rid.clone());
        }
    }

    fn set_error(&self, endpoint: &str, error: Option<String>) {
        if let Some(e) = self.intents.lock().get_mut(endpoint) {
            e.last_error = error;
        }
    }

    /// The intent that expects `rid`, if any (its expectations apply to an accepted
    /// connection too).
    pub(crate) fn intent_for_rid(&self, rid: &RoutingId) -> Option<PeerIntent> {
        self.intents
            .lock()
            .values()
            .find(|e| e.intent.expected_rid.as_ref() == Some(rid))
            .map(|e| e.intent.clone())
    }

    /// Checks a remote `HELLO` against this node, the intent's expectations, and the Ready
    /// connection of the same RID (spec 06 §5).
    pub(crate) fn verify(
        &self,
        remote: &Hello,
        intent: Option<&PeerIntent>,
    ) -> Result<(), HandshakeRejection> {
        if remote.mesh != self.config.mesh {
            return Err(HandshakeRejection::MeshName {
                expected: self.config.mesh.to_string(),
                found: remote.mesh.to_string(),
            });
        }
        if remote.rid == self.config.rid {
            return Err(HandshakeRejection::SameRoutingId);
        }
        if let Some(intent) = intent {
            if let Some(rid) = &intent.expected_rid {
                if rid != &remote.rid {
                    return Err(HandshakeRejection::RoutingId {
                        expected: rid.to_hex(),
                        found: remote.rid.to_hex(),
                    });
                }
            }
            if let Some(g) = intent.expected_generation {
                if g != remote.generation {
                    return Err(HandshakeRejection::LifecycleGeneration {
                        expected: g.get(),
                        found: remote.generation.get(),
                    });
                }
            }
            if let Some(ch) = &intent.expected_channels {
                if ch != &remote.channels {
                    return Err(channel_mismatch(ch, &remote.channels));
                }
            }
        }
        if let Some(existing) = self.table.lock().peers.get(&remote.rid) {
            let info = &existing.info;
            if remote.generation < info.lifecycle_generation {
                return Err(HandshakeRejection::StaleGeneration {
                    current: info.lifecycle_generation.get(),
                    found: remote.generation.get(),
                });
            }
            if remote.generation == info.lifecycle_generation && remote.channels != info.channels {
                return Err(channel_mismatch(&info.channels, &remote.channels));
            }
        }
        Ok(())
    }

    fn new_connection(
        self: &Arc<Self>,
        remote: &Hello,
        io: &HandshakeIo,
        initiated_locally: bool,
    ) -> Arc<Connection> {
        let id = ConnectionId(self.next_conn.fetch_add(1, Ordering::Relaxed) + 1);
        Arc::new(Connection::new(
            ConnectionParams {
                info: PeerInfo {
                    rid: remote.rid.clone(),
                    lifecycle_generation: remote.generation,
                    channels: remote.channels.clone(),
                    connection: id,
                    local_addr: io.local_addr,
                    remote_addr: io.remote_addr,
                    initiated_locally,
                },
                app_queue: self.config.app_queue,
                control_queue: self.config.control_queue,
                peer_app_window: remote.app_window,
                peer_control_window: remote.control_window,
                our_app_window: self.config.app_window,
                our_control_window: self.config.control_window,
            },
            Arc::downgrade(self),
            &self.cancel,
        ))
    }

    /// The deciding side (smaller RID) admits or collapses a verified candidate.
    pub(crate) fn decide(
        self: &Arc<Self>,
        remote: &Hello,
        io: &HandshakeIo,
        initiated_locally: bool,
    ) -> Result<Arc<Connection>, Decline> {
        let mut t = self.table.lock();
        if t.shutting_down {
            return Err(Decline::ShuttingDown);
        }
        let superseded = match t.peers.get(&remote.rid) {
            Some(existing) if !existing.is_down() => {
                let current = existing.info.lifecycle_generation;
                if remote.generation < current {
                    return Err(Decline::Rejected(HandshakeRejection::StaleGeneration {
                        current: current.get(),
                        found: remote.generation.get(),
                    }));
                }
                if remote.generation == current {
                    return Err(Decline::Rejected(HandshakeRejection::Duplicate));
                }
                Some(existing.clone())
            }
            _ => None,
        };
        let conn = self.new_connection(remote, io, initiated_locally);
        t.peers.insert(remote.rid.clone(), conn.clone());
        drop(t);
        if let Some(old) = superseded {
            old.close(DownReason::Superseded);
        }
        Ok(conn)
    }

    /// The other side installs what the deciding side committed, replacing any connection it
    /// still holds for that RID.
    pub(crate) fn install(
        self: &Arc<Self>,
        remote: &Hello,
        io: &HandshakeIo,
        initiated_locally: bool,
    ) -> Result<Arc<Connection>, TransportError> {
        let mut t = self.table.lock();
        if t.shutting_down {
            return Err(TransportError::ShuttingDown);
        }
        let old = t.peers.get(&remote.rid).cloned();
        if let Some(old) = &old {
            if !old.is_down() && remote.generation < old.info.lifecycle_generation {
                return Err(TransportError::Handshake {
                    rejection: HandshakeRejection::StaleGeneration {
                        current: old.info.lifecycle_generation.get(),
                        found: remote.generation.get(),
                    },
                    by_remote: false,
                });
            }
        }
        let conn = self.new_connection(remote, io, initiated_locally);
        t.peers.insert(remote.rid.clone(), conn.clone());
        drop(t);
        if let Some(old) = old {
            old.close(DownReason::Superseded);
        }
        Ok(conn)
    }

    /// Drops a closed connection from the peer table (if it is still the one there).
    pub(crate) fn forget(&self, conn: &Connection) {
        let mut t = self.table.lock();
        if let Some(c) = t.peers.get(&conn.info.rid) {
            if std::ptr::eq(Arc::as_ptr(c), conn) {
                t.peers.remove(&conn.info.rid);
            }
        }
    }

    fn ready(&self, rid: &RoutingId) -> Option<Arc<Connection>> {
        self.table
            .lock()
            .peers
            .get(rid)
            .filter(|c| !c.is_down())
            .cloned()
    }

    /// The Ready connection an intent already has (by expected or learned RID).
    fn ready_for_intent(&self, endpoint: &str) -> Option<Arc<Connection>> {
        let rid = {
            let intents = self.intents.lock();
            let e = intents.get(endpoint)?;
            e.intent
                .expected_rid
                .clone()
                .or_else(|| e.learned_rid.clone())?
        };
        self.ready(&rid)
    }

    /// A jittered delay in `[d/2, d]`.
    fn jitter(&self, d: Duration) -> Duration {
        let mut s = self.rng.lock();
        // xorshift64
        let mut x = *s;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *s = x;
        let half = d / 2;
        let extra = (x % 1_000) as u32;
        half + half * extra / 1_000
    }
}

fn channel_mismatch(
    expected: &BTreeSet<ChannelName>,
    found: &BTreeSet<ChannelName>,
) -> HandshakeRejection {
    HandshakeRejection::ChannelSet {
        expected: expected.iter().map(ToString::to_string).collect(),
        found: found.iter().map(ToString::to_string).collect(),
    }
}

/// A running transport. Cheap to clone; dropping the last clone stops every task (a
/// `GOODBYE` is not guaranteed then; call [`Transport::shutdown`] for an orderly close).
#[derive(Clone)]
pub struct Transport {
    pub(crate) shared: Arc<Shared>,
    _guard: Arc<DropGuard>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("rid", &self.shared.config.rid)
            .field("local_addr", &self.shared.local_addr)
            .finish_non_exhaustive()
    }
}

impl Transport {
    /// Validates `config`, binds the listener and starts accepting. Returns the transport and
    /// everything it will deliver.
    pub async fn start(config: TransportConfig) -> Result<(Transport, Inbound), TransportError> {
        config.validate()?;
        let listener = Listener::bind(config.network.as_deref(), config.listen.as_str())
            .await
            .map_err(|e| TransportError::io("bind", e))?;
        let local_addr = listener
            .local_addr()
            .map_err(|e| TransportError::io("local address", e))?;
        let (events_tx, events) = mpsc::unbounded_channel();
        let (app_tx, app_rx) = mpsc::unbounded_channel();
        let (control_tx, control_rx) = mpsc::unbounded_channel();
        let (reply_tx, reply_rx) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        let seed = config
            .seed
            .unwrap_or_else(|| uuid::Uuid::new_v4().as_u128() as u64);
        let ids = match config.seed {
            Some(s) => IdIssuer::with_salt(s.rotate_left(32) | 1),
            None => IdIssuer::new(),
        };
        let shared = Arc::new(Shared {
            config,
            local_addr,
            ids,
            table: Mutex::new(PeerTable {
                peers: BTreeMap::new(),
                shutting_down: false,
            }),
            intents: Mutex::new(BTreeMap::new()),
            events: Mutex::new(Some(events_tx)),
            inbound: Mutex::new(Some(InboundSenders {
                app: app_tx,
                control: control_tx,
                reply: reply_tx,
            })),
            cancel: cancel.clone(),
            tracker: TaskTracker::new(),
            next_conn: AtomicU64::new(0),
            rng: Mutex::new(seed | 1),
        });
        let s = shared.clone();
        shared.tracker.spawn(accept_loop(s, listener));
        tracing::debug!(rid = %shared.config.rid, %local_addr, "transport listening");
        Ok((
            Transport {
                shared,
                _guard: Arc::new(cancel.drop_guard()),
            },
            Inbound {
                events,
                app: FrameReceiver::new(app_rx),
                control: FrameReceiver::new(control_rx),
                replies: ReplyReceiver::new(reply_rx),
            },
        ))
    }

    /// The bound listen address (the actual port when configured with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// This node's RoutingId.
    pub fn routing_id(&self) -> &RoutingId {
        &self.shared.config.rid
    }

    /// This host run's lifecycle generation.
    pub fn lifecycle_generation(&self) -> Generation {
        self.shared.config.lifecycle_generation
    }

    /// The OperationId / ReplyRouteId issuer of this transport run.
    pub fn ids(&self) -> &IdIssuer {
        &self.shared.ids
    }

    /// Adds a connect intent. When this side dials for it (no expected RID, or an expected RID
    /// larger than this node's), a task connects and reconnects with jittered backoff
    /// ([`RECONNECT_BACKOFF_MIN`]..[`RECONNECT_BACKOFF_MAX`]) while the intent exists.
    pub fn add_intent(&self, intent: PeerIntent) -> Result<(), TransportError> {
        if intent.endpoint.is_empty() {
            return Err(TransportError::InvalidArgument("empty endpoint".into()));
        }
        if intent.expected_rid.as_ref() == Some(&self.shared.config.rid) {
            return Err(TransportError::InvalidArgument(
                "an intent cannot expect this node's own RoutingId".into(),
            ));
        }
        if self.shared.table.lock().shutting_down {
            return Err(TransportError::ShuttingDown);
        }
        let dials = intent.always_dial
            || intent
                .expected_rid
                .as_ref()
                .is_none_or(|r| &self.shared.config.rid < r);
        let cancel = self.shared.cancel.child_token();
        {
            let mut intents = self.shared.intents.lock();
            if intents.contains_key(&intent.endpoint) {
                return Err(TransportError::InvalidArgument(format!(
                    "an intent for {} already exists",
                    intent.endpoint
                )));
            }
            intents.insert(
                intent.endpoint.clone(),
                IntentEntry {
                    intent: intent.clone(),
                    dials,
                    learned_rid: None,
                    last_error: None,
                    cancel: cancel.clone(),
                },
            );
        }
        if dials {
            let s = self.shared.clone();
            self.shared.tracker.spawn(dial_loop(s, intent, cancel));
        }
        Ok(())
    }

    /// Removes the intent for `endpoint`: stops reconnecting and closes its connection in order.
    /// Returns whether an intent was there.
    pub fn remove_intent(&self, endpoint: &str) -> bool {
        let Some(e) = self.shared.intents.lock().remove(endpoint) else {
            return false;
        };
        e.cancel.cancel();
        if let Some(rid) = e.intent.expected_rid.or(e.learned_rid) {
            if let Some(c) = self.shared.ready(&rid) {
                c.close(DownReason::Local);
            }
        }
        true
    }

    /// The current intents.
    pub fn intents(&self) -> Vec<IntentStatus> {
        let mut v: Vec<IntentStatus> = self
            .shared
            .intents
            .lock()
            .values()
            .map(|e| IntentStatus {
                intent: e.intent.clone(),
                dials: e.dials,
                learned_rid: e.learned_rid.clone(),
                last_error: e.last_error.clone(),
            })
            .collect();
        v.sort_by(|a, b| a.intent.endpoint.cmp(&b.intent.endpoint));
        v
    }

    /// Dials `intent.endpoint` once (no retry) and returns the Ready peer, or the typed
    /// handshake/connect error.
    pub async fn connect(&self, intent: &PeerIntent) -> Result<PeerHandle, TransportError> {
        if self.shared.table.lock().shutting_down {
            return Err(TransportError::ShuttingDown);
        }
        handshake::dial(&self.shared, intent)
            .await
            .map(|conn| PeerHandle { conn })
    }

    /// The Ready connection to `rid`, if any.
    pub fn peer(&self, rid: &RoutingId) -> Option<PeerHandle> {
        self.shared.ready(rid).map(|conn| PeerHandle { conn })
    }

    /// A snapshot of the Ready connections.
    pub fn peers(&self) -> Vec<Arc<PeerInfo>> {
        let mut v: Vec<Arc<PeerInfo>> = self
            .shared
            .table
            .lock()
            .peers
            .values()
            .filter(|c| !c.is_down())
            .map(|c| c.info.clone())
            .collect();
        v.sort_by(|a, b| a.rid.cmp(&b.rid));
        v
    }

    /// Closes every connection in order (`GOODBYE`), stops accepting and reconnecting, and
    /// returns once every task this transport started has ended. The inbound receivers end
    /// after yielding what was already delivered.
    pub async fn shutdown(&self) {
        let conns: Vec<Arc<Connection>> = {
            let mut t = self.shared.table.lock();
            t.shutting_down = true;
            t.peers.values().cloned().collect()
        };
        for c in conns {
            c.close(DownReason::Local);
        }
        self.shared.cancel.cancel();
        self.shared.tracker.close();
        self.shared.tracker.wait().await;
        self.shared.intents.lock().clear();
        self.shared.events.lock().take();
        self.shared.inbound.lock().take();
    }
}

async fn accept_loop(shared: Arc<Shared>, listener: Listener) {
    loop {
        let accepted = tokio::select! {
            () = shared.cancel.cancelled() => return,
            r = listener.accept() => r,
        };
        match accepted {
            Ok((stream, addr)) => {
                let s = shared.clone();
                shared.tracker.spawn(async move {
                    let r = tokio::select! {
                        () = s.cancel.cancelled() => return,
                        r = handshake::accept(&s, stream) => r,
                    };
                    if let Err(e) = r {
                        tracing::debug!(%addr, error = %e, "inbound handshake failed");
                    }
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

async fn dial_loop(shared: Arc<Shared>, intent: PeerIntent, cancel: CancellationToken) {
    let mut delay = RECONNECT_BACKOFF_MIN;
    loop {
        if let Some(conn) = shared.ready_for_intent(&intent.endpoint) {
            let up = tokio::time::Instant::now();
            tokio::select! {
                () = cancel.cancelled() => return,
                () = conn.cancel.cancelled() => {}
            }
            if !settle(&shared, up, &mut delay, &cancel).await {
                return;
            }
            continue;
        }
        let r = tokio::select! {
            () = cancel.cancelled() => return,
            r = handshake::dial(&shared, &intent) => r,
        };
        match r {
            Ok(conn) => {
                shared.set_error(&intent.endpoint, None);
                let up = tokio::time::Instant::now();
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = conn.cancel.cancelled() => {}
                }
                if !settle(&shared, up, &mut delay, &cancel).await {
                    return;
                }
            }
            Err(e) => {
                if e.kind() == crate::TransportErrorKind::ShuttingDown {
                    return;
                }
                tracing::debug!(endpoint = %intent.endpoint, error = %e, "dial failed");
                shared.set_error(&intent.endpoint, Some(e.to_string()));
                let wait = shared.jitter(delay);
                delay = (delay * 2).min(RECONNECT_BACKOFF_MAX);
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(wait) => {}
                }
            }
        }
    }
}

/// After a connection of an intent ended: a connection that lasted [`STABLE_CONNECTION`]
/// resets the backoff and redials at once; a shorter one waits the current (jittered) delay
/// and doubles it. Returns false when the intent was cancelled meanwhile.
async fn settle(
    shared: &Shared,
    up: tokio::time::Instant,
    delay: &mut Duration,
    cancel: &CancellationToken,
) -> bool {
    if up.elapsed() >= STABLE_CONNECTION {
        *delay = RECONNECT_BACKOFF_MIN;
        return true;
    }
    let wait = shared.jitter(*delay);
    *delay = (*delay * 2).min(RECONNECT_BACKOFF_MAX);
    tokio::select! {
        () = cancel.cancelled() => false,
        () = tokio::time::sleep(wait) => true,
    }
}
