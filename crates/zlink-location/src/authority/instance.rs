//! Instance Spot recovery after the owner's death (spec 21 §7.1, row "after Ready, before
//! restoring the first message"): finding a dead run's Ready Instance Spots, and the takeover
//! that moves one of them to this host run so it can restore the first message from the
//! stored cold-activation envelope.
//!
//! The takeover is one conditional batch, like NewOwner: the record under its first-read
//! version, the dead owner's lease row under a guard read directly (Missing, expired by
//! StoreNow, or held at another LeaseGeneration — exactly what the recovery-sweep checks, never
//! judged by enumerating leases, §3.1), this run's own lease, the next AuthorityOwnerGeneration
//! issued, the capacity reserved on this node within its limits and returned on the dead node.
//! The ObjectGeneration and the framework-internal payload (the recovery root) are kept: the
//! same incarnation continues on a new owner. If the dead run's lease turns out held by it, the
//! result is `Conflict::RunStillLive` and nothing changes; a record changed since it was read
//! (another survivor took it over first) is `Conflict::Record`.

use zlink_codec::records::{AllocationState, ObjectKind};
use zlink_codec::{KeyParts, LogicalKey};
use zlink_store_spi::{LocationStore, ReadResult};

use super::super::admission::AdmissionOp;
use super::super::engine::{CapMove, CapMoveKind, Expect, Plan};
use super::super::error::{InvalidOperation, LocationError};
use super::super::identity::HostRun;
use super::super::keys;
use super::super::lease::{LeaseSeen, lease_key};
use super::super::placement::TargetNode;
use super::AuthorityClient;
use super::handle::AuthorityHandle;
use super::op::{Op, Write, descriptor_ref, ensure_offers, leases, lifecycle, with_handle};
use super::outcome::{Conflict, Outcome};

impl AuthorityClient {
    /// The Ready (Active) Instance Spot rows `dead` owns whose framework-internal payload is
    /// not empty (the candidates for a restore), from `dead`'s index (`run_index.rs`; every
    /// authority row for a run without one). Each is only a candidate: the takeover is
    /// conditioned on the version read here.
    pub async fn instance_rows_of(
        &self,
        dead: &HostRun,
    ) -> Result<Vec<AuthorityHandle>, LocationError> {
        let mut out = Vec::new();
        // Unreadable keys are logged by the scan; undecodable rows are skipped too.
        for item in self.run_rows(dead).await?.rows {
            let Ok(KeyParts::Authority { id, .. }) = LogicalKey::parse(item.key.as_str()) else {
                continue;
            };
            let handle = match AuthorityHandle::decode(id, &item.bytes, item.version.clone()) {
                Ok(h) => h,
                Err(e) => {
                    tracing::warn!(key = %item.key, error = %e, "instance recovery skips an undecodable authority row");
                    continue;
                }
            };
            if handle.owner() == dead
                && handle.kind() == ObjectKind::InstanceSpot
                && handle.state() == AllocationState::Active
                && !handle.payload().is_empty()
            {
                out.push(handle);
            }
        }
        Ok(out)
    }

    /// Moves the Ready Instance Spot `handle` of a dead host run to `target` (this host run):
    /// see the module docs. Returns the record as written.
    pub async fn take_over_instance(
        &self,
        handle: &AuthorityHandle,
        target: &TargetNode,
    ) -> Result<Outcome<AuthorityHandle>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::RelocationChange)?;
        self.seen(handle);
        if target.run != admission.run || handle.owner().owner_id == admission.run.owner_id {
            return Err(InvalidOperation::TakeoverNotByThisRun.into());
        }
        if let Some(c) = Self::require(handle, AllocationState::Active) {
            return Ok(Outcome::Conflict(c));
        }
        ensure_offers(target, handle.kind(), handle.stable_type())?;
        let dead = handle.owner();
        let lease = lease_key(&dead.owner_id)?;
        let read = self.store.read(&lease).await?;
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
        let mut record = handle.record().clone();
        record.owner_id = target.run.owner_id.clone();
        record.owner_lease_generation = target.run.lease_generation.to_codec();
        record.allocation.descriptor = descriptor_ref(&target.node);
        record.allocation.descriptor_lifecycle_generation = lifecycle(target)?;
        let size = record.payload.len() * 4 / 3 + 1024;
        let key = keys::authority(handle.kind(), handle.id())?;
        let mut op = Op {
            plan: Plan {
                own: vec![(key.clone(), Some(Expect::Version(handle.version().clone())))],
                guards: vec![(lease, guard)],
                authority_owner_generation: true,
                capacity: vec![
                    CapMove {
                        node: target.node.clone(),
                        kind: CapMoveKind::Reserve(target.limits.clone()),
                        bundle: handle.bundle().clone(),
                    },
                    CapMove {
                        node: handle.node(),
                        kind: CapMoveKind::Release,
                        bundle: handle.bundle().clone(),
                    },
                ],
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
                also: Vec::new(),
            },
        };
        op.move_run_entry(handle.kind(), handle.id(), Some(dead), Some(&target.run))?;
        with_handle(self.run_record_op(handle.id(), op).await?)
    }
}
