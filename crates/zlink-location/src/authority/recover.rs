//! Recovering what a dead host run left behind when no live peer saw it leave the list (after
//! a whole-mesh restart, or a crash nobody observed): the at-access recovery of one object and
//! the bounded listing of the owner runs the authority rows name, which a periodic sweep judges
//! and recovery-sweeps (an extension beyond spec 21, which leaves object failover to a future
//! contract; delete only, like the recovery-sweep).
//!
//! **At access** ([`AuthorityClient::recover_object`]): a record whose owner run is dead is
//! removed with its lookup index and its capacity returned, in the same guarded batch the
//! recovery-sweep uses for each of its rows, limited to this one object: conditioned on the
//! record's first-read version, on the dead run's owner-lease row *as read directly* (Missing,
//! expired by StoreNow, or held at another LeaseGeneration; never judged by enumerating leases,
//! §3.1), on this run's own lease and admission; the dead run's allocation row goes once
//! empty. While the dead run's lease is held by it nothing changes (`Conflict::RunStillLive`):
//! a stalled but live owner is never recovered. A move of the object a live target may still
//! complete (a reservation whose source is the dead run and whose target's lease is held,
//! §8.1) keeps the record (`Conflict::Relocating`), like the recovery-sweep skips it. Two
//! accessors recovering the same record at once: the first batch wins, the second conflicts on
//! the record's version; the creation that follows is decided by Reserve (`Missing` expected),
//! so exactly one new incarnation is made. A `SpotWide` member whose Spot's record names
//! another run moved with its Spot and is kept (`Conflict::ResolvesThroughSpot`); another
//! member's delete is also conditioned on its Spot's record as read (`members.rs`).
//!
//! **Listing owner runs** ([`AuthorityClient::owner_runs`]): at most a given number of pages
//! of one snapshot of the authority rows, continued from a cursor, each distinct owner run
//! once. Rows the Store cannot read or that do not decode are skipped (counted).

use zlink_codec::records::AuthorityRecord;
use zlink_store_spi::entropy::HashSet;
use zlink_store_spi::{
    LocationStore, PageLimit, ReadResult, ScanCursor, ScanRequest, ScanResult, StoreKey,
};

use super::super::admission::AdmissionOp;
use super::super::engine::Expect;
use super::super::error::{InvalidOperation, LocationError};
use super::super::generation::OwnerLeaseGeneration;
use super::super::identity::HostRun;
use super::super::keys::{self, PrivateFamily};
use super::super::lease::{LeaseSeen, lease_key};
use super::AuthorityClient;
use super::handle::AuthorityHandle;
use super::members::MemberCheck;
use super::outcome::{Conflict, Outcome};
use super::rows::ReservationRow;

/// The owner runs found in some pages of one snapshot of the authority rows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OwnerRuns {
    /// Each distinct owner run the rows name, in the order first seen.
    pub runs: Vec<HostRun>,
    /// Authority rows read.
    pub rows: usize,
    /// Rows skipped: keys the Store could not read, rows that do not decode.
    pub skipped: usize,
    /// Where the snapshot continues (`None`: it was read to its end).
    pub next: Option<ScanCursor>,
}

impl AuthorityClient {
    /// The guard on `dead`'s owner-lease row read directly: `None` while that run holds it
    /// unexpired (it is live), else the row's key with the condition that it is unchanged.
    async fn dead_lease_guard(
        &self,
        dead: &HostRun,
    ) -> Result<Option<(StoreKey, Expect)>, LocationError> {
        let key = lease_key(&dead.owner_id)?;
        let read = self.store.read(&key).await?;
        let guard = match &read {
            ReadResult::Missing { .. } => Expect::Missing,
            ReadResult::Found {
                version,
                expires_at,
                store_now,
                ..
            } => {
                let expired = expires_at.is_some_and(|at| at <= *store_now);
                if LeaseSeen::from_read(&read).held_by(dead) && !expired {
                    return Ok(None);
                }
                Expect::Version(version.clone())
            }
        };
        Ok(Some((key, guard)))
    }

    /// Recovers the object `handle` names when its owner run is dead: see the module docs.
    /// `Conflict::RunStillLive` while that run's lease is held by it, `Conflict::Relocating`
    /// while a live target may complete its move, `Conflict::Record` when the record changed
    /// since it was read. A record of this host's current run is refused
    /// (`InvalidOperation::RecoveryOfOwnRun`). A record of an *earlier* run of this host (its
    /// lease was lost and taken over under a higher generation) is recovered like any dead
    /// run's, conditioned on this run's lease — the one row both runs share, so while it is
    /// held the earlier run is dead (as [`recovery_sweep`](Self::recovery_sweep) does); the
    /// caller makes sure none of that run's activations is still open here.
    pub async fn recover_object(
        &self,
        handle: &AuthorityHandle,
    ) -> Result<Outcome<()>, LocationError> {
        let admission = self.gate.admit(AdmissionOp::AuthorityChange)?;
        let dead = handle.owner();
        let guard = if dead.owner_id == admission.run.owner_id {
            if dead.lease_generation >= admission.run.lease_generation {
                return Err(InvalidOperation::RecoveryOfOwnRun.into());
            }
            // This run's lease is in every batch's plan: no guard of its own.
            None
        } else {
            let Some(guard) = self.dead_lease_guard(dead).await? else {
                return Ok(Outcome::Conflict(Conflict::RunStillLive));
            };
            Some(guard)
        };
        // A move of this incarnation a live target may still complete keeps the record.
        let reservations = self
            .scan_all(&PrivateFamily::CapacityReservation.prefix())
            .await?;
        for item in reservations.items {
            let Ok(row) = ReservationRow::decode(&item.bytes) else {
                continue;
            };
            if &row.source == dead
                && &row.id == handle.id()
                && row.kind == handle.kind()
                && self.lease_held(&row.target).await?
            {
                return Ok(Outcome::Conflict(Conflict::Relocating));
            }
        }
        // A member that moved with its Spot is not the dead run's (`members.rs`).
        let mut guards: Vec<_> = guard.into_iter().collect();
        match self
            .member_check(handle, &mut super::members::SpotReads::default())
            .await?
        {
            MemberCheck::NotAMember => {}
            MemberCheck::Moved(_) | MemberCheck::Unreadable => {
                return Ok(Outcome::Conflict(Conflict::ResolvesThroughSpot));
            }
            MemberCheck::Guard(g) => guards.push(g),
        }
        let mut op = self.delete_op(
            handle,
            &admission.run,
            Some(AdmissionOp::AuthorityChange),
            guards,
        )?;
        op.plan.drop_empty.push(handle.node());
        let outcome = self.run_record_op(handle.id(), op).await?.map(|_| ());
        if outcome.is_applied() {
            tracing::info!(id = %handle.id(), owner = %dead.owner_id, generation = %dead.lease_generation, "recovered an object whose owner run is dead");
        }
        Ok(outcome)
    }

    /// The distinct owner runs named by at most `pages` pages (of at most `limit` rows) of one
    /// snapshot of the authority rows, starting at `from` (`None`: a new snapshot). A cursor
    /// whose snapshot is gone starts a new snapshot once. See the module docs.
    pub async fn owner_runs(
        &self,
        from: Option<ScanCursor>,
        pages: usize,
        limit: PageLimit,
    ) -> Result<OwnerRuns, LocationError> {
        let prefix = keys::authority_prefix();
        let mut out = OwnerRuns::default();
        let mut seen = HashSet::default();
        let mut request = match from {
            Some(c) => ScanRequest::next(prefix.clone(), limit, c),
            None => ScanRequest::first(prefix.clone(), limit),
        };
        let mut restarted = false;
        let mut read = 0;
        while read < pages {
            let page = match self.store.scan(&request).await? {
                ScanResult::Page(p) => p,
                ScanResult::Expired if !restarted && request.cursor.is_some() => {
                    restarted = true;
                    request = ScanRequest::first(prefix.clone(), limit);
                    continue;
                }
                ScanResult::Expired => return Err(LocationError::Contended),
            };
            read += 1;
            out.skipped += page.unreadable.len();
            for item in page.items {
                out.rows += 1;
                let run = AuthorityRecord::decode(&item.bytes).ok().and_then(|r| {
                    Some(HostRun {
                        lease_generation: OwnerLeaseGeneration::from_codec(
                            r.owner_lease_generation,
                        )?,
                        owner_id: r.owner_id,
                    })
                });
                match run {
                    Some(run) => {
                        if seen.insert(run.clone()) {
                            out.runs.push(run);
                        }
                    }
                    None => out.skipped += 1,
                }
            }
            match page.next_cursor {
                Some(c) => request.cursor = Some(c),
                None => {
                    out.next = None;
                    return Ok(out);
                }
            }
        }
        out.next = request.cursor;
        Ok(out)
    }
}
