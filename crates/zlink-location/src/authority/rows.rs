//! The runtime-private rows written beside authority records: the lookup index row and the
//! relocation target capacity reservation row (layouts in the crate README). Encoding never
//! falls back to empty bytes: a row that cannot be encoded is an error and nothing is written.

use serde::{Deserialize, Serialize};
use zlink_codec::{MeshName, OwnerId, RoutingId};
use zlink_store_spi::StoreVersion;

use super::super::capacity::{CapacityBundle, SpotTypeSlots};
use super::super::error::{InvalidOperation, LocationError, RecordName};
use super::super::generation::{ObjectGeneration, OwnerLeaseGeneration};
use super::super::identity::{HostRun, NodeKey, ObjectId, ObjectKind, StableType};

#[derive(Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IndexWire {
    record_version: u32,
    object_generation: String,
}

/// The lookup index row of an object: `{"recordVersion":1,"objectGeneration":"n"}`.
pub(super) fn index_bytes(object_generation: u64) -> Result<Vec<u8>, LocationError> {
    serde_json::to_vec(&IndexWire {
        record_version: 1,
        object_generation: object_generation.to_string(),
    })
    .map_err(|_| {
        InvalidOperation::RowEncoding {
            record: RecordName::LocationIndex,
        }
        .into()
    })
}

#[derive(Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReservationWire {
    record_version: u32,
    reservation_id: String,
    object_kind: String,
    id: String,
    stable_type: String,
    object_generation: String,
    secured_at_version: String,
    carried: u64,
    source_owner_id: String,
    source_lease_generation: String,
    source_mesh_name: String,
    source_routing_id_hex: String,
    target_owner_id: String,
    target_lease_generation: String,
    target_mesh_name: String,
    target_routing_id_hex: String,
    target_lifecycle_generation: String,
    actors: u32,
    spots: u32,
    spot_type: Option<(String, String, u32)>,
}

/// A relocation target capacity reservation row (spec 21 §8.1): it fixes the object id, kind
/// and stable type, ObjectGeneration, the authority StoreVersion it was secured against, the
/// source owner (host run and node), the target (host run, node, lifecycle generation) and the
/// capacity held on the target. `carried` counts the reservation-carrying Preserves made since
/// (each rewrites the row in the same batch as the record, so an older copy of the
/// reservation no longer matches the row's version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ReservationRow {
    pub reservation_id: u128,
    pub kind: ObjectKind,
    pub id: ObjectId,
    pub stable_type: StableType,
    pub object_generation: ObjectGeneration,
    pub secured_at: StoreVersion,
    pub carried: u64,
    pub source: HostRun,
    pub source_node: NodeKey,
    pub target: HostRun,
    pub target_node: NodeKey,
    pub target_lifecycle_generation: u64,
    pub bundle: CapacityBundle,
}

impl ReservationRow {
    pub(super) fn encode(&self) -> Result<Vec<u8>, LocationError> {
        let wire = ReservationWire {
            record_version: 1,
            reservation_id: format!("{:032x}", self.reservation_id),
            object_kind: self.kind.as_str().to_string(),
            id: self.id.as_str().to_string(),
            stable_type: self.stable_type.as_str().to_string(),
            object_generation: self.object_generation.to_string(),
            secured_at_version: self.secured_at.as_str().to_string(),
            carried: self.carried,
            source_owner_id: self.source.owner_id.as_str().to_string(),
            source_lease_generation: self.source.lease_generation.to_string(),
            source_mesh_name: self.source_node.mesh.as_str().to_string(),
            source_routing_id_hex: self.source_node.routing_id.to_hex(),
            target_owner_id: self.target.owner_id.as_str().to_string(),
            target_lease_generation: self.target.lease_generation.to_string(),
            target_mesh_name: self.target_node.mesh.as_str().to_string(),
            target_routing_id_hex: self.target_node.routing_id.to_hex(),
            target_lifecycle_generation: self.target_lifecycle_generation.to_string(),
            actors: self.bundle.actors(),
            spots: self.bundle.spots(),
            spot_type: self.bundle.spot_type().map(|t| {
                (
                    t.kind.as_str().to_string(),
                    t.stable_type.as_str().to_string(),
                    t.count,
                )
            }),
        };
        serde_json::to_vec(&wire).map_err(|_| {
            InvalidOperation::RowEncoding {
                record: RecordName::CapacityReservation,
            }
            .into()
        })
    }

    pub(super) fn decode(bytes: &[u8]) -> Result<Self, LocationError> {
        let corrupt = || LocationError::corrupt(RecordName::CapacityReservation);
        let w: ReservationWire = serde_json::from_slice(bytes).map_err(|_| corrupt())?;
        if w.record_version != 1 {
            return Err(corrupt());
        }
        let run =
            |owner, generation: &str| wire_run(RecordName::CapacityReservation, owner, generation);
        let node = |mesh, rid: &str| wire_node(RecordName::CapacityReservation, mesh, rid);
        let spot_type = match w.spot_type {
            None => None,
            Some((kind, stable_type, count)) => Some(SpotTypeSlots {
                kind: ObjectKind::parse(&kind).map_err(|_| corrupt())?,
                stable_type: StableType::new(stable_type).map_err(|_| corrupt())?,
                count,
            }),
        };
        Ok(ReservationRow {
            reservation_id: u128::from_str_radix(&w.reservation_id, 16).map_err(|_| corrupt())?,
            kind: ObjectKind::parse(&w.object_kind).map_err(|_| corrupt())?,
            id: ObjectId::new(w.id).map_err(|_| corrupt())?,
            stable_type: StableType::new(w.stable_type).map_err(|_| corrupt())?,
            object_generation: w
                .object_generation
                .parse()
                .ok()
                .and_then(ObjectGeneration::new)
                .ok_or_else(corrupt)?,
            secured_at: StoreVersion::new(w.secured_at_version).map_err(|_| corrupt())?,
            carried: w.carried,
            source: run(w.source_owner_id, &w.source_lease_generation)?,
            source_node: node(w.source_mesh_name, &w.source_routing_id_hex)?,
            target: run(w.target_owner_id, &w.target_lease_generation)?,
            target_node: node(w.target_mesh_name, &w.target_routing_id_hex)?,
            target_lifecycle_generation: w
                .target_lifecycle_generation
                .parse()
                .map_err(|_| corrupt())?,
            bundle: CapacityBundle::new(w.actors, w.spots, spot_type)?,
        })
    }
}

/// A host run from a row's wire fields (owner id, decimal lease generation); corrupt
/// `record` when they are not valid.
pub(super) fn wire_run(
    record: RecordName,
    owner: String,
    generation: &str,
) -> Result<HostRun, LocationError> {
    let corrupt = || LocationError::corrupt(record);
    Ok(HostRun {
        owner_id: OwnerId::new(owner).map_err(|_| corrupt())?,
        lease_generation: generation
            .parse()
            .ok()
            .and_then(OwnerLeaseGeneration::new)
            .ok_or_else(corrupt)?,
    })
}

/// A node from a row's wire fields (MeshName, RoutingId hex); corrupt `record` when they are
/// not valid.
pub(super) fn wire_node(
    record: RecordName,
    mesh: String,
    rid: &str,
) -> Result<NodeKey, LocationError> {
    let corrupt = || LocationError::corrupt(record);
    Ok(NodeKey {
        mesh: MeshName::new(mesh).map_err(|_| corrupt())?,
        routing_id: RoutingId::from_hex(rid).map_err(|_| corrupt())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(owner: &str, generation: u64) -> HostRun {
        HostRun {
            owner_id: OwnerId::new(owner).expect("owner"),
            lease_generation: OwnerLeaseGeneration::new(generation).expect("generation"),
        }
    }

    fn node(rid: u8) -> NodeKey {
        NodeKey {
            mesh: MeshName::new("main").expect("mesh"),
            routing_id: RoutingId::new(vec![rid]).expect("rid"),
        }
    }

    #[test]
    fn reservation_rows_round_trip_and_reject_other_versions() {
        let row = ReservationRow {
            reservation_id: u128::MAX,
            kind: ObjectKind::UserSpot,
            id: ObjectId::new("room").expect("id"),
            stable_type: StableType::new("game").expect("type"),
            object_generation: ObjectGeneration::new(7).expect("generation"),
            secured_at: StoreVersion::new("42").expect("version"),
            carried: 2,
            source: run("a", 1),
            source_node: node(1),
            target: run("b", 9),
            target_node: node(2),
            target_lifecycle_generation: 3,
            bundle: CapacityBundle::spot(ObjectKind::UserSpot, StableType::new("game").expect("t"))
                .expect("bundle"),
        };
        let bytes = row.encode().expect("encode");
        assert_eq!(ReservationRow::decode(&bytes).expect("decode"), row);
        let text = String::from_utf8(bytes).expect("utf8");
        let other = text.replace("\"recordVersion\":1", "\"recordVersion\":2");
        assert!(matches!(
            ReservationRow::decode(other.as_bytes()),
            Err(LocationError::CorruptRecord { .. })
        ));
    }

    #[test]
    fn index_rows_carry_the_object_generation() {
        assert_eq!(
            index_bytes(12).expect("encode"),
            br#"{"recordVersion":1,"objectGeneration":"12"}"#
        );
    }
}
