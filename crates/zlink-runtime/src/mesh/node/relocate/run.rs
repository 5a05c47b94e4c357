//! One host Relocate operation (spec 28 §4–§8): preflight, target wait, the `Relocating`
//! publication, the unit moves, and the terminal result.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;
use zlink_codec::records::{HostState, ObjectKind};
use zlink_codec::{ChannelName, RoutingId, StableType};

use super::types::{RelocationMode, RelocationOutcome, RelocationReason, RelocationResult};
use crate::mesh::config::Topology;
use crate::mesh::messaging::{ErrorKind, ZLinkError};
use crate::mesh::node::control;
use crate::mesh::node::host::HostInner;
use crate::objects::ActorRef;
use crate::objects::client::ObjectClient;
use crate::objects::membership::Membership;
use crate::objects::registration::RelocationChoice;
use zlink_location::AuthorityRead;

/// How often the target wait re-reads the descriptor list and the peer table.
const TARGET_POLL: Duration = Duration::from_millis(100);

/// What one operation asks for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ask {
    pub(crate) mode: RelocationMode,
    pub(crate) version: u64,
    pub(crate) end: Instant,
}

impl Ask {
    fn blocked(&self, why: RelocationReason) -> RelocationResult {
        RelocationResult::blocked(self.mode, self.version, why)
    }
}

/// One unit to move, on object node `node`: an Entry Spot member Actor, an Instance Spot, a
/// `SpotWide` User Spot with every member Actor under its turn (one aggregate unit, spec 28
/// §6), or a `PerActor` User Spot (its Spot authority transition, then one unit per member
/// Actor, 28 §5).
#[derive(Debug, Clone)]
struct Unit {
    node: usize,
    object: Moved,
    stable_type: StableType,
    /// A `PerActor` User Spot: its members' Actor types, which its target must offer too
    /// (the members move to the node the Spot's authority moves to).
    members: BTreeSet<StableType>,
}

/// What one unit moves.
#[derive(Debug, Clone)]
enum Moved {
    Actor(ActorRef),
    InstanceSpot(zlink_codec::ObjectId),
    SpotWide(zlink_codec::ObjectId),
    PerActor(zlink_codec::ObjectId),
}

impl Unit {
    fn kind(&self) -> ObjectKind {
        match self.object {
            Moved::Actor(_) => ObjectKind::Actor,
            Moved::InstanceSpot(_) => ObjectKind::InstanceSpot,
            Moved::SpotWide(_) | Moved::PerActor(_) => ObjectKind::UserSpot,
        }
    }
}

/// The eligible targets of one object node: per (kind, stable type), (RID, weight).
type Targets = HashMap<(ObjectKind, StableType), Vec<(RoutingId, u16)>>;

/// Runs the operation to its terminal result (the caller stores and announces it).
pub(crate) async fn run(host: Arc<HostInner>, ask: Ask) -> RelocationResult {
    if host.life.state() != HostState::Serving {
        return ask.blocked(not_serving(host.life.state()));
    }
    if manual_topology(&host) {
        return ask.blocked(RelocationReason::ManualTopologyUnsupported);
    }
    let units = match preflight(&host).await {
        Ok(u) => u,
        Err(why) => return ask.blocked(why),
    };
    if units.is_empty() {
        // Nothing stateful here: no target search (spec 28 §4 "No target yet").
        if !host
            .life
            .transition(&[HostState::Serving], HostState::Relocating)
        {
            return ask.blocked(not_serving(host.life.state()));
        }
        return finish(&host, ask, 0, 0, None).await;
    }
    let targets = match wait_for_targets(&host, &units, ask).await {
        Ok(t) => t,
        Err(why) => return ask.blocked(why),
    };
    if !host
        .life
        .transition(&[HostState::Serving], HostState::Relocating)
    {
        return ask.blocked(not_serving(host.life.state()));
    }
    // Out of new selection: peers at once over the command plane, others by the descriptor.
    announce_weights(&host, true);
    if let Err((attempted, e)) = publish_each(&host, HostState::Relocating).await {
        // 28 §8: every attempted descriptor back to `Serving`. All confirmed → the host
        // serves again, `Blocked/StoreUnavailable`; one unconfirmed → bounded teardown, the
        // host `ForceStopped/TeardownFailed` (its termination result; this Relocate still
        // ends `Blocked/StoreUnavailable`, the only pairs 28 §3 allows).
        tracing::warn!(error = %e, "Relocating descriptor not confirmed: rolling back");
        let unconfirmed = roll_back(&host, attempted).await;
        if unconfirmed.is_empty() {
            if host
                .life
                .transition(&[HostState::Relocating], HostState::Serving)
            {
                announce_weights(&host, false);
            }
        } else {
            tracing::warn!(
                ?unconfirmed,
                "descriptor rollback not confirmed: bounded teardown of the host"
            );
            let report = crate::mesh::node::host::force_stop(&host, unconfirmed).await;
            tracing::warn!(outcome = ?report.outcome, reason = ?report.reason, "host force-stopped");
        }
        return ask.blocked(RelocationReason::StoreUnavailable);
    }
    tracing::info!(units = units.len(), mode = ?ask.mode, version = ask.version, "host relocating");
    let (moved, failure) = move_all(&host, units, &targets, ask).await;
    let remaining = stateful_left(&host);
    finish(&host, ask, moved, remaining, failure).await
}

fn not_serving(state: HostState) -> RelocationReason {
    match state {
        HostState::Draining | HostState::Stopped => RelocationReason::ShutdownRequested,
        _ => RelocationReason::RuntimeNotReady,
    }
}

/// Whether a manual topology component is registered (spec 28 §4): a manual MeshNode or a
/// manual peer intent on any node.
fn manual_topology(host: &HostInner) -> bool {
    host.nodes
        .iter()
        .any(|n| n.inner.topology == Topology::Manual || !n.manual_peers().is_empty())
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
async fn preflight(host: &HostInner) -> Result<Vec<Unit>, RelocationReason> {
    let mut units = Vec::new();
    for (i, o) in host.objects.iter().enumerate() {
        let Some(o) = o else { continue };
        let mut reads = JoinSet::new();
        let mut member_types: HashMap<String, BTreeSet<StableType>> = HashMap::new();
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
            let spot_wide = o.host.live_object(&key).and_then(|l| l.turn()).is_some();
            if kind == ObjectKind::UserSpot {
                if !relocatable(o, &stable_type) {
                    return Err(RelocationReason::RelocationDisabled);
                }
                let id = key.1.clone();
                units.push(Unit {
                    node: i,
                    object: if spot_wide {
                        Moved::SpotWide(id)
                    } else {
                        Moved::PerActor(id)
                    },
                    stable_type,
                    members: BTreeSet::new(),
                });
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
            if spot_wide {
                // A SpotWide member: its Spot's unit moves it.
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
                    units.push(Unit {
                        node: i,
                        object: Moved::InstanceSpot(key.1),
                        stable_type,
                        members: BTreeSet::new(),
                    });
                }
                Ok(AuthorityRead::Found { handle, .. }) => {
                    match Membership::decode(handle.payload()).filter(|m| !m.entry) {
                        // A member of a PerActor User Spot live here: its Spot's unit moves it.
                        Some(m) if !m.spot_wide && per_actor.contains(m.spot.as_str()) => {
                            member_types.entry(m.spot).or_default().insert(stable_type);
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
                    units.push(Unit {
                        node: i,
                        object: Moved::Actor(ActorRef::of(&handle)),
                        stable_type,
                        members: BTreeSet::new(),
                    });
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
            if let Moved::PerActor(spot) = &u.object {
                u.members = member_types.remove(spot.as_str()).unwrap_or_default();
            }
        }
    }
    Ok(units)
}

/// Waits until every object node with units has, for each stable type it moves, at least one
/// eligible target (spec 28 §4 filter order), or the deadline passes (`TargetUnavailable`).
async fn wait_for_targets(
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
        if Instant::now() + TARGET_POLL >= ask.end {
            return Err(RelocationReason::TargetUnavailable);
        }
        for node in &host.nodes {
            node.inner.discovery_wake.notify_one();
        }
        tokio::time::sleep(TARGET_POLL).await;
    }
}

/// The eligible targets per object node, or `None` while one type of one node has none. A
/// target: 1) runs exactly the effective version; 2) is another Object Server, `Serving`, of
/// the same MeshName, its lease valid; 3) registered the stable type; 4) has a positive
/// weight, room for one more Actor, and another maintenance wave when this host has one;
/// 5) is an admitted Ready peer whose lifecycle generation is the descriptor's. A `PerActor`
/// User Spot's target also offers every member's Actor type.
async fn eligible_targets(
    host: &HostInner,
    units: &[Unit],
    ask: Ask,
) -> Result<Option<Vec<Targets>>, zlink_location::LocationError> {
    let mut all = Vec::with_capacity(host.objects.len());
    for (i, o) in host.objects.iter().enumerate() {
        let mut targets = Targets::new();
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
            HashMap::new();
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
                .map(|c| (c.target.node.routing_id.clone(), c.weight))
                .collect();
            if list.is_empty() {
                return Ok(None);
            }
            targets.insert((kind, ty.clone()), list);
        }
        all.push(targets);
    }
    Ok(Some(all))
}

/// Moves every unit (at most the outbound cap at once), then any object that became live
/// meanwhile, until none is left, the deadline passes or the host leaves `Relocating`.
/// Returns how many moved and the first failure.
async fn move_all(
    host: &Arc<HostInner>,
    mut units: Vec<Unit>,
    targets: &[Targets],
    ask: Ask,
) -> (usize, Option<ZLinkError>) {
    let mut moved = 0;
    let mut failure: Option<ZLinkError> = None;
    let mut assigned: HashMap<RoutingId, u64> = HashMap::new();
    loop {
        let limit = host
            .objects
            .iter()
            .flatten()
            .next()
            .map_or(64, |o| o.host.relocation_options.max_active_outbound)
            .max(1) as usize;
        let mut running = JoinSet::new();
        let mut queue = units.drain(..);
        loop {
            while running.len() < limit {
                if Instant::now() >= ask.end || host.life.state() != HostState::Relocating {
                    break;
                }
                let Some(u) = queue.next() else { break };
                let Some(client) = object_client(host, u.node) else {
                    continue;
                };
                let wanted = (u.kind(), u.stable_type.clone());
                let Some(list) = targets.get(u.node).and_then(|t| t.get(&wanted)) else {
                    continue;
                };
                // A started unit is accepted work: a shutdown that seals admission waits for it
                // (spec 28 §9); once sealed, no unit starts.
                let Ok(work) = host.life.admit() else { break };
                let to = pick(list, &mut assigned);
                running.spawn(async move {
                    let _work = work;
                    match &u.object {
                        Moved::Actor(actor) => {
                            crate::relocation::relocate_actor(&client, actor, Some(&to))
                                .await
                                .map(|_| 1)
                        }
                        Moved::InstanceSpot(id) => {
                            crate::relocation::relocate_instance_spot(&client, id, Some(&to))
                                .await
                                .map(|_| 1)
                        }
                        Moved::SpotWide(spot) => {
                            // An ApplicationSignaled Spot's seal waits for its boundary only
                            // until the host deadline (28 §5).
                            crate::relocation::relocate_spot_wide(
                                &client,
                                spot,
                                Some(&to),
                                Some(ask.end),
                            )
                            .await
                            .map(|()| 1)
                        }
                        // The Spot authority transition, then each member as its own unit.
                        Moved::PerActor(spot) => {
                            crate::relocation::per_actor::relocate_per_actor(
                                &client,
                                spot,
                                Some(&to),
                                Some(ask.end),
                            )
                            .await
                        }
                    }
                });
            }
            let Some(done) = running.join_next().await else {
                break;
            };
            match done {
                Ok(Ok(n)) => moved += n,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "a unit of the host Relocate did not move");
                    failure.get_or_insert(e);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "a unit of the host Relocate ended abnormally");
                    failure.get_or_insert(ZLinkError::application(
                        ErrorKind::InternalFailure,
                        "a relocation task ended abnormally",
                    ));
                }
            }
        }
        drop(queue);
        if failure.is_some()
            || Instant::now() >= ask.end
            || host.life.state() != HostState::Relocating
        {
            return (moved, failure);
        }
        // Objects that became live while the host was still Serving move too.
        match preflight(host).await {
            Ok(more) if more.is_empty() => return (moved, None),
            Ok(more) => units = more,
            Err(_) => return (moved, failure),
        }
    }
}

/// The target for the next unit: the eligible node with the fewest units per weight so far.
fn pick(list: &[(RoutingId, u16)], assigned: &mut HashMap<RoutingId, u64>) -> RoutingId {
    let mut best: Option<(&RoutingId, u128)> = None;
    for (rid, weight) in list {
        let n = u128::from(assigned.get(rid).copied().unwrap_or(0)) + 1;
        // n / weight compared as n * (product of the others) without floats: scale by 2^16.
        let score = (n << 16) / u128::from((*weight).max(1));
        if best.is_none_or(|(_, s)| score < s) {
            best = Some((rid, score));
        }
    }
    let rid = best.map_or_else(|| list[0].0.clone(), |(r, _)| r.clone());
    *assigned.entry(rid.clone()).or_insert(0) += 1;
    rid
}

fn object_client(host: &HostInner, i: usize) -> Option<ObjectClient> {
    let o = host.objects.get(i)?.as_ref()?;
    Some(ObjectClient {
        node: host.nodes.get(i)?.clone(),
        objects: Arc::clone(&o.host),
        discovery: o.discovery.clone()?,
    })
}

/// Stateful objects (Actors and Spots) still live on this host.
fn stateful_left(host: &HostInner) -> usize {
    host.objects
        .iter()
        .flatten()
        .map(|o| o.host.live_list().len())
        .sum()
}

/// The terminal step: `Relocated` when nothing is left, else `Blocked` with its reason and
/// the source serving again (unless a shutdown came first).
async fn finish(
    host: &HostInner,
    ask: Ask,
    moved: usize,
    remaining: usize,
    failure: Option<ZLinkError>,
) -> RelocationResult {
    let state = host.life.state();
    let reason = if state != HostState::Relocating {
        not_serving(state)
    } else if remaining == 0 && failure.is_none() {
        RelocationReason::None
    } else if Instant::now() >= ask.end {
        RelocationReason::DeadlineExceeded
    } else {
        match failure.as_ref().map(ZLinkError::kind) {
            Some(ErrorKind::CapacityExceeded) => RelocationReason::TargetUnavailable,
            // The adapter's capture or the target's restore failed on every allowed attempt,
            // or the state is over 64 MiB (`ZLinkError::StateIncompatible`, kept as its kind
            // when the target reported it).
            Some(ErrorKind::TypeMismatch) => RelocationReason::StateIncompatible,
            _ if moved == 0 && !store_reachable(host).await => RelocationReason::StoreUnavailable,
            _ => RelocationReason::RelocationFailed,
        }
    };
    if reason == RelocationReason::None {
        if host
            .life
            .transition(&[HostState::Relocating], HostState::Relocated)
        {
            if let Err(e) = publish(host, HostState::Relocated).await {
                tracing::warn!(error = %e, "Relocated descriptor not published");
            }
        }
        tracing::info!(moved, "host relocated");
        return RelocationResult {
            mode: ask.mode,
            target_version: ask.version,
            outcome: RelocationOutcome::Relocated,
            reason,
            moved,
            remaining: 0,
            interruption: interruption(host),
        };
    }
    if state == HostState::Relocating {
        reopen(host).await;
    }
    tracing::warn!(?reason, moved, remaining, "host relocation blocked");
    RelocationResult {
        mode: ask.mode,
        target_version: ask.version,
        outcome: RelocationOutcome::Blocked,
        reason,
        moved,
        remaining,
        interruption: interruption(host),
    }
}

/// The interruptions of the units this host's object nodes moved out.
fn interruption(host: &HostInner) -> crate::relocation::InterruptionSummary {
    crate::relocation::Interruptions::merged(
        host.objects
            .iter()
            .flatten()
            .map(|o| &o.host.relocations.interruptions),
    )
}

/// Whether the Location Store answers a read now.
async fn store_reachable(host: &HostInner) -> bool {
    let Some(o) = host.objects.iter().flatten().next() else {
        return true;
    };
    let Ok(probe) = zlink_codec::ObjectId::new("zlink-relocate-store-probe") else {
        return true;
    };
    o.host
        .location
        .authority()
        .read(ObjectKind::Actor, &probe)
        .await
        .is_ok()
}

/// Back to `Serving` after a blocked Relocate: the descriptors and the peers' weights.
async fn reopen(host: &HostInner) {
    if host
        .life
        .transition(&[HostState::Relocating], HostState::Serving)
    {
        announce_weights(host, false);
        if let Err(e) = publish(host, HostState::Serving).await {
            tracing::warn!(error = %e, "Serving descriptor not republished after a blocked Relocate");
        }
    }
}

/// Tells the connected peers this host's Channel Server weights: zero (out of new selection)
/// or its own again.
fn announce_weights(host: &HostInner, zero: bool) {
    for node in &host.nodes {
        let weights: BTreeMap<ChannelName, u16> = node
            .inner
            .weights
            .read()
            .iter()
            .map(|(c, w)| (c.clone(), if zero { 0 } else { *w }))
            .collect();
        node.inner
            .broadcast_control(control::WEIGHTS, control::weights_payload(&weights));
    }
}

/// Publishes `state` in every descriptor of this host, in order, up to the first that is not
/// confirmed: that one's error with how many descriptors were attempted (it included: its
/// write may have applied).
async fn publish_each(
    host: &HostInner,
    state: HostState,
) -> Result<(), (usize, zlink_location::LocationError)> {
    for (i, (node, d)) in host.nodes.iter().zip(&host.descriptors).enumerate() {
        if let Some(d) = d {
            let weights = node.inner.weights.read().clone();
            d.publish_state(&weights, state)
                .await
                .map_err(|e| (i + 1, e))?;
        }
    }
    Ok(())
}

/// Writes `Serving` back into the first `attempted` descriptors (28 §8 rollback); one line
/// per descriptor whose rollback was not confirmed.
async fn roll_back(host: &HostInner, attempted: usize) -> Vec<String> {
    let mut unconfirmed = Vec::new();
    for (node, d) in host.nodes.iter().zip(&host.descriptors).take(attempted) {
        if let Some(d) = d {
            let weights = node.inner.weights.read().clone();
            if let Err(e) = d.publish_state(&weights, HostState::Serving).await {
                unconfirmed.push(format!(
                    "Serving rollback of the descriptor of {}: {e}",
                    node.inner.mesh
                ));
            }
        }
    }
    unconfirmed
}

/// Publishes `state` in every descriptor of this host.
async fn publish(host: &HostInner, state: HostState) -> Result<(), zlink_location::LocationError> {
    for (node, d) in host.nodes.iter().zip(&host.descriptors) {
        if let Some(d) = d {
            let weights = node.inner.weights.read().clone();
            d.publish_state(&weights, state).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_picked_by_weight() {
        let a = RoutingId::new(vec![1]).expect("rid");
        let b = RoutingId::new(vec![2]).expect("rid");
        let list = vec![(a.clone(), 300), (b.clone(), 100)];
        let mut assigned = HashMap::new();
        let picks: Vec<RoutingId> = (0..400).map(|_| pick(&list, &mut assigned)).collect();
        let to_a = picks.iter().filter(|r| **r == a).count();
        assert_eq!(to_a, 300, "weights 300:100 split 400 units 3:1");
        assert_eq!(assigned.get(&b), Some(&100));
    }
}
