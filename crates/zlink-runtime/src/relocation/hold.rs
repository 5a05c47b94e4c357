//! What a relocation does with the messages of an object while it moves (21 §7.3, §9.2,
//! §9.4): the source's seal holds them (bounded), the target's temporary queue keeps the
//! early ones, and after the cutover the source follows them to the new owner. Each object
//! has at most one such gate at a time; the lock over all of them keeps a seal from falling
//! between a check and a submit.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc;
use tokio::time::Instant;
use zlink_store_spi::entropy::HashMap;

use super::Relocations;
use super::follow::{FollowChain, FollowRecord, FollowTx};
use crate::messaging::{UnavailableReason, ZLinkError};
use crate::objects::host::{ObjectKey, what};
use crate::objects::live::LiveObject;

/// The most messages one sealed Actor holds.
pub(crate) const HOLD_MAX_RECORDS: usize = 1024;
/// The most bytes (job cost) one sealed Actor holds: 16 MiB.
pub(crate) const HOLD_MAX_BYTES: usize = 16 * 1024 * 1024;

pub(crate) use crate::objects::held::Held;

/// Held messages in arrival order, bounded on records and bytes.
#[derive(Default)]
pub(super) struct Hold {
    held: VecDeque<Held>,
    bytes: usize,
}

/// How many keys one lock of the gates serves in [`Relocations::take_relayable_each`] (a
/// message arriving meanwhile waits for no more than that).
const RELAY_PASS: usize = 256;

impl Hold {
    /// Takes the held messages that came from other nodes, in hold order; the rest stay.
    fn take_relayable(&mut self) -> Vec<Held> {
        if !self.held.iter().any(|m| m.origin.is_some()) {
            return Vec::new();
        }
        let (relay, keep): (VecDeque<Held>, VecDeque<Held>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|m| m.origin.is_some());
        self.bytes = keep.iter().map(|m| m.cost).sum();
        self.held = keep;
        relay.into()
    }

    /// Adds `m`, or refuses it past a bound: a request gets `Unavailable`, a one-way is
    /// dropped (`false`).
    fn push(&mut self, key: &ObjectKey, m: Held) -> bool {
        if self.held.len() >= HOLD_MAX_RECORDS || self.bytes + m.cost > HOLD_MAX_BYTES {
            if let Some(done) = m.reply {
                done.complete(Err(ZLinkError::Unavailable {
                    target: what(key.0, &key.1),
                    reason: UnavailableReason::NotServing,
                }));
            }
            return false;
        }
        self.bytes += m.cost;
        self.held.push_back(m);
        true
    }
}

pub(super) enum Gate {
    /// Source: sealed for a move, messages held.
    Holding(Hold),
    /// Target: prepared, messages that arrived before it is Ready.
    Queueing(Hold),
    /// Source after the cutover: messages forwarded to the new owner the record names until
    /// `until`.
    Following {
        until: Instant,
        /// The record the forwarding task follows by (kept here for tests to read).
        #[cfg_attr(not(test), allow(dead_code))]
        record: FollowRecord,
        tx: FollowTx,
        /// Messages handed to `tx` that the forwarding task has not finished with yet (each
        /// is counted before it is sent, and counted off once forwarded or refused).
        pending: Arc<AtomicUsize>,
    },
}

impl Relocations {
    /// Tests: how many messages the source holds for `key` now.
    #[cfg(test)]
    pub(crate) fn held_len(&self, key: &ObjectKey) -> usize {
        match self.gates.lock().get(key) {
            Some(Gate::Holding(h)) => h.held.len(),
            _ => 0,
        }
    }

    /// Tests: how many messages the target's temporary queue holds for `key` now.
    #[cfg(test)]
    pub(crate) fn queued_len(&self, key: &ObjectKey) -> usize {
        match self.gates.lock().get(key) {
            Some(Gate::Queueing(h)) => h.held.len(),
            _ => 0,
        }
    }

    /// Takes `m` when a relocation holds, queues or follows `key` (`None`); gives it back
    /// otherwise. A follow window that has passed ends here.
    pub(crate) fn intercept(&self, key: &ObjectKey, m: Held) -> Option<Held> {
        self.take(key, m, None)
    }

    /// [`intercept`](Self::intercept), and when no relocation takes `m`, submits it to `live`
    /// under the same lock: a seal can never fall between the check and the submit (else the
    /// message could run after the seal's capture and its effect be lost with the old state).
    /// A message taken without an origin gets `origin` (a copy of the envelope it arrived in),
    /// decided under the same lock: a message from another node that meets a seal is relayed
    /// in its order, never kept back as if sent on this node. A refused submit is returned (a
    /// refused request is also answered through its completion).
    pub(crate) fn submit_unless_taken(
        &self,
        key: &ObjectKey,
        m: Held,
        live: &dyn LiveObject,
        origin: Option<&zlink_transport::Envelope>,
    ) -> Result<(), ZLinkError> {
        self.submit_or_take(key, m, live, origin, false)
    }

    /// [`submit_unless_taken`](Self::submit_unless_taken) for a one-way whose completion
    /// answers its caller once it is admitted (an Instance Spot activation one-way): when no
    /// relocation takes `m`, its completion ends at once (admitted) and `m` is submitted
    /// without it, under the same lock. Taken, the completion stays with it (relayed, run
    /// after a cancel, or refollowed).
    pub(crate) fn admit_unless_taken(
        &self,
        key: &ObjectKey,
        m: Held,
        live: &dyn LiveObject,
    ) -> Result<(), ZLinkError> {
        self.submit_or_take(key, m, live, None, true)
    }

    /// Takes `m` under the gate lock, or submits it to `live` under that lock; `admitted`:
    /// a submitted `m` leaves its completion ended at once (see
    /// [`admit_unless_taken`](Self::admit_unless_taken)).
    fn submit_or_take(
        &self,
        key: &ObjectKey,
        mut m: Held,
        live: &dyn LiveObject,
        origin: Option<&zlink_transport::Envelope>,
        admitted: bool,
    ) -> Result<(), ZLinkError> {
        self.probe.arrival(self, key);
        let mut gates = self.gates.lock();
        let m = if gates.contains_key(key) {
            if m.origin.is_none() {
                m.origin = origin.cloned();
            }
            match self.take_locked(&mut gates, key, m, None) {
                None => return Ok(()),
                Some(m) => m,
            }
        } else {
            m
        };
        let reply = match m.reply {
            Some(done) if admitted => {
                done.handed_over();
                None
            }
            reply => reply,
        };
        live.submit(m.route, m.call, m.cost, reply)
    }

    /// [`intercept`](Self::intercept) for a message another previous owner followed here
    /// with `chain`: a follow window here forwards it with that chain; a hold or queue takes
    /// it like any message from another node (its chain ends there).
    pub(crate) fn intercept_followed(
        &self,
        key: &ObjectKey,
        m: Held,
        chain: FollowChain,
    ) -> Option<Held> {
        self.take(key, m, Some(chain))
    }

    pub(super) fn take(
        &self,
        key: &ObjectKey,
        m: Held,
        chain: Option<FollowChain>,
    ) -> Option<Held> {
        let mut gates = self.gates.lock();
        self.take_locked(&mut gates, key, m, chain)
    }

    pub(super) fn take_locked(
        &self,
        gates: &mut HashMap<ObjectKey, Gate>,
        key: &ObjectKey,
        m: Held,
        chain: Option<FollowChain>,
    ) -> Option<Held> {
        let Some(gate) = gates.get_mut(key) else {
            return Some(m);
        };
        match gate {
            Gate::Holding(h) | Gate::Queueing(h) => {
                let one_way = m.reply.is_none();
                if !h.push(key, m) {
                    if one_way {
                        self.drop_one_way(key, &"the relocation hold is full");
                    } else {
                        tracing::debug!(object = %what(key.0, &key.1), "request refused: the relocation hold is full");
                    }
                }
                None
            }
            Gate::Following {
                until, tx, pending, ..
            } => {
                if Instant::now() < *until {
                    pending.fetch_add(1, Ordering::SeqCst);
                    match tx.send(Box::new((m, chain))) {
                        Ok(()) => return None,
                        Err(mpsc::error::SendError(unsent)) => {
                            let (m, _) = *unsent;
                            pending.fetch_sub(1, Ordering::SeqCst);
                            gates.remove(key);
                            return Some(m);
                        }
                    }
                }
                gates.remove(key);
                Some(m)
            }
        }
    }

    /// Counts and logs one one-way message dropped for `reason` (no one else hears of it).
    pub(super) fn drop_one_way(&self, key: &ObjectKey, reason: &dyn std::fmt::Display) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
        crate::telemetry::relocation::one_way_dropped();
        tracing::warn!(object = %what(key.0, &key.1), %reason, "relocation dropped a one-way message");
    }

    /// Hands held message `m` of `key` to `live` past its mailbox bound (`submit_held`); a
    /// refused one-way is counted and logged, a refused request is answered through its
    /// completion.
    pub(super) fn resubmit(&self, key: &ObjectKey, m: Held, live: &dyn LiveObject) {
        let one_way = m.reply.is_none();
        if let Err(e) = live.submit_held(m.route, m.call, m.cost, m.reply) {
            if one_way {
                self.drop_one_way(key, &e);
            }
        }
    }

    /// Tests: seals `key` as a move does ([`seal`](Self::seal)).
    #[cfg(test)]
    pub(crate) fn seal_for_tests(&self, key: &ObjectKey) -> bool {
        self.seal(key)
    }

    /// Tests: what the relay after relay-ready would take of `key`'s hold
    /// ([`take_relayable_each`](Self::take_relayable_each)); the rest stays held.
    #[cfg(test)]
    pub(crate) fn take_relayable_for_tests(&self, key: &ObjectKey) -> Vec<Held> {
        self.take_relayable(key)
    }

    /// Whether a relocation currently takes messages for `key`.
    pub(crate) fn covers(&self, key: &ObjectKey) -> bool {
        self.gates.lock().contains_key(key)
    }

    /// Seals `key` for a move; `false` if a relocation already covers it.
    pub(super) fn seal(&self, key: &ObjectKey) -> bool {
        let mut gates = self.gates.lock();
        if gates.contains_key(key) {
            return false;
        }
        gates.insert(key.clone(), Gate::Holding(Hold::default()));
        true
    }

    /// Cancels the seal of `key`: its held messages run on `live` in their original order,
    /// under the lock, so nothing arriving meanwhile overtakes them.
    pub(super) fn reopen(&self, key: &ObjectKey, live: &dyn LiveObject) {
        let mut gates = self.gates.lock();
        if let Some(Gate::Holding(h)) = gates.remove(key) {
            for m in h.held {
                self.resubmit(key, m, live);
            }
        }
        drop(gates);
        // A cancelled move: the timers tick again from where the seal stopped them.
        live.timers().resume();
    }

    /// Tests: [`take_relayable_each`](Self::take_relayable_each) of `key` alone.
    #[cfg(test)]
    pub(super) fn take_relayable(&self, key: &ObjectKey) -> Vec<Held> {
        match self.gates.lock().get_mut(key) {
            Some(Gate::Holding(h)) => h.take_relayable(),
            _ => Vec::new(),
        }
    }

    /// After relay-ready: takes, for each of `keys`, the held messages that came from other
    /// nodes, in hold order, to relay them to the target; those sent on this node stay held
    /// (they follow after the cutover, still in their order). Returns the non-empty takes, in
    /// the order of `keys`, taken [`RELAY_PASS`] keys per lock: a `SpotWide` aggregate relays
    /// for every participant on each cutover tick, and a lock per key cost 10,000 lock round
    /// trips a tick.
    pub(super) fn take_relayable_each<'k>(
        &self,
        keys: impl IntoIterator<Item = &'k ObjectKey>,
    ) -> Vec<Vec<Held>> {
        let mut taken = Vec::new();
        let mut keys = keys.into_iter().peekable();
        while keys.peek().is_some() {
            let mut gates = self.gates.lock();
            for key in keys.by_ref().take(RELAY_PASS) {
                if let Some(Gate::Holding(h)) = gates.get_mut(key) {
                    let relay = h.take_relayable();
                    if !relay.is_empty() {
                        taken.push(relay);
                    }
                }
            }
        }
        taken
    }

    /// Turns the seal of `key` into a follow by `record` until `until`: the held messages go
    /// to `tx` first, in order, then every later one. Returns the count of messages handed to
    /// `tx` and not yet done with, which the forwarding task counts off (see
    /// [`forwards_pending`](Self::forwards_pending)).
    pub(super) fn follow(
        &self,
        key: &ObjectKey,
        record: FollowRecord,
        until: Instant,
        tx: FollowTx,
    ) -> Arc<AtomicUsize> {
        let pending = Arc::new(AtomicUsize::new(0));
        let mut gates = self.gates.lock();
        if let Some(Gate::Holding(h)) = gates.remove(key) {
            for m in h.held {
                pending.fetch_add(1, Ordering::SeqCst);
                if let Err(mpsc::error::SendError(unsent)) = tx.send(Box::new((m, None))) {
                    let (m, _) = *unsent;
                    pending.fetch_sub(1, Ordering::SeqCst);
                    match m.reply {
                        Some(done) => done.complete(Err(ZLinkError::Unavailable {
                            target: what(key.0, &key.1),
                            reason: UnavailableReason::NotServing,
                        })),
                        None => self.drop_one_way(key, &"the message follow has ended"),
                    }
                }
            }
        }
        gates.insert(
            key.clone(),
            Gate::Following {
                until,
                record,
                tx,
                pending: Arc::clone(&pending),
            },
        );
        pending
    }

    /// Whether `key` is followed here and its forwarding task still has messages to forward
    /// (spec 21 §1.3, §7.3): a message sent on this node then goes through the same queue, so
    /// it never reaches the new owner ahead of the earlier ones. Once the queue drained (every
    /// earlier message handed to the connection to the new owner), a message may go there
    /// directly, behind them on that connection.
    pub(crate) fn forwards_pending(&self, key: &ObjectKey) -> bool {
        match self.gates.lock().get(key) {
            Some(Gate::Following { until, pending, .. }) => {
                Instant::now() < *until && pending.load(Ordering::SeqCst) > 0
            }
            _ => false,
        }
    }

    /// Tests: the follow record of `key` while its follow window is open here.
    #[cfg(test)]
    pub(crate) fn follow_record(&self, key: &ObjectKey) -> Option<FollowRecord> {
        match self.gates.lock().get(key) {
            Some(Gate::Following { until, record, .. }) if Instant::now() < *until => {
                Some(record.clone())
            }
            _ => None,
        }
    }

    /// Ends the follow window of `key` (messages then find no activation here and are
    /// answered by the record).
    pub(super) fn unfollow(&self, key: &ObjectKey) {
        let mut gates = self.gates.lock();
        if matches!(gates.get(key), Some(Gate::Following { .. })) {
            gates.remove(key);
        }
    }

    /// Whether `payload`, the record of `key` read on this node naming this node's run as owner
    /// with no activation of `key` live here, names a move of `key` away from here that no
    /// relocation here runs: a source stage mark (`preparing`, `captured`, `prepared`) while
    /// nothing of `key` is held, queued or sealed here (a follow of a completed move may be:
    /// it ends once the record is removed, `stale_move_removed`).
    pub(super) fn stale_move(&self, key: &ObjectKey, payload: &[u8]) -> bool {
        let marked = super::stage::mark_of(payload).is_some_and(|mark| {
            matches!(
                mark.get("stage").and_then(|s| s.as_str()),
                Some("preparing" | "captured" | "prepared")
            )
        });
        marked
            && matches!(
                self.gates.lock().get(key),
                None | Some(Gate::Following { .. })
            )
    }

    /// Target: starts the temporary queue of `key` (messages that reach it before Ready);
    /// `false` while a relocation holds or queues it here. A follow of an earlier move of
    /// `key` away from here (the object comes back within the follow window) gives way once
    /// its forward queue is empty: every message it took is then on its way to the owner that
    /// is moving the object here, whose seal holds it for this move; later ones wait in the
    /// queue. While it still has messages to forward, the move is refused (`Occupied`), as
    /// they could otherwise reach that owner after its move and run after later ones here.
    pub(super) fn queue(&self, key: &ObjectKey) -> bool {
        let mut gates = self.gates.lock();
        match gates.get(key) {
            None => {}
            Some(Gate::Following { pending, .. }) if pending.load(Ordering::SeqCst) == 0 => {}
            Some(_) => return false,
        }
        gates.insert(key.clone(), Gate::Queueing(Hold::default()));
        true
    }

    /// Target: the move committed and `live` is in the live set: the queued messages run on it
    /// in order, and dispatch opens.
    pub(super) fn open(&self, key: &ObjectKey, live: &dyn LiveObject) {
        let mut gates = self.gates.lock();
        if let Some(Gate::Queueing(h)) = gates.remove(key) {
            for m in h.held {
                self.resubmit(key, m, live);
            }
        }
    }

    /// Target: the move did not commit here: queued requests get `Unavailable` (the callers
    /// re-read the record), one-ways are dropped, counted and logged.
    pub(super) fn abandon(&self, key: &ObjectKey) {
        let removed = {
            let mut gates = self.gates.lock();
            match gates.get(key) {
                Some(Gate::Queueing(_)) => gates.remove(key),
                _ => None,
            }
        };
        if let Some(Gate::Queueing(h)) = removed {
            for m in h.held {
                match m.reply {
                    Some(done) => done.complete(Err(ZLinkError::Unavailable {
                        target: what(key.0, &key.1),
                        reason: UnavailableReason::NotServing,
                    })),
                    None => self.drop_one_way(key, &"the move did not commit here"),
                }
            }
        }
    }
}

impl crate::objects::interception::Interception for Relocations {
    fn covers(&self, key: &ObjectKey) -> bool {
        Relocations::covers(self, key)
    }

    fn forwards_pending(&self, key: &ObjectKey) -> bool {
        Relocations::forwards_pending(self, key)
    }

    fn went_live(&self, key: &ObjectKey) {
        Relocations::unfollow(self, key);
    }

    fn stale_move(&self, key: &ObjectKey, payload: &[u8]) -> bool {
        Relocations::stale_move(self, key, payload)
    }

    fn stale_move_removed(&self, key: &ObjectKey) {
        Relocations::unfollow(self, key);
    }

    fn source_ended<'a>(
        &'a self,
        host: &'a std::sync::Arc<crate::objects::host::ObjectHost>,
        source: &'a zlink_location::HostRun,
    ) -> crate::messaging::BoxFuture<'a, ()> {
        Box::pin(super::target::release_from_ended_source(host, source))
    }

    fn intercept(&self, key: &ObjectKey, m: Held) -> Option<Held> {
        Relocations::intercept(self, key, m)
    }

    fn submit_unless_taken(
        &self,
        key: &ObjectKey,
        m: Held,
        live: &dyn LiveObject,
        origin: Option<&zlink_transport::Envelope>,
    ) -> Result<(), ZLinkError> {
        Relocations::submit_unless_taken(self, key, m, live, origin)
    }

    fn admit_unless_taken(
        &self,
        key: &ObjectKey,
        m: Held,
        live: &dyn LiveObject,
    ) -> Result<(), ZLinkError> {
        Relocations::admit_unless_taken(self, key, m, live)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
#[path = "hold_tests.rs"]
pub(super) mod tests;
