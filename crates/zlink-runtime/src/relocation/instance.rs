//! The Instance Spot unit (spec 28 §5 table, §6 "Instance Spot", §7 last bullet; 21 §8, §9):
//! one Spot, no membership. It moves through the same machine as an Entry Spot member Actor
//! (`drive/`), keyed by the Spot's authority key (`AuthorityKind::Spot`, its SpotId): the
//! stage records are Preserves of the Spot's record (no membership; the stage mark alone), the
//! target capacity is the Spot's bundle (`CapacityBundle::for_object`: one spot slot and one
//! slot of its Instance Spot type), and the Spot's direct messages — `zlink.spot.activate`
//! envelopes delivered to the live activation and direct `spot` messages — are held after the
//! current handler, relayed or queued on the target, and followed like an Actor's (an
//! activation one-way carries a `spot` envelope of its own so that it is relayed, and its
//! caller is answered once it ran or the target took it — a ping behind the relays on the
//! command lane answers only after the target handled them —; one the follow takes is sent on by the
//! record instead, admitted by the new owner before it is answered — [`refollow`]). The target
//! builds the same SpotId with the type's factory (`RecreateOnRelocation`), then restores the
//! adapter's bytes on it (`PreserveStateWith`), and runs its temporary queue once NewOwner
//! named it. The ObjectGeneration stays; NewOwner issues a higher AuthorityOwnerGeneration.
//! No Actor location or Session changes.
//!
//! Only an Instance Spot live on this node moves: nothing is cold-activated or re-created for
//! the move (a Spot whose first message has not completed yet — its record still carries the
//! cold-activation recovery root — is refused, `Unavailable`, and stays). A Close and a move
//! of the same Spot are ordered by their claim on the owner (`objects::instance::ending`).
//! After the location change the old activation on the source gets the type's
//! `OnClosing(RelocationOut)` callback (a turn after its accepted ones, its error only logged),
//! then closes (28 §6 step 10). Not built: Instance Spot timers (this runtime has none).

use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::{AllocationState, ObjectKind};
use zlink_codec::{ObjectId, RoutingId};
use zlink_relocation::unit::UnitKind;

use super::drive::Move;
use super::source::{Ready, start_single};
use crate::messaging::{MoveRefusal, UnavailableReason, ZLinkError};
use crate::objects::SpotRef;
use crate::objects::client::ObjectClient;
use crate::objects::host::{ObjectKey, store_failure, what};
use crate::objects::instance::Ending;
use zlink_location::AuthorityRead;

/// The tag a stage record gives an Instance Spot's record payload (`stage.rs`).
const STAGED_TAG: &[u8] = b"m1";

/// Moves the Ready Instance Spot `id`, owned and live on this node, to `target` (or to an
/// eligible Object Server offering its type that the node's Discovery lists), and returns its
/// ref there (same SpotId and ObjectGeneration). A `DisableRelocation` type is refused
/// (`InvalidOperation`) before anything is captured, and the Spot keeps serving here; a move
/// that fails before the cutover is cancelled and the Spot serves here again, its owner
/// unchanged. A Close that claimed the Spot first makes the move `Unavailable` (no move).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) async fn relocate_instance_spot(
    client: &ObjectClient,
    id: &ObjectId,
    target: Option<&RoutingId>,
) -> Result<SpotRef, ZLinkError> {
    relocate_instance_spot_within(client, id, target, None).await
}

/// [`relocate_instance_spot`] with the move's deadline `until` (a host Relocate's, when
/// given): the target waits for the source's ready no longer than that.
pub(crate) async fn relocate_instance_spot_within(
    client: &ObjectClient,
    id: &ObjectId,
    target: Option<&RoutingId>,
    until: Option<tokio::time::Instant>,
) -> Result<SpotRef, ZLinkError> {
    let host = &client.objects;
    let key: ObjectKey = (AuthorityKind::Spot, id.clone());
    let handle = match host
        .location
        .authority()
        .read(ObjectKind::InstanceSpot, id)
        .await
        .map_err(store_failure)?
    {
        AuthorityRead::Found { handle, .. } => handle,
        AuthorityRead::Missing { .. } => {
            return Err(ZLinkError::NoRoute {
                target: what(key.0, &key.1),
            });
        }
    };
    if handle.kind() != ObjectKind::InstanceSpot {
        return Err(MoveRefusal::NotInstanceSpot.into());
    }
    if handle.state() != AllocationState::Active {
        return Err(ZLinkError::Unavailable {
            target: what(key.0, &key.1),
            reason: UnavailableReason::NotServing,
        });
    }
    if host.location.host_run().as_ref() != Some(handle.owner())
        || handle.node().routing_id != host.rid
    {
        return Err(MoveRefusal::NotOwnedHere {
            kind: key.0,
            id: key.1.clone(),
        }
        .into());
    }
    let payload = handle.payload();
    if !payload.is_empty() && !payload.starts_with(STAGED_TAG) {
        // The cold-activation recovery root is still recorded: the first message runs.
        return Err(ZLinkError::Unavailable {
            target: what(key.0, &key.1),
            reason: UnavailableReason::NotServing,
        });
    }
    let choice = host
        .types
        .get(handle.stable_type())
        .filter(|t| t.kind == ObjectKind::InstanceSpot)
        .and_then(|t| t.relocation);
    let Ready {
        unit,
        effects,
        rebuild,
        live,
    } = start_single(host, &key, &handle, (UnitKind::InstanceSpot, choice))?;
    // Before the first authority write: a Close that claimed the Spot first wins (28 §7).
    let _moving = match host.instances.endings.claim(id, Ending::Moving) {
        Ok(claim) => claim,
        Err(Ending::Closing) => {
            return Err(ZLinkError::Unavailable {
                target: what(key.0, &key.1),
                reason: UnavailableReason::Closing,
            });
        }
        Err(Ending::Moving) => {
            return Err(MoveRefusal::AlreadyMoving {
                kind: key.0,
                id: key.1.clone(),
            }
            .into());
        }
    };
    Move::new(client, key, handle, live, rebuild, target.cloned(), unit)
        .until(until)
        .run(effects)
        .await
        .map(|moved| SpotRef::of(&moved))
}

pub(crate) use crate::objects::held::refollow;
