//! The end of every creation (spec 21 §7, §10): the creation deadline row of a `Reserved`
//! record and the cancellation of an abandoned reservation by any node that meets it.
//!
//! A Reserve made for a Create/GetOrCreate writes, in its batch, the runtime-private row
//! `creation-deadline\0{objectKind}\0{Id}`: the ObjectGeneration it reserved, the creating
//! operation (source RID, source host run generation, OperationId) and, on the Store's clock,
//! the operation's original deadline and the instant after which the reservation counts as
//! abandoned (the deadline plus the creating node's cleanup window). The row is removed in the
//! batch that ends the reservation (Commit, Abort, any delete of the `Reserved` record), so a
//! row present beside a `Reserved` record of the same generation describes that creation.
//!
//! [`cancel_abandoned`](AuthorityClient::cancel_abandoned) removes a `Reserved` record, its
//! lookup index and the row, and returns the reserved capacity, in one conditional batch, in
//! exactly two cases, and never while the creating run is live and within the deadline plus
//! the window:
//!
//! - the creating run's owner lease has ended (read directly: missing, expired by StoreNow, or
//!   held under another generation or owner) — the batch is conditioned on the lease row as
//!   read, as a recovery-sweep is (§3.1);
//! - the row says the Store's clock has passed the deadline plus the window — the batch is
//!   conditioned on the row's version.
//!
//! Either way it is also conditioned on the record's first-read version: a creation that
//! committed or ended meanwhile is a `Conflict::Record` and nothing changes. A record without
//! a row (written by another runtime, or a Reserve made without one) is judged only by its
//! creating run's lease. An Abort is not an application result: no terminal is written.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use zlink_codec::records::AllocationState;
use zlink_codec::{Generation, OperationId, RoutingId};
use zlink_store_spi::{LocationStore, Mutation, ReadResult, StoreKey, StoreTime};

use super::super::admission::AdmissionOp;
use super::super::engine::Expect;
use super::super::error::{InvalidOperation, LocationError, RecordName};
use super::super::keys;
use super::super::lease::{LeaseSeen, lease_key};
use super::handle::AuthorityHandle;
use super::outcome::{Conflict, Outcome};
use super::{AuthorityClient, OperationKey};

/// What a Reserve made for a creation records beside the `Reserved` record (see the module
/// docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreationMark {
    /// The creating operation.
    pub op: OperationKey,
    /// The operation's original deadline, on the Store's clock.
    pub deadline: StoreTime,
    /// The instant, on the Store's clock, after which the reservation counts as abandoned:
    /// the deadline plus the creating node's cleanup window.
    pub abandoned_after: StoreTime,
}

impl CreationMark {
    /// The mark of `op` whose deadline is `remaining` after `store_now` (a StoreNow the
    /// caller read just before), abandoned `cleanup` after that deadline.
    pub fn new(
        op: OperationKey,
        store_now: StoreTime,
        remaining: Duration,
        cleanup: Duration,
    ) -> Self {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let deadline = StoreTime::from_millis(store_now.as_millis().saturating_add(ms(remaining)));
        let abandoned_after =
            StoreTime::from_millis(deadline.as_millis().saturating_add(ms(cleanup)));
        CreationMark {
            op,
            deadline,
            abandoned_after,
        }
    }

    /// The row bytes for the incarnation `object_generation`.
    pub(super) fn encode(&self, object_generation: u64) -> Result<Vec<u8>, LocationError> {
        serde_json::to_vec(&MarkWire {
            record_version: 1,
            object_generation: object_generation.to_string(),
            source_routing_id_hex: self.op.source.to_hex(),
            source_lease_generation: self.op.source_run.get().to_string(),
            operation_id: self.op.operation.to_hex(),
            deadline: self.deadline.as_millis().to_string(),
            abandoned_after: self.abandoned_after.as_millis().to_string(),
        })
        .map_err(|_| {
            InvalidOperation::RowEncoding {
                record: RecordName::CreationDeadline,
            }
            .into()
        })
    }

    /// The mark and the ObjectGeneration it was written for.
    fn decode(bytes: &[u8]) -> Result<(u64, Self), LocationError> {
        let corrupt = || LocationError::corrupt(RecordName::CreationDeadline);
        let w: MarkWire = serde_json::from_slice(bytes).map_err(|_| corrupt())?;
        if w.record_version != 1 {
            return Err(corrupt());
        }
        let number = |s: &str| s.parse::<u64>().map_err(|_| corrupt());
        let op = OperationKey {
            source: RoutingId::from_hex(&w.source_routing_id_hex).map_err(|_| corrupt())?,
            source_run: Generation::new(number(&w.source_lease_generation)?)
                .map_err(|_| corrupt())?,
            operation: u128::from_str_radix(&w.operation_id, 16)
                .ok()
                .and_then(|v| OperationId::new(v).ok())
                .ok_or_else(corrupt)?,
        };
        Ok((
            number(&w.object_generation)?,
            CreationMark {
                op,
                deadline: StoreTime::from_millis(number(&w.deadline)?),
                abandoned_after: StoreTime::from_millis(number(&w.abandoned_after)?),
            },
        ))
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MarkWire {
    record_version: u32,
    object_generation: String,
    source_routing_id_hex: String,
    source_lease_generation: String,
    operation_id: String,
    deadline: String,
    abandoned_after: String,
}

/// Why an abandoned reservation was cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Abandoned {
    /// The creating run's owner lease has ended.
    LeaseEnded,
    /// The Store's clock passed the creation deadline plus the cleanup window.
    DeadlinePassed,
}

/// The creation deadline row of `handle`'s record, as read.
struct MarkRead {
    found: Option<(StoreTime, zlink_store_spi::StoreVersion, CreationMark)>,
}

impl AuthorityClient {
    /// The creation mark beside `handle`'s `Reserved` record, if one describes that
    /// incarnation (see the module docs). A row that does not decode is logged and treated
    /// as absent.
    pub async fn creation_mark(
        &self,
        handle: &AuthorityHandle,
    ) -> Result<Option<CreationMark>, LocationError> {
        Ok(self.read_mark(handle).await?.found.map(|(_, _, m)| m))
    }

    async fn read_mark(&self, handle: &AuthorityHandle) -> Result<MarkRead, LocationError> {
        let key = keys::creation_deadline(handle.kind(), handle.id())?;
        let found = match self.store.read(&key).await? {
            ReadResult::Missing { .. } => None,
            ReadResult::Found {
                bytes,
                version,
                store_now,
                ..
            } => match CreationMark::decode(&bytes) {
                Ok((g, mark)) if g == handle.object_generation().get() => {
                    Some((store_now, version, mark))
                }
                Ok(_) => None,
                Err(e) => {
                    tracing::warn!(%key, error = %e, "a creation deadline row does not decode");
                    None
                }
            },
        };
        Ok(MarkRead { found })
    }

    /// Cancels `handle`'s `Reserved` record if its creation is abandoned (see the module
    /// docs): `Conflict::RunStillLive` while the creating run is live and the Store's clock has
    /// not passed the deadline plus the window; `Conflict::State` for a record not `Reserved`;
    /// `Conflict::Record` if the record changed since it was read.
    pub async fn cancel_abandoned(
        &self,
        handle: &AuthorityHandle,
    ) -> Result<Outcome<Abandoned>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::AuthorityChange)?;
        if let Some(c) = Self::require(handle, AllocationState::Reserved) {
            return Ok(Outcome::Conflict(c));
        }
        let creating = handle.owner();
        // Whether the creating run is dead, and the guard that proves it in the batch.
        let lease_guard = if creating == &admission.run {
            None
        } else if creating.owner_id == admission.run.owner_id {
            // An earlier run of this host: the batch's condition on this run's own lease (the
            // row both share) proves it dead.
            Some(Vec::new())
        } else {
            let key = lease_key(&creating.owner_id)?;
            let read = self.store.read(&key).await?;
            match &read {
                ReadResult::Missing { .. } => Some(vec![(key, Expect::Missing)]),
                ReadResult::Found {
                    version,
                    expires_at,
                    store_now,
                    ..
                } => {
                    let expired = expires_at.is_some_and(|at| at <= *store_now);
                    if LeaseSeen::from_read(&read).held_by(creating) && !expired {
                        None
                    } else {
                        Some(vec![(key, Expect::Version(version.clone()))])
                    }
                }
            }
        };
        let (guards, mark_expect, why) = match lease_guard {
            Some(guards) => (guards, None, Abandoned::LeaseEnded),
            None => match self.read_mark(handle).await?.found {
                Some((now, version, mark)) if now >= mark.abandoned_after => {
                    (Vec::new(), Some(version), Abandoned::DeadlinePassed)
                }
                _ => return Ok(Outcome::Conflict(Conflict::RunStillLive)),
            },
        };
        let mut op = self.delete_op(handle, &admission.run, Some(admission.op), guards)?;
        if let Some(version) = mark_expect {
            let key = keys::creation_deadline(handle.kind(), handle.id())?;
            for (k, expect) in &mut op.plan.own {
                if *k == key {
                    *expect = Some(Expect::Version(version.clone()));
                }
            }
        }
        let outcome = self.run_record_op(handle.id(), op).await?.map(|_| why);
        if let Outcome::Applied(why) = &outcome {
            tracing::warn!(
                kind = handle.kind().as_str(),
                id = handle.id().as_str(),
                generation = handle.object_generation().get(),
                owner = %creating.owner_id,
                ?why,
                "an abandoned creation's reservation was cancelled"
            );
        }
        Ok(outcome)
    }

    /// The row and mutation that remove the creation deadline row of a `Reserved` record, in
    /// the batch that ends the reservation.
    pub(super) fn mark_removal(
        handle: &AuthorityHandle,
    ) -> Result<Option<(StoreKey, Mutation)>, LocationError> {
        if handle.state() != AllocationState::Reserved {
            return Ok(None);
        }
        let key = keys::creation_deadline(handle.kind(), handle.id())?;
        Ok(Some((key.clone(), Mutation::Delete(key))))
    }
}
