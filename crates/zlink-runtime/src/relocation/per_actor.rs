//! The `PerActor` User Spot move (spec 28 §5, §6 "`PerActor` User Spot"; 21 §8, §8.2, §9.2):
//! the Spot's authority and each member Actor change owner separately, as units of their own.
//!
//! 1. **Spot authority transition** ([`transition_per_actor_spot`]): one single-object move
//!    (`drive/`, unit kind `PerActorSpotShell`) keyed by the Spot. The stage records are
//!    Preserves of the Spot's record that carry its reservation (the Spot's own capacity); the
//!    seal holds Spot-level messages in the same bounded hold as an Actor's (1,024 records /
//!    16 MiB; past it a request gets `Unavailable`, a one-way is dropped and counted); the
//!    Spot sealed takes no Create or Join here (they are refused, `Unavailable`) and the
//!    "capture" only waits for the current Spot handler and every job already accepted
//!    ([`LiveObject::settle`](crate::objects::live::LiveObject::settle)) — no Spot state moves
//!    and no Spot adapter is called. The target builds an empty Spot with the same SpotId and
//!    ObjectGeneration with the type's factory, hidden (not in its live set) behind a Spot
//!    temporary queue; the source relays its held Spot messages; the cutover runs the CAS
//!    that moves only the Spot authority and writes the move record
//!    (`AuthorityClient::new_owner_per_actor_spot`: owner and AuthorityOwnerGeneration, the
//!    target Spot capacity, the relocation operation id and the member count, all on the
//!    source). From then on ToSpot, Create and Join resolve the Spot's record to the target
//!    and are served there; the source follows Spot messages to the target (Message Follow,
//!    `follow.rs`) and its Spot activation leaves the live set, still open.
//! 2. **Member Actors** ([`PerActorMove::move_member`]): each moves as its own Actor unit
//!    (unit kind `PerActorSpotActor`, its own policy and adapter) to the Spot's new node, after
//!    its own turn, concurrently (the unit gate bounds them); the target's NewOwner also moves
//!    one Actor from the source count to the target count of the move record
//!    (`AuthorityClient::new_owner_per_actor_member`), so the two counts always add up to the
//!    member count. Each member's record is its own authority: ToActor resolves each Actor's
//!    current owner — the source for an unmoved one, never guessed.
//! 3. **Completed** ([`PerActorMove::finish`]): once every member unit moved, the move is
//!    complete, the source Spot gets `OnClosing(RelocationOut)` and its activation is closed
//!    (closed too, without the callback, when a member unit failed: it serves nothing any
//!    more).
//!
//! A failure before the Spot authority CAS cancels the transition like any single-object
//! move: the target's shell and queue are dropped unrun, its capacity released, and the Spot
//! serves here again with every held message, its record's owner unchanged and no move record
//! written. Gaps, kept explicit: the member set is the live members whose record names the
//! Spot, read before the seal (on a host that is `Relocating` no member can be created or
//! join meanwhile, 28 §10); members created or joined on the target after the transition are
//! not counted in the move record; the `Completed` record is not written (as for every
//! single-object move); a member unit that fails stays on the source (served there by its
//! own record) and the move reports the failure — there is no resume of a half-moved Spot by
//! a later run; the host Relocate's deadline is checked once, when the member units are
//! launched (a member unit waiting at the unit gate past it still starts); the move record
//! stays in the Location Store after the move (the next transition of the Spot overwrites it;
//! closing the Spot does not remove it).

use std::sync::Arc;

use tokio::task::JoinSet;
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::ObjectKind;
use zlink_codec::{ObjectId, RoutingId};
use zlink_relocation::unit::UnitKind;

use super::drive::Move;
use super::source::{Ready, relocate_actor_unit, start_single};
#[cfg(test)]
pub(crate) use super::target::resend_restores;
use super::wire::{PerActorPart, Rebuild};
use crate::messaging::{MoveRefusal, ZLinkError};
use crate::objects::ActorRef;
use crate::objects::client::ObjectClient;
use crate::objects::host::{ObjectHost, ObjectKey, store_failure};
use crate::objects::live::LiveObject;
use crate::objects::membership::Membership;
use crate::objects::registration::{RelocationChoice, SpotExecution};
use zlink_location::AuthorityRead;

/// A `PerActor` User Spot whose authority moved: its member Actors still to move and the
/// source Spot activation to close once they did.
pub(crate) struct PerActorMove {
    client: ObjectClient,
    spot: ObjectId,
    part: PerActorPart,
    to: RoutingId,
    members: Vec<ActorRef>,
    /// The members whose unit moved them already.
    moved: parking_lot::Mutex<zlink_store_spi::entropy::HashSet<ObjectId>>,
    source_spot: Arc<dyn LiveObject>,
    /// The move's deadline, if it has one (a host Relocate's): every member unit's Restore
    /// carries it, so its target waits for the unit's ready no longer than that.
    until: Option<tokio::time::Instant>,
}

/// The live members of the `PerActor` User Spot `spot` on this node (their records name it),
/// by id, with their stable types: a store read that fails is the error.
pub(crate) async fn live_members(
    host: &Arc<ObjectHost>,
    spot: &ObjectId,
) -> Result<Vec<(ActorRef, zlink_codec::StableType)>, ZLinkError> {
    let mut reads = JoinSet::new();
    for (key, kind, _) in host.live_list() {
        if kind != ObjectKind::Actor {
            continue;
        }
        let h = Arc::clone(host);
        reads.spawn(async move { h.location.authority().read(kind, &key.1).await });
    }
    let mut members = Vec::new();
    while let Some(done) = reads.join_next().await {
        let read = done
            .map_err(crate::relocation::task_failed("member read"))?
            .map_err(store_failure)?;
        let AuthorityRead::Found { handle, .. } = read else {
            continue;
        };
        let member = Membership::decode(handle.payload())
            .is_some_and(|m| !m.entry && !m.spot_wide && m.spot == spot.as_str());
        if member && handle.node().routing_id == host.rid {
            members.push((ActorRef::of(&handle), handle.stable_type().clone()));
        }
    }
    members.sort_by(|a, b| a.0.id.as_str().cmp(b.0.id.as_str()));
    Ok(members)
}

/// Moves the `PerActor` User Spot `spot` — its authority, then every member Actor — to
/// `target` (or an eligible Object Server offering its type), and returns how many units
/// moved (the Spot authority transition and each member). No member unit starts once `until`
/// has passed (the host Relocate's deadline, 28 §5): those members stay here and the move
/// reports `DeadlineExceeded`. See the module doc.
pub(crate) async fn relocate_per_actor(
    client: &ObjectClient,
    spot: &ObjectId,
    target: Option<&RoutingId>,
    until: Option<tokio::time::Instant>,
) -> Result<usize, ZLinkError> {
    let moving = transition_per_actor_spot_within(client, spot, target, until).await?;
    let moved = if until.is_some_and(|u| tokio::time::Instant::now() >= u) {
        Err(ZLinkError::DeadlinePassed {
            operation: "PerActor move (its members never started moving)",
        })
    } else {
        moving.move_members().await
    };
    moving.finish().await;
    moved.map(|n| n + 1)
}

/// The Spot authority transition of the Ready `PerActor` User Spot `spot`, owned and live on
/// this node (step 1 of the module doc). A `DisableRelocation` Spot or member type is refused
/// (`InvalidOperation`) before anything is stored; a transition that fails before its CAS is
/// cancelled and the Spot serves here again.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) async fn transition_per_actor_spot(
    client: &ObjectClient,
    spot: &ObjectId,
    target: Option<&RoutingId>,
) -> Result<PerActorMove, ZLinkError> {
    transition_per_actor_spot_within(client, spot, target, None).await
}

/// [`transition_per_actor_spot`] with the move's deadline `until` (a host Relocate's, when
/// given): the transition's Restore command and those of its member units carry it
/// (`deadlineMs`, docs/formats.md §14), so each target waits for its unit's ready no longer
/// than that.
pub(crate) async fn transition_per_actor_spot_within(
    client: &ObjectClient,
    spot: &ObjectId,
    target: Option<&RoutingId>,
    until: Option<tokio::time::Instant>,
) -> Result<PerActorMove, ZLinkError> {
    let host = &client.objects;
    let key: ObjectKey = (AuthorityKind::Spot, spot.clone());
    let handle = super::source::read_owned_spot(client, &key).await?;
    let hosted = host
        .types
        .get(handle.stable_type())
        .filter(|t| t.kind == ObjectKind::UserSpot);
    if hosted.and_then(|t| t.execution) != Some(SpotExecution::PerActor) {
        return Err(MoveRefusal::NotPerActor.into());
    }
    let choice = hosted.and_then(|t| t.relocation);
    let members = live_members(host, spot).await?;
    for (m, ty) in &members {
        let relocates = host.types.get(ty).and_then(|t| t.relocation);
        if !matches!(
            relocates,
            Some(RelocationChoice::Recreate | RelocationChoice::Preserve)
        ) {
            return Err(MoveRefusal::MemberRelocationDisabled {
                member: m.id.clone(),
            }
            .into());
        }
    }
    let members: Vec<ActorRef> = members.into_iter().map(|(m, _)| m).collect();
    let count = u32::try_from(members.len()).map_err(|_| MoveRefusal::TooManyMembers {
        count: members.len(),
    })?;
    let part = PerActorPart {
        spot: spot.as_str().to_owned(),
        operation: zlink_store_spi::entropy::uuid_v4()
            .as_u128()
            .max(1)
            .to_string(),
        members: Some(count),
    };
    let Ready {
        unit,
        effects,
        live,
        ..
    } = start_single(host, &key, &handle, (UnitKind::PerActorSpotShell, choice))?;
    // No Spot state moves: the target builds the empty shell with the type's factory.
    let moved = Move::new(
        client,
        key,
        handle,
        Arc::clone(&live),
        Rebuild::Recreate,
        target.cloned(),
        unit,
    )
    .per_actor(part.clone(), true)
    .until(until)
    .run(effects)
    .await?;
    tracing::info!(
        spot = spot.as_str(),
        members = members.len(),
        "PerActor Spot authority moved: its members move next"
    );
    Ok(PerActorMove {
        client: client.clone(),
        spot: spot.clone(),
        part: PerActorPart {
            members: None,
            ..part
        },
        to: moved.node().routing_id,
        members,
        moved: parking_lot::Mutex::default(),
        source_spot: live,
        until,
    })
}

impl PerActorMove {
    /// The member Actors still counted on the source when the authority moved.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn members(&self) -> &[ActorRef] {
        &self.members
    }

    /// The node that owns the Spot's authority now.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn target(&self) -> &RoutingId {
        &self.to
    }

    /// Moves one member Actor as its own unit to the Spot's node (step 2 of the module doc).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) async fn move_member(&self, actor: &ActorRef) -> Result<ActorRef, ZLinkError> {
        let moved =
            move_member(&self.client, actor, &self.to, self.part.clone(), self.until).await?;
        self.moved.lock().insert(actor.id.clone());
        Ok(moved)
    }

    /// Moves every member Actor not moved yet, concurrently (the unit gate bounds how many
    /// run at once), and returns how many moved, or the first failure once every unit ended.
    pub(crate) async fn move_members(&self) -> Result<usize, ZLinkError> {
        let mut units = JoinSet::new();
        let done = self.moved.lock().clone();
        for actor in self.members.iter().filter(|a| !done.contains(&a.id)) {
            let (client, actor, to, part, until) = (
                self.client.clone(),
                actor.clone(),
                self.to.clone(),
                self.part.clone(),
                self.until,
            );
            units.spawn(async move {
                let id = actor.id.clone();
                move_member(&client, &actor, &to, part, until)
                    .await
                    .map(|_| id)
            });
        }
        let (mut moved, mut failure) = (0, None);
        while let Some(done) = units.join_next().await {
            match done
                .map_err(crate::relocation::task_failed("member move"))
                .and_then(|r| r)
            {
                Ok(id) => {
                    self.moved.lock().insert(id);
                    moved += 1;
                }
                Err(e) => {
                    tracing::warn!(spot = self.spot.as_str(), error = %e, "a PerActor member did not move");
                    failure.get_or_insert(e);
                }
            }
        }
        failure.map_or(Ok(moved), Err)
    }

    /// Ends the move on the source (step 3): once every member moved it is Completed and the
    /// source Spot gets `OnClosing(RelocationOut)`. The source Spot activation is
    /// closed either way: it serves nothing any more (Spot messages follow the authority, and
    /// a member left here by a failed unit is served by its own record and activation).
    pub(crate) async fn finish(self) {
        let left = self.members.len().saturating_sub(self.moved.lock().len());
        if left == 0 {
            let key = (AuthorityKind::Spot, self.spot.clone());
            super::source::relocation_out(&key, self.source_spot.as_ref()).await;
        } else {
            tracing::warn!(
                spot = self.spot.as_str(),
                left,
                "PerActor Spot move not completed: members stay on the source"
            );
        }
        self.source_spot.close().await;
    }
}

/// Moves the member `actor` as its own unit to `to`, its Restore carrying the move's deadline
/// `until` when it has one.
async fn move_member(
    client: &ObjectClient,
    actor: &ActorRef,
    to: &RoutingId,
    part: PerActorPart,
    until: Option<tokio::time::Instant>,
) -> Result<ActorRef, ZLinkError> {
    relocate_actor_unit(client, actor, Some(to), Some(part), until).await
}
