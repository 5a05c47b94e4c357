//! Authority operations (spec 21 §6.1, §3.3): Reserve, Commit, Abort, Preserve, NewOwner and
//! Delete, relocation target capacity ([`relocation`]), the owner sweeps ([`sweep`]),
//! placement-driven Reserve (§4, §7), the takeover of a dead run's Ready Instance Spot for
//! its restore ([`instance`], §7.1), the recovery of what a dead run nobody saw leave left
//! behind ([`recover`]: one object at access, the owner runs a periodic sweep judges) and the
//! cancellation of an abandoned creation's reservation by any node that meets it
//! ([`creation`], §7, §10).
//!
//! Each operation is one conditional batch (run by the engine, which may coalesce concurrent
//! operations of this host into one batch) carrying the expected versions, the counter moves,
//! the authority record, the lookup index and the capacity rows. A state the operation does
//! not allow (Preserve / NewOwner / Delete of a Reserved record, Commit / Abort of an Active
//! one, a record owned by another host run) is a [`Conflict`] decided *before* any Store
//! request: nothing changes. Authority rows never expire; reading a missing row returns only
//! StoreNow and issues nothing.

use std::sync::Arc;

use parking_lot::Mutex;
use zlink_codec::Generation;
use zlink_codec::records::{Allocation, AllocationState, AuthorityRecord, PendingCreation};
use zlink_store_spi::{
    DynLocationStore, LocationStore, LocationStoreExt, Mutation, PageLimit, ReadResult,
    ScanListing, ScanPrefix, StoreKey,
};

use super::admission::{Admission, AdmissionGate, AdmissionOp};
use super::capacity::{CapacityBundle, CapacityRow, NodeUsage};
use super::engine::{CapMove, CapMoveKind, Engine, Expect, Plan, read_counts};
use super::epoch::StoreEpoch;
use super::error::{LocationError, RecordName};
use super::generation::GenerationKind;
use super::identity::{HostRun, NodeKey, ObjectId, ObjectKind, StableType};
use super::keys::{self, PrivateFamily};
use super::placement::{self, Candidate, PlacementRng, TargetNode};

mod creation;
mod handle;
mod instance;
mod members;
mod op;
mod outcome;
mod rebuild;
mod recover;
mod relocation;
mod rows;
mod run_index;
pub(crate) use run_index::marker_put as run_marker_put;
mod sweep;
mod terminal;

pub use creation::{Abandoned, CreationMark};
pub use handle::{AuthorityHandle, AuthorityRead};
pub use members::MemberResolver;
pub use outcome::{Conflict, Outcome};
pub use recover::OwnerRuns;
pub use relocation::TargetReservation;
pub use relocation::{OwnerChangeRead, PerActorMoveRecord, ReservationWire};
pub use sweep::SweepReport;
pub use terminal::{OperationKey, TerminalWrite};

use op::{
    Op, Write, descriptor_ref, encode, ensure_offers, leases, lifecycle, record_outcome,
    rewrite_plan, with_handle,
};
use rows::ReservationRow;

/// Decodes a reservation row: the target node and the capacity it holds there.
#[cfg(test)]
pub(crate) fn decode_reservation(bytes: &[u8]) -> Result<(NodeKey, CapacityBundle), LocationError> {
    let row = ReservationRow::decode(bytes)?;
    Ok((row.target_node, row.bundle))
}

/// How many snapshot restarts a full scan tolerates before giving up.
const SCAN_RESTARTS: usize = 8;

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
    /// The creating operation and its deadline, written beside the record so that any node
    /// can end an abandoned reservation ([`AuthorityClient::cancel_abandoned`]); `None` writes
    /// no row.
    pub creation: Option<CreationMark>,
}

/// The authority operations of one host.
#[derive(Debug)]
pub struct AuthorityClient {
    store: Arc<dyn DynLocationStore>,
    gate: Arc<AdmissionGate>,
    engine: Engine,
    /// The generations this host has seen (records it reads or takes ownership of).
    epoch: Arc<StoreEpoch>,
    rng: Mutex<PlacementRng>,
    /// Which `SpotWide` Spot a record resolves through (`members.rs`; `None`: not known).
    members: Option<MemberResolver>,
}

impl AuthorityClient {
    pub(crate) fn new(
        store: Arc<dyn DynLocationStore>,
        gate: Arc<AdmissionGate>,
        engine: Engine,
        epoch: Arc<StoreEpoch>,
    ) -> Self {
        AuthorityClient {
            store,
            gate,
            engine,
            epoch,
            rng: Mutex::new(PlacementRng::new()),
            members: None,
        }
    }

    /// The same client, telling `SpotWide` members by `members` (`members.rs`).
    pub(crate) fn with_members(mut self, members: Option<MemberResolver>) -> Self {
        self.members = members;
        self
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
            } => {
                let handle = AuthorityHandle::decode(id.clone(), &bytes, version)?;
                self.seen(&handle);
                Ok(AuthorityRead::Found { handle, store_now })
            }
        }
    }

    /// Reads the authority rows of many objects, in the order given, through the Store's
    /// batched read ([`MAX_READ_MANY_KEYS`](zlink_store_spi::MAX_READ_MANY_KEYS) keys per
    /// Store call): one answer per object, each what [`read`](Self::read) of that object
    /// would answer at some instant during the call. A row the Store cannot read, or whose
    /// record does not decode, costs only its own answer (the batch the Store refused for it
    /// is read again key by key). `Err` when the Store did not answer.
    pub async fn read_many(
        &self,
        objects: &[(ObjectKind, ObjectId)],
    ) -> Result<Vec<Result<AuthorityRead, LocationError>>, LocationError> {
        let mut out = Vec::with_capacity(objects.len());
        for chunk in objects.chunks(zlink_store_spi::MAX_READ_MANY_KEYS) {
            let keys = chunk
                .iter()
                .map(|(kind, id)| keys::authority(*kind, id))
                .collect::<Result<Vec<_>, _>>()?;
            let reads = match self.store.read_many(&keys).await {
                Ok(reads) => reads,
                Err(zlink_store_spi::StoreError::Unreadable(_)) => {
                    for (kind, id) in chunk {
                        out.push(self.read(*kind, id).await);
                    }
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            for ((_, id), read) in chunk.iter().zip(reads) {
                out.push(match read {
                    ReadResult::Missing { store_now } => Ok(AuthorityRead::Missing { store_now }),
                    ReadResult::Found {
                        bytes,
                        version,
                        store_now,
                        ..
                    } => AuthorityHandle::decode(id.clone(), &bytes, version).map(|handle| {
                        self.seen(&handle);
                        AuthorityRead::Found { handle, store_now }
                    }),
                });
            }
        }
        Ok(out)
    }

    /// Records the generations of a record this host read or takes ownership of, so no
    /// counter that lost them (Store data loss) hands out one at or below them.
    fn seen(&self, handle: &AuthorityHandle) {
        self.epoch
            .observe(GenerationKind::Object, handle.object_generation().get());
        self.epoch.observe(
            GenerationKind::AuthorityOwner,
            handle.authority_owner_generation().get(),
        );
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

    /// Reads several nodes' allocation rows at once (concurrent exact reads; placement needs
    /// every candidate's row for each creation), in the order of `nodes`.
    pub async fn node_capacities(
        &self,
        nodes: &[NodeKey],
    ) -> Result<Vec<CapacityRow>, LocationError> {
        let mut reads = Vec::with_capacity(nodes.len());
        for node in nodes {
            let key = keys::node_capacity(node)?;
            let store = Arc::clone(&self.store);
            reads.push(tokio::spawn(async move {
                read_counts(store.as_ref(), &key).await.map(|(row, ..)| row)
            }));
        }
        let mut rows = Vec::with_capacity(reads.len());
        for r in reads {
            rows.push(r.await.map_err(|_| LocationError::Stopped)??);
        }
        Ok(rows)
    }

    /// Every row under `prefix`, from one snapshot. A key the Store cannot read (another data
    /// type, a corrupt stored record) costs only itself: it is logged here and left in
    /// `unreadable` for the caller to count.
    async fn scan_all(&self, prefix: &ScanPrefix) -> Result<ScanListing, LocationError> {
        let listing = self
            .store
            .scan_all(prefix, PageLimit::LARGEST, SCAN_RESTARTS)
            .await?
            .ok_or(LocationError::Contended)?;
        for u in &listing.unreadable {
            tracing::warn!(key = %u.key, kind = %u.kind, "location scan skips a key the Store cannot read");
        }
        Ok(listing)
    }

    /// A node's slots split into in use and reserved, derived from one snapshot of the
    /// authority rows and the relocation reservations (the records are the source of truth;
    /// the allocation row only carries their sum). For operators and the descriptor copy: it
    /// scans every authority row. A row that cannot be read or decoded is left out, logged
    /// and counted in [`NodeUsage::skipped`].
    pub async fn node_usage(&self, node: &NodeKey) -> Result<NodeUsage, LocationError> {
        let mut usage = NodeUsage::default();
        let authority = self.scan_all(&keys::authority_prefix()).await?;
        usage.skipped += authority.unreadable.len();
        for item in authority.items {
            let record = match AuthorityRecord::decode(&item.bytes) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(key = %item.key, error = %e, "capacity read skips an undecodable authority row");
                    usage.skipped += 1;
                    continue;
                }
            };
            let at = &record.allocation.descriptor;
            if at.mesh_name == node.mesh && at.routing_id == node.routing_id {
                let Ok(bundle) = CapacityBundle::from_record(&record.allocation.capacity) else {
                    tracing::warn!(key = %item.key, "capacity read skips an authority row with an invalid capacity bundle");
                    usage.skipped += 1;
                    continue;
                };
                usage.add(&bundle, record.allocation.state == AllocationState::Active);
            }
        }
        let reservations = self
            .scan_all(&PrivateFamily::CapacityReservation.prefix())
            .await?;
        usage.skipped += reservations.unreadable.len();
        for item in reservations.items {
            let row = match ReservationRow::decode(&item.bytes) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(key = %item.key, error = %e, "capacity read skips an undecodable reservation row");
                    usage.skipped += 1;
                    continue;
                }
            };
            if &row.target_node == node {
                usage.add(&row.bundle, false);
            }
        }
        Ok(usage)
    }

    async fn run_record_op(
        &self,
        id: &ObjectId,
        op: Op,
    ) -> Result<Outcome<Option<AuthorityHandle>>, LocationError> {
        record_outcome(id, self.engine.submit(Box::new(op)).await?)
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
        ensure_offers(target, request.kind, &request.stable_type)?;
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
        // Encoded (and every record bound checked) by the engine once the generations are
        // issued, before anything is written.
        let size = record.payload.len() * 4 / 3 + 1024;
        let key = keys::authority(request.kind, &request.id)?;
        let index = keys::location_index(request.kind, &request.stable_type, &request.id)?;
        let mut own = vec![(key.clone(), Some(Expect::Missing)), (index.clone(), None)];
        let creation = match request.creation {
            None => None,
            Some(mark) => {
                let row = keys::creation_deadline(request.kind, &request.id)?;
                own.push((row.clone(), None));
                Some((row, mark))
            }
        };
        let plan = Plan {
            own,
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
            ..Plan::default()
        };
        let mut op = Op {
            plan,
            write: Write::Issued {
                key,
                record: Box::new(record),
                fill_object: true,
                fill_owner: true,
                index: Some(index),
                creation,
                also: Vec::new(),
            },
        };
        op.move_run_entry(request.kind, &request.id, None, Some(&target.run))?;
        with_handle(self.run_record_op(&request.id, op).await?)
    }

    /// Whether a creation of `kind` / `stable_type` in `mesh` carrying `pending` fits the
    /// 1 MiB record bound whatever node and run it lands on and whatever generations it is
    /// issued (spec 21 §7): the record is encoded with every value the request does not fix at
    /// its largest — 63-bit generations, a 255-byte RID, a 255-byte owner id of characters
    /// JSON escapes at six bytes each. Decided before any Store request.
    pub fn creation_record_fits(
        mesh: &zlink_codec::MeshName,
        kind: ObjectKind,
        stable_type: &StableType,
        pending: &PendingCreation,
    ) -> Result<(), LocationError> {
        let g = Generation::new(zlink_codec::MAX_U63)
            .map_err(|_| LocationError::corrupt(RecordName::Authority))?;
        let owner = super::identity::OwnerId::new("\u{1}".repeat(255))
            .map_err(|_| LocationError::corrupt(RecordName::Authority))?;
        let rid = zlink_codec::RoutingId::new(vec![0xff; 255])
            .map_err(|_| LocationError::corrupt(RecordName::Authority))?;
        let record = AuthorityRecord {
            payload: Vec::new(),
            object_generation: g,
            authority_owner_generation: g,
            owner_id: owner,
            owner_lease_generation: g,
            allocation: Allocation {
                state: AllocationState::Reserved,
                object_kind: kind,
                stable_type: stable_type.clone(),
                descriptor: zlink_codec::records::DescriptorRef {
                    mesh_name: mesh.clone(),
                    routing_id: rid,
                },
                descriptor_lifecycle_generation: g,
                capacity: CapacityBundle::for_object(kind, stable_type).to_record(),
            },
            pending_creation: Some(pending.clone()),
        };
        encode(&record).map(|_| ())
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

    /// An Active record owned by `run`, else the conflict (decided before any Store request).
    fn require_active_owner(handle: &AuthorityHandle, run: &HostRun) -> Option<Conflict> {
        Self::require(handle, AllocationState::Active).or_else(|| Self::require_owner(handle, run))
    }

    /// Commit (Reserved → Active): the reserved capacity becomes in use; `pendingCreation` is
    /// cleared and the payload optionally replaced. Only the record's owner commits.
    pub async fn commit(
        &self,
        handle: &AuthorityHandle,
        payload: Option<Vec<u8>>,
    ) -> Result<Outcome<AuthorityHandle>, LocationError> {
        self.commit_also(handle, payload, None).await
    }

    /// [`commit`](Self::commit) with further conditional rows in the same batch (the
    /// creation's terminal record, spec 21 §7: Ready and the final result in one step).
    pub async fn commit_also(
        &self,
        handle: &AuthorityHandle,
        payload: Option<Vec<u8>>,
        terminal: Option<TerminalWrite>,
    ) -> Result<Outcome<AuthorityHandle>, LocationError> {
        let mut also: Vec<_> = terminal
            .map(TerminalWrite::row)
            .map(|(k, e, m)| (k, Some(e), m))
            .into_iter()
            .collect();
        if let Some((k, m)) = Self::mark_removal(handle)? {
            also.push((k, None, m));
        }
        let admission = self.gate.admit(AdmissionOp::FactoryResult)?;
        if let Some(c) = Self::require(handle, AllocationState::Reserved)
            .or_else(|| Self::require_owner(handle, &admission.run))
        {
            return Ok(Outcome::Conflict(c));
        }
        let mut record = handle.record().clone();
        record.allocation.state = AllocationState::Active;
        record.pending_creation = None;
        if let Some(p) = payload {
            record.payload = p;
        }
        // The capacity stays allocated; whether it is in use lives in the record.
        self.rewrite(handle, admission, record, also).await
    }

    /// Rewrites `handle`'s record under its first-read version (plus `also` in the same
    /// batch): the shared shape of Commit and Preserve.
    async fn rewrite(
        &self,
        handle: &AuthorityHandle,
        admission: Admission,
        record: AuthorityRecord,
        also: Vec<(StoreKey, Option<Expect>, Mutation)>,
    ) -> Result<Outcome<AuthorityHandle>, LocationError> {
        let bytes = encode(&record)?;
        let (key, mut plan) = rewrite_plan(handle, admission, bytes.len())?;
        let mut mutations = Vec::with_capacity(also.len());
        for (k, expect, m) in also {
            plan.own.push((k, expect));
            mutations.push(m);
        }
        let op = Op {
            plan,
            write: Write::Encoded {
                key,
                record: Box::new(record),
                bytes,
                also: mutations,
            },
        };
        with_handle(self.run_record_op(handle.id(), op).await?)
    }

    /// Abort (Reserved → Missing): the record and its lookup index are removed and the
    /// reserved capacity returned.
    pub async fn abort(&self, handle: &AuthorityHandle) -> Result<Outcome<()>, LocationError> {
        self.abort_also(handle, None).await
    }

    /// [`abort`](Self::abort) with further conditional rows in the same batch (the creation's
    /// Rejected/Failed terminal record: record deletion, space return and the failure result
    /// in one step, spec 21 §7).
    pub async fn abort_also(
        &self,
        handle: &AuthorityHandle,
        terminal: Option<TerminalWrite>,
    ) -> Result<Outcome<()>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::FactoryResult)?;
        if let Some(c) = Self::require(handle, AllocationState::Reserved) {
            return Ok(Outcome::Conflict(c));
        }
        let mut op = self.delete_op(handle, &admission.run, Some(admission.op), Vec::new())?;
        if let Write::Rows(rows) = &mut op.write {
            if let Some((key, expect, m)) = terminal.map(TerminalWrite::row) {
                op.plan.own.push((key, Some(expect)));
                rows.push(m);
            }
        }
        Ok(self.run_record_op(handle.id(), op).await?.map(|_| ()))
    }

    /// The batch that removes `handle`'s record and lookup index and returns its capacity,
    /// under the record's first-read version and `run`'s lease (plus `guards`).
    pub fn delete_op(
        &self,
        handle: &AuthorityHandle,
        run: &HostRun,
        admission: Option<AdmissionOp>,
        guards: Vec<(StoreKey, Expect)>,
    ) -> Result<Op, LocationError> {
        let key = keys::authority(handle.kind(), handle.id())?;
        let index = keys::location_index(handle.kind(), handle.stable_type(), handle.id())?;
        let mut own = vec![
            (key.clone(), Some(Expect::Version(handle.version().clone()))),
            (index.clone(), None),
        ];
        let mut rows = vec![Mutation::Delete(key), Mutation::Delete(index)];
        // A Reserved record's creation deadline row goes with it.
        if let Some((k, m)) = Self::mark_removal(handle)? {
            own.push((k, None));
            rows.push(m);
        }
        let mut op = Op {
            plan: Plan {
                own,
                guards,
                capacity: vec![CapMove {
                    node: handle.node(),
                    kind: CapMoveKind::Release,
                    bundle: handle.bundle().clone(),
                }],
                leases: leases(run, None)?,
                admission: admission.map(|op| (op, run.clone())),
                size_hint: 512,
                ..Plan::default()
            },
            write: Write::Rows(rows),
        };
        op.move_run_entry(handle.kind(), handle.id(), Some(handle.owner()), None)?;
        Ok(op)
    }

    /// Preserve: keeps owner, generations and capacity; replaces only the framework-internal
    /// payload (and so the StoreVersion). Only the owner preserves; it carries no target
    /// information, so a relocation reservation secured before it no longer matches the
    /// record (spec 21 §6.1; see [`preserve_carrying`](Self::preserve_carrying)).
    pub async fn preserve(
        &self,
        handle: &AuthorityHandle,
        payload: Vec<u8>,
    ) -> Result<Outcome<AuthorityHandle>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::AuthorityChange)?;
        if let Some(c) = Self::require_active_owner(handle, &admission.run) {
            return Ok(Outcome::Conflict(c));
        }
        let mut record = handle.record().clone();
        record.payload = payload;
        self.rewrite(handle, admission, record, Vec::new()).await
    }

    /// Delete: removes an Active record and its lookup index and returns its capacity in use,
    /// in one batch. Only the owner deletes, under a valid owner lease.
    pub async fn delete(&self, handle: &AuthorityHandle) -> Result<Outcome<()>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::AuthorityChange)?;
        if let Some(c) = Self::require_active_owner(handle, &admission.run) {
            return Ok(Outcome::Conflict(c));
        }
        let op = self.delete_op(handle, &admission.run, Some(admission.op), Vec::new())?;
        Ok(self.run_record_op(handle.id(), op).await?.map(|_| ()))
    }

    /// Placement-driven Reserve (spec 21 §4, §7): chooses an eligible candidate by weight and
    /// reserves on it; a candidate whose capacity or lease turns out stale is excluded and
    /// another one chosen. No eligible candidate is `CapacityExceeded`. If the row already
    /// exists, its record is returned as `Conflict::Record` (the existing creation is
    /// followed; no second factory runs). Writes no creation deadline row (see
    /// [`place_and_reserve_creation`](Self::place_and_reserve_creation)).
    pub async fn place_and_reserve(
        &self,
        candidates: Vec<Candidate>,
        kind: ObjectKind,
        id: ObjectId,
        stable_type: StableType,
        payload: Vec<u8>,
        pending_creation: Option<PendingCreation>,
    ) -> Result<Outcome<AuthorityHandle>, LocationError> {
        self.place_and_reserve_creation(
            candidates,
            kind,
            id,
            stable_type,
            payload,
            pending_creation,
            None,
        )
        .await
    }

    /// [`place_and_reserve`](Self::place_and_reserve) for a Create/GetOrCreate operation:
    /// `creation` is written beside the `Reserved` record in the same batch.
    #[allow(clippy::too_many_arguments)]
    pub async fn place_and_reserve_creation(
        &self,
        mut candidates: Vec<Candidate>,
        kind: ObjectKind,
        id: ObjectId,
        stable_type: StableType,
        payload: Vec<u8>,
        pending_creation: Option<PendingCreation>,
        creation: Option<CreationMark>,
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
                creation: creation.clone(),
            };
            match self.reserve(request).await {
                Ok(Outcome::Conflict(Conflict::LeaseStale { target: true, .. }))
                | Err(LocationError::CapacityExceeded) => {
                    candidates.retain(|c| c.target.run != target.run);
                }
                other => return other,
            }
        }
    }
}
