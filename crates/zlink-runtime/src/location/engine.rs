//! The authority write engine: every authority operation of one host runs here as one *job*,
//! and jobs waiting at the same time are coalesced into one conditional batch.
//!
//! A job declares a [`Plan`]: its own keys with what it expects of them (`Missing` or a
//! version), which generations it needs issued, which capacity rows it moves and how, which
//! owner leases must be held by which host run, and the admission it needs. The engine keeps
//! the shared rows (the three generation counters, node capacity rows, lease versions) cached
//! with their versions and, for a batch:
//!
//! 1. refuses jobs the admission gate refuses;
//! 2. applies each job in order to working copies of the shared rows: lease holders must match,
//!    generations are issued as one block per counter (each job gets its own value; a job
//!    finding the counter exhausted fails with `GenerationExhausted` and takes no value),
//!    capacity moves must fit the limits (`CapacityExceeded` otherwise);
//! 3. writes *one* conditional batch: every job's own conditions and mutations, plus each
//!    touched counter, capacity row and lease with its expected version and new value. So each
//!    counter move and capacity move rides in the batch of the records it gates.
//!
//! On `Conflict` nothing was applied: the engine re-reads the shared rows and every job's own
//! keys; a job whose own expectation no longer holds ends as a record conflict (with what the
//! keys hold now), the others are retried. If the write's outcome is unknown (time-out,
//! transport error), the engine never guesses: it re-reads a job's witness key and compares it
//! with the first-read version and the bytes it wrote; the batch is all-or-nothing, so one
//! decisive witness settles every job.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use zlink_codec::records::AuthorityRecord;
use zlink_store_spi::{
    Condition, DynLocationStore, LocationStore, Mutation, ReadResult, StoreError, StoreKey,
    StoreVersion, WriteRequest, WriteResult,
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

/// How a job moves one node's capacity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CapMoveKind {
    /// Secure slots as reserved, within these limits.
    Reserve(CapacityLimits),
    /// Return reserved slots.
    Unreserve,
    /// Reserved → in use.
    Activate,
    /// Return slots in use.
    ReleaseActive,
}

/// One capacity move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CapMove {
    pub(crate) node: NodeKey,
    pub(crate) kind: CapMoveKind,
    pub(crate) bundle: CapacityBundle,
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
    reply: Reply,
    rounds: u32,
    /// Whether the shared rows this job depends on were re-read after a failure derived from
    /// them (an exhausted counter, a full or underflowing capacity row, a lease holder): such
    /// a failure is final only once it holds on freshly read rows.
    refreshed: bool,
}

/// Why a job could not be applied to the working rows.
enum ApplyFail {
    /// Final, whatever the shared rows hold.
    Final(LocationError),
    /// Derived from the shared rows (possibly stale in the cache).
    Shared(Box<Result<JobResult, LocationError>>),
}

impl Job {
    fn finish(self, result: Result<JobResult, LocationError>) {
        // The caller may have gone away; the job's outcome is in the Store either way.
        let _ = self.reply.send(result);
    }
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
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_jobs: 128,
            max_bytes: 3 * 1024 * 1024,
            max_rounds: 2_000,
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
        let worker = Worker {
            store,
            gate,
            book,
            config,
            counters: HashMap::new(),
            caps: HashMap::new(),
            pending: VecDeque::new(),
            rng: PlacementRng::new(),
        };
        handle.spawn(worker.run(rx));
        Ok(Engine { tx })
    }

    /// Runs one operation.
    pub(crate) async fn submit(&self, op: Box<dyn EngineOp>) -> Result<JobResult, LocationError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job {
                op,
                reply,
                rounds: 0,
                refreshed: false,
            })
            .map_err(|_| LocationError::Stopped)?;
        rx.await.map_err(|_| LocationError::Stopped)?
    }
}

#[derive(Debug, Clone)]
struct CapSeen {
    row: CapacityRow,
    version: Option<StoreVersion>,
}

struct Accepted {
    job: Job,
    built: Built,
    puts: usize,
}

struct Worker {
    store: Arc<dyn DynLocationStore>,
    gate: Arc<AdmissionGate>,
    book: Arc<LeaseBook>,
    config: EngineConfig,
    counters: HashMap<GenerationKind, CounterRow>,
    caps: HashMap<NodeKey, CapSeen>,
    pending: VecDeque<Job>,
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

enum Witness {
    Applied,
    NotApplied,
    Unknown,
}

impl Worker {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Job>) {
        loop {
            if self.pending.is_empty() {
                match rx.recv().await {
                    Some(job) => self.pending.push_back(job),
                    None => return,
                }
            }
            while let Ok(job) = rx.try_recv() {
                self.pending.push_back(job);
            }
            let batch = self.take_batch();
            let retry = self.run_batch(batch).await;
            for job in retry.into_iter().rev() {
                self.pending.push_front(job);
            }
        }
    }

    /// Takes the longest prefix-preserving set of pending jobs whose own keys are disjoint and
    /// whose size fits one batch; the rest stay pending, in order.
    fn take_batch(&mut self) -> Vec<Job> {
        let mut batch = Vec::new();
        let mut keys: HashSet<StoreKey> = HashSet::new();
        let mut bytes = 0usize;
        let mut rest = VecDeque::with_capacity(self.pending.len());
        while let Some(job) = self.pending.pop_front() {
            let plan = job.op.plan();
            let clash = plan.own.iter().any(|(k, _)| keys.contains(k));
            let too_big = !batch.is_empty() && bytes + plan.size_hint > self.config.max_bytes;
            if clash || too_big || batch.len() >= self.config.max_jobs {
                rest.push_back(job);
                continue;
            }
            keys.extend(plan.own.iter().map(|(k, _)| k.clone()));
            bytes += plan.size_hint;
            batch.push(job);
        }
        self.pending = rest;
        batch
    }

    async fn load_shared(&mut self, batch: &[Job]) -> Result<(), StoreError> {
        for job in batch {
            let plan = job.op.plan();
            let mut kinds = Vec::new();
            if plan.object_generation {
                kinds.push(GenerationKind::Object);
            }
            if plan.authority_owner_generation {
                kinds.push(GenerationKind::AuthorityOwner);
            }
            for kind in kinds {
                if !self.counters.contains_key(&kind) {
                    let read = self.store.read(&kind.counter_key()).await?;
                    match CounterRow::from_read(kind, &read) {
                        Ok(row) => {
                            self.counters.insert(kind, row);
                        }
                        Err(_) => {
                            return Err(StoreError::failure_kind(
                                zlink_store_spi::FailureKind::Format,
                            ));
                        }
                    }
                }
            }
            for mv in &plan.capacity {
                if !self.caps.contains_key(&mv.node) {
                    let seen = self.read_cap(&mv.node).await?;
                    self.caps.insert(mv.node.clone(), seen);
                }
            }
            for need in &plan.leases {
                if self.book.get(&need.key).is_none() {
                    let read = self.store.read(&need.key).await?;
                    self.book.set(need.key.clone(), LeaseSeen::from_read(&read));
                }
            }
        }
        Ok(())
    }

    async fn read_cap(&self, node: &NodeKey) -> Result<CapSeen, StoreError> {
        let key = keys::node_capacity(node)
            .map_err(|_| StoreError::failure_kind(zlink_store_spi::FailureKind::Format))?;
        match self.store.read(&key).await? {
            ReadResult::Missing { .. } => Ok(CapSeen {
                row: CapacityRow::default(),
                version: None,
            }),
            ReadResult::Found { bytes, version, .. } => {
                let row = CapacityRow::decode(&bytes)
                    .map_err(|_| StoreError::failure_kind(zlink_store_spi::FailureKind::Format))?;
                Ok(CapSeen {
                    row,
                    version: Some(version),
                })
            }
        }
    }

    /// Runs one batch; returns the jobs to retry.
    async fn run_batch(&mut self, batch: Vec<Job>) -> Vec<Job> {
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
                job.finish(Err(store_error_like(&e).into()));
            }
            return Vec::new();
        }
        // 3. Apply each job to working copies.
        let mut next: HashMap<GenerationKind, u64> =
            self.counters.iter().map(|(k, r)| (*k, r.next)).collect();
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
                Err(ApplyFail::Shared(outcome)) if job.refreshed => suspects.push((job, *outcome)),
                Err(ApplyFail::Shared(_)) => recheck.push(job),
            }
        }
        for (job, outcome) in suspects {
            self.settle_suspect(job, outcome).await;
        }
        let mut retry = self.run_accepted(accepted, next, rows).await;
        // Failures derived from cached rows are re-tried once on freshly read rows.
        for mut job in recheck {
            self.invalidate(job.op.plan());
            job.refreshed = true;
            retry.push(job);
        }
        retry
    }

    /// Forgets the cached shared rows a plan depends on.
    fn invalidate(&mut self, plan: &Plan) {
        if plan.object_generation {
            self.counters.remove(&GenerationKind::Object);
        }
        if plan.authority_owner_generation {
            self.counters.remove(&GenerationKind::AuthorityOwner);
        }
        for mv in &plan.capacity {
            self.caps.remove(&mv.node);
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

    /// Writes the accepted jobs as one batch; returns the jobs to retry.
    async fn run_accepted(
        &mut self,
        accepted: Vec<Accepted>,
        next: HashMap<GenerationKind, u64>,
        rows: HashMap<NodeKey, CapacityRow>,
    ) -> Vec<Job> {
        if accepted.is_empty() {
            return Vec::new();
        }
        // 4. One conditional batch.
        let (request, counter_puts, cap_puts) = match self.assemble(&accepted, &next, &rows) {
            Ok(r) => r,
            Err(e) => {
                for a in accepted {
                    a.job.finish(Err(LocationError::Argument(e.clone())));
                }
                return Vec::new();
            }
        };
        // 5. Write.
        match self.store.write(&request).await {
            Ok(WriteResult::Applied { put_versions, .. }) => {
                self.on_applied(accepted, put_versions, counter_puts, cap_puts, &next, rows);
                Vec::new()
            }
            Ok(WriteResult::Conflict { .. }) => self.on_conflict(accepted, &rows).await,
            Err(e) => self.on_unknown(accepted, e, &rows).await,
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
            let held = self
                .book
                .get(&need.key)
                .is_some_and(|seen| seen.held_by(&need.run));
            if !held {
                return Err(ApplyFail::Shared(Box::new(Ok(JobResult::LeaseStale {
                    role: need.role,
                    run: need.run.clone(),
                }))));
            }
        }
        let mut issued = Issued::default();
        let mut my_next = next.clone();
        for (wanted, kind) in [
            (plan.object_generation, GenerationKind::Object),
            (
                plan.authority_owner_generation,
                GenerationKind::AuthorityOwner,
            ),
        ] {
            if !wanted {
                continue;
            }
            let cached = self
                .counters
                .get(&kind)
                .ok_or(ApplyFail::Final(LocationError::Contended))?;
            let row = CounterRow {
                kind,
                next: my_next.get(&kind).copied().unwrap_or(cached.next),
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
            let row = match my_rows.get_mut(&mv.node) {
                Some(r) => r,
                None => {
                    let base = rows
                        .get(&mv.node)
                        .cloned()
                        .or_else(|| self.caps.get(&mv.node).map(|c| c.row.clone()))
                        .ok_or(ApplyFail::Final(LocationError::Contended))?;
                    my_rows.entry(mv.node.clone()).or_insert(base)
                }
            };
            let moved = match &mv.kind {
                CapMoveKind::Reserve(limits) => row.reserve(&mv.bundle, limits),
                CapMoveKind::Unreserve => row.unreserve(&mv.bundle),
                CapMoveKind::Activate => row.activate(&mv.bundle),
                CapMoveKind::ReleaseActive => row.release_active(&mv.bundle),
            };
            moved.map_err(|e| ApplyFail::Shared(Box::new(Err(e))))?;
        }
        let built = job.op.build(&issued).map_err(ApplyFail::Final)?;
        *next = my_next;
        rows.extend(my_rows);
        Ok(built)
    }

    #[allow(clippy::type_complexity)]
    fn assemble(
        &self,
        accepted: &[Accepted],
        next: &HashMap<GenerationKind, u64>,
        rows: &HashMap<NodeKey, CapacityRow>,
    ) -> Result<(WriteRequest, Vec<GenerationKind>, Vec<NodeKey>), zlink_store_spi::ArgumentError>
    {
        let mut conditions = Vec::new();
        let mut mutations = Vec::new();
        let mut lease_keys: HashSet<StoreKey> = HashSet::new();
        let mut counters_used: Vec<GenerationKind> = Vec::new();
        for a in accepted {
            let plan = a.job.op.plan();
            for (key, expect) in &plan.own {
                if let Some(e) = expect {
                    conditions.push(e.condition(key));
                }
            }
            for need in &plan.leases {
                if lease_keys.insert(need.key.clone()) {
                    if let Some(v) = self.book.get(&need.key).and_then(|s| s.version) {
                        conditions.push(Condition::Version(need.key.clone(), v));
                    }
                }
            }
            for (wanted, kind) in [
                (plan.object_generation, GenerationKind::Object),
                (
                    plan.authority_owner_generation,
                    GenerationKind::AuthorityOwner,
                ),
            ] {
                if wanted && !counters_used.contains(&kind) {
                    counters_used.push(kind);
                }
            }
            mutations.extend(a.built.mutations.iter().cloned());
        }
        for kind in &counters_used {
            if let (Some(row), Some(n)) = (self.counters.get(kind), next.get(kind)) {
                conditions.push(row.condition());
                mutations.push(row.put(*n));
            }
        }
        let mut cap_nodes: Vec<NodeKey> = rows.keys().cloned().collect();
        cap_nodes.sort();
        for node in &cap_nodes {
            let (Some(seen), Some(row)) = (self.caps.get(node), rows.get(node)) else {
                continue;
            };
            let key = keys::node_capacity(node)
                .map_err(|_| zlink_store_spi::ArgumentError::EmptyBatch)?;
            conditions.push(match &seen.version {
                Some(v) => Condition::Version(key.clone(), v.clone()),
                None => Condition::Missing(key.clone()),
            });
            mutations.push(Mutation::put(key, row.encode()));
        }
        let request = WriteRequest::new(conditions, mutations)?;
        Ok((request, counters_used, cap_nodes))
    }

    #[allow(clippy::too_many_arguments)]
    fn on_applied(
        &mut self,
        accepted: Vec<Accepted>,
        put_versions: Vec<StoreVersion>,
        counter_puts: Vec<GenerationKind>,
        cap_puts: Vec<NodeKey>,
        next: &HashMap<GenerationKind, u64>,
        rows: HashMap<NodeKey, CapacityRow>,
    ) {
        let mut versions = put_versions.into_iter();
        let mut per_job = Vec::with_capacity(accepted.len());
        for a in accepted {
            let mine: Vec<StoreVersion> = versions.by_ref().take(a.puts).collect();
            per_job.push((a, mine));
        }
        for kind in counter_puts {
            let version = versions.next();
            if let (Some(row), Some(n)) = (self.counters.get_mut(&kind), next.get(&kind)) {
                row.next = *n;
                row.version = version;
            }
        }
        let mut rows = rows;
        for node in cap_puts {
            let version = versions.next();
            if let Some(row) = rows.remove(&node) {
                self.caps.insert(node, CapSeen { row, version });
            }
        }
        for (a, mine) in per_job {
            a.job.finish(Ok(JobResult::Applied {
                put_versions: mine,
                built: a.built,
            }));
        }
    }

    /// Refreshes every shared row the batch touched.
    async fn refresh_shared(
        &mut self,
        accepted: &[Accepted],
        rows: &HashMap<NodeKey, CapacityRow>,
    ) {
        for kind in [GenerationKind::Object, GenerationKind::AuthorityOwner] {
            let used = accepted.iter().any(|a| {
                let p = a.job.op.plan();
                match kind {
                    GenerationKind::Object => p.object_generation,
                    _ => p.authority_owner_generation,
                }
            });
            if used {
                self.counters.remove(&kind);
                if let Ok(read) = self.store.read(&kind.counter_key()).await {
                    if let Ok(row) = CounterRow::from_read(kind, &read) {
                        self.counters.insert(kind, row);
                    }
                }
            }
        }
        for node in rows.keys() {
            self.caps.remove(node);
            if let Ok(seen) = self.read_cap(node).await {
                self.caps.insert(node.clone(), seen);
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

    async fn on_conflict(
        &mut self,
        accepted: Vec<Accepted>,
        rows: &HashMap<NodeKey, CapacityRow>,
    ) -> Vec<Job> {
        self.refresh_shared(&accepted, rows).await;
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
                        if expect.as_ref().is_some_and(|e| !e.holds(&read)) {
                            broken = true;
                        }
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
        if !retry.is_empty() {
            // Back off a little, more after repeated conflicts, so contending hosts spread out.
            let spread = 100 * u64::from(max_round.min(20));
            let pause = self.rng.below(spread.max(1));
            tokio::time::sleep(Duration::from_micros(pause)).await;
        }
        retry
    }

    /// The write's outcome is unknown: settle it with the jobs' witness keys.
    async fn on_unknown(
        &mut self,
        accepted: Vec<Accepted>,
        error: StoreError,
        rows: &HashMap<NodeKey, CapacityRow>,
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
        self.refresh_shared(&accepted, rows).await;
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
