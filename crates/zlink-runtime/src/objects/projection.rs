//! The usage a node's MeshNode descriptor projects (spec 21 §4): per category the slots in
//! use (`active`) and secured by operations in progress (`reserved`), and the activation
//! permits in use. The descriptor's counts are a copy for operators; the Location Store's
//! allocation rows stay the source of truth, and placement never reads this copy.

use std::collections::BTreeMap;

use zlink_codec::StableType;
use zlink_codec::records::{ActivationConcurrency, DescriptorCapacity, ObjectKind};
use zlink_codec::records::{SlotUsage, SpotTypeUsage};

use super::host::ObjectHost;
use zlink_location::{LocationError, NodeKey};

/// The most per-type entries a descriptor carries (spec 21 §4).
const MAX_SPOT_TYPES: usize = 1024;

/// What the descriptor projects, compared before a republish.
pub(crate) type Projection = (DescriptorCapacity, ActivationConcurrency);

fn clamp(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn slot(active: u64, secured: u64, limit: u32) -> SlotUsage {
    SlotUsage {
        active: clamp(active),
        reserved: clamp(secured.saturating_sub(active)),
        limit,
    }
}

impl ObjectHost {
    /// This node's usage now: `active` counts the live activations here, `reserved` what the
    /// node's allocation row (one Store read) secures beyond them — creations and relocation
    /// targets in progress. The Entry Spot is not counted (it is not a placed Spot).
    pub(crate) async fn projection(&self) -> Result<Projection, LocationError> {
        let node = NodeKey {
            mesh: self.mesh.clone(),
            routing_id: self.rid.clone(),
        };
        let row = self.location.authority().node_capacity(&node).await?;
        let super::live_set::LiveCounts {
            actors,
            spots,
            spot_types: live_types,
        } = self.live_counts();
        let mut types: BTreeMap<(ObjectKind, StableType), (u64, u64, u32)> = BTreeMap::new();
        for (key, limit) in &self.limits.spot_types {
            types.entry(key.clone()).or_default().2 = *limit;
        }
        for (key, secured) in &row.spot_types {
            types.entry(key.clone()).or_default().1 = *secured;
        }
        for (key, active) in live_types {
            types.entry(key).or_default().0 = active;
        }
        let spot_types = types
            .into_iter()
            .filter(|(_, (active, secured, limit))| *active > 0 || *secured > 0 || *limit > 0)
            .take(MAX_SPOT_TYPES)
            .map(|((kind, stable_type), (active, secured, limit))| {
                let s = slot(active, secured, limit);
                SpotTypeUsage {
                    object_kind: kind,
                    stable_type,
                    active: s.active,
                    reserved: s.reserved,
                    limit,
                }
            })
            .collect();
        let capacity = DescriptorCapacity {
            actors: slot(actors, row.actors, self.limits.actors),
            spots: slot(spots, row.spots, self.limits.spots),
            spot_types,
        };
        let limit = self.activation_limit;
        let free = u32::try_from(self.activations.available_permits()).unwrap_or(u32::MAX);
        let activation = ActivationConcurrency {
            active: limit.saturating_sub(free),
            limit,
        };
        Ok((capacity, activation))
    }
}
