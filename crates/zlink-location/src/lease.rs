//! The host's owner lease (spec 21 §3.1, §5): acquire, renew, release and takeover (the renew
//! loop that keeps the admission deadline fresh is `renew.rs`).
//!
//! - **Acquire** issues a new OwnerLeaseGeneration from `zlink:v11:owner-counter` in the *same*
//!   conditional batch that creates the lease row (`Missing(lease)` + the counter's version).
//! - **Renew** re-puts the same record under `Version(lease)` with the TTL as retention; the
//!   generation is kept. A conflict is re-checked with an exact read: the row may hold our
//!   record under a version we did not see (an earlier renew whose answer was lost: adopted),
//!   under a version this run wrote *earlier* in its term (a Store that failed over to a
//!   replica missing the later renews: data loss, never adopted), or be gone. The versions of
//!   the term are kept ([`History`]); a version never seen is adopted only if a renew since
//!   the current version went unanswered — else only a rollback can explain it.
//! - **Takeover**: once the row is gone (expired), acquiring again issues a *new* generation
//!   for the same OwnerId.
//! - **Release** deletes the row under `Version(lease)` and keeps the generation.
//! - **Store data loss** ([`StoreEpoch`]): a row that vanished while held, a row rolled back to
//!   an earlier version of this run, a counter that answers at or below a generation this
//!   host holds, or a write of this host no longer in the Store (`written.rs`) is a lost
//!   lease. Acquire issues strictly above every LeaseGeneration this host has seen, and raises
//!   the ObjectGeneration and AuthorityOwnerGeneration counters past the highest this host has
//!   seen in the same batch, so no host recreating an object after the loss hands out a
//!   generation that goes back.
//!
//! Every successful register/read/renew refreshes the host-wide [`AdmissionGate`] with the
//! local monotonic time taken *before* the request.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use zlink_codec::LogicalKey;
use zlink_codec::records::OwnerLeaseRecord;
use zlink_store_spi::{
    Condition, DynLocationStore, LocationStore, Mutation, ReadResult, Retention, StoreKey,
    StoreVersion, WriteRequest, WriteResult,
};

use super::admission::AdmissionGate;
use super::counters::CounterRow;
use super::epoch::StoreEpoch;
use super::error::{InvalidOperation, LocationError, put_version};
use super::generation::{GenerationKind, OwnerLeaseGeneration};
use super::identity::{HostRun, OwnerId};
use super::keys;
use super::written::WrittenBook;

mod book;
mod history;

pub(crate) use book::{LeaseBook, LeaseSeen};
use history::History;

/// How many times acquire re-reads the owner counter after losing a race for it.
const ACQUIRE_ATTEMPTS: usize = 256;

/// How many deletes a release tries while a renew whose reply was lost keeps moving the
/// version.
const RELEASE_ATTEMPTS: usize = 4;

/// The lease row key of an owner.
pub(crate) fn lease_key(owner: &OwnerId) -> Result<StoreKey, LocationError> {
    Ok(keys::store_key(&LogicalKey::owner_lease(owner))?)
}

/// One holding of the owner lease: the run and which acquisition of this host it is. Every
/// acquire (start, takeover, re-acquire after Store data loss) is a new term, so a follower
/// tells a new holding from the one it knew even if the run looked the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseTerm {
    /// The run held.
    pub run: HostRun,
    /// This host's acquisition count, from 1 (the lease acquired at start).
    pub term: u64,
}

/// The result of one renew.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RenewOutcome {
    /// The lease was extended; the admission deadline moved forward.
    Renewed {
        /// The new local admission deadline.
        deadline: Duration,
    },
    /// The lease row is gone (expired or deleted): the gate is closed. Acquire again to take
    /// over under a new generation.
    Lost,
    /// The lease was released (the host shuts down): nothing is renewed and nothing is taken
    /// over any more.
    Released,
}

/// What an exact re-read of our lease row found.
enum Reread {
    /// Our record (adopted).
    Ours(HostRun),
    /// Our record of a holding that was lost: the condition to replace it under.
    Lost(Condition),
    /// Missing or not ours: the condition for the next attempt.
    Other(Condition),
}

#[derive(Debug)]
struct Held {
    run: HostRun,
    version: StoreVersion,
    bytes: Vec<u8>,
}

/// The owner lease of one host.
#[derive(Debug)]
pub(crate) struct OwnerLease {
    store: Arc<dyn DynLocationStore>,
    gate: Arc<AdmissionGate>,
    book: Arc<LeaseBook>,
    owner_id: OwnerId,
    key: StoreKey,
    retention: Retention,
    held: Mutex<Option<Held>>,
    epoch: Arc<StoreEpoch>,
    /// How many times this host acquired the lease.
    terms: std::sync::atomic::AtomicU64,
    /// The term held (`None` while lost): a takeover is seen here.
    runs: tokio::sync::watch::Sender<Option<LeaseTerm>>,
    /// Set by [`release`](Self::release) (cleared by an explicit [`acquire`](Self::acquire)):
    /// the renew loop neither renews nor takes over once it is set.
    released: std::sync::atomic::AtomicBool,
    /// Held by each renew, takeover and release for its whole Store exchange, so a release
    /// waits for a renew in flight (whose write would otherwise conflict with the delete and
    /// read as a lost lease, or move the version the delete is conditioned on).
    turn: tokio::sync::Mutex<()>,
    /// The term's lease row versions.
    history: Mutex<History>,
    /// The writes of this host awaiting verification, and the stamps renews take.
    written: Arc<WrittenBook>,
    /// The stamp of the last successful renew whose writes before it are not verified yet
    /// (taken by the renew loop).
    to_verify: Mutex<Option<u64>>,
}

impl OwnerLease {
    pub(crate) fn new(
        store: Arc<dyn DynLocationStore>,
        gate: Arc<AdmissionGate>,
        book: Arc<LeaseBook>,
        epoch: Arc<StoreEpoch>,
        written: Arc<WrittenBook>,
        owner_id: OwnerId,
        retention: Retention,
    ) -> Result<Self, LocationError> {
        let key = lease_key(&owner_id)?;
        Ok(OwnerLease {
            store,
            gate,
            book,
            owner_id,
            key,
            retention,
            held: Mutex::new(None),
            epoch,
            terms: std::sync::atomic::AtomicU64::new(0),
            runs: tokio::sync::watch::Sender::new(None),
            released: std::sync::atomic::AtomicBool::new(false),
            turn: tokio::sync::Mutex::new(()),
            history: Mutex::new(History::default()),
            written,
            to_verify: Mutex::new(None),
        })
    }

    /// This host's OwnerId.
    pub(crate) fn owner_id(&self) -> &OwnerId {
        &self.owner_id
    }

    /// The host run currently held, if any.
    pub(crate) fn run(&self) -> Option<HostRun> {
        self.held.lock().as_ref().map(|h| h.run.clone())
    }

    /// Follows the term held: `None` while the lease is lost, then the term of a takeover (a
    /// new acquisition, under a new LeaseGeneration). Only changes are sent.
    pub(crate) fn watch_terms(&self) -> tokio::sync::watch::Receiver<Option<LeaseTerm>> {
        self.runs.subscribe()
    }

    fn announce(&self, term: Option<LeaseTerm>) {
        self.runs.send_if_modified(|current| {
            if *current == term {
                return false;
            }
            *current = term;
            true
        });
    }

    /// Adopts `run` as a new term (an acquire): the earlier term's versions and unverified
    /// writes are forgotten (the takeover reclaims that run's rows).
    fn adopt_new(&self, run: HostRun, version: StoreVersion, bytes: Vec<u8>) {
        self.epoch
            .observe(GenerationKind::OwnerLease, run.lease_generation.get());
        let term = self.terms.fetch_add(1, std::sync::atomic::Ordering::AcqRel) + 1;
        self.written.new_term();
        *self.history.lock() = History::default();
        *self.to_verify.lock() = None;
        self.keep(run.clone(), version, bytes);
        self.announce(Some(LeaseTerm { run, term }));
    }

    /// Keeps holding `run` under `version` (a renew, or an acquire recovered from a read: the
    /// term is unchanged if the run is).
    fn adopt(&self, run: HostRun, version: StoreVersion, bytes: Vec<u8>) {
        let same = self.run().as_ref() == Some(&run);
        if same {
            self.keep(run, version, bytes);
        } else {
            self.adopt_new(run, version, bytes);
        }
    }

    fn keep(&self, run: HostRun, version: StoreVersion, bytes: Vec<u8>) {
        self.history
            .lock()
            .push(version.clone(), self.written.mark());
        self.book.set(
            self.key.clone(),
            LeaseSeen {
                holder: Some(run.clone()),
                version: Some(version.clone()),
            },
        );
        *self.held.lock() = Some(Held {
            run,
            version,
            bytes,
        });
    }

    fn lose(&self) {
        self.gate.close();
        *self.held.lock() = None;
        self.announce(None);
        self.book.set(
            self.key.clone(),
            LeaseSeen {
                holder: None,
                version: None,
            },
        );
    }

    /// Acquires owner eligibility: issues a new OwnerLeaseGeneration and creates the lease row
    /// in one conditional batch. Also the takeover path once the row has expired.
    ///
    /// The generation is strictly above every LeaseGeneration this host has seen, and the
    /// authority counters found behind what this host has seen (Store data loss) are raised
    /// past it in the same batch.
    ///
    /// `GenerationExhausted` writes nothing (and repeats identically).
    pub(crate) async fn acquire(&self) -> Result<HostRun, LocationError> {
        let _turn = self.turn.lock().await;
        self.released
            .store(false, std::sync::atomic::Ordering::SeqCst);
        self.acquire_in_turn().await
    }

    /// The renew loop's takeover after a lost lease: [`acquire`](Self::acquire), unless the
    /// lease was released meanwhile (`None`: the host shuts down, nothing is taken over).
    pub(crate) async fn take_over(&self) -> Result<Option<HostRun>, LocationError> {
        let _turn = self.turn.lock().await;
        if self.released.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(None);
        }
        self.acquire_in_turn().await.map(Some)
    }

    async fn acquire_in_turn(&self) -> Result<HostRun, LocationError> {
        let counter_key = GenerationKind::OwnerLease.counter_key();
        // A record of ours at or below this generation is a holding that was lost (Store data
        // loss noticed while the row survived): replaced under its version, never adopted.
        let lost_up_to = self.epoch.highest(GenerationKind::OwnerLease);
        let mut lease_condition = Condition::Missing(self.key.clone());
        let mut last_error = None;
        for _ in 0..ACQUIRE_ATTEMPTS {
            let t0 = self.gate.now();
            let seen = self.epoch.highest(GenerationKind::OwnerLease);
            let counter = self.epoch.checked(
                CounterRow::from_read(
                    GenerationKind::OwnerLease,
                    &self.store.read(&counter_key).await?,
                )?,
                seen,
            );
            let (issued, next) = counter.issue(1)?;
            let raises = self.behind_authority_counters().await?;
            let generation =
                OwnerLeaseGeneration::new(issued).ok_or(LocationError::GenerationExhausted {
                    kind: GenerationKind::OwnerLease,
                })?;
            let run = HostRun {
                owner_id: self.owner_id.clone(),
                lease_generation: generation,
            };
            let bytes = OwnerLeaseRecord {
                owner_id: self.owner_id.clone(),
                lease_generation: generation.to_codec(),
            }
            .encode()
            .map_err(InvalidOperation::RecordOutOfBounds)?;
            let mut conditions = vec![lease_condition.clone(), counter.condition()];
            let mut mutations = vec![
                counter.put(next),
                Mutation::put_expiring(self.key.clone(), bytes.clone(), self.retention),
            ];
            for raised in &raises {
                conditions.push(raised.condition());
                mutations.push(raised.put(raised.next));
            }
            // The run's index marker: every record of this run will be in its index.
            mutations.push(crate::authority::run_marker_put(&run)?);
            let request = WriteRequest::new(conditions, mutations)?;
            match self.store.write(&request).await {
                Ok(WriteResult::Applied {
                    put_versions,
                    store_now,
                }) => {
                    let version = put_version(&put_versions, 1)?;
                    self.gate
                        .observe(&run, t0, store_now, store_now.plus(self.retention));
                    self.adopt_new(run.clone(), version, bytes);
                    // Handled: the lease is held under a generation above any seen and the
                    // counters are past what this host holds.
                    self.epoch.take_loss();
                    tracing::info!(owner = %self.owner_id, generation = %generation, raised = raises.len(), "owner lease acquired");
                    return Ok(run);
                }
                Ok(WriteResult::Conflict { .. }) => {
                    // Another host took the counter value (or our row still exists): re-check.
                    match self.recover_from_read(t0, lost_up_to).await? {
                        Reread::Ours(run) => return Ok(run),
                        Reread::Lost(c) | Reread::Other(c) => lease_condition = c,
                    }
                }
                Err(e) if e.outcome_unknown() => {
                    // Reconstruct: if the row now holds our record, the write happened.
                    match self.recover_from_read(t0, lost_up_to).await? {
                        Reread::Ours(run) => return Ok(run),
                        Reread::Lost(c) | Reread::Other(c) => lease_condition = c,
                    }
                    last_error = Some(e);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(last_error.map_or(LocationError::Contended, LocationError::from))
    }

    /// The ObjectGeneration and AuthorityOwnerGeneration counters that answer at or below a
    /// generation this host has seen, each raised to one past it (read only once this host
    /// has seen one of the kind).
    async fn behind_authority_counters(&self) -> Result<Vec<CounterRow>, LocationError> {
        let mut raised = Vec::new();
        for kind in [GenerationKind::Object, GenerationKind::AuthorityOwner] {
            let seen = self.epoch.highest(kind);
            if seen == 0 {
                continue;
            }
            let row = CounterRow::from_read(kind, &self.store.read(&kind.counter_key()).await?)?;
            if StoreEpoch::is_behind(&row, seen) {
                raised.push(self.epoch.checked(row, seen));
            }
        }
        Ok(raised)
    }

    /// Reads our lease row; if it holds a record of ours above generation `lost_up_to`, adopts
    /// it (refreshing the deadline from this read) and returns its run; else the condition the
    /// row is as read under.
    async fn recover_from_read(
        &self,
        t0: Duration,
        lost_up_to: u64,
    ) -> Result<Reread, LocationError> {
        let read = self.store.read(&self.key).await?;
        let seen = LeaseSeen::from_read(&read);
        let as_read = match &read {
            ReadResult::Missing { .. } => Condition::Missing(self.key.clone()),
            ReadResult::Found { version, .. } => {
                Condition::Version(self.key.clone(), version.clone())
            }
        };
        if let (
            Some(run),
            ReadResult::Found {
                bytes,
                version,
                expires_at,
                store_now,
            },
        ) = (seen.holder.clone(), &read)
        {
            if run.owner_id == self.owner_id {
                if run.lease_generation.get() <= lost_up_to {
                    return Ok(Reread::Lost(as_read));
                }
                let expires = expires_at.unwrap_or(*store_now);
                self.gate.observe(&run, t0, *store_now, expires);
                self.adopt(run.clone(), version.clone(), bytes.to_vec());
                return Ok(Reread::Ours(run));
            }
        }
        // Missing (the next attempt creates it), or not ours (left as it is: the next attempt
        // expects it missing again).
        Ok(match read {
            ReadResult::Missing { .. } => Reread::Other(as_read),
            ReadResult::Found { .. } => Reread::Other(Condition::Missing(self.key.clone())),
        })
    }

    /// Extends the lease (same generation). On a lost row the gate closes and `Lost` is
    /// returned; a Store error leaves the deadline where it was (it is never extended without
    /// a successful observation). After a successful renew the writes acknowledged before it
    /// was sent are due for verification ([`take_verification`](Self::take_verification)).
    pub(crate) async fn renew(&self) -> Result<RenewOutcome, LocationError> {
        let _turn = self.turn.lock().await;
        if self.released.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(RenewOutcome::Released);
        }
        if self.epoch.take_loss() && self.held.lock().is_some() {
            tracing::warn!(owner = %self.owner_id, "Store data loss noticed: the owner lease is treated as lost");
            self.lose();
            return Ok(RenewOutcome::Lost);
        }
        let (run, version, bytes) = {
            let held = self.held.lock();
            let Some(h) = held.as_ref() else {
                return Ok(RenewOutcome::Lost);
            };
            (h.run.clone(), h.version.clone(), h.bytes.clone())
        };
        let t0 = self.gate.now();
        let stamp = self.written.mark();
        // Unanswered until an answer arrives: a renew dropped by the loop's time-out, or one
        // whose answer is lost, may have applied under a version this run never sees.
        let unanswered_before = {
            let mut h = self.history.lock();
            let before = h.unanswered_since;
            h.unanswered_since = Some(before.unwrap_or(stamp));
            before
        };
        let request = WriteRequest::new(
            vec![Condition::Version(self.key.clone(), version)],
            vec![Mutation::put_expiring(
                self.key.clone(),
                bytes.clone(),
                self.retention,
            )],
        )?;
        let outcome = self.store.write(&request).await;
        match outcome {
            Ok(WriteResult::Applied {
                put_versions,
                store_now,
            }) => {
                let version = put_version(&put_versions, 0)?;
                let deadline =
                    self.gate
                        .observe(&run, t0, store_now, store_now.plus(self.retention));
                self.history.lock().unanswered_since = None;
                self.adopt(run, version, bytes);
                *self.to_verify.lock() = Some(stamp);
                Ok(RenewOutcome::Renewed { deadline })
            }
            Ok(WriteResult::Conflict { .. }) => {
                // Not applied: only the earlier unanswered renews can have moved the version.
                self.history.lock().unanswered_since = unanswered_before;
                self.after_conflict(&run, t0, unanswered_before).await
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The stamp of the last successful renew whose earlier writes are due for verification
    /// (`written.rs`), taken once.
    pub(crate) fn take_verification(&self) -> Option<u64> {
        self.to_verify.lock().take()
    }

    /// Every write acknowledged before `stamp` was verified: the versions written before it
    /// no longer need keeping past [`HISTORY_KEPT`].
    pub(crate) fn verified_before(&self, stamp: u64) {
        let mut h = self.history.lock();
        h.verified_before = h.verified_before.max(stamp);
    }

    /// A renew that conflicted: reads the row once.
    ///
    /// - Our record under a version this run wrote earlier in the term, or under a generation
    ///   below ours: the Store rolled back (a failover to a replica that lacks the later
    ///   renews). Lost, never adopted.
    /// - Our record under a version never seen, with a renew since the current version
    ///   unanswered (`unanswered_since`): that renew applied and its answer was lost. Adopted,
    ///   the deadline refreshed from this read, and the writes acknowledged before that renew
    ///   was sent are due for verification.
    /// - Our record under a version never seen with every renew answered, or a generation of
    ///   ours this run did not issue: only a Store that lost writes explains it. Lost.
    /// - Missing, or another owner's: gone before this host's admission deadline (which ends
    ///   before the row's expiry) is Store data loss, after it an expired lease. Lost.
    async fn after_conflict(
        &self,
        run: &HostRun,
        t0: Duration,
        unanswered_since: Option<u64>,
    ) -> Result<RenewOutcome, LocationError> {
        let read = self.store.read(&self.key).await?;
        let seen = LeaseSeen::from_read(&read);
        if let (
            Some(holder),
            ReadResult::Found {
                bytes,
                version,
                expires_at,
                store_now,
            },
        ) = (seen.holder, &read)
        {
            if holder.owner_id == self.owner_id {
                let (earlier, current) = {
                    let h = self.history.lock();
                    (
                        h.earlier(version),
                        h.versions.back().is_some_and(|(v, _)| v == version),
                    )
                };
                let rollback = if holder != *run {
                    Some("the owner lease row holds another generation of this host")
                } else if earlier {
                    Some("the owner lease row is back at a version this run wrote earlier")
                } else if current {
                    None
                } else if unanswered_since.is_none() {
                    Some("the owner lease row holds a version this run never wrote")
                } else {
                    None
                };
                if let Some(why) = rollback {
                    tracing::warn!(owner = %self.owner_id, generation = %run.lease_generation, found = %holder.lease_generation, %version, "Store data loss: {why}");
                    self.epoch.count_loss();
                    self.lose();
                    return Ok(RenewOutcome::Lost);
                }
                // A renew whose answer was lost: adopted, the deadline refreshed from this read.
                let expires = expires_at.unwrap_or(*store_now);
                let deadline = self.gate.observe(run, t0, *store_now, expires);
                self.history.lock().unanswered_since = None;
                self.adopt(holder, version.clone(), bytes.to_vec());
                if let Some(since) = unanswered_since {
                    *self.to_verify.lock() = Some(since);
                }
                return Ok(RenewOutcome::Renewed { deadline });
            }
        }
        if self.gate.deadline().is_some_and(|d| d > t0) {
            // Gone before this host's own admission deadline, which ends before the row's
            // expiry: the Store lost it (spec 21 §5 keeps it until then).
            tracing::warn!(owner = %self.owner_id, generation = %run.lease_generation, "Store data loss: the owner lease row vanished while held");
            self.epoch.count_loss();
        } else {
            tracing::warn!(owner = %self.owner_id, generation = %run.lease_generation, "owner lease lost");
        }
        self.lose();
        Ok(RenewOutcome::Lost)
    }

    /// Releases the lease: closes the gate first (no new work) and stops the renew loop
    /// (no renew and no takeover after this), waits for a renew in flight, then deletes the
    /// row under its version. A delete that conflicts reads the row once more: still this
    /// run's (a renew whose reply was lost moved its version), it is deleted under the version
    /// read. The generation is not changed.
    pub(crate) async fn release(&self) -> Result<(), LocationError> {
        self.released
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.gate.close();
        let _turn = self.turn.lock().await;
        let (run, mut version) = {
            let held = self.held.lock();
            match held.as_ref() {
                Some(h) => (h.run.clone(), h.version.clone()),
                None => return Ok(()),
            }
        };
        let mut result = Ok(());
        for _ in 0..RELEASE_ATTEMPTS {
            let request = WriteRequest::new(
                vec![Condition::Version(self.key.clone(), version.clone())],
                vec![Mutation::Delete(self.key.clone())],
            )?;
            match self.store.write(&request).await {
                Ok(WriteResult::Conflict { .. }) => match self.store.read(&self.key).await {
                    Ok(read) => match (LeaseSeen::from_read(&read).holder, read) {
                        (Some(holder), ReadResult::Found { version: now, .. }) if holder == run => {
                            version = now;
                        }
                        // Gone, or another run's: nothing of ours to delete.
                        _ => break,
                    },
                    Err(e) => {
                        result = Err(e.into());
                        break;
                    }
                },
                Ok(_) => break,
                Err(e) => {
                    result = Err(e.into());
                    break;
                }
            }
        }
        *self.held.lock() = None;
        self.announce(None);
        self.book.forget(&self.key);
        result
    }

    /// The expiry the Store reports for our row right now, if it exists.
    #[cfg(test)]
    pub(crate) async fn store_expiry(
        &self,
    ) -> Result<Option<(zlink_store_spi::StoreTime, zlink_store_spi::StoreTime)>, LocationError>
    {
        match self.store.read(&self.key).await? {
            ReadResult::Found {
                expires_at: Some(e),
                store_now,
                ..
            } => Ok(Some((store_now, e))),
            _ => Ok(None),
        }
    }
}
