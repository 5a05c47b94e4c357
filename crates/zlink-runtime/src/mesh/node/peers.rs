//! The Ready peers of one node, what is known about peers that are not Ready, and the
//! weighted select-one of RouteMesh Channel calls (spec 06 §4, §6, §20).

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::watch;
use zlink_codec::{ChannelName, RoutingId};
use zlink_store_spi::entropy::{HashMap, HashSet};
use zlink_transport::{PeerHandle, PeerInfo};

use super::ready::Waiting;

/// A Ready peer connection and the channel weights the peer last announced.
#[derive(Debug, Clone)]
pub(crate) struct ReadyPeer {
    pub(crate) handle: PeerHandle,
    /// Announced Server weights; `None` until the peer's first announcement.
    pub(crate) weights: Option<BTreeMap<ChannelName, u16>>,
    /// Whether the peer is admitted: named by the discovery list or a manual intent (or the
    /// node has no discovery). An unconfirmed connection is no call target and is closed
    /// unless the next full list names it.
    pub(crate) confirmed: bool,
}

/// Where a channel call goes.
#[derive(Debug, Clone)]
pub(crate) enum Member {
    /// This node (a local dispatch).
    Local,
    /// A Ready peer.
    Remote(PeerHandle),
}

/// The peer table.
#[derive(Debug)]
pub(crate) struct PeerTable {
    ready: HashMap<RoutingId, ReadyPeer>,
    /// Peers known from discovery (RID → Server weights from the descriptor).
    discovered: HashMap<RoutingId, BTreeMap<ChannelName, u16>>,
    /// RIDs named by manual intents (expected or learned).
    manual: HashSet<RoutingId>,
    /// What the last discovery list said of each peer (its endpoint, role, state and whether
    /// the nodes must connect), for the connection status.
    facts: HashMap<RoutingId, super::connections::PeerFacts>,
    /// Peers with a Ready connection at some point since the discovery list named them
    /// (a peer the list drops is forgotten: when it comes back its first connection is new).
    ever_ready: HashSet<RoutingId>,
    /// The discovery reads started so far (each read's sequence number).
    reads: u64,
    /// The sequence number of the last freshly read discovery list applied.
    lists: u64,
    /// Counts every change of the table, for readiness waits.
    changes: watch::Sender<u64>,
}

impl Default for PeerTable {
    fn default() -> Self {
        Self {
            ready: HashMap::default(),
            discovered: HashMap::default(),
            manual: HashSet::default(),
            facts: HashMap::default(),
            ever_ready: HashSet::default(),
            reads: 0,
            lists: 0,
            changes: watch::Sender::new(0),
        }
    }
}

impl PeerTable {
    /// A connection became Ready (it replaces an older one of the same RID). With
    /// `discovery` on, a peer that neither the list nor a manual intent names waits for the
    /// next full list before it is a call target. Returns whether it is confirmed.
    pub(crate) fn up(&mut self, handle: PeerHandle, discovery: bool) -> bool {
        let rid = handle.info().rid.clone();
        let weights = self.discovered.get(&rid).cloned();
        let confirmed =
            !discovery || self.discovered.contains_key(&rid) || self.manual.contains(&rid);
        self.ever_ready.insert(rid.clone());
        self.ready.insert(
            rid,
            ReadyPeer {
                handle,
                weights,
                confirmed,
            },
        );
        self.changed();
        confirmed
    }

    /// A connection went down; ignored when a newer connection already replaced it.
    pub(crate) fn down(&mut self, info: &Arc<PeerInfo>) -> bool {
        match self.ready.get(&info.rid) {
            Some(p) if p.handle.info().connection == info.connection => {
                self.ready.remove(&info.rid);
                self.changed();
                true
            }
            _ => false,
        }
    }

    /// The peer announced its Server weights.
    pub(crate) fn announce(&mut self, rid: &RoutingId, weights: BTreeMap<ChannelName, u16>) {
        if let Some(p) = self.ready.get_mut(rid) {
            p.weights = Some(weights);
        }
    }

    /// Replaces the discovered list (RID → descriptor Server weights).
    pub(crate) fn set_discovered(&mut self, nodes: HashMap<RoutingId, BTreeMap<ChannelName, u16>>) {
        for (rid, w) in &nodes {
            if let Some(p) = self.ready.get_mut(rid) {
                p.confirmed = true;
                if p.weights.is_none() {
                    p.weights = Some(w.clone());
                }
            }
        }
        self.ever_ready
            .retain(|rid| nodes.contains_key(rid) || self.ready.contains_key(rid));
        self.discovered = nodes;
        self.changed();
    }

    /// Whether `rid` is a peer the last list names, that this node must connect to and has
    /// not been connected to since the list named it: its first connection is being made.
    pub(crate) fn first_connection_pending(&self, rid: &RoutingId) -> bool {
        self.facts.get(rid).is_some_and(|f| f.required)
            && self.ready(rid).is_none()
            && !self.ever_ready.contains(rid)
    }

    /// Whether a fresh list read by a read that started after the `after`-th was applied.
    pub(crate) fn fresh_list_since(&self, after: u64) -> bool {
        self.lists > after
    }

    /// A discovery read starts: its sequence number.
    pub(crate) fn read_started(&mut self) -> u64 {
        self.reads += 1;
        self.reads
    }

    /// The list freshly read by read `seq` (not one kept through `storeFailureGrace`) was
    /// applied.
    pub(crate) fn fresh_list_applied(&mut self, seq: u64) {
        self.lists = self.lists.max(seq);
        self.changed();
    }

    /// Replaces what the discovery list says of each peer.
    pub(crate) fn set_facts(&mut self, facts: HashMap<RoutingId, super::connections::PeerFacts>) {
        self.facts = facts;
        self.changed();
    }

    /// What the last discovery list said of each peer.
    pub(crate) fn facts(&self) -> &HashMap<RoutingId, super::connections::PeerFacts> {
        &self.facts
    }

    /// Every Ready connection, confirmed or not.
    pub(crate) fn connected(&self) -> impl Iterator<Item = &ReadyPeer> {
        self.ready.values().filter(|p| p.handle.is_ready())
    }

    /// Replaces the RIDs named by manual intents.
    pub(crate) fn set_manual(&mut self, rids: HashSet<RoutingId>) {
        for rid in &rids {
            if let Some(p) = self.ready.get_mut(rid) {
                p.confirmed = true;
            }
        }
        self.manual = rids;
        self.changed();
    }

    /// Wakes every readiness wait.
    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Follows every change of the table from now on.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The discovery reads started so far.
    pub(crate) fn reads_started(&self) -> u64 {
        self.reads
    }

    /// What this node still waits for before it is ready (`None`: ready): with discovery on, a
    /// fresh list applied by a read that started after the `after`-th; then a Ready, admitted connection to every
    /// peer the last list says this node must connect to (spec 06 §4).
    pub(crate) fn waiting_for(&self, discovery: bool, after: u64) -> Option<Waiting> {
        if discovery && self.lists <= after {
            return Some(Waiting::DiscoveryList);
        }
        let mut missing: Vec<RoutingId> = self
            .facts
            .iter()
            .filter(|(rid, f)| f.required && self.ready(rid).is_none())
            .map(|(rid, _)| rid.clone())
            .collect();
        missing.sort();
        (!missing.is_empty()).then_some(Waiting::Peers(missing))
    }

    /// The Ready connection to `rid`.
    pub(crate) fn ready(&self, rid: &RoutingId) -> Option<&ReadyPeer> {
        self.ready
            .get(rid)
            .filter(|p| p.confirmed && p.handle.is_ready())
    }

    /// Whether a manual intent names `rid`.
    pub(crate) fn is_manual(&self, rid: &RoutingId) -> bool {
        self.manual.contains(rid)
    }

    /// Whether `rid` is a peer this node knows (discovered or manual) without a Ready connection.
    pub(crate) fn is_known(&self, rid: &RoutingId) -> bool {
        self.discovered.contains_key(rid)
            || self.manual.contains(rid)
            || self.ready.get(rid).is_some_and(|p| p.handle.is_ready())
    }

    /// Every Ready peer.
    pub(crate) fn all_ready(&self) -> impl Iterator<Item = &ReadyPeer> {
        self.ready
            .values()
            .filter(|p| p.confirmed && p.handle.is_ready())
    }

    /// The eligible members of `channel`: Ready peers with the membership and a positive
    /// announced weight, plus this node with `local_weight` when it is a member.
    pub(crate) fn candidates(
        &self,
        channel: &ChannelName,
        local_weight: Option<u16>,
    ) -> Vec<(Member, u16)> {
        let mut out: Vec<(Member, u16)> = Vec::new();
        if let Some(w) = local_weight.filter(|w| *w > 0) {
            out.push((Member::Local, w));
        }
        for p in self.all_ready() {
            if !p.handle.info().channels.contains(channel) {
                continue;
            }
            let Some(w) = p.weights.as_ref().and_then(|m| m.get(channel)).copied() else {
                continue;
            };
            if w > 0 {
                out.push((Member::Remote(p.handle.clone()), w));
            }
        }
        out
    }
}

/// Picks one candidate with probability proportional to its weight; the sum is computed in
/// 64 bits (spec 06 §4). `draw` is a uniform value in `0..sum`, given the sum.
pub(crate) fn pick_weighted<T: Clone>(
    candidates: &[(T, u16)],
    draw: impl FnOnce(u64) -> u64,
) -> Option<T> {
    let sum: u64 = candidates.iter().map(|(_, w)| u64::from(*w)).sum();
    if sum == 0 {
        return None;
    }
    let mut x = draw(sum) % sum;
    for (c, w) in candidates {
        let w = u64::from(*w);
        if x < w {
            return Some(c.clone());
        }
        x -= w;
    }
    None
}

/// A uniform draw in `0..bound` (bound > 0).
pub(crate) fn uniform_below(bound: u64) -> u64 {
    // 128 random bits; the modulo bias over a bound ≤ 2^16·2^10 is far below 2^-64.
    let r = zlink_store_spi::entropy::uuid_v4().as_u128();
    (r % u128::from(bound.max(1))) as u64
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn facts(required: bool) -> super::super::connections::PeerFacts {
        super::super::connections::PeerFacts {
            endpoint: "127.0.0.1:1".into(),
            role: zlink_codec::records::ObjectRole::Server,
            state: zlink_codec::records::HostState::Serving,
            required,
        }
    }

    #[test]
    fn readiness_waits_for_a_new_list_then_for_each_required_peer_without_a_connection() {
        let (x, y) = (
            RoutingId::new(b"x".to_vec()).expect("rid"),
            RoutingId::new(b"y".to_vec()).expect("rid"),
        );
        let mut t = PeerTable::default();
        let mut changes = t.subscribe();
        assert_eq!(t.waiting_for(true, 0), Some(Waiting::DiscoveryList));
        assert_eq!(
            t.waiting_for(false, 0),
            None,
            "no discovery: nothing to wait for"
        );
        t.set_discovered(
            [(x.clone(), BTreeMap::new()), (y.clone(), BTreeMap::new())]
                .into_iter()
                .collect(),
        );
        t.set_facts(
            [(x.clone(), facts(true)), (y, facts(false))]
                .into_iter()
                .collect(),
        );
        assert_eq!(
            t.waiting_for(true, 0),
            Some(Waiting::DiscoveryList),
            "a list kept through the grace is no fresh read"
        );
        let read = t.read_started();
        t.fresh_list_applied(read);
        assert!(
            changes.has_changed().expect("open"),
            "a change wakes the waits"
        );
        changes.mark_unchanged();
        assert_eq!(t.waiting_for(true, 0), Some(Waiting::Peers(vec![x])));
        assert_eq!(
            t.waiting_for(true, 1),
            Some(Waiting::DiscoveryList),
            "a list read before the wait began does not count"
        );
        t.set_facts(HashMap::default());
        assert!(changes.has_changed().expect("open"));
        assert_eq!(t.waiting_for(true, 0), None);
    }

    #[test]
    fn weight_zero_is_never_picked_and_an_all_zero_set_picks_nothing() {
        let c = [("a", 0u16), ("b", 5), ("c", 0)];
        for x in 0..5 {
            assert_eq!(pick_weighted(&c, |_| x), Some("b"));
        }
        assert_eq!(pick_weighted(&[("a", 0u16)], |_| 0), None);
        assert_eq!(pick_weighted::<&str>(&[], |_| 0), None);
    }

    proptest! {
        /// Every draw in 0..sum lands on exactly the candidate whose weight interval holds it,
        /// so each is picked for exactly `weight` of the `sum` draws.
        #[test]
        fn each_candidate_owns_exactly_its_weight_of_draws(weights in proptest::collection::vec(0u16..=10_000, 1..8)) {
            let c: Vec<(usize, u16)> = weights.iter().copied().enumerate().collect();
            let sum: u64 = weights.iter().map(|w| u64::from(*w)).sum();
            let mut counts = vec![0u64; weights.len()];
            // Sample the boundaries of every interval rather than all of 0..sum.
            let mut start = 0u64;
            for (i, w) in weights.iter().enumerate() {
                let w = u64::from(*w);
                if w > 0 {
                    prop_assert_eq!(pick_weighted(&c, |_| start), Some(i));
                    prop_assert_eq!(pick_weighted(&c, |_| start + w - 1), Some(i));
                    counts[i] += w;
                }
                start += w;
            }
            prop_assert_eq!(start, sum);
            prop_assert_eq!(counts.iter().sum::<u64>(), sum);
        }
    }

    #[test]
    fn the_weight_sum_of_many_maximal_weights_does_not_overflow() {
        let c: Vec<(u32, u16)> = (0..100_000).map(|i| (i, 10_000)).collect();
        assert_eq!(pick_weighted(&c, |sum| sum - 1), Some(99_999));
    }
}
