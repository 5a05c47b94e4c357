//! Per-node capacity accounting (spec 21 §3.3, §4; 06 §4).
//!
//! Each Object Server node has one runtime-private **allocation row** in the Location Store,
//! `node-capacity\0{MeshName}\0{hex(RoutingId)}`, counting per category every slot secured on
//! the node: slots in use plus slots reserved before a factory or a relocation finishes. The
//! categories are all actors, all User/Instance Spots, and each (Spot kind, stable type). A
//! limit of 0 means unlimited; a positive limit bounds the allocated count (active + reserved).
//!
//! Which of those slots are in use and which are reserved is recorded once, in the authority
//! records themselves (`allocation.state`) and in the relocation reservation rows (always
//! reserved): the row does not copy it. So Reserve, Abort, Delete, NewOwner (on the source)
//! and securing/releasing relocation capacity move the row, while Commit — a state change of
//! the record only — moves no shared row at all and never waits behind a Reserve.
//! [`NodeUsage`] derives the active/reserved split from the records when it is needed (the
//! descriptor's operator copy, tests).
//!
//! Every operation that moves the row carries its expected version and new value in the same
//! conditional batch as the authority record, so the row always equals the sum of the
//! allocations recorded in authority records and relocation reservations.
//!
//! An absent row counts as zero everywhere. The owner sweeps delete the swept run's rows once
//! nothing is allocated on them (conditioned on the version read, in the batch that empties
//! them, or on their own for a row already at zero), so a host run that ended leaves no row
//! behind; a row that still counts any slot stays.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use zlink_codec::records::{AllocationCapacity, SpotTypeSlots as RecordSpotTypeSlots};

pub use zlink_codec::records::MAX_SLOTS;

use super::error::{InvalidOperation, LocationError, RecordName, SlotKind};
use super::identity::{ObjectKind, StableType};

/// The (Spot kind, stable type) slots of a bundle.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SpotTypeSlots {
    /// `UserSpot` or `InstanceSpot`.
    pub kind: ObjectKind,
    /// The Spot's stable type.
    pub stable_type: StableType,
    /// How many slots (1..=2^31-1).
    pub count: u32,
}

/// The capacity one creation or relocation secures at once, as one typed bundle (spec 21 §3.3):
/// an Actor is 1 actor slot; a User/Instance Spot is 1 spot slot plus 1 slot of its kind and
/// stable type; a User Spot relocation adds one actor slot per member. A bundle has at least
/// one positive slot and every count is in `0..=2^31-1` (`capacity::tests`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CapacityBundle {
    actors: u32,
    spots: u32,
    spot_type: Option<SpotTypeSlots>,
}

impl CapacityBundle {
    /// Validates a bundle: every count in `0..=2^31-1`, at least one positive slot, a spot-type
    /// part only for a Spot kind and with a positive count.
    pub fn new(
        actors: u32,
        spots: u32,
        spot_type: Option<SpotTypeSlots>,
    ) -> Result<Self, LocationError> {
        let range = |kind: SlotKind, value: u32| {
            if value > MAX_SLOTS {
                Err(LocationError::from(InvalidOperation::SlotsOutOfRange {
                    kind,
                    value,
                }))
            } else {
                Ok(())
            }
        };
        range(SlotKind::Actor, actors)?;
        range(SlotKind::Spot, spots)?;
        if let Some(t) = &spot_type {
            range(SlotKind::SpotType, t.count)?;
            if !t.kind.is_spot() || t.count == 0 {
                return Err(InvalidOperation::InvalidSpotTypeSlot.into());
            }
        }
        if actors == 0 && spots == 0 && spot_type.is_none() {
            return Err(InvalidOperation::EmptyBundle.into());
        }
        Ok(CapacityBundle {
            actors,
            spots,
            spot_type,
        })
    }

    /// One actor slot.
    pub fn actor() -> Self {
        CapacityBundle {
            actors: 1,
            spots: 0,
            spot_type: None,
        }
    }

    /// One spot slot plus one slot of `(kind, stable_type)`; `kind` must be a Spot kind.
    pub fn spot(kind: ObjectKind, stable_type: StableType) -> Result<Self, LocationError> {
        Self::new(
            0,
            1,
            Some(SpotTypeSlots {
                kind,
                stable_type,
                count: 1,
            }),
        )
    }

    /// A User Spot relocation: the spot, its type, and one actor slot per member.
    pub fn user_spot_relocation(
        stable_type: StableType,
        members: u32,
    ) -> Result<Self, LocationError> {
        Self::new(
            members,
            1,
            Some(SpotTypeSlots {
                kind: ObjectKind::UserSpot,
                stable_type,
                count: 1,
            }),
        )
    }

    /// The bundle an object of `kind` creates.
    pub fn for_object(kind: ObjectKind, stable_type: &StableType) -> Self {
        match kind {
            ObjectKind::Actor => Self::actor(),
            ObjectKind::UserSpot | ObjectKind::InstanceSpot => CapacityBundle {
                actors: 0,
                spots: 1,
                spot_type: Some(SpotTypeSlots {
                    kind,
                    stable_type: stable_type.clone(),
                    count: 1,
                }),
            },
        }
    }

    /// The record form (`allocation.capacity`).
    pub fn to_record(&self) -> AllocationCapacity {
        AllocationCapacity {
            actors: self.actors,
            spots: self.spots,
            spot_type: self.spot_type.as_ref().map(|t| RecordSpotTypeSlots {
                object_kind: t.kind,
                stable_type: t.stable_type.clone(),
                count: t.count,
            }),
        }
    }

    /// From a record's `allocation.capacity` (validated like [`CapacityBundle::new`]).
    pub fn from_record(c: &AllocationCapacity) -> Result<Self, LocationError> {
        Self::new(
            c.actors,
            c.spots,
            c.spot_type.as_ref().map(|t| SpotTypeSlots {
                kind: t.object_kind,
                stable_type: t.stable_type.clone(),
                count: t.count,
            }),
        )
    }

    /// Actor slots.
    pub fn actors(&self) -> u32 {
        self.actors
    }

    /// Spot slots.
    pub fn spots(&self) -> u32 {
        self.spots
    }

    /// The (Spot kind, stable type) slots, if any.
    pub fn spot_type(&self) -> Option<&SpotTypeSlots> {
        self.spot_type.as_ref()
    }
}

/// A node's limits (from its descriptor): 0 means unlimited.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapacityLimits {
    /// The overall actor limit.
    pub actors: u32,
    /// The overall User/Instance Spot limit.
    pub spots: u32,
    /// Per (Spot kind, stable type) limits; a type absent here is unlimited.
    pub spot_types: BTreeMap<(ObjectKind, StableType), u32>,
}

impl CapacityLimits {
    /// Unlimited everywhere.
    pub fn unlimited() -> Self {
        Self::default()
    }

    /// Validates a limit value from configuration or a descriptor: `0..=2^31-1`.
    pub fn check_limit(option: &'static str, value: i64) -> Result<u32, LocationError> {
        if !(0..=i64::from(MAX_SLOTS)).contains(&value) {
            return Err(super::options::ConfigError::OutOfRange {
                option,
                value,
                min: 0,
                max: i64::from(MAX_SLOTS),
            }
            .into());
        }
        // In range above.
        Ok(value as u32)
    }
}

/// Slots of one category, split by state (derived from the records).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Slots in use.
    pub active: u64,
    /// Slots secured but not yet in use.
    pub reserved: u64,
}

/// A node's slots split into in use and reserved, derived from the authority records and
/// relocation reservations that hold them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeUsage {
    /// All actors.
    pub actors: Usage,
    /// All User/Instance Spots.
    pub spots: Usage,
    /// Per (Spot kind, stable type).
    pub spot_types: BTreeMap<(ObjectKind, StableType), Usage>,
    /// Rows of the scanned families the Store could not read (another data type, a corrupt
    /// stored record) or whose bytes did not decode: left out of the counts (each logged).
    pub skipped: usize,
}

impl NodeUsage {
    /// Counts one allocation.
    pub fn add(&mut self, bundle: &CapacityBundle, active: bool) {
        let bump = |u: &mut Usage, n: u32| {
            if active {
                u.active += u64::from(n);
            } else {
                u.reserved += u64::from(n);
            }
        };
        bump(&mut self.actors, bundle.actors);
        bump(&mut self.spots, bundle.spots);
        if let Some(t) = &bundle.spot_type {
            bump(
                self.spot_types
                    .entry((t.kind, t.stable_type.clone()))
                    .or_default(),
                t.count,
            );
        }
    }

    /// The allocation counts this usage adds up to.
    pub fn allocated(&self) -> CapacityRow {
        CapacityRow {
            actors: self.actors.active + self.actors.reserved,
            spots: self.spots.active + self.spots.reserved,
            spot_types: self
                .spot_types
                .iter()
                .filter(|(_, u)| u.active + u.reserved > 0)
                .map(|(k, u)| (k.clone(), u.active + u.reserved))
                .collect(),
        }
    }
}

fn corrupt() -> LocationError {
    LocationError::corrupt(RecordName::NodeCapacity)
}

/// A node's allocation row: per category, the slots secured on the node (in use + reserved).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapacityRow {
    /// All actors.
    pub actors: u64,
    /// All User/Instance Spots.
    pub spots: u64,
    /// Per (Spot kind, stable type); categories at zero are left out.
    pub spot_types: BTreeMap<(ObjectKind, StableType), u64>,
}

impl CapacityRow {
    /// Whether nothing is allocated (every category at zero): the same as an absent row.
    pub fn is_empty(&self) -> bool {
        self.actors == 0 && self.spots == 0 && self.spot_types.values().all(|n| *n == 0)
    }

    /// Whether adding `bundle` keeps every category within `limits` (0 = unlimited).
    pub fn fits(&self, bundle: &CapacityBundle, limits: &CapacityLimits) -> bool {
        let within = |have: u64, add: u32, limit: u32| {
            add == 0 || limit == 0 || have + u64::from(add) <= u64::from(limit)
        };
        if !within(self.actors, bundle.actors, limits.actors)
            || !within(self.spots, bundle.spots, limits.spots)
        {
            return false;
        }
        match &bundle.spot_type {
            None => true,
            Some(t) => {
                let key = (t.kind, t.stable_type.clone());
                let limit = limits.spot_types.get(&key).copied().unwrap_or(0);
                within(
                    self.spot_types.get(&key).copied().unwrap_or(0),
                    t.count,
                    limit,
                )
            }
        }
    }

    /// Adds `bundle` within `limits`, or `CapacityExceeded` (row unchanged).
    pub fn add_within(
        &mut self,
        bundle: &CapacityBundle,
        limits: &CapacityLimits,
    ) -> Result<(), LocationError> {
        if !self.fits(bundle, limits) {
            return Err(LocationError::CapacityExceeded);
        }
        self.actors += u64::from(bundle.actors);
        self.spots += u64::from(bundle.spots);
        if let Some(t) = &bundle.spot_type {
            *self
                .spot_types
                .entry((t.kind, t.stable_type.clone()))
                .or_default() += u64::from(t.count);
        }
        Ok(())
    }

    /// Removes `bundle`; removing more than is counted is an error (row unchanged).
    pub fn remove(&mut self, bundle: &CapacityBundle) -> Result<(), LocationError> {
        let mut next = self.clone();
        next.actors = next
            .actors
            .checked_sub(u64::from(bundle.actors))
            .ok_or_else(corrupt)?;
        next.spots = next
            .spots
            .checked_sub(u64::from(bundle.spots))
            .ok_or_else(corrupt)?;
        if let Some(t) = &bundle.spot_type {
            let key = (t.kind, t.stable_type.clone());
            let have = next.spot_types.get(&key).copied().unwrap_or(0);
            let left = have.checked_sub(u64::from(t.count)).ok_or_else(corrupt)?;
            if left == 0 {
                next.spot_types.remove(&key);
            } else {
                next.spot_types.insert(key, left);
            }
        }
        *self = next;
        Ok(())
    }

    /// The runtime-private encoding of the row; an encoding failure is an error, never empty
    /// bytes in the Store.
    pub fn encode(&self) -> Result<Vec<u8>, InvalidOperation> {
        let wire = WireCounts {
            record_version: 1,
            actors: self.actors,
            spots: self.spots,
            spot_types: self
                .spot_types
                .iter()
                .map(|((kind, ty), n)| WireSpotType {
                    object_kind: kind.as_str().to_string(),
                    stable_type: ty.as_str().to_string(),
                    count: *n,
                })
                .collect(),
        };
        serde_json::to_vec(&wire).map_err(|_| InvalidOperation::RowEncoding {
            record: RecordName::NodeCapacity,
        })
    }

    /// Decodes a stored row strictly (unknown version or fields are errors).
    pub fn decode(bytes: &[u8]) -> Result<Self, LocationError> {
        let wire: WireCounts = serde_json::from_slice(bytes).map_err(|_| corrupt())?;
        if wire.record_version != 1 {
            return Err(corrupt());
        }
        let mut spot_types = BTreeMap::new();
        for t in wire.spot_types {
            let kind = ObjectKind::parse(&t.object_kind)
                .ok()
                .filter(|k| k.is_spot())
                .ok_or_else(corrupt)?;
            let ty = StableType::new(t.stable_type).map_err(|_| corrupt())?;
            if t.count == 0 || spot_types.insert((kind, ty), t.count).is_some() {
                return Err(corrupt());
            }
        }
        Ok(CapacityRow {
            actors: wire.actors,
            spots: wire.spots,
            spot_types,
        })
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireCounts {
    record_version: u32,
    actors: u64,
    spots: u64,
    spot_types: Vec<WireSpotType>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireSpotType {
    object_kind: String,
    stable_type: String,
    count: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(s: &str) -> StableType {
        StableType::new(s).expect("type")
    }

    #[test]
    fn bundle_counts_at_the_bound_and_one_past_it() {
        assert!(CapacityBundle::new(MAX_SLOTS, MAX_SLOTS, None).is_ok());
        assert!(CapacityBundle::new(MAX_SLOTS + 1, 0, None).is_err());
        assert!(CapacityBundle::new(0, MAX_SLOTS + 1, None).is_err());
        let t = |count| {
            Some(SpotTypeSlots {
                kind: ObjectKind::UserSpot,
                stable_type: ty("game"),
                count,
            })
        };
        assert!(CapacityBundle::new(0, 1, t(MAX_SLOTS)).is_ok());
        assert!(CapacityBundle::new(0, 1, t(MAX_SLOTS + 1)).is_err());
        assert!(CapacityBundle::new(0, 1, t(0)).is_err());
        assert!(CapacityBundle::new(0, 0, None).is_err());
        let actor_type = Some(SpotTypeSlots {
            kind: ObjectKind::Actor,
            stable_type: ty("chat"),
            count: 1,
        });
        assert!(CapacityBundle::new(0, 1, actor_type).is_err());
    }

    #[test]
    fn limits_at_the_bound_and_one_past_it() {
        assert_eq!(
            CapacityLimits::check_limit("actors", i64::from(MAX_SLOTS)).ok(),
            Some(MAX_SLOTS)
        );
        assert!(CapacityLimits::check_limit("actors", i64::from(MAX_SLOTS) + 1).is_err());
        assert_eq!(CapacityLimits::check_limit("actors", 0).ok(), Some(0));
        assert!(CapacityLimits::check_limit("actors", -1).is_err());
    }

    #[test]
    fn a_limit_bounds_allocated_slots_and_zero_is_unlimited() {
        let limits = CapacityLimits {
            actors: 2,
            spots: 0,
            spot_types: BTreeMap::from([((ObjectKind::UserSpot, ty("game")), 1)]),
        };
        let mut row = CapacityRow::default();
        row.add_within(&CapacityBundle::actor(), &limits)
            .expect("1");
        row.add_within(&CapacityBundle::actor(), &limits)
            .expect("2");
        let before = row.clone();
        assert!(matches!(
            row.add_within(&CapacityBundle::actor(), &limits),
            Err(LocationError::CapacityExceeded)
        ));
        assert_eq!(row, before, "a refused reservation changes nothing");
        let spot = CapacityBundle::spot(ObjectKind::UserSpot, ty("game")).expect("bundle");
        row.add_within(&spot, &limits).expect("first game spot");
        assert!(row.add_within(&spot, &limits).is_err(), "type limit 1");
        // Another type is unlimited; the overall spot limit is 0 = unlimited.
        let other = CapacityBundle::spot(ObjectKind::UserSpot, ty("lobby")).expect("bundle");
        for _ in 0..100 {
            row.add_within(&other, &limits).expect("unlimited");
        }
        assert_eq!(row.spots, 101);
    }

    #[test]
    fn rows_round_trip_and_reject_unknown_versions() {
        let mut row = CapacityRow::default();
        row.add_within(
            &CapacityBundle::user_spot_relocation(ty("game"), 3).expect("bundle"),
            &CapacityLimits::unlimited(),
        )
        .expect("add");
        let bytes = row.encode().expect("encode");
        assert_eq!(CapacityRow::decode(&bytes).ok(), Some(row));
        let v2 = String::from_utf8(bytes)
            .expect("utf8")
            .replace("\"recordVersion\":1", "\"recordVersion\":2");
        assert!(CapacityRow::decode(v2.as_bytes()).is_err());
    }

    #[test]
    fn returning_more_than_was_secured_is_an_error_not_an_underflow() {
        let mut row = CapacityRow::default();
        assert!(row.remove(&CapacityBundle::actor()).is_err());
        assert_eq!(row, CapacityRow::default());
    }

    #[test]
    fn usage_adds_up_to_the_allocation() {
        let mut usage = NodeUsage::default();
        let spot = CapacityBundle::spot(ObjectKind::UserSpot, ty("game")).expect("bundle");
        usage.add(&spot, true);
        usage.add(&spot, false);
        usage.add(&CapacityBundle::actor(), false);
        assert_eq!(
            usage.spots,
            Usage {
                active: 1,
                reserved: 1
            }
        );
        let allocated = usage.allocated();
        assert_eq!((allocated.actors, allocated.spots), (1, 2));
        assert_eq!(
            allocated
                .spot_types
                .get(&(ObjectKind::UserSpot, ty("game"))),
            Some(&2)
        );
    }
}
