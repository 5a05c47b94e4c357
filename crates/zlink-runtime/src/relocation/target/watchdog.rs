//! The target's watch over each unit it receives (21 §8.1, §9.1 failure table, §10; issue
//! 20 item 8): a source that crashed in the middle of a move sends neither ready nor abort,
//! and its own cancel path (which releases the target capacity) never runs. One task per
//! Restore checks, every `pollingInterval` (a sleep, never a busy loop), whether the unit
//! ended, and otherwise whether the source run's owner lease is gone (its lease row read
//! directly, judged by Store time: [`AuthorityClient::lease_ended`]), whether this host's own
//! run that received the Restore ended (a takeover under a new run after a loss of Store data:
//! the reservation's target is the ended run, so no NewOwner through it applies, and its
//! temporary queue would hold the object's messages here until the deadline), or whether the
//! unit's deadline passed without a ready. Any of these *abandons* the unit here, under its
//! stage lock so no ready or cutover interleaves: the reservation is released as its row
//! stands now (conditioned on the row's version as read; a Store failure is read again and
//! retried until `storeFailureGrace`), and the prepared objects and their temporary queues are
//! dropped without running a message — unless the release did not apply and the record already names
//! this target for the same incarnation, in which case the objects go live and serve (the
//! move completed here). A unit that got its ready is left to its commit (`commit.rs`: the
//! cutover, or the cutover wait running NewOwner here), which releases the reservation itself
//! when its NewOwner does not apply.
//!
//! The deadline is [`ABANDONED_RESTORE`](super::ABANDONED_RESTORE) after the Restore arrived,
//! renewed once the unit is prepared: longer than the source waits for each answer, so a live
//! source always cancels (or sends ready) first. A Restore command that carries the move's
//! deadline (`deadlineMs`: a host Relocate's, or an aggregate's seal bound) ends the wait at
//! that deadline if it comes first: past it the source no longer completes the move, and the
//! target capacity goes back then rather than a minute later. Only a unit that never got its
//! ready is abandoned, so a source whose ready comes later finds nothing prepared and
//! cancels.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zlink_location::{AuthorityClient, AuthorityRead, Outcome, OwnerChangeRead, TargetReservation};

use super::commit::{Target, conclude};
use super::{Spec, Stage};
use crate::objects::host::{ObjectHost, store_failure};
use crate::relocation::MovesOf;

/// The pause between two attempts at a release whose outcome is unknown.
const RELEASE_PAUSE: Duration = Duration::from_millis(50);

/// Why a unit is abandoned here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Abandoned {
    /// The source run's owner lease is gone.
    SourceGone,
    /// The unit's deadline passed without a ready.
    Deadline,
    /// This host's run that received the Restore ended (its lease was taken over under a new
    /// run after a loss of Store data): the reservation names the ended run as its target, so
    /// no NewOwner through it can apply any more.
    TargetRunEnded,
}

/// How a release of the target capacity ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Released {
    /// The reservation row is deleted and the capacity returned.
    Applied,
    /// The row is gone or changed (released by the source or a sweep, or consumed by a
    /// NewOwner): nothing was released here.
    NotApplied,
    /// Not settled before the deadline (the Store kept failing).
    Unknown,
}

/// How long a Restore, or a prepared unit, waits here for its ready at most.
fn longest_wait(host: &ObjectHost) -> Duration {
    host.relocations()
        .probe
        .restore_wait()
        .unwrap_or(super::ABANDONED_RESTORE)
}

/// Until when a Restore that arrived (or was prepared) at `now` waits here for its ready: the
/// longest wait, and never past the move's `deadline` the Restore command carried.
pub(super) fn wait_until(host: &ObjectHost, now: Instant, deadline: Option<Instant>) -> Instant {
    let longest = now + longest_wait(host);
    deadline.map_or(longest, |d| d.min(longest))
}

/// The reservation a Restore of `spec` carries, bound to this node as its target (`None`
/// when it does not decode or this node is not in its own discovery list).
pub(super) fn reservation_of(host: &ObjectHost, spec: &Spec) -> Option<TargetReservation> {
    let wire = match spec {
        Spec::Single { cmd, .. } => &cmd.reservation,
        Spec::SpotWide(cmd) => &cmd.reservation,
    };
    let target = host.instances.own_target(host).ok()?;
    TargetReservation::from_wire(wire, target).ok()
}

/// Starts the watch over the Restore `relocation` (see the module docs).
pub(super) fn watch(host: Arc<ObjectHost>, relocation: u128) {
    tokio::spawn(async move {
        let every = host.location.options().polling_interval;
        loop {
            let Some(until) = host
                .relocations()
                .incoming
                .lock()
                .get(&relocation)
                .map(|i| i.until)
            else {
                return;
            };
            tokio::time::sleep_until((Instant::now() + every).min(until)).await;
            let Some((stage, until, source, run)) = host
                .relocations()
                .incoming
                .lock()
                .get(&relocation)
                .map(|i| {
                    let source = reservation_of(&host, &i.spec).map(|r| r.source().clone());
                    (Arc::clone(&i.stage), i.until, source, i.run.clone())
                })
            else {
                return;
            };
            match &*stage.lock().await {
                Stage::Done(_) => return,
                Stage::Prepared(p) if p.ready => return,
                _ => {}
            }
            let why = if Instant::now() >= until {
                Some(Abandoned::Deadline)
            } else if host.location.host_run() != run {
                Some(Abandoned::TargetRunEnded)
            } else {
                match &source {
                    Some(run) => match host.location.authority().lease_ended(run).await {
                        Ok(true) => Some(Abandoned::SourceGone),
                        Ok(false) => None,
                        // Never guessed: judged again at the next check.
                        Err(e) => {
                            tracing::debug!(relocation, error = %e, "relocation target: the source's lease could not be read");
                            None
                        }
                    },
                    None => None,
                }
            };
            if let Some(why) = why {
                abandon(&host, relocation, why).await;
                return;
            }
        }
    });
}

/// Ends the unit `relocation` that will get no ready (see the module docs). A unit that got
/// its ready or ended meanwhile is left as it is.
async fn abandon(host: &Arc<ObjectHost>, relocation: u128, why: Abandoned) {
    let Some((stage, target, reservation, queued)) = host
        .relocations()
        .incoming
        .lock()
        .get(&relocation)
        .map(|i| {
            (
                Arc::clone(&i.stage),
                Target::of(&i.spec),
                reservation_of(host, &i.spec),
                super::queued_key(&i.spec),
            )
        })
    else {
        return;
    };
    let mut stage = stage.lock().await;
    let (group, reservation) = match std::mem::replace(&mut *stage, Stage::Done(None)) {
        Stage::Receiving(_) => (Vec::new(), reservation),
        Stage::Prepared(p) if !p.ready => (p.group, Some(p.reservation)),
        other => {
            *stage = other;
            return;
        }
    };
    let authority = host.location.authority();
    let until = Instant::now() + host.location.options().store_failure_grace;
    let released = match &reservation {
        Some(r) => release(authority, r, until).await,
        None => Released::Unknown,
    };
    // A release that did not apply may mean the unit moved here after all: its prepared
    // objects are never dropped then.
    let owned = match (released, &target, &reservation) {
        (Released::Applied, ..) => None,
        (_, Some(t), Some(r)) if !group.is_empty() => names_this_target(authority, t, r).await,
        _ => None,
    };
    if owned.is_none() {
        if let Some(key) = queued {
            host.relocations().abandon(&key);
        }
    }
    let participants = group.len();
    let aggregate = target.as_ref().is_some_and(|t| t.root.is_some());
    let committed = conclude(host, relocation, &mut stage, group, owned, aggregate).await;
    drop(stage);
    match committed {
        Some(_) => tracing::warn!(
            relocation,
            ?why,
            participants,
            "relocation abandoned by its source, but the record names this node: serving here"
        ),
        None => tracing::warn!(
            relocation,
            ?why,
            ?released,
            participants,
            "relocation abandoned by its source: target reservation released, prepared objects dropped"
        ),
    }
}

/// Releases the target capacity the ended run `source` secured on this node for moves whose
/// Restore never arrived here (spec 21 §9.1 "Source terminates during Preparing or capture":
/// the move is cancelled). A source that ends between securing the target and its Restore
/// reaching this node leaves a reservation no unit here watches, and the recovery sweep leaves
/// a reservation whose target is live to that target: without this, the object's record stays
/// moving and every message to it is answered `Unavailable` for good. The source's lease row is
/// read first (judged by Store time: a live source is left alone); a reservation a unit here
/// holds is left to its watch ([`watch`]); each other one is released as its row stands now
/// ([`release`]), so a Restore arriving later finds its reservation gone and the move fails.
pub(crate) async fn release_from_ended_source(
    host: &Arc<ObjectHost>,
    source: &zlink_location::HostRun,
) {
    let authority = host.location.authority();
    match authority.lease_ended(source).await {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => {
            tracing::debug!(owner = %source.owner_id, error = %e, "relocation target: an ended source's lease could not be read; its reservations are left to a later reclaim");
            return;
        }
    }
    let Ok(own) = host.instances.own_target(host) else {
        return;
    };
    let found = match authority.reservations_from(source, &own).await {
        Ok(found) => found,
        Err(e) => {
            tracing::debug!(owner = %source.owner_id, error = %e, "relocation target: an ended source's reservations could not be listed");
            return;
        }
    };
    let until = Instant::now() + host.location.options().store_failure_grace;
    for reservation in found {
        let held = host.relocations().incoming.lock().values().any(|i| {
            reservation_of(host, &i.spec)
                .is_some_and(|r| r.reservation_id() == reservation.reservation_id())
        });
        if held {
            continue;
        }
        let released = release(authority, &reservation, until).await;
        tracing::warn!(
            owner = %source.owner_id,
            id = %reservation.id(),
            ?released,
            "relocation target: capacity an ended source secured here for a move it never brought released"
        );
    }
}

/// The record of `target`, when it names `reservation`'s target (this node) for the same
/// incarnation (read once; a failed read is not taken as naming it).
async fn names_this_target(
    authority: &AuthorityClient,
    target: &Target,
    reservation: &TargetReservation,
) -> Option<zlink_location::AuthorityHandle> {
    match authority.read(target.kind, &target.id).await {
        Ok(AuthorityRead::Found { handle, .. }) => {
            let seen = if target.root.is_some() {
                reservation.owner_change_read_of_aggregate(&handle)
            } else {
                reservation.owner_change_read(&handle)
            };
            (seen == OwnerChangeRead::Applied).then_some(handle)
        }
        _ => None,
    }
}

/// Releases `reservation` as its row stands now: read again, then deleted conditioned on the
/// version read, with the capacity returned on this node (`release_target`). A Store failure
/// is read again and retried until `until` (spec 21 §10: never guessed).
pub(super) async fn release(
    authority: &AuthorityClient,
    reservation: &TargetReservation,
    until: Instant,
) -> Released {
    loop {
        let tried = match authority.reservation_now(reservation).await {
            Ok(Some(now)) => authority.release_target(&now).await,
            Ok(None) => return Released::NotApplied,
            Err(e) => Err(e),
        };
        match tried {
            Ok(Outcome::Applied(())) => return Released::Applied,
            Ok(Outcome::Conflict(_)) => return Released::NotApplied,
            Err(zlink_location::LocationError::Admission(e)) => {
                tracing::warn!(error = %e, "relocation target release refused by the admission gate");
                return Released::Unknown;
            }
            Err(e) if Instant::now() + RELEASE_PAUSE < until => {
                tracing::info!(error = %e, "relocation target release: no reply, reading again");
                tokio::time::sleep(RELEASE_PAUSE).await;
            }
            Err(e) => {
                tracing::warn!(error = %store_failure(e), "relocation target release not settled by the deadline");
                return Released::Unknown;
            }
        }
    }
}
