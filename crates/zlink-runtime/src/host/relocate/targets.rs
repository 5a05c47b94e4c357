//! Target selection of one host Relocate (spec 28 §4): the eligible targets in the filter
//! order, each target's remaining room as this Relocate fills it, and the waits for a target
//! ("No target yet").

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::time::Instant;
use zlink_codec::records::{HostState, ObjectKind};
use zlink_codec::{RoutingId, StableType};
use zlink_store_spi::entropy::HashMap;

use super::run::{Ask, not_serving};
use super::types::RelocationReason;
use super::units::Unit;
use crate::host::running::HostInner;
use zlink_location::{CapacityBundle, CapacityLimits, CapacityRow};

/// How often a target wait re-reads the descriptor list and the peer table.
const TARGET_POLL: Duration = Duration::from_millis(100);

/// One target's room as this Relocate sees it: its limits, and its capacity row as read plus
/// every bundle this Relocate gave it since (28 §4 filter step 4: enough *remaining*
/// capacity).
#[derive(Debug, Clone)]
struct Room {
    limits: CapacityLimits,
    taken: CapacityRow,
}

impl Room {
    fn fits(&self, bundle: &CapacityBundle) -> bool {
        self.taken.fits(bundle, &self.limits)
    }

    fn take(&mut self, bundle: &CapacityBundle) {
        self.taken.actors += u64::from(bundle.actors());
        self.taken.spots += u64::from(bundle.spots());
        if let Some(t) = bundle.spot_type() {
            *self
                .taken
                .spot_types
                .entry((t.kind, t.stable_type.clone()))
                .or_default() += u64::from(t.count);
        }
    }
}

/// The eligible targets of one object node: per (kind, stable type), (RID, weight); each
/// one's room; and how many units each was given so far.
#[derive(Debug, Default)]
pub(super) struct Targets {
    by_type: HashMap<(ObjectKind, StableType), Vec<(RoutingId, u16)>>,
    rooms: HashMap<RoutingId, Room>,
    assigned: HashMap<RoutingId, u64>,
}

impl Targets {
    /// The target for `unit`, its room taken: among the eligible targets of its type, those
    /// with room left for its bundle after every unit this Relocate gave them, the one with
    /// the fewest units per weight so far. `None` when no target has room left: a target
    /// without remaining capacity is never chosen (28 §4 filter step 4).
    pub(super) fn pick(&mut self, unit: &Unit) -> Option<RoutingId> {
        let list = self.by_type.get(&(unit.kind(), unit.stable_type.clone()))?;
        let mut best: Option<(&RoutingId, u128)> = None;
        for (rid, weight) in list {
            if !self.rooms.get(rid).is_some_and(|r| r.fits(&unit.bundle)) {
                continue;
            }
            let n = u128::from(self.assigned.get(rid).copied().unwrap_or(0)) + 1;
            // n / weight compared without floats: scale by 2^16.
            let score = (n << 16) / u128::from((*weight).max(1));
            if best.is_none_or(|(_, s)| score < s) {
                best = Some((rid, score));
            }
        }
        let rid = best?.0.clone();
        *self.assigned.entry(rid.clone()).or_insert(0) += 1;
        if let Some(room) = self.rooms.get_mut(&rid) {
            room.take(&unit.bundle);
        }
        Some(rid)
    }

    /// The named target `rid` for `unit`, its room taken, if it is eligible for the unit's
    /// type and has room for its bundle; `None` otherwise.
    pub(super) fn pick_named(&mut self, unit: &Unit, rid: &RoutingId) -> Option<RoutingId> {
        let list = self.by_type.get(&(unit.kind(), unit.stable_type.clone()))?;
        if !list.iter().any(|(r, _)| r == rid) {
            return None;
        }
        let room = self.rooms.get_mut(rid)?;
        if !room.fits(&unit.bundle) {
            return None;
        }
        room.take(&unit.bundle);
        *self.assigned.entry(rid.clone()).or_insert(0) += 1;
        Some(rid.clone())
    }

    /// Whether some eligible target of `unit`'s type has room left for it.
    fn has_room(&self, unit: &Unit) -> bool {
        self.by_type
            .get(&(unit.kind(), unit.stable_type.clone()))
            .is_some_and(|list| {
                list.iter()
                    .any(|(rid, _)| self.rooms.get(rid).is_some_and(|r| r.fits(&unit.bundle)))
            })
    }
}

/// Waits, the host still `Serving`, until every object node with units has, for each stable
/// type it moves, at least one eligible target (spec 28 §4 filter order), or the deadline
/// passes (`TargetUnavailable`; 28 §4 "No target yet").
pub(super) async fn wait_for_targets(
    host: &HostInner,
    units: &[Unit],
    ask: Ask,
) -> Result<Vec<Targets>, RelocationReason> {
    loop {
        if host.life.state() != HostState::Serving {
            return Err(not_serving(host.life.state()));
        }
        match eligible_targets(host, units, ask).await {
            Ok(Some(t)) => return Ok(t),
            Ok(None) => {}
            Err(e) => tracing::debug!(error = %e, "relocation target search: Store read failed"),
        }
        if !pause(host, ask).await {
            return Err(RelocationReason::TargetUnavailable);
        }
    }
}

/// Waits, the host `Relocating` and no unit running, until one of `units` — units no target
/// had room for — has an eligible target with room, re-reading the descriptor list, the peer
/// table and the capacity rows (which now hold every unit this Relocate moved or reserved);
/// `None` once the deadline passes with no such target (28 §4 "No target yet": the host ends
/// `Blocked/TargetUnavailable`) or the host leaves `Relocating`.
pub(super) async fn wait_for_room(
    host: &HostInner,
    units: &[Unit],
    ask: Ask,
) -> Option<Vec<Targets>> {
    loop {
        if host.life.state() != HostState::Relocating {
            return None;
        }
        match eligible_targets(host, units, ask).await {
            Ok(Some(t))
                if units
                    .iter()
                    .any(|u| t.get(u.node).is_some_and(|n| n.has_room(u))) =>
            {
                return Some(t);
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "relocation target search: Store read failed"),
        }
        if !pause(host, ask).await {
            return None;
        }
    }
}

/// Asks every node's discovery to re-read its list and sleeps one poll; `false` (no pause)
/// when the deadline falls within it.
async fn pause(host: &HostInner, ask: Ask) -> bool {
    if Instant::now() + TARGET_POLL >= ask.end {
        return false;
    }
    for node in &host.nodes {
        node.inner.discovery_wake.notify_one();
    }
    tokio::time::sleep(TARGET_POLL).await;
    true
}

/// The eligible targets per object node, or `None` while one type of one node has none. A
/// target: 1) runs exactly the effective version; 2) is another Object Server, `Serving`, of
/// the same MeshName, its lease valid; 3) registered the stable type; 4) has a positive
/// weight, room for one more object of the kind (each unit's own bundle is checked when it
/// is given a target, [`Targets::pick`]), and another maintenance wave when this host has one;
/// 5) is an admitted Ready peer whose lifecycle generation is the descriptor's. A `PerActor`
/// User Spot's target also offers every member's Actor type.
pub(super) async fn eligible_targets(
    host: &HostInner,
    units: &[Unit],
    ask: Ask,
) -> Result<Option<Vec<Targets>>, zlink_location::LocationError> {
    let mut all = Vec::with_capacity(host.objects.len());
    for (i, o) in host.objects.iter().enumerate() {
        let mut targets = Targets::default();
        let types: Vec<(ObjectKind, &StableType)> = {
            let mut t: Vec<_> = units
                .iter()
                .filter(|u| u.node == i)
                .map(|u| (u.kind(), &u.stable_type))
                .collect();
            t.sort();
            t.dedup();
            t
        };
        if types.is_empty() {
            all.push(targets);
            continue;
        }
        // A PerActor User Spot's target must offer its members' Actor types too.
        let mut member_types: HashMap<(ObjectKind, &StableType), BTreeSet<&StableType>> =
            HashMap::default();
        for u in units.iter().filter(|u| u.node == i) {
            member_types
                .entry((u.kind(), &u.stable_type))
                .or_default()
                .extend(u.members.iter());
        }
        let Some(discovery) = o.as_ref().and_then(|o| o.discovery.as_ref()) else {
            return Ok(None);
        };
        let Some(objects) = o.as_ref().map(|o| &o.host) else {
            return Ok(None);
        };
        let node = &host.nodes[i];
        let facts: HashMap<RoutingId, (u64, Option<String>)> = discovery
            .last_list()
            .unwrap_or_default()
            .into_iter()
            .map(|n| {
                let d = n.record.descriptor;
                (d.routing_id, (d.application_version, d.maintenance_wave))
            })
            .collect();
        let candidates = discovery.candidates(objects.location.authority()).await?;
        for (kind, ty) in types {
            let one = zlink_location::CapacityBundle::for_object(kind, ty);
            let list: Vec<(RoutingId, u16)> = candidates
                .iter()
                .filter(|c| {
                    let rid = &c.target.node.routing_id;
                    let Some((version, wave)) = facts.get(rid) else {
                        return false;
                    };
                    *version == ask.version
                        && rid != node.routing_id()
                        && c.target.node.mesh == *node.mesh_name()
                        && c.eligible(kind, ty, &one)
                        && member_types.get(&(kind, ty)).is_none_or(|m| {
                            m.iter().all(|t| {
                                c.target.offers.contains(&(ObjectKind::Actor, (*t).clone()))
                            })
                        })
                        && (host.maintenance_wave.is_none() || wave != &host.maintenance_wave)
                        && node.inner.peers.read().ready(rid).is_some_and(|p| {
                            p.handle.info().lifecycle_generation.get()
                                == c.target.lifecycle_generation
                        })
                })
                .map(|c| {
                    let rid = c.target.node.routing_id.clone();
                    targets.rooms.entry(rid.clone()).or_insert_with(|| Room {
                        limits: c.target.limits.clone(),
                        taken: c.usage.clone(),
                    });
                    (rid, c.weight)
                })
                .collect();
            if list.is_empty() {
                return Ok(None);
            }
            targets.by_type.insert((kind, ty.clone()), list);
        }
        all.push(targets);
    }
    Ok(Some(all))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::relocate::units::Moved;

    fn rid(b: u8) -> RoutingId {
        RoutingId::new(vec![b]).expect("rid")
    }

    fn actor_unit() -> Unit {
        let actor = crate::objects::ActorRef {
            id: zlink_codec::ObjectId::new("a").expect("id"),
            generation: 1,
            mesh: zlink_codec::MeshName::new("game").expect("mesh"),
            node: rid(9),
        };
        Unit::new(
            0,
            Moved::Actor(actor),
            StableType::new("counter").expect("type"),
        )
    }

    /// Targets `list` of the counter Actor type, with the actor limits `limits` (0 = none).
    fn targets(list: &[(RoutingId, u16)], limits: &[u32]) -> Targets {
        let mut t = Targets::default();
        let ty = StableType::new("counter").expect("type");
        t.by_type.insert((ObjectKind::Actor, ty), list.to_vec());
        for ((r, _), limit) in list.iter().zip(limits) {
            let limits = CapacityLimits {
                actors: *limit,
                ..CapacityLimits::unlimited()
            };
            t.rooms.insert(
                r.clone(),
                Room {
                    limits,
                    taken: CapacityRow::default(),
                },
            );
        }
        t
    }

    #[test]
    fn targets_are_picked_by_weight() {
        let (a, b) = (rid(1), rid(2));
        let mut t = targets(&[(a.clone(), 300), (b.clone(), 100)], &[0, 0]);
        let unit = actor_unit();
        let picks: Vec<RoutingId> = (0..400).filter_map(|_| t.pick(&unit)).collect();
        let to_a = picks.iter().filter(|r| **r == a).count();
        assert_eq!(to_a, 300, "weights 300:100 split 400 units 3:1");
        assert_eq!(t.assigned.get(&b), Some(&100));
    }

    #[test]
    fn a_target_whose_room_earlier_units_took_is_not_picked() {
        let (a, b) = (rid(1), rid(2));
        let mut t = targets(&[(a.clone(), 100), (b.clone(), 100)], &[1, 2]);
        let unit = actor_unit();
        let picks: Vec<Option<RoutingId>> = (0..4).map(|_| t.pick(&unit)).collect();
        assert_eq!(picks.iter().flatten().filter(|r| **r == a).count(), 1);
        assert_eq!(picks.iter().flatten().filter(|r| **r == b).count(), 2);
        assert_eq!(picks[3], None, "no target has room left");
        assert!(!t.has_room(&unit));
    }
}
