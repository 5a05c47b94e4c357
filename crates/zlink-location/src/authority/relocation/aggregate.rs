//! The `SpotWide` User Spot aggregate move in the location core (spec 21 §8, §8.2; 28 §6;
//! 22 §4): the Spot and every member Actor at the seal move as one operation. Target capacity
//! for all of them is secured in one reservation against the Spot's record (the aggregate
//! authority), and one NewOwner CAS over the Spot's record, the reservation row, the
//! inventory root row and the capacity rows moves the Spot and, through it, every member
//! (members resolve their owner through the Spot's record). The member records are not
//! rewritten: one batch holds at most 2,048 keys and the member count is unbounded.

use zlink_codec::records::{AllocationState, ObjectKind};
use zlink_store_spi::{Mutation, ReadResult, StoreKey};

use super::super::super::capacity::CapacityBundle;
use super::super::super::engine::{CapMove, CapMoveKind, Expect, JobResult, Plan};
use super::super::super::error::{InvalidOperation, LocationError};
use super::super::super::identity::{ObjectId, StableType};
use super::super::super::keys;
use super::super::super::placement::TargetNode;
use super::super::AuthorityClient;
use super::super::handle::AuthorityHandle;
use super::super::op::{
    Op, Write, conflict_from_reads, ensure_offers, leases, record_outcome, with_handle,
};
use super::super::outcome::{Conflict, Outcome};
use super::TargetReservation;
use crate::admission::AdmissionOp;

/// The runtime-private row holding a `SpotWide` User Spot's relocation inventory root (the
/// encoded [`zlink_relocation::inventory::InventoryRoot`]: start page, total count, content
/// checksum), written by the aggregate NewOwner.
pub(super) fn inventory_root_key(spot: &ObjectId) -> Result<StoreKey, LocationError> {
    Ok(StoreKey::new(format!("spot-inventory\0{}", spot.as_str()))?)
}

impl TargetReservation {
    /// Whether it is the aggregate reservation of the `SpotWide` User Spot `handle` names: the
    /// Spot's incarnation, with the Spot's own capacity plus one Actor slot per member.
    pub(super) fn same_aggregate(&self, handle: &AuthorityHandle) -> bool {
        let own = handle.bundle();
        handle.kind() == ObjectKind::UserSpot
            && &self.row.id == handle.id()
            && self.row.kind == handle.kind()
            && self.row.object_generation == handle.object_generation()
            && own.actors() == 0
            && self.row.bundle.spots() == own.spots()
            && self.row.bundle.spot_type() == own.spot_type()
    }
}

impl AuthorityClient {
    /// Secures target capacity for a `SpotWide` User Spot and its `members` member Actors
    /// together (spec 21 §8.1, 28 §6), in one reservation against the Spot's record: the
    /// target must offer the Spot's type and every type in `member_types`, and have room for
    /// all of them at once; short of room the outcome is a `Conflict` and nothing is stored.
    pub async fn secure_spot_wide(
        &self,
        spot: &AuthorityHandle,
        member_types: &[StableType],
        members: u32,
        target: TargetNode,
        reservation_id: Option<u128>,
    ) -> Result<Outcome<TargetReservation>, LocationError> {
        if spot.kind() != ObjectKind::UserSpot {
            return Err(InvalidOperation::ReservationForAnotherObject.into());
        }
        for t in member_types {
            ensure_offers(&target, ObjectKind::Actor, t)?;
        }
        let bundle = CapacityBundle::user_spot_relocation(spot.stable_type().clone(), members)?;
        self.secure_bundle(spot, target, reservation_id, bundle)
            .await
    }

    /// The aggregate NewOwner (spec 21 §8.2, 28 §6): one CAS over the Spot's record (at the
    /// version the reservation expects), the reservation row (consumed), the inventory root
    /// row (`root`, the encoded inventory root of the move) and the capacity rows (the
    /// target's secured capacity becomes capacity in use; the source's for the Spot and every
    /// member is returned). Keeps the ObjectGeneration and issues the next
    /// AuthorityOwnerGeneration. A conflict changes nothing.
    pub async fn new_owner_spot_wide(
        &self,
        spot: &AuthorityHandle,
        reservation: &TargetReservation,
        root: Vec<u8>,
    ) -> Result<Outcome<AuthorityHandle>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::RelocationChange)?;
        let same = reservation.same_aggregate(spot);
        let record = match Self::new_owner_record(spot, reservation, &admission.run, same)? {
            Ok(record) => record,
            Err(c) => return Ok(Outcome::Conflict(c)),
        };
        let size = record.payload.len() * 4 / 3 + root.len() + 1024;
        let key = keys::authority(spot.kind(), spot.id())?;
        let root_key = inventory_root_key(spot.id())?;
        let mut op = Op {
            plan: Plan {
                own: vec![
                    (
                        key.clone(),
                        Some(Expect::Version(reservation.expects.clone())),
                    ),
                    (
                        reservation.key.clone(),
                        Some(Expect::Version(reservation.version.clone())),
                    ),
                    (root_key.clone(), None),
                ],
                authority_owner_generation: true,
                // The Spot and every member were counted on the source node: all returned.
                capacity: vec![CapMove {
                    node: spot.node(),
                    kind: CapMoveKind::Release,
                    bundle: reservation.row.bundle.clone(),
                }],
                leases: leases(&admission.run, None)?,
                admission: Some((admission.op, admission.run)),
                size_hint: size + 512,
                ..Plan::default()
            },
            write: Write::Issued {
                key,
                record: Box::new(record),
                fill_object: false,
                fill_owner: true,
                index: None,
                creation: None,
                also: vec![
                    Mutation::Delete(reservation.key.clone()),
                    Mutation::put(root_key, root),
                ],
            },
        };
        op.move_run_entry(
            spot.kind(),
            spot.id(),
            Some(spot.owner()),
            Some(&reservation.target.run),
        )?;
        match self.engine.submit(Box::new(op)).await? {
            JobResult::RecordConflict { reads } => {
                let record_unchanged = matches!(
                    reads.first(),
                    Some((_, ReadResult::Found { version, .. })) if version == &reservation.expects
                );
                if record_unchanged {
                    Ok(Outcome::Conflict(Conflict::Reservation))
                } else {
                    Ok(Outcome::Conflict(conflict_from_reads(spot.id(), &reads)?))
                }
            }
            other => with_handle(record_outcome(spot.id(), other)?),
        }
    }

    /// After an aggregate NewOwner: the member Actor record `member` follows its `SpotWide`
    /// Spot's owner `spot` (this run): owner, lease generation and node are rewritten to the
    /// Spot's, a new AuthorityOwnerGeneration is issued, and no capacity moves (the aggregate
    /// CAS moved it). Conditioned on the member record's version and this run's lease. The
    /// caller vouches for the membership (it verified the member against the moved inventory;
    /// the record payload is opaque here). A member already following is left as it is.
    pub async fn follow_spot_owner(
        &self,
        member: &AuthorityHandle,
        spot: &AuthorityHandle,
    ) -> Result<Outcome<AuthorityHandle>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::RelocationChange)?;
        if let Some(c) = Self::require(member, AllocationState::Active) {
            return Ok(Outcome::Conflict(c));
        }
        if member.kind() != ObjectKind::Actor
            || spot.kind() != ObjectKind::UserSpot
            || spot.owner() != &admission.run
        {
            return Err(InvalidOperation::ReservationForAnotherObject.into());
        }
        if member.owner() == spot.owner() && member.node() == spot.node() {
            return Ok(Outcome::Applied(member.clone()));
        }
        let mut record = member.record().clone();
        record.owner_id = spot.record().owner_id.clone();
        record.owner_lease_generation = spot.record().owner_lease_generation;
        record.allocation.descriptor = spot.record().allocation.descriptor.clone();
        record.allocation.descriptor_lifecycle_generation =
            spot.record().allocation.descriptor_lifecycle_generation;
        let size = record.payload.len() * 4 / 3 + 1024;
        let key = keys::authority(member.kind(), member.id())?;
        let mut op = Op {
            plan: Plan {
                own: vec![(key.clone(), Some(Expect::Version(member.version().clone())))],
                authority_owner_generation: true,
                leases: leases(&admission.run, None)?,
                admission: Some((admission.op, admission.run)),
                size_hint: size + 256,
                ..Plan::default()
            },
            write: Write::Issued {
                key,
                record: Box::new(record),
                fill_object: false,
                fill_owner: true,
                index: None,
                creation: None,
                also: Vec::new(),
            },
        };
        op.move_run_entry(
            member.kind(),
            member.id(),
            Some(member.owner()),
            Some(spot.owner()),
        )?;
        with_handle(record_outcome(
            member.id(),
            self.engine.submit(Box::new(op)).await?,
        )?)
    }

    /// The inventory root the last aggregate NewOwner of the User Spot `spot` wrote, if any
    /// (operational reads and tests; the runtime only writes it).
    pub async fn spot_inventory_root(
        &self,
        spot: &ObjectId,
    ) -> Result<Option<Vec<u8>>, LocationError> {
        use zlink_store_spi::LocationStore;
        match self.store.read(&inventory_root_key(spot)?).await? {
            ReadResult::Found { bytes, .. } => Ok(Some(bytes.to_vec())),
            _ => Ok(None),
        }
    }
}
