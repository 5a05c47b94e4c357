//! The authority write engine: every authority operation of one host runs here as one *job*;
//! jobs waiting at the same time are coalesced into conditional batches, and batches that touch
//! disjoint rows are in flight at the same time.
//!
//! A job declares a [`Plan`]: its own keys with what it expects of them (`Missing` or a
//! version), which generations it needs issued, which capacity it moves and how, which owner
//! leases must be held by which host run, and the admission it needs. The engine keeps the
//! shared rows (the generation counters, the nodes' allocation rows, lease versions) cached with their versions and, for each batch:
//!
//! 1. refuses jobs the admission gate refuses;
//! 2. applies each job in order to working copies of the shared rows: lease holders must match,
//!    generations are issued as one block per counter (each job gets its own value; a job
//!    finding the counter exhausted fails with `GenerationExhausted` and takes no value),
//!    capacity moves must fit the limits (`CapacityExceeded` otherwise);
//! 3. writes *one* conditional batch: every job's own conditions and mutations, plus each
//!    touched counter and allocation row with its expected version and new value, and a version
//!    condition on each lease. So each counter move and capacity move rides in the batch of the
//!    records it gates.
//!
//! **Pipelining.** A batch locks the rows it writes (its jobs' own keys, the counters and
//! allocation rows it moves) until its result is handled; other batches can be formed and sent
//! meanwhile from jobs whose rows are all unlocked (at most [`EngineConfig::max_in_flight`]
//! batches). A Reserve moves the counters and the target's allocation row; a Commit or a
//! Preserve moves no shared row at all, so they are never held up by a Reserve in flight.
//!
//! **Conflicts.** On `Conflict` nothing was applied: the engine re-reads the shared rows and
//! every job's own keys; a job whose own expectation no longer holds ends as a record conflict
//! (with what the keys hold now), the others are retried. A failure computed from cached rows
//! (an exhausted counter, a full or underflowing row, a lease holder) is final only once it
//! holds on freshly read rows. If the write's outcome is unknown (time-out, transport error),
//! the engine never guesses: it re-reads a job's witness key and compares it with the
//! first-read version and the bytes it wrote; the batch is all-or-nothing, so one decisive
//! witness settles every job.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use zlink_codec::records::AuthorityRecord;
use zlink_store_spi::{
    Condition, DynLocationStore, LocationStore, Mutation, ReadResult, StoreError, StoreKey,
    StoreResult, StoreVersion, WriteRequest, WriteResult,
};

use super::admission::{AdmissionGate, AdmissionOp};
use super::capacity::{CapacityBundle, CapacityLimits, CapacityRow};
use super::error::LocationError;
use super::generation::{CounterRow, GenerationKind};
use super::identity::{HostRun, NodeKey};
use super::keys;
use super::lease::{LeaseBook, LeaseSeen};
use super::placement::PlacementRng;

/// What a job expects of one of its own keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Expect {
    /// The key must not exist.
    Missing,
    /// The key must hold this version.
    Version(StoreVersion),
}

impl Expect {
    fn condition(&self, key: &StoreKey) -> Condition {
        match self {
            Expect::Missing => Condition::Missing(key.clone()),
            Expect::Version(v) => Condition::Version(key.clone(), v.clone()),
        }
    }

    fn holds(&self, read: &ReadResult) -> bool {
        match (self, read) {
            (Expect::Missing, ReadResult::Missing { .. }) => true,
            (Expect::Version(v), ReadResult::Found { version, .. }) => v == version,
            _ => false,
        }
    }
}

/// How a job moves one node's allocation row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CapMoveKind {
    /// Secure slots (allocated += bundle), within these limits.
    Reserve(CapacityLimits),
    /// Return secured slots, reserved or in use (allocated −= bundle).
    Release,
}

/// One capacity move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CapMove {
    pub(crate) node: NodeKey,
    pub(crate) kind: CapMoveKind,
    pub(crate) bundle: CapacityBundle,
}

/// A shared row a batch writes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Shared {
    Counter(GenerationKind),
    Row(NodeKey),
}

/// Whose lease a job needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseRole {
    /// The host running the operation.
    Own,
    /// The target host (the record's new owner).
    Target,
}

/// One lease a job needs held by a given host run (a `Version` condition in the batch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeaseNeed {
    pub(crate) key: StoreKey,
    pub(crate) run: HostRun,
    pub(crate) role: LeaseRole,
}

/// What a job needs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Plan {
    /// The job's own keys: each with its expectation (`None`: written without a condition).
    pub(crate) own: Vec<(StoreKey, Option<Expect>)>,
    /// Needs one ObjectGeneration.
    pub(crate) object_generation: bool,
    /// Needs one AuthorityOwnerGeneration.
    pub(crate) authority_owner_generation: bool,
    /// Capacity moves, applied in order.
    pub(crate) capacity: Vec<CapMove>,
    /// Leases that must be held.
    pub(crate) leases: Vec<LeaseNeed>,
    /// The admission the job needs, under which host run.
    pub(crate) admission: Option<(AdmissionOp, HostRun)>,
    /// Roughly how many bytes the job adds to a batch.
    pub(crate) size_hint: usize,
}

impl Plan {
    fn counters(&self) -> impl Iterator<Item = GenerationKind> + '_ {
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
    fn shared(&self) -> Vec<Shared> {
        let mut v: Vec<Shared> = self.counters().map(Shared::Counter).collect();
        v.extend(self.capacity.iter().map(|mv| Shared::Row(mv.node.clone())));
        v
    }
}

/// Generations issued to one job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Issued {
    pub(crate) object: Option<u64>,
    pub(crate) authority_owner: Option<u64>,
}

/// A job's own mutations, and the authority record it writes (if any).
#[derive(Debug)]
pub(crate) struct Built {
    pub(crate) mutations: Vec<Mutation>,
    pub(crate) record: Option<Box<AuthorityRecord>>,
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
    /// A lease the job needs is not held by the expected run: nothing changed.
    LeaseStale { role: LeaseRole, run: HostRun },
}

type Reply = oneshot::Sender<Result<JobResult, LocationError>>;

struct Job {
    op: Box<dyn EngineOp>,
    /// The shared rows the job writes (from its plan, computed once).
    shared: Vec<Shared>,
    reply: Reply,
    rounds: u32,
    /// Whether the shared rows this job depends on were re-read after a failure derived from
    /// them: such a failure is final only once it holds on freshly read rows.
    refreshed: bool,
}

impl Job {
    fn finish(self, result: Result<JobResult, LocationError>) {
        // The caller may have gone away; the job's outcome is in the Store either way.
        let _ = self.reply.send(result);
    }
}

/// Why a job could not be applied to the working rows.
enum ApplyFail {
    /// Final, whatever the shared rows hold.
    Final(LocationError),
    /// Derived from the shared rows (possibly stale in the cache).
    Shared(Box<Result<JobResult, LocationError>>),
}

/// Tuning of the engine.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EngineConfig {
    /// The most jobs in one batch.
    pub(crate) max_jobs: usize,
    /// The most (approximate) bytes in one batch.
    pub(crate) max_bytes: usize,
    /// How many conflicting rounds a job may go through before `Contended`.
    pub(crate) max_rounds: u32,
    /// The most batches in flight at once.
    pub(crate) max_in_flight: usize,
    /// The fewest jobs a batch needs to go out while another batch is in flight: extra
    /// batches only pay off when they are large (each batch has a fixed cost in the Store).
    pub(crate) min_extra_jobs: usize,
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

/// The handle to a running engine (one worker task per host).
#[derive(Debug, Clone)]
pub(crate) struct Engine {
    tx: mpsc::UnboundedSender<Job>,
}

impl Engine {
    /// Starts the worker on the current tokio runtime.
    pub(crate) fn start(
        store: Arc<dyn DynLocationStore>,
        gate: Arc<AdmissionGate>,
        book: Arc<LeaseBook>,
        config: EngineConfig,
    ) -> Result<Self, LocationError> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| {
            LocationError::InvalidOperation("the location runtime needs a tokio runtime".into())
        })?;
        let (tx, rx) = mpsc::unbounded_channel();
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let worker = Worker {
            store,
            gate,
            book,
            config,
            counters: HashMap::new(),
            rows: HashMap::new(),
            pending: VecDeque::new(),
            locked: HashSet::new(),
            locked_keys: HashSet::new(),
            in_flight: 0,
            done_tx,
            rng: PlacementRng::new(),
        };
        handle.spawn(worker.run(rx, done_rx));
        Ok(Engine { tx })
    }

    /// Runs one operation.
    pub(crate) async fn submit(&self, op: Box<dyn EngineOp>) -> Result<JobResult, LocationError> {
        let (reply, rx) = oneshot::channel();
        let shared = op.plan().shared();
        self.tx
            .send(Job {
                op,
                shared,
                reply,
                rounds: 0,
                refreshed: false,
            })
            .map_err(|_| LocationError::Stopped)?;
        rx.await.map_err(|_| LocationError::Stopped)?
    }
}

#[derive(Debug, Clone)]
struct RowSeen {
    counts: CapacityRow,
    version: Option<StoreVersion>,
}

struct Accepted {
    job: Job,
    built: Built,
    puts: usize,
}

/// One batch, sent: what is needed to handle its result.
struct Flight {
    accepted: Vec<Accepted>,
    /// The counters it moves, with their new stored values, in put order.
    counters: Vec<(GenerationKind, u64)>,
    /// The count rows it moves, with their new values, in put order.
    rows: Vec<(NodeKey, CapacityRow)>,
    /// Everything it locked.
    locks: Vec<Shared>,
    lock_keys: Vec<StoreKey>,
}

struct Done {
    flight: Flight,
    result: StoreResult<WriteResult>,
}

struct Worker {
    store: Arc<dyn DynLocationStore>,
    gate: Arc<AdmissionGate>,
    book: Arc<LeaseBook>,
    config: EngineConfig,
    counters: HashMap<GenerationKind, CounterRow>,
    rows: HashMap<NodeKey, RowSeen>,
    pending: VecDeque<Job>,
    /// Shared rows written by batches in flight.
    locked: HashSet<Shared>,
    /// Own keys of the jobs in flight.
    locked_keys: HashSet<StoreKey>,
    in_flight: usize,
    done_tx: mpsc::UnboundedSender<Done>,
    rng: PlacementRng,
}

/// Rebuilds a Store error for one of several jobs (the original carries a source that cannot
/// be cloned; its kind and meaning are kept).
fn store_error_like(e: &StoreError) -> StoreError {
    match e {
        StoreError::InvalidArgument(a) => StoreError::InvalidArgument(a.clone()),
        StoreError::Failure { kind, .. } => StoreError::failure_kind(*kind),
        StoreError::TimedOut => StoreError::TimedOut,
        _ => StoreError::Cancelled,
    }
}

/// Reads one count row (default when absent).
pub(crate) async fn read_counts(
    store: &dyn DynLocationStore,
    key: &StoreKey,
) -> Result<(CapacityRow, Option<StoreVersion>), LocationError> {
    match store.read(key).await? {
        ReadResult::Missing { .. } => Ok((CapacityRow::default(), None)),
        ReadResult::Found { bytes, version, .. } => {
            Ok((CapacityRow::decode(&bytes)?, Some(version)))
        }
    }
}

enum Witness {
    Applied,
    NotApplied,
    Unknown,
}

impl Worker {
    async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Job>,
        mut done_rx: mpsc::UnboundedReceiver<Done>,
    ) {
        let mut open = true;
        loop {
            if !open && self.pending.is_empty() && self.in_flight == 0 {
                return;
            }
            tokio::select! {
                biased;
                Some(done) = done_rx.recv(), if self.in_flight > 0 => {
                    self.in_flight -= 1;
                    let retry = self.on_done(done).await;
                    for job in retry.into_iter().rev() {
                        self.pending.push_front(job);
                    }
                }
                job = rx.recv(), if open && self.pending.is_empty() => match job {
                    Some(job) => self.pending.push_back(job),
                    None => open = false,
                },
                // Jobs are pending but blocked by rows in flight: wait for a batch to finish.
                else => {}
            }
            while let Ok(job) = rx.try_recv() {
                self.pending.push_back(job);
            }
            while self.in_flight < self.config.max_in_flight {
                let min = if self.in_flight == 0 {
                    1
                } else {
                    self.config.min_extra_jobs
                };
                let batch = self.take_batch(min);
                if batch.is_empty() {
                    break;
                }
                let retry = self.launch(batch).await;
                for job in retry.into_iter().rev() {
                    self.pending.push_front(job);
                }
            }
        }
    }

    /// Takes pending jobs, in order, whose rows are not locked by a batch in flight, whose own
    /// keys are disjoint, and whose size fits one batch; the rest stay pending, in order. A job
    /// left behind blocks later jobs on the same own keys, so jobs on one key keep their order.
    fn take_batch(&mut self, min: usize) -> Vec<Job> {
        let mut batch = Vec::new();
        let mut keys: HashSet<StoreKey> = HashSet::new();
        let mut blocked: HashSet<StoreKey> = HashSet::new();
        let mut bytes = 0usize;
        let mut rest = VecDeque::with_capacity(self.pending.len());
        while let Some(job) = self.pending.pop_front() {
            let plan = job.op.plan();
            let own_busy = plan.own.iter().any(|(k, _)| {
                keys.contains(k) || blocked.contains(k) || self.locked_keys.contains(k)
            });
            let shared_busy = job.shared.iter().any(|s| self.locked.contains(s));
            let too_big = !batch.is_empty() && bytes + plan.size_hint > self.config.max_bytes;
            if own_busy || shared_busy || too_big || batch.len() >= self.config.max_jobs {
                blocked.extend(plan.own.iter().map(|(k, _)| k.clone()));
                rest.push_back(job);
                continue;
            }
            keys.extend(plan.own.iter().map(|(k, _)| k.clone()));
            bytes += plan.size_hint;
            batch.push(job);
        }
        if batch.len() < min {
            // Too small to be worth a batch of its own while another one is in flight: put it
            // back in front. A job left in `rest` blocked every later job on its keys, so no
            // job on one key overtakes another.
            let mut merged: VecDeque<Job> = batch.into();
            merged.extend(rest);
            self.pending = merged;
            return Vec::new();
        }
        self.pending = rest;
        batch
    }

    async fn load_shared(&mut self, batch: &[Job]) -> Result<(), LocationError> {
        for job in batch {
            let plan = job.op.plan();
            for kind in plan.counters() {
                if !self.counters.contains_key(&kind) {
                    let read = self.store.read(&kind.counter_key()).await?;
                    let row = CounterRow::from_read(kind, &read)?;
                    self.counters.insert(kind, row);
                }
            }
            for mv in &plan.capacity {
                if !self.rows.contains_key(&mv.node) {
                    let seen = self.read_row(&mv.node).await?;
                    self.rows.insert(mv.node.clone(), seen);
                }
            }
            for need in &plan.leases {
                if !self.book.knows(&need.key) {
                    let read = self.store.read(&need.key).await?;
                    self.book.set(need.key.clone(), LeaseSeen::from_read(&read));
                }
            }
        }
        Ok(())
    }

    async fn read_row(&self, node: &NodeKey) -> Result<RowSeen, LocationError> {
        let (counts, version) =
            read_counts(self.store.as_ref(), &keys::node_capacity(node)?).await?;
        Ok(RowSeen { counts, version })
    }

    /// Forms and sends one batch from `batch`; returns the jobs to retry.
    async fn launch(&mut self, batch: Vec<Job>) -> Vec<Job> {
        // 1. Admission.
        let mut admitted = Vec::with_capacity(batch.len());
        for job in batch {
            let refused = job
                .op
                .plan()
                .admission
                .as_ref()
                .and_then(|(op, run)| self.gate.admit_for(*op, run).err());
            match refused {
                Some(r) => job.finish(Err(r.into())),
                None => admitted.push(job),
            }
        }
        if admitted.is_empty() {
            return Vec::new();
        }
        // 2. The shared rows, from the cache or the Store.
        if let Err(e) = self.load_shared(&admitted).await {
            for job in admitted {
                job.finish(Err(match &e {
                    LocationError::Store(s) => LocationError::Store(store_error_like(s)),
                    _ => LocationError::CorruptRecord { what: "shared row" },
                }));
            }
            return Vec::new();
        }
        // 3. Apply each job to working copies.
        let mut next: HashMap<GenerationKind, u64> = HashMap::new();
        let mut rows: HashMap<NodeKey, CapacityRow> = HashMap::new();
        let mut accepted: Vec<Accepted> = Vec::new();
        let mut recheck: Vec<Job> = Vec::new();
        let mut suspects: Vec<(Job, Result<JobResult, LocationError>)> = Vec::new();
        for job in admitted {
            match self.apply(&job, &mut next, &mut rows) {
                Ok(built) => {
                    let puts = built
                        .mutations
                        .iter()
                        .filter(|m| matches!(m, Mutation::Put { .. }))
                        .count();
                    accepted.push(Accepted { job, built, puts });
                }
                Err(ApplyFail::Final(e)) => job.finish(Err(e)),
                Err(ApplyFail::Shared(outcome)) if job.refreshed => {
                    suspects.push((job, *outcome));
                }
                Err(ApplyFail::Shared(_)) => recheck.push(job),
            }
        }
        for (job, outcome) in suspects {
            self.settle_suspect(job, outcome).await;
        }
        // Failures computed from cached rows are tried once more on freshly read rows (rows
        // locked by a batch in flight are refreshed when that batch's result is handled).
        let mut retry = Vec::new();
        for mut job in recheck {
            self.invalidate(job.op.plan());
            job.refreshed = true;
            retry.push(job);
        }
        if accepted.is_empty() {
            return retry;
        }
        // 4. One conditional batch.
        let (request, flight) = match self.assemble(accepted, next, rows) {
            Ok(r) => r,
            Err((e, accepted)) => {
                for a in accepted {
                    a.job.finish(Err(LocationError::Argument(e.clone())));
                }
                return retry;
            }
        };
        // 5. Send it; the result comes back through `done_tx`.
        for s in &flight.locks {
            self.locked.insert(s.clone());
        }
        for k in &flight.lock_keys {
            self.locked_keys.insert(k.clone());
        }
        self.in_flight += 1;
        let store = self.store.clone();
        let done_tx = self.done_tx.clone();
        tokio::spawn(async move {
            let result = store.write(&request).await;
            // The worker outlives every batch it sent; if it is gone, nobody waits.
            let _ = done_tx.send(Done { flight, result });
        });
        retry
    }

    /// Forgets the cached shared rows a plan depends on (not those locked by a batch in
    /// flight: they are refreshed when its result is handled).
    fn invalidate(&mut self, plan: &Plan) {
        for kind in plan.counters() {
            if !self.locked.contains(&Shared::Counter(kind)) {
                self.counters.remove(&kind);
            }
        }
        for mv in &plan.capacity {
            if !self.locked.contains(&Shared::Row(mv.node.clone())) {
                self.rows.remove(&mv.node);
            }
        }
        for need in &plan.leases {
            self.book.forget(&need.key);
        }
    }

    /// A failure that holds on freshly read rows: if the job's own rows changed, it is a
    /// record conflict (its capacity moves were computed from a stale record); otherwise the
    /// failure stands.
    async fn settle_suspect(&self, job: Job, outcome: Result<JobResult, LocationError>) {
        let plan = job.op.plan();
        let mut reads = Vec::with_capacity(plan.own.len());
        let mut broken = false;
        for (key, expect) in &plan.own {
            match self.store.read(key).await {
                Ok(read) => {
                    broken |= expect.as_ref().is_some_and(|e| !e.holds(&read));
                    reads.push((key.clone(), read));
                }
                Err(e) => {
                    job.finish(Err(e.into()));
                    return;
                }
            }
        }
        if broken {
            job.finish(Ok(JobResult::RecordConflict { reads }));
        } else {
            job.finish(outcome);
        }
    }

    /// Applies one job to the working copies (which change only if the job fits).
    fn apply(
        &self,
        job: &Job,
        next: &mut HashMap<GenerationKind, u64>,
        rows: &mut HashMap<NodeKey, CapacityRow>,
    ) -> Result<Built, ApplyFail> {
        let plan = job.op.plan();
        for need in &plan.leases {
            if !self.book.held_by(&need.key, &need.run) {
                return Err(ApplyFail::Shared(Box::new(Ok(JobResult::LeaseStale {
                    role: need.role,
                    run: need.run.clone(),
                }))));
            }
        }
        let mut issued = Issued::default();
        let mut my_next = HashMap::new();
        for kind in plan.counters() {
            let cached = self
                .counters
                .get(&kind)
                .ok_or(ApplyFail::Final(LocationError::Contended))?;
            let row = CounterRow {
                kind,
                next: next.get(&kind).copied().unwrap_or(cached.next),
                version: cached.version.clone(),
            };
            let (value, after) = row
                .issue(1)
                .map_err(|e| ApplyFail::Shared(Box::new(Err(e))))?;
            my_next.insert(kind, after);
            match kind {
                GenerationKind::Object => issued.object = Some(value),
                _ => issued.authority_owner = Some(value),
            }
        }
        let mut my_rows: HashMap<NodeKey, CapacityRow> = HashMap::new();
        for mv in &plan.capacity {
            if !my_rows.contains_key(&mv.node) {
                let base = rows
                    .get(&mv.node)
                    .cloned()
                    .or_else(|| self.rows.get(&mv.node).map(|r| r.counts.clone()))
                    .ok_or(ApplyFail::Final(LocationError::Contended))?;
                my_rows.insert(mv.node.clone(), base);
            }
            let Some(row) = my_rows.get_mut(&mv.node) else {
                return Err(ApplyFail::Final(LocationError::Contended));
            };
            let moved = match &mv.kind {
                CapMoveKind::Reserve(limits) => row.add_within(&mv.bundle, limits),
                CapMoveKind::Release => row.remove(&mv.bundle),
            };
            moved.map_err(|e| ApplyFail::Shared(Box::new(Err(e))))?;
        }
        let built = job.op.build(&issued).map_err(ApplyFail::Final)?;
        next.extend(my_next);
        rows.extend(my_rows);
        Ok(built)
    }

    #[allow(clippy::type_complexity)]
    fn assemble(
        &self,
        accepted: Vec<Accepted>,
        next: HashMap<GenerationKind, u64>,
        rows: HashMap<NodeKey, CapacityRow>,
    ) -> Result<(WriteRequest, Flight), (zlink_store_spi::ArgumentError, Vec<Accepted>)> {
        let mut conditions = Vec::new();
        let mut mutations = Vec::new();
        let mut lease_keys: HashSet<StoreKey> = HashSet::new();
        let mut lock_keys = Vec::new();
        for a in &accepted {
            let plan = a.job.op.plan();
            for (key, expect) in &plan.own {
                if let Some(e) = expect {
                    conditions.push(e.condition(key));
                }
                lock_keys.push(key.clone());
            }
            for need in &plan.leases {
                if lease_keys.insert(need.key.clone()) {
                    if let Some(v) = self.book.version(&need.key) {
                        conditions.push(Condition::Version(need.key.clone(), v));
                    }
                }
            }
            mutations.extend(a.built.mutations.iter().cloned());
        }
        let mut counters: Vec<(GenerationKind, u64)> = next.into_iter().collect();
        counters.sort();
        for (kind, n) in &counters {
            if let Some(row) = self.counters.get(kind) {
                conditions.push(row.condition());
                mutations.push(row.put(*n));
            }
        }
        let mut moved: Vec<(NodeKey, CapacityRow)> = rows.into_iter().collect();
        moved.sort_by(|a, b| a.0.cmp(&b.0));
        for (node, counts) in &moved {
            let Ok(key) = keys::node_capacity(node) else {
                continue;
            };
            conditions.push(match self.rows.get(node).and_then(|r| r.version.clone()) {
                Some(v) => Condition::Version(key.clone(), v),
                None => Condition::Missing(key.clone()),
            });
            mutations.push(Mutation::put(key, counts.encode()));
        }
        let request = match WriteRequest::new(conditions, mutations) {
            Ok(r) => r,
            Err(e) => return Err((e, accepted)),
        };
        let mut locks: Vec<Shared> = counters.iter().map(|(k, _)| Shared::Counter(*k)).collect();
        locks.extend(moved.iter().map(|(n, _)| Shared::Row(n.clone())));
        Ok((
            request,
            Flight {
                accepted,
                counters,
                rows: moved,
                locks,
                lock_keys,
            },
        ))
    }

    async fn on_done(&mut self, done: Done) -> Vec<Job> {
        let Done { flight, result } = done;
        let Flight {
            accepted,
            counters,
            rows,
            locks,
            lock_keys,
        } = flight;
        let retry = match result {
            Ok(WriteResult::Applied { put_versions, .. }) => {
                self.on_applied(accepted, &counters, &rows, put_versions);
                Vec::new()
            }
            Ok(WriteResult::Conflict { .. }) => {
                self.refresh_shared(&accepted, &counters, &rows).await;
                self.on_conflict(accepted).await
            }
            Err(e) => self.on_unknown(accepted, &counters, &rows, e).await,
        };
        for s in &locks {
            self.locked.remove(s);
        }
        for k in &lock_keys {
            self.locked_keys.remove(k);
        }
        retry
    }

    /// Updates the cached shared rows from an applied batch and answers its jobs.
    fn on_applied(
        &mut self,
        accepted: Vec<Accepted>,
        counters: &[(GenerationKind, u64)],
        rows: &[(NodeKey, CapacityRow)],
        put_versions: Vec<StoreVersion>,
    ) {
        let mut versions = put_versions.into_iter();
        let mut per_job = Vec::with_capacity(accepted.len());
        for a in accepted {
            let mine: Vec<StoreVersion> = versions.by_ref().take(a.puts).collect();
            per_job.push((a, mine));
        }
        for (kind, n) in counters {
            let version = versions.next();
            self.counters.insert(
                *kind,
                CounterRow {
                    kind: *kind,
                    next: *n,
                    version,
                },
            );
        }
        for (id, counts) in rows {
            let version = versions.next();
            self.rows.insert(
                id.clone(),
                RowSeen {
                    counts: counts.clone(),
                    version,
                },
            );
        }
        for (a, mine) in per_job {
            a.job.finish(Ok(JobResult::Applied {
                put_versions: mine,
                built: a.built,
            }));
        }
    }

    /// Re-reads every shared row a batch touched (dropping what cannot be read).
    async fn refresh_shared(
        &mut self,
        accepted: &[Accepted],
        counters: &[(GenerationKind, u64)],
        rows: &[(NodeKey, CapacityRow)],
    ) {
        for (kind, _) in counters {
            self.counters.remove(kind);
            if let Ok(read) = self.store.read(&kind.counter_key()).await {
                if let Ok(row) = CounterRow::from_read(*kind, &read) {
                    self.counters.insert(*kind, row);
                }
            }
        }
        for (node, _) in rows {
            self.rows.remove(node);
            if let Ok(seen) = self.read_row(node).await {
                self.rows.insert(node.clone(), seen);
            }
        }
        let mut seen_keys = HashSet::new();
        for a in accepted {
            for need in &a.job.op.plan().leases {
                if seen_keys.insert(need.key.clone()) {
                    match self.store.read(&need.key).await {
                        Ok(read) => self.book.set(need.key.clone(), LeaseSeen::from_read(&read)),
                        Err(_) => self.book.forget(&need.key),
                    }
                }
            }
        }
    }

    async fn on_conflict(&mut self, accepted: Vec<Accepted>) -> Vec<Job> {
        let mut retry = Vec::new();
        let mut max_round = 0;
        for a in accepted {
            let plan = a.job.op.plan();
            let mut reads = Vec::with_capacity(plan.own.len());
            let mut broken = false;
            let mut failed = None;
            for (key, expect) in &plan.own {
                match self.store.read(key).await {
                    Ok(read) => {
                        broken |= expect.as_ref().is_some_and(|e| !e.holds(&read));
                        reads.push((key.clone(), read));
                    }
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            let mut job = a.job;
            if let Some(e) = failed {
                job.finish(Err(e.into()));
            } else if broken {
                job.finish(Ok(JobResult::RecordConflict { reads }));
            } else {
                job.rounds += 1;
                if job.rounds >= self.config.max_rounds {
                    job.finish(Err(LocationError::Contended));
                } else {
                    max_round = max_round.max(job.rounds);
                    retry.push(job);
                }
            }
        }
        if max_round > 1 {
            // Repeated conflicts: another host keeps winning the same rows. Back off a little,
            // more each time, so contending hosts spread out.
            let spread = 100 * u64::from(max_round.min(20));
            let pause = self.rng.below(spread);
            tokio::time::sleep(Duration::from_micros(pause)).await;
        }
        retry
    }

    /// The write's outcome is unknown: settle it with the jobs' witness keys.
    async fn on_unknown(
        &mut self,
        accepted: Vec<Accepted>,
        counters: &[(GenerationKind, u64)],
        rows: &[(NodeKey, CapacityRow)],
        error: StoreError,
    ) -> Vec<Job> {
        if !error.outcome_unknown() {
            for a in accepted {
                a.job.finish(Err(store_error_like(&error).into()));
            }
            return Vec::new();
        }
        let mut verdict = Witness::Unknown;
        for a in &accepted {
            match self.witness(a).await {
                Witness::Unknown => continue,
                decided => {
                    verdict = decided;
                    break;
                }
            }
        }
        // Whatever happened, the cached shared rows may be stale now.
        self.refresh_shared(&accepted, counters, rows).await;
        match verdict {
            Witness::NotApplied => {
                let mut retry = Vec::new();
                for a in accepted {
                    let mut job = a.job;
                    job.rounds += 1;
                    if job.rounds >= self.config.max_rounds {
                        job.finish(Err(store_error_like(&error).into()));
                    } else {
                        retry.push(job);
                    }
                }
                retry
            }
            Witness::Applied => {
                for a in accepted {
                    let mut versions = Vec::with_capacity(a.puts);
                    let mut lost = false;
                    for m in &a.built.mutations {
                        if let Mutation::Put { key, bytes, .. } = m {
                            match self.store.read(key).await {
                                Ok(ReadResult::Found {
                                    bytes: now,
                                    version,
                                    ..
                                }) if now == *bytes => versions.push(version),
                                _ => lost = true,
                            }
                        }
                    }
                    if lost {
                        a.job.finish(Err(store_error_like(&error).into()));
                    } else {
                        a.job.finish(Ok(JobResult::Applied {
                            put_versions: versions,
                            built: a.built,
                        }));
                    }
                }
                Vec::new()
            }
            Witness::Unknown => {
                for a in accepted {
                    a.job.finish(Err(store_error_like(&error).into()));
                }
                Vec::new()
            }
        }
    }

    async fn witness(&self, a: &Accepted) -> Witness {
        let plan = a.job.op.plan();
        for m in &a.built.mutations {
            let key = m.key();
            let Some(expect) = plan
                .own
                .iter()
                .find(|(k, _)| k == key)
                .and_then(|(_, e)| e.clone())
            else {
                continue;
            };
            let Ok(read) = self.store.read(key).await else {
                return Witness::Unknown;
            };
            if expect.holds(&read) {
                return Witness::NotApplied;
            }
            return match (m, &read) {
                (Mutation::Put { bytes, .. }, ReadResult::Found { bytes: now, .. })
                    if now == bytes =>
                {
                    Witness::Applied
                }
                _ => Witness::Unknown,
            };
        }
        Witness::Unknown
    }
}
