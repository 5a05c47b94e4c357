//! The contract between an authority operation and the engine: what a job declares (its
//! [`Plan`]), how it builds its mutations once generations are issued ([`EngineOp`]) and how it
//! ends ([`JobResult`]).

use zlink_codec::records::AuthorityRecord;
use zlink_store_spi::{Condition, Mutation, ReadResult, StoreKey, StoreVersion};

use super::super::admission::AdmissionOp;
use super::super::capacity::{CapacityBundle, CapacityLimits};
use super::super::error::LocationError;
use super::super::generation::GenerationKind;
use super::super::identity::{HostRun, NodeKey};

/// What a job expects of one key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Expect {
    /// The key must not exist.
    Missing,
    /// The key must hold this version.
    Version(StoreVersion),
}

impl Expect {
    /// The Store condition for `key`.
    pub fn condition(&self, key: &StoreKey) -> Condition {
        match self {
            Expect::Missing => Condition::Missing(key.clone()),
            Expect::Version(v) => Condition::Version(key.clone(), v.clone()),
        }
    }

    /// Whether `read` still satisfies it.
    pub fn holds(&self, read: &ReadResult) -> bool {
        match (self, read) {
            (Expect::Missing, ReadResult::Missing { .. }) => true,
            (Expect::Version(v), ReadResult::Found { version, .. }) => v == version,
            _ => false,
        }
    }
}

/// How a job moves one node's allocation row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CapMoveKind {
    /// Secure slots (allocated += bundle), within these limits.
    Reserve(CapacityLimits),
    /// Return secured slots, reserved or in use (allocated −= bundle).
    Release,
}

/// One capacity move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapMove {
    pub node: NodeKey,
    pub kind: CapMoveKind,
    pub bundle: CapacityBundle,
}

/// A shared row a batch writes (cached by the engine, locked while a batch moving it is in
/// flight).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Shared {
    Counter(GenerationKind),
    Row(NodeKey),
}

/// Whose lease a job needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseRole {
    /// The host running the operation.
    Own,
    /// The target host (the record's new owner).
    Target,
}

/// One lease a job needs held by a given host run (a `Version` condition in the batch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseNeed {
    pub key: StoreKey,
    pub run: HostRun,
    pub role: LeaseRole,
}

/// What a job needs.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The job's own keys: each with its expectation (`None`: written without a condition).
    /// Two jobs with a common own key never share a batch, and they keep their order.
    pub own: Vec<(StoreKey, Option<Expect>)>,
    /// Conditions on rows the job reads but never writes (for example another run's owner
    /// lease, spec 21 §3.1). Jobs with the same guard share a batch (one condition); a guard
    /// that no longer holds ends the job as [`JobResult::GuardBroken`].
    pub guards: Vec<(StoreKey, Expect)>,
    /// Needs one ObjectGeneration.
    pub object_generation: bool,
    /// Needs one AuthorityOwnerGeneration.
    pub authority_owner_generation: bool,
    /// Capacity moves, applied in order.
    pub capacity: Vec<CapMove>,
    /// Allocation rows the job removes when its batch leaves them empty (nothing allocated):
    /// each is loaded, locked and written like a moved row, but deleted under the version it
    /// was read with instead of being stored at zero. A row that still counts a slot, or one
    /// already absent, is left as it is (a row only listed here and not empty is not written
    /// at all).
    pub drop_empty: Vec<NodeKey>,
    /// Leases that must be held.
    pub leases: Vec<LeaseNeed>,
    /// The admission the job needs, under which host run.
    pub admission: Option<(AdmissionOp, HostRun)>,
    /// Roughly how many bytes the job adds to a batch.
    pub size_hint: usize,
}

impl Plan {
    /// The counters the job issues from.
    pub fn counters(&self) -> impl Iterator<Item = GenerationKind> + '_ {
        [
            (self.object_generation, GenerationKind::Object),
            (
                self.authority_owner_generation,
                GenerationKind::AuthorityOwner,
            ),
        ]
        .into_iter()
        .filter_map(|(wanted, kind)| wanted.then_some(kind))
    }

    /// The shared rows this job writes.
    pub fn shared(&self) -> Vec<Shared> {
        let mut v: Vec<Shared> = self.counters().map(Shared::Counter).collect();
        v.extend(self.rows().map(|node| Shared::Row(node.clone())));
        v
    }

    /// Every allocation row the job moves or may remove (a node can appear twice).
    pub fn rows(&self) -> impl Iterator<Item = &NodeKey> + '_ {
        self.capacity
            .iter()
            .map(|mv| &mv.node)
            .chain(self.drop_empty.iter())
    }
}

/// Generations issued to one job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Issued {
    pub object: Option<u64>,
    pub authority_owner: Option<u64>,
}

/// A job's own mutations, and the authority record it writes (if any).
#[derive(Debug)]
pub(crate) struct Built {
    pub mutations: Vec<Mutation>,
    pub record: Option<Box<AuthorityRecord>>,
}

/// An operation the engine can run.
pub(crate) trait EngineOp: Send + Sync + 'static {
    /// What the job needs.
    fn plan(&self) -> &Plan;
    /// The job's own mutations, given the generations issued to it.
    fn build(&self, issued: &Issued) -> Result<Built, LocationError>;
}

/// How a job ended.
#[derive(Debug)]
pub(crate) enum JobResult {
    /// Applied; one version per `Put` of the job's own mutations, in order.
    Applied {
        put_versions: Vec<StoreVersion>,
        built: Built,
    },
    /// One of the job's own expectations no longer holds: nothing changed. The reads of its
    /// own keys (in plan order) show what they hold now.
    RecordConflict { reads: Vec<(StoreKey, ReadResult)> },
    /// One of the job's guards no longer holds: nothing changed.
    GuardBroken,
    /// A lease the job needs is not held by the expected run: nothing changed.
    LeaseStale { role: LeaseRole, run: HostRun },
}
