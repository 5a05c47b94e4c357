//! Outstanding requests by ReplyRouteId (spec 06 §20, 21 §9.3): each ends exactly once — with
//! its reply, a timeout, the caller's cancellation (dropping the future), the connection going
//! down (`Unavailable`, never resent), a forced shutdown or its node stopping
//! (`ShuttingDown`). A reply arriving after the entry ended is discarded, unless it answers a
//! request this node forwarded ([`ForwardedRoutes`]: relayed to that request's caller).

use std::collections::HashMap;
use std::collections::VecDeque;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;
use zlink_transport::{ConnectionId, OperationId, PeerInfo, Reply, ReplyRouteId};

use super::forward::ForwardedRoutes;
use crate::messaging::{UnavailableReason, ZLinkError};

/// The end of one request, delivered to its waiter.
pub(crate) type Completion = Result<Reply, ZLinkError>;

/// What the waiter of a request receives: its end, and whether the reply came from another
/// node than the request went to (its object moved there and answered the original source
/// itself: a followed or relayed request).
pub(crate) type Ended = (Completion, bool);

/// What a reply did to the table: completed a request (whether its waiter took it), or found
/// none of this node's requests waiting for it.
enum Ending {
    Completed(bool),
    Unclaimed(Reply),
}

#[derive(Debug)]
struct Entry {
    operation: OperationId,
    /// The connection the request went out on (its id, and the target named in an error).
    peer: Arc<PeerInfo>,
    tx: oneshot::Sender<Ended>,
}

/// Hashes a ReplyRouteId with one multiply (SipHash cost more than the rest of a table
/// operation). Only this node inserts keys (the ids it hands out, a counter), so a peer can
/// only look keys up and cannot crowd a bucket with crafted ones.
#[derive(Debug, Default, Clone, Copy)]
struct RouteHasher(u64);

impl Hasher for RouteHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type Routes = HashMap<u64, Entry, BuildHasherDefault<RouteHasher>>;

/// The pending-request table of one node. A request registered with a reply timeout
/// ([`register_timed`](Pending::register_timed)) is ended with `ReplyTimeout` by the table's
/// reaper ([`reap`]) instead of a timer of its own: one timer per node, not one per request.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    by_route: Mutex<Table>,
    /// Wakes the reaper when a deadline earlier than its next wake-up is registered.
    wake: Notify,
    /// The reply routes of requests this node forwarded for another node (spec 21 §7.3).
    pub(crate) forwarded: ForwardedRoutes,
}

#[derive(Debug, Default)]
struct Table {
    routes: Routes,
    /// Reply deadlines in registration order, one queue per reply timeout in whole
    /// milliseconds ([`queue_timeout`]; with one timeout, registration order is deadline
    /// order). A request that already ended is skipped when it reaches the front, and dropped
    /// in bulk when its queue outgrows the table.
    deadlines: Vec<Deadlines>,
    /// The reaper's next wake-up (`None`: it waits for a deadline).
    armed: Option<Instant>,
    /// The node's reply loop (and with it the reaper) ended: no reply and no timeout can end
    /// a request any more, so a request registered now ends at once.
    stopped: bool,
}

#[derive(Debug)]
struct Deadlines {
    timeout: Duration,
    queue: VecDeque<(Instant, u64)>,
}

/// The deadline queue a request with reply `timeout` joins: `timeout` rounded up to whole
/// milliseconds. A caller that passes what is left of its own deadline (an object request:
/// its timeout less the route lookup) hands every request a timeout nanoseconds apart from
/// the last; one queue each made every registration scan thousands of queues under the
/// table's lock, and the queues of ended requests stayed until the reaper next woke (up to a
/// reply timeout later), slowing every request of the node meanwhile. Within one queue
/// deadlines are then in registration order to within a millisecond: a request may end up
/// to 1 ms past its deadline.
fn queue_timeout(timeout: Duration) -> Duration {
    let ms = timeout.as_nanos().div_ceil(1_000_000);
    Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

impl Table {
    fn remove(&mut self, route: u64) -> Option<Entry> {
        self.routes.remove(&route)
    }

    /// Queues the deadline of `route`; true when the reaper must wake earlier for it.
    fn push_deadline(&mut self, route: u64, timeout: Duration, deadline: Instant) -> bool {
        let timeout = queue_timeout(timeout);
        let i = match self.deadlines.iter().position(|d| d.timeout == timeout) {
            Some(i) => i,
            None => {
                self.deadlines.push(Deadlines {
                    timeout,
                    queue: VecDeque::new(),
                });
                self.deadlines.len() - 1
            }
        };
        let routes = &self.routes;
        let q = &mut self.deadlines[i].queue;
        while q.front().is_some_and(|(_, r)| !routes.contains_key(r)) {
            q.pop_front();
        }
        if q.len() > 2 * routes.len() + 64 {
            q.retain(|(_, r)| routes.contains_key(r));
        }
        q.push_back((deadline, route));
        if self.armed.is_none_or(|at| deadline < at) {
            self.armed = Some(deadline);
            return true;
        }
        false
    }

    /// Takes the requests whose deadline passed at `now`; sets and returns the next wake-up.
    fn expire(&mut self, now: Instant) -> (Vec<(Entry, Duration)>, Option<Instant>) {
        let mut expired = Vec::new();
        let mut next: Option<Instant> = None;
        let routes = &mut self.routes;
        for d in &mut self.deadlines {
            while let Some(&(at, route)) = d.queue.front() {
                if !routes.contains_key(&route) {
                    d.queue.pop_front();
                } else if at <= now {
                    d.queue.pop_front();
                    if let Some(e) = routes.remove(&route) {
                        expired.push((e, d.timeout));
                    }
                } else {
                    next = Some(next.map_or(at, |n| n.min(at)));
                    break;
                }
            }
        }
        self.deadlines.retain(|d| !d.queue.is_empty());
        self.armed = next;
        (expired, next)
    }
}

impl Pending {
    /// Registers a request before it is queued; the guard removes it when dropped. Its
    /// waiter keeps its own reply timeout.
    pub(crate) fn register(
        self: &Arc<Self>,
        route: ReplyRouteId,
        operation: OperationId,
        peer: &Arc<PeerInfo>,
    ) -> (PendingGuard, oneshot::Receiver<Ended>) {
        self.register_with(route, operation, peer, None)
    }

    /// [`register`](Self::register), the reaper ending the request with
    /// [`ZLinkError::ReplyTimeout`] when no reply came within `timeout` from now.
    pub(crate) fn register_timed(
        self: &Arc<Self>,
        route: ReplyRouteId,
        operation: OperationId,
        peer: &Arc<PeerInfo>,
        timeout: Duration,
    ) -> (PendingGuard, oneshot::Receiver<Ended>) {
        self.register_with(route, operation, peer, Some(timeout))
    }

    fn register_with(
        self: &Arc<Self>,
        route: ReplyRouteId,
        operation: OperationId,
        peer: &Arc<PeerInfo>,
        timeout: Option<Duration>,
    ) -> (PendingGuard, oneshot::Receiver<Ended>) {
        let (tx, rx) = oneshot::channel();
        let entry = Entry {
            operation,
            peer: Arc::clone(peer),
            tx,
        };
        let (wake, refused) = {
            let mut table = self.by_route.lock();
            if table.stopped {
                (false, Some(entry))
            } else {
                table.routes.insert(route.get(), entry);
                let wake = timeout.is_some_and(|t| {
                    Instant::now()
                        .checked_add(t)
                        .is_some_and(|d| table.push_deadline(route.get(), t, d))
                });
                (wake, None)
            }
        };
        if let Some(entry) = refused {
            // The node stopped: nothing could end this request later.
            let _ = entry.tx.send((Err(ZLinkError::ShuttingDown), false));
        }
        if wake {
            self.wake.notify_one();
        }
        (
            PendingGuard {
                pending: Arc::clone(self),
                route,
            },
            rx,
        )
    }

    /// [`complete`](Self::complete) with a reply node `from` sent (read from a connection, or
    /// delivered as a relocation completion record): one from another node than the request
    /// went to is marked answered elsewhere.
    pub(crate) fn complete_from(&self, reply: Reply, from: &zlink_codec::RoutingId) -> bool {
        self.answered(self.end(reply, Some(from)))
    }

    /// Completes the request a reply answers. Returns false (the reply is discarded) when no
    /// request waits on that route, or the OperationId does not match.
    pub(crate) fn complete(&self, reply: Reply) -> bool {
        self.answered(self.end(reply, None))
    }

    /// [`complete_from`](Self::complete_from), giving the reply back when no request of this
    /// node waits for it (no entry on its route, or one of another OperationId: it may answer a
    /// request this node forwarded, whose ids another node issued).
    pub(crate) fn try_complete_from(
        &self,
        reply: Reply,
        from: &zlink_codec::RoutingId,
    ) -> Option<Reply> {
        match self.end(reply, Some(from)) {
            Ending::Completed(_) => None,
            Ending::Unclaimed(reply) => Some(reply),
        }
    }

    /// Whether a waiter took the reply; one no request of this node waited for is discarded
    /// (and counted).
    fn answered(&self, ending: Ending) -> bool {
        match ending {
            Ending::Completed(taken) => taken,
            Ending::Unclaimed(reply) => {
                self.forwarded.discard(&reply, "no request waits for it");
                false
            }
        }
    }

    fn end(&self, reply: Reply, from: Option<&zlink_codec::RoutingId>) -> Ending {
        let route = reply.reply_route().get();
        let e = {
            let mut map = self.by_route.lock();
            match map.remove(route) {
                Some(e) if e.operation == reply.operation_id() => e,
                Some(e) => {
                    // Not this request's reply: it keeps waiting.
                    map.routes.insert(route, e);
                    return Ending::Unclaimed(reply);
                }
                None => return Ending::Unclaimed(reply),
            }
        };
        let elsewhere = from.is_some_and(|from| &e.peer.rid != from);
        Ending::Completed(e.tx.send((Ok(reply), elsewhere)).is_ok())
    }

    /// Ends every request sent on `connection` with `Unavailable` (the connection went down;
    /// nothing is resent). Returns how many ended.
    pub(crate) fn connection_lost(&self, connection: ConnectionId) -> usize {
        let ended: Vec<Entry> = {
            let mut map = self.by_route.lock();
            let routes: Vec<u64> = map
                .routes
                .iter()
                .filter(|(_, e)| e.peer.connection == connection)
                .map(|(r, _)| *r)
                .collect();
            routes.iter().filter_map(|r| map.remove(*r)).collect()
        };
        let n = ended.len();
        for e in ended {
            let _ = e.tx.send((
                Err(ZLinkError::Unavailable {
                    target: crate::messaging::Target::Node(e.peer.rid.clone()),
                    reason: UnavailableReason::ConnectionLost,
                }),
                false,
            ));
        }
        n
    }

    /// Ends every request with `ShuttingDown` (a forced shutdown); the forwarded routes stay
    /// until the node stops (a reply still relayed to its caller is one fewer timeout).
    pub(crate) fn fail_all(&self) -> usize {
        self.end_all(false)
    }

    /// The node's reply loop ended (the node stopped; its tasks are aborted): every request
    /// still waiting ends with `ShuttingDown`, and one registered later ends at once. Without
    /// this a request whose connection's Down event was still queued when the loop was
    /// aborted waited forever: the reaper that would end it at its reply timeout is gone too.
    /// Returns how many ended.
    pub(crate) fn stop(&self) -> usize {
        self.end_all(true)
    }

    fn end_all(&self, stop: bool) -> usize {
        let ended: Vec<Entry> = {
            let mut table = self.by_route.lock();
            table.stopped |= stop;
            table.deadlines.clear();
            table.armed = None;
            table.routes.drain().map(|(_, e)| e).collect()
        };
        let n = ended.len();
        for e in ended {
            let _ = e.tx.send((Err(ZLinkError::ShuttingDown), false));
        }
        n
    }

    /// Requests waiting for a reply.
    pub(crate) fn len(&self) -> usize {
        self.by_route.lock().routes.len()
    }
}

/// The reaper of one node's pending table: ends each request registered with a reply timeout
/// that got no reply in time with [`ZLinkError::ReplyTimeout`], sleeping until the earliest
/// deadline in between. Runs until dropped (aborted with the node's reply loop).
pub(crate) async fn reap(pending: Arc<Pending>) {
    loop {
        let (expired, next) = pending.by_route.lock().expire(Instant::now());
        for (e, timeout) in expired {
            let _ =
                e.tx.send((Err(ZLinkError::ReplyTimeout { timeout }), false));
        }
        match next {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = pending.wake.notified() => {}
                }
            }
            None => pending.wake.notified().await,
        }
    }
}

/// Removes its request from the table when the caller stops waiting (reply, timeout or
/// cancellation), so a later reply is discarded.
#[derive(Debug)]
pub(crate) struct PendingGuard {
    pending: Arc<Pending>,
    route: ReplyRouteId,
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        self.pending.by_route.lock().remove(self.route.get());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Timeouts nanoseconds apart (what is left of each caller's deadline) share one deadline
    /// queue; another whole millisecond is another queue.
    #[test]
    fn timeouts_within_a_millisecond_share_a_deadline_queue() {
        let mut table = Table::default();
        let now = Instant::now();
        let base = Duration::from_secs(30);
        for i in 0..1000u64 {
            let t = base - Duration::from_nanos(i * 997);
            table.push_deadline(i, t, now + t);
        }
        assert_eq!(table.deadlines.len(), 1);
        assert_eq!(table.deadlines[0].timeout, base);
        table.push_deadline(1000, base - Duration::from_millis(2), now + base);
        assert_eq!(table.deadlines.len(), 2);
        assert_eq!(queue_timeout(Duration::ZERO), Duration::ZERO);
        assert_eq!(
            queue_timeout(Duration::from_nanos(1)),
            Duration::from_millis(1)
        );
        assert_eq!(
            queue_timeout(Duration::MAX),
            Duration::from_millis(u64::MAX)
        );
    }
}
