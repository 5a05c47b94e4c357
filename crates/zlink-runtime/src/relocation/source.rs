//! The source side of a live relocation (spec 21 §1.3, §7.3, §8.1): seal, capture, transfer,
//! cutover, close and follow — or cancel and serve again.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::time::Instant;
use zlink_codec::RoutingId;
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::{AllocationState, ObjectKind};
use zlink_relocation::transfer::{
    ChunkLimit, SourceFence, TransferBinding, check_adapter_output, chunk_payload,
};

use super::Held;
use super::wire::{self, MoveRef, Rebuild, RestoreCommand};
use crate::location::{AuthorityHandle, AuthorityRead, Outcome, TargetNode, TargetReservation};
use crate::mesh::messaging::{ErrorKind, ErrorReply, UnavailableReason, ZLinkError};
use crate::mesh::node::ReplyBody;
use crate::objects::ActorRef;
use crate::objects::client::{ObjectClient, invalid};
use crate::objects::host::{ObjectKey, stale, store_failure, what};
use crate::objects::live::LiveObject;
use crate::objects::membership::Membership;
use crate::objects::messages::owner_unreachable;
use crate::objects::registration::RelocationChoice;

/// How long the source waits for the target's relay-ready and cutover answers.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// Moves the Ready Entry Spot member Actor `actor`, owned by this node, to `target` (or to an
/// eligible Object Server the node's Discovery lists), and returns its ref there. A
/// `DisableRelocation` type is refused (`InvalidOperation`) before anything is captured, and
/// the Actor keeps serving here; a move that fails before the cutover is cancelled and the
/// Actor serves here again, its record untouched.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) async fn relocate_actor(
    client: &ObjectClient,
    actor: &ActorRef,
    target: Option<&RoutingId>,
) -> Result<ActorRef, ZLinkError> {
    let host = &client.objects;
    let key: ObjectKey = (AuthorityKind::Actor, actor.id.clone());
    let authority = host.location.authority();
    let handle = match authority
        .read(ObjectKind::Actor, &actor.id)
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
    if handle.object_generation().get() != actor.generation {
        return Err(invalid(
            "the Actor is another incarnation than the ref names",
        ));
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
        return Err(invalid("the Actor is not owned by this node"));
    }
    if Membership::decode(handle.payload()).is_some_and(|m| !m.entry) {
        return Err(invalid(
            "a User Spot member moves with its Spot (not built yet); only Entry Spot members move",
        ));
    }
    let rebuild = match host
        .types
        .get(handle.stable_type())
        .and_then(|t| t.relocation)
    {
        Some(RelocationChoice::Recreate) => Rebuild::Recreate,
        Some(RelocationChoice::Preserve) => Rebuild::Preserve,
        _ => {
            return Err(invalid(&format!(
                "{} has DisableRelocation: it does not move",
                what(key.0, &key.1)
            )));
        }
    };
    let live = host
        .live_object(&key)
        .ok_or_else(|| stale("the Actor is not live on this node"))?;
    let target = choose_target(client, &handle, target).await?;
    let reservation = match authority.secure_target(&handle, target.clone(), None).await {
        Ok(Outcome::Applied(r)) => r,
        Ok(Outcome::Conflict(c)) => {
            tracing::info!(?c, "relocation target not secured");
            return Err(stale("the record changed or the target has no room"));
        }
        Err(e) => return Err(store_failure(e)),
    };
    if !host.relocations.seal(&key) {
        release(client, &reservation).await;
        return Err(invalid("a move of this Actor is already running"));
    }
    let to = target.node.routing_id.clone();
    let moved = transfer(client, &handle, &reservation, live.as_ref(), rebuild, &to).await;
    let committed = match moved {
        Ok(relocation) => match relay(client, &key, &to, relocation) {
            Ok(()) => cutover(client, &to, relocation).await,
            Err(e) => Err(e),
        },
        Err(e) => {
            tracing::info!(error = %e, "relocation cancelled before relay-ready");
            Err(e)
        }
    };
    let committed = match committed {
        Ok(()) => true,
        Err(e) => {
            // Not committed as far as this node knows: the released reservation fences any
            // later NewOwner; a release that conflicts means the target already owns it.
            match authority.release_target(&reservation).await {
                Ok(Outcome::Applied(())) => {
                    host.relocations.reopen(&key, live.as_ref());
                    return Err(e);
                }
                other => {
                    tracing::info!(?other, "relocation release did not apply: re-reading");
                    owner_is(client, &key, &to).await
                }
            }
        }
    };
    if !committed {
        // Neither committed nor released: keep holding is worse than serving; the record
        // still names this node.
        host.relocations.reopen(&key, live.as_ref());
        return Err(stale(
            "the relocation ended in an unknown state; the Actor stays",
        ));
    }
    finish(client, &key, &to, live).await
}

/// An eligible Object Server for the Actor's type other than this node (the named one when
/// `wanted` is given), from the node's Discovery candidates.
async fn choose_target(
    client: &ObjectClient,
    handle: &AuthorityHandle,
    wanted: Option<&RoutingId>,
) -> Result<TargetNode, ZLinkError> {
    let host = &client.objects;
    let candidates = client
        .discovery
        .candidates(host.location.authority())
        .await
        .map_err(store_failure)?;
    let offer = (ObjectKind::Actor, handle.stable_type().clone());
    candidates
        .into_iter()
        .filter(|c| {
            c.lease_valid
                && c.serving
                && c.target.node.routing_id != host.rid
                && c.target.node.mesh == host.mesh
                && c.target.offers.contains(&offer)
                && wanted.is_none_or(|w| &c.target.node.routing_id == w)
        })
        .max_by_key(|c| c.weight)
        .map(|c| c.target)
        .ok_or_else(|| ZLinkError::Unavailable {
            target: "an eligible relocation target".into(),
            reason: UnavailableReason::NotConnected,
        })
}

/// Captures after every accepted job, sends the Restore and its chunks, and waits for
/// relay-ready. Returns the RelocationId.
async fn transfer(
    client: &ObjectClient,
    handle: &AuthorityHandle,
    reservation: &TargetReservation,
    live: &dyn LiveObject,
    rebuild: Rebuild,
    to: &RoutingId,
) -> Result<u128, ZLinkError> {
    let captured = live.capture().await?;
    let payload = match rebuild {
        Rebuild::Recreate => Bytes::new(),
        Rebuild::Preserve => {
            let bytes = captured.ok_or_else(|| invalid("PreserveStateWith without an adapter"))?;
            check_adapter_output(bytes.len() as u64).map_err(|e| {
                ZLinkError::application(ErrorKind::CapacityExceeded, &e.to_string())
            })?;
            Bytes::from(bytes)
        }
    };
    let internal = |e: &dyn std::fmt::Display| {
        ZLinkError::application(ErrorKind::InternalFailure, &e.to_string())
    };
    let relocation = uuid::Uuid::new_v4().as_u128().max(1);
    let fence = SourceFence::new(
        handle.authority_owner_generation().get(),
        handle.owner().lease_generation.get(),
    )
    .map_err(|e| internal(&e))?;
    let binding = TransferBinding::new(relocation, 1, fence).map_err(|e| internal(&e))?;
    let options = client.objects.location.options();
    let limit =
        ChunkLimit::new(options.relocation.payload_chunk_limit).map_err(|e| internal(&e))?;
    let (header, chunks) = chunk_payload(binding, payload, limit).map_err(|e| internal(&e))?;
    let inner = &client.node.inner;
    let peer = inner.route_to(to)?;
    let cmd = RestoreCommand {
        header: header.encode().to_vec(),
        id: handle.id().as_str().to_owned(),
        stable_type: handle.stable_type().as_str().to_owned(),
        generation: handle.object_generation().get().to_string(),
        rebuild,
        reservation: reservation.to_wire().map_err(store_failure)?,
    };
    inner.send_control(&peer, wire::RESTORE, wire::encode(&cmd)?)?;
    for chunk in chunks {
        inner.send_control(&peer, wire::CHUNK, chunk.encode())?;
    }
    let body = wire::encode(&MoveRef::of(relocation))?;
    answered(
        inner
            .control_request(&peer, wire::PREPARE, body, ANSWER_TIMEOUT)
            .await,
    )?;
    Ok(relocation)
}

fn answered(r: Result<ReplyBody, ZLinkError>) -> Result<(), ZLinkError> {
    match r? {
        ReplyBody::Ok { .. } => Ok(()),
        ReplyBody::Error(bytes) => Err(ErrorReply::decode(&bytes)?.into_error()),
    }
}

/// After relay-ready: relays the held messages that came from other nodes, in hold order, on
/// the command plane the cutover follows (they enter the target's temporary queue and the
/// target answers their sources).
fn relay(
    client: &ObjectClient,
    key: &ObjectKey,
    to: &RoutingId,
    relocation: u128,
) -> Result<(), ZLinkError> {
    let inner = &client.node.inner;
    let peer = inner.route_to(to)?;
    let relayable = client.objects.relocations.take_relayable(key);
    let mut failed = None;
    for m in relayable {
        let Some(env) = &m.origin else { continue };
        let sent = match &failed {
            Some(e) => Err(ZLinkError::clone(e)),
            None => wire::encode_relay(relocation, env)
                .and_then(|body| inner.send_control(&peer, wire::RELAY, body)),
        };
        match (sent, m.reply) {
            (Ok(()), Some(done)) => done.handed_over(),
            (Ok(()), None) => {}
            (Err(e), reply) => {
                // Not relayed: the sender hears it (a request) and the move is cancelled.
                if let Some(done) = reply {
                    done.complete(Err(e.clone()));
                }
                failed.get_or_insert(e);
            }
        }
    }
    match failed {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// Asks the target to commit; an unclear answer is settled by the record.
async fn cutover(
    client: &ObjectClient,
    to: &RoutingId,
    relocation: u128,
) -> Result<(), ZLinkError> {
    let inner = &client.node.inner;
    let peer = inner.route_to(to)?;
    let body = wire::encode(&MoveRef::of(relocation))?;
    answered(
        inner
            .control_request(&peer, wire::CUTOVER, body, ANSWER_TIMEOUT)
            .await,
    )
}

/// Whether the record of `key` names `to` as its owner node now.
async fn owner_is(client: &ObjectClient, key: &ObjectKey, to: &RoutingId) -> bool {
    matches!(
        client.objects.location.authority().read(ObjectKind::Actor, &key.1).await,
        Ok(AuthorityRead::Found { handle, .. }) if &handle.node().routing_id == to
    )
}

async fn release(client: &ObjectClient, reservation: &TargetReservation) {
    if let Err(e) = client
        .objects
        .location
        .authority()
        .release_target(reservation)
        .await
    {
        tracing::warn!(error = %e, "relocation target capacity not released");
    }
}

/// After the cutover: follow (held messages first, in order), close the old activation, drop
/// the route-cache entry, and answer the Actor's ref on its new owner.
async fn finish(
    client: &ObjectClient,
    key: &ObjectKey,
    to: &RoutingId,
    live: Arc<dyn LiveObject>,
) -> Result<ActorRef, ZLinkError> {
    let host = &client.objects;
    let follow = host.location.options().message_follow_duration;
    let until = Instant::now() + follow;
    let (tx, rx) = mpsc::unbounded_channel();
    host.relocations.follow(key, until, tx);
    tokio::spawn(forward(client.clone(), key.clone(), to.clone(), rx, until));
    if let Some(old) = host.remove_live(key) {
        old.close().await;
    } else {
        live.close().await;
    }
    host.routes.forget(key);
    match host
        .location
        .authority()
        .read(ObjectKind::Actor, &key.1)
        .await
        .map_err(store_failure)?
    {
        AuthorityRead::Found { handle, .. } => Ok(ActorRef::of(&handle)),
        AuthorityRead::Missing { .. } => Err(ZLinkError::NoRoute {
            target: what(key.0, &key.1),
        }),
    }
}

/// Message Follow (spec 21 §7.3): forwards, in order, every message the gate of `key` takes
/// until `until`; then the gate closes and this node answers by the record.
async fn forward(
    client: ObjectClient,
    key: ObjectKey,
    to: RoutingId,
    mut rx: mpsc::UnboundedReceiver<Held>,
    until: Instant,
) {
    let mut window_open = true;
    loop {
        let next = if window_open {
            match tokio::time::timeout_at(until, rx.recv()).await {
                Ok(m) => m,
                Err(_) => {
                    client.objects.relocations.unfollow(&key);
                    window_open = false;
                    continue;
                }
            }
        } else {
            rx.recv().await
        };
        let Some(m) = next else { break };
        if let Some(env) = m.origin {
            // Forwarded as received: the new owner answers the original source itself.
            let inner = &client.node.inner;
            let sent = match inner.route_to(&to) {
                Ok(peer) => inner.forward_app(&env, &peer).await,
                Err(e) => Err(owner_unreachable(e)),
            };
            match (sent, m.reply) {
                (Ok(()), Some(done)) => done.handed_over(),
                (Err(e), Some(done)) => done.complete(Err(e)),
                (Ok(()), None) => {}
                (Err(e), None) => tracing::debug!(error = %e, "followed one-way not forwarded"),
            }
            continue;
        }
        let out = client.forward_held(&to, &key, m.route, m.call).await;
        match m.reply {
            Some(done) => done.complete(out),
            None => {
                if let Err(e) = out {
                    tracing::debug!(error = %e, "followed one-way not forwarded");
                }
            }
        }
    }
}
