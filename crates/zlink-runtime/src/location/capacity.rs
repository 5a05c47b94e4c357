//! Per-node capacity accounting (spec 21 §3.3, §4; 06 §4).
//!
//! Each Object Server node has one capacity row in the Location Store (runtime-private key
//! `node-capacity\0{MeshName}\0{hex(RoutingId)}`, see [`super::keys`]) counting, per category,
//! the slots in use (`active`) and the slots secured before a factory or a relocation finishes
//! (`reserved`): all actors, all User/Instance Spots, and each (Spot kind, stable type). A limit
//! of 0 means unlimited; a positive limit bounds `active + reserved`. Every authority change
//! that moves capacity carries the row's expected version and its new value in the same
//! conditional batch as the authority record, so the rows always equal the sum of the
//! allocations recorded in authority records and relocation reservations.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use zlink_codec::records::{AllocationCapacity, SpotTypeSlots as RecordSpotTypeSlots};

use super::error::LocationError;
use super::identity::{ObjectKind, StableType};

/// The largest slot count or limit, `2^31 - 1`.
pub const MAX_SLOTS: u32 = i32::MAX as u32;

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
/// stable type; a User Spot relocation adds one actor slot per member.
///
/// ```
/// use zlink_runtime::location::CapacityBundle;
/// assert!(CapacityBundle::new(0, 0, None).is_err()); // no positive slot
/// assert!(CapacityBundle::new((1u32 << 31) - 1, 0, None).is_ok());
/// assert!(CapacityBundle::new(1u32 << 31, 0, None).is_err());
/// ```
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
        let range = |what: &str, v: u32| {
            if v > MAX_SLOTS {
                Err(LocationError::InvalidOperation(format!(
                    "{what} slots {v} above {MAX_SLOTS}"
                )))
            } else {
                Ok(())
            }
        };
        range("actor", actors)?;
        range("spot", spots)?;
        if let Some(t) = &spot_type {
            range("spot type", t.count)?;
            if !t.kind.is_spot() || t.count == 0 {
                return Err(LocationError::InvalidOperation(
                    "a spot-type slot needs a Spot kind and a positive count".into(),
                ));
            }
        }
        if actors == 0 && spots == 0 && spot_type.is_none() {
            return Err(LocationError::InvalidOperation(
                "a capacity bundle needs at least one positive slot".into(),
            ));
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

/// Slots of one category.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// Slots in use.
    pub active: u64,
    /// Slots secured but not yet in use.
    pub reserved: u64,
}

impl Usage {
    fn total(self) -> u64 {
        self.active + self.reserved
    }

    fn fits(self, add: u32, limit: u32) -> bool {
        limit == 0 || self.total() + u64::from(add) <= u64::from(limit)
    }
}

/// One node's capacity row: usage per category.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapacityRow {
    /// All actors.
    pub actors: Usage,
    /// All User/Instance Spots.
    pub spots: Usage,
    /// Per (Spot kind, stable type); categories at zero are left out.
    pub spot_types: BTreeMap<(ObjectKind, StableType), Usage>,
}

/// Which counters a bundle moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Move {
    Reserve,
    Unreserve,
    Activate,
    ReleaseActive,
}

fn corrupt() -> LocationError {
    LocationError::CorruptRecord {
        what: "node capacity",
    }
}

impl CapacityRow {
    /// Whether `bundle` fits the limits, counting active and reserved slots.
    pub fn fits(&self, bundle: &CapacityBundle, limits: &CapacityLimits) -> bool {
        if bundle.actors > 0 && !self.actors.fits(bundle.actors, limits.actors) {
            return false;
        }
        if bundle.spots > 0 && !self.spots.fits(bundle.spots, limits.spots) {
            return false;
        }
        if let Some(t) = &bundle.spot_type {
            let key = (t.kind, t.stable_type.clone());
            let limit = limits.spot_types.get(&key).copied().unwrap_or(0);
            let usage = self.spot_types.get(&key).copied().unwrap_or_default();
            if !usage.fits(t.count, limit) {
                return false;
            }
        }
        true
    }

    /// Secures `bundle` as reserved, or `CapacityExceeded` (row unchanged).
    pub fn reserve(
        &mut self,
        bundle: &CapacityBundle,
        limits: &CapacityLimits,
    ) -> Result<(), LocationError> {
        if !self.fits(bundle, limits) {
            return Err(LocationError::CapacityExceeded);
        }
        self.apply(bundle, Move::Reserve)
    }

    /// Returns reserved slots (an Abort, or a cancelled relocation reservation).
    pub fn unreserve(&mut self, bundle: &CapacityBundle) -> Result<(), LocationError> {
        self.apply(bundle, Move::Unreserve)
    }

    /// Turns reserved slots into slots in use (a Commit, or NewOwner on the target).
    pub fn activate(&mut self, bundle: &CapacityBundle) -> Result<(), LocationError> {
        self.apply(bundle, Move::Activate)
    }

    /// Returns slots in use (a Delete, or NewOwner on the source).
    pub fn release_active(&mut self, bundle: &CapacityBundle) -> Result<(), LocationError> {
        self.apply(bundle, Move::ReleaseActive)
    }

    fn apply(&mut self, bundle: &CapacityBundle, mv: Move) -> Result<(), LocationError> {
        let mut next = self.clone();
        step(&mut next.actors, bundle.actors, mv)?;
        step(&mut next.spots, bundle.spots, mv)?;
        if let Some(t) = &bundle.spot_type {
            let key = (t.kind, t.stable_type.clone());
            let usage = next.spot_types.entry(key.clone()).or_default();
            step(usage, t.count, mv)?;
            if usage.total() == 0 {
                next.spot_types.remove(&key);
            }
        }
        *self = next;
        Ok(())
    }

    /// The runtime-private encoding of the row.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let wire = WireRow {
            record_version: 1,
            actors: self.actors,
            spots: self.spots,
            spot_types: self
                .spot_types
                .iter()
                .map(|((kind, ty), u)| WireSpotType {
                    object_kind: kind.as_str().to_string(),
                    stable_type: ty.as_str().to_string(),
                    active: u.active,
                    reserved: u.reserved,
                })
                .collect(),
        };
        // Serialising plain structs of strings and integers cannot fail.
        serde_json::to_vec(&wire).unwrap_or_default()
    }

    /// Decodes a stored row strictly (unknown version or fields are errors).
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, LocationError> {
        let wire: WireRow = serde_json::from_slice(bytes).map_err(|_| corrupt())?;
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
            let usage = Usage {
                active: t.active,
                reserved: t.reserved,
            };
            if spot_types.insert((kind, ty), usage).is_some() {
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

fn step(u: &mut Usage, n: u32, mv: Move) -> Result<(), LocationError> {
    let n = u64::from(n);
    if n == 0 {
        return Ok(());
    }
    match mv {
        Move::Reserve => u.reserved += n,
        Move::Unreserve => u.reserved = u.reserved.checked_sub(n).ok_or_else(corrupt)?,
        Move::Activate => {
            u.reserved = u.reserved.checked_sub(n).ok_or_else(corrupt)?;
            u.active += n;
        }
        Move::ReleaseActive => u.active = u.active.checked_sub(n).ok_or_else(corrupt)?,
    }
    Ok(())
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireRow {
    record_version: u32,
    actors: Usage,
    spots: Usage,
    spot_types: Vec<WireSpotType>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireSpotType {
    object_kind: String,
    stable_type: String,
    active: u64,
    reserved: u64,
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
    fn a_limit_counts_active_and_reserved_slots_and_zero_is_unlimited() {
        let limits = CapacityLimits {
            actors: 2,
            spots: 0,
            spot_types: BTreeMap::from([((ObjectKind::UserSpot, ty("game")), 1)]),
        };
        let mut row = CapacityRow::default();
        row.reserve(&CapacityBundle::actor(), &limits).expect("1");
        row.activate(&CapacityBundle::actor()).expect("commit");
        row.reserve(&CapacityBundle::actor(), &limits).expect("2");
        let before = row.clone();
        assert!(matches!(
            row.reserve(&CapacityBundle::actor(), &limits),
            Err(LocationError::CapacityExceeded)
        ));
        assert_eq!(row, before, "a refused reservation changes nothing");
        let spot = CapacityBundle::spot(ObjectKind::UserSpot, ty("game")).expect("bundle");
        row.reserve(&spot, &limits).expect("first game spot");
        assert!(row.reserve(&spot, &limits).is_err(), "type limit 1");
        // Another type is unlimited; the overall spot limit is 0 = unlimited.
        let other = CapacityBundle::spot(ObjectKind::UserSpot, ty("lobby")).expect("bundle");
        for _ in 0..100 {
            row.reserve(&other, &limits).expect("unlimited");
        }
        assert_eq!(row.spots.reserved, 101);
    }

    #[test]
    fn row_round_trips_and_rejects_unknown_versions() {
        let mut row = CapacityRow::default();
        let limits = CapacityLimits::unlimited();
        row.reserve(
            &CapacityBundle::user_spot_relocation(ty("game"), 3).expect("bundle"),
            &limits,
        )
        .expect("reserve");
        let bytes = row.encode();
        assert_eq!(CapacityRow::decode(&bytes).ok(), Some(row));
        let v2 = String::from_utf8(bytes)
            .expect("utf8")
            .replace("\"recordVersion\":1", "\"recordVersion\":2");
        assert!(CapacityRow::decode(v2.as_bytes()).is_err());
    }

    #[test]
    fn returning_more_than_was_secured_is_an_error_not_an_underflow() {
        let mut row = CapacityRow::default();
        assert!(row.unreserve(&CapacityBundle::actor()).is_err());
        assert!(row.release_active(&CapacityBundle::actor()).is_err());
        assert_eq!(row, CapacityRow::default());
    }
}
