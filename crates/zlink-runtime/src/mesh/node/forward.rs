//! Forwarding a received request to another node unchanged (spec 21 §7.3), and the reply
//! routes a forwarding node keeps for it.
//!
//! The forwarded envelope keeps its OperationId, reply route and original source, so the node
//! that handles it answers the source directly when that source is a Ready peer of its own.
//! Otherwise it answers back on the connection the request reached it on: the forwarding
//! node's. That node keeps, for every request it forwards, the route back — keyed by the ids
//! the forwarded hop carries (its ReplyRouteId and OperationId, both unchanged), naming the
//! connection the request reached it on — and relays a reply (or an error reply) arriving for
//! it to that connection as received ([`ForwardedRoutes::relay`]). A chain of forwards
//! (A→B→C) keeps one route per hop, each naming the hop before. Message Follow
//! (`relocation/follow.rs`) uses this.
//!
//! A route ends with its reply, at its deadline ([`FORWARDED_REPLY_WAIT`]; dropped and
//! counted), when the connection it names goes down (the caller's request ended there with
//! `Unavailable`), or when the node stops. A reply no request and no route waits for is
//! discarded and counted. Each request so gets one terminal at most from this node: a route
//! relays once and is gone.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use zlink_store_spi::entropy::HashMap;
use zlink_transport::{ConnectionId, Envelope, PeerHandle, PeerInfo, Reply, Transport};

use super::core::{DEFAULT_REPLY_TIMEOUT, NodeInner, transport_error};
use crate::messaging::ZLinkError;

/// How long a forwarding node keeps the route of a request it forwarded while no reply comes
/// back through it: the default reply timeout (spec 06 §7), as the request carries no
/// deadline of its own. The route is then dropped and counted, and a later reply discarded
/// and counted; the caller ends the request at its own timeout. A reply the handling node
/// sends to the caller directly never comes back: its route waits out this time.
pub(crate) const FORWARDED_REPLY_WAIT: Duration = DEFAULT_REPLY_TIMEOUT;

#[cfg_attr(not(test), allow(dead_code))]
impl NodeInner {
    /// Queues `envelope` — as received, untouched — on `to`'s application lane.
    pub(crate) async fn forward_app(
        &self,
        envelope: &Envelope,
        to: &PeerHandle,
    ) -> Result<(), ZLinkError> {
        to.send_app(envelope).await.map_err(transport_error)
    }
}

impl NodeInner {
    /// Keeps the route back of `request` — about to be forwarded or relayed to another node,
    /// which may answer back through this one — to the connection of `caller`, the node it
    /// reached this one from (see [`ForwardedRoutes::keep`]). `None` for a one-way, or with no
    /// connection to `caller` left (its request ended there; a reply is discarded and counted).
    pub(crate) fn keep_route_back(
        &self,
        request: &Envelope,
        caller: &zlink_codec::RoutingId,
    ) -> Option<KeptRoute> {
        self.transport
            .peer(caller)
            .and_then(|c| self.pending.forwarded.keep(request, c.info()))
    }
}

/// The ids a forwarded request travels under: its ReplyRouteId and OperationId.
type RouteKey = (u64, u128);

/// One kept route: where the reply goes, and until when it is waited for.
#[derive(Debug)]
struct Route<C> {
    caller: C,
    deadline: Instant,
}

/// The routes of forwarded requests by their ids, `C` naming the caller's connection.
#[derive(Debug)]
struct RouteTable<C> {
    routes: HashMap<RouteKey, Route<C>>,
    /// Deadlines in the order the routes were kept: with one wait for every route, that is
    /// deadline order. A route that already ended is skipped when it reaches the front, and
    /// dropped in bulk when the queue outgrows the table.
    deadlines: VecDeque<(Instant, RouteKey)>,
}

impl<C> Default for RouteTable<C> {
    fn default() -> Self {
        Self {
            routes: HashMap::default(),
            deadlines: VecDeque::new(),
        }
    }
}

impl<C> RouteTable<C> {
    /// Whether the queued deadline `(at, key)` is still its route's.
    fn live(&self, at: Instant, key: &RouteKey) -> bool {
        self.routes.get(key).is_some_and(|r| r.deadline == at)
    }

    /// Keeps the route `key` to `caller` until `deadline`. `None` when a route is already kept
    /// under these ids (it stays); else whether the queue was empty (the reaper must wake).
    fn keep(&mut self, key: RouteKey, caller: C, deadline: Instant) -> Option<bool> {
        if self.routes.contains_key(&key) {
            return None;
        }
        while let Some(&(at, k)) = self.deadlines.front() {
            if self.live(at, &k) {
                break;
            }
            self.deadlines.pop_front();
        }
        if self.deadlines.len() > 2 * self.routes.len() + 64 {
            let routes = &self.routes;
            self.deadlines
                .retain(|(at, k)| routes.get(k).is_some_and(|r| r.deadline == *at));
        }
        let was_empty = self.deadlines.is_empty();
        self.routes.insert(key, Route { caller, deadline });
        self.deadlines.push_back((deadline, key));
        Some(was_empty)
    }

    /// Ends the route `key`, returning its caller.
    fn take(&mut self, key: &RouteKey) -> Option<C> {
        self.routes.remove(key).map(|r| r.caller)
    }

    /// Ends every route whose caller `gone` matches; how many ended.
    fn drop_callers(&mut self, mut gone: impl FnMut(&C) -> bool) -> usize {
        let before = self.routes.len();
        self.routes.retain(|_, r| !gone(&r.caller));
        before - self.routes.len()
    }

    /// Ends the routes whose deadline passed at `now`: how many, and the next deadline.
    fn expire(&mut self, now: Instant) -> (usize, Option<Instant>) {
        let mut expired = 0;
        while let Some(&(at, key)) = self.deadlines.front() {
            if !self.live(at, &key) {
                self.deadlines.pop_front();
            } else if at <= now {
                self.deadlines.pop_front();
                self.routes.remove(&key);
                expired += 1;
            } else {
                return (expired, Some(at));
            }
        }
        (expired, None)
    }

    /// Ends every route; how many ended.
    fn clear(&mut self) -> usize {
        let n = self.routes.len();
        self.routes.clear();
        self.deadlines.clear();
        n
    }

    fn len(&self) -> usize {
        self.routes.len()
    }
}

/// A route kept for one forwarded request ([`ForwardedRoutes::keep`]), to be forgotten if the
/// forward fails.
#[derive(Debug)]
#[must_use = "a failed forward forgets its route"]
pub(crate) struct KeptRoute(RouteKey);

/// The reply routes of the requests this node forwarded, with their reaper and counts (`C`
/// names a caller's connection: its [`PeerInfo`]).
#[derive(Debug)]
pub(crate) struct ForwardedRoutes<C = Arc<PeerInfo>> {
    table: Mutex<RouteTable<C>>,
    /// How long a route is kept without a reply.
    wait: Duration,
    /// Wakes the reaper when a route is kept into an empty queue.
    wake: Notify,
    /// Routes dropped at their deadline without a reply.
    expired: AtomicU64,
    /// Replies neither a request nor a route of this node waited for (late or unknown).
    discarded: AtomicU64,
}

impl<C> Default for ForwardedRoutes<C> {
    fn default() -> Self {
        Self::new(FORWARDED_REPLY_WAIT)
    }
}

impl<C> ForwardedRoutes<C> {
    /// A table keeping each route for `wait` at most.
    pub(crate) fn new(wait: Duration) -> Self {
        Self {
            table: Mutex::new(RouteTable::default()),
            wait,
            wake: Notify::new(),
            expired: AtomicU64::new(0),
            discarded: AtomicU64::new(0),
        }
    }

    /// Ends every route (the node stops). How many ended.
    pub(crate) fn clear(&self) -> usize {
        self.table.lock().clear()
    }

    /// Routes kept now.
    pub(crate) fn len(&self) -> usize {
        self.table.lock().len()
    }

    /// Routes dropped at their deadline without a reply, so far.
    pub(crate) fn expired(&self) -> u64 {
        self.expired.load(Ordering::Relaxed)
    }

    /// Replies discarded so far: ones no request and no route of this node waited for.
    pub(crate) fn discarded(&self) -> u64 {
        self.discarded.load(Ordering::Relaxed)
    }

    /// Counts `reply` as discarded: no request and no route of this node waits for it.
    pub(crate) fn discard(&self, reply: &Reply, why: &'static str) {
        self.discarded.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            route = reply.reply_route().get(),
            why,
            "late or unknown reply discarded"
        );
    }

    /// Keeps the route `key` to `caller` for the wait; whether it was kept (a route already
    /// kept under these ids stays).
    fn keep_key(&self, key: RouteKey, caller: C) -> bool {
        let deadline = Instant::now() + self.wait;
        let kept = self.table.lock().keep(key, caller, deadline);
        if kept == Some(true) {
            self.wake.notify_one();
        }
        kept.is_some()
    }

    /// Drops each route whose deadline passed (counted), sleeping until the earliest deadline
    /// in between. Runs until dropped (aborted with the node's reply loop).
    pub(crate) async fn reap(&self) {
        loop {
            let (expired, next) = self.table.lock().expire(Instant::now());
            if expired > 0 {
                self.expired.fetch_add(expired as u64, Ordering::Relaxed);
                tracing::debug!(
                    expired,
                    "forwarded requests got no reply in time; routes dropped"
                );
            }
            match next {
                Some(at) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at) => {}
                        () = self.wake.notified() => {}
                    }
                }
                None => self.wake.notified().await,
            }
        }
    }
}

impl ForwardedRoutes {
    /// Keeps the route back of the request `request`, about to be forwarded, to `caller` (the
    /// connection it reached this node on). `None` for a one-way, or when a route is already
    /// kept under the same ids (that one stays).
    pub(crate) fn keep(&self, request: &Envelope, caller: &Arc<PeerInfo>) -> Option<KeptRoute> {
        let route = request.reply_route()?;
        let key = (route.get(), request.operation_id().get());
        if !self.keep_key(key, Arc::clone(caller)) {
            tracing::debug!(
                route = key.0,
                "a route is already kept for this forwarded request"
            );
            return None;
        }
        Some(KeptRoute(key))
    }

    /// Ends a route whose forward failed (the request is answered here with the failure).
    pub(crate) fn forget(&self, route: KeptRoute) {
        self.table.lock().take(&route.0);
    }

    /// Relays `reply` to the caller of the forwarded request it answers, on the connection
    /// the request came from, and ends that route. A reply no route waits for — or whose
    /// caller's connection is gone — is discarded and counted. Whether it was relayed.
    pub(crate) fn relay(&self, reply: Reply, transport: &Transport) -> bool {
        let key = (reply.reply_route().get(), reply.operation_id().get());
        let Some(caller) = self.table.lock().take(&key) else {
            self.discard(&reply, "no request or forwarded route waits for it");
            return false;
        };
        let connection = transport
            .peer(&caller.rid)
            .filter(|p| p.info().connection == caller.connection);
        let Some(connection) = connection else {
            self.discard(&reply, "the caller's connection is gone");
            return false;
        };
        match connection.send_reply(&reply) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(peer = %caller.rid, %e, "forwarded reply not relayed");
                self.discard(&reply, "the caller's connection refused it");
                false
            }
        }
    }

    /// Ends every route back to the connection `connection`, which went down (its caller's
    /// request ended there): a reply for them is discarded. How many ended.
    pub(crate) fn connection_lost(&self, connection: ConnectionId) -> usize {
        self.table
            .lock()
            .drop_callers(|c| c.connection == connection)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const WAIT: Duration = Duration::from_secs(30);

    #[test]
    fn a_route_ends_at_its_deadline_and_not_a_moment_before() {
        let mut t = RouteTable::default();
        let start = Instant::now();
        assert_eq!(t.keep((1, 1), 7u64, start + WAIT), Some(true));
        assert_eq!(
            t.keep((2, 2), 7u64, start + WAIT + Duration::from_secs(1)),
            Some(false)
        );
        let just_before = start + WAIT - Duration::from_millis(1);
        assert_eq!(t.expire(just_before), (0, Some(start + WAIT)));
        assert_eq!(t.len(), 2);
        assert_eq!(
            t.expire(start + WAIT),
            (1, Some(start + WAIT + Duration::from_secs(1)))
        );
        assert_eq!(t.take(&(1, 1)), None, "a late reply finds no route");
        assert_eq!(t.take(&(2, 2)), Some(7));
        assert_eq!(
            t.expire(start + 2 * WAIT),
            (0, None),
            "an answered route never expires"
        );
        assert_eq!(t.len(), 0);
    }

    #[tokio::test]
    async fn the_reaper_drops_and_counts_a_route_no_reply_came_for() {
        let wait = Duration::from_millis(50);
        let routes: Arc<ForwardedRoutes<u64>> = Arc::new(ForwardedRoutes::new(wait));
        let reaper = {
            let r = Arc::clone(&routes);
            tokio::spawn(async move { r.reap().await })
        };
        // The reaper sleeps on an empty table; keeping a route wakes it.
        tokio::task::yield_now().await;
        let kept = Instant::now();
        assert!(routes.keep_key((9, 9), 1));
        assert!(!routes.keep_key((9, 9), 2), "one route per ids");
        assert_eq!(routes.len(), 1);
        let bound = kept + Duration::from_secs(5);
        while routes.len() > 0 {
            assert!(Instant::now() < bound, "the reaper never dropped the route");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(Instant::now() >= kept + wait, "not before its deadline");
        assert_eq!(routes.expired(), 1);
        reaper.abort();
    }

    #[test]
    fn a_second_route_under_the_same_ids_leaves_the_first() {
        let mut t = RouteTable::default();
        let at = Instant::now() + WAIT;
        assert!(t.keep((1, 1), 1u64, at).is_some());
        assert_eq!(t.keep((1, 1), 2u64, at), None);
        assert_eq!(t.take(&(1, 1)), Some(1));
        assert_eq!(t.take(&(1, 1)), None, "relayed once");
    }

    #[test]
    fn a_lost_connection_and_a_stop_end_their_routes() {
        let mut t = RouteTable::default();
        let at = Instant::now() + WAIT;
        for (i, conn) in [(1, 10u64), (2, 10), (3, 11)] {
            assert!(t.keep((i, i.into()), conn, at).is_some());
        }
        assert_eq!(t.drop_callers(|c| *c == 10), 2);
        assert_eq!(t.len(), 1);
        assert_eq!(t.clear(), 1);
        assert_eq!(t.len(), 0);
        assert_eq!(t.expire(at), (0, None), "nothing left to expire");
    }

    /// One step on a route table: keep a route, answer it, lose a caller's connection, let
    /// time pass (and the reaper run).
    #[derive(Debug, Clone)]
    enum Op {
        Keep(u8, u8),
        Reply(u8),
        Lost(u8),
        Advance(u16),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..16, 0u8..4).prop_map(|(k, c)| Op::Keep(k, c)),
            (0u8..16).prop_map(Op::Reply),
            (0u8..4).prop_map(Op::Lost),
            (0u16..40).prop_map(Op::Advance),
        ]
    }

    proptest! {
        /// Every kept route ends exactly once — by its reply, its lost connection or its
        /// deadline — and the deadline queue stays bounded by the live routes.
        #[test]
        fn each_route_ends_once_and_the_table_stays_bounded(ops in proptest::collection::vec(op(), 1..200)) {
            let wait = Duration::from_secs(10);
            let start = Instant::now();
            let mut now = start;
            let mut t: RouteTable<u8> = RouteTable::default();
            let mut model: HashMap<RouteKey, (u8, Instant)> = HashMap::default();
            let (mut kept, mut ended) = (0usize, 0usize);
            for op in ops {
                match op {
                    Op::Keep(k, c) => {
                        let key = (u64::from(k) + 1, u128::from(k));
                        let fresh = !model.contains_key(&key);
                        prop_assert_eq!(t.keep(key, c, now + wait).is_some(), fresh);
                        if fresh {
                            model.insert(key, (c, now + wait));
                            kept += 1;
                        }
                        // Compacted as a route is kept: bounded by the live routes.
                        prop_assert!(t.deadlines.len() <= 2 * t.routes.len() + 64);
                    }
                    Op::Reply(k) => {
                        let key = (u64::from(k) + 1, u128::from(k));
                        let want = model.remove(&key).map(|(c, _)| c);
                        ended += usize::from(want.is_some());
                        prop_assert_eq!(t.take(&key), want);
                    }
                    Op::Lost(c) => {
                        let before = model.len();
                        model.retain(|_, (caller, _)| *caller != c);
                        ended += before - model.len();
                        prop_assert_eq!(t.drop_callers(|caller| *caller == c), before - model.len());
                    }
                    Op::Advance(s) => {
                        now += Duration::from_millis(u64::from(s) * 100);
                        let before = model.len();
                        model.retain(|_, (_, at)| *at > now);
                        ended += before - model.len();
                        let (n, _) = t.expire(now);
                        prop_assert_eq!(n, before - model.len());
                    }
                }
                prop_assert_eq!(t.len(), model.len());
            }
            prop_assert_eq!(kept, ended + model.len());
        }
    }
}
