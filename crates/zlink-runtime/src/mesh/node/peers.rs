//! The Ready peers of one node, what is known about peers that are not Ready, and the
//! weighted select-one of RouteMesh Channel calls (spec 06 §4, §6, §20).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use zlink_codec::{ChannelName, RoutingId};
use zlink_transport::{PeerHandle, PeerInfo};

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
#[derive(Debug, Default)]
pub(crate) struct PeerTable {
    ready: HashMap<RoutingId, ReadyPeer>,
    /// Peers known from discovery (RID → Server weights from the descriptor).
    discovered: HashMap<RoutingId, BTreeMap<ChannelName, u16>>,
    /// RIDs named by manual intents (expected or learned).
    manual: HashSet<RoutingId>,
    /// What the last discovery list said of each peer (its endpoint, role, state and whether
    /// the nodes must connect), for the connection status.
    facts: HashMap<RoutingId, super::connections::PeerFacts>,
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
        self.ready.insert(
            rid,
            ReadyPeer {
                handle,
                weights,
                confirmed,
            },
        );
        confirmed
    }

    /// A connection went down; ignored when a newer connection already replaced it.
    pub(crate) fn down(&mut self, info: &Arc<PeerInfo>) -> bool {
        match self.ready.get(&info.rid) {
            Some(p) if p.handle.info().connection == info.connection => {
                self.ready.remove(&info.rid);
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
        self.discovered = nodes;
    }

    /// Replaces what the discovery list says of each peer.
    pub(crate) fn set_facts(&mut self, facts: HashMap<RoutingId, super::connections::PeerFacts>) {
        self.facts = facts;
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
    let r = uuid::Uuid::new_v4().as_u128();
    (r % u128::from(bound.max(1))) as u64
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

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
