//! Outstanding requests by ReplyRouteId (spec 06 §20, 21 §9.3): each ends exactly once — with
//! its reply, a timeout, the caller's cancellation (dropping the future), the connection going
//! down (`Unavailable`, never resent) or a forced shutdown. A reply arriving after the entry
//! ended is discarded.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use tokio::sync::oneshot;
use zlink_transport::{ConnectionId, InboundReply, OperationId, PeerInfo, Reply, ReplyRouteId};

use crate::messaging::{UnavailableReason, ZLinkError};

/// The end of one request, delivered to its waiter.
pub(crate) type Completion = Result<Reply, ZLinkError>;

#[derive(Debug)]
struct Entry {
    operation: OperationId,
    /// The connection the request went out on (its id, and the target named in an error).
    peer: Arc<PeerInfo>,
    tx: oneshot::Sender<Completion>,
    /// Set when the reply came from another node than the request went to (its object moved
    /// there and answered the original source itself: a followed or relayed request).
    elsewhere: Arc<AtomicBool>,
}

/// The pending-request table of one node.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    by_route: Mutex<HashMap<u64, Entry>>,
}

impl Pending {
    /// Registers a request before it is queued; the guard removes it when dropped.
    pub(crate) fn register(
        self: &Arc<Self>,
        route: ReplyRouteId,
        operation: OperationId,
        peer: &Arc<PeerInfo>,
    ) -> (PendingGuard, oneshot::Receiver<Completion>) {
        let (tx, rx) = oneshot::channel();
        let elsewhere = Arc::new(AtomicBool::new(false));
        self.by_route.lock().insert(
            route.get(),
            Entry {
                operation,
                peer: Arc::clone(peer),
                tx,
                elsewhere: Arc::clone(&elsewhere),
            },
        );
        (
            PendingGuard {
                pending: Arc::clone(self),
                route,
                elsewhere,
            },
            rx,
        )
    }

    /// [`complete`](Self::complete) with a reply read from a connection: one from another node
    /// than the request went to marks the request answered elsewhere
    /// ([`PendingGuard::answered_elsewhere`]).
    pub(crate) fn complete_inbound(&self, inbound: InboundReply) -> bool {
        let from = Arc::clone(inbound.peer());
        self.complete_from(inbound.into_reply(), &from.rid)
    }

    /// [`complete`](Self::complete) with a reply node `from` sent (read from a connection, or
    /// delivered as a relocation completion record): one from another node than the request
    /// went to marks the request answered elsewhere.
    pub(crate) fn complete_from(&self, reply: Reply, from: &zlink_codec::RoutingId) -> bool {
        if let Some(e) = self.by_route.lock().get(&reply.reply_route().get()) {
            if &e.peer.rid != from {
                e.elsewhere.store(true, Ordering::Release);
            }
        }
        self.complete(reply)
    }

    /// Completes the request a reply answers. Returns false (the reply is discarded) when no
    /// request waits on that route, or the OperationId does not match.
    pub(crate) fn complete(&self, reply: Reply) -> bool {
        let mut map = self.by_route.lock();
        let route = reply.reply_route().get();
        match map.get(&route) {
            Some(e) if e.operation == reply.operation_id() => {}
            Some(_) => {
                tracing::warn!(route, "reply with a foreign OperationId discarded");
                return false;
            }
            None => {
                tracing::debug!(route, "late or unknown reply discarded");
                return false;
            }
        }
        let Some(e) = map.remove(&route) else {
            return false;
        };
        drop(map);
        e.tx.send(Ok(reply)).is_ok()
    }

    /// Ends every request sent on `connection` with `Unavailable` (the connection went down;
    /// nothing is resent). Returns how many ended.
    pub(crate) fn connection_lost(&self, connection: ConnectionId) -> usize {
        let ended: Vec<Entry> = {
            let mut map = self.by_route.lock();
            let routes: Vec<u64> = map
                .iter()
                .filter(|(_, e)| e.peer.connection == connection)
                .map(|(r, _)| *r)
                .collect();
            routes.iter().filter_map(|r| map.remove(r)).collect()
        };
        let n = ended.len();
        for e in ended {
            let _ = e.tx.send(Err(ZLinkError::Unavailable {
                target: format!("node {}", e.peer.rid),
                reason: UnavailableReason::ConnectionLost,
            }));
        }
        n
    }

    /// Ends every request with `ShuttingDown` (a forced shutdown).
    pub(crate) fn fail_all(&self) -> usize {
        let ended: Vec<Entry> = self.by_route.lock().drain().map(|(_, e)| e).collect();
        let n = ended.len();
        for e in ended {
            let _ = e.tx.send(Err(ZLinkError::ShuttingDown));
        }
        n
    }

    /// Requests waiting for a reply.
    pub(crate) fn len(&self) -> usize {
        self.by_route.lock().len()
    }
}

/// Removes its request from the table when the caller stops waiting (reply, timeout or
/// cancellation), so a later reply is discarded.
#[derive(Debug)]
pub(crate) struct PendingGuard {
    pending: Arc<Pending>,
    route: ReplyRouteId,
    elsewhere: Arc<AtomicBool>,
}

impl PendingGuard {
    /// Whether the reply came from another node than the request went to.
    pub(crate) fn answered_elsewhere(&self) -> bool {
        self.elsewhere.load(Ordering::Acquire)
    }
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        self.pending.by_route.lock().remove(&self.route.get());
    }
}
