//! The owner sweeps (spec 21 §3.1, §5, §8.1, §11): reclaiming the authority rows and the
//! relocation target capacity of one host run. Descriptors are never touched (they go through
//! their own lease expiry and takeover).
//!
//! - **Self-sweep** (this run's shutdown): only this run's rows, through the admission gate
//!   (no Store change after the admission deadline, §5), each delete conditioned on the
//!   first-read version and this run's owner lease.
//! - **Recovery-sweep** (another run died): that run's rows, each batch also conditioned on its
//!   owner-lease row *as read directly* (Missing, expired by StoreNow, or held at another
//!   LeaseGeneration); never judged by enumerating leases (§3.1). If the lease is held by that
//!   run again, nothing is reclaimed. An earlier run of this host itself (same OwnerId, its
//!   lease lost and taken over under a new generation) is swept the same way; there the
//!   batches' condition on this run's own lease row — the row both runs share — is the proof
//!   that the earlier run is dead.
//!
//! Both read the swept run's authority rows through its **per-run index** (`run_index.rs`: one
//! scan of the run's prefix, then its rows read in batches of 1,000; a run without an index
//! marker is read from one snapshot of every authority row), one snapshot of the reservation
//! rows, and treat every row found only as a candidate: each change is conditioned on the
//! version read. Index entries whose record is gone or names another run are removed
//! ([`SweepReport::stale_entries`]), and a pass that completes removes the run's marker last. **Reserved rows** of the swept run (a creation whose factory ran there) are removed
//! like Active ones and their reserved capacity returned: no other host can finish that
//! creation. **Reservations** (relocation target capacity) whose target is the swept run are
//! released, since that target can no longer finish the move; so are those whose source is
//! the swept run, except (recovery only) where the target's lease is still held: such a move
//! may still be completed by its target's NewOwner (§8.1: the source does not take over), so
//! the reservation is kept and the object's authority row is skipped as *relocating*; the
//! target releases it if the move fails, and a later sweep reclaims the row. Space is never
//! returned merely because time passed (§8.1), so without these sweeps nothing would.
//!
//! **Allocation rows** (`node-capacity`, runtime-private) of the swept run's nodes — the nodes
//! its authority rows are placed on, the targets of its released reservations, and the nodes
//! its MeshNode descriptors name — are removed once nothing is allocated on them: a delete or
//! release on such a node asks its batch to delete the row instead of storing it at zero, and
//! a node the sweep releases nothing on gets a batch of its own that deletes the row only if
//! it is already at zero. Either way the delete is conditioned on the row's version as read,
//! under the same guards (the dead run's lease row, this run's lease and admission), so a row
//! that still counts a slot — an object skipped as *relocating*, a reservation of a live
//! target, anything reserved meanwhile — stays. The sweep reads descriptors but never changes
//! one.
//!
//! **`SpotWide` members** whose Spot's record names another run (they moved with it, their
//! own record not yet following) are kept and counted ([`SweepReport::moved_members`]) — and
//! when that run is the sweeping one, their record follows the Spot's owner instead
//! ([`SweepReport::members_followed`]); the
//! others are deleted first, each conditioned on its Spot's record as read (`members.rs`).
//!
//! **Corrupt or foreign data** costs only its row: a key the Store cannot read (another data
//! type, a corrupt stored record) and a row whose bytes do not decode are skipped, logged,
//! left untouched and counted ([`SweepReport::unreadable`], [`SweepReport::undecodable`]); the
//! sweep — and the shutdown that runs it — goes on with every other row. That holds also for a
//! row the snapshot read fine but whose conditioned delete finds it unreadable (a corrupt
//! record stored above the snapshot's point in time, an allocation row the job moves): the
//! engine fails only the jobs that touch that key, the others of the batch go out again
//! without them, and the sweep counts the job as unreadable. Only a key every job of the sweep
//! is conditioned on (this run's lease row, the swept run's lease row) fails the sweep.
//!
//! **An allocation row short of its records** (a Store that lost writes can leave one:
//! `docs/store-epoch.md`, "Version reuse") fails the delete or release that would take it
//! below zero, and that job changes nothing. The sweep then rebuilds the row from the records
//! and reservations that hold its slots (`rebuild.rs`, conditioned on the row's version) and
//! goes once more over what is left ([`SweepReport::rows_rebuilt`]); a row still short after
//! that fails the sweep.
//!
//! **Bounded window.** The sweep queues its deletes to the engine at most a few batches' worth
//! at a time ([`Engine::window`](super::super::engine::Engine)), the next one once the oldest
//! answered, so a run of any size costs the engine a short queue, never all its rows at once.

use std::collections::VecDeque;

use zlink_codec::records::{DescriptorRecord, MeshNodeDescriptor};
use zlink_codec::{KeyParts, LogicalKey};
use zlink_store_spi::entropy::HashSet;
use zlink_store_spi::{LocationStore, Mutation, ReadResult, ScanPrefix, StoreError, StoreKey};

use super::super::admission::AdmissionOp;
use super::super::engine::{CapMove, CapMoveKind, Expect, JobResult, Plan, Ticket};
use super::super::error::{InvalidOperation, LocationError, RecordName};
use super::super::identity::{HostRun, NodeKey, ObjectId};
use super::super::keys::PrivateFamily;
use super::super::lease::{LeaseSeen, lease_key};
use super::AuthorityClient;
use super::handle::AuthorityHandle;
use super::members::{MemberCheck, SpotReads};
use super::op::{Op, Write, leases};
use super::outcome::{Conflict, Outcome};
use super::rows::ReservationRow;

/// What an owner sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SweepReport {
    /// Authority rows of the swept run found in the snapshot.
    pub matched: usize,
    /// Rows deleted (with their lookup index and capacity).
    pub removed: usize,
    /// Rows that changed after the snapshot (their version-checked delete conflicted).
    pub changed: usize,
    /// Rows skipped because a move of the object may still be completed by a live target.
    pub relocating: usize,
    /// `SpotWide` member rows skipped because their Spot moved to another owner: the member
    /// moved with it (its record has not followed yet; `members.rs`), or its Spot's record
    /// could not be read.
    pub moved_members: usize,
    /// Authority and reservation rows whose bytes could not be decoded (left untouched).
    pub undecodable: usize,
    /// Keys under the swept families (authority, reservation and descriptor rows) the Store
    /// could not read — another data type, a corrupt stored record — skipped and left
    /// untouched; also rows whose conditioned delete or release found one of its keys
    /// unreadable (a corrupt record stored after the snapshot, an allocation row it moves),
    /// and reservations kept because their target's lease row could not be read.
    pub unreadable: usize,
    /// `SpotWide` member rows of the swept run whose Spot this run owns, rewritten to follow
    /// it (the move's own follow write never applied; `members.rs`).
    pub members_followed: usize,
    /// Relocation target reservations released (their capacity returned).
    pub reservations_released: usize,
    /// Reservations that changed after the snapshot (left as they are).
    pub reservations_changed: usize,
    /// Nodes of the swept run the sweep released nothing on, whose allocation row was removed
    /// if it was already at zero (see the module docs).
    pub idle_nodes_checked: usize,
    /// Allocation rows that counted fewer slots than a delete or release returned (a Store
    /// that lost writes; `rebuild.rs`), rebuilt from the records holding their slots, after
    /// which the sweep went once more over what was left.
    pub rows_rebuilt: usize,
    /// Whether the swept run's rows were read from its index (`run_index.rs`); `false`: from
    /// every authority row of the mesh (a run without an index marker).
    pub indexed: bool,
    /// Index entries of the swept run whose record was gone or named another run, removed.
    pub stale_entries: usize,
}

/// Which sweep runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sweep {
    /// This run's own rows.
    Own,
    /// A dead run's rows.
    Recovery,
}

/// What one job of the sweep does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Job {
    /// Deletes an authority row.
    Authority,
    /// Releases a reservation.
    Reservation,
    /// Removes an idle node's allocation row if it is at zero.
    IdleNode,
    /// Removes a stale index entry.
    StaleEntry,
    /// Removes the swept run's index marker once the pass is complete.
    Marker,
}

/// The sweep's jobs, queued to the engine in a bounded window ([`Engine::window`]): at most
/// that many are queued or in flight; the next waits for the oldest to answer. Each answer is
/// counted in the report; the first failure is kept.
///
/// [`Engine::window`]: super::super::engine::Engine
struct Window {
    limit: usize,
    /// Each job with the nodes whose allocation row it moves.
    queued: VecDeque<(Job, Vec<NodeKey>, Ticket)>,
    /// Nodes whose allocation row counted fewer slots than a job returned (the job failed on
    /// it, and nothing changed): rebuilt, then the sweep goes once more.
    underflowed: Vec<NodeKey>,
    report: SweepReport,
    failure: Option<LocationError>,
    /// The keys every job of the sweep is conditioned on (this run's lease row, the swept
    /// run's lease row): one of them unreadable is the sweep's failure, not one row's.
    wide: Vec<StoreKey>,
}

impl Window {
    fn new(limit: usize, wide: Vec<StoreKey>) -> Self {
        Window {
            limit: limit.max(1),
            queued: VecDeque::new(),
            underflowed: Vec::new(),
            report: SweepReport::default(),
            failure: None,
            wide,
        }
    }

    /// Queues `op` once the window has room.
    async fn push(&mut self, client: &AuthorityClient, job: Job, op: Op) {
        while self.queued.len() >= self.limit {
            self.settle_oldest().await;
        }
        let nodes = op.plan.capacity.iter().map(|m| m.node.clone()).collect();
        match client.engine.enqueue(Box::new(op)) {
            Ok(ticket) => self.queued.push_back((job, nodes, ticket)),
            Err(e) => {
                self.failure.get_or_insert(e);
            }
        }
    }

    /// Waits for every queued job.
    async fn drain(&mut self) {
        while !self.queued.is_empty() {
            self.settle_oldest().await;
        }
    }

    async fn settle_oldest(&mut self) {
        let Some((job, nodes, ticket)) = self.queued.pop_front() else {
            return;
        };
        let result = ticket.result().await;
        if let Err(LocationError::CorruptRecord {
            record: RecordName::NodeCapacity,
        }) = &result
        {
            if !nodes.is_empty() {
                tracing::warn!(
                    nodes = nodes.len(),
                    "owner sweep: an allocation row counts fewer slots than a row returns; it is rebuilt and the sweep goes once more"
                );
                for node in nodes {
                    if !self.underflowed.contains(&node) {
                        self.underflowed.push(node);
                    }
                }
                return;
            }
        }
        self.count(job, result);
    }

    /// Counts one job's outcome. A row the Store cannot read (its newest record corrupt, a
    /// foreign key, an allocation row it moves) costs only that job: skipped, logged and
    /// counted in [`SweepReport::unreadable`].
    fn count(&mut self, job: Job, result: Result<JobResult, LocationError>) {
        let report = &mut self.report;
        match (job, result) {
            (Job::Authority, Ok(JobResult::Applied { .. })) => report.removed += 1,
            (Job::Reservation, Ok(JobResult::Applied { .. })) => report.reservations_released += 1,
            (Job::StaleEntry, Ok(JobResult::Applied { .. })) => report.stale_entries += 1,
            (Job::Authority, Ok(JobResult::RecordConflict { .. } | JobResult::GuardBroken)) => {
                report.changed += 1
            }
            (Job::Reservation, Ok(JobResult::RecordConflict { .. } | JobResult::GuardBroken)) => {
                report.reservations_changed += 1
            }
            // Removed if it was empty (or unchanged), else left; a broken guard changed nothing.
            (
                Job::IdleNode | Job::StaleEntry | Job::Marker,
                Ok(
                    JobResult::Applied { .. }
                    | JobResult::GuardBroken
                    | JobResult::RecordConflict { .. },
                ),
            ) => {}
            (_, Ok(JobResult::LeaseStale { .. })) => {
                self.failure.get_or_insert(LocationError::LeaseLost);
            }
            (_, Err(LocationError::Store(StoreError::Unreadable(u))))
                if !self.wide.contains(&u.key) =>
            {
                tracing::warn!(key = %u.key, kind = %u.kind, "owner sweep skips a row the Store cannot read");
                report.unreadable += 1;
            }
            (_, Err(e)) => {
                self.failure.get_or_insert(e);
            }
        }
    }
}

impl AuthorityClient {
    /// The self-sweep (spec 21 §11) of this host run, at shutdown: see the module docs.
    pub async fn self_sweep(&self) -> Result<SweepReport, LocationError> {
        let admission = self.gate.admit(AdmissionOp::AuthorityChange)?;
        self.sweep(&admission.run, &admission.run, Vec::new(), Sweep::Own)
            .await
    }

    /// The recovery-sweep (spec 21 §3.1, §11) of another host run `dead`: see the module
    /// docs. `Conflict::RunStillLive` if `dead`'s owner lease is held by that run; `dead` may be
    /// an earlier run of this host (a lease taken over under a new generation), but not the
    /// current one (`InvalidOperation::RecoveryOfOwnRun`).
    pub async fn recovery_sweep(
        &self,
        dead: &HostRun,
    ) -> Result<Outcome<SweepReport>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::AuthorityChange)?;
        if dead == &admission.run {
            return Err(InvalidOperation::RecoveryOfOwnRun.into());
        }
        if dead.owner_id == admission.run.owner_id {
            // An earlier run of this host (its lease was lost and taken over under a new
            // generation): every batch is conditioned on this run's lease, which is the one
            // row both runs share, so while it is held the earlier run is dead.
            let report = self
                .sweep(&admission.run, dead, Vec::new(), Sweep::Recovery)
                .await?;
            return Ok(Outcome::Applied(report));
        }
        let key = lease_key(&dead.owner_id)?;
        let read = self.store.read(&key).await?;
        let guard = match &read {
            ReadResult::Missing { .. } => Expect::Missing,
            ReadResult::Found {
                version,
                expires_at,
                store_now,
                ..
            } => {
                let expired = expires_at.is_some_and(|at| at <= *store_now);
                if LeaseSeen::from_read(&read).held_by(dead) && !expired {
                    return Ok(Outcome::Conflict(Conflict::RunStillLive));
                }
                Expect::Version(version.clone())
            }
        };
        let report = self
            .sweep(&admission.run, dead, vec![(key, guard)], Sweep::Recovery)
            .await?;
        Ok(Outcome::Applied(report))
    }

    /// One pass ([`Self::sweep_once`]); if an allocation row it moves counted fewer slots
    /// than a row returns, that row is rebuilt from the records (`rebuild.rs`) and one more
    /// pass takes what the first left. A row still short after that fails the sweep.
    async fn sweep(
        &self,
        own: &HostRun,
        swept: &HostRun,
        guards: Vec<(StoreKey, Expect)>,
        which: Sweep,
    ) -> Result<SweepReport, LocationError> {
        let (mut report, underflowed) = self.sweep_once(own, swept, guards.clone(), which).await?;
        if underflowed.is_empty() {
            return Ok(report);
        }
        for node in &underflowed {
            if self.rebuild_node_capacity(node).await? {
                report.rows_rebuilt += 1;
            }
        }
        let (again, still) = self.sweep_once(own, swept, guards, which).await?;
        if !still.is_empty() {
            return Err(LocationError::corrupt(RecordName::NodeCapacity));
        }
        report.removed += again.removed;
        report.reservations_released += again.reservations_released;
        report.members_followed += again.members_followed;
        report.stale_entries += again.stale_entries;
        Ok(report)
    }

    /// One pass of the sweep: its report and the nodes whose allocation row counted fewer
    /// slots than a job returned (those jobs changed nothing).
    async fn sweep_once(
        &self,
        own: &HostRun,
        swept: &HostRun,
        guards: Vec<(StoreKey, Expect)>,
        which: Sweep,
    ) -> Result<(SweepReport, Vec<NodeKey>), LocationError> {
        let mut wide: Vec<StoreKey> = guards.iter().map(|(k, _)| k.clone()).collect();
        wide.push(lease_key(&own.owner_id)?);
        let mut window = Window::new(self.engine.window(), wide);
        // The swept run's nodes the sweep releases capacity on.
        let mut released: HashSet<NodeKey> = HashSet::default();
        // Reservations first: their rows decide which objects are still relocating.
        let mut relocating: HashSet<ObjectId> = HashSet::default();
        let reservations = self
            .scan_all(&PrivateFamily::CapacityReservation.prefix())
            .await?;
        window.report.unreadable += reservations.unreadable.len();
        for item in reservations.items {
            let row = match ReservationRow::decode(&item.bytes) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(key = %item.key, error = %e, "owner sweep skips an undecodable reservation row");
                    window.report.undecodable += 1;
                    continue;
                }
            };
            let release = if &row.target == swept {
                true
            } else if &row.source == swept {
                which == Sweep::Own || !self.target_may_finish(&row.target, &mut window).await?
            } else {
                false
            };
            if !release {
                if &row.source == swept {
                    relocating.insert(row.id.clone());
                }
                continue;
            }
            // The target's row goes once empty when the target is the swept run.
            let drop_empty = if &row.target == swept {
                released.insert(row.target_node.clone());
                vec![row.target_node.clone()]
            } else {
                Vec::new()
            };
            let op = Op {
                plan: Plan {
                    own: vec![(
                        item.key.clone(),
                        Some(Expect::Version(item.version.clone())),
                    )],
                    guards: guards.clone(),
                    capacity: vec![CapMove {
                        node: row.target_node.clone(),
                        kind: CapMoveKind::Release,
                        bundle: row.bundle.clone(),
                    }],
                    drop_empty,
                    leases: leases(own, None)?,
                    admission: Some((AdmissionOp::AuthorityChange, own.clone())),
                    size_hint: 512,
                    ..Plan::default()
                },
                write: Write::Rows(vec![Mutation::Delete(item.key.clone())]),
            };
            window.push(self, Job::Reservation, op).await;
        }
        // The run's rows, from its index (or every row, for a run without one).
        let candidates = self.run_rows(swept).await?;
        window.report.indexed = candidates.marker.is_some();
        window.report.unreadable += candidates.unreadable;
        let mut stale = candidates.stale;
        // `SpotWide` members go first, each conditioned on its Spot's record: the other rows
        // (the Spots among them) are deleted only once they are done (`members.rs`).
        let mut others = Vec::new();
        let mut spots = SpotReads::default();
        for item in candidates.rows {
            let id = match LogicalKey::parse(item.key.as_str()) {
                Ok(KeyParts::Authority { id, .. }) => id,
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!(key = %item.key, error = %e, "owner sweep skips a row whose key does not parse");
                    window.report.undecodable += 1;
                    continue;
                }
            };
            let handle = match AuthorityHandle::decode(id, &item.bytes, item.version.clone()) {
                Ok(h) => h,
                Err(e) => {
                    tracing::warn!(key = %item.key, error = %e, "owner sweep skips an undecodable authority row");
                    window.report.undecodable += 1;
                    continue;
                }
            };
            if handle.owner() != swept {
                stale.extend(item.entry);
                continue;
            }
            window.report.matched += 1;
            if relocating.contains(handle.id()) {
                window.report.relocating += 1;
                continue;
            }
            let spot_guard = match self.member_check(&handle, &mut spots).await? {
                MemberCheck::NotAMember => None,
                MemberCheck::Moved(spot) if spot.owner() == own => {
                    // This run owns the Spot the member moved with: its record follows now.
                    if self.repair_member(&handle, &spot).await {
                        window.report.members_followed += 1;
                    } else {
                        window.report.moved_members += 1;
                    }
                    continue;
                }
                MemberCheck::Moved(_) | MemberCheck::Unreadable => {
                    tracing::info!(id = %handle.id(), "owner sweep keeps a SpotWide member whose Spot is not the swept run's");
                    window.report.moved_members += 1;
                    continue;
                }
                MemberCheck::Guard(g) => Some(g),
            };
            let mut guards = guards.clone();
            let member = spot_guard.is_some();
            guards.extend(spot_guard);
            let mut op =
                self.delete_op(&handle, own, Some(AdmissionOp::AuthorityChange), guards)?;
            // The swept run's node: its row goes once empty.
            released.insert(handle.node());
            op.plan.drop_empty.push(handle.node());
            if member {
                window.push(self, Job::Authority, op).await;
            } else {
                others.push(op);
            }
        }
        // The members (and the reservations) are done before any other row goes.
        window.drain().await;
        for op in others {
            window.push(self, Job::Authority, op).await;
        }
        let (nodes, unreadable) = self.descriptor_nodes(swept).await?;
        window.report.unreadable += unreadable;
        for node in nodes {
            if released.contains(&node) {
                continue;
            }
            window.report.idle_nodes_checked += 1;
            let op = Op {
                plan: Plan {
                    guards: guards.clone(),
                    drop_empty: vec![node],
                    leases: leases(own, None)?,
                    admission: Some((AdmissionOp::AuthorityChange, own.clone())),
                    size_hint: 256,
                    ..Plan::default()
                },
                write: Write::Rows(Vec::new()),
            };
            window.push(self, Job::IdleNode, op).await;
        }
        for (key, version) in stale {
            let op = Self::index_row_delete(key, version, own, &guards)?;
            window.push(self, Job::StaleEntry, op).await;
        }
        window.drain().await;
        // The marker goes last, once the pass is complete: a row left behind (relocating, a
        // moved member) still leaves the run's index with its record, and a later sweep
        // reads the run without the index, which is always right.
        if let (Some((key, version)), None, true) = (
            candidates.marker,
            &window.failure,
            window.underflowed.is_empty(),
        ) {
            let op = Self::index_row_delete(key, version, own, &guards)?;
            window.push(self, Job::Marker, op).await;
            window.drain().await;
        }
        match window.failure {
            Some(e) => Err(e),
            None => Ok((window.report, window.underflowed)),
        }
    }

    /// The batch that removes one row of the swept run's index (a stale entry, the marker)
    /// under its version, with the sweep's guards.
    fn index_row_delete(
        key: StoreKey,
        version: zlink_store_spi::StoreVersion,
        own: &HostRun,
        guards: &[(StoreKey, Expect)],
    ) -> Result<Op, LocationError> {
        Ok(Op {
            plan: Plan {
                own: vec![(key.clone(), Some(Expect::Version(version)))],
                guards: guards.to_vec(),
                leases: leases(own, None)?,
                admission: Some((AdmissionOp::AuthorityChange, own.clone())),
                size_hint: 512,
                ..Plan::default()
            },
            write: Write::Rows(vec![Mutation::Delete(key)]),
        })
    }

    /// Whether the target of a reservation whose source is the swept run may still finish the
    /// move (recovery only): its lease is held by it. A lease row the Store cannot read keeps
    /// the reservation (the move is not known to be over) and is counted as unreadable.
    async fn target_may_finish(
        &self,
        target: &HostRun,
        window: &mut Window,
    ) -> Result<bool, LocationError> {
        match self.lease_held(target).await {
            Err(LocationError::Store(StoreError::Unreadable(u))) => {
                tracing::warn!(key = %u.key, "owner sweep keeps a reservation whose target's lease row it cannot read");
                window.report.unreadable += 1;
                Ok(true)
            }
            held => held,
        }
    }

    /// The member record `member`, which moved with the `SpotWide` Spot `spot` this run owns,
    /// follows it ([`follow_spot_owner`](Self::follow_spot_owner)); whether it applied. A
    /// conflict or a failure leaves it as it was (it still resolves through the Spot's record;
    /// a later sweep tries again).
    async fn repair_member(&self, member: &AuthorityHandle, spot: &AuthorityHandle) -> bool {
        match self.follow_spot_owner(member, spot).await {
            Ok(Outcome::Applied(_)) => {
                tracing::info!(id = %member.id(), spot = %spot.id(), "owner sweep: a SpotWide member's record follows its Spot's owner");
                true
            }
            Ok(Outcome::Conflict(c)) => {
                tracing::info!(id = %member.id(), conflict = ?c, "owner sweep: a SpotWide member's follow did not apply");
                false
            }
            Err(e) => {
                tracing::warn!(id = %member.id(), error = %e, "owner sweep: a SpotWide member's follow failed");
                false
            }
        }
    }

    /// The nodes whose MeshNode descriptor names `run` (read only; one snapshot), and how many
    /// descriptor keys the Store could not read. A descriptor that cannot be decoded is
    /// skipped.
    async fn descriptor_nodes(
        &self,
        run: &HostRun,
    ) -> Result<(Vec<NodeKey>, usize), LocationError> {
        let prefix = ScanPrefix::new(zlink_codec::keys::prefix::mesh_nodes())
            .map_err(LocationError::Argument)?;
        let mut nodes = Vec::new();
        let descriptors = self.scan_all(&prefix).await?;
        for item in descriptors.items {
            match DescriptorRecord::<MeshNodeDescriptor>::decode(&item.bytes) {
                Ok(r)
                    if r.owner_id == run.owner_id
                        && r.lease_generation == run.lease_generation.to_codec() =>
                {
                    nodes.push(NodeKey {
                        mesh: r.descriptor.mesh_name,
                        routing_id: r.descriptor.routing_id,
                    });
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(key = %item.key, error = %e, "owner sweep skips an undecodable descriptor");
                }
            }
        }
        Ok((nodes, descriptors.unreadable.len()))
    }

    /// Whether `run`'s owner lease is held by that run, by a direct read of its row.
    pub(super) async fn lease_held(&self, run: &HostRun) -> Result<bool, LocationError> {
        let read = self.store.read(&lease_key(&run.owner_id)?).await?;
        Ok(LeaseSeen::from_read(&read).held_by(run))
    }

    /// Whether `run`'s owner lease has ended, by a direct read of its row judged by the Store
    /// clock: missing, expired, or held under another generation or by another owner.
    pub async fn lease_ended(&self, run: &HostRun) -> Result<bool, LocationError> {
        let read = self.store.read(&lease_key(&run.owner_id)?).await?;
        let expired = match &read {
            ReadResult::Found {
                expires_at,
                store_now,
                ..
            } => expires_at.is_some_and(|at| at <= *store_now),
            _ => true,
        };
        Ok(expired || !LeaseSeen::from_read(&read).held_by(run))
    }
}
