//! What the target builds from an assembled Restore, hidden (not in the live set, not
//! dispatching): one object with the type's factory (and the adapter's restore for
//! `PreserveStateWith`), or every participant of a `SpotWide` aggregate — the inventory
//! verified against its root and the root against the recorded target-list checksum first —
//! under one new shared turn, each with its temporary queue.

use std::sync::Arc;

use bytes::Bytes;
use zlink_codec::ObjectId;
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::ObjectKind;
use zlink_relocation::inventory::{InventoryRoot, MemberKind, PageDigest};

use super::refusal::Refusal;
use super::{Hidden, Prepared};
use crate::objects::host::{ObjectHost, ObjectKey};
use crate::objects::live::{Built, Turn};
use crate::objects::registration::{FactoryContext, RelocationChoice};
use crate::relocation::MovesOf;
use crate::relocation::aggregate;
use crate::relocation::wire::{Rebuild, RestoreCommand};
use zlink_location::TargetReservation;

/// Builds the instance of a single-object Restore (not yet dispatching).
pub(super) async fn single(
    host: &ObjectHost,
    key: &ObjectKey,
    cmd: &RestoreCommand,
    payload: Result<Bytes, Refusal>,
) -> Result<Prepared, Refusal> {
    let payload = payload?;
    if let Some(join) = &cmd.join {
        super::commit::joined(host, join)?;
    }
    let hosted = host
        .types
        .get(cmd.stable_type.as_str())
        .ok_or_else(|| Refusal::NotOffered {
            kind: cmd.kind.object_kind(),
            stable_type: cmd.stable_type.clone(),
        })?;
    let target = host
        .instances
        .own_target(host)
        .map_err(Refusal::NotTarget)?;
    let reservation = TargetReservation::from_wire(&cmd.reservation, target)?;
    let generation: u64 = cmd.generation.parse().map_err(Refusal::Generation)?;
    let ctx = FactoryContext {
        id: key.1.as_str().to_owned(),
        stable_type: cmd.stable_type.clone(),
        generation,
        request: None,
        mesh: host.mesh.clone(),
        routing_id: host.rid.clone(),
        timers: Default::default(),
    };
    let state = (cmd.rebuild == Rebuild::Preserve).then_some(payload);
    match hosted
        .erased
        .rebuild(
            ctx,
            state,
            host.codecs.clone(),
            (host.mailbox, host.door.clone()),
        )
        .await
    {
        Built::Approved { live, .. } => Ok(Prepared {
            group: vec![Hidden {
                live: {
                    live.timers().restore(&cmd.timers);
                    live
                },
                key: key.clone(),
                stable_type: zlink_codec::StableType::new(cmd.stable_type.as_str())?,
                generation,
            }],
            reservation,
            ready: false,
        }),
        Built::Rejected { reason } => Err(Refusal::Rejected(Refusal::text(&reason))),
        Built::Failed { error } => Err(Refusal::Failed(Refusal::text(&error))),
        Built::Incompatible { error } => Err(Refusal::Incompatible(Refusal::text(&error))),
    }
}

/// Verifies the inventory and builds every participant hidden under one new turn, each with
/// its temporary queue; any failure closes what was built and drops every queue.
pub(super) async fn spot_wide(
    host: &ObjectHost,
    cmd: &aggregate::RestoreCommand,
    payload: Result<Bytes, Refusal>,
) -> Result<Prepared, Refusal> {
    let payload = aggregate::Payload::decode(payload?).map_err(Refusal::Payload)?;
    let root = InventoryRoot::decode(&cmd.root).map_err(Refusal::Inventory)?;
    let checksum = <[u8; 32]>::try_from(cmd.checksum.as_slice()).map_err(|_| Refusal::Checksum)?;
    root.check_target_list(&zlink_relocation::inventory::TargetListChecksum::from_bytes(checksum))
        .map_err(Refusal::Inventory)?;
    let pages = payload.pages.iter().map(|p| (PageDigest::of(p), p));
    let verified = root.verify_pages(pages).map_err(Refusal::Inventory)?;
    let entries = verified.entries();
    if entries.len() != payload.states.len() || verified.spot().id().as_str() != cmd.spot {
        return Err(Refusal::Mismatch);
    }
    let own = host
        .instances
        .own_target(host)
        .map_err(Refusal::NotTarget)?;
    let reservation = TargetReservation::from_wire(&cmd.reservation, own)?;
    let mut keys = Vec::with_capacity(entries.len());
    for e in entries {
        let (kind, auth) = match e.kind() {
            MemberKind::UserSpot => (ObjectKind::UserSpot, AuthorityKind::Spot),
            MemberKind::Actor => (ObjectKind::Actor, AuthorityKind::Actor),
            other => return Err(Refusal::EntryKind(other)),
        };
        match host.types.get(e.stable_type().as_str()) {
            Some(t) if t.kind == kind => {}
            _ => return Err(not_offered(kind, e.stable_type())),
        }
        let id = ObjectId::new(e.id().as_str())?;
        keys.push((auth, id));
    }
    let mut queued = Vec::new();
    let mut group = Vec::new();
    let turn = Turn::default();
    let mut outcome = Ok(());
    for ((key, e), state) in keys.iter().zip(entries).zip(payload.states) {
        if !host.relocations().queue(key) {
            outcome = Err(Refusal::Occupied { id: key.1.clone() });
            break;
        }
        queued.push(key.clone());
        let Some(t) = host.types.get(e.stable_type().as_str()) else {
            let kind = match key.0 {
                AuthorityKind::Spot => ObjectKind::UserSpot,
                AuthorityKind::Actor => ObjectKind::Actor,
            };
            outcome = Err(not_offered(kind, e.stable_type()));
            break;
        };
        let preserve = t.relocation == Some(RelocationChoice::Preserve);
        if preserve != state.is_some() {
            outcome = Err(Refusal::PolicyDiffers { id: key.1.clone() });
            break;
        }
        let ctx = FactoryContext {
            id: key.1.as_str().to_owned(),
            stable_type: e.stable_type().as_str().to_owned(),
            generation: e.generation().get(),
            request: None,
            mesh: host.mesh.clone(),
            routing_id: host.rid.clone(),
            timers: Default::default(),
        };
        match t
            .erased
            .rebuild(
                ctx,
                state,
                host.codecs.clone(),
                (host.mailbox, host.door.clone()),
            )
            .await
        {
            Built::Approved { live, .. } => {
                live.set_turn(Some(Arc::clone(&turn)));
                if let Some(carried) = cmd.timers.get(group.len()) {
                    live.timers().restore(carried);
                }
                group.push(Hidden {
                    key: key.clone(),
                    live,
                    stable_type: zlink_codec::StableType::new(e.stable_type().as_str())?,
                    generation: e.generation().get(),
                });
            }
            Built::Rejected { reason } => outcome = Err(Refusal::Rejected(Refusal::text(&reason))),
            Built::Failed { error } => outcome = Err(Refusal::Failed(Refusal::text(&error))),
            Built::Incompatible { error } => {
                outcome = Err(Refusal::Incompatible(Refusal::text(&error)));
            }
        }
        if outcome.is_err() {
            break;
        }
    }
    if let Err(why) = outcome {
        for key in &queued {
            host.relocations().abandon(key);
        }
        for b in group {
            b.live.close().await;
        }
        return Err(why);
    }
    Ok(Prepared {
        group,
        reservation,
        ready: false,
    })
}

/// This node does not offer `kind` of `stable_type`.
fn not_offered(kind: ObjectKind, stable_type: &zlink_relocation::inventory::StableType) -> Refusal {
    Refusal::NotOffered {
        kind,
        stable_type: stable_type.as_str().to_owned(),
    }
}
