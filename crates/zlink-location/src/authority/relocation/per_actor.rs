//! The `PerActor` User Spot move in the location core (spec 21 §8 "PerActor User Spot move
//! record", §8.2 "PerActor User Spot authority transition" / "PerActor member Actor move";
//! 28 §6 "`PerActor` User Spot"): the Spot's authority and each member Actor's owner change
//! separately.
//!
//! The **Spot authority transition** is a NewOwner of the Spot's record through its own
//! reservation (the Spot's capacity: one Spot slot of its type): owner and
//! AuthorityOwnerGeneration move to the target, the ObjectGeneration and SpotId stay, and the
//! same batch writes the runtime-private *move record* (`spot-per-actor-move\0<SpotId>`): the
//! Spot authority source and target, the relocation operation id of the whole move, the
//! member count at the transition and the source/target Actor counts (all on the source).
//!
//! Each **member Actor move** is a NewOwner of the Actor's record through its own reservation
//! that, in the same batch, moves one Actor from the source count to the target count of the
//! move record — conditioned on the record's version and on the operation id, so the sum of
//! the two counts always equals the member count. Concurrent member moves contend on the move
//! record: a batch that conflicted only on it is tried again on the record as read now.

use serde::{Deserialize, Serialize};
use zlink_codec::records::ObjectKind;
use zlink_store_spi::{LocationStore, Mutation, ReadResult, StoreKey};

use super::super::super::engine::Expect;
use super::super::super::error::{InvalidOperation, LocationError, RecordName};
use super::super::super::generation::ObjectGeneration;
use super::super::super::identity::{HostRun, NodeKey, ObjectId};
use super::super::AuthorityClient;
use super::super::handle::AuthorityHandle;
use super::super::outcome::{Conflict, Outcome};
use super::super::rows::{wire_node, wire_run};
use super::TargetReservation;
use crate::admission::AdmissionOp;

/// How many times a member move is tried again after a conflict on the move record alone
/// (another member's move changed the counts meanwhile) before it reports contention.
const MOVE_RECORD_RETRIES: usize = 512;

/// The runtime-private row holding a `PerActor` User Spot's move record.
pub(super) fn per_actor_move_key(spot: &ObjectId) -> Result<StoreKey, LocationError> {
    Ok(StoreKey::new(format!(
        "spot-per-actor-move\0{}",
        spot.as_str()
    ))?)
}

/// A `PerActor` User Spot move record (spec 21 §8): Spot authority source and target, the
/// relocation operation id, the member count and the source/target Actor counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerActorMoveRecord {
    /// The moving Spot.
    pub spot: ObjectId,
    /// The Spot's ObjectGeneration (unchanged by the move).
    pub object_generation: ObjectGeneration,
    /// The host run the Spot's authority moves from.
    pub source: HostRun,
    /// The source MeshNode.
    pub source_node: NodeKey,
    /// The host run the Spot's authority moves to.
    pub target: HostRun,
    /// The target MeshNode.
    pub target_node: NodeKey,
    /// The non-zero relocation operation id of the whole `PerActor` move.
    pub operation: u128,
    /// The Spot's member count at its authority transition.
    pub total: u32,
    /// Members still owned by the source.
    pub source_actors: u32,
    /// Members already owned by the target.
    pub target_actors: u32,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MoveWire {
    record_version: u32,
    spot: String,
    object_generation: String,
    source_owner_id: String,
    source_lease_generation: String,
    source_mesh_name: String,
    source_routing_id_hex: String,
    target_owner_id: String,
    target_lease_generation: String,
    target_mesh_name: String,
    target_routing_id_hex: String,
    operation: String,
    total: u32,
    source_actors: u32,
    target_actors: u32,
}

impl PerActorMoveRecord {
    /// Whether the counts add up to the member count.
    pub fn balanced(&self) -> bool {
        u64::from(self.source_actors) + u64::from(self.target_actors) == u64::from(self.total)
    }

    /// The record's stored bytes.
    pub fn encode(&self) -> Result<Vec<u8>, LocationError> {
        let wire = MoveWire {
            record_version: 1,
            spot: self.spot.as_str().to_owned(),
            object_generation: self.object_generation.to_string(),
            source_owner_id: self.source.owner_id.as_str().to_owned(),
            source_lease_generation: self.source.lease_generation.to_string(),
            source_mesh_name: self.source_node.mesh.as_str().to_owned(),
            source_routing_id_hex: self.source_node.routing_id.to_hex(),
            target_owner_id: self.target.owner_id.as_str().to_owned(),
            target_lease_generation: self.target.lease_generation.to_string(),
            target_mesh_name: self.target_node.mesh.as_str().to_owned(),
            target_routing_id_hex: self.target_node.routing_id.to_hex(),
            operation: format!("{:032x}", self.operation),
            total: self.total,
            source_actors: self.source_actors,
            target_actors: self.target_actors,
        };
        serde_json::to_vec(&wire).map_err(|_| {
            InvalidOperation::RowEncoding {
                record: RecordName::PerActorMove,
            }
            .into()
        })
    }

    /// Decodes stored bytes; anything else is a corrupt PerActor move record.
    pub fn decode(bytes: &[u8]) -> Result<Self, LocationError> {
        let corrupt = || LocationError::corrupt(RecordName::PerActorMove);
        let w: MoveWire = serde_json::from_slice(bytes).map_err(|_| corrupt())?;
        if w.record_version != 1 {
            return Err(corrupt());
        }
        let run = |owner, generation: &str| wire_run(RecordName::PerActorMove, owner, generation);
        let node = |mesh, rid: &str| wire_node(RecordName::PerActorMove, mesh, rid);
        let record = Self {
            spot: ObjectId::new(w.spot).map_err(|_| corrupt())?,
            object_generation: w
                .object_generation
                .parse()
                .ok()
                .and_then(ObjectGeneration::new)
                .ok_or_else(corrupt)?,
            source: run(w.source_owner_id, &w.source_lease_generation)?,
            source_node: node(w.source_mesh_name, &w.source_routing_id_hex)?,
            target: run(w.target_owner_id, &w.target_lease_generation)?,
            target_node: node(w.target_mesh_name, &w.target_routing_id_hex)?,
            operation: u128::from_str_radix(&w.operation, 16).map_err(|_| corrupt())?,
            total: w.total,
            source_actors: w.source_actors,
            target_actors: w.target_actors,
        };
        if record.operation == 0 || !record.balanced() {
            return Err(corrupt());
        }
        Ok(record)
    }
}

impl AuthorityClient {
    /// The `PerActor` User Spot authority transition (spec 21 §8.2): NewOwner of the Spot's
    /// record through `reservation` (the Spot's own capacity; keeps the ObjectGeneration,
    /// issues the next AuthorityOwnerGeneration, consumes the reservation and returns the
    /// source's capacity) and, in the same batch, the move record of relocation operation
    /// `operation`: `members` Actors, all counted on the source. Run by the target. A conflict
    /// changes nothing.
    pub async fn new_owner_per_actor_spot(
        &self,
        spot: &AuthorityHandle,
        reservation: &TargetReservation,
        operation: u128,
        members: u32,
    ) -> Result<Outcome<AuthorityHandle>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::RelocationChange)?;
        if spot.kind() != ObjectKind::UserSpot || operation == 0 {
            return Err(InvalidOperation::ReservationForAnotherObject.into());
        }
        let same = reservation.same_object(spot);
        let record = match Self::new_owner_record(spot, reservation, &admission.run, same)? {
            Ok(record) => record,
            Err(c) => return Ok(Outcome::Conflict(c)),
        };
        let row = PerActorMoveRecord {
            spot: spot.id().clone(),
            object_generation: spot.object_generation(),
            source: spot.owner().clone(),
            source_node: spot.node(),
            target: reservation.target.run.clone(),
            target_node: reservation.target.node.clone(),
            operation,
            total: members,
            source_actors: members,
            target_actors: 0,
        }
        .encode()?;
        let move_key = per_actor_move_key(spot.id())?;
        let extra = (move_key.clone(), None, Mutation::put(move_key, row));
        // The move record has no expectation here: it cannot be the only row that changed.
        Ok(self
            .new_owner_with(spot, reservation, admission, record, Some(extra))
            .await?
            .unwrap_or(Outcome::Conflict(Conflict::Reservation)))
    }

    /// A `PerActor` member Actor move (spec 21 §8.2): NewOwner of the Actor's record through
    /// `reservation` and, in the same batch, one Actor moved from the source count to the
    /// target count of the move record of the User Spot `spot` — only when that record belongs
    /// to relocation operation `operation` and still counts an Actor on the source (else a
    /// conflict: nothing changes). Run by the target.
    pub async fn new_owner_per_actor_member(
        &self,
        actor: &AuthorityHandle,
        reservation: &TargetReservation,
        spot: &ObjectId,
        operation: u128,
    ) -> Result<Outcome<AuthorityHandle>, LocationError> {
        if actor.kind() != ObjectKind::Actor {
            return Err(InvalidOperation::ReservationForAnotherObject.into());
        }
        let move_key = per_actor_move_key(spot)?;
        for _ in 0..MOVE_RECORD_RETRIES {
            let (mut row, version) = match self.store.read(&move_key).await? {
                ReadResult::Found { bytes, version, .. } => {
                    (PerActorMoveRecord::decode(&bytes)?, version)
                }
                ReadResult::Missing { .. } => {
                    return Ok(Outcome::Conflict(Conflict::Reservation));
                }
            };
            if row.operation != operation || row.source_actors == 0 {
                tracing::info!(
                    spot = spot.as_str(),
                    "PerActor member move: the move record is another operation's or complete"
                );
                return Ok(Outcome::Conflict(Conflict::Reservation));
            }
            row.source_actors -= 1;
            row.target_actors += 1;
            let admission = self.gate.admit(AdmissionOp::RelocationChange)?;
            let same = reservation.same_object(actor);
            let record = match Self::new_owner_record(actor, reservation, &admission.run, same)? {
                Ok(record) => record,
                Err(c) => return Ok(Outcome::Conflict(c)),
            };
            let extra = (
                move_key.clone(),
                Some(Expect::Version(version)),
                Mutation::put(move_key.clone(), row.encode()?),
            );
            match self
                .new_owner_with(actor, reservation, admission, record, Some(extra))
                .await?
            {
                None => continue,
                Some(other) => return Ok(other),
            }
        }
        Err(LocationError::Contended)
    }

    /// The move record of the `PerActor` User Spot `spot`, if one was written.
    pub async fn per_actor_move(
        &self,
        spot: &ObjectId,
    ) -> Result<Option<PerActorMoveRecord>, LocationError> {
        match self.store.read(&per_actor_move_key(spot)?).await? {
            ReadResult::Found { bytes, .. } => Ok(Some(PerActorMoveRecord::decode(&bytes)?)),
            _ => Ok(None),
        }
    }

    /// The stored bytes of the move record of `spot`, if one was written.
    pub async fn per_actor_move_bytes(
        &self,
        spot: &ObjectId,
    ) -> Result<Option<Vec<u8>>, LocationError> {
        match self.store.read(&per_actor_move_key(spot)?).await? {
            ReadResult::Found { bytes, .. } => Ok(Some(bytes.to_vec())),
            _ => Ok(None),
        }
    }
}
