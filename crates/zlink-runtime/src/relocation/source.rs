//! The source side of a live relocation (spec 21 §1.3, §7.3, §8.1): seal, capture, transfer,
//! cutover, close and follow — or cancel and serve again.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use zlink_codec::RoutingId;
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::{AllocationState, ObjectKind};
use zlink_relocation::unit::{
    Binding, Effect, Event, MovePlan, Policy, RelocationId, ReservationId, TargetAttemptGeneration,
    Unit, UnitKind,
};

use super::drive::Move;
use super::follow::{FollowRecord, FollowRx, next_hop, send_followed};
use super::stage;
use super::wire::{self, Rebuild};
use crate::mesh::node::ReplyBody;
use crate::messaging::{
    ErrorReply, InvalidCall, MoveRefusal, StaleReason, UnavailableReason, ZLinkError,
};
use crate::objects::ActorRef;
use crate::objects::client::ObjectClient;
use crate::objects::host::{ObjectKey, store_failure, what};
use crate::objects::live::{Completion, LiveObject};
use crate::objects::membership::Membership;
use crate::objects::registration::RelocationChoice;
use crate::relocation::MovesOf;
use zlink_location::{AuthorityHandle, AuthorityRead, TargetNode};

/// How long the source waits for the target's relay-ready and cutover answers.
pub(super) const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// Moves the Ready Entry Spot member Actor `actor`, owned by this node, to `target` (or to an
/// eligible Object Server the node's Discovery lists), and returns its ref there. A
/// `DisableRelocation` type is refused (`InvalidOperation`) before anything is captured, and
/// the Actor keeps serving here; a move that fails before the cutover is cancelled and the
/// Actor serves here again, its owner unchanged. The move is driven by a
/// `zlink_relocation::unit::Unit` ([`Move`]).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) async fn relocate_actor(
    client: &ObjectClient,
    actor: &ActorRef,
    target: Option<&RoutingId>,
) -> Result<ActorRef, ZLinkError> {
    relocate_actor_unit(client, actor, target, None, None).await
}

/// [`relocate_actor`] with the move's deadline `until` (a host Relocate's, when given): the
/// Restore command carries it, so the target waits for the source's ready no longer than that
/// (docs/formats.md §14).
pub(crate) async fn relocate_actor_within(
    client: &ObjectClient,
    actor: &ActorRef,
    target: Option<&RoutingId>,
    until: Option<Instant>,
) -> Result<ActorRef, ZLinkError> {
    relocate_actor_unit(client, actor, target, None, until).await
}

/// [`relocate_actor`] for an Entry Spot member (`part` absent) or for one member Actor of the
/// `PerActor` User Spot move `part` (its record must name that Spot as a `PerActor` member;
/// the target's NewOwner then moves it in the move record too, spec 21 §8.2), with the move's
/// deadline `until` when it has one.
pub(super) async fn relocate_actor_unit(
    client: &ObjectClient,
    actor: &ActorRef,
    target: Option<&RoutingId>,
    part: Option<wire::PerActorPart>,
    until: Option<Instant>,
) -> Result<ActorRef, ZLinkError> {
    let host = &client.objects;
    let key: ObjectKey = (AuthorityKind::Actor, actor.id.clone());
    let handle = owned_actor(client, actor).await?;
    let membership = Membership::decode(handle.payload());
    let kind = match &part {
        None if membership.as_ref().is_some_and(|m| !m.entry) => {
            return Err(MoveRefusal::MovesWithSpot.into());
        }
        None => UnitKind::EntryMemberActor,
        Some(p) if membership.is_some_and(|m| !m.entry && !m.spot_wide && m.spot == p.spot) => {
            UnitKind::PerActorSpotActor
        }
        Some(_) => return Err(MoveRefusal::NotPerActorMember.into()),
    };
    let choice = host
        .types
        .get(handle.stable_type())
        .and_then(|t| t.relocation);
    let ready = start_single(host, &key, &handle, (kind, choice))?;
    let Ready {
        unit,
        effects,
        rebuild,
        live,
    } = ready;
    let mut unit =
        Move::new(client, key, handle, live, rebuild, target.cloned(), unit).until(until);
    if let Some(p) = part {
        unit = unit.per_actor(p, false);
    }
    unit.run(effects).await.map(|moved| ActorRef::of(&moved))
}

/// The record of the Ready Actor incarnation `actor`, owned by this node's run: a missing
/// record is `NotFound`, another incarnation `InvalidOperation`, one not Active `Unavailable`,
/// another owner `NotOwnedHere`.
pub(super) async fn owned_actor(
    client: &ObjectClient,
    actor: &ActorRef,
) -> Result<AuthorityHandle, ZLinkError> {
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
        return Err(InvalidCall::OtherIncarnation {
            target: what(key.0, &key.1),
            named: actor.generation,
            current: handle.object_generation().get(),
        }
        .into());
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
        return Err(MoveRefusal::NotOwnedHere {
            kind: key.0,
            id: key.1.clone(),
        }
        .into());
    }
    Ok(handle)
}

/// A single-object move ready to run: the started unit, its first effects, how the target
/// rebuilds the object, and its live activation here.
pub(super) struct Ready {
    pub(super) unit: Unit,
    pub(super) effects: Vec<Effect>,
    pub(super) rebuild: Rebuild,
    pub(super) live: Arc<dyn LiveObject>,
}

/// Starts the unit machine of a single-object move of `key`, recorded as `handle`, under the relocation policy its type chose (`choice`):
/// `DisableRelocation` is refused (`InvalidOperation`) before anything is captured; an object
/// not live here, or already moving, is refused too.
pub(super) fn start_single(
    host: &crate::objects::host::ObjectHost,
    key: &ObjectKey,
    handle: &AuthorityHandle,
    (kind, choice): (UnitKind, Option<RelocationChoice>),
) -> Result<Ready, ZLinkError> {
    let (policy, rebuild) = match choice {
        Some(RelocationChoice::Recreate) => (Policy::Recreate, Rebuild::Recreate),
        Some(RelocationChoice::Preserve) => (Policy::Preserve, Rebuild::Preserve),
        _ => (Policy::Disable, Rebuild::Recreate),
    };
    let binding = Binding {
        relocation: RelocationId::random(),
        attempt: TargetAttemptGeneration::random(),
    };
    let plan = MovePlan::new(
        binding,
        kind,
        policy,
        ReservationId::random(),
        handle.version().clone(),
        stage::no_target_list(),
    );
    let (unit, effects) = Unit::start(plan);
    if effects.iter().any(|e| matches!(e, Effect::Reject { .. })) {
        return Err(MoveRefusal::RelocationDisabled {
            kind: key.0,
            id: key.1.clone(),
        }
        .into());
    }
    let live = host
        .live_object(key)
        .ok_or_else(|| StaleReason::NotLiveHere {
            kind: key.0,
            id: key.1.clone(),
        })?;
    if host.relocations().covers(key) {
        return Err(MoveRefusal::AlreadyMoving {
            kind: key.0,
            id: key.1.clone(),
        }
        .into());
    }
    Ok(Ready {
        unit,
        effects,
        rebuild,
        live,
    })
}

/// An eligible Object Server for the Actor's type other than this node (the named one when
/// `wanted` is given), from the node's Discovery candidates.
pub(super) async fn choose_target(
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
    let offer = (handle.kind(), handle.stable_type().clone());
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
            target: crate::messaging::Target::RelocationTarget,
            reason: UnavailableReason::NotConnected,
        })
}

/// A command-plane request to `to`, answered within [`ANSWER_TIMEOUT`].
pub(super) async fn request(
    client: &ObjectClient,
    to: &RoutingId,
    command: &'static str,
    body: Bytes,
) -> Result<ReplyBody, ZLinkError> {
    request_within(client, to, (command, body), ANSWER_TIMEOUT).await
}

/// A command-plane request to `to`, answered within `timeout`.
pub(super) async fn request_within(
    client: &ObjectClient,
    to: &RoutingId,
    (command, body): (&'static str, Bytes),
    timeout: Duration,
) -> Result<ReplyBody, ZLinkError> {
    let inner = &client.node.inner;
    let peer = inner.route_to(to)?;
    inner.control_request(&peer, command, body, timeout).await
}

/// How long the source waits for the cutover's answer: the target runs NewOwner at once or
/// after its cutover wait, and settles a lost reply by reading until `storeFailureGrace` has
/// passed (spec 21 §10), so its answer may take that long; a shorter wait would fence a
/// target that is still settling its owner change.
pub(super) fn cutover_answer_timeout(client: &ObjectClient) -> Duration {
    let options = client.objects.location.options();
    ANSWER_TIMEOUT.max(
        options.store_failure_grace
            + client.objects.relocation_options.cutover_wait_timeout
            + ANSWER_TIMEOUT,
    )
}

/// Sends the cutover of `relocation` (`command`: the single-object or the aggregate one) to
/// `to` and reads the target's answer: its NewOwner applied (the record version and the new
/// AuthorityOwnerGeneration), or the error the answer carries. Waited for as long as the
/// target may settle its owner change ([`cutover_answer_timeout`]).
pub(super) async fn send_cutover(
    client: &ObjectClient,
    to: &RoutingId,
    command: &'static str,
    relocation: u128,
) -> Result<(zlink_store_spi::StoreVersion, u64), ZLinkError> {
    let body = wire::encode(&wire::MoveRef::of(relocation))?;
    let timeout = cutover_answer_timeout(client);
    let body = answered(request_within(client, to, (command, body), timeout).await)?;
    let reply: wire::CutoverReply = wire::decode(&body)?;
    let owner = reply
        .owner_generation
        .parse::<u64>()
        .map_err(wire::number("cutover reply", "ownerGeneration"))?;
    let version = zlink_store_spi::StoreVersion::new(reply.version)
        .map_err(|e| wire::malformed("cutover reply")(e.into()))?;
    Ok((version, owner))
}

/// The unit's events for a cutover whose NewOwner applied at `version`.
pub(super) fn cutover_applied(
    attempt: TargetAttemptGeneration,
    version: zlink_store_spi::StoreVersion,
) -> Vec<Event> {
    vec![
        Event::CutoverReceived { attempt },
        Event::CasApplied { attempt, version },
        Event::CutoverSent,
    ]
}

/// The unit's events for a cutover that failed with `e`: `Unavailable` (the target's NewOwner
/// conflicted and its prepared objects were removed) → a CAS conflict; anything else is not
/// known → a deadline (the record settles it).
pub(super) fn cutover_failed(attempt: TargetAttemptGeneration, e: &ZLinkError) -> Vec<Event> {
    if e.kind() == crate::messaging::ErrorKind::Unavailable {
        vec![
            Event::CutoverReceived { attempt },
            Event::CasConflict { attempt },
        ]
    } else {
        vec![Event::CutoverReceived { attempt }, Event::Deadline]
    }
}

/// The body of an `Ok` reply, or the error the reply carries.
pub(super) fn answered(r: Result<ReplyBody, ZLinkError>) -> Result<Bytes, ZLinkError> {
    match r? {
        ReplyBody::Ok { payload, .. } => Ok(payload),
        ReplyBody::Error(bytes) => Err(ErrorReply::decode(&bytes)?.into_error()),
    }
}

/// After relay-ready: relays the held messages of each of `keys` that came from other nodes,
/// in hold order, on the command plane the cutover follows (they enter the target's temporary
/// queue and the target answers their sources). One peer lookup, the holds taken a pass at a
/// time; the first failure, after every key's messages were tried.
pub(super) fn relay_each<'k>(
    client: &ObjectClient,
    keys: impl IntoIterator<Item = &'k ObjectKey>,
    to: &RoutingId,
    relocation: u128,
) -> Result<(), ZLinkError> {
    let peer = client.node.inner.route_to(to)?;
    let mut first = None;
    for relayable in client.objects.relocations().take_relayable_each(keys) {
        if let Err(e) = send_relayed(client, &peer, to, relocation, relayable) {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// Sends the held messages `relayable` of one object to the target `to` over `peer`, in
/// order; the first failure stops the rest (each hears it) and is returned. A request's route
/// back to its caller is kept first (`mesh::node::forward`): a reply the target sends back
/// here — it has no connection of its own to the caller — is relayed, not discarded.
fn send_relayed(
    client: &ObjectClient,
    peer: &zlink_transport::PeerHandle,
    to: &RoutingId,
    relocation: u128,
    relayable: Vec<crate::objects::held::Held>,
) -> Result<(), ZLinkError> {
    let inner = &client.node.inner;
    let mut failed = None;
    let mut admitted = Vec::new();
    for m in relayable {
        let Some(env) = &m.origin else { continue };
        // The target answers the caller directly when it is a peer of its own, else back on
        // this node's connection: the route back is kept, as for a followed message.
        let kept = match &failed {
            Some(_) => None,
            None => inner.keep_route_back(env, env.source_rid()),
        };
        let sent = match &failed {
            Some(e) => Err(ZLinkError::clone(e)),
            None => wire::encode_relay(relocation, env)
                .and_then(|body| inner.send_control(peer, wire::RELAY, body)),
        };
        if let (Err(_), Some(kept)) = (&sent, kept) {
            inner.pending.forwarded.forget(kept);
        }
        match (sent, m.reply) {
            // An Instance Spot one-way whose caller waits for its admission: answered once the
            // target took it (`admitted_once_taken`).
            (Ok(()), Some(done)) if m.route == crate::messaging::RouteKind::Send => {
                admitted.push(done);
            }
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
    admitted_once_taken(client, to, admitted);
    match failed {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// How long a relay's fence waits for the target's answer before the callers it holds are
/// answered anyway (as when the relay was sent).
const RELAY_FENCE_TIMEOUT: Duration = Duration::from_secs(10);

/// Answers the callers of relayed Instance Spot one-ways (`admitted`) once the target took
/// them: a ping on the same command lane, behind the relays, whose answer comes only after the
/// target handled every one-way command before it (they run in arrival order there). Answered
/// at the send, a caller's next one-way — to the new owner, once its record read names it —
/// could reach the target first and run before the relayed one (28 §7: one caller's one-ways
/// stay in order across the move). A fence that fails answers them anyway (the relays were
/// sent).
fn admitted_once_taken(client: &ObjectClient, to: &RoutingId, admitted: Vec<Completion>) {
    if admitted.is_empty() {
        return;
    }
    let (node, to) = (client.node.clone(), to.clone());
    tokio::spawn(async move {
        if let Err(e) = node.ping(&to, RELAY_FENCE_TIMEOUT).await {
            tracing::debug!(error = %e, "relocation: the relay fence was not answered");
        }
        for done in admitted {
            done.handed_over();
        }
    });
}

/// What a read of a unit's record says about its target (spec 21 §10: a read that fails is
/// not an answer).
#[derive(Debug)]
pub(super) enum OwnerRead {
    /// The record names the target as its owner node, under this AuthorityOwnerGeneration.
    Target(u64),
    /// The record was read and does not name the target (or is gone).
    NotTarget,
    /// The record could not be read: whether the target owns the unit is unknown.
    Unknown(zlink_location::LocationError),
}

/// Where the record of `key` stands with respect to the node `to` now: it names `to` (with its
/// AuthorityOwnerGeneration), it was read and does not, or it could not be read.
pub(super) async fn owner_is(
    client: &ObjectClient,
    key: &ObjectKey,
    kind: ObjectKind,
    to: &RoutingId,
) -> OwnerRead {
    match client.objects.location.authority().read(kind, &key.1).await {
        Ok(AuthorityRead::Found { handle, .. }) if &handle.node().routing_id == to => {
            OwnerRead::Target(handle.authority_owner_generation().get())
        }
        Ok(_) => OwnerRead::NotTarget,
        Err(e) => OwnerRead::Unknown(e),
    }
}

/// `OnClosing(RelocationOut)` on the old activation of a Spot that moved (spec 28 §6 step
/// 10): after the location change, as a turn after every accepted one, before the activation
/// closes. Nothing for an Actor (an Entry Spot never moves, so it never gets one); an error is
/// logged, the move stands.
pub(crate) async fn relocation_out(key: &ObjectKey, old: &dyn LiveObject) {
    if key.0 != zlink_codec::keys::AuthorityKind::Spot {
        return;
    }
    let ctx = crate::objects::ClosingContext::new(
        crate::objects::ClosingReason::RelocationOut,
        key.1.as_str().to_owned(),
        None,
    );
    let call = crate::objects::lifecycle::LifecycleCall::Closing(ctx);
    if let Err(e) = old.lifecycle(call).await {
        tracing::warn!(spot = key.1.as_str(), error = %e, "closing callback (RelocationOut) failed");
    }
}

/// The moved object's record as it is now.
pub(super) async fn read_record(
    client: &ObjectClient,
    key: &ObjectKey,
    kind: ObjectKind,
) -> Result<AuthorityHandle, ZLinkError> {
    match client
        .objects
        .location
        .authority()
        .read(kind, &key.1)
        .await
        .map_err(store_failure)?
    {
        AuthorityRead::Found { handle, .. } => Ok(handle),
        AuthorityRead::Missing { .. } => Err(ZLinkError::NoRoute {
            target: what(key.0, &key.1),
        }),
    }
}

/// The record of the User Spot `key` as it is now, `Active` and owned by this node's run:
/// else `NoRoute` (missing), `Unavailable` (not serving) or `InvalidOperation` (another owner).
pub(super) async fn read_owned_spot(
    client: &ObjectClient,
    key: &ObjectKey,
) -> Result<AuthorityHandle, ZLinkError> {
    let handle = read_record(client, key, ObjectKind::UserSpot).await?;
    if handle.state() != zlink_codec::records::AllocationState::Active {
        return Err(ZLinkError::Unavailable {
            target: what(key.0, &key.1),
            reason: crate::messaging::UnavailableReason::NotServing,
        });
    }
    let host = &client.objects;
    if host.location.host_run().as_ref() != Some(handle.owner())
        || handle.node().routing_id != host.rid
    {
        return Err(MoveRefusal::NotOwnedHere {
            kind: key.0,
            id: key.1.clone(),
        }
        .into());
    }
    Ok(handle)
}

/// Message Follow (spec 21 §7.3): forwards, in order, every message the gate of `key` takes
/// until `until` to the new owner the follow record names — never re-reading the store for a
/// message (one read per follow, in the background, checks that the owner change still
/// stands); then the gate closes and this node answers by the record. A message from another node goes as
/// received, with its follow chain one hop longer ([`next_hop`]): a refused hop answers a
/// request with the typed error and drops (counts) a one-way. Each message is counted off
/// `pending` once it is done with (handed to the connection, answered or refused): while any
/// is left, a message sent on this node joins the queue instead of going to the new owner
/// directly ahead of them (`Relocations::forwards_pending`).
pub(super) async fn forward(
    client: ObjectClient,
    key: ObjectKey,
    record: FollowRecord,
    (mut rx, pending): (FollowRx, std::sync::Arc<std::sync::atomic::AtomicUsize>),
    until: Instant,
) {
    /// Counts one message off `pending` when its iteration ends (whichever way it ends).
    struct Done<'a>(&'a std::sync::atomic::AtomicUsize);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
    let relocations = &client.objects.relocations();
    let me = client.objects.rid.clone();
    let mut window_open = true;
    let mut verified = false;
    loop {
        let next = if window_open {
            match tokio::time::timeout_at(until, rx.recv()).await {
                Ok(m) => m,
                Err(_) => {
                    relocations.unfollow(&key);
                    window_open = false;
                    continue;
                }
            }
        } else {
            rx.recv().await
        };
        let Some(next) = next else { break };
        if !verified {
            // Once per follow, in the background: the record is read, which ends this follow
            // and removes the record if it still names this run (a rollback lost the owner
            // change: `objects::host::stale_move`), rather than following to a target that no
            // longer holds the object for the rest of the window.
            verified = true;
            if key.0 == AuthorityKind::Actor {
                let (c, id) = (client.clone(), key.1.clone());
                tokio::spawn(async move {
                    if let Err(e) = c.read(ObjectKind::Actor, &id).await {
                        tracing::debug!(error = %e, "follow: the record was not read");
                    }
                });
            }
        }
        let (mut m, chain) = *next;
        let _done = Done(&pending);
        if m.route == crate::messaging::RouteKind::Send {
            if let Some(done) = m.reply.take() {
                // An Instance Spot one-way whose caller waits for its admission.
                done.complete(Err(super::instance::refollow(&key)));
                continue;
            }
        }
        let chain = match next_hop(chain.as_ref(), &record, &me) {
            Ok(chain) => chain,
            Err(refused) => {
                tracing::debug!(object = %what(key.0, &key.1), %refused, "followed message refused");
                relocations.refuse_follow(m, refused);
                continue;
            }
        };
        // One the new owner sent itself goes as a request of this node, which answers it (the
        // new owner would send its reply back here, where nothing waits for it).
        if let Some(env) = m.origin.as_ref().filter(|e| e.source_rid() != &record.to) {
            // Forwarded as received: the new owner answers the original source itself, or back
            // here when it has no connection to it, and this node relays the reply.
            // Boxed, as the forward below: the future waiting for messages stays small (one per
            // participant of a unit lives for the whole follow window).
            let sent = Box::pin(send_followed(&client, &record.to, &chain, env)).await;
            match (sent, m.reply) {
                (Ok(()), Some(done)) => done.handed_over(),
                (Err(e), Some(done)) => done.complete(Err(e)),
                (Ok(()), None) => {}
                (Err(e), None) => tracing::debug!(error = %e, "followed one-way not forwarded"),
            }
            continue;
        }
        let out = Box::pin(client.forward_held(&record.to, &key, m.route, m.call)).await;
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
