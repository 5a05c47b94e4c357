//! Reclaiming what dead host runs left behind (an extension beyond spec 21, which leaves
//! object failover to a future contract; delete only). Three paths, one judgement — the dead
//! run's owner-lease row read directly (Missing, expired by StoreNow, or held at another
//! LeaseGeneration; never by enumerating leases, §3.1), and never while that run holds it (a
//! stalled but live owner is not dead):
//!
//! - **Seen leaving** (`owner_gone`): discovery saw the run leave its list; its Ready Instance
//!   Spots are restored, then its rows are recovery-swept ([`reclaim_dead_run`]).
//! - **At access** ([`ObjectHost::recover_if_dead`]): GetOrCreate / Create and a message by
//!   global id that read a record whose owner run this node does not know to be live (no open
//!   admission window from a discovery read, not this host) recover that one object
//!   (`AuthorityClient::recover_object`: the sweep's guarded batch, limited to it) and read
//!   again, so the caller gets a new incarnation (GetOrCreate) or a definite `NotFound`, not a
//!   stale ref or an endless `Unavailable`. A recovery that fails at the Store fails a creation
//!   (`InternalFailure`, 06 §20) but not a message: that one is answered by the record as read
//!   (its owner dead: `Unavailable`), and a later message recovers it. Two accessors at once: one recovery applies, the
//!   other conflicts on the record's version, and Reserve decides the one new incarnation. A
//!   run whose lease turned out held is not read again for one `pollingInterval` (by the
//!   periodic sweep: for one `deadRunSweepInterval`). Records of
//!   this host's current run are never recovered; those of an earlier run of this host (its
//!   lease taken over under a higher generation) are recovered at access once that run's
//!   activations here are closed (the first step of its reclaim) and its sweep no longer runs
//!   here — a sweep that gave up after its retries no longer leaves them to the periodic
//!   sweep. While this node sweeps a run, a message to one of its records is answered as
//!   read: the sweep removes the run's rows in a few batches, where a thousand callers
//!   recovering one record each would contend with it on the same rows.
//! - **Periodic** ([`run`]): every `deadRunSweepInterval` (default three `ownerLeaseTtl`, plus
//!   up to a quarter more of jitter; 0 disables it) each Object Server reads at most
//!   [`PAGES_PER_ROUND`] pages of one snapshot of the authority rows (a longer listing goes on
//!   from its cursor next round), reads the lease row of each distinct owner run it does not
//!   know to be live — at most [`LEASE_READS_PER_ROUND`] — and reclaims at most
//!   [`SWEEPS_PER_ROUND`] dead runs like one seen leaving. So after a whole-mesh restart, or a
//!   crash nobody observed, the dead runs' rows and capacity are returned within a bounded
//!   number of rounds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use zlink_store_spi::entropy::{HashMap, HashSet};
use zlink_store_spi::{PageLimit, ScanCursor};

use super::host::{ObjectHost, store_failure};
use crate::messaging::ZLinkError;
use zlink_location::{AuthorityHandle, Conflict, HostRun, LocationError, LocationRuntime, Outcome};

/// Pages (of at most 1,000 authority rows) one periodic round reads.
pub(crate) const PAGES_PER_ROUND: usize = 4;
/// Owner-lease rows one periodic round reads.
pub(crate) const LEASE_READS_PER_ROUND: usize = 32;
/// Dead runs one periodic round reclaims.
pub(crate) const SWEEPS_PER_ROUND: usize = 4;

/// The recovery state of one Object Server node.
#[derive(Debug, Default)]
pub(crate) struct Recovery {
    /// Runs whose lease a direct read showed held, and when: not read again for a while.
    held: Mutex<HashMap<HostRun, Instant>>,
    /// Earlier runs of this host whose activations here are all closed: their records may be
    /// recovered at access (one entry per lease takeover).
    closed_earlier: Mutex<HashSet<HostRun>>,
    /// Runs being reclaimed now: a second reclaim of one (seen leaving, taken over, found by
    /// the periodic sweep at once) leaves it to the first instead of sweeping it twice.
    reclaiming: Mutex<HashSet<HostRun>>,
    /// Periodic rounds completed (tests wait on it).
    rounds: AtomicU64,
}

impl Recovery {
    /// Periodic rounds completed so far.
    #[cfg(test)]
    pub(crate) fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Acquire)
    }
}

impl ObjectHost {
    /// Whether this node knows `run` to be live without a Store read: this host's current
    /// run, a run a discovery read showed admitting work, or one whose lease a direct read
    /// showed held less than `fresh` ago.
    fn known_live(&self, run: &HostRun, fresh: Duration) -> bool {
        if self.location.host_run().as_ref() == Some(run) {
            return true;
        }
        if self.routes.owner_admits(run) {
            return true;
        }
        let mut held = self.recovery.held.lock();
        match held.get(run) {
            Some(at) if at.elapsed() < fresh => true,
            Some(_) => {
                held.remove(run);
                false
            }
            None => false,
        }
    }

    /// At-access recovery (see the module docs): `true` when the record `handle` was recovered
    /// or changed meanwhile (read it again), `false` when it stands (its owner is live or not
    /// judged here).
    pub(crate) async fn recover_if_dead(
        &self,
        handle: &AuthorityHandle,
    ) -> Result<bool, ZLinkError> {
        let owner = handle.owner();
        let own = self.location.host_run();
        let fresh = self.location.options().polling_interval;
        if own.as_ref().is_some_and(|r| r.owner_id == owner.owner_id) {
            // This host's own records: the current run's stand; an earlier run's are recovered
            // only once its activations here are closed (`reclaim_dead_run`), never while one
            // may still answer.
            if !self.recovery.closed_earlier.lock().contains(owner) {
                return Ok(false);
            }
        } else if self.known_live(owner, fresh) {
            return Ok(false);
        }
        if self.recovery.reclaiming.lock().contains(owner) {
            // This node's sweep of that run is under way: it removes the run's rows in a few
            // batches, where a thousand callers recovering one record each would contend on
            // the same capacity rows and slow it down. The message is answered as read.
            return Ok(false);
        }
        match self.location.authority().recover_object(handle).await {
            Ok(Outcome::Applied(())) => {
                self.routes
                    .forget(&(handle.kind().authority_kind(), handle.id().clone()));
                Ok(true)
            }
            Ok(Outcome::Conflict(Conflict::Record { .. })) => Ok(true),
            Ok(Outcome::Conflict(Conflict::RunStillLive)) => {
                self.recovery
                    .held
                    .lock()
                    .insert(owner.clone(), Instant::now());
                Ok(false)
            }
            Ok(Outcome::Conflict(c)) => {
                tracing::debug!(id = %handle.id(), ?c, "at-access recovery left the record");
                Ok(false)
            }
            // Past the admission deadline nothing is changed: the record is answered as read.
            Err(LocationError::Admission(_)) => Ok(false),
            Err(e) => Err(store_failure(e)),
        }
    }
}

/// Reclaims the dead run `run` (discovery saw it leave, or the periodic sweep found its lease
/// gone): an earlier run of this host first closes its activations; the run's Ready Instance
/// Spots are restored (spec 21 §7.1); then the recovery-sweep removes its rows and returns
/// their capacity — all conditioned on the run's lease row read directly.
pub(crate) async fn reclaim_dead_run(
    location: Arc<LocationRuntime>,
    host: Option<Arc<ObjectHost>>,
    run: HostRun,
) {
    let _reclaiming = match &host {
        Some(h) => match Reclaiming::start(h, &run) {
            Some(r) => Some(r),
            None => {
                tracing::debug!(owner = %run.owner_id, generation = %run.lease_generation, "dead run already being reclaimed");
                return;
            }
        },
        None => None,
    };
    let own_earlier = location
        .host_run()
        .is_some_and(|now| now.owner_id == run.owner_id);
    if let (true, Some(host)) = (own_earlier, &host) {
        // An earlier run of this host (its lease was lost, then taken over under a new
        // generation): its activations close before its rows are reclaimed, so no message
        // runs on an incarnation whose record is gone. Once this reclaim has ended (its sweep
        // done, or given up), a message to one of its records recovers that record at access.
        let closed = host.close_run(&run).await;
        host.recovery.closed_earlier.lock().insert(run.clone());
        tracing::warn!(owner = %run.owner_id, generation = %run.lease_generation, closed, "activations of this host's earlier run closed");
    }
    // The run's Ready Instance Spots whose first message had not completed are restored
    // before the sweep removes their rows (spec 21 §7.1); target capacity it secured here for
    // a move it never brought goes back first, so the sweep recovers the object's record.
    if let Some(host) = host {
        host.interception.source_ended(&host, &run).await;
        if !super::instance::before_sweep(&host, &run).await {
            return;
        }
    }
    // A Store that does not answer (a failover under way: the first calls after it fail) is
    // tried again with a growing pause for up to `RECLAIM_RETRY`, rather than leaving the
    // run's records — every request to them answered `Unavailable` — to the periodic sweep,
    // three lease TTLs later. The sweep is conditioned on the run's lease row: trying again is
    // safe.
    let until = tokio::time::Instant::now() + RECLAIM_RETRY;
    let mut pause = Duration::from_millis(50);
    loop {
        match location.authority().recovery_sweep(&run).await {
            Ok(Outcome::Applied(report)) => {
                tracing::info!(owner = %run.owner_id, ?report, "recovery-sweep of a dead run");
            }
            Ok(Outcome::Conflict(c)) => {
                tracing::info!(owner = %run.owner_id, ?c, "recovery-sweep found the run alive");
            }
            Err(e) if tokio::time::Instant::now() + pause < until => {
                tracing::info!(owner = %run.owner_id, error = %e, "recovery-sweep failed; trying again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
                continue;
            }
            Err(e) => {
                tracing::warn!(owner = %run.owner_id, error = %e, "recovery-sweep failed; the periodic sweep takes it over")
            }
        }
        return;
    }
}

/// One reclaim of a run in progress on an object host (see [`Recovery::reclaiming`]).
struct Reclaiming {
    host: Arc<ObjectHost>,
    run: HostRun,
}

impl Reclaiming {
    /// Marks `run` as being reclaimed by `host`; `None` when a reclaim of it already runs.
    fn start(host: &Arc<ObjectHost>, run: &HostRun) -> Option<Self> {
        host.recovery
            .reclaiming
            .lock()
            .insert(run.clone())
            .then(|| Reclaiming {
                host: Arc::clone(host),
                run: run.clone(),
            })
    }
}

impl Drop for Reclaiming {
    fn drop(&mut self) {
        self.host.recovery.reclaiming.lock().remove(&self.run);
    }
}

/// How long [`reclaim_dead_run`] tries a recovery-sweep again while the Store fails.
const RECLAIM_RETRY: Duration = Duration::from_secs(15);

/// The periodic sweep of dead runs nobody saw leave (see the module docs), until the node's
/// object host is gone; `period` is the validated `deadRunSweepInterval`.
pub(crate) async fn run(host: Weak<ObjectHost>, period: Duration) {
    let mut from: Option<ScanCursor> = None;
    loop {
        tokio::time::sleep(jittered(period)).await;
        let Some(host) = host.upgrade() else {
            return;
        };
        from = round(&host, from, period).await;
        host.recovery.rounds.fetch_add(1, Ordering::AcqRel);
    }
}

/// `period` plus a random part of up to a quarter of it, so the Object Servers of a mesh do
/// not scan the Store in step.
fn jittered(period: Duration) -> Duration {
    let quarter = period / 4;
    let r = (zlink_store_spi::entropy::uuid_v4().as_u128() % 1024) as u32;
    period.saturating_add(quarter.mul_f64(f64::from(r) / 1024.0))
}

/// One bounded round; returns where the listing goes on next round: past these pages, or
/// these pages again when the round's bounds stopped it before every run listed was judged (a
/// run whose lease was found held is not read again for one `period`, so the next round gets
/// further).
async fn round(
    host: &Arc<ObjectHost>,
    from: Option<ScanCursor>,
    period: Duration,
) -> Option<ScanCursor> {
    let authority = host.location.authority();
    let listed = match authority
        .owner_runs(from.clone(), PAGES_PER_ROUND, PageLimit::LARGEST)
        .await
    {
        Ok(l) => l,
        Err(e) => {
            tracing::debug!(error = %e, "periodic dead-run sweep could not list owner runs");
            return None;
        }
    };
    let (mut reads, mut swept) = (0, 0);
    for run in listed.runs {
        if host.known_live(&run, period) {
            continue;
        }
        if reads == LEASE_READS_PER_ROUND || swept == SWEEPS_PER_ROUND {
            return from;
        }
        reads += 1;
        match authority.lease_ended(&run).await {
            Ok(true) => {}
            Ok(false) => {
                host.recovery.held.lock().insert(run, Instant::now());
                continue;
            }
            Err(e) => {
                tracing::debug!(owner = %run.owner_id, error = %e, "periodic dead-run sweep could not read a lease row");
                continue;
            }
        }
        swept += 1;
        tracing::info!(owner = %run.owner_id, generation = %run.lease_generation, "periodic sweep found a dead run nobody saw leave");
        host.routes.forget_run(&run);
        reclaim_dead_run(Arc::clone(&host.location), Some(Arc::clone(host)), run).await;
    }
    listed.next
}
