//! The preflight of a `SpotWide` aggregate move on its source: the participants (the Spot,
//! then every member live under its turn), the policy and target checks over all of them, the
//! relocation target inventory, and the unit the move performer (`drive/`) drives.

use std::sync::Arc;

use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::ObjectKind;
use zlink_codec::{ObjectId, RoutingId};
use zlink_relocation::inventory::{
    InventoryBuilder, InventoryEntry, MemberKind, ObjectGeneration as InvGeneration,
    ObjectId as InvId, StableType as InvType,
};
use zlink_relocation::unit::{
    Binding, Effect, MovePlan, Participant, Policy, RelocationId, ReservationId,
    TargetAttemptGeneration, Unit, UnitKind, check_spot_wide,
};

use crate::messaging::{MoveRefusal, StaleReason, UnavailableReason, ZLinkError};
use crate::objects::client::ObjectClient;
use crate::objects::host::{ObjectKey, store_failure};
use crate::objects::live::LiveObject;
use crate::objects::registration::RelocationChoice;
use crate::relocation::MovesOf;
use crate::relocation::drive::Move;
use crate::relocation::participants::{Part, SpotWide};
use zlink_location::TargetNode;

/// Moves the Ready `SpotWide` User Spot `spot`, owned by this node, with every member Actor
/// live under its turn, to `target` (or an eligible Object Server the node's Discovery lists)
/// as one operation (spec 21 §8, §8.2; 28 §6). A participant whose type has
/// `DisableRelocation`, or a target that does not offer every type, refuses the whole move
/// before anything is stored (`InvalidOperation`); a target short of capacity for the Spot
/// and every member is `CapacityExceeded`; in both cases everything stays here. A move that
/// fails before relay-ready is cancelled: every held queue runs here again in order.
///
/// The seal of a Spot with `ApplicationSignaled` readiness waits for the boundary a handler
/// signals only `until` (the host Relocate deadline, 28 §5; `None`: the default Relocate
/// deadline from now): without one by then the move is cancelled before anything moved
/// (`DeadlineExceeded`).
pub(crate) async fn relocate_spot_wide(
    client: &ObjectClient,
    spot: &ObjectId,
    target: Option<&RoutingId>,
    until: Option<tokio::time::Instant>,
) -> Result<(), ZLinkError> {
    let until = until
        .unwrap_or_else(|| tokio::time::Instant::now() + crate::objects::DEFAULT_RELOCATE_DEADLINE);
    let host = &client.objects;
    let skey: ObjectKey = (AuthorityKind::Spot, spot.clone());
    let handle = super::super::source::read_owned_spot(client, &skey).await?;
    let (spot_live, spot_generation) =
        host.live_incarnation(&skey)
            .ok_or_else(|| StaleReason::NotLiveHere {
                kind: skey.0,
                id: spot.clone(),
            })?;
    let Some(turn) = spot_live.turn() else {
        return Err(MoveRefusal::NotSpotWide.into());
    };
    // The participants at the preflight: the Spot, then every member live under its turn.
    let mut parts = vec![part(
        client,
        skey.clone(),
        spot_live,
        handle.stable_type().clone(),
        spot_generation,
    )];
    let mut members: Vec<(ObjectKey, zlink_codec::StableType)> = host
        .live_list()
        .into_iter()
        .filter(|(k, kind, _)| *kind == ObjectKind::Actor && k.0 == AuthorityKind::Actor)
        .filter_map(|(k, _, ty)| {
            let live = host.live_object(&k)?;
            live.turn()
                .filter(|t| Arc::ptr_eq(t, &turn))
                .map(|_| (k, ty))
        })
        .collect();
    members.sort_by(|a, b| a.0.1.as_str().as_bytes().cmp(b.0.1.as_str().as_bytes()));
    for (key, ty) in members {
        let Some((live, generation)) = host.live_incarnation(&key) else {
            continue;
        };
        parts.push(part(client, key, live, ty, generation));
    }
    let participants: Vec<Participant> = parts
        .iter()
        .map(|p| Participant {
            policy: match host
                .types
                .get(p.stable_type.as_str())
                .and_then(|t| t.relocation)
            {
                Some(RelocationChoice::Recreate) => Policy::Recreate,
                Some(RelocationChoice::Preserve) => Policy::Preserve,
                _ => Policy::Disable,
            },
            target_supports_type: true,
            target_has_adapter: true,
        })
        .collect();
    let policy =
        check_spot_wide(&participants).map_err(|source| MoveRefusal::SpotWideRejected {
            spot: spot.clone(),
            source,
        })?;
    let chosen = choose_target(client, &parts, target).await?;
    // The relocation target inventory (21 §9.1): the Spot and every member, paged.
    let mut builder = InventoryBuilder::new();
    for p in &parts {
        builder.push(entry(p)?);
    }
    let inventory = builder
        .build()
        .map_err(crate::relocation::failed("member inventory"))?;
    let (root, pages) = inventory.into_parts();
    let binding = Binding {
        relocation: RelocationId::random(),
        attempt: TargetAttemptGeneration::random(),
    };
    let plan = MovePlan::new(
        binding,
        UnitKind::SpotWideAggregate,
        policy,
        ReservationId::random(),
        handle.version().clone(),
        root.content_checksum(),
    );
    let (unit, effects) = Unit::start(plan);
    if effects.iter().any(|e| matches!(e, Effect::Reject { .. })) {
        return Err(MoveRefusal::RelocationDisabled {
            kind: skey.0,
            id: spot.clone(),
        }
        .into());
    }
    if let Some(p) = parts.iter().find(|p| host.relocations().covers(&p.key)) {
        return Err(MoveRefusal::AlreadyMoving {
            kind: p.key.0,
            id: p.key.1.clone(),
        }
        .into());
    }
    let spot_wide = SpotWide {
        chosen,
        root: root.encode().to_vec(),
        pages: pages.iter().map(|p| p.bytes().clone()).collect(),
        until,
        consumed: false,
    };
    Move::spot_wide(client, handle, parts, spot_wide, unit)
        .run(effects)
        .await
        .map(|_| ())
}

fn part(
    client: &ObjectClient,
    key: ObjectKey,
    live: Arc<dyn LiveObject>,
    stable_type: zlink_codec::StableType,
    generation: u64,
) -> Part {
    let preserve = client
        .objects
        .types
        .get(stable_type.as_str())
        .and_then(|t| t.relocation)
        == Some(RelocationChoice::Preserve);
    Part {
        key,
        live,
        stable_type,
        generation,
        preserve,
    }
}

fn entry(p: &Part) -> Result<InventoryEntry, ZLinkError> {
    let kind = match p.key.0 {
        AuthorityKind::Spot => MemberKind::UserSpot,
        AuthorityKind::Actor => MemberKind::Actor,
    };
    Ok(InventoryEntry::new(
        kind,
        InvId::new(p.key.1.as_str())
            .map_err(crate::relocation::failed("member inventory entry"))?,
        InvGeneration::new(p.generation)
            .map_err(crate::relocation::failed("member inventory entry"))?,
        InvType::new(p.stable_type.as_str())
            .map_err(crate::relocation::failed("member inventory entry"))?,
    ))
}

/// An eligible Object Server offering the Spot's type and every member's (the named one when
/// `wanted` is given): none → `InvalidOperation` when `wanted` names a node that lacks a
/// type, else `Unavailable`.
async fn choose_target(
    client: &ObjectClient,
    parts: &[Part],
    wanted: Option<&RoutingId>,
) -> Result<TargetNode, ZLinkError> {
    let host = &client.objects;
    let candidates = client
        .discovery
        .candidates(host.location.authority())
        .await
        .map_err(store_failure)?;
    let offers = |c: &TargetNode| {
        parts.iter().all(|p| {
            let kind = if p.key.0 == AuthorityKind::Spot {
                ObjectKind::UserSpot
            } else {
                ObjectKind::Actor
            };
            c.offers.contains(&(kind, p.stable_type.clone()))
        })
    };
    let usable: Vec<_> = candidates
        .into_iter()
        .filter(|c| {
            c.lease_valid
                && c.serving
                && c.target.node.routing_id != host.rid
                && c.target.node.mesh == host.mesh
                && wanted.is_none_or(|w| &c.target.node.routing_id == w)
        })
        .collect();
    if wanted.is_some() && !usable.is_empty() && !usable.iter().any(|c| offers(&c.target)) {
        return Err(MoveRefusal::TargetLacksTypes.into());
    }
    usable
        .into_iter()
        .filter(|c| offers(&c.target))
        .max_by_key(|c| c.weight)
        .map(|c| c.target)
        .ok_or_else(|| ZLinkError::Unavailable {
            target: crate::messaging::Target::RelocationTarget,
            reason: UnavailableReason::NotConnected,
        })
}
