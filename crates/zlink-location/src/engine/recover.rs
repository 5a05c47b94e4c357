//! Settling a batch that did not simply apply, off the worker's loop: a `Conflict` (re-read
//! each job's own keys and guards; a broken expectation ends the job, the rest are retried) or
//! an unknown outcome (a witness key against its first-read version decides for the whole
//! all-or-nothing batch; never a guess). Each recovery runs as its own task holding its batch's
//! locks, so one slow recovery never stalls the batches of other rows; the fresh shared rows
//! it read go back to the worker with the jobs to retry.

use std::sync::Arc;
use std::time::Duration;

use zlink_store_spi::{
    DynLocationStore, LocationStore, Mutation, ReadResult, StoreError, StoreKey, UnreadableKey,
};

use super::super::counters::CounterRow;
use super::super::epoch::StoreEpoch;
use super::super::error::LocationError;
use super::super::generation::GenerationKind;
use super::super::identity::NodeKey;
use super::super::keys;
use super::super::lease::{LeaseBook, LeaseSeen};
use super::super::placement::PlacementRng;
use super::batch::{Accepted, CounterMove, EngineConfig, Flight, Job, RowMove, RowSeen};
use super::plan::{JobResult, Shared};
use super::read_row;

/// What a recovery hands back to the worker.
pub(super) struct Recovered {
    /// Jobs to run again, in their original order.
    pub retry: Vec<Job>,
    /// Fresh counter rows (`None`: could not be read; dropped from the cache).
    pub counters: Vec<(GenerationKind, Option<CounterRow>)>,
    /// Fresh allocation rows (`None`: could not be read; dropped from the cache).
    pub rows: Vec<(NodeKey, Option<RowSeen>)>,
    /// The batch's locks, released by the worker once the fresh rows are cached.
    pub locks: Vec<Shared>,
    pub lock_keys: Vec<StoreKey>,
    /// The batch's [`Flight::losses`] (set by the worker): rows read before a loss was
    /// noticed are not cached.
    pub losses: u64,
}

/// Rebuilds a Store error for one of several jobs (the original carries a source that cannot
/// be cloned; its kind and meaning are kept).
pub(super) fn store_error_like(e: &StoreError) -> StoreError {
    match e {
        StoreError::InvalidArgument(a) => StoreError::InvalidArgument(a.clone()),
        StoreError::Failure { kind, .. } => StoreError::failure_kind(*kind),
        StoreError::TimedOut => StoreError::TimedOut,
        StoreError::Unreadable(u) => StoreError::Unreadable(u.clone()),
        _ => StoreError::Cancelled,
    }
}

enum Witness {
    Applied,
    NotApplied,
    Unknown,
}

/// What one job's own keys and guards hold now.
enum Recheck {
    /// Every expectation still holds: retry.
    Holds,
    /// The job ended (record conflict, broken guard or a read failure).
    Ended(Result<JobResult, LocationError>),
}

/// The context a recovery task needs.
pub(super) struct Recovery {
    pub store: Arc<dyn DynLocationStore>,
    pub book: Arc<LeaseBook>,
    pub epoch: Arc<StoreEpoch>,
    pub config: EngineConfig,
    pub backoff_seed: u64,
}

impl Recovery {
    /// The batch conflicted: nothing was applied.
    pub(super) async fn after_conflict(self, flight: Flight) -> Recovered {
        let fresh = self.refresh_shared(&flight).await;
        let mut retry = Vec::new();
        let mut max_round = 0;
        for a in flight.accepted {
            match recheck(self.store.as_ref(), &a.job).await {
                Recheck::Ended(result) => a.job.finish(result),
                Recheck::Holds => {
                    let mut job = a.job;
                    job.rounds += 1;
                    if job.rounds >= self.config.max_rounds {
                        job.finish(Err(LocationError::Contended));
                    } else {
                        max_round = max_round.max(job.rounds);
                        retry.push(job);
                    }
                }
            }
        }
        if max_round > 1 {
            // Repeated conflicts: another host keeps winning the same rows. Back off a little,
            // more each time, so contending hosts spread out.
            let spread = 100 * u64::from(max_round.min(20));
            let pause = PlacementRng::seeded(self.backoff_seed).below(spread);
            tokio::time::sleep(Duration::from_micros(pause)).await;
        }
        fresh.finish(retry, flight.locks, flight.lock_keys)
    }

    /// The write failed; if its outcome is unknown, a witness settles it.
    pub(super) async fn after_error(self, flight: Flight, error: StoreError) -> Recovered {
        let Flight {
            accepted,
            job_puts: _,
            counters,
            rows,
            locks,
            lock_keys,
            losses: _,
        } = flight;
        if let Some(bad) = error.as_unreadable() {
            return after_unreadable(bad, accepted, &counters, &rows, locks, lock_keys);
        }
        if error.as_argument().is_some() && accepted.len() > 1 {
            // The Store refused the batch as a whole before any I/O: each job is tried alone,
            // so a failure costs only its own job.
            let retry = accepted
                .into_iter()
                .map(|a| {
                    let mut job = a.job;
                    job.solo = true;
                    job
                })
                .collect();
            return Fresh::default().finish(retry, locks, lock_keys);
        }
        if !error.outcome_unknown() {
            for a in accepted {
                a.job.finish(Err(store_error_like(&error).into()));
            }
            let fresh = Fresh::none(
                counters.iter().map(|c| c.kind),
                rows.iter().map(|r| r.node.clone()),
            );
            return fresh.finish(Vec::new(), locks, lock_keys);
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
        let fresh = self
            .refresh(
                counters.iter().map(|c| c.kind),
                rows.iter().map(|r| r.node.clone()),
                &accepted,
            )
            .await;
        let mut retry = Vec::new();
        match verdict {
            Witness::NotApplied => {
                for a in accepted {
                    let mut job = a.job;
                    job.rounds += 1;
                    if job.rounds >= self.config.max_rounds {
                        job.finish(Err(store_error_like(&error).into()));
                    } else {
                        retry.push(job);
                    }
                }
            }
            Witness::Applied => {
                for a in accepted {
                    let result = self
                        .read_back(&a)
                        .await
                        .map(|put_versions| JobResult::Applied {
                            put_versions,
                            built: a.built,
                        });
                    a.job
                        .finish(result.ok_or_else(|| store_error_like(&error).into()));
                }
            }
            Witness::Unknown => {
                for a in accepted {
                    a.job.finish(Err(store_error_like(&error).into()));
                }
            }
        }
        fresh.finish(retry, locks, lock_keys)
    }

    /// The versions of an applied job's puts, read back (`None` if one no longer holds the
    /// bytes written: its version cannot be known).
    async fn read_back(&self, a: &Accepted) -> Option<Vec<zlink_store_spi::StoreVersion>> {
        let mut versions = Vec::new();
        for m in &a.built.mutations {
            if let Mutation::Put { key, bytes, .. } = m {
                match self.store.read(key).await {
                    Ok(ReadResult::Found {
                        bytes: now,
                        version,
                        ..
                    }) if now == *bytes => versions.push(version),
                    _ => return None,
                }
            }
        }
        Some(versions)
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

    async fn refresh_shared(&self, flight: &Flight) -> Fresh {
        self.refresh(
            flight.counters.iter().map(|c| c.kind),
            flight.rows.iter().map(|r| r.node.clone()),
            &flight.accepted,
        )
        .await
    }

    /// Re-reads the shared rows a batch touched and the leases its jobs need.
    async fn refresh(
        &self,
        counters: impl Iterator<Item = GenerationKind>,
        rows: impl Iterator<Item = NodeKey>,
        accepted: &[Accepted],
    ) -> Fresh {
        let mut fresh = Fresh::default();
        for kind in counters {
            let seen = self.epoch.highest(kind);
            let row = match self.store.read(&kind.counter_key()).await {
                Ok(read) => CounterRow::from_read(kind, &read)
                    .ok()
                    .map(|row| self.epoch.checked(row, seen)),
                Err(_) => None,
            };
            fresh.counters.push((kind, row));
        }
        for node in rows {
            let seen = read_row(self.store.as_ref(), &node).await.ok();
            fresh.rows.push((node, seen));
        }
        let mut seen_keys = zlink_store_spi::entropy::HashSet::default();
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
        fresh
    }
}

/// The batch named one key the Store cannot read; it was found before anything changed
/// (`StoreError::Unreadable`), so it costs only the jobs that touch that key — as an own key, a
/// guard, a lease or a shared row they move — which fail with it. The others go out again
/// without them (this round does not count against their rounds: every such round ends at
/// least one job). If no job names the key, nobody can be told apart and every job fails.
fn after_unreadable(
    bad: &UnreadableKey,
    accepted: Vec<Accepted>,
    counters: &[CounterMove],
    rows: &[RowMove],
    locks: Vec<Shared>,
    lock_keys: Vec<StoreKey>,
) -> Recovered {
    let (hit, rest): (Vec<Accepted>, Vec<Accepted>) = accepted
        .into_iter()
        .partition(|a| touches(&a.job, &bad.key));
    let retry = if hit.is_empty() {
        for a in rest {
            a.job
                .finish(Err(StoreError::Unreadable(bad.clone()).into()));
        }
        Vec::new()
    } else {
        for a in hit {
            a.job
                .finish(Err(StoreError::Unreadable(bad.clone()).into()));
        }
        rest.into_iter().map(|a| a.job).collect()
    };
    // Nothing changed: the cached shared rows stay, except one that is the bad key (it is read
    // again, and fails the jobs that need it).
    let fresh = Fresh::none(
        counters
            .iter()
            .map(|c| c.kind)
            .filter(|k| k.counter_key() == bad.key),
        rows.iter()
            .map(|r| r.node.clone())
            .filter(|n| keys::node_capacity(n).is_ok_and(|k| k == bad.key)),
    );
    fresh.finish(retry, locks, lock_keys)
}

/// Whether `job`'s batch needs `key`: an own key, a guard, a lease, or a shared row it moves.
fn touches(job: &Job, key: &StoreKey) -> bool {
    let plan = job.op.plan();
    plan.own.iter().any(|(k, _)| k == key)
        || plan.guards.iter().any(|(k, _)| k == key)
        || plan.leases.iter().any(|n| &n.key == key)
        || plan.counters().any(|kind| &kind.counter_key() == key)
        || plan
            .rows()
            .any(|node| keys::node_capacity(node).is_ok_and(|k| &k == key))
}

/// Shared rows read afresh by a recovery.
#[derive(Default)]
struct Fresh {
    counters: Vec<(GenerationKind, Option<CounterRow>)>,
    rows: Vec<(NodeKey, Option<RowSeen>)>,
}

impl Fresh {
    /// Nothing read: every listed row is dropped from the cache.
    fn none(
        counters: impl Iterator<Item = GenerationKind>,
        rows: impl Iterator<Item = NodeKey>,
    ) -> Self {
        Fresh {
            counters: counters.map(|k| (k, None)).collect(),
            rows: rows.map(|n| (n, None)).collect(),
        }
    }

    fn finish(self, retry: Vec<Job>, locks: Vec<Shared>, lock_keys: Vec<StoreKey>) -> Recovered {
        Recovered {
            retry,
            counters: self.counters,
            rows: self.rows,
            locks,
            lock_keys,
            losses: 0,
        }
    }
}

/// Re-reads a job's own keys and guards after a conflict.
async fn recheck(store: &dyn DynLocationStore, job: &Job) -> Recheck {
    let plan = job.op.plan();
    let mut reads = Vec::with_capacity(plan.own.len());
    let mut broken = false;
    for (key, expect) in &plan.own {
        match store.read(key).await {
            Ok(read) => {
                broken |= expect.as_ref().is_some_and(|e| !e.holds(&read));
                reads.push((key.clone(), read));
            }
            Err(e) => return Recheck::Ended(Err(e.into())),
        }
    }
    if broken {
        return Recheck::Ended(Ok(JobResult::RecordConflict { reads }));
    }
    for (key, expect) in &plan.guards {
        match store.read(key).await {
            Ok(read) if expect.holds(&read) => {}
            Ok(_) => return Recheck::Ended(Ok(JobResult::GuardBroken)),
            Err(e) => return Recheck::Ended(Err(e.into())),
        }
    }
    Recheck::Holds
}

/// A failure computed from rows read afresh: if the job's own rows or guards changed, that
/// is the result (its capacity moves were computed from a stale record); otherwise the
/// failure stands. Runs as its own task.
pub(super) async fn settle_suspect(
    store: Arc<dyn DynLocationStore>,
    job: Job,
    outcome: Result<JobResult, LocationError>,
) {
    match recheck(store.as_ref(), &job).await {
        Recheck::Ended(result) => job.finish(result),
        Recheck::Holds => job.finish(outcome),
    }
}
