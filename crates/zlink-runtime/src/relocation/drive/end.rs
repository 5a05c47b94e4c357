//! How one unit ends on its source: every participant follows the new owner, or the target
//! capacity is released and every held queue runs here again — unless the release is refused
//! and the record names the target (the move completed there).

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::Instant;
use zlink_codec::RoutingId;
use zlink_relocation::unit::{FailureReason, Stage};

use super::{Move, SETTLE_PAUSE};
use crate::messaging::{ErrorMessage, ZLinkError};
use crate::objects::host::stale;
use crate::relocation::MovesOf;
use crate::relocation::follow::FollowRecord;
use crate::relocation::participants::{Shape, internal};
use crate::relocation::source::{forward, owner_is, relocation_out};
use zlink_location::{AuthorityHandle, Outcome};

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
        for p in &self.parts {
            let record = FollowRecord {
                to: to.clone(),
                previous_owner_generation: self.handle.authority_owner_generation().get(),
                owner_generation: owner,
                object_generation: p.generation,
            };
            let (tx, rx) = mpsc::unbounded_channel();
            host.relocations().follow(&p.key, record.clone(), until, tx);
            let forwarding = forward(self.client.clone(), p.key.clone(), record, rx, until);
            tokio::spawn(forwarding);
        }
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
    /// read now (an earlier write whose reply was lost may have carried it further). A row
    /// that is gone or a release that conflicts is refused (the target may own the unit);
    /// a store failure is re-read and retried until the deadline.
    pub(super) async fn release(&mut self) {
        let Some(reservation) = self.reservation.clone() else {
            return;
        };
        let authority = self.client.objects.location.authority();
        let deadline = self.deadline();
        loop {
            let released = match authority.reservation_now(&reservation).await {
                Ok(Some(now)) => authority.release_target(&now).await,
                Ok(None) => Ok(Outcome::Conflict(zlink_location::Conflict::Reservation)),
                Err(e) => Err(e),
            };
            match released {
                Ok(Outcome::Applied(())) => return,
                Ok(other) => {
                    tracing::info!(?other, "relocation release did not apply");
                    self.release_refused = true;
                    return;
                }
                Err(e) if Instant::now() < deadline => {
                    tracing::info!(error = %e, "relocation release: no reply, re-reading");
                    tokio::time::sleep(SETTLE_PAUSE).await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "relocation release not settled by the deadline");
                    self.release_refused = true;
                    return;
                }
            }
        }
    }

    /// The AuthorityOwnerGeneration of the unit's record when it names the target now.
    pub(super) async fn target_owns(&self) -> Option<u64> {
        let to = self.to.as_ref()?;
        let key = &self.parts.first()?.key;
        owner_is(self.client, key, self.handle.kind(), to).await
    }

    /// Every held queue runs here again in its original order (the Spot first).
    pub(super) fn reopen_all(&mut self) {
        for p in &self.parts {
            let relocations = &self.client.objects.relocations();
            relocations.reopen(&p.key, p.live.as_ref());
        }
        self.sealed = false;
    }

    /// Serves here again — unless the release did not apply and the record shows the target
    /// already owns the unit (then the move completes: follow and close).
    pub(super) async fn reopen(&mut self) {
        if !self.sealed {
            return;
        }
        if self.release_refused {
            if let (Some(owner), Some(to)) = (self.target_owns().await, self.to.clone()) {
                self.follow_to(&to, owner).await;
                return;
            }
        }
        self.reopen_all();
        self.continued().await;
    }

    /// After the last effect: the unit's record on its new owner, or why it stays.
    pub(super) async fn settle(mut self) -> Result<AuthorityHandle, ZLinkError> {
        let stage = self.unit.stage();
        if matches!(stage, Stage::Committed | Stage::Completed) || self.followed {
            return self.answer().await;
        }
        let mut error = self.error.take();
        if self.sealed {
            // Past relay-ready the machine never reopens the source (21 §9.4). Deviation: the
            // source serves again once the released reservation fenced every NewOwner (the
            // prepared objects never dispatched), and completes if the target owns the unit.
            self.release().await;
            if self.release_refused {
                if let (Some(owner), Some(to)) = (self.target_owns().await, self.to.clone()) {
                    self.follow_to(&to, owner).await;
                    return self.answer().await;
                }
                error = Some(stale(
                    "the relocation ended in an unknown state; the object stays",
                ));
            }
            self.reopen_all();
        }
        self.continued().await;
        tracing::info!(?stage, "relocation did not move the unit");
        Err(error.unwrap_or_else(|| why(stage)))
    }

    /// The unit's record as it is now (a single object's is read again; an aggregate's
    /// caller needs none).
    pub(super) async fn answer(&self) -> Result<AuthorityHandle, ZLinkError> {
        match (&self.shape, self.parts.first()) {
            (Shape::Single { .. }, Some(p)) => {
                crate::relocation::source::read_record(self.client, &p.key, self.handle.kind())
                    .await
            }
            _ => Ok(self.handle.clone()),
        }
    }
}

/// The error a move that ended without one observed reports.
fn why(stage: Stage) -> ZLinkError {
    match stage {
        Stage::Failed(FailureReason::StateTooLarge { len, max })
        | Stage::Failed(FailureReason::PayloadTooLarge { len, max }) => {
            ZLinkError::StateIncompatible {
                target: "the relocated object".into(),
                reason: ErrorMessage::sanitise(&format!(
                    "the captured state is {len} bytes, more than {max}"
                )),
            }
        }
        Stage::Failed(FailureReason::StageConflict { stage }) => stale(&format!(
            "the object's record changed during the move ({stage:?} not recorded)"
        )),
        other => internal(&format!("the relocation ended: {other:?}")),
    }
}
