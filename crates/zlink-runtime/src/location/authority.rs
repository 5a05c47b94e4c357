//! Authority operations (spec 21 §6.1, §3.3): Reserve, Commit, Abort, Preserve, NewOwner and
//! Delete, plus securing/releasing relocation target capacity, the owner cleanup sweep (§11)
//! and placement-driven Reserve (§4, §7).
//!
//! Each operation is one conditional batch (run by the [`engine`](super::engine), which may
//! coalesce concurrent operations of this host into one batch) carrying the expected
//! versions, the counter moves, the authority record, the lookup index and the capacity rows.
//! A state the operation does not allow (Preserve / NewOwner / Delete of a Reserved record,
//! Commit / Abort of an Active one, a record owned by another host run) is a [`Conflict`]
//! decided *before* any Store request: nothing changes. Authority rows never expire; reading a
//! missing row returns only StoreNow and issues nothing.

use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use zlink_codec::Generation;
use zlink_codec::records::{
    Allocation, AllocationState, AuthorityRecord, DescriptorRef, PendingCreation,
};
use zlink_store_spi::{
    DynLocationStore, LocationStore, LocationStoreExt, Mutation, PageLimit, ReadResult, StoreKey,
    StoreTime, StoreVersion,
};

use super::admission::{AdmissionGate, AdmissionOp};
use super::capacity::{CapacityBundle, CapacityRow, NodeUsage};
use super::engine::{
    Built, CapMove, CapMoveKind, Engine, EngineOp, Expect, Issued, JobResult, LeaseNeed, LeaseRole,
    Plan, read_counts,
};
use super::error::LocationError;
use super::generation::{AuthorityOwnerGeneration, ObjectGeneration, OwnerLeaseGeneration};
use super::identity::{HostRun, NodeKey, ObjectId, ObjectKind, StableType};
use super::keys;
use super::lease::lease_key;
use super::placement::{self, Candidate, PlacementRng, TargetNode};

/// How many snapshot restarts the owner sweep tolerates before giving up.
const SWEEP_SCAN_RESTARTS: usize = 8;

/// One authority record as read, with the version that conditions any change of it (cheap to
/// clone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorityHandle(Arc<HandleInner>);

#[derive(Debug, PartialEq, Eq)]
struct HandleInner {
    id: ObjectId,
    record: AuthorityRecord,
    version: StoreVersion,
    bundle: CapacityBundle,
    object_generation: ObjectGeneration,
    authority_owner_generation: AuthorityOwnerGeneration,
    owner: HostRun,
}

impl AuthorityHandle {
    fn new(
        id: ObjectId,
        record: AuthorityRecord,
        version: StoreVersion,
    ) -> Result<Self, LocationError> {
        let bundle = CapacityBundle::from_record(&record.allocation.capacity)?;
        let object_generation =
            ObjectGeneration::from_codec(record.object_generation, "authority")?;
        let authority_owner_generation =
            AuthorityOwnerGeneration::from_codec(record.authority_owner_generation, "authority")?;
        let owner = HostRun {
            owner_id: record.owner_id.clone(),
            lease_generation: OwnerLeaseGeneration::from_codec(
                record.owner_lease_generation,
                "authority",
            )?,
        };
        Ok(AuthorityHandle(Arc::new(HandleInner {
            id,
            record,
            version,
            bundle,
            object_generation,
            authority_owner_generation,
            owner,
        })))
    }

    fn decode(id: ObjectId, bytes: &[u8], version: StoreVersion) -> Result<Self, LocationError> {
        let record = AuthorityRecord::decode(bytes).map_err(|source| LocationError::Decode {
            what: "authority",
            source,
        })?;
        Self::new(id, record, version)
    }

    /// The global id.
    pub fn id(&self) -> &ObjectId {
        &self.0.id
    }

    /// The object kind.
    pub fn kind(&self) -> ObjectKind {
        self.0.record.allocation.object_kind
    }

    /// The stable type.
    pub fn stable_type(&self) -> &StableType {
        &self.0.record.allocation.stable_type
    }

    /// The record.
    pub fn record(&self) -> &AuthorityRecord {
        &self.0.record
    }

    /// The provider version of the record.
    pub fn version(&self) -> &StoreVersion {
        &self.0.version
    }

    /// `reserved` or `active`.
    pub fn state(&self) -> AllocationState {
        self.0.record.allocation.state
    }

    /// The ObjectGeneration.
    pub fn object_generation(&self) -> ObjectGeneration {
        self.0.object_generation
    }

    /// The AuthorityOwnerGeneration.
    pub fn authority_owner_generation(&self) -> AuthorityOwnerGeneration {
        self.0.authority_owner_generation
    }

    /// The current owner's host run.
    pub fn owner(&self) -> &HostRun {
        &self.0.owner
    }

    /// The node the allocation is on.
    pub fn node(&self) -> NodeKey {
        NodeKey {
            mesh: self.0.record.allocation.descriptor.mesh_name.clone(),
            routing_id: self.0.record.allocation.descriptor.routing_id.clone(),
        }
    }

    /// The capacity the allocation holds.
    pub fn bundle(&self) -> &CapacityBundle {
        &self.0.bundle
    }
}

/// The result of reading an authority row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthorityRead {
    /// No row: only the Store's clock; no generation or version was created.
    Missing {
        /// StoreNow of the read.
        store_now: StoreTime,
    },
    /// The current row.
    Found {
        /// The record and its version.
        handle: AuthorityHandle,
        /// StoreNow of the read.
        store_now: StoreTime,
    },
}

/// Why an authority operation changed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Conflict {
    /// The row is not what the operation expected: it exists (Reserve) or changed or
    /// disappeared since it was read. `current` is what it holds now (`None`: missing).
    Record {
        /// The row now.
        current: Option<AuthorityHandle>,
    },
    /// The operation is not allowed in the record's state (decided before any Store request).
    State {
        /// The record's state.
        state: AllocationState,
    },
    /// This host run is not the record's owner (decided before any Store request).
    NotOwner {
        /// The record's owner.
        owner: HostRun,
    },
    /// A lease the operation needs is not held by this run in the Store (expired, released or
    /// taken over).
    LeaseStale {
        /// The host run whose lease is stale.
        run: HostRun,
        /// Whether it is the target's lease (else this host's own).
        target: bool,
    },
    /// The relocation reservation is missing, was used, or holds different content.
    Reservation,
}

/// The result of an authority operation: applied, or a [`Conflict`] that changed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<T> {
    /// Applied as one commit.
    Applied(T),
    /// Nothing changed.
    Conflict(Conflict),
}

impl<T> Outcome<T> {
    /// The applied value, if any.
    pub fn applied(self) -> Option<T> {
        match self {
            Outcome::Applied(t) => Some(t),
            Outcome::Conflict(_) => None,
        }
    }

    /// Whether it was applied.
    pub fn is_applied(&self) -> bool {
        matches!(self, Outcome::Applied(_))
    }

    /// The conflict, if any.
    pub fn conflict(&self) -> Option<&Conflict> {
        match self {
            Outcome::Applied(_) => None,
            Outcome::Conflict(c) => Some(c),
        }
    }
}

/// A Reserve request: create a `Reserved` record on `target` (Missing → Reserved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReserveRequest {
    /// The object kind.
    pub kind: ObjectKind,
    /// The global id.
    pub id: ObjectId,
    /// The stable type.
    pub stable_type: StableType,
    /// The node that will own it (runs the factory).
    pub target: TargetNode,
    /// Framework-internal data.
    pub payload: Vec<u8>,
    /// Creation-in-progress state, if any.
    pub pending_creation: Option<PendingCreation>,
}

/// Relocation target capacity secured ahead of a NewOwner (spec 21 §8.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetReservation {
    reservation_id: u128,
    key: StoreKey,
    version: StoreVersion,
    kind: ObjectKind,
    id: ObjectId,
    object_generation: ObjectGeneration,
    target: TargetNode,
    bundle: CapacityBundle,
}

impl TargetReservation {
    /// The non-zero 128-bit ReservationId.
    pub fn reservation_id(&self) -> u128 {
        self.reservation_id
    }

    /// The target node.
    pub fn target(&self) -> &TargetNode {
        &self.target
    }

    /// The capacity secured.
    pub fn bundle(&self) -> &CapacityBundle {
        &self.bundle
    }

    /// The object it is for.
    pub fn id(&self) -> &ObjectId {
        &self.id
    }
}

/// What the owner cleanup sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Authority rows of the owner run found in the snapshot.
    pub matched: usize,
    /// Rows deleted (with their lookup index and capacity).
    pub removed: usize,
    /// Rows that changed after the snapshot (their version-checked delete conflicted).
    pub changed: usize,
    /// Rows that could not be decoded (left untouched).
    pub undecodable: usize,
}

#[derive(Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IndexWire {
    record_version: u32,
    object_generation: String,
}

#[derive(Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReservationWire {
    record_version: u32,
    reservation_id: String,
    object_kind: String,
    id: String,
    object_generation: String,
    target_owner_id: String,
    target_lease_generation: String,
    target_mesh_name: String,
    target_routing_id_hex: String,
    target_lifecycle_generation: String,
    actors: u32,
    spots: u32,
    spot_type: Option<(String, String, u32)>,
}

/// Decodes a reservation row: its target node and the capacity it holds there.
pub(crate) fn decode_reservation(bytes: &[u8]) -> Result<(NodeKey, CapacityBundle), LocationError> {
    let corrupt = || LocationError::CorruptRecord {
        what: "capacity reservation",
    };
    let w: ReservationWire = serde_json::from_slice(bytes).map_err(|_| corrupt())?;
    if w.record_version != 1 {
        return Err(corrupt());
    }
    let node = NodeKey {
        mesh: zlink_codec::MeshName::new(w.target_mesh_name).map_err(|_| corrupt())?,
        routing_id: zlink_codec::RoutingId::from_hex(&w.target_routing_id_hex)
            .map_err(|_| corrupt())?,
    };
    let spot_type = match w.spot_type {
        None => None,
        Some((kind, stable_type, count)) => Some(super::capacity::SpotTypeSlots {
            kind: ObjectKind::parse(&kind).map_err(|_| corrupt())?,
            stable_type: StableType::new(stable_type).map_err(|_| corrupt())?,
            count,
        }),
    };
    Ok((node, CapacityBundle::new(w.actors, w.spots, spot_type)?))
}

fn index_bytes(object_generation: u64) -> Vec<u8> {
    serde_json::to_vec(&IndexWire {
        record_version: 1,
        object_generation: object_generation.to_string(),
    })
    .unwrap_or_default()
}

fn descriptor_ref(node: &NodeKey) -> DescriptorRef {
    DescriptorRef {
        mesh_name: node.mesh.clone(),
        routing_id: node.routing_id.clone(),
    }
}

fn lifecycle(target: &TargetNode) -> Result<Generation, LocationError> {
    Generation::new(target.lifecycle_generation).map_err(|_| {
        LocationError::InvalidOperation("target lifecycle generation outside 1..=2^63-1".into())
    })
}

fn encode(record: &AuthorityRecord) -> Result<Vec<u8>, LocationError> {
    record.encode().map_err(|e| {
        LocationError::InvalidOperation(format!("authority record out of bounds: {e}"))
    })
}

/// What an operation writes.
enum Write {
    /// Put an authority record (generations filled in from `Issued` where asked), optionally
    /// the lookup index, then delete `deletes`.
    Record {
        key: StoreKey,
        record: Box<AuthorityRecord>,
        /// The record's bytes when no generation is filled in (encoded once, by the caller).
        encoded: Option<Vec<u8>>,
        fill_object: bool,
        fill_owner: bool,
        index: Option<StoreKey>,
        deletes: Vec<StoreKey>,
    },
    /// Delete these rows.
    Delete(Vec<StoreKey>),
    /// Put one runtime-private row.
    Row { key: StoreKey, bytes: Vec<u8> },
}

struct Op {
    plan: Plan,
    write: Write,
}

impl EngineOp for Op {
    fn plan(&self) -> &Plan {
        &self.plan
    }

    fn build(&self, issued: &Issued) -> Result<Built, LocationError> {
        match &self.write {
            Write::Record {
                key,
                record,
                encoded: Some(bytes),
                fill_object: false,
                fill_owner: false,
                index,
                deletes,
            } => {
                let mut mutations = vec![Mutation::put(key.clone(), bytes.clone())];
                if let Some(index) = index {
                    mutations.push(Mutation::put(
                        index.clone(),
                        index_bytes(record.object_generation.get()),
                    ));
                }
                mutations.extend(deletes.iter().cloned().map(Mutation::Delete));
                Ok(Built {
                    mutations,
                    record: Some(record.clone()),
                })
            }
            Write::Record {
                key,
                record,
                fill_object,
                fill_owner,
                index,
                deletes,
                ..
            } => {
                let mut record = AuthorityRecord::clone(record);
                if *fill_object {
                    let v = issued.object.ok_or(LocationError::Contended)?;
                    record.object_generation = Generation::new(v)
                        .map_err(|_| LocationError::CorruptRecord { what: "counter" })?;
                }
                if *fill_owner {
                    let v = issued.authority_owner.ok_or(LocationError::Contended)?;
                    record.authority_owner_generation = Generation::new(v)
                        .map_err(|_| LocationError::CorruptRecord { what: "counter" })?;
                }
                let mut mutations = vec![Mutation::put(key.clone(), encode(&record)?)];
                if let Some(index) = index {
                    mutations.push(Mutation::put(
                        index.clone(),
                        index_bytes(record.object_generation.get()),
                    ));
                }
                mutations.extend(deletes.iter().cloned().map(Mutation::Delete));
                Ok(Built {
                    mutations,
                    record: Some(Box::new(record)),
                })
            }
            Write::Delete(keys) => Ok(Built {
                mutations: keys.iter().cloned().map(Mutation::Delete).collect(),
                record: None,
            }),
            Write::Row { key, bytes } => Ok(Built {
                mutations: vec![Mutation::put(key.clone(), bytes.clone())],
                record: None,
            }),
        }
    }
}

fn lease_need(run: &HostRun, role: LeaseRole) -> Result<LeaseNeed, LocationError> {
    Ok(LeaseNeed {
        key: lease_key(&run.owner_id)?,
        run: run.clone(),
        role,
    })
}

fn leases(own: &HostRun, target: Option<&HostRun>) -> Result<Vec<LeaseNeed>, LocationError> {
    let mut v = vec![lease_need(own, LeaseRole::Own)?];
    if let Some(t) = target {
        if t.owner_id != own.owner_id {
            v.push(lease_need(t, LeaseRole::Target)?);
        } else if t != own {
            // Same owner id, different generation: this run cannot speak for that one.
            return Err(LocationError::InvalidOperation(
                "target host run is a different generation of this host".into(),
            ));
        }
    }
    Ok(v)
}

/// The authority operations of one host.
#[derive(Debug)]
pub struct AuthorityClient {
    store: Arc<dyn DynLocationStore>,
    gate: Arc<AdmissionGate>,
    engine: Engine,
    rng: Mutex<PlacementRng>,
}

impl AuthorityClient {
    pub(crate) fn new(
        store: Arc<dyn DynLocationStore>,
        gate: Arc<AdmissionGate>,
        engine: Engine,
    ) -> Self {
        AuthorityClient {
            store,
            gate,
            engine,
            rng: Mutex::new(PlacementRng::new()),
        }
    }

    /// Reads the authority row of `(kind, id)`. A missing row returns only StoreNow; nothing
    /// is created or issued. The result does not depend on any MeshName.
    pub async fn read(
        &self,
        kind: ObjectKind,
        id: &ObjectId,
    ) -> Result<AuthorityRead, LocationError> {
        let key = keys::authority(kind, id)?;
        match self.store.read(&key).await? {
            ReadResult::Missing { store_now } => Ok(AuthorityRead::Missing { store_now }),
            ReadResult::Found {
                bytes,
                version,
                store_now,
                ..
            } => Ok(AuthorityRead::Found {
                handle: AuthorityHandle::decode(id.clone(), &bytes, version)?,
                store_now,
            }),
        }
    }

    /// Reads a node's allocation row: the slots secured on it, in use or reserved (zero when
    /// absent).
    pub async fn node_capacity(&self, node: &NodeKey) -> Result<CapacityRow, LocationError> {
        Ok(
            read_counts(self.store.as_ref(), &keys::node_capacity(node)?)
                .await?
                .0,
        )
    }

    /// A node's slots split into in use and reserved, derived from one snapshot of the
    /// authority rows and the relocation reservations (the records are the source of truth;
    /// the allocation row only carries their sum). For operators and the descriptor copy: it
    /// scans every authority row.
    pub async fn node_usage(&self, node: &NodeKey) -> Result<NodeUsage, LocationError> {
        let mut usage = NodeUsage::default();
        let authorities = self
            .store
            .scan_all(
                &keys::authority_prefix(),
                PageLimit::LARGEST,
                SWEEP_SCAN_RESTARTS,
            )
            .await?
            .ok_or(LocationError::Contended)?;
        for item in authorities {
            let record =
                AuthorityRecord::decode(&item.bytes).map_err(|source| LocationError::Decode {
                    what: "authority",
                    source,
                })?;
            let at = &record.allocation.descriptor;
            if at.mesh_name == node.mesh && at.routing_id == node.routing_id {
                let bundle = CapacityBundle::from_record(&record.allocation.capacity)?;
                usage.add(&bundle, record.allocation.state == AllocationState::Active);
            }
        }
        let reservations = self
            .store
            .scan_all(
                &keys::capacity_reservation_prefix(),
                PageLimit::LARGEST,
                SWEEP_SCAN_RESTARTS,
            )
            .await?
            .ok_or(LocationError::Contended)?;
        for item in reservations {
            let (at, bundle) = decode_reservation(&item.bytes)?;
            if &at == node {
                usage.add(&bundle, false);
            }
        }
        Ok(usage)
    }

    fn conflict_from_reads(
        id: &ObjectId,
        reads: &[(StoreKey, ReadResult)],
    ) -> Result<Conflict, LocationError> {
        match reads.first() {
            Some((_, ReadResult::Found { bytes, version, .. })) => Ok(Conflict::Record {
                current: Some(AuthorityHandle::decode(id.clone(), bytes, version.clone())?),
            }),
            _ => Ok(Conflict::Record { current: None }),
        }
    }

    async fn run_record_op(
        &self,
        id: &ObjectId,
        op: Op,
    ) -> Result<Outcome<Option<AuthorityHandle>>, LocationError> {
        match self.engine.submit(Box::new(op)).await? {
            JobResult::Applied {
                put_versions,
                built,
                ..
            } => {
                match built.record {
                    Some(record) => {
                        let version = put_versions.into_iter().next().ok_or(
                            LocationError::CorruptRecord {
                                what: "write result",
                            },
                        )?;
                        Ok(Outcome::Applied(Some(AuthorityHandle::new(
                            id.clone(),
                            *record,
                            version,
                        )?)))
                    }
                    None => Ok(Outcome::Applied(None)),
                }
            }
            JobResult::RecordConflict { reads } => {
                Ok(Outcome::Conflict(Self::conflict_from_reads(id, &reads)?))
            }
            JobResult::LeaseStale { role, run } => Ok(Outcome::Conflict(Conflict::LeaseStale {
                run,
                target: role == LeaseRole::Target,
            })),
        }
    }

    fn applied_handle(
        outcome: Outcome<Option<AuthorityHandle>>,
    ) -> Result<Outcome<AuthorityHandle>, LocationError> {
        match outcome {
            Outcome::Applied(Some(h)) => Ok(Outcome::Applied(h)),
            Outcome::Applied(None) => Err(LocationError::CorruptRecord {
                what: "write result",
            }),
            Outcome::Conflict(c) => Ok(Outcome::Conflict(c)),
        }
    }

    fn applied_unit(outcome: Outcome<Option<AuthorityHandle>>) -> Outcome<()> {
        match outcome {
            Outcome::Applied(_) => Outcome::Applied(()),
            Outcome::Conflict(c) => Outcome::Conflict(c),
        }
    }

    /// Reserve (Missing → Reserved): issues the ObjectGeneration and the first
    /// AuthorityOwnerGeneration, writes the record owned by `target` with its lookup index, and
    /// reserves the object's capacity bundle on the target, in one batch. If the row exists,
    /// `Conflict::Record` carries the existing record.
    pub async fn reserve(
        &self,
        request: ReserveRequest,
    ) -> Result<Outcome<AuthorityHandle>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::CapacityReservation)?;
        let target = &request.target;
        if !target
            .offers
            .contains(&(request.kind, request.stable_type.clone()))
        {
            return Err(LocationError::InvalidOperation(format!(
                "target does not offer {} {}",
                request.kind, request.stable_type
            )));
        }
        let bundle = CapacityBundle::for_object(request.kind, &request.stable_type);
        let record = AuthorityRecord {
            payload: request.payload,
            object_generation: Generation::MIN,
            authority_owner_generation: Generation::MIN,
            owner_id: target.run.owner_id.clone(),
            owner_lease_generation: target.run.lease_generation.to_codec(),
            allocation: Allocation {
                state: AllocationState::Reserved,
                object_kind: request.kind,
                stable_type: request.stable_type.clone(),
                descriptor: descriptor_ref(&target.node),
                descriptor_lifecycle_generation: lifecycle(target)?,
                capacity: bundle.to_record(),
            },
            pending_creation: request.pending_creation,
        };
        // Checks every record bound before the Store is asked anything.
        // Encoded (and every record bound checked) by the engine once the generations are
        // issued, before anything is written.
        let size = record.payload.len() * 4 / 3 + 1024;
        let key = keys::authority(request.kind, &request.id)?;
        let index = keys::location_index(request.kind, &request.stable_type, &request.id)?;
        let plan = Plan {
            own: vec![(key.clone(), Some(Expect::Missing)), (index.clone(), None)],
            object_generation: true,
            authority_owner_generation: true,
            capacity: vec![CapMove {
                node: target.node.clone(),
                kind: CapMoveKind::Reserve(target.limits.clone()),
                bundle,
            }],
            leases: leases(&admission.run, Some(&target.run))?,
            admission: Some((admission.op, admission.run)),
            size_hint: size + 512,
        };
        let op = Op {
            plan,
            write: Write::Record {
                key,
                record: Box::new(record),
                encoded: None,
                fill_object: true,
                fill_owner: true,
                index: Some(index),
                deletes: Vec::new(),
            },
        };
        Self::applied_handle(self.run_record_op(&request.id, op).await?)
    }

    fn require(handle: &AuthorityHandle, state: AllocationState) -> Option<Conflict> {
        (handle.state() != state).then(|| Conflict::State {
            state: handle.state(),
        })
    }

    fn require_owner(handle: &AuthorityHandle, run: &HostRun) -> Option<Conflict> {
        (handle.owner() != run).then(|| Conflict::NotOwner {
            owner: handle.owner().clone(),
        })
    }

    /// Commit (Reserved → Active): the reserved capacity becomes in use; `pendingCreation` is
    /// cleared and the payload optionally replaced. Only the record's owner commits.
    pub async fn commit(
        &self,
        handle: &AuthorityHandle,
        payload: Option<Vec<u8>>,
    ) -> Result<Outcome<AuthorityHandle>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::FactoryResult)?;
        if let Some(c) = Self::require(handle, AllocationState::Reserved)
            .or_else(|| Self::require_owner(handle, &admission.run))
        {
            return Ok(Outcome::Conflict(c));
        }
        let mut record = handle.0.record.clone();
        record.allocation.state = AllocationState::Active;
        record.pending_creation = None;
        if let Some(p) = payload {
            record.payload = p;
        }
        let encoded = encode(&record)?;
        let size = encoded.len();
        let key = keys::authority(handle.kind(), &handle.0.id)?;
        let op = Op {
            plan: Plan {
                own: vec![(key.clone(), Some(Expect::Version(handle.0.version.clone())))],
                // The capacity stays allocated; whether it is in use lives in the record.
                leases: leases(&admission.run, None)?,
                admission: Some((admission.op, admission.run)),
                size_hint: size + 256,
                ..Plan::default()
            },
            write: Write::Record {
                key,
                record: Box::new(record),
                encoded: Some(encoded),
                fill_object: false,
                fill_owner: false,
                index: None,
                deletes: Vec::new(),
            },
        };
        Self::applied_handle(self.run_record_op(&handle.0.id, op).await?)
    }

    /// Abort (Reserved → Missing): the record and its lookup index are removed and the
    /// reserved capacity returned.
    pub async fn abort(&self, handle: &AuthorityHandle) -> Result<Outcome<()>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::FactoryResult)?;
        if let Some(c) = Self::require(handle, AllocationState::Reserved) {
            return Ok(Outcome::Conflict(c));
        }
        let op = self.delete_op(handle, Some((admission.op, admission.run)))?;
        Ok(Self::applied_unit(
            self.run_record_op(&handle.0.id, op).await?,
        ))
    }

    fn delete_op(
        &self,
        handle: &AuthorityHandle,
        admission: Option<(AdmissionOp, HostRun)>,
    ) -> Result<Op, LocationError> {
        let key = keys::authority(handle.kind(), &handle.0.id)?;
        let index = keys::location_index(handle.kind(), handle.stable_type(), &handle.0.id)?;
        let leases = match &admission {
            Some((_, run)) => leases(run, None)?,
            None => Vec::new(),
        };
        Ok(Op {
            plan: Plan {
                own: vec![
                    (key.clone(), Some(Expect::Version(handle.0.version.clone()))),
                    (index.clone(), None),
                ],
                capacity: vec![CapMove {
                    node: handle.node(),
                    kind: CapMoveKind::Release,
                    bundle: handle.0.bundle.clone(),
                }],
                leases,
                admission,
                size_hint: 512,
                ..Plan::default()
            },
            write: Write::Delete(vec![key, index]),
        })
    }

    /// Preserve: keeps owner, generations and capacity; replaces only the framework-internal
    /// payload (and so the StoreVersion). Only the owner preserves; no target information.
    pub async fn preserve(
        &self,
        handle: &AuthorityHandle,
        payload: Vec<u8>,
    ) -> Result<Outcome<AuthorityHandle>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::AuthorityChange)?;
        if let Some(c) = Self::require(handle, AllocationState::Active)
            .or_else(|| Self::require_owner(handle, &admission.run))
        {
            return Ok(Outcome::Conflict(c));
        }
        let mut record = handle.0.record.clone();
        record.payload = payload;
        let encoded = encode(&record)?;
        let size = encoded.len();
        let key = keys::authority(handle.kind(), &handle.0.id)?;
        let op = Op {
            plan: Plan {
                own: vec![(key.clone(), Some(Expect::Version(handle.0.version.clone())))],
                leases: leases(&admission.run, None)?,
                admission: Some((admission.op, admission.run)),
                size_hint: size + 256,
                ..Plan::default()
            },
            write: Write::Record {
                key,
                record: Box::new(record),
                encoded: Some(encoded),
                fill_object: false,
                fill_owner: false,
                index: None,
                deletes: Vec::new(),
            },
        };
        Self::applied_handle(self.run_record_op(&handle.0.id, op).await?)
    }

    /// Delete: removes an Active record and its lookup index and returns its capacity in use,
    /// in one batch. Only the owner deletes, under a valid owner lease.
    pub async fn delete(&self, handle: &AuthorityHandle) -> Result<Outcome<()>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::AuthorityChange)?;
        if let Some(c) = Self::require(handle, AllocationState::Active)
            .or_else(|| Self::require_owner(handle, &admission.run))
        {
            return Ok(Outcome::Conflict(c));
        }
        let op = self.delete_op(handle, Some((admission.op, admission.run)))?;
        Ok(Self::applied_unit(
            self.run_record_op(&handle.0.id, op).await?,
        ))
    }

    fn reservation_bytes(
        reservation_id: u128,
        handle: &AuthorityHandle,
        target: &TargetNode,
        bundle: &CapacityBundle,
    ) -> Vec<u8> {
        let wire = ReservationWire {
            record_version: 1,
            reservation_id: format!("{reservation_id:032x}"),
            object_kind: handle.kind().as_str().to_string(),
            id: handle.0.id.as_str().to_string(),
            object_generation: handle.0.object_generation.to_string(),
            target_owner_id: target.run.owner_id.as_str().to_string(),
            target_lease_generation: target.run.lease_generation.to_string(),
            target_mesh_name: target.node.mesh.as_str().to_string(),
            target_routing_id_hex: target.node.routing_id.to_hex(),
            target_lifecycle_generation: target.lifecycle_generation.to_string(),
            actors: bundle.actors(),
            spots: bundle.spots(),
            spot_type: bundle.spot_type().map(|t| {
                (
                    t.kind.as_str().to_string(),
                    t.stable_type.as_str().to_string(),
                    t.count,
                )
            }),
        };
        serde_json::to_vec(&wire).unwrap_or_default()
    }

    /// Secures relocation target capacity for an Active object (spec 21 §8.1): checks the
    /// record's version and the target's lease and remaining capacity, and records a
    /// reservation row, in one batch. Retrying with the same ReservationId and content returns
    /// the reservation already made; the same id with other content is a conflict.
    pub async fn secure_target(
        &self,
        handle: &AuthorityHandle,
        target: TargetNode,
        reservation_id: Option<u128>,
    ) -> Result<Outcome<TargetReservation>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::CapacityReservation)?;
        if let Some(c) = Self::require(handle, AllocationState::Active) {
            return Ok(Outcome::Conflict(c));
        }
        if !target
            .offers
            .contains(&(handle.kind(), handle.stable_type().clone()))
        {
            return Err(LocationError::InvalidOperation(
                "target does not offer this object's kind and stable type".into(),
            ));
        }
        if &target.run == handle.owner() {
            return Err(LocationError::InvalidOperation(
                "the target is the current owner".into(),
            ));
        }
        lifecycle(&target)?;
        let reservation_id = match reservation_id {
            Some(0) => {
                return Err(LocationError::InvalidOperation(
                    "a ReservationId is non-zero".into(),
                ));
            }
            Some(r) => r,
            None => uuid::Uuid::new_v4().as_u128(),
        };
        let bundle = handle.0.bundle.clone();
        let res_key = keys::capacity_reservation(reservation_id)?;
        let bytes = Self::reservation_bytes(reservation_id, handle, &target, &bundle);
        let auth_key = keys::authority(handle.kind(), &handle.0.id)?;
        let op = Op {
            plan: Plan {
                own: vec![
                    (auth_key, Some(Expect::Version(handle.0.version.clone()))),
                    (res_key.clone(), Some(Expect::Missing)),
                ],
                capacity: vec![CapMove {
                    node: target.node.clone(),
                    kind: CapMoveKind::Reserve(target.limits.clone()),
                    bundle: bundle.clone(),
                }],
                leases: leases(&admission.run, Some(&target.run))?,
                admission: Some((admission.op, admission.run)),
                size_hint: bytes.len() + 512,
                ..Plan::default()
            },
            write: Write::Row {
                key: res_key.clone(),
                bytes: bytes.clone(),
            },
        };
        let make = |version: StoreVersion| TargetReservation {
            reservation_id,
            key: res_key.clone(),
            version,
            kind: handle.kind(),
            id: handle.0.id.clone(),
            object_generation: handle.0.object_generation,
            target: target.clone(),
            bundle: bundle.clone(),
        };
        match self.engine.submit(Box::new(op)).await? {
            JobResult::Applied { put_versions, .. } => {
                let version =
                    put_versions
                        .into_iter()
                        .next()
                        .ok_or(LocationError::CorruptRecord {
                            what: "write result",
                        })?;
                Ok(Outcome::Applied(make(version)))
            }
            JobResult::RecordConflict { reads } => match reads.get(1) {
                Some((
                    _,
                    ReadResult::Found {
                        bytes: now,
                        version,
                        ..
                    },
                )) => {
                    if now.as_ref() == bytes.as_slice() {
                        Ok(Outcome::Applied(make(version.clone())))
                    } else {
                        Ok(Outcome::Conflict(Conflict::Reservation))
                    }
                }
                _ => Ok(Outcome::Conflict(Self::conflict_from_reads(
                    &handle.0.id,
                    &reads,
                )?)),
            },
            JobResult::LeaseStale { role, run } => Ok(Outcome::Conflict(Conflict::LeaseStale {
                run,
                target: role == LeaseRole::Target,
            })),
        }
    }

    /// Releases secured relocation target capacity (a cancelled move).
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
                    bundle: reservation.bundle.clone(),
                }],
                leases: leases(&admission.run, None)?,
                admission: Some((admission.op, admission.run)),
                size_hint: 512,
                ..Plan::default()
            },
            write: Write::Delete(vec![reservation.key.clone()]),
        };
        match self.engine.submit(Box::new(op)).await? {
            JobResult::Applied { .. } => Ok(Outcome::Applied(())),
            JobResult::RecordConflict { .. } => Ok(Outcome::Conflict(Conflict::Reservation)),
            JobResult::LeaseStale { role, run } => Ok(Outcome::Conflict(Conflict::LeaseStale {
                run,
                target: role == LeaseRole::Target,
            })),
        }
    }

    /// NewOwner (Active → the reservation's target): keeps the ObjectGeneration, issues the
    /// next AuthorityOwnerGeneration, turns the secured target capacity into capacity in use
    /// and returns the source's, and consumes the reservation, in one batch. Run by the
    /// target host (its own lease is the target lease).
    pub async fn new_owner(
        &self,
        handle: &AuthorityHandle,
        reservation: &TargetReservation,
    ) -> Result<Outcome<AuthorityHandle>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::RelocationChange)?;
        if let Some(c) = Self::require(handle, AllocationState::Active) {
            return Ok(Outcome::Conflict(c));
        }
        if admission.run != reservation.target.run {
            return Err(LocationError::InvalidOperation(
                "NewOwner is run by the reservation's target host run".into(),
            ));
        }
        if reservation.id != handle.0.id
            || reservation.kind.authority_kind() != handle.kind().authority_kind()
            || reservation.object_generation != handle.0.object_generation
            || reservation.bundle != handle.0.bundle
        {
            return Err(LocationError::InvalidOperation(
                "the reservation was made for another object or capacity".into(),
            ));
        }
        let target = &reservation.target;
        let mut record = handle.0.record.clone();
        record.owner_id = target.run.owner_id.clone();
        record.owner_lease_generation = target.run.lease_generation.to_codec();
        record.allocation.descriptor = descriptor_ref(&target.node);
        record.allocation.descriptor_lifecycle_generation = lifecycle(target)?;
        let size = record.payload.len() * 4 / 3 + 1024;
        let key = keys::authority(handle.kind(), &handle.0.id)?;
        let op = Op {
            plan: Plan {
                own: vec![
                    (key.clone(), Some(Expect::Version(handle.0.version.clone()))),
                    (
                        reservation.key.clone(),
                        Some(Expect::Version(reservation.version.clone())),
                    ),
                ],
                authority_owner_generation: true,
                // The target's capacity was allocated when it was secured (the reservation row
                // is consumed here); the source's is returned.
                capacity: vec![CapMove {
                    node: handle.node(),
                    kind: CapMoveKind::Release,
                    bundle: handle.0.bundle.clone(),
                }],
                leases: leases(&admission.run, None)?,
                admission: Some((admission.op, admission.run)),
                size_hint: size + 512,
                ..Plan::default()
            },
            write: Write::Record {
                key,
                record: Box::new(record),
                encoded: None,
                fill_object: false,
                fill_owner: true,
                index: None,
                deletes: vec![reservation.key.clone()],
            },
        };
        match self.engine.submit(Box::new(op)).await? {
            JobResult::RecordConflict { reads } => {
                let auth_changed = match (reads.first(), &handle.0.version) {
                    (Some((_, ReadResult::Found { version, .. })), v) => version != v,
                    _ => true,
                };
                if auth_changed {
                    Ok(Outcome::Conflict(Self::conflict_from_reads(
                        &handle.0.id,
                        &reads,
                    )?))
                } else {
                    Ok(Outcome::Conflict(Conflict::Reservation))
                }
            }
            JobResult::Applied {
                put_versions,
                built,
                ..
            } => {
                let record = built.record.ok_or(LocationError::CorruptRecord {
                    what: "write result",
                })?;
                let version =
                    put_versions
                        .into_iter()
                        .next()
                        .ok_or(LocationError::CorruptRecord {
                            what: "write result",
                        })?;
                Ok(Outcome::Applied(AuthorityHandle::new(
                    handle.0.id.clone(),
                    *record,
                    version,
                )?))
            }
            JobResult::LeaseStale { role, run } => Ok(Outcome::Conflict(Conflict::LeaseStale {
                run,
                target: role == LeaseRole::Target,
            })),
        }
    }

    /// Placement-driven Reserve (spec 21 §4, §7): chooses an eligible candidate by weight and
    /// reserves on it; a candidate whose capacity or lease turns out stale is excluded and
    /// another one chosen. No eligible candidate is `CapacityExceeded`. If the row already
    /// exists, its record is returned as `Conflict::Record` (the existing creation is
    /// followed; no second factory runs).
    pub async fn place_and_reserve(
        &self,
        mut candidates: Vec<Candidate>,
        kind: ObjectKind,
        id: ObjectId,
        stable_type: StableType,
        payload: Vec<u8>,
        pending_creation: Option<PendingCreation>,
    ) -> Result<Outcome<AuthorityHandle>, LocationError> {
        let bundle = CapacityBundle::for_object(kind, &stable_type);
        loop {
            let target = {
                let mut rng = self.rng.lock();
                placement::choose(&candidates, kind, &stable_type, &bundle, &mut rng)?
                    .target
                    .clone()
            };
            let request = ReserveRequest {
                kind,
                id: id.clone(),
                stable_type: stable_type.clone(),
                target: target.clone(),
                payload: payload.clone(),
                pending_creation: pending_creation.clone(),
            };
            let exclude = match self.reserve(request).await {
                Ok(Outcome::Conflict(Conflict::LeaseStale { target: true, .. }))
                | Err(LocationError::CapacityExceeded) => true,
                other => return other,
            };
            if exclude {
                candidates.retain(|c| c.target.run != target.run);
            }
        }
    }

    /// The owner cleanup sweep (spec 21 §11): reads every authority row from one
    /// same-point-in-time snapshot and deletes, each under its snapshot version, the rows
    /// owned by exactly `(owner, lease_generation)` together with their lookup index and
    /// capacity. Descriptors are never touched.
    pub async fn remove_all_by_owner(&self, owner: &HostRun) -> Result<SweepReport, LocationError> {
        let items = self
            .store
            .scan_all(
                &keys::authority_prefix(),
                PageLimit::LARGEST,
                SWEEP_SCAN_RESTARTS,
            )
            .await?
            .ok_or(LocationError::Contended)?;
        let mut report = SweepReport::default();
        let mut waiting = Vec::new();
        for item in items {
            let Ok(parts) = zlink_codec::LogicalKey::parse(item.key.as_str()) else {
                report.undecodable += 1;
                continue;
            };
            let zlink_codec::KeyParts::Authority { id, .. } = parts else {
                continue;
            };
            let handle = match AuthorityHandle::decode(id, &item.bytes, item.version.clone()) {
                Ok(h) => h,
                Err(e) => {
                    tracing::warn!(key = %item.key, error = %e, "owner sweep skips an undecodable authority row");
                    report.undecodable += 1;
                    continue;
                }
            };
            if handle.owner() != owner {
                continue;
            }
            report.matched += 1;
            let op = self.delete_op(&handle, None)?;
            let engine = self.engine.clone();
            waiting.push(tokio::spawn(
                async move { engine.submit(Box::new(op)).await },
            ));
        }
        for task in waiting {
            match task.await {
                Ok(Ok(JobResult::Applied { .. })) => report.removed += 1,
                Ok(Ok(_)) => report.changed += 1,
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err(LocationError::Stopped),
            }
        }
        Ok(report)
    }
}
