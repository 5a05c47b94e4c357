//! How an authority operation becomes an engine job: what it writes ([`Write`]), the shared
//! pieces of its plan, and how the job's result maps back to an [`Outcome`].

use zlink_codec::Generation;
use zlink_codec::records::{AuthorityRecord, DescriptorRef};
use zlink_store_spi::{Mutation, ReadResult, StoreKey};

use super::super::admission::Admission;
use super::super::engine::{
    Built, EngineOp, Expect, Issued, JobResult, LeaseNeed, LeaseRole, Plan,
};
use super::super::error::{InvalidOperation, LocationError, RecordName, put_version};
use super::super::identity::{HostRun, NodeKey, ObjectId, ObjectKind, StableType};
use super::super::keys;
use super::super::lease::lease_key;
use super::super::placement::TargetNode;
use super::handle::AuthorityHandle;
use super::outcome::{Conflict, Outcome};
use super::rows::index_bytes;

/// What an operation writes. The authority record, when there is one, is always the job's
/// first put (its version is the record's new version).
pub enum Write {
    /// An authority record whose generations are issued in the batch (Reserve, NewOwner),
    /// optionally with its lookup index, then `also`.
    Issued {
        key: StoreKey,
        record: Box<AuthorityRecord>,
        fill_object: bool,
        fill_owner: bool,
        index: Option<StoreKey>,
        /// The creation deadline row, filled with the issued ObjectGeneration.
        creation: Option<(StoreKey, super::CreationMark)>,
        also: Vec<Mutation>,
    },
    /// An authority record encoded up front (Commit, Preserve), then `also`.
    Encoded {
        key: StoreKey,
        record: Box<AuthorityRecord>,
        bytes: Vec<u8>,
        also: Vec<Mutation>,
    },
    /// Only these mutations (Delete, Abort, reservation rows).
    Rows(Vec<Mutation>),
}

pub struct Op {
    pub plan: Plan,
    pub write: Write,
}

fn issued_generation(value: Option<u64>) -> Result<Generation, LocationError> {
    // The engine issues a value for every generation the plan asks for, inside 1..=2^63-2.
    value
        .and_then(|v| Generation::new(v).ok())
        .ok_or(LocationError::corrupt(RecordName::GenerationCounter))
}

impl EngineOp for Op {
    fn plan(&self) -> &Plan {
        &self.plan
    }

    fn build(&self, issued: &Issued) -> Result<Built, LocationError> {
        match &self.write {
            Write::Encoded {
                key,
                record,
                bytes,
                also,
            } => {
                let mut mutations = Vec::with_capacity(1 + also.len());
                mutations.push(Mutation::put(key.clone(), bytes.clone()));
                mutations.extend(also.iter().cloned());
                Ok(Built {
                    mutations,
                    record: Some(record.clone()),
                })
            }
            Write::Issued {
                key,
                record,
                fill_object,
                fill_owner,
                index,
                creation,
                also,
            } => {
                let mut record = AuthorityRecord::clone(record);
                if *fill_object {
                    record.object_generation = issued_generation(issued.object)?;
                }
                if *fill_owner {
                    record.authority_owner_generation = issued_generation(issued.authority_owner)?;
                }
                let mut mutations = vec![Mutation::put(key.clone(), encode(&record)?)];
                if let Some(index) = index {
                    mutations.push(Mutation::put(
                        index.clone(),
                        index_bytes(record.object_generation.get())?,
                    ));
                }
                if let Some((key, mark)) = creation {
                    mutations.push(Mutation::put(
                        key.clone(),
                        mark.encode(record.object_generation.get())?,
                    ));
                }
                mutations.extend(also.iter().cloned());
                Ok(Built {
                    mutations,
                    record: Some(Box::new(record)),
                })
            }
            Write::Rows(mutations) => Ok(Built {
                mutations: mutations.clone(),
                record: None,
            }),
        }
    }
}

/// Encodes an authority record, every bound checked; out of bounds is an error before any
/// Store request.
pub(super) fn encode(record: &AuthorityRecord) -> Result<Vec<u8>, LocationError> {
    Ok(record
        .encode()
        .map_err(InvalidOperation::RecordOutOfBounds)?)
}

pub(super) fn descriptor_ref(node: &NodeKey) -> DescriptorRef {
    DescriptorRef {
        mesh_name: node.mesh.clone(),
        routing_id: node.routing_id.clone(),
    }
}

pub(super) fn lifecycle(target: &TargetNode) -> Result<Generation, LocationError> {
    Generation::new(target.lifecycle_generation).map_err(|_| {
        InvalidOperation::LifecycleGenerationOutOfRange(target.lifecycle_generation).into()
    })
}

/// The target registered a factory for this kind and stable type (else the operation is
/// invalid before any Store request).
pub(super) fn ensure_offers(
    target: &TargetNode,
    kind: ObjectKind,
    stable_type: &StableType,
) -> Result<(), LocationError> {
    if target.offers.contains(&(kind, stable_type.clone())) {
        Ok(())
    } else {
        Err(InvalidOperation::TargetDoesNotOffer {
            kind,
            stable_type: stable_type.clone(),
        }
        .into())
    }
}

fn lease_need(run: &HostRun, role: LeaseRole) -> Result<LeaseNeed, LocationError> {
    Ok(LeaseNeed {
        key: lease_key(&run.owner_id)?,
        run: run.clone(),
        role,
    })
}

/// The leases an operation needs: this host's own, and the target's when it is another host.
pub(super) fn leases(
    own: &HostRun,
    target: Option<&HostRun>,
) -> Result<Vec<LeaseNeed>, LocationError> {
    let mut v = vec![lease_need(own, LeaseRole::Own)?];
    if let Some(t) = target {
        if t.owner_id != own.owner_id {
            v.push(lease_need(t, LeaseRole::Target)?);
        } else if t != own {
            // Same owner id, different generation: this run cannot speak for that one.
            return Err(InvalidOperation::TargetIsAnotherRunOfThisHost.into());
        }
    }
    Ok(v)
}

/// The plan of an operation that rewrites an authority record under its first-read version
/// and moves nothing shared (Commit, Preserve): the record's key under `Version`, this host's
/// lease, the admission.
pub(super) fn rewrite_plan(
    handle: &AuthorityHandle,
    admission: Admission,
    encoded_len: usize,
) -> Result<(StoreKey, Plan), LocationError> {
    let key = keys::authority(handle.kind(), handle.id())?;
    let plan = Plan {
        own: vec![(key.clone(), Some(Expect::Version(handle.version().clone())))],
        leases: leases(&admission.run, None)?,
        admission: Some((admission.op, admission.run)),
        size_hint: encoded_len + 256,
        ..Plan::default()
    };
    Ok((key, plan))
}

/// The conflict the reads of an authority job's own keys show (the authority key first).
pub(super) fn conflict_from_reads(
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

/// Maps a finished job of an operation on `id` to its outcome: the record it wrote (if any)
/// with its new version, or the conflict.
pub(super) fn record_outcome(
    id: &ObjectId,
    result: JobResult,
) -> Result<Outcome<Option<AuthorityHandle>>, LocationError> {
    match result {
        JobResult::Applied {
            put_versions,
            built,
        } => match built.record {
            Some(record) => Ok(Outcome::Applied(Some(AuthorityHandle::new(
                id.clone(),
                *record,
                put_version(&put_versions, 0)?,
            )?))),
            None => Ok(Outcome::Applied(None)),
        },
        JobResult::RecordConflict { reads } => {
            Ok(Outcome::Conflict(conflict_from_reads(id, &reads)?))
        }
        JobResult::GuardBroken => Ok(Outcome::Conflict(Conflict::RunStillLive)),
        JobResult::LeaseStale { role, run } => {
            Ok(Outcome::Conflict(Conflict::lease_stale(role, run)))
        }
    }
}

/// An outcome that must carry the record written.
pub(super) fn with_handle(
    outcome: Outcome<Option<AuthorityHandle>>,
) -> Result<Outcome<AuthorityHandle>, LocationError> {
    match outcome {
        Outcome::Applied(Some(h)) => Ok(Outcome::Applied(h)),
        // Every record-writing job puts its record; an applied job without one cannot happen.
        Outcome::Applied(None) => Err(LocationError::StoreContract(
            super::super::error::ContractViolation::MissingPutVersion,
        )),
        Outcome::Conflict(c) => Ok(Outcome::Conflict(c)),
    }
}
