//! The unit moves of one host Relocate (spec 28 §5): at most the outbound cap at once, each
//! to an eligible target with room left, waiting for a target while none has room (28 §4
//! "No target yet").

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::{HostState, ObjectKind};

use super::run::{Ask, store_reachable};
use super::targets::{Targets, wait_for_room};
use super::units::{Moved, Unit, preflight};
use crate::host::running::HostInner;
use crate::messaging::{ErrorKind, InternalError, ZLinkError};
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

/// How many times the units a round left on this host after a Store failure or a refused
/// owner change are tried again (each time once the Store answers and admission is open).
const RETRY_ROUNDS: u32 = 3;

/// How often a retry waits for the Store and the admission gate.
const STORE_POLL: Duration = Duration::from_millis(100);

/// Moves every unit (at most the outbound cap at once), then any object that became live
/// meanwhile, until none is left, a unit fails, the deadline passes or the host leaves
/// `Relocating`. A unit no target has room for (its earlier units counted, 28 §4 filter step
/// 4) is not started: once every other unit ended, the targets are read again until one has
/// room or the deadline passes.
///
/// A unit that failed with `Unavailable` or `InternalFailure` (a Store failure, an owner
/// change the target could not make — spec 21 §10: the move cancelled before its owner
/// change, the object serving here again) does not end the Relocate at once: once the round
/// ended, the Store answers and every object node admits again, whatever is still live here
/// is listed again and moves in a further round, at most [`RETRY_ROUNDS`] times and never past
/// the deadline. A unit that reports [`ZLinkError::MovedUnconfirmed`] moved (its record could
/// not be read back), and so did one that reports an error although its object left this host and its
/// record names another owner moved (the error came after its owner change, a re-read of the
/// record say): it counts as moved.
pub(super) async fn move_all(
    host: &Arc<HostInner>,
    units: Vec<Unit>,
    mut targets: Vec<Targets>,
    ask: Ask,
) -> Moves {
    let mut moved = 0;
    let mut failure: Option<ZLinkError> = None;
    let mut retries = 0;
    // The failure a retry round set aside.
    let mut earlier: Option<ZLinkError> = None;
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
                    move_unit(&client, &u, &to, ask.end).await
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
                        source: std::sync::Arc::new(e).into(),
                    }));
                }
            }
        }
        let retry = failure.as_ref().is_some_and(|e| {
            matches!(
                e.kind(),
                ErrorKind::Unavailable | ErrorKind::InternalFailure
            )
        }) && retries < RETRY_ROUNDS
            && queue.is_empty();
        if retry && wait_for_store(host, ask).await {
            // Everything still live here is listed again below and moves in a further round.
            retries += 1;
            tracing::info!(retries, error = ?failure, "host Relocate: moving what a Store failure left here again");
            earlier = failure.take();
            waiting.clear();
        }
        let ended = |without_target, failure: &Option<ZLinkError>| Moves {
            moved,
            failure: failure.clone(),
            without_target,
        };
        if failure.is_some()
            || Instant::now() >= ask.end
            || host.life.state() != HostState::Relocating
        {
            // Nothing else left to start: what is left had no target with room.
            return ended(if queue.is_empty() { waiting.len() } else { 0 }, &failure);
        }
        if !waiting.is_empty() {
            // Every started unit ended: their capacity is in the rows the wait reads.
            match wait_for_room(host, &waiting, ask).await {
                Some(fresh) => {
                    targets = fresh;
                    queue.extend(waiting.drain(..));
                    continue;
                }
                None => return ended(waiting.len(), &failure),
            }
        }
        // Objects that became live while the host was still Serving move too (and, after a
        // retry, what the failed round left here).
        match preflight(host).await {
            Ok(more) if more.is_empty() => return ended(0, &failure),
            Ok(more) => queue.extend(more),
            // The failure a retry set aside is the one to report.
            Err(_) => return ended(0, &failure.or(earlier)),
        }
    }
}

/// Moves one unit to `to` through the live relocation of its kind (one Actor, one Instance
/// Spot, one `SpotWide` aggregate, or one `PerActor` User Spot with its members), and returns
/// how many units moved (a `PerActor` Spot's members counted each). An `ApplicationSignaled`
/// Spot's seal and a `PerActor` Spot's member units wait only until `end`. A unit that
/// reports an error although its object left this node and its record names another owner
/// moved (the error came after its owner change): it counts as moved.
pub(super) async fn move_unit(
    client: &ObjectClient,
    u: &Unit,
    to: &zlink_codec::RoutingId,
    end: Instant,
) -> Result<usize, ZLinkError> {
    let done = match &u.object {
        Moved::Actor(actor) => {
            crate::relocation::relocate_actor_within(client, actor, Some(to), Some(end))
                .await
                .map(|_| 1)
        }
        Moved::InstanceSpot(id) => {
            crate::relocation::relocate_instance_spot_within(client, id, Some(to), Some(end))
                .await
                .map(|_| 1)
        }
        Moved::SpotWide(spot) => {
            crate::relocation::relocate_spot_wide(client, spot, Some(to), Some(end))
                .await
                .map(|()| 1)
        }
        // The Spot authority transition, then each member as its own unit.
        Moved::PerActor(spot) => {
            crate::relocation::per_actor::relocate_per_actor(client, spot, Some(to), Some(end))
                .await
        }
    };
    match done {
        // The owner change applied; only the record's read-back failed.
        Err(e @ ZLinkError::MovedUnconfirmed { .. }) => {
            tracing::info!(error = %e, "a unit moved; its record could not be confirmed");
            Ok(1)
        }
        Err(e) if moved_anyway(client, &u.object, end).await => {
            tracing::info!(error = %e, "a unit reported an error after its owner change: moved");
            Ok(1)
        }
        other => other,
    }
}

/// Waits, the host `Relocating`, until the Location Store answers and every object node
/// admits work again; `false` once the deadline passes or the host leaves `Relocating`.
async fn wait_for_store(host: &HostInner, ask: Ask) -> bool {
    loop {
        if host.life.state() != HostState::Relocating {
            return false;
        }
        let admitting = host
            .objects
            .iter()
            .flatten()
            .all(|o| o.host.location.is_admitting());
        if admitting && store_reachable(host).await {
            return true;
        }
        if Instant::now() + STORE_POLL >= ask.end {
            return false;
        }
        tokio::time::sleep(STORE_POLL).await;
    }
}

/// Whether the single object of a unit that reported an error moved anyway: it is no longer
/// live here and its record names another owner run (read once the Store answers, until
/// `until`).
async fn moved_anyway(client: &ObjectClient, object: &Moved, until: Instant) -> bool {
    let (kind, key) = match object {
        Moved::Actor(a) => (ObjectKind::Actor, (AuthorityKind::Actor, a.id.clone())),
        Moved::InstanceSpot(id) => (ObjectKind::InstanceSpot, (AuthorityKind::Spot, id.clone())),
        Moved::SpotWide(_) | Moved::PerActor(_) => return false,
    };
    if client.objects.live_object(&key).is_some() {
        return false;
    }
    let own = client.objects.location.host_run();
    loop {
        match client.objects.location.authority().read(kind, &key.1).await {
            Ok(zlink_location::AuthorityRead::Found { handle, .. }) => {
                return Some(handle.owner()) != own.as_ref();
            }
            Ok(zlink_location::AuthorityRead::Missing { .. }) => return false,
            Err(_) if Instant::now() + STORE_POLL < until => tokio::time::sleep(STORE_POLL).await,
            Err(_) => return false,
        }
    }
}

pub(super) fn object_client(host: &HostInner, i: usize) -> Option<ObjectClient> {
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
        .map(|o| o.host.live_len())
        .sum()
}
