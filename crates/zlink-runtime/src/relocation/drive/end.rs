//! How one unit ends on its source: every participant follows the new owner, or the target
//! capacity is released and — only before the relay-ready reply was accepted — every held
//! queue runs here again. A refused release (the target may own the unit) is decided by
//! reading the record: it names the target (the move completed there: follow) or was read and
//! does not. Only a confirmed answer counts (spec 21 §10): a release or read that fails is
//! tried again until `storeFailureGrace`, and then the unit fails closed — its participants
//! close unserved and the record decides (see the *Unsettled moves* part of the `relocation`
//! module doc).
//!
//! **Past relay-ready the source is never restored** (21 §9.4 last paragraph: "After the
//! relay-ready reply is accepted, this procedure doesn't restore the source regardless of the
//! cutover-submit result"; 28 §14 item 3: 21 wins). A move that fails there with the target
//! fenced (the release applied) or the record read not naming it is *abandoned*: every
//! participant closes unserved like a unit that failed closed (its held requests hear
//! `Unavailable` once each, its held one-ways are dropped and counted), and a single Actor's
//! record — still naming this run, the same incarnation — is deleted by its owner (the
//! Destroy write, conditioned on the version read), so the next GetOrCreate makes a new
//! incarnation under a higher ObjectGeneration. What the Actor held at the seal is lost: 21
//! keeps the captured payload for the handoff only and never restores it past relay-ready.

use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::mpsc;
use tokio::time::Instant;
use zlink_codec::RoutingId;
use zlink_codec::records::ObjectKind;
use zlink_relocation::unit::{FailureReason, Stage};

use super::{Move, SETTLE_PAUSE};
use crate::messaging::{ErrorKind, ErrorMessage, StaleReason, ZLinkError};
use crate::objects::host::{store_failure, what};
use crate::relocation::MovesOf;
use crate::relocation::follow::FollowRecord;
use crate::relocation::participants::Shape;
use crate::relocation::source::{OwnerRead, forward, owner_is, relocation_out};
use zlink_location::{AuthorityHandle, AuthorityRead, Outcome};

/// Where the release of a unit's target capacity stands.
#[derive(Debug)]
pub(super) enum Released {
    /// Released, or nothing was there to release: no NewOwner can apply any more.
    Fenced,
    /// The row is gone or the release conflicted: the target may own the unit.
    Refused,
    /// The store did not answer by the deadline (its last failure).
    Unknown(ZLinkError),
}

/// How a sealed unit that did not see its owner change ends on its source.
enum Ending {
    /// A confirmed fence or read: serve here again.
    Reopen,
    /// The record names the target under this AuthorityOwnerGeneration: follow it.
    Follow(u64),
    /// Neither is known by the deadline: close unserved, with this error.
    FailClosed(ZLinkError),
    /// Past relay-ready with the target fenced or not named: close unserved and remove the
    /// record (module doc).
    Abandon,
}

impl Move<'_> {
    /// After the cutover: every participant follows to `to` by its follow record (the new
    /// owner and the AuthorityOwnerGeneration `owner` its NewOwner issued, this owner's
    /// generation and the participant's ObjectGeneration; its held messages first, in order),
    /// leaves the live set and its route-cache entry goes; its old activation gets
    /// `OnClosing(RelocationOut)` (a Spot) and closes — unless this is a `PerActor` Spot
    /// authority transition, whose activation stays open until its last member moved.
    pub(super) async fn follow_to(&mut self, to: &RoutingId, owner: u64) {
        let host = &self.client.objects;
        let until = Instant::now() + host.location.options().message_follow_duration;
        let mut forwards = FuturesUnordered::new();
        for p in &self.parts {
            let record = FollowRecord {
                to: to.clone(),
                previous_owner_generation: self.handle.authority_owner_generation().get(),
                owner_generation: owner,
                object_generation: p.generation,
            };
            let (tx, rx) = mpsc::unbounded_channel();
            let pending = host.relocations().follow(&p.key, record.clone(), until, tx);
            let forwarding = forward(
                self.client.clone(),
                p.key.clone(),
                record,
                (rx, pending),
                until,
            );
            forwards.push(forwarding);
        }
        tokio::spawn(async move { while forwards.next().await.is_some() {} });
        for p in &self.parts {
            let old = host.remove_live(&p.key);
            host.routes.forget(&p.key);
            if self.shape.shell() {
                continue;
            }
            let old = old.unwrap_or_else(|| Arc::clone(&p.live));
            relocation_out(&p.key, old.as_ref()).await;
            old.close().await;
        }
        self.followed = true;
    }

    /// Releases the target capacity, conditioned on the reservation row's version as it is
    /// read now (an earlier write whose reply was lost may have carried it further); after a
    /// secure whose reply was lost, the row is found by the move's ReservationId. A row that
    /// is gone or a release that conflicts is refused (the target may own the unit); a store
    /// failure is re-read and retried until the deadline, and stays unknown after it.
    pub(super) async fn release(&mut self) {
        let deadline = self.deadline();
        loop {
            match self.release_once().await {
                Ok(released) => {
                    if matches!(released, Released::Refused) {
                        tracing::info!("relocation release did not apply");
                    }
                    self.released = Some(released);
                    return;
                }
                Err(e) if Instant::now() < deadline => {
                    tracing::info!(error = %e, "relocation release: no reply, re-reading");
                    tokio::time::sleep(SETTLE_PAUSE).await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "relocation release not settled by the deadline");
                    self.released = Some(Released::Unknown(store_failure(e)));
                    return;
                }
            }
        }
    }

    /// One release attempt: the reservation row read now, then released under its version.
    async fn release_once(&self) -> Result<Released, zlink_location::LocationError> {
        let authority = self.client.objects.location.authority();
        let now = match (&self.reservation, &self.asked) {
            (Some(reservation), _) => match authority.reservation_now(reservation).await? {
                Some(now) => now,
                // Consumed by a NewOwner, or released by someone else: the target may own it.
                None => return Ok(Released::Refused),
            },
            // The secure's reply was lost: the row is there only if it applied. Nothing was
            // sent to the target yet, so no row means nothing to fence.
            (None, Some(target)) if self.secure_lost => {
                let id = self.unit.plan().reservation().get();
                match authority
                    .reservation_by_id(&self.handle, target, id)
                    .await?
                {
                    Some(now) => now,
                    None => return Ok(Released::Fenced),
                }
            }
            _ => return Ok(Released::Fenced),
        };
        Ok(match authority.release_target(&now).await? {
            Outcome::Applied(()) => Released::Fenced,
            Outcome::Conflict(c) => {
                tracing::info!(?c, "relocation release conflicted");
                Released::Refused
            }
        })
    }

    /// Where the unit's record stands with respect to the target now (`NotTarget` when no
    /// target was ever secured).
    pub(super) async fn target_owns(&self) -> OwnerRead {
        let (Some(to), Some(p)) = (self.to.as_ref(), self.parts.first()) else {
            return OwnerRead::NotTarget;
        };
        owner_is(self.client, &p.key, self.handle.kind(), to).await
    }

    /// How a sealed unit that did not see its owner change ends here (spec 21 §9.4, §10: only
    /// on a confirmed answer). A target that never got *ready* cannot run the NewOwner, and a
    /// release that applied (or found nothing to release) fenced it: serve again. A release
    /// that stayed unknown until its deadline: fail closed. A refused one: the record decides
    /// — it names the target (the move completed there: follow), or was read and does not
    /// (serve again); a read that fails is tried again after a pause until the deadline, and
    /// then the unit fails closed too.
    async fn ending(&mut self) -> Ending {
        if !self.ready_sent {
            if let Some(Released::Unknown(e)) = &self.released {
                tracing::warn!(error = %e, "relocation release not settled: the target capacity waits for a sweep");
            }
            return Ending::Reopen;
        }
        // 21 §9.4: once the relay-ready reply was accepted the source is not restored.
        let fenced = if self.ready_accepted {
            Ending::Abandon
        } else {
            Ending::Reopen
        };
        match &self.released {
            None | Some(Released::Fenced) => return fenced,
            Some(Released::Unknown(e)) => return Ending::FailClosed(e.clone()),
            Some(Released::Refused) => {}
        }
        let deadline = self.deadline();
        loop {
            match self.target_owns().await {
                OwnerRead::Target(owner) => return Ending::Follow(owner),
                OwnerRead::NotTarget => return fenced,
                OwnerRead::Unknown(e) if Instant::now() < deadline => {
                    tracing::info!(error = %e, "relocation: the record cannot be read, re-reading");
                    tokio::time::sleep(SETTLE_PAUSE).await;
                }
                OwnerRead::Unknown(e) => return Ending::FailClosed(store_failure(e)),
            }
        }
    }

    /// Every held queue runs here again in its original order (the Spot first).
    pub(super) fn reopen_all(&mut self) {
        for p in &self.parts {
            let relocations = &self.client.objects.relocations();
            relocations.reopen(&p.key, p.live.as_ref());
        }
        self.sealed = false;
    }

    /// Fails closed (spec 21 §10: never guess; 21 §9.4: past relay-ready the source is not
    /// restored): whether the target owns the unit stays unknown, so no participant serves
    /// here again. Each leaves the live set (unless a newer activation of its id took its place
    /// there: that one keeps serving) and its route-cache entry goes, its activation
    /// closes without a location change and without a closing callback (it did not move, as
    /// far as this node knows), and then its held messages are refused by the closed
    /// activation — a request hears `Unavailable` and its caller re-reads the record, a
    /// one-way is dropped, counted and logged. Every later message finds no activation here
    /// and is answered by the record, which decides: the target serves it if its owner
    /// change applied.
    async fn close_unsettled(&mut self) {
        let host = &self.client.objects;
        for p in &self.parts {
            // Only the unit's own activation: after a takeover swept the unit's record, a call
            // here may have created the object again, and that newer activation keeps serving.
            host.remove_live_if(&p.key, &p.live);
            host.routes.forget(&p.key);
            p.live.close().await;
            host.relocations().reopen(&p.key, p.live.as_ref());
        }
        self.sealed = false;
    }

    /// Ends a sealed unit that did not see its owner change as [`ending`](Self::ending)
    /// decides: serves again, follows the target, or fails closed (the error then).
    async fn end_sealed(&mut self) -> Result<(), ZLinkError> {
        match self.ending().await {
            Ending::Reopen => {
                self.reopen_all();
                Ok(())
            }
            Ending::Follow(owner) => {
                if let Some(to) = self.to.clone() {
                    self.follow_to(&to, owner).await;
                }
                Ok(())
            }
            Ending::FailClosed(e) => {
                tracing::warn!(
                    relocation = self.relocation(),
                    error = %e,
                    "relocation ended unsettled: the source closes the unit unserved"
                );
                self.close_unsettled().await;
                Err(e)
            }
            Ending::Abandon => {
                let e = self.error.clone().unwrap_or(ZLinkError::RelocationRefused {
                    kind: ErrorKind::Unavailable,
                    what: "the owner change after relay-ready",
                    source: None,
                });
                tracing::warn!(
                    relocation = self.relocation(),
                    error = %e,
                    "relocation failed past relay-ready: the source is not restored (21 §9.4)"
                );
                self.close_unsettled().await;
                self.remove_record().await;
                Err(e)
            }
        }
    }

    /// After an abandoned move (module doc): deletes a single Actor's record when it still
    /// names this run and the same incarnation, conditioned on the version read, so the next
    /// access makes a new incarnation. Any other record is left as read (it decides); a
    /// record the Store does not let go of by the deadline is left too (the Actor is then
    /// unreachable here until this run ends, as after a unit that failed closed).
    async fn remove_record(&self) {
        let (
            Shape::Single {
                per_actor: None,
                shell: false,
                ..
            },
            Some(p),
        ) = (&self.shape, self.parts.first())
        else {
            return;
        };
        if self.handle.kind() != ObjectKind::Actor {
            return;
        }
        let host = &self.client.objects;
        let authority = host.location.authority();
        let deadline = self.deadline();
        loop {
            let failed = match authority.read(self.handle.kind(), &p.key.1).await {
                Ok(AuthorityRead::Missing { .. }) => return,
                Ok(AuthorityRead::Found { handle, .. }) => {
                    let ours = host.location.host_run().as_ref() == Some(handle.owner())
                        && handle.object_generation() == self.handle.object_generation();
                    if !ours {
                        tracing::info!(
                            relocation = self.relocation(),
                            "abandoned move: the record moved on, left as read"
                        );
                        return;
                    }
                    match authority.delete(&handle).await {
                        Ok(Outcome::Applied(())) => {
                            tracing::info!(relocation = self.relocation(), object = %p.key.1.as_str(), "abandoned move: the record is removed (the next access makes a new incarnation)");
                            return;
                        }
                        Ok(Outcome::Conflict(c)) => format!("{c:?}"),
                        Err(e) => e.to_string(),
                    }
                }
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                tracing::warn!(relocation = self.relocation(), why = %failed, "abandoned move: the record could not be removed; the Actor stays unreachable here");
                return;
            }
            tokio::time::sleep(SETTLE_PAUSE).await;
        }
    }

    /// The `ReopenSource` effect: serves here again — unless the release did not apply and
    /// the record shows the target owns the unit (the move completes: follow and close), or
    /// that stays unknown (fail closed).
    pub(super) async fn reopen(&mut self) {
        if !self.sealed {
            return;
        }
        match self.end_sealed().await {
            Ok(()) if self.followed => {}
            Ok(()) => self.continued().await,
            Err(e) => self.unsettled = Some(e),
        }
    }

    /// After the last effect: the unit's record on its new owner, or why it stays.
    pub(super) async fn settle(mut self) -> Result<AuthorityHandle, ZLinkError> {
        let stage = self.unit.stage();
        if let Some(e) = self.unsettled.take() {
            tracing::info!(?stage, "relocation ended unsettled");
            return Err(e);
        }
        if matches!(stage, Stage::Committed | Stage::Completed) || self.followed {
            return self.answer().await;
        }
        let error = self.error.take();
        if self.sealed {
            // Past relay-ready the machine never reopens the source (21 §9.4), and neither
            // does this: the release fences every NewOwner, then the unit follows a target
            // the record names, is abandoned (closed unserved, a single Actor's record
            // removed) once fenced or not named, and fails closed if neither is known by the
            // deadline. A *ready* sent but not accepted (refused, or its reply lost) is still
            // before relay-ready: the source serves again on the same confirmations.
            self.release().await;
            self.end_sealed().await?;
            if self.followed {
                return self.answer().await;
            }
        }
        self.continued().await;
        tracing::info!(?stage, "relocation did not move the unit");
        Err(error.unwrap_or_else(|| why(stage, &self.parts[0].key)))
    }

    /// The unit's record as it is now (a single object's is read again; an aggregate's
    /// caller needs none). The unit moved: a read the Store does not answer is tried again
    /// (every [`SETTLE_PAUSE`]) until `storeFailureGrace`, and only then is the answer an
    /// error — [`ZLinkError::MovedUnconfirmed`], which says the unit moved to its target but
    /// its record could not be read back (spec 21 §10: never guessed either way).
    pub(super) async fn answer(&self) -> Result<AuthorityHandle, ZLinkError> {
        let (Shape::Single { .. }, Some(p)) = (&self.shape, self.parts.first()) else {
            return Ok(self.handle.clone());
        };
        let authority = self.client.objects.location.authority();
        let deadline = self.deadline();
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            match authority.read(self.handle.kind(), &p.key.1).await {
                Ok(AuthorityRead::Found { handle, .. }) => return Ok(handle),
                Ok(AuthorityRead::Missing { .. }) => {
                    return Err(ZLinkError::NoRoute {
                        target: what(p.key.0, &p.key.1),
                    });
                }
                Err(e) if Instant::now() + SETTLE_PAUSE < deadline => {
                    tracing::info!(attempt, error = %e, "relocation: the moved unit's record cannot be read, re-reading");
                    tokio::time::sleep(SETTLE_PAUSE).await;
                }
                Err(e) => {
                    tracing::warn!(attempt, error = %e, "relocation: the unit moved but its record could not be read by the deadline");
                    let Some(to) = self.to.clone() else {
                        return Err(store_failure(e));
                    };
                    return Err(ZLinkError::MovedUnconfirmed {
                        target: what(p.key.0, &p.key.1),
                        to,
                        source: Arc::new(e).into(),
                    });
                }
            }
        }
    }
}

/// The error a move of the unit `key` (the object, or the Spot of an aggregate) that ended
/// without one observed reports.
fn why(stage: Stage, key: &crate::objects::host::ObjectKey) -> ZLinkError {
    match stage {
        Stage::Failed(FailureReason::StateTooLarge { len, max })
        | Stage::Failed(FailureReason::PayloadTooLarge { len, max }) => {
            ZLinkError::StateIncompatible {
                target: crate::messaging::Target::object(key.0, &key.1),
                reason: ErrorMessage::sanitise(&format!(
                    "the captured state is {len} bytes, more than {max}"
                )),
            }
        }
        Stage::Failed(FailureReason::StageConflict { stage }) => {
            StaleReason::StageConflict { stage }.into()
        }
        other => {
            tracing::warn!(stage = ?other, "the relocation ended in a stage with no error");
            crate::relocation::invariant("a relocation that did not move ended with no error")
        }
    }
}
