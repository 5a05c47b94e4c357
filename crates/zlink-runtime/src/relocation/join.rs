//! The source side of a cross-node Actor JoinSpot / JoinEntrySpot (spec 21 §1.3 "Sends a
//! payload matching the moving Actor's policy to the target directly", §8.2; 06 §11): the
//! live relocation of one Actor (the steps of the module doc) to the node of the Spot it
//! joins, whose Restore names the join ([`JoinPart`]). The target checks at its Restore that
//! the joined Spot is live and not moving there (else its prepare refuses: the move cancels
//! and the Actor serves here again, membership unchanged), and its one NewOwner CAS writes
//! the owner, the capacity on both nodes, the AuthorityOwnerGeneration and the new membership
//! together (`target/commit.rs`); a joined `SpotWide` Spot's turn is the moved Actor's from
//! its first turn there.
//!
//! An Entry Spot member and a `PerActor` User Spot member move alone; a `SpotWide` member
//! moves with its Spot (`MovesWithSpot`: join the Entry Spot of its node first). The policy is
//! the Actor's type's: `DisableRelocation` is refused before anything is captured.

use tokio::time::Instant;
use zlink_codec::RoutingId;
use zlink_codec::keys::AuthorityKind;
use zlink_relocation::unit::UnitKind;

use super::drive::Move;
use super::source::{Ready, owned_actor, start_single};
use super::wire::JoinPart;
use crate::messaging::{MoveRefusal, ZLinkError};
use crate::objects::ActorRef;
use crate::objects::client::ObjectClient;
use crate::objects::host::ObjectKey;
use crate::objects::membership::Membership;

/// Moves the Ready Actor `actor`, owned by this node, to the node `to` as the cross-node join
/// `join` (see the module doc), within `until` when given, and returns its ref there.
pub(crate) async fn relocate_actor_joining(
    client: &ObjectClient,
    actor: &ActorRef,
    to: &RoutingId,
    join: JoinPart,
    until: Option<Instant>,
) -> Result<ActorRef, ZLinkError> {
    let host = &client.objects;
    let key: ObjectKey = (AuthorityKind::Actor, actor.id.clone());
    let handle = owned_actor(client, actor).await?;
    if Membership::decode(handle.payload()).is_some_and(|m| m.spot_wide) {
        return Err(MoveRefusal::MovesWithSpot.into());
    }
    let choice = host
        .types
        .get(handle.stable_type())
        .and_then(|t| t.relocation);
    let kind = (UnitKind::EntryMemberActor, choice);
    let Ready {
        unit,
        effects,
        rebuild,
        live,
    } = start_single(host, &key, &handle, kind)?;
    Move::new(client, key, handle, live, rebuild, Some(to.clone()), unit)
        .until(until)
        .join(join)
        .run(effects)
        .await
        .map(|moved| ActorRef::of(&moved))
}
