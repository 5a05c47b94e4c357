//! Forming one conditional batch, with no I/O: which pending jobs go together
//! ([`take_batch`](super::pending::take_batch)), applying each job to working copies of the shared rows ([`apply`]) and
//! assembling the Store request with an explicit index for every put ([`assemble`]), so the
//! versions of an applied batch are handed back by index, never by position in a queue.

use std::ops::Range;

use tokio::sync::oneshot;
use zlink_store_spi::entropy::{HashMap, HashSet};
use zlink_store_spi::{ArgumentError, Condition, Mutation, StoreKey, StoreVersion, WriteRequest};

use super::super::capacity::CapacityRow;
use super::super::counters::CounterRow;
use super::super::error::{InvalidOperation, LocationError, RecordName};
use super::super::generation::GenerationKind;
use super::super::identity::NodeKey;
use super::super::keys;
use super::super::lease::LeaseBook;
use super::plan::{Built, CapMoveKind, EngineOp, Issued, JobResult, Shared};

/// Tuning of the engine.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EngineConfig {
    /// The most jobs in one batch.
    pub max_jobs: usize,
    /// The most (approximate) bytes in one batch.
    pub max_bytes: usize,
    /// How many conflicting rounds a job may go through before `Contended`.
    pub max_rounds: u32,
    /// The most batches in flight (written or being recovered) at once.
    pub max_in_flight: usize,
    /// The fewest jobs a batch needs to go out while another batch is in flight: extra
    /// batches only pay off when they are large (each batch has a fixed cost in the Store).
    pub min_extra_jobs: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_jobs: 128,
            max_bytes: 3 * 1024 * 1024,
            max_rounds: 2_000,
            max_in_flight: 4,
            min_extra_jobs: 16,
        }
    }
}

pub(super) type Reply = oneshot::Sender<Result<JobResult, LocationError>>;

/// One submitted operation and where its result goes.
pub(super) struct Job {
    pub op: Box<dyn EngineOp>,
    /// The shared rows the job writes (from its plan, computed once).
    pub shared: Vec<Shared>,
    pub reply: Reply,
    pub rounds: u32,
    /// Whether the shared rows this job depends on were re-read after a failure derived from
    /// them: such a failure is final only once it holds on freshly read rows.
    pub refreshed: bool,
    /// Its place in the waiting order, given when it first waits and kept when it is sent
    /// back (`pending.rs`).
    pub seq: Option<u64>,
    /// Goes in a batch of its own: a batch it was part of failed as a whole for a reason no
    /// job can be singled out for (a Store bound, an encoding), so each job is tried alone and
    /// a failure costs only its own job.
    pub solo: bool,
}

impl Job {
    pub(super) fn new(op: Box<dyn EngineOp>, reply: Reply) -> Self {
        let shared = op.plan().shared();
        Job {
            op,
            shared,
            reply,
            rounds: 0,
            refreshed: false,
            seq: None,
            solo: false,
        }
    }

    pub(super) fn finish(self, result: Result<JobResult, LocationError>) {
        // The caller may have gone away; the job's outcome is in the Store either way.
        let _ = self.reply.send(result);
    }
}

/// A node's allocation row as last read, with its version (`None`: absent).
#[derive(Debug, Clone)]
pub(super) struct RowSeen {
    pub counts: CapacityRow,
    pub version: Option<StoreVersion>,
}

/// The shared rows the engine keeps cached with their versions.
#[derive(Debug, Default)]
pub(super) struct Cache {
    pub counters: HashMap<GenerationKind, CounterRow>,
    pub rows: HashMap<NodeKey, RowSeen>,
}

/// What the batches in flight hold.
#[derive(Debug, Default)]
pub(super) struct Locks {
    /// Shared rows written by batches in flight.
    pub shared: HashSet<Shared>,
    /// Own keys of the jobs in flight.
    pub keys: HashSet<StoreKey>,
}

impl Locks {
    pub(super) fn hold(&mut self, flight: &Flight) {
        self.shared.extend(flight.locks.iter().cloned());
        self.keys.extend(flight.lock_keys.iter().cloned());
    }

    pub(super) fn release(&mut self, locks: &[Shared], keys: &[StoreKey]) {
        for s in locks {
            self.shared.remove(s);
        }
        for k in keys {
            self.keys.remove(k);
        }
    }
}

/// Why a job could not be applied to the working rows.
pub(super) enum ApplyFail {
    /// Final, whatever the shared rows hold.
    Final(LocationError),
    /// Derived from the shared rows (possibly stale in the cache).
    Shared(Box<Result<JobResult, LocationError>>),
}

/// The working copies of the shared rows while a batch is formed. Each carries the version it
/// was read with, so [`assemble`] writes every move it holds under its own condition and never
/// looks a row up again (no move can be dropped for want of a cached row).
#[derive(Debug, Default)]
pub(super) struct Working {
    /// Each counter the batch moves: the row as read and its new stored value.
    pub next: HashMap<GenerationKind, (CounterRow, u64)>,
    /// Each allocation row the batch moves or may remove: the version it was read with and
    /// its new counts.
    pub rows: HashMap<NodeKey, (Option<StoreVersion>, CapacityRow)>,
    /// The rows a capacity move changes (the others in `rows` are only candidates for removal).
    pub moved: HashSet<NodeKey>,
    /// The rows a job asked to remove once empty ([`Plan::drop_empty`](super::plan::Plan)).
    pub drop_empty: HashSet<NodeKey>,
}

/// Applies one job to the working copies (which change only if the job fits).
pub(super) fn apply(
    job: &Job,
    cache: &Cache,
    book: &LeaseBook,
    working: &mut Working,
) -> Result<Built, ApplyFail> {
    let plan = job.op.plan();
    for need in &plan.leases {
        if !book.held_by(&need.key, &need.run) {
            return Err(ApplyFail::Shared(Box::new(Ok(JobResult::LeaseStale {
                role: need.role,
                run: need.run.clone(),
            }))));
        }
    }
    let mut issued = Issued::default();
    let mut my_next = HashMap::default();
    for kind in plan.counters() {
        let cached = cache
            .counters
            .get(&kind)
            .ok_or(ApplyFail::Final(LocationError::Contended))?;
        let row = CounterRow {
            kind,
            next: working.next.get(&kind).map_or(cached.next, |(_, n)| *n),
            version: cached.version.clone(),
        };
        let (value, after) = row
            .issue(1)
            .map_err(|e| ApplyFail::Shared(Box::new(Err(e))))?;
        my_next.insert(kind, (cached.clone(), after));
        match kind {
            GenerationKind::Object => issued.object = Some(value),
            GenerationKind::AuthorityOwner => issued.authority_owner = Some(value),
            // Plans issue only the two authority generations (see `Plan::counters`).
            _ => return Err(ApplyFail::Final(LocationError::Contended)),
        }
    }
    let mut my_rows: HashMap<NodeKey, (Option<StoreVersion>, CapacityRow)> = HashMap::default();
    for node in plan.rows() {
        if my_rows.contains_key(node) {
            continue;
        }
        let base = working
            .rows
            .get(node)
            .cloned()
            .or_else(|| {
                cache
                    .rows
                    .get(node)
                    .map(|r| (r.version.clone(), r.counts.clone()))
            })
            .ok_or(ApplyFail::Final(LocationError::Contended))?;
        my_rows.insert(node.clone(), base);
    }
    for mv in &plan.capacity {
        let (_, row) = my_rows
            .get_mut(&mv.node)
            .ok_or(ApplyFail::Final(LocationError::Contended))?;
        let moved = match &mv.kind {
            CapMoveKind::Reserve(limits) => row.add_within(&mv.bundle, limits),
            CapMoveKind::Release => row.remove(&mv.bundle),
        };
        moved.map_err(|e| ApplyFail::Shared(Box::new(Err(e))))?;
    }
    let built = job.op.build(&issued).map_err(ApplyFail::Final)?;
    working.next.extend(my_next);
    working.rows.extend(my_rows);
    working
        .moved
        .extend(plan.capacity.iter().map(|mv| mv.node.clone()));
    working.drop_empty.extend(plan.drop_empty.iter().cloned());
    Ok(built)
}

/// Why a batch could not be assembled (every job of it ends with this error).
#[derive(Debug, Clone)]
pub(super) enum AssembleError {
    /// Past a Store bound (key, value, batch size).
    Argument(ArgumentError),
    /// A runtime-private row could not be encoded.
    Encoding(RecordName),
}

impl AssembleError {
    pub(super) fn to_error(&self) -> LocationError {
        match self {
            AssembleError::Argument(e) => LocationError::Argument(e.clone()),
            AssembleError::Encoding(record) => {
                InvalidOperation::RowEncoding { record: *record }.into()
            }
        }
    }
}

/// A job accepted into a batch, with its mutations.
pub(super) struct Accepted {
    pub job: Job,
    pub built: Built,
}

/// A counter a batch moves: its new stored value and the index of its put.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CounterMove {
    pub kind: GenerationKind,
    pub next: u64,
    pub put: usize,
}

/// An allocation row a batch writes: its new counts and the index of its put (`None`: the
/// batch deletes the row, which is empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RowMove {
    pub node: NodeKey,
    pub counts: CapacityRow,
    pub put: Option<usize>,
}

/// One batch as sent: what is needed to handle its result.
pub(super) struct Flight {
    pub accepted: Vec<Accepted>,
    /// For each accepted job (same order), the put indexes of its own puts.
    pub job_puts: Vec<Range<usize>>,
    pub counters: Vec<CounterMove>,
    pub rows: Vec<RowMove>,
    /// Everything it locked.
    pub locks: Vec<Shared>,
    pub lock_keys: Vec<StoreKey>,
    /// The data losses the host had noticed when the batch was formed from its cached rows
    /// ([`StoreEpoch::losses`](crate::epoch::StoreEpoch::losses), set by the worker): rows
    /// it computed are cached after it applies only if no loss was noticed since.
    pub losses: u64,
}

/// Counts puts as mutations are appended, so every put's index is recorded where it is made.
#[derive(Default)]
struct Mutations {
    list: Vec<Mutation>,
    puts: usize,
}

impl Mutations {
    fn push(&mut self, m: Mutation) {
        if matches!(m, Mutation::Put { .. }) {
            self.puts += 1;
        }
        self.list.push(m);
    }

    /// Appends one put and returns its index.
    fn put(&mut self, m: Mutation) -> usize {
        let at = self.puts;
        self.push(m);
        at
    }
}

/// Assembles one conditional batch: every job's own conditions and mutations and guards, one
/// version condition per lease, and each moved counter and allocation row under its expected
/// version — an empty row a job asked to remove is deleted under it instead, and a row that is
/// only such a candidate and not empty (or already absent) is not written. Returns the
/// accepted jobs back if the batch passes the Store's bounds.
pub(super) fn assemble(
    accepted: Vec<Accepted>,
    working: Working,
    book: &LeaseBook,
) -> Result<(WriteRequest, Flight), (AssembleError, Vec<Accepted>)> {
    let mut conditions = Vec::new();
    let mut mutations = Mutations::default();
    let mut condition_keys: HashSet<StoreKey> = HashSet::default();
    let mut lock_keys = Vec::new();
    let mut job_puts = Vec::with_capacity(accepted.len());
    for a in &accepted {
        let plan = a.job.op.plan();
        for (key, expect) in &plan.own {
            if let Some(e) = expect {
                conditions.push(e.condition(key));
            }
            lock_keys.push(key.clone());
        }
        for (key, expect) in &plan.guards {
            if condition_keys.insert(key.clone()) {
                conditions.push(expect.condition(key));
            }
        }
        for need in &plan.leases {
            if condition_keys.insert(need.key.clone()) {
                if let Some(v) = book.version(&need.key) {
                    conditions.push(Condition::Version(need.key.clone(), v));
                }
            }
        }
        let start = mutations.puts;
        for m in &a.built.mutations {
            mutations.push(m.clone());
        }
        job_puts.push(start..mutations.puts);
    }
    let mut next: Vec<(GenerationKind, (CounterRow, u64))> = working.next.into_iter().collect();
    next.sort_by_key(|(kind, _)| *kind);
    let mut counters = Vec::with_capacity(next.len());
    for (kind, (row, n)) in next {
        conditions.push(row.condition());
        let put = mutations.put(row.put(n));
        counters.push(CounterMove { kind, next: n, put });
    }
    let mut moved: Vec<(NodeKey, (Option<StoreVersion>, CapacityRow))> =
        working.rows.into_iter().collect();
    moved.sort_by(|a, b| a.0.cmp(&b.0));
    let mut rows = Vec::with_capacity(moved.len());
    for (node, (version, counts)) in moved {
        let remove = working.drop_empty.contains(&node) && counts.is_empty();
        if (remove && version.is_none()) || (!remove && !working.moved.contains(&node)) {
            // Already absent and left empty, or only a removal candidate that still counts
            // slots: nothing to write.
            continue;
        }
        let key = match keys::node_capacity(&node) {
            Ok(k) => k,
            Err(e) => return Err((AssembleError::Argument(e), accepted)),
        };
        if let (true, Some(v)) = (remove, &version) {
            conditions.push(Condition::Version(key.clone(), v.clone()));
            mutations.push(Mutation::Delete(key));
            rows.push(RowMove {
                node,
                counts,
                put: None,
            });
            continue;
        }
        let bytes = match counts.encode() {
            Ok(b) => b,
            Err(_) => {
                return Err((AssembleError::Encoding(RecordName::NodeCapacity), accepted));
            }
        };
        conditions.push(match version {
            Some(v) => Condition::Version(key.clone(), v),
            None => Condition::Missing(key.clone()),
        });
        let put = mutations.put(Mutation::put(key, bytes));
        rows.push(RowMove {
            node,
            counts,
            put: Some(put),
        });
    }
    let request = match WriteRequest::new(conditions, mutations.list) {
        Ok(r) => r,
        Err(e) => return Err((AssembleError::Argument(e), accepted)),
    };
    let mut locks: Vec<Shared> = counters.iter().map(|c| Shared::Counter(c.kind)).collect();
    locks.extend(rows.iter().map(|r| Shared::Row(r.node.clone())));
    Ok((
        request,
        Flight {
            accepted,
            job_puts,
            counters,
            rows,
            locks,
            lock_keys,
            losses: 0,
        },
    ))
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
