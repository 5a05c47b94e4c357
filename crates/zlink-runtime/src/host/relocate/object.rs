//! Moving one object on purpose (beyond the spec, as Orleans' grain migration does):
//! [`ZLinkHost::relocate_object`](crate::host::ZLinkHost::relocate_object) runs the unit a
//! host Relocate would run for one Actor or Spot — the same live relocation, policies
//! (`RecreateOnRelocation`, `PreserveStateWith`; a `SpotWide` User Spot with every member
//! under its turn, a `PerActor` User Spot with its members after it, an Instance Spot),
//! target filters (spec 28 §4, with this host's application version) and guarantees (a move
//! that fails before its owner change is cancelled and the object serves here again; one that
//! fails after it completes on the target) — so an application can rebalance hot objects
//! without draining a host.
//!
//! Refused before anything moves, the object serving where it is
//! ([`InvalidCall::ObjectRelocation`](crate::handler::InvalidCall::ObjectRelocation)): the host
//! not `Serving` (a host Relocate runs, or it shuts down), the object not live on this host
//! (call it on the owner's host), a User Spot member (it moves with its Spot), a
//! `DisableRelocation` type, a named target that is this node or not eligible, or no eligible
//! target at all. The move is accepted work: a shutdown waits for it (spec 28 §9).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zlink_codec::RoutingId;
use zlink_codec::records::HostState;

use super::moves::{move_unit, object_client};
use super::run::Ask;
use super::targets::eligible_targets;
use super::types::RelocationMode;
use super::units::unit_of;
use crate::host::running::HostInner;
use crate::messaging::{InvalidCall, ObjectRelocationRefusal, ZLinkError};
use crate::objects::{ActorRef, SpotRef};

/// The object [`relocate_object`](crate::host::ZLinkHost::relocate_object) moves.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ObjectToMove {
    /// An Entry Spot member Actor.
    Actor(ActorRef),
    /// An Instance Spot or a User Spot (with its members).
    Spot(SpotRef),
}

impl From<ActorRef> for ObjectToMove {
    fn from(a: ActorRef) -> Self {
        Self::Actor(a)
    }
}

impl From<SpotRef> for ObjectToMove {
    fn from(s: SpotRef) -> Self {
        Self::Spot(s)
    }
}

/// Where [`relocate_object`](crate::host::ZLinkHost::relocate_object) moves the object.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ObjectTarget {
    /// The eligible target with the most room per weight, as a host Relocate picks.
    AnyEligible,
    /// This Object Server (refused unless it is an eligible target).
    Node(RoutingId),
}

/// How a single-object relocation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ObjectRelocation {
    /// The node the object moved to.
    pub target: RoutingId,
    /// Units moved: 1, or for a `PerActor` User Spot its authority plus each member.
    pub moved: usize,
}

/// The deadline a single-object relocation's waits end at (an `ApplicationSignaled` Spot's
/// seal, a `PerActor` Spot's member units): the host Relocate default.
const DEADLINE: Duration = super::types::DEFAULT_RELOCATE_DEADLINE;

fn refused(reason: ObjectRelocationRefusal) -> ZLinkError {
    ZLinkError::InvalidCall(InvalidCall::ObjectRelocation { reason })
}

/// Runs the single-object relocation (see the module doc).
pub(crate) async fn relocate_object(
    host: &Arc<HostInner>,
    object: ObjectToMove,
    target: ObjectTarget,
) -> Result<ObjectRelocation, ZLinkError> {
    match host.life.state() {
        HostState::Serving => {}
        HostState::Draining | HostState::Stopped => return Err(ZLinkError::ShuttingDown),
        _ => return Err(refused(ObjectRelocationRefusal::HostNotServing)),
    }
    let mesh = match &object {
        ObjectToMove::Actor(a) => &a.mesh,
        ObjectToMove::Spot(s) => &s.mesh,
    };
    let node = host
        .nodes
        .iter()
        .zip(&host.objects)
        .position(|(n, o)| n.mesh_name() == mesh && o.is_some())
        .ok_or(refused(ObjectRelocationRefusal::NotLiveHere))?;
    let client = object_client(host, node).ok_or(ZLinkError::NotConfigured(
        crate::messaging::Unconfigured::AutomaticTopology,
    ))?;
    let unit = unit_of(host, node, &object).await?;
    if let ObjectTarget::Node(rid) = &target {
        if rid == host.nodes[node].routing_id() {
            return Err(refused(ObjectRelocationRefusal::TargetIsThisNode));
        }
    }
    let ask = Ask {
        mode: RelocationMode::PlannedMaintenance,
        version: host.application_version,
        end: Instant::now() + DEADLINE,
    };
    let units = [unit];
    let mut targets = eligible_targets(host, &units, ask)
        .await
        .map_err(crate::objects::host::store_failure)?;
    let [unit] = units;
    let picked = targets
        .as_mut()
        .and_then(|t| t.get_mut(node))
        .and_then(|t| match &target {
            ObjectTarget::AnyEligible => t.pick(&unit),
            ObjectTarget::Node(rid) => t.pick_named(&unit, rid),
        });
    let Some(to) = picked else {
        return Err(refused(match target {
            ObjectTarget::AnyEligible => ObjectRelocationRefusal::NoEligibleTarget,
            ObjectTarget::Node(_) => ObjectRelocationRefusal::TargetNotEligible,
        }));
    };
    // Accepted work: a shutdown that seals admission waits for it (spec 28 §9).
    let _work = host.life.admit()?;
    if host.life.state() != HostState::Serving {
        return Err(refused(ObjectRelocationRefusal::HostNotServing));
    }
    tracing::info!(target = %to, kind = ?unit.kind(), "relocating one object");
    let moved = move_unit(&client, &unit, &to, ask.end).await?;
    Ok(ObjectRelocation { target: to, moved })
}
