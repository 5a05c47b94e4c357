//! The unit moves of one host Relocate (spec 28 §5): at most the outbound cap at once, each
//! to an eligible target with room left, waiting for a target while none has room (28 §4
//! "No target yet").

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::task::JoinSet;
use tokio::time::Instant;
use zlink_codec::records::HostState;

use super::run::Ask;
use super::targets::{Targets, wait_for_room};
use super::units::{Moved, Unit, preflight};
use crate::host::running::HostInner;
use crate::messaging::{InternalError, ZLinkError};
use crate::objects::client::ObjectClient;

/// How the moves ended.
#[derive(Debug, Default)]
pub(super) struct Moves {
    /// Units (a `PerActor` Spot's members counted each) that moved.
    pub(super) moved: usize,
    /// The first unit failure.
    pub(super) failure: Option<ZLinkError>,
    /// Units left on the source because no target had room for them by the deadline, every
    /// other unit done (28 §4 "No target yet" → `Blocked/TargetUnavailable`).
    pub(super) without_target: usize,
}

/// Moves every unit (at most the outbound cap at once), then any object that became live
/// meanwhile, until none is left, a unit fails, the deadline passes or the host leaves
/// `Relocating`. A unit no target has room for (its earlier units counted, 28 §4 filter step
/// 4) is not started: once every other unit ended, the targets are read again until one has
/// room or the deadline passes.
pub(super) async fn move_all(
    host: &Arc<HostInner>,
    units: Vec<Unit>,
    mut targets: Vec<Targets>,
    ask: Ask,
) -> Moves {
    let mut moved = 0;
    let mut failure: Option<ZLinkError> = None;
    let mut queue: VecDeque<Unit> = units.into();
    let mut waiting: Vec<Unit> = Vec::new();
    loop {
        let limit = host
            .objects
            .iter()
            .flatten()
            .next()
            .map_or(64, |o| o.host.relocation_options.max_active_outbound)
            .max(1) as usize;
        let mut running = JoinSet::new();
        loop {
            while running.len() < limit {
                if Instant::now() >= ask.end || host.life.state() != HostState::Relocating {
                    break;
                }
                let Some(u) = queue.pop_front() else { break };
                let Some(client) = object_client(host, u.node) else {
                    continue;
                };
                // A started unit is accepted work: a shutdown that seals admission waits for it
                // (spec 28 §9); once sealed, no unit starts.
                let Ok(work) = host.life.admit() else { break };
                let Some(to) = targets.get_mut(u.node).and_then(|t| t.pick(&u)) else {
                    // No target with room left: not started, it waits for one.
                    waiting.push(u);
                    continue;
                };
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
                    failure.get_or_insert(ZLinkError::Internal(InternalError::Task {
                        what: "relocation",
                        source: std::sync::Arc::new(e),
                    }));
                }
            }
        }
        let ended = |without_target| Moves {
            moved,
            failure: failure.clone(),
            without_target,
        };
        if failure.is_some()
            || Instant::now() >= ask.end
            || host.life.state() != HostState::Relocating
        {
            // Nothing else left to start: what is left had no target with room.
            return ended(if queue.is_empty() { waiting.len() } else { 0 });
        }
        if !waiting.is_empty() {
            // Every started unit ended: their capacity is in the rows the wait reads.
            match wait_for_room(host, &waiting, ask).await {
                Some(fresh) => {
                    targets = fresh;
                    queue.extend(waiting.drain(..));
                    continue;
                }
                None => return ended(waiting.len()),
            }
        }
        // Objects that became live while the host was still Serving move too.
        match preflight(host).await {
            Ok(more) if more.is_empty() => return ended(0),
            Ok(more) => queue.extend(more),
            Err(_) => return ended(0),
        }
    }
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
pub(super) fn stateful_left(host: &HostInner) -> usize {
    host.objects
        .iter()
        .flatten()
        .map(|o| o.host.live_list().len())
        .sum()
}
