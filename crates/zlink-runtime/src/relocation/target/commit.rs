//! The target's commit of a unit: one NewOwner CAS through the move's reservation (settled
//! by reading when its reply is lost, `owner_change.rs`), then every participant goes live.

use std::sync::Arc;

use zlink_codec::ObjectId;
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::ObjectKind;

use super::refusal::Refusal;
use super::{Hidden, Spec, Stage};
use crate::objects::RelocationReadyOutcome;
use crate::objects::host::{ObjectHost, store_failure};
use crate::objects::lifecycle::LifecycleCall;
use crate::objects::live::Turn;
use crate::objects::membership::Membership;
use crate::relocation::MovesOf;
use crate::relocation::owner_change::{Change, new_owner_settled};
use crate::relocation::wire::{CutoverReply, JoinPart, PerActorPart};
use zlink_location::{AuthorityHandle, Outcome};

/// Runs NewOwner for the prepared unit `relocation` once (the cutover, or the cutover wait
/// ran out). Committed → every participant joins the live set (an aggregate's members
/// through the Spot's record), an `ApplicationSignaled` Spot gets
/// `OnRelocationReadyCompleted(Relocated)`, then each temporary queue runs in order and
/// dispatch opens (the Spot first); an aggregate's member records then follow the Spot's new
/// owner. A conflict → the prepared objects close without running a message. `None` when
/// nothing ready is prepared under that id; else the committed record version, or `None`
/// inside (not committed).
pub(super) async fn commit(
    host: &Arc<ObjectHost>,
    relocation: u128,
) -> Option<Option<CutoverReply>> {
    let (target, stage, deadline) = {
        let incoming = host.relocations().incoming.lock();
        let i = incoming.get(&relocation)?;
        (Target::of(&i.spec)?, Arc::clone(&i.stage), i.deadline)
    };
    let mut stage = stage.lock().await;
    let prepared = match std::mem::replace(&mut *stage, Stage::Done(None)) {
        Stage::Prepared(p) if p.ready => *p,
        Stage::Done(ok) => {
            *stage = Stage::Done(ok.clone());
            return Some(ok);
        }
        other => {
            *stage = other;
            return None;
        }
    };
    // A cross-node join: the membership its NewOwner writes, decided now (the joined Spot
    // live and not moving here), and the turn the Actor then runs under.
    let joining = target.join.as_ref().map(|j| joined(host, j));
    if let Some(Err(refusal)) = &joining {
        tracing::info!(relocation, %refusal, "cross-node join: the joined Spot left: prepared object dropped");
        let ok = conclude(host, relocation, &mut stage, prepared.group, None, false).await;
        drop(stage);
        release_later(host, relocation, prepared.reservation);
        return Some(ok);
    }
    let (membership, turn) = match joining {
        Some(Ok((m, t))) => (Some(m), t),
        _ => (None, None),
    };
    let entry = host.entry_spot.as_ref().map(Membership::entry);
    let change = match (&target.root, &target.per_actor, &membership) {
        (Some(root), _, _) => Change::SpotWide { root },
        (None, Some(part), _) => Change::PerActor(part),
        (None, None, Some(m)) => Change::Join(m),
        // An Entry Spot member's record names this node's Entry Spot from its owner change.
        (None, None, None) => Change::Single {
            entry: entry.as_ref(),
        },
    };
    // Tried again on a lost reply until the Restore operation's absolute deadline (spec 21
    // §10: the Store failure grace is no separate criterion); a Restore without one (a
    // peer that sent none) is bounded by the grace instead.
    let grace = host.location.options().store_failure_grace;
    let until = deadline.unwrap_or_else(|| tokio::time::Instant::now() + grace);
    let authority = host.location.authority();
    let reservation = prepared.reservation;
    host.relocations().probe.owner_change_started();
    let outcome = new_owner_settled(
        authority,
        target.kind,
        &target.id,
        &reservation,
        until,
        change,
    )
    .await;
    let group = prepared.group;
    let participants = group.len();
    let owned = match outcome {
        Ok(Outcome::Applied(handle)) => Some(handle),
        Ok(Outcome::Conflict(c)) => {
            tracing::info!(
                relocation,
                ?c,
                "relocation NewOwner conflicted: prepared objects dropped"
            );
            None
        }
        Err(e) => {
            // 21 §10: target ownership not confirmed before the deadline: recorded
            // (`HostStatus::location_update_failed`) and logged.
            host.relocations().location_update_failed();
            tracing::error!(
                relocation,
                object = %target.id.as_str(),
                error = %store_failure(e),
                code = "location_update_failed",
                "relocation NewOwner not confirmed by the deadline: prepared objects dropped"
            );
            None
        }
    };
    if owned.is_some() {
        host.relocations().probe.owner_changed().await;
        // A joined `SpotWide` Spot: the Actor's turns run under the Spot's from the first.
        if let (Some(turn), Some(b)) = (turn, group.first()) {
            b.live.set_turn(Some(turn));
        }
    }
    let aggregate = target.root.is_some();
    let ok = conclude(host, relocation, &mut stage, group, owned, aggregate).await;
    drop(stage);
    match &ok {
        Some(_) => {
            tracing::info!(relocation, object = %target.id.as_str(), participants, "relocation committed: this node owns the unit");
        }
        None => release_later(host, relocation, reservation),
    }
    Some(ok)
}

/// This node can no longer complete the move `relocation`: its reservation goes
/// (conditioned on the row as read; the source's own release, if it runs, then finds it
/// gone), so a source that is gone strands no capacity here.
fn release_later(
    host: &Arc<ObjectHost>,
    relocation: u128,
    reservation: zlink_location::TargetReservation,
) {
    let grace = host.location.options().store_failure_grace;
    let host = Arc::clone(host);
    tokio::spawn(async move {
        let until = tokio::time::Instant::now() + grace;
        let authority = host.location.authority();
        let released = super::watchdog::release(authority, &reservation, until).await;
        tracing::debug!(
            relocation,
            ?released,
            "relocation target reservation after a NewOwner that did not apply"
        );
    });
}

/// The membership a cross-node join `join` writes here, and the turn the Actor then runs
/// under: the User Spot it names must be live (that incarnation) and not moving here; the
/// Entry Spot is this node lifecycle's.
pub(super) fn joined(
    host: &ObjectHost,
    join: &JoinPart,
) -> Result<(Membership, Option<Turn>), Refusal> {
    let spot = join.spot().map_err(Refusal::Payload)?;
    let Some((id, generation)) = spot else {
        return host
            .entry_spot
            .as_ref()
            .map(|e| (Membership::entry(e), None))
            .ok_or(Refusal::JoinSpotNotHere { spot: None });
    };
    let key = (AuthorityKind::Spot, id.clone());
    let live = host
        .live_generation(&key)
        .filter(|(_, g)| *g == generation)
        .filter(|_| !host.relocations().covers(&key));
    let Some((live, _)) = live else {
        return Err(Refusal::JoinSpotNotHere { spot: Some(id) });
    };
    let turn = live.turn();
    let membership = Membership {
        spot: id.as_str().to_owned(),
        entry: false,
        spot_wide: turn.is_some(),
    };
    Ok((membership, turn))
}

/// Ends the unit `relocation` on this node with the record `owned`, when it names this node:
/// every participant of `group` goes live and its queue opens ([`opened`]), and the cutover
/// reply is the committed record version; else (`None`) every participant closes without
/// running a message and its temporary queue goes (queued one-way messages are counted,
/// requests answered `Unavailable`). The stage ends `Done` and the Restore is forgotten.
pub(super) async fn conclude(
    host: &Arc<ObjectHost>,
    relocation: u128,
    stage: &mut Stage,
    group: Vec<Hidden>,
    owned: Option<AuthorityHandle>,
    aggregate: bool,
) -> Option<CutoverReply> {
    let ok = match &owned {
        Some(handle) => {
            opened(host, relocation, handle, &group, aggregate).await;
            Some(CutoverReply {
                version: handle.version().as_str().to_owned(),
                owner_generation: handle.authority_owner_generation().get().to_string(),
            })
        }
        None => None,
    };
    *stage = Stage::Done(ok.clone());
    host.relocations().incoming.lock().remove(&relocation);
    if ok.is_none() {
        host.relocations().completions.abandoned(relocation);
        for b in group {
            host.relocations().abandon(&b.key);
            b.live.close().await;
        }
    }
    ok
}

/// What NewOwner changes: the unit authority's record (`kind`, `id`) and, for a `PerActor`
/// unit, its move record; an aggregate's writes its inventory `root`.
pub(super) struct Target {
    pub(super) kind: ObjectKind,
    pub(super) id: ObjectId,
    pub(super) per_actor: Option<PerActorPart>,
    pub(super) join: Option<JoinPart>,
    pub(super) root: Option<Vec<u8>>,
}

impl Target {
    /// The record a Restore of `spec` moves (`None`: a Spot id that does not parse).
    pub(super) fn of(spec: &Spec) -> Option<Self> {
        Some(match spec {
            Spec::Single { key, cmd, .. } => Target {
                kind: cmd.kind.object_kind(),
                id: key.1.clone(),
                per_actor: cmd.per_actor.clone(),
                join: cmd.join.clone(),
                root: None,
            },
            Spec::SpotWide(cmd) => Target {
                kind: ObjectKind::UserSpot,
                id: ObjectId::new(cmd.spot.as_str()).ok()?,
                per_actor: None,
                join: None,
                root: Some(cmd.root.clone()),
            },
        })
    }
}

/// NewOwner applied as `handle`: every participant of `group` joins the live set, its queue
/// runs and dispatch opens (see [`commit`]); `aggregate`: a `SpotWide` group.
async fn opened(
    host: &Arc<ObjectHost>,
    relocation: u128,
    handle: &AuthorityHandle,
    group: &[Hidden],
    aggregate: bool,
) {
    let completions = &host.relocations().completions;
    completions.committed(relocation);
    if !aggregate {
        completions.settled(relocation);
    }
    for b in group {
        if aggregate && b.key.0 == AuthorityKind::Actor {
            let (ty, generation) = (b.stable_type.clone(), b.generation);
            host.insert_live_member(b.key.clone(), Arc::clone(&b.live), handle, ty, generation);
        } else {
            host.insert_live(b.key.clone(), Arc::clone(&b.live), handle);
        }
    }
    // `OnRelocationReadyCompleted(Relocated)` of an ApplicationSignaled Spot (28 §5, §6 step
    // 7): the first application turn here; no queue of the group opens (no restored, relayed
    // or direct work runs) before it returned.
    if let Some(spot) = group
        .iter()
        .find(|b| aggregate && b.key.0 == AuthorityKind::Spot)
    {
        if spot.live.readiness().is_some() {
            let call = LifecycleCall::Ready(RelocationReadyOutcome::Relocated);
            if let Err(e) = spot.live.lifecycle(call).await {
                tracing::warn!(relocation, error = %e, "relocation-ready callback failed");
            }
        }
    }
    for b in group {
        host.relocations().open(&b.key, b.live.as_ref());
        // The timers the Restore carried were armed while hidden: they tick from here.
        b.live.timers().resume();
        host.routes.forget(&b.key);
    }
    if aggregate {
        // The member records follow in the background: the cutover is answered now (see
        // `members.rs`); the completion logs record their progress once they followed.
        let members = super::members::members_of(group);
        let (task_host, spot) = (Arc::clone(host), handle.clone());
        host.relocations().following.spawn(async move {
            super::members::follow_owner(&task_host, &spot, &members).await;
            task_host.relocations().completions.settled(relocation);
        });
    }
}
