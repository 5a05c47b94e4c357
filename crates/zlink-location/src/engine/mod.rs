//! The authority write engine: the worker loop that runs every authority operation of one
//! host as one *job* (submit, launch, settle). Jobs waiting at the same time are coalesced into
//! conditional batches ([`batch`], pure), batches that touch disjoint rows are in flight at the
//! same time, and batches that did not simply apply are settled off the loop ([`recover`]).
//! The contract with the operations is in [`plan`].
//!
//! A job declares a [`Plan`]: its own keys with what it expects of them (`Missing` or a
//! version), which generations it needs issued, which capacity it moves and how, which owner
//! leases must be held by which host run, guards on rows it only reads, and the admission it
//! needs. The engine keeps the shared rows (the generation counters, the nodes' allocation
//! rows, lease versions) cached with their versions and, for each batch:
//!
//! 1. refuses jobs the admission gate refuses;
//! 2. applies each job in order to working copies of the shared rows: lease holders must match,
//!    generations are issued as one block per counter (each job gets its own value; a job
//!    finding the counter exhausted fails with `GenerationExhausted` and takes no value),
//!    capacity moves must fit the limits (`CapacityExceeded` otherwise);
//! 3. writes *one* conditional batch: every job's own conditions and mutations, plus each
//!    touched counter and allocation row with its expected version and new value, and a version
//!    condition on each lease. So each counter move and capacity move rides in the batch of the
//!    records it gates. An allocation row a job of the batch asked to remove once empty
//!    ([`Plan::drop_empty`], the owner sweeps) is deleted under its expected version instead
//!    when the batch leaves it at zero.
//!
//! **Pipelining.** A batch locks the rows it writes (its jobs' own keys, the counters and
//! allocation rows it moves) until its result is handled; other batches can be formed and sent
//! meanwhile from jobs whose rows are all unlocked (at most [`EngineConfig::max_in_flight`]
//! writes; a batch being settled by a recovery holds its rows but not a write slot). A Reserve moves the counters and the target's allocation row; a Commit or a
//! Preserve moves no shared row at all, so they are never held up by a Reserve in flight.
//!
//! **Waiting jobs** ([`pending`]) are kept per own key and per lane (the set of shared rows a
//! job writes), so forming a batch touches only the jobs it takes and one look per lane, never
//! every waiting job: a lane whose row is locked is passed over whole, and a job whose own key
//! is locked waits parked until that key is released.
//!
//! **One bad key costs only its jobs.** A write the Store refuses because one key cannot be
//! read (`StoreError::Unreadable`, decided before anything changes) fails only the jobs whose
//! own keys, guards, leases or shared rows name that key; the rest go out again without them.
//! A shared row that cannot be loaded fails only the jobs that need it. A batch refused as a
//! whole (a Store bound, an encoding) is retried one job per batch ([`Job::solo`]), so each
//! failure is its own job's.
//!
//! **Conflicts.** On `Conflict` nothing was applied: a recovery task re-reads the shared rows
//! and every job's own keys and guards; a job whose own expectation no longer holds ends as a
//! record conflict (with what the keys hold now), one whose guard broke ends as such, the
//! others are retried. Recoveries run beside the loop, so a slow one never stalls batches on
//! other rows. A failure computed from cached rows
//! (an exhausted counter, a full or underflowing row, a lease holder) is final only once it
//! holds on freshly read rows. If the write's outcome is unknown (time-out, transport error),
//! the engine never guesses: it re-reads a job's witness key and compares it with the
//! first-read version and the bytes it wrote; the batch is all-or-nothing, so one decisive
//! witness settles every job.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use zlink_store_spi::{
    DynLocationStore, LocationStore, ReadResult, StoreKey, StoreResult, StoreVersion, WriteResult,
};

use super::admission::AdmissionGate;
use super::capacity::CapacityRow;
use super::counters::CounterRow;
use super::epoch::StoreEpoch;
use super::error::{InvalidOperation, LocationError};
use super::identity::NodeKey;
use super::keys;
use super::lease::{LeaseBook, LeaseSeen};
use super::placement::PlacementRng;

mod batch;
mod pending;
mod plan;
mod recover;

pub(crate) use batch::EngineConfig;
pub(crate) use plan::{
    Built, CapMove, CapMoveKind, EngineOp, Expect, Issued, JobResult, LeaseNeed, LeaseRole, Plan,
};

use batch::{Accepted, ApplyFail, Cache, Flight, Job, Locks, RowSeen, Working};
use pending::Pending;
use recover::{Recovered, Recovery, settle_suspect, store_error_like};

/// The handle to a running engine (one worker task per host).
#[derive(Debug, Clone)]
pub(crate) struct Engine {
    tx: mpsc::UnboundedSender<Job>,
    /// How many jobs a bulk submitter keeps in flight at most ([`Engine::window`]).
    window: usize,
}

/// The answer to one enqueued operation ([`Engine::enqueue`]).
#[derive(Debug)]
pub(crate) struct Ticket(oneshot::Receiver<Result<JobResult, LocationError>>);

impl Ticket {
    /// Waits for the operation's result.
    pub(crate) async fn result(self) -> Result<JobResult, LocationError> {
        self.0.await.map_err(|_| LocationError::Stopped)?
    }
}

impl Engine {
    /// Starts the worker on the current tokio runtime.
    pub(crate) fn start(
        store: Arc<dyn DynLocationStore>,
        gate: Arc<AdmissionGate>,
        book: Arc<LeaseBook>,
        epoch: Arc<StoreEpoch>,
        config: EngineConfig,
    ) -> Result<Self, LocationError> {
        let handle =
            tokio::runtime::Handle::try_current().map_err(|_| InvalidOperation::NoTokioRuntime)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let worker = Worker {
            store,
            gate,
            book,
            epoch,
            config,
            cache: Cache::default(),
            cache_losses: 0,
            locks: Locks::default(),
            pending: Pending::default(),
            writing: 0,
            recovering: 0,
            events_tx,
            rng: PlacementRng::new(),
        };
        handle.spawn(worker.run(rx, events_rx));
        Ok(Engine {
            tx,
            window: config.max_jobs.saturating_mul(config.max_in_flight).max(1),
        })
    }

    /// Runs one operation.
    pub(crate) async fn submit(&self, op: Box<dyn EngineOp>) -> Result<JobResult, LocationError> {
        self.enqueue(op)?.result().await
    }

    /// Queues one operation without waiting for it: its result comes through the ticket.
    pub(crate) fn enqueue(&self, op: Box<dyn EngineOp>) -> Result<Ticket, LocationError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job::new(op, reply))
            .map_err(|_| LocationError::Stopped)?;
        Ok(Ticket(rx))
    }

    /// The most operations a bulk submitter (a sweep) keeps queued or in flight at once: as
    /// many as the batches in flight can carry. More would only wait in the engine's queue,
    /// which a bounded window keeps small.
    pub(crate) fn window(&self) -> usize {
        self.window
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

/// The failure of a shared row's read earlier in this batch, if `key` failed.
fn earlier_failure(
    failed: &[(StoreKey, LocationError)],
    key: &StoreKey,
) -> Result<(), LocationError> {
    match failed.iter().find(|(k, _)| k == key) {
        Some((_, e)) => Err(error_like(e)),
        None => Ok(()),
    }
}

/// Records that `key` could not be read; returns the error for the job that needed it.
fn remember(
    failed: &mut Vec<(StoreKey, LocationError)>,
    key: StoreKey,
    e: LocationError,
) -> LocationError {
    let like = error_like(&e);
    failed.push((key, e));
    like
}

/// The same failure again, for another job (Store errors keep their kind and key, corrupt rows
/// their record; anything else is `Contended`).
fn error_like(e: &LocationError) -> LocationError {
    match e {
        LocationError::Store(s) => LocationError::Store(store_error_like(s)),
        LocationError::CorruptRecord { record } => LocationError::corrupt(*record),
        LocationError::Argument(a) => LocationError::Argument(a.clone()),
        _ => LocationError::Contended,
    }
}

/// Reads a node's allocation row with its version.
async fn read_row(store: &dyn DynLocationStore, node: &NodeKey) -> Result<RowSeen, LocationError> {
    let (counts, version) = read_counts(store, &keys::node_capacity(node)?).await?;
    Ok(RowSeen { counts, version })
}

/// What comes back to the worker from the tasks it started.
enum Event {
    /// A batch's write returned.
    Written {
        flight: Flight,
        result: StoreResult<WriteResult>,
    },
    /// A batch's recovery finished.
    Recovered(Recovered),
}

struct Worker {
    store: Arc<dyn DynLocationStore>,
    gate: Arc<AdmissionGate>,
    book: Arc<LeaseBook>,
    /// The generations this host has seen: every issued block is recorded, every counter
    /// read is checked against it (Store data loss).
    epoch: Arc<StoreEpoch>,
    config: EngineConfig,
    cache: Cache,
    /// The data losses noticed when `cache` was last checked ([`StoreEpoch::losses`]): once
    /// one more is noticed, nothing cached before it is used again.
    cache_losses: u64,
    locks: Locks,
    pending: Pending,
    /// Batches whose write is in flight (at most `max_in_flight`).
    writing: usize,
    /// Batches being settled by a recovery task (each holds its locks until it is settled;
    /// they never hold back batches on other rows).
    recovering: usize,
    events_tx: mpsc::UnboundedSender<Event>,
    rng: PlacementRng,
}

impl Worker {
    async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Job>,
        mut events: mpsc::UnboundedReceiver<Event>,
    ) {
        let mut open = true;
        loop {
            let unsettled = self.writing + self.recovering;
            if !open && self.pending.is_empty() && unsettled == 0 {
                return;
            }
            tokio::select! {
                biased;
                Some(event) = events.recv(), if unsettled > 0 => self.on_event(event),
                job = rx.recv(), if open && self.pending.is_empty() => match job {
                    Some(job) => self.pending.push(job),
                    None => open = false,
                },
                // Jobs are pending but blocked by rows in flight: wait for a batch to settle.
                else => {}
            }
            while let Ok(job) = rx.try_recv() {
                self.pending.push(job);
            }
            while self.writing < self.config.max_in_flight {
                let min = if self.writing == 0 {
                    1
                } else {
                    self.config.min_extra_jobs
                };
                let batch = pending::take_batch(&mut self.pending, &self.locks, &self.config, min);
                if batch.is_empty() {
                    break;
                }
                let retry = self.launch(batch).await;
                self.requeue(retry);
            }
        }
    }

    /// Sends jobs back to wait, each at its first place.
    fn requeue(&mut self, retry: Vec<Job>) {
        for job in retry {
            self.pending.push(job);
        }
    }

    /// A batch settled: its rows and keys are free again, and the jobs parked on its keys go
    /// back to their lanes.
    fn release(&mut self, locks: &[plan::Shared], keys: &[StoreKey]) {
        self.locks.release(locks, keys);
        self.pending.unpark(keys, &self.locks);
    }

    fn on_event(&mut self, event: Event) {
        match event {
            Event::Written {
                flight,
                result: Ok(WriteResult::Applied { put_versions, .. }),
            } => {
                self.release(&flight.locks, &flight.lock_keys);
                self.writing -= 1;
                self.on_applied(flight, &put_versions);
            }
            Event::Written { flight, result } => {
                // Settled off the loop; the batch keeps its locks until the recovery hands its
                // fresh rows back, and no longer counts as a write in flight.
                self.writing -= 1;
                self.recovering += 1;
                let recovery = Recovery {
                    store: self.store.clone(),
                    book: self.book.clone(),
                    epoch: self.epoch.clone(),
                    config: self.config,
                    backoff_seed: self.rng.next_u64(),
                };
                let events = self.events_tx.clone();
                let losses = flight.losses;
                tokio::spawn(async move {
                    let mut recovered = match result {
                        Ok(_) => recovery.after_conflict(flight).await,
                        Err(e) => recovery.after_error(flight, e).await,
                    };
                    recovered.losses = losses;
                    // The worker outlives every batch it sent; if it is gone, nobody waits.
                    let _ = events.send(Event::Recovered(recovered));
                });
            }
            Event::Recovered(mut recovered) => {
                if recovered.losses != self.current_losses() {
                    // Read before a data loss was noticed: not kept.
                    recovered
                        .counters
                        .iter_mut()
                        .for_each(|(_, row)| *row = None);
                    recovered.rows.iter_mut().for_each(|(_, row)| *row = None);
                }
                for (kind, row) in recovered.counters {
                    match row {
                        Some(row) => self.cache.counters.insert(kind, row),
                        None => self.cache.counters.remove(&kind),
                    };
                }
                for (node, seen) in recovered.rows {
                    match seen {
                        Some(seen) => self.cache.rows.insert(node, seen),
                        None => self.cache.rows.remove(&node),
                    };
                }
                self.release(&recovered.locks, &recovered.lock_keys);
                self.recovering -= 1;
                self.requeue(recovered.retry);
            }
        }
    }

    /// Updates the cached shared rows from an applied batch and answers its jobs; every
    /// version is taken at the put index recorded when the batch was assembled.
    fn on_applied(&mut self, flight: Flight, put_versions: &[StoreVersion]) {
        let version = |i: usize| put_versions.get(i).cloned();
        // Rows computed from what was cached before a data loss was noticed are not kept.
        let keep = flight.losses == self.current_losses();
        for c in &flight.counters {
            // The block issued ends just below the stored next value.
            self.epoch.observe(c.kind, c.next.saturating_sub(1));
            if !keep {
                self.cache.counters.remove(&c.kind);
                continue;
            }
            self.cache.counters.insert(
                c.kind,
                CounterRow {
                    kind: c.kind,
                    next: c.next,
                    version: version(c.put),
                },
            );
        }
        for r in &flight.rows {
            if !keep {
                self.cache.rows.remove(&r.node);
                continue;
            }
            // A removed row (no put) is cached as absent.
            self.cache.rows.insert(
                r.node.clone(),
                RowSeen {
                    counts: r.counts.clone(),
                    version: r.put.and_then(version),
                },
            );
        }
        for (a, range) in flight.accepted.into_iter().zip(flight.job_puts) {
            let result = match put_versions.get(range) {
                Some(mine) => Ok(JobResult::Applied {
                    put_versions: mine.to_vec(),
                    built: a.built,
                }),
                None => Err(LocationError::StoreContract(
                    super::error::ContractViolation::MissingPutVersion,
                )),
            };
            a.job.finish(result);
        }
    }

    /// Loads the shared rows `job` needs that are not cached yet. A row that cannot be read
    /// fails only the jobs that need it: the failure is remembered in `failed` for the rest of
    /// the batch (the read is not repeated), and the other jobs go on.
    async fn load_shared(
        &mut self,
        job: &Job,
        failed: &mut Vec<(StoreKey, LocationError)>,
    ) -> Result<(), LocationError> {
        let plan = job.op.plan();
        for kind in plan.counters() {
            if self.cache.counters.contains_key(&kind) {
                continue;
            }
            let key = kind.counter_key();
            earlier_failure(failed, &key)?;
            let seen = self.epoch.highest(kind);
            let row = match self.store.read(&key).await {
                Ok(read) => CounterRow::from_read(kind, &read),
                Err(e) => Err(e.into()),
            };
            match row {
                Ok(row) => {
                    let row = self.epoch.checked(row, seen);
                    self.cache.counters.insert(kind, row);
                }
                Err(e) => return Err(remember(failed, key, e)),
            }
        }
        for node in plan.rows() {
            if self.cache.rows.contains_key(node) {
                continue;
            }
            let key = keys::node_capacity(node)?;
            earlier_failure(failed, &key)?;
            match read_counts(self.store.as_ref(), &key).await {
                Ok((counts, version)) => {
                    self.cache
                        .rows
                        .insert(node.clone(), RowSeen { counts, version });
                }
                Err(e) => return Err(remember(failed, key, e)),
            }
        }
        for need in &plan.leases {
            if self.book.knows(&need.key) {
                continue;
            }
            earlier_failure(failed, &need.key)?;
            match self.store.read(&need.key).await {
                Ok(read) => self.book.set(need.key.clone(), LeaseSeen::from_read(&read)),
                Err(e) => return Err(remember(failed, need.key.clone(), e.into())),
            }
        }
        Ok(())
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
        // 2. The shared rows, from the cache or the Store (a row that cannot be read fails
        //    only the jobs that need it). Nothing cached before a data loss is used.
        let losses = self.current_losses();
        let mut loaded = Vec::with_capacity(admitted.len());
        let mut failed = Vec::new();
        for job in admitted {
            match self.load_shared(&job, &mut failed).await {
                Ok(()) => loaded.push(job),
                Err(e) => job.finish(Err(e)),
            }
        }
        // 3. Apply each job to working copies.
        let mut working = Working::default();
        let mut accepted: Vec<Accepted> = Vec::new();
        let mut retry = Vec::new();
        for mut job in loaded {
            match batch::apply(&job, &self.cache, &self.book, &mut working) {
                Ok(built) => accepted.push(Accepted { job, built }),
                Err(ApplyFail::Final(e)) => job.finish(Err(e)),
                Err(ApplyFail::Shared(outcome)) if job.refreshed => {
                    // It holds on freshly read rows; settled against the job's own keys off
                    // the loop.
                    tokio::spawn(settle_suspect(self.store.clone(), job, *outcome));
                }
                Err(ApplyFail::Shared(_)) => {
                    // Computed from cached rows: tried once more on freshly read rows (rows
                    // locked by a batch in flight are refreshed when that batch settles).
                    self.invalidate(&job);
                    job.refreshed = true;
                    retry.push(job);
                }
            }
        }
        if accepted.is_empty() {
            return retry;
        }
        // 4. One conditional batch.
        let (request, flight) = match batch::assemble(accepted, working, &self.book) {
            Ok(r) => r,
            Err((_, accepted)) if accepted.len() > 1 => {
                // The batch as a whole is past a bound or cannot be encoded: each job is tried
                // alone, so a failure costs only its own job.
                retry.extend(accepted.into_iter().map(|a| {
                    let mut job = a.job;
                    job.solo = true;
                    job
                }));
                return retry;
            }
            Err((e, accepted)) => {
                for a in accepted {
                    a.job.finish(Err(e.to_error()));
                }
                return retry;
            }
        };
        // 5. Send it; the result comes back as an event.
        let mut flight = flight;
        flight.losses = losses;
        self.locks.hold(&flight);
        self.writing += 1;
        let store = self.store.clone();
        let events = self.events_tx.clone();
        tokio::spawn(async move {
            let result = store.write(&request).await;
            // The worker outlives every batch it sent; if it is gone, nobody waits.
            let _ = events.send(Event::Written { flight, result });
        });
        retry
    }

    /// The data losses noticed so far; the first call after a new one forgets every cached
    /// shared row (`docs/store-epoch.md`, "Version reuse": a rolled-back Store reissues the
    /// versions the lost writes had, so a row cached before the loss could match again and a
    /// batch computed from its old content would apply). Rows locked by a batch in flight
    /// are not cached again when it settles (its [`Flight::losses`] is older).
    fn current_losses(&mut self) -> u64 {
        let now = self.epoch.losses();
        if now != self.cache_losses {
            tracing::info!(
                counters = self.cache.counters.len(),
                rows = self.cache.rows.len(),
                "Store data loss noticed: the engine forgets its cached shared rows"
            );
            self.cache.counters.clear();
            self.cache.rows.clear();
            self.cache_losses = now;
        }
        now
    }

    /// Forgets the cached shared rows a job depends on (not those locked by a batch in flight:
    /// they are refreshed when it settles).
    fn invalidate(&mut self, job: &Job) {
        let plan = job.op.plan();
        for kind in plan.counters() {
            if !self.locks.shared.contains(&plan::Shared::Counter(kind)) {
                self.cache.counters.remove(&kind);
            }
        }
        for node in plan.rows() {
            if !self.locks.shared.contains(&plan::Shared::Row(node.clone())) {
                self.cache.rows.remove(node);
            }
        }
        for need in &plan.leases {
            self.book.forget(&need.key);
        }
    }
}

#[cfg(test)]
#[path = "worker_tests.rs"]
mod worker_tests;
