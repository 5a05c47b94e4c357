//! The units of one host Relocate (spec 28 §4 preflight, §5 units): what moves, and the
//! capacity each unit takes on its target.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::task::JoinSet;
use zlink_codec::StableType;
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::ObjectKind;
use zlink_store_spi::entropy::{HashMap, HashSet};

use super::types::RelocationReason;
use crate::host::running::HostInner;
use crate::messaging::{InvalidCall, ObjectRelocationRefusal, ZLinkError};
use crate::objects::ActorRef;
use crate::objects::membership::Membership;
use crate::objects::registration::RelocationChoice;
use zlink_location::{AuthorityRead, CapacityBundle};

/// One unit to move, on object node `node`: an Entry Spot member Actor, an Instance Spot, a
/// `SpotWide` User Spot with every member Actor under its turn (one aggregate unit, spec 28
/// §6), or a `PerActor` User Spot (its Spot authority transition, then one unit per member
/// Actor, 28 §5).
#[derive(Debug, Clone)]
pub(super) struct Unit {
    pub(super) node: usize,
    pub(super) object: Moved,
    pub(super) stable_type: StableType,
    /// A `PerActor` User Spot: its members' Actor types, which its target must offer too
    /// (the members move to the node the Spot's authority moves to).
    pub(super) members: BTreeSet<StableType>,
    /// The capacity the unit takes on its target (28 §4 filter step 4): one Actor, one
    /// Instance Spot, or a User Spot with one Actor slot per member live here (a `SpotWide`
    /// aggregate reserves them at once, a `PerActor` Spot's members follow it one by one).
    pub(super) bundle: CapacityBundle,
}

/// What one unit moves.
#[derive(Debug, Clone)]
pub(super) enum Moved {
    Actor(ActorRef),
    InstanceSpot(zlink_codec::ObjectId),
    SpotWide(zlink_codec::ObjectId),
    PerActor(zlink_codec::ObjectId),
}

impl Unit {
    pub(super) fn new(node: usize, object: Moved, stable_type: StableType) -> Self {
        let kind = match object {
            Moved::Actor(_) => ObjectKind::Actor,
            Moved::InstanceSpot(_) => ObjectKind::InstanceSpot,
            Moved::SpotWide(_) | Moved::PerActor(_) => ObjectKind::UserSpot,
        };
        Unit {
            node,
            bundle: CapacityBundle::for_object(kind, &stable_type),
            object,
            stable_type,
            members: BTreeSet::new(),
        }
    }

    /// A User Spot unit with `members` member Actors live here.
    fn set_members(&mut self, members: u32) {
        if members > 0 {
            match CapacityBundle::user_spot_relocation(self.stable_type.clone(), members) {
                Ok(b) => self.bundle = b,
                // Over 2^31-1 members: the Store refuses the move (CapacityExceeded) anyway.
                Err(e) => tracing::warn!(error = %e, "a User Spot unit's capacity bundle"),
            }
        }
    }

    pub(super) fn kind(&self) -> ObjectKind {
        match self.object {
            Moved::Actor(_) => ObjectKind::Actor,
            Moved::InstanceSpot(_) => ObjectKind::InstanceSpot,
            Moved::SpotWide(_) | Moved::PerActor(_) => ObjectKind::UserSpot,
        }
    }
}

/// Whether the type `stable_type` of the object node `o` moves (not `DisableRelocation`).
fn relocatable(o: &super::super::start::NodeObjects, stable_type: &StableType) -> bool {
    matches!(
        o.host.types.get(stable_type).and_then(|t| t.relocation),
        Some(RelocationChoice::Recreate | RelocationChoice::Preserve)
    )
}

/// Every stateful object of this host as a unit, or why the host cannot move (spec 28 §4
/// preflight): a `DisableRelocation` type → RelocationDisabled; a `PerActor` member whose
/// Spot is not live here → StateIncompatible; a Store read that fails → StoreUnavailable.
/// Entry Spot member Actors and Instance Spots become units; a live `SpotWide` User Spot is
/// one unit covering every member under its turn (the members are not units of their own); a
/// live `PerActor` User Spot is one unit that runs its Spot authority transition and then one
/// unit per member Actor (its members are not listed again here).
pub(super) async fn preflight(host: &HostInner) -> Result<Vec<Unit>, RelocationReason> {
    let mut units = Vec::new();
    for (i, o) in host.objects.iter().enumerate() {
        let Some(o) = o else { continue };
        let mut reads = JoinSet::new();
        // A PerActor Spot's member types and how many members are live here.
        let mut member_types: HashMap<String, (BTreeSet<StableType>, u32)> = HashMap::default();
        // Per SpotWide turn (its Spot's and every member's): the members live under it, and
        // the Spot's id.
        let mut turn_members: HashMap<usize, u32> = HashMap::default();
        let mut spot_turns: HashMap<String, usize> = HashMap::default();
        let live = o.host.live_list();
        let per_actor: HashSet<&str> = live
            .iter()
            .filter(|(key, kind, _)| {
                *kind == ObjectKind::UserSpot
                    && o.host.live_object(key).and_then(|l| l.turn()).is_none()
            })
            .map(|(key, _, _)| key.1.as_str())
            .collect();
        for (key, kind, stable_type) in live.iter().cloned() {
            let turn = o
                .host
                .live_object(&key)
                .and_then(|l| l.turn())
                .map(|t| Arc::as_ptr(&t).addr());
            if kind == ObjectKind::UserSpot {
                if !relocatable(o, &stable_type) {
                    return Err(RelocationReason::RelocationDisabled);
                }
                let id = key.1.clone();
                let object = match turn {
                    Some(t) => {
                        spot_turns.insert(id.as_str().to_owned(), t);
                        Moved::SpotWide(id)
                    }
                    None => Moved::PerActor(id),
                };
                units.push(Unit::new(i, object, stable_type));
                continue;
            }
            if !relocatable(o, &stable_type) {
                tracing::warn!(
                    stable_type = stable_type.as_str(),
                    id = key.1.as_str(),
                    kind = kind.as_str(),
                    "an object whose type has DisableRelocation is on this host"
                );
                return Err(RelocationReason::RelocationDisabled);
            }
            if let Some(t) = turn {
                // A SpotWide member: its Spot's unit moves it.
                if kind == ObjectKind::Actor {
                    *turn_members.entry(t).or_default() += 1;
                }
                continue;
            }
            let objects = Arc::clone(&o.host);
            reads.spawn(async move {
                let read = objects.location.authority().read(kind, &key.1).await;
                (key, stable_type, read)
            });
        }
        while let Some(done) = reads.join_next().await {
            let Ok((key, stable_type, read)) = done else {
                return Err(RelocationReason::RelocationFailed);
            };
            match read {
                Ok(AuthorityRead::Found { handle, .. })
                    if handle.kind() == ObjectKind::InstanceSpot =>
                {
                    units.push(Unit::new(i, Moved::InstanceSpot(key.1), stable_type));
                }
                Ok(AuthorityRead::Found { handle, .. }) => {
                    match Membership::decode(handle.payload()).filter(|m| !m.entry) {
                        // A member of a PerActor User Spot live here: its Spot's unit moves it.
                        Some(m) if !m.spot_wide && per_actor.contains(m.spot.as_str()) => {
                            let (types, n) = member_types.entry(m.spot).or_default();
                            types.insert(stable_type);
                            *n += 1;
                            continue;
                        }
                        Some(_) => {
                            tracing::warn!(
                                id = key.1.as_str(),
                                "a User Spot member whose Spot is not live here cannot move"
                            );
                            return Err(RelocationReason::StateIncompatible);
                        }
                        None => {}
                    }
                    let actor = Moved::Actor(ActorRef::of(&handle));
                    units.push(Unit::new(i, actor, stable_type));
                }
                // Ended meanwhile: nothing to move.
                Ok(AuthorityRead::Missing { .. }) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "relocation preflight: Store read failed");
                    return Err(RelocationReason::StoreUnavailable);
                }
            }
        }
        for u in units.iter_mut().filter(|u| u.node == i) {
            let members = match &u.object {
                Moved::PerActor(spot) => {
                    let (types, n) = member_types.remove(spot.as_str()).unwrap_or_default();
                    u.members = types;
                    n
                }
                Moved::SpotWide(spot) => spot_turns
                    .get(spot.as_str())
                    .and_then(|t| turn_members.get(t))
                    .copied()
                    .unwrap_or(0),
                Moved::Actor(_) | Moved::InstanceSpot(_) => continue,
            };
            u.set_members(members);
        }
    }
    Ok(units)
}

/// The one unit that moves the object `object` of object node `node`, as the host Relocate's
/// preflight would list it (`relocate_object`), or why it cannot move alone: not live here,
/// a User Spot member (it moves with its Spot), or a `DisableRelocation` type (the Spot's or,
/// for a `PerActor` User Spot, a member's). A `PerActor` Spot's members are read from the
/// Store (a failed read is the error).
pub(super) async fn unit_of(
    host: &HostInner,
    node: usize,
    object: &super::object::ObjectToMove,
) -> Result<Unit, ZLinkError> {
    use super::object::ObjectToMove;
    let refused = |reason| ZLinkError::InvalidCall(InvalidCall::ObjectRelocation { reason });
    let o = host
        .objects
        .get(node)
        .and_then(Option::as_ref)
        .ok_or(refused(ObjectRelocationRefusal::NotLiveHere))?;
    let key = match object {
        ObjectToMove::Actor(a) => (AuthorityKind::Actor, a.id.clone()),
        ObjectToMove::Spot(s) => (AuthorityKind::Spot, s.id.clone()),
    };
    // The one object, looked up by its key (never a walk over every live activation).
    let (kind, stable_type, live) = o
        .host
        .live_class(&key)
        .ok_or(refused(ObjectRelocationRefusal::NotLiveHere))?;
    if !relocatable(o, &stable_type) {
        return Err(refused(ObjectRelocationRefusal::RelocationDisabled));
    }
    let turn = live.turn();
    match (object, kind) {
        (ObjectToMove::Actor(actor), ObjectKind::Actor) => {
            if turn.is_some() {
                return Err(refused(ObjectRelocationRefusal::MovesWithSpot));
            }
            Ok(Unit::new(node, Moved::Actor(actor.clone()), stable_type))
        }
        (ObjectToMove::Spot(spot), ObjectKind::InstanceSpot) => Ok(Unit::new(
            node,
            Moved::InstanceSpot(spot.id.clone()),
            stable_type,
        )),
        (ObjectToMove::Spot(spot), ObjectKind::UserSpot) => match turn {
            Some(t) => {
                // A SpotWide Spot's members: the live Actors under its turn (a walk, once per
                // Spot moved alone).
                let live = o.host.live_list();
                let mut members = 0u32;
                for (k, kind, ty) in &live {
                    if *kind != ObjectKind::Actor {
                        continue;
                    }
                    let same = o
                        .host
                        .live_object(k)
                        .and_then(|l| l.turn())
                        .is_some_and(|m| Arc::ptr_eq(&m, &t));
                    if same {
                        if !relocatable(o, ty) {
                            return Err(refused(ObjectRelocationRefusal::RelocationDisabled));
                        }
                        members += 1;
                    }
                }
                let mut unit = Unit::new(node, Moved::SpotWide(spot.id.clone()), stable_type);
                unit.set_members(members);
                Ok(unit)
            }
            None => {
                let members = crate::relocation::per_actor::live_members(&o.host, &spot.id).await?;
                let mut unit = Unit::new(node, Moved::PerActor(spot.id.clone()), stable_type);
                for (_, ty) in &members {
                    if !relocatable(o, ty) {
                        return Err(refused(ObjectRelocationRefusal::RelocationDisabled));
                    }
                    unit.members.insert(ty.clone());
                }
                unit.set_members(u32::try_from(members.len()).unwrap_or(u32::MAX));
                Ok(unit)
            }
        },
        // The ref names another kind than the live object (an Actor ref for a Spot id, ...).
        _ => Err(refused(ObjectRelocationRefusal::NotLiveHere)),
    }
}
