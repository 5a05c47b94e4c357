//! Relocation target capacity and the owner change (spec 21 §6.1, §8.1, §8.2): securing and
//! releasing target capacity, the reservation-carrying Preserve, and NewOwner.
//!
//! A [`TargetReservation`] fixes the object id, kind and stable type, ObjectGeneration, the
//! authority StoreVersion it expects, the source owner and the target host run, node and
//! capacity. Only the owner secures one, and only against the version it read. A Preserve
//! that carries the reservation (stage records, target readiness, completion-record location)
//! rewrites the reservation row in the same batch as the record and hands back the reservation
//! expecting the record's new version; a regular Preserve carries none, so the reservation no
//! longer matches and a later NewOwner on it is a `Conflict`. NewOwner conditions on the
//! expected version *and* the reservation row's version and consumes the row, so a previous
//! target attempt can never change the owner.

use zlink_codec::records::AllocationState;
use zlink_store_spi::{LocationStore, Mutation, ReadResult, StoreKey, StoreVersion};

use super::super::admission::AdmissionOp;
use super::super::capacity::CapacityBundle;
use super::super::engine::{CapMove, CapMoveKind, Expect, JobResult, Plan};
use super::super::error::{InvalidOperation, LocationError, put_version};
use super::super::generation::ObjectGeneration;
use super::super::identity::{HostRun, ObjectId};
use super::super::keys;
use super::super::placement::TargetNode;
use super::AuthorityClient;
use super::handle::AuthorityHandle;
use super::op::{
    Op, Write, conflict_from_reads, descriptor_ref, encode, ensure_offers, leases, lifecycle,
    record_outcome, rewrite_plan, with_handle,
};
use super::outcome::{Conflict, Outcome};
use super::rows::ReservationRow;

mod aggregate;
mod ended_source;
mod join;
mod per_actor;

pub use per_actor::PerActorMoveRecord;

/// Relocation target capacity secured ahead of a NewOwner (spec 21 §8.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetReservation {
    row: ReservationRow,
    key: StoreKey,
    /// The reservation row's version.
    version: StoreVersion,
    /// The authority StoreVersion the next change through this reservation expects.
    expects: StoreVersion,
    target: TargetNode,
}

/// What a relocation target needs to rebuild the reservation the source secured (the row as
/// stored, its version and the record version it expects), carried on the command plane.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReservationWire {
    /// The encoded reservation row.
    pub row: Vec<u8>,
    /// The reservation row's Store version.
    pub version: String,
    /// The authority record's Store version the next change through the reservation expects.
    pub expects: String,
}

impl TargetReservation {
    /// The form sent to the target.
    pub fn to_wire(&self) -> Result<ReservationWire, LocationError> {
        Ok(ReservationWire {
            row: self.row.encode()?,
            version: self.version.as_str().to_owned(),
            expects: self.expects.as_str().to_owned(),
        })
    }

    /// The reservation rebuilt on its target, which names itself as `target` (a reservation
    /// for another run or node is an invalid operation).
    pub fn from_wire(wire: &ReservationWire, target: TargetNode) -> Result<Self, LocationError> {
        let row = ReservationRow::decode(&wire.row)?;
        if row.target != target.run || row.target_node != target.node {
            return Err(InvalidOperation::NotTheReservationTarget.into());
        }
        Ok(Self {
            key: keys::capacity_reservation(row.reservation_id)?,
            version: StoreVersion::new(wire.version.clone())?,
            expects: StoreVersion::new(wire.expects.clone())?,
            row,
            target,
        })
    }

    /// The non-zero 128-bit ReservationId.
    pub fn reservation_id(&self) -> u128 {
        self.row.reservation_id
    }

    /// The target node.
    pub fn target(&self) -> &TargetNode {
        &self.target
    }

    /// The capacity secured.
    pub fn bundle(&self) -> &CapacityBundle {
        &self.row.bundle
    }

    /// The object it is for.
    pub fn id(&self) -> &ObjectId {
        &self.row.id
    }

    /// The ObjectGeneration it is for.
    pub fn object_generation(&self) -> ObjectGeneration {
        self.row.object_generation
    }

    /// The source owner it was secured by.
    pub fn source(&self) -> &HostRun {
        &self.row.source
    }

    /// How many reservation-carrying Preserves its row has seen.
    pub fn carried(&self) -> u64 {
        self.row.carried
    }

    /// The same reservation expecting the record at `version` (a stage record whose reply was
    /// lost, settled by reading: the record and the row as they are now).
    pub fn expecting(mut self, version: StoreVersion) -> Self {
        self.expects = version;
        self
    }

    /// Whether it was made for exactly this object incarnation and capacity (else using it
    /// with `handle` is an invalid operation).
    fn same_object(&self, handle: &AuthorityHandle) -> bool {
        &self.row.id == handle.id()
            && self.row.kind.authority_kind() == handle.kind().authority_kind()
            && self.row.object_generation == handle.object_generation()
            && &self.row.bundle == handle.bundle()
    }

    /// Whether `handle` is the record version and owner it expects.
    fn matches(&self, handle: &AuthorityHandle) -> bool {
        &self.expects == handle.version() && &self.row.source == handle.owner()
    }

    /// Where a NewOwner through this reservation stands by the record as read now, after its
    /// reply was lost (spec 21 §10: settled by reading, never guessed): still the version and
    /// owner it expects (not applied: the same change may be tried again), the same
    /// incarnation owned by this reservation's target run and node (applied), or anything else
    /// (another change: the move is stale).
    pub fn owner_change_read(&self, handle: &AuthorityHandle) -> OwnerChangeRead {
        self.owner_change_read_with(handle, self.same_object(handle))
    }

    /// [`owner_change_read`](Self::owner_change_read) of a `SpotWide` aggregate NewOwner by
    /// its Spot's record: the reservation secures the Spot's and every member's capacity
    /// together, so the record's own bundle is not the reservation's.
    pub fn owner_change_read_of_aggregate(&self, spot: &AuthorityHandle) -> OwnerChangeRead {
        let same = &self.row.id == spot.id()
            && self.row.kind.authority_kind() == spot.kind().authority_kind()
            && self.row.object_generation == spot.object_generation();
        self.owner_change_read_with(spot, same)
    }

    fn owner_change_read_with(
        &self,
        handle: &AuthorityHandle,
        same_object: bool,
    ) -> OwnerChangeRead {
        if self.matches(handle) {
            OwnerChangeRead::NotApplied
        } else if same_object
            && handle.owner() == &self.target.run
            && handle.node() == self.target.node
            && handle.state() == AllocationState::Active
        {
            OwnerChangeRead::Applied
        } else {
            OwnerChangeRead::Other
        }
    }
}

/// See [`TargetReservation::owner_change_read`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerChangeRead {
    /// The record is still the one the reservation expects.
    NotApplied,
    /// The record names the reservation's target for the same incarnation.
    Applied,
    /// Another change happened.
    Other,
}

impl AuthorityClient {
    /// Secures relocation target capacity for an Active object this host owns (spec 21 §8.1):
    /// checks the record's version, this host's and the target's lease and the target's
    /// remaining capacity, and records a reservation row, in one batch. Retrying with the same
    /// ReservationId and content returns the reservation already made; the same id with other
    /// content, a record that changed, or a host that is not the owner is a conflict.
    pub async fn secure_target(
        &self,
        handle: &AuthorityHandle,
        target: TargetNode,
        reservation_id: Option<u128>,
    ) -> Result<Outcome<TargetReservation>, LocationError> {
        self.secure_bundle(handle, target, reservation_id, handle.bundle().clone())
            .await
    }

    /// [`secure_target`](Self::secure_target) for the capacity `bundle` (the record's own, or
    /// a `SpotWide` User Spot's aggregate: the Spot and every member).
    async fn secure_bundle(
        &self,
        handle: &AuthorityHandle,
        target: TargetNode,
        reservation_id: Option<u128>,
        bundle: CapacityBundle,
    ) -> Result<Outcome<TargetReservation>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::CapacityReservation)?;
        if let Some(c) = Self::require_active_owner(handle, &admission.run) {
            return Ok(Outcome::Conflict(c));
        }
        ensure_offers(&target, handle.kind(), handle.stable_type())?;
        if &target.run == handle.owner() {
            return Err(InvalidOperation::TargetIsCurrentOwner.into());
        }
        lifecycle(&target)?;
        let reservation_id = match reservation_id {
            Some(0) => return Err(InvalidOperation::ZeroReservationId.into()),
            Some(r) => r,
            None => zlink_store_spi::entropy::uuid_v4().as_u128(),
        };
        let row = ReservationRow {
            reservation_id,
            kind: handle.kind(),
            id: handle.id().clone(),
            stable_type: handle.stable_type().clone(),
            object_generation: handle.object_generation(),
            secured_at: handle.version().clone(),
            carried: 0,
            source: handle.owner().clone(),
            source_node: handle.node(),
            target: target.run.clone(),
            target_node: target.node.clone(),
            target_lifecycle_generation: target.lifecycle_generation,
            bundle,
        };
        let bytes = row.encode()?;
        let res_key = keys::capacity_reservation(reservation_id)?;
        let auth_key = keys::authority(handle.kind(), handle.id())?;
        let op = Op {
            plan: Plan {
                own: vec![
                    (auth_key, Some(Expect::Version(handle.version().clone()))),
                    (res_key.clone(), Some(Expect::Missing)),
                ],
                capacity: vec![CapMove {
                    node: target.node.clone(),
                    kind: CapMoveKind::Reserve(target.limits.clone()),
                    bundle: row.bundle.clone(),
                }],
                leases: leases(&admission.run, Some(&target.run))?,
                admission: Some((admission.op, admission.run)),
                size_hint: bytes.len() + 512,
                ..Plan::default()
            },
            write: Write::Rows(vec![Mutation::put(res_key.clone(), bytes.clone())]),
        };
        let made = |version: StoreVersion| TargetReservation {
            row: row.clone(),
            key: res_key.clone(),
            version,
            expects: handle.version().clone(),
            target: target.clone(),
        };
        match self.engine.submit(Box::new(op)).await? {
            JobResult::Applied { put_versions, .. } => {
                Ok(Outcome::Applied(made(put_version(&put_versions, 0)?)))
            }
            JobResult::RecordConflict { reads } => {
                let record_unchanged = matches!(
                    reads.first(),
                    Some((_, ReadResult::Found { version, .. })) if version == handle.version()
                );
                match reads.get(1) {
                    // The same reservation, already made against this very record version.
                    Some((
                        _,
                        ReadResult::Found {
                            bytes: now,
                            version,
                            ..
                        },
                    )) if now.as_ref() == bytes.as_slice() && record_unchanged => {
                        Ok(Outcome::Applied(made(version.clone())))
                    }
                    Some((_, ReadResult::Found { .. })) => {
                        Ok(Outcome::Conflict(Conflict::Reservation))
                    }
                    _ => Ok(Outcome::Conflict(conflict_from_reads(handle.id(), &reads)?)),
                }
            }
            JobResult::LeaseStale { role, run } => {
                Ok(Outcome::Conflict(Conflict::lease_stale(role, run)))
            }
            JobResult::GuardBroken => Ok(Outcome::Conflict(Conflict::RunStillLive)),
        }
    }

    /// The reservation as its row is stored now (spec 21 §10: an unknown outcome is settled by
    /// reading, never guessed): `None` when the row is gone (released, or consumed by
    /// NewOwner) or holds another reservation. The copy read keeps the record version
    /// `reservation` expects and takes the row's current version and carried count.
    pub async fn reservation_now(
        &self,
        reservation: &TargetReservation,
    ) -> Result<Option<TargetReservation>, LocationError> {
        let ReadResult::Found { bytes, version, .. } = self.store.read(&reservation.key).await?
        else {
            return Ok(None);
        };
        let row = ReservationRow::decode(&bytes)?;
        let same = ReservationRow {
            carried: reservation.row.carried,
            ..row.clone()
        } == reservation.row;
        Ok(same.then(|| TargetReservation {
            row,
            key: reservation.key.clone(),
            version,
            expects: reservation.expects.clone(),
            target: reservation.target.clone(),
        }))
    }

    /// The reservation the owner of `handle` secured on `target` under `reservation_id`, as
    /// its row is stored now — for a [`secure_target`](Self::secure_target) or
    /// [`secure_spot_wide`](Self::secure_spot_wide) whose reply was lost and that the engine
    /// could not settle (spec 21 §10: the row is read, never guessed): the caller holds no
    /// copy of it, so this is how it finds the capacity to release. The row is keyed by the
    /// ReservationId alone; `None` when no row is stored under it (the secure never applied,
    /// or the reservation was released or consumed since) or the row is another one (another
    /// object, incarnation, source owner or target). The copy read expects the record version
    /// the row was secured at, with the row's current version and carried count: once carried
    /// by a stage record it expects an older version than the record's, so use it to release
    /// ([`release_target`](Self::release_target)), not for an owner change.
    pub async fn reservation_by_id(
        &self,
        handle: &AuthorityHandle,
        target: &TargetNode,
        reservation_id: u128,
    ) -> Result<Option<TargetReservation>, LocationError> {
        if reservation_id == 0 {
            return Err(InvalidOperation::ZeroReservationId.into());
        }
        let key = keys::capacity_reservation(reservation_id)?;
        let ReadResult::Found { bytes, version, .. } = self.store.read(&key).await? else {
            return Ok(None);
        };
        let row = ReservationRow::decode(&bytes)?;
        let ours = row.reservation_id == reservation_id
            && &row.id == handle.id()
            && row.kind.authority_kind() == handle.kind().authority_kind()
            && row.object_generation == handle.object_generation()
            && &row.source == handle.owner()
            && row.target == target.run
            && row.target_node == target.node;
        Ok(ours.then(|| TargetReservation {
            expects: row.secured_at.clone(),
            row,
            key,
            version,
            target: target.clone(),
        }))
    }

    /// Releases secured relocation target capacity (a cancelled move): deletes the
    /// reservation row under its version and returns the capacity on the target.
    pub async fn release_target(
        &self,
        reservation: &TargetReservation,
    ) -> Result<Outcome<()>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::RelocationChange)?;
        let op = Op {
            plan: Plan {
                own: vec![(
                    reservation.key.clone(),
                    Some(Expect::Version(reservation.version.clone())),
                )],
                capacity: vec![CapMove {
                    node: reservation.target.node.clone(),
                    kind: CapMoveKind::Release,
                    bundle: reservation.row.bundle.clone(),
                }],
                leases: leases(&admission.run, None)?,
                admission: Some((admission.op, admission.run)),
                size_hint: 512,
                ..Plan::default()
            },
            write: Write::Rows(vec![Mutation::Delete(reservation.key.clone())]),
        };
        match self.engine.submit(Box::new(op)).await? {
            JobResult::Applied { .. } => Ok(Outcome::Applied(())),
            JobResult::RecordConflict { .. } | JobResult::GuardBroken => {
                Ok(Outcome::Conflict(Conflict::Reservation))
            }
            JobResult::LeaseStale { role, run } => {
                Ok(Outcome::Conflict(Conflict::lease_stale(role, run)))
            }
        }
    }

    /// A Preserve that carries a relocation reservation (spec 21 §6.1): replaces only the
    /// framework-internal payload, checks the record version and source owner the reservation
    /// expects, and rewrites the reservation row in the same batch. Returns the record and the
    /// reservation now expecting the record's new version (the old copy no longer matches).
    pub async fn preserve_carrying(
        &self,
        handle: &AuthorityHandle,
        reservation: &TargetReservation,
        payload: Vec<u8>,
    ) -> Result<Outcome<(AuthorityHandle, TargetReservation)>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::RelocationChange)?;
        if let Some(c) = Self::require_active_owner(handle, &admission.run) {
            return Ok(Outcome::Conflict(c));
        }
        if !reservation.same_object(handle) && !reservation.same_aggregate(handle) {
            return Err(InvalidOperation::ReservationForAnotherObject.into());
        }
        if !reservation.matches(handle) {
            return Ok(Outcome::Conflict(Conflict::Reservation));
        }
        let mut record = handle.record().clone();
        record.payload = payload;
        let bytes = encode(&record)?;
        let mut row = reservation.row.clone();
        row.carried = row.carried.saturating_add(1);
        let row_bytes = row.encode()?;
        let (key, mut plan) = rewrite_plan(handle, admission, bytes.len() + row_bytes.len())?;
        plan.own.push((
            reservation.key.clone(),
            Some(Expect::Version(reservation.version.clone())),
        ));
        let op = Op {
            plan,
            write: Write::Encoded {
                key,
                record: Box::new(record),
                bytes,
                also: vec![Mutation::put(reservation.key.clone(), row_bytes)],
            },
        };
        match self.engine.submit(Box::new(op)).await? {
            JobResult::Applied {
                put_versions,
                built,
            } => {
                let Some(record) = built.record else {
                    return Err(LocationError::StoreContract(
                        super::super::error::ContractViolation::MissingPutVersion,
                    ));
                };
                let handle = AuthorityHandle::new(
                    handle.id().clone(),
                    *record,
                    put_version(&put_versions, 0)?,
                )?;
                let carried = TargetReservation {
                    row,
                    key: reservation.key.clone(),
                    version: put_version(&put_versions, 1)?,
                    expects: handle.version().clone(),
                    target: reservation.target.clone(),
                };
                Ok(Outcome::Applied((handle, carried)))
            }
            JobResult::RecordConflict { reads } => {
                let record_unchanged = matches!(
                    reads.first(),
                    Some((_, ReadResult::Found { version, .. })) if version == handle.version()
                );
                if record_unchanged {
                    Ok(Outcome::Conflict(Conflict::Reservation))
                } else {
                    Ok(Outcome::Conflict(conflict_from_reads(handle.id(), &reads)?))
                }
            }
            JobResult::LeaseStale { role, run } => {
                Ok(Outcome::Conflict(Conflict::lease_stale(role, run)))
            }
            JobResult::GuardBroken => Ok(Outcome::Conflict(Conflict::RunStillLive)),
        }
    }

    /// What every NewOwner checks before it writes, and the record it writes: `handle` is
    /// Active (else a conflict), this host run is the reservation's target, the reservation is
    /// for this object (`same`, else an invalid operation) and expects this record version and
    /// owner (else a conflict); the record then names the target run, node and lifecycle.
    pub(super) fn new_owner_record(
        handle: &AuthorityHandle,
        reservation: &TargetReservation,
        run: &HostRun,
        same: bool,
    ) -> Result<Result<zlink_codec::records::AuthorityRecord, Conflict>, LocationError> {
        if let Some(c) = Self::require(handle, AllocationState::Active) {
            return Ok(Err(c));
        }
        if run != &reservation.target.run {
            return Err(InvalidOperation::NotTheReservationTarget.into());
        }
        if !same {
            return Err(InvalidOperation::ReservationForAnotherObject.into());
        }
        if !reservation.matches(handle) {
            return Ok(Err(Conflict::Reservation));
        }
        let target = &reservation.target;
        let mut record = handle.record().clone();
        record.owner_id = target.run.owner_id.clone();
        record.owner_lease_generation = target.run.lease_generation.to_codec();
        record.allocation.descriptor = descriptor_ref(&target.node);
        record.allocation.descriptor_lifecycle_generation = lifecycle(target)?;
        Ok(Ok(record))
    }

    /// NewOwner (Active → the reservation's target): keeps the ObjectGeneration, issues the
    /// next AuthorityOwnerGeneration, turns the secured target capacity into capacity in use
    /// and returns the source's, and consumes the reservation, in one batch conditioned on the
    /// record version the reservation expects and on the reservation row. Run by the target
    /// host (its own lease is the target lease). A record changed since the reservation was
    /// secured or last carried (a regular Preserve, another owner change) is a `Conflict`.
    pub async fn new_owner(
        &self,
        handle: &AuthorityHandle,
        reservation: &TargetReservation,
    ) -> Result<Outcome<AuthorityHandle>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::RelocationChange)?;
        let same = reservation.same_object(handle);
        let record = match Self::new_owner_record(handle, reservation, &admission.run, same)? {
            Ok(record) => record,
            Err(c) => return Ok(Outcome::Conflict(c)),
        };
        // Without another row, a conflict is never on that row alone.
        Ok(self
            .new_owner_with(handle, reservation, admission, record, None)
            .await?
            .unwrap_or(Outcome::Conflict(Conflict::Reservation)))
    }

    /// NewOwner of `handle` (the record `record` already names the target) through
    /// `reservation`, with one more row `extra` (key, expectation, mutation) in the same batch
    /// when there is one. A conflict on that row alone (the record and the reservation row as
    /// expected) is `None`: the caller may read it again and retry.
    pub(super) async fn new_owner_with(
        &self,
        handle: &AuthorityHandle,
        reservation: &TargetReservation,
        admission: crate::Admission,
        record: zlink_codec::records::AuthorityRecord,
        extra: Option<(StoreKey, Option<Expect>, Mutation)>,
    ) -> Result<Option<Outcome<AuthorityHandle>>, LocationError> {
        self.seen(handle);
        let size = record.payload.len() * 4 / 3 + if extra.is_some() { 2048 } else { 1024 };
        let key = keys::authority(handle.kind(), handle.id())?;
        let mut own = vec![
            (
                key.clone(),
                Some(Expect::Version(reservation.expects.clone())),
            ),
            (
                reservation.key.clone(),
                Some(Expect::Version(reservation.version.clone())),
            ),
        ];
        let mut also = vec![Mutation::Delete(reservation.key.clone())];
        let with_extra = extra.is_some();
        if let Some((extra_key, extra_expect, mutation)) = extra {
            own.push((extra_key, extra_expect));
            also.push(mutation);
        }
        let mut op = Op {
            plan: Plan {
                own,
                authority_owner_generation: true,
                // The target's capacity was allocated when it was secured (the reservation row
                // is consumed here); the source's is returned.
                capacity: vec![CapMove {
                    node: handle.node(),
                    kind: CapMoveKind::Release,
                    bundle: handle.bundle().clone(),
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
                also,
            },
        };
        op.move_run_entry(
            handle.kind(),
            handle.id(),
            Some(handle.owner()),
            Some(&reservation.target.run),
        )?;
        let at = |reads: &[(StoreKey, ReadResult)], i: usize, v: &StoreVersion| matches!(reads.get(i), Some((_, ReadResult::Found { version, .. })) if version == v);
        match self.engine.submit(Box::new(op)).await? {
            JobResult::RecordConflict { reads } => {
                let record_unchanged = at(&reads, 0, &reservation.expects);
                if with_extra && record_unchanged && at(&reads, 1, &reservation.version) {
                    Ok(None)
                } else if record_unchanged {
                    Ok(Some(Outcome::Conflict(Conflict::Reservation)))
                } else {
                    Ok(Some(Outcome::Conflict(conflict_from_reads(
                        handle.id(),
                        &reads,
                    )?)))
                }
            }
            other => with_handle(record_outcome(handle.id(), other)?).map(Some),
        }
    }
}
