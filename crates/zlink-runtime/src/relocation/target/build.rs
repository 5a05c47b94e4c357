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

use super::{Hidden, Prepared};
use crate::messaging::ZLinkError;
use crate::objects::host::{ObjectHost, ObjectKey};
use crate::objects::live::{Built, Turn};
use crate::objects::registration::{FactoryContext, RelocationChoice};
use crate::relocation::MovesOf;
use crate::relocation::aggregate;
use crate::relocation::wire::{Rebuild, RestoreCommand};
use zlink_location::TargetReservation;

/// Why the target refused to build a Restore's instance.
#[derive(Debug)]
pub(super) enum Refusal {
    /// Anything but the state: no such type, a factory that failed, a bad command.
    Failed(String),
    /// The adapter's restore failed on every allowed attempt (`StateIncompatible`, 28 §8).
    Incompatible(String),
}

impl Refusal {
    /// The error the prepare request is answered with (its kind crosses the wire).
    pub(super) fn into_error(self, key: &ObjectKey) -> ZLinkError {
        match self {
            Self::Failed(why) => super::refused(&why),
            Self::Incompatible(why) => ZLinkError::StateIncompatible {
                target: crate::objects::host::what(key.0, &key.1),
                reason: crate::messaging::ErrorMessage::sanitise(&why),
            },
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Failed(why) | Self::Incompatible(why) => f.write_str(why),
        }
    }
}

impl From<String> for Refusal {
    fn from(why: String) -> Self {
        Self::Failed(why)
    }
}

impl From<&str> for Refusal {
    fn from(why: &str) -> Self {
        Self::Failed(why.to_owned())
    }
}

/// Builds the instance of a single-object Restore (not yet dispatching).
pub(super) async fn single(
    host: &ObjectHost,
    key: &ObjectKey,
    cmd: &RestoreCommand,
    payload: Result<Bytes, String>,
) -> Result<Prepared, Refusal> {
    let payload = payload?;
    let hosted = host
        .types
        .get(cmd.stable_type.as_str())
        .ok_or("the type is not offered here")?;
    let target = host.instances.own_target(host).map_err(|e| e.to_string())?;
    let reservation =
        TargetReservation::from_wire(&cmd.reservation, target).map_err(|e| e.to_string())?;
    let generation: u64 = cmd.generation.parse().map_err(|_| "bad generation")?;
    let ctx = FactoryContext {
        id: key.1.as_str().to_owned(),
        stable_type: cmd.stable_type.clone(),
        generation,
        request: None,
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
                stable_type: zlink_codec::StableType::new(cmd.stable_type.as_str())
                    .map_err(|e| e.to_string())?,
                generation,
            }],
            reservation,
            ready: false,
        }),
        Built::Rejected { reason } => Err(Refusal::Failed(reason)),
        Built::Failed { error } => Err(Refusal::Failed(error)),
        Built::Incompatible { error } => Err(Refusal::Incompatible(error)),
    }
}

/// Verifies the inventory and builds every participant hidden under one new turn, each with
/// its temporary queue; any failure closes what was built and drops every queue.
pub(super) async fn spot_wide(
    host: &ObjectHost,
    cmd: &aggregate::RestoreCommand,
    payload: Result<Bytes, String>,
) -> Result<Prepared, Refusal> {
    let payload = aggregate::Payload::decode(payload?).map_err(|e| e.to_string())?;
    let root = InventoryRoot::decode(&cmd.root).map_err(|e| e.to_string())?;
    let checksum = <[u8; 32]>::try_from(cmd.checksum.as_slice())
        .map_err(|_| "bad target-list checksum".to_owned())?;
    root.check_target_list(&zlink_relocation::inventory::TargetListChecksum::from_bytes(checksum))
        .map_err(|e| e.to_string())?;
    let pages = payload.pages.iter().map(|p| (PageDigest::of(p), p));
    let verified = root.verify_pages(pages).map_err(|e| e.to_string())?;
    let entries = verified.entries();
    if entries.len() != payload.states.len() || verified.spot().id().as_str() != cmd.spot {
        return Err("the payload does not match the inventory".into());
    }
    let own = host.instances.own_target(host).map_err(|e| e.to_string())?;
    let reservation =
        TargetReservation::from_wire(&cmd.reservation, own).map_err(|e| e.to_string())?;
    let mut keys = Vec::with_capacity(entries.len());
    for e in entries {
        let (kind, auth) = match e.kind() {
            MemberKind::UserSpot => (ObjectKind::UserSpot, AuthorityKind::Spot),
            MemberKind::Actor => (ObjectKind::Actor, AuthorityKind::Actor),
            other => return Err(format!("an inventory entry of kind {other:?}").into()),
        };
        match host.types.get(e.stable_type().as_str()) {
            Some(t) if t.kind == kind => {}
            _ => return Err(format!("type {:?} is not offered here", e.stable_type()).into()),
        }
        let id = ObjectId::new(e.id().as_str()).map_err(|e| e.to_string())?;
        keys.push((auth, id));
    }
    let mut queued = Vec::new();
    let mut group = Vec::new();
    let turn = Turn::default();
    let mut outcome = Ok(());
    for ((key, e), state) in keys.iter().zip(entries).zip(payload.states) {
        if !host.relocations().queue(key) {
            outcome = Err(format!("{} is live or moving here", key.1.as_str()));
            break;
        }
        queued.push(key.clone());
        let Some(t) = host.types.get(e.stable_type().as_str()) else {
            outcome = Err("type gone".into());
            break;
        };
        let preserve = t.relocation == Some(RelocationChoice::Preserve);
        if preserve != state.is_some() {
            outcome = Err(format!("{}: the policies differ", key.1.as_str()));
            break;
        }
        let ctx = FactoryContext {
            id: key.1.as_str().to_owned(),
            stable_type: e.stable_type().as_str().to_owned(),
            generation: e.generation().get(),
            request: None,
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
                    stable_type: zlink_codec::StableType::new(e.stable_type().as_str())
                        .map_err(|e| e.to_string())?,
                    generation: e.generation().get(),
                });
            }
            Built::Rejected { reason } => outcome = Err(reason),
            Built::Failed { error } | Built::Incompatible { error } => outcome = Err(error),
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
        return Err(why.into());
    }
    Ok(Prepared {
        group,
        reservation,
        ready: false,
    })
}
