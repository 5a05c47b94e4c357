//! Weighted placement (spec 21 §4, §7; 06 §4).
//!
//! A candidate is eligible when its owner lease is valid, its state is `serving`, it registered
//! the requested (kind, stable type), its placement weight is above 0 and its remaining capacity
//! (active + reserved against the limits) fits the bundle. One eligible candidate is chosen with
//! probability proportional to its weight (0..=10000), summing weights in 64 bits. No eligible
//! candidate is `CapacityExceeded`. Weight 0 only excludes a node from *new* placement: nothing
//! here touches existing objects or reservations.

use std::collections::BTreeSet;

use super::capacity::{CapacityBundle, CapacityLimits, CapacityRow};
use super::error::LocationError;
use super::identity::{HostRun, NodeKey, ObjectKind, StableType};
use super::options::ConfigError;

pub use zlink_codec::records::MAX_WEIGHT;

/// The default placement weight.
pub const DEFAULT_WEIGHT: u16 = 100;

/// Validates a weight from configuration or a runtime change: `0..=10000`.
pub fn check_weight(option: &'static str, value: i64) -> Result<u16, ConfigError> {
    if !(0..=i64::from(MAX_WEIGHT)).contains(&value) {
        return Err(ConfigError::OutOfRange {
            option,
            value,
            min: 0,
            max: i64::from(MAX_WEIGHT),
        });
    }
    // In range above.
    Ok(value as u16)
}

/// Everything the authority operations need to know about a target node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetNode {
    /// The node's descriptor identity.
    pub node: NodeKey,
    /// The node's host run (the owner its objects get).
    pub run: HostRun,
    /// The node's MeshNode `lifecycleGeneration`.
    pub lifecycle_generation: u64,
    /// The node's limits.
    pub limits: CapacityLimits,
    /// The (kind, stable type) pairs the node registered factories for.
    pub offers: BTreeSet<(ObjectKind, StableType)>,
}

/// One placement candidate: a target node and what placement judges it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The node.
    pub target: TargetNode,
    /// Whether its owner lease was valid when read.
    pub lease_valid: bool,
    /// Whether its descriptor state is `serving`.
    pub serving: bool,
    /// Its node-wide placement weight (0..=10000).
    pub weight: u16,
    /// Its capacity row as read from the Location Store.
    pub usage: CapacityRow,
}

impl Candidate {
    /// Whether this candidate can take an object of `(kind, stable_type)` needing `bundle`.
    pub fn eligible(
        &self,
        kind: ObjectKind,
        stable_type: &StableType,
        bundle: &CapacityBundle,
    ) -> bool {
        self.lease_valid
            && self.serving
            && self.weight > 0
            && self.weight <= MAX_WEIGHT
            && self.target.offers.contains(&(kind, stable_type.clone()))
            && self.usage.fits(bundle, &self.target.limits)
    }
}

/// A small, fast pseudo-random source for weighted choice (SplitMix64), seeded from a random
/// UUID so separate hosts do not move in lockstep.
#[derive(Debug, Clone)]
pub struct PlacementRng(u64);

impl PlacementRng {
    /// A randomly seeded source.
    pub fn new() -> Self {
        let (hi, lo) = zlink_store_spi::entropy::uuid_v4().as_u64_pair();
        PlacementRng(hi ^ lo.rotate_left(17))
    }

    /// A source with a fixed seed (for tests and reproducible benchmarks).
    pub fn seeded(seed: u64) -> Self {
        PlacementRng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform value in `0..bound` (`bound > 0`), without modulo bias.
    pub fn below(&mut self, bound: u64) -> u64 {
        let zone = u64::MAX - (u64::MAX % bound);
        loop {
            let v = self.next_u64();
            if v < zone {
                return v % bound;
            }
        }
    }
}

impl Default for PlacementRng {
    fn default() -> Self {
        Self::new()
    }
}

/// Chooses one eligible candidate by weight, or `CapacityExceeded` if there is none.
pub fn choose<'a>(
    candidates: &'a [Candidate],
    kind: ObjectKind,
    stable_type: &StableType,
    bundle: &CapacityBundle,
    rng: &mut PlacementRng,
) -> Result<&'a Candidate, LocationError> {
    let eligible: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| c.eligible(kind, stable_type, bundle))
        .collect();
    // Each weight is at most 10,000 and a slice holds fewer than 2^48 items: no overflow.
    let sum: u64 = eligible.iter().map(|c| u64::from(c.weight)).sum();
    if sum == 0 {
        return Err(LocationError::CapacityExceeded);
    }
    let mut pick = rng.below(sum);
    for c in &eligible {
        let w = u64::from(c.weight);
        if pick < w {
            return Ok(c);
        }
        pick -= w;
    }
    // The picks cover 0..sum exactly.
    Err(LocationError::CapacityExceeded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generation::OwnerLeaseGeneration;
    use crate::identity::{MeshName, RoutingId, new_owner_id};

    fn ty() -> StableType {
        StableType::new("chat").expect("type")
    }

    fn cand(rid: u8, weight: u16) -> Candidate {
        Candidate {
            target: TargetNode {
                node: NodeKey {
                    mesh: MeshName::new("main").expect("mesh"),
                    routing_id: RoutingId::new(vec![rid]).expect("rid"),
                },
                run: HostRun {
                    owner_id: new_owner_id(),
                    lease_generation: OwnerLeaseGeneration::new(1).expect("gen"),
                },
                lifecycle_generation: 1,
                limits: CapacityLimits::unlimited(),
                offers: BTreeSet::from([(ObjectKind::Actor, ty())]),
            },
            lease_valid: true,
            serving: true,
            weight,
            usage: CapacityRow::default(),
        }
    }

    #[test]
    fn weights_at_the_bound_and_one_past_it() {
        assert_eq!(check_weight("placementWeight", 10_000), Ok(10_000));
        assert!(check_weight("placementWeight", 10_001).is_err());
        assert_eq!(check_weight("placementWeight", 0), Ok(0));
        assert!(check_weight("placementWeight", -1).is_err());
    }

    #[test]
    fn choice_follows_the_weight_ratio() {
        let cands = vec![cand(1, 100), cand(2, 300), cand(3, 0)];
        let mut rng = PlacementRng::seeded(7);
        let mut hits = [0u32; 3];
        for _ in 0..40_000 {
            let c = choose(
                &cands,
                ObjectKind::Actor,
                &ty(),
                &CapacityBundle::actor(),
                &mut rng,
            )
            .expect("choice");
            hits[usize::from(c.target.node.routing_id.as_bytes()[0] - 1)] += 1;
        }
        assert_eq!(hits[2], 0, "weight 0 is never chosen");
        let ratio = f64::from(hits[1]) / f64::from(hits[0]);
        assert!((2.7..3.3).contains(&ratio), "ratio {ratio}");
    }

    #[test]
    fn every_ineligible_reason_excludes_and_none_left_is_capacity_exceeded() {
        let mut lease = cand(1, 100);
        lease.lease_valid = false;
        let mut state = cand(2, 100);
        state.serving = false;
        let mut weight = cand(3, 0);
        weight.weight = 0;
        let mut unregistered = cand(4, 100);
        unregistered.target.offers.clear();
        let mut full = cand(5, 100);
        full.target.limits.actors = 1;
        full.usage.actors = 1;
        let all = vec![lease, state, weight, unregistered, full];
        let mut rng = PlacementRng::seeded(1);
        assert!(matches!(
            choose(
                &all,
                ObjectKind::Actor,
                &ty(),
                &CapacityBundle::actor(),
                &mut rng
            ),
            Err(LocationError::CapacityExceeded)
        ));
        assert!(matches!(
            choose(
                &[],
                ObjectKind::Actor,
                &ty(),
                &CapacityBundle::actor(),
                &mut rng
            ),
            Err(LocationError::CapacityExceeded)
        ));
    }

    #[test]
    fn the_weight_sum_uses_64_bits() {
        // 1,000 candidates at the maximum weight sum past 2^23 and choose across the range.
        let cands: Vec<Candidate> = (0..1000u32)
            .map(|i| cand((i % 250) as u8 + 1, MAX_WEIGHT))
            .collect();
        let mut rng = PlacementRng::seeded(3);
        for _ in 0..100 {
            assert!(
                choose(
                    &cands,
                    ObjectKind::Actor,
                    &ty(),
                    &CapacityBundle::actor(),
                    &mut rng
                )
                .is_ok()
            );
        }
    }
}
