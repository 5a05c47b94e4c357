//! The target side of a live relocation (spec 21 §1.3 steps 5–6, §8.2, §9.1, §9.2): the
//! Restore is assembled and verified before anything is built, the instance is prepared with a
//! temporary queue for early messages, *ready* hands it the reservation the source's
//! `Prepared` record carried, and the cutover commits NewOwner (conditioned on that record's
//! version) before dispatch opens. A target that hears no cutover within
//! `RelocationCutoverWaitTimeout` after ready attempts NewOwner itself; a move the source
//! cancelled (its reservation released) then conflicts, and the prepared instance is dropped
//! without ever running a message. An *abort*, or no ready within a minute, drops it too.

use std::sync::Arc;

use bytes::Bytes;
use zlink_codec::ObjectId;
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::ObjectKind;
use zlink_relocation::transfer::{Assembly, PayloadChunk, RestoreHeader};
use zlink_transport::{Envelope, Reply, ReplyStatus};

use super::Held;
use super::gate::{self, AdmitCommand};
use super::wire::{self, CutoverReply, MoveRef, ReadyCommand, Rebuild, RestoreCommand};
use crate::mesh::node::NodeInner;
use crate::messaging::RouteKind;
use crate::messaging::{BoxFuture, ErrorKind, ErrorReply, ZLinkError};
use crate::objects::host::{ObjectHost, ObjectKey, stale, store_failure};
use crate::objects::inbound;
use crate::objects::live::{Built, Completion, LiveObject};
use crate::objects::registration::FactoryContext;
use zlink_location::{Outcome, TargetReservation};

/// How long a Restore waits for its prepare request before it is forgotten (longer than the
/// source waits for relay-ready).
const ABANDONED_RESTORE: std::time::Duration = std::time::Duration::from_secs(60);

/// A relocation command handler.
pub(crate) type Command = fn(
    Arc<ObjectHost>,
    Arc<NodeInner>,
    Envelope,
) -> BoxFuture<'static, Result<Option<Bytes>, ZLinkError>>;

/// The relocation commands every Object Server node registers.
pub(crate) fn commands() -> Vec<(&'static str, Command)> {
    vec![
        (wire::RESTORE, |h, _, e| Box::pin(restore(h, e))),
        (wire::CHUNK, |h, _, e| Box::pin(chunk(h, e))),
        (wire::PREPARE, |h, _, e| Box::pin(prepare(h, e))),
        (wire::RELAY, |h, n, e| Box::pin(relay(h, n, e))),
        (wire::READY, |h, _, e| Box::pin(ready(h, e))),
        (wire::CUTOVER, |h, _, e| Box::pin(cutover(h, e))),
        (wire::ABORT, |h, _, e| Box::pin(abort(h, e))),
        (gate::ADMIT, |h, _, e| Box::pin(admit(h, e))),
    ]
}

/// A held message the source relays after relay-ready: it enters the temporary queue of the
/// prepared instance (behind everything already there) and is answered to its original
/// source when it runs. A relay for no prepared move here is answered `Unavailable`.
async fn relay(
    host: Arc<ObjectHost>,
    node: Arc<NodeInner>,
    env: Envelope,
) -> Result<Option<Bytes>, ZLinkError> {
    let (relocation, message) = wire::decode_relay(env.payload())?;
    let from = env.source_rid().clone();
    let (id, call, cost) = inbound::prepare(&message)?;
    let incoming = host
        .relocations
        .incoming
        .lock()
        .get(&relocation)
        .map(|i| (i.key.clone(), i.cmd.kind.object_kind()));
    // A participant of a `SpotWide` aggregate prepared here (its queue takes it, if it is one).
    let incoming = incoming.or_else(|| {
        host.relocations
            .spot_wide
            .lock()
            .contains_key(&relocation)
            .then(|| {
                if message.address() == crate::mesh::node::SPOT_ADDRESS {
                    ((AuthorityKind::Spot, id.clone()), ObjectKind::UserSpot)
                } else {
                    ((AuthorityKind::Actor, id.clone()), ObjectKind::Actor)
                }
            })
    });
    let key = incoming.as_ref().map(|(k, _)| k.clone());
    let reply = message.reply_route().is_some().then(|| match &incoming {
        _ if message.source_rid() == &node.rid => {
            answering_here(Arc::clone(&node), message.clone())
        }
        // Accepted at the source, finishing after the owner change: a completion result of
        // the move (21 §9.3, `completion.rs`).
        Some((key, kind)) if key.1 == id => host.relocations.completions.accept(
            &host,
            &node,
            (relocation, key, *kind),
            from.clone(),
            message.clone(),
        ),
        _ => inbound::answering(
            Arc::clone(&node),
            from.clone(),
            message.clone(),
            Box::new(()),
        ),
    });
    let held = Held {
        route: if reply.is_some() {
            RouteKind::Request
        } else {
            RouteKind::Send
        },
        call,
        cost,
        reply,
        origin: Some(message),
    };
    let leftover = match key {
        Some(key) if key.1 == id => host.relocations.intercept(&key, held),
        _ => Some(held),
    };
    if let Some(m) = leftover {
        if let Some(done) = m.reply {
            done.complete(Err(ZLinkError::Unavailable {
                target: format!("relocation {relocation}"),
                reason: crate::messaging::UnavailableReason::NotServing,
            }));
        }
    }
    Ok(None)
}

/// The completion of a relayed request this node sent itself: its waiter is here, so the
/// reply completes it directly (sent, it would go to the relocation's source, a peer, where
/// nothing waits for it).
fn answering_here(node: Arc<NodeInner>, request: Envelope) -> Completion {
    Completion::new(move |out| {
        let out = out.and_then(|o| {
            o.ok_or_else(|| {
                ZLinkError::application(ErrorKind::InternalFailure, "the handler produced no reply")
            })
        });
        let reply = match out {
            Ok((ct, payload)) => Reply::to(&request, ReplyStatus::Ok, payload.into())
                .map(|r| r.with_content_type(&ct)),
            Err(e) => {
                let error = Bytes::from(ErrorReply::from_error(&e).encode());
                Reply::to(&request, ReplyStatus::Error, error).map(Ok)
            }
        };
        match reply {
            Some(Ok(r)) => {
                node.pending.complete(r);
            }
            Some(Err(e)) => tracing::warn!(%e, "reply content type rejected"),
            None => {}
        }
    })
}

/// A prepared instance waiting for its cutover.
struct Prepared {
    live: Arc<dyn LiveObject>,
    /// The reservation as the Restore carried it, then as the `Prepared` record carried it
    /// (after [`wire::READY`]).
    reservation: TargetReservation,
    /// Whether the source's ready came (relay-ready answered; the cutover wait runs). Only a
    /// ready instance runs NewOwner.
    ready: bool,
}

enum Stage {
    /// Chunks arriving (or a failed assembly, with why).
    Receiving(Result<Assembly, String>),
    /// Built, not yet dispatching.
    Prepared(Box<Prepared>),
    /// The cutover ran or the move was aborted: the record version and AuthorityOwnerGeneration
    /// NewOwner committed, or `None` (not committed).
    Done(Option<CutoverReply>),
}

/// One Restore on this node.
pub(crate) struct Incoming {
    key: ObjectKey,
    cmd: RestoreCommand,
    stage: Arc<tokio::sync::Mutex<Stage>>,
    /// What the unit gate admitted this Restore with (28 §5); returned when it is removed.
    permits: Option<super::gate::TargetPermits>,
}

/// The assembly stage of the Restore `relocation` in progress here, if any.
fn incoming_stage(host: &ObjectHost, relocation: u128) -> Option<Arc<tokio::sync::Mutex<Stage>>> {
    host.relocations
        .incoming
        .lock()
        .get(&relocation)
        .map(|i| Arc::clone(&i.stage))
}

async fn restore(host: Arc<ObjectHost>, env: Envelope) -> Result<Option<Bytes>, ZLinkError> {
    let cmd: RestoreCommand = wire::decode(env.payload())?;
    let header = RestoreHeader::decode(&cmd.header).map_err(|e| wire::protocol(&e.to_string()))?;
    let id = ObjectId::new(cmd.id.clone()).map_err(|e| wire::protocol(&e.to_string()))?;
    let key: ObjectKey = (cmd.kind.authority_kind(), id);
    let relocation = header.binding().relocation_id().get();
    let mut incoming = host.relocations.incoming.lock();
    if let Some(i) = incoming.get(&relocation) {
        tracing::debug!(relocation, "relocation Restore repeated");
        if let Ok(mut stage) = i.stage.try_lock() {
            if let Stage::Receiving(Ok(a)) = &mut *stage {
                if let Err(e) = a.accept_restore(&header) {
                    *stage = Stage::Receiving(Err(e.to_string()));
                }
            }
        }
        return Ok(None);
    }
    let declared = header.total_len();
    let mut assembly = Ok(Assembly::new(header));
    match host.types.get(cmd.stable_type.as_str()) {
        Some(t) if t.kind == cmd.kind.object_kind() => {}
        _ => {
            assembly = Err(format!(
                "this node does not offer {} type {:?}",
                cmd.kind.object_kind().as_str(),
                cmd.stable_type
            ))
        }
    }
    // The inbound-unit and Restore permits and the payload memory, before assembling (28
    // §5): those the admission took (shrunk to the declared length), else all at once now —
    // this ordered one-way cannot wait: a short gate refuses the Restore.
    let mut permits = None;
    let admitted = host.relocations.admitted.lock().remove(&relocation);
    if assembly.is_ok() {
        let taken = match admitted {
            Some(mut p) => p
                .shrink_to(declared)
                .map(|()| p)
                .map_err(|e| format!("the Restore declares more than was admitted: {e}")),
            None => host
                .relocations
                .gate(&host.relocation_options)
                .and_then(|g| g.try_inbound(declared))
                .map_err(|e| e.to_string()),
        };
        match taken {
            Ok(p) => permits = Some(p),
            Err(e) => assembly = Err(e),
        }
    }
    if assembly.is_ok() && !host.relocations.queue(&key) {
        permits = None;
        assembly = Err("the object is live or already moving on this node".into());
    }
    let queued = assembly.is_ok();
    incoming.insert(
        relocation,
        Incoming {
            key: key.clone(),
            cmd,
            stage: Arc::new(tokio::sync::Mutex::new(Stage::Receiving(assembly))),
            permits,
        },
    );
    drop(incoming);
    // A Restore whose prepare never comes (the source gave up or went away) is forgotten,
    // with its temporary queue, once the source could no longer be waiting for it.
    let h = Arc::clone(&host);
    tokio::spawn(async move {
        tokio::time::sleep(ABANDONED_RESTORE).await;
        let stage = h
            .relocations
            .incoming
            .lock()
            .get(&relocation)
            .map(|i| Arc::clone(&i.stage));
        if let Some(stage) = stage {
            if matches!(&*stage.lock().await, Stage::Receiving(_)) {
                h.relocations.incoming.lock().remove(&relocation);
                if queued {
                    h.relocations.abandon(&key);
                }
                tracing::info!(relocation, "relocation Restore never prepared: forgotten");
            }
        }
    });
    Ok(None)
}

async fn chunk(host: Arc<ObjectHost>, env: Envelope) -> Result<Option<Bytes>, ZLinkError> {
    let chunk =
        PayloadChunk::decode(env.payload().clone()).map_err(|e| wire::protocol(&e.to_string()))?;
    let relocation = chunk.binding().relocation_id().get();
    let stage = incoming_stage(&host, relocation);
    let Some(stage) = stage else {
        tracing::debug!(relocation, "relocation chunk of no Restore here discarded");
        return Ok(None);
    };
    let mut stage = stage.lock().await;
    if let Stage::Receiving(Ok(a)) = &mut *stage {
        if let Err(e) = a.accept(chunk) {
            *stage = Stage::Receiving(Err(e.to_string()));
        }
    }
    Ok(None)
}

/// Removes the Restore `relocation` and its temporary queue (the move will not commit here).
fn forget(host: &ObjectHost, relocation: u128, key: &ObjectKey) {
    host.relocations.incoming.lock().remove(&relocation);
    host.relocations.completions.abandoned(relocation);
    host.relocations.abandon(key);
}

fn failed(why: &str) -> ZLinkError {
    ZLinkError::application(
        ErrorKind::InternalFailure,
        &format!("the relocation target refused: {why}"),
    )
}

async fn prepare(host: Arc<ObjectHost>, env: Envelope) -> Result<Option<Bytes>, ZLinkError> {
    let relocation = wire::decode::<MoveRef>(env.payload())?.id()?;
    let found = host
        .relocations
        .incoming
        .lock()
        .get(&relocation)
        .map(|i| (i.key.clone(), i.cmd.clone(), Arc::clone(&i.stage)));
    let Some((key, cmd, stage)) = found else {
        return Err(failed("no Restore arrived for this relocation"));
    };
    let mut stage = stage.lock().await;
    let payload = match &*stage {
        Stage::Receiving(Ok(a)) => a.payload().map_err(|e| e.to_string()),
        Stage::Receiving(Err(e)) => Err(e.clone()),
        Stage::Prepared(_) => return Ok(Some(Bytes::new())),
        Stage::Done(_) => return Err(failed("the relocation already ended")),
    };
    let built = build(&host, &key, &cmd, payload).await;
    // Built or not, the Restore ran: its permit and the payload memory go back.
    if let Some(i) = host.relocations.incoming.lock().get_mut(&relocation) {
        if let Some(p) = &mut i.permits {
            p.end_restore();
        }
    }
    match built {
        Ok(prepared) => {
            *stage = Stage::Prepared(Box::new(prepared));
            drop(stage);
            // A prepared instance whose ready never comes (the source cancelled, or went
            // away) is dropped once the source could no longer be waiting for it.
            let h = Arc::clone(&host);
            tokio::spawn(async move {
                tokio::time::sleep(ABANDONED_RESTORE).await;
                if discard(&h, relocation, false).await {
                    tracing::info!(
                        relocation,
                        "relocation never got ready: prepared instance dropped"
                    );
                }
            });
            Ok(Some(Bytes::new()))
        }
        Err(why) => {
            *stage = Stage::Done(None);
            drop(stage);
            forget(&host, relocation, &key);
            tracing::info!(relocation, %why, "relocation target refused");
            Err(why.into_error(&key))
        }
    }
}

/// Why the target refused to build a Restore's instance.
#[derive(Debug)]
enum Refusal {
    /// Anything but the state: no such type, a factory that failed, a bad command.
    Failed(String),
    /// The adapter's restore failed on every allowed attempt (`StateIncompatible`, 28 §8).
    Incompatible(String),
}

impl Refusal {
    /// The error the prepare request is answered with (its kind crosses the wire).
    fn into_error(self, key: &ObjectKey) -> ZLinkError {
        match self {
            Self::Failed(why) => failed(&why),
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

/// Assembles and builds the instance (not yet dispatching).
async fn build(
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
            live,
            reservation,
            ready: false,
        }),
        Built::Rejected { reason } => Err(Refusal::Failed(reason)),
        Built::Failed { error } => Err(Refusal::Failed(error)),
        Built::Incompatible { error } => Err(Refusal::Incompatible(error)),
    }
}

/// The source recorded `Prepared`: the prepared instance takes the reservation the record
/// carried (NewOwner is conditioned on that record's version), the cutover wait starts, and
/// the reply is relay-ready. A repeated ready answers the same.
async fn ready(host: Arc<ObjectHost>, env: Envelope) -> Result<Option<Bytes>, ZLinkError> {
    let cmd: ReadyCommand = wire::decode(env.payload())?;
    let relocation = MoveRef {
        relocation: cmd.relocation.clone(),
    }
    .id()?;
    let stage = incoming_stage(&host, relocation);
    let Some(stage) = stage else {
        return Err(failed("no prepared instance for this relocation"));
    };
    let mut stage = stage.lock().await;
    let Stage::Prepared(p) = &mut *stage else {
        return Err(failed("the relocation is not prepared here"));
    };
    if p.ready {
        return Ok(Some(Bytes::new()));
    }
    let target = host
        .instances
        .own_target(&host)
        .map_err(|e| failed(&e.to_string()))?;
    p.reservation = TargetReservation::from_wire(&cmd.reservation, target)
        .map_err(|e| failed(&e.to_string()))?;
    p.ready = true;
    drop(stage);
    let wait = host.relocation_options.cutover_wait_timeout;
    tokio::spawn(async move {
        tokio::time::sleep(wait).await;
        if commit(&host, relocation).await.is_some() {
            tracing::info!(
                relocation,
                "no cutover within the wait: NewOwner attempted here"
            );
        }
    });
    Ok(Some(Bytes::new()))
}

async fn cutover(host: Arc<ObjectHost>, env: Envelope) -> Result<Option<Bytes>, ZLinkError> {
    let relocation = wire::decode::<MoveRef>(env.payload())?.id()?;
    match commit(&host, relocation).await {
        Some(Some(reply)) => Ok(Some(wire::encode(&reply)?)),
        Some(None) => Err(stale("the move did not commit on the target")),
        None => Err(failed("no ready prepared instance for this relocation")),
    }
}

/// The source asks this node to admit a unit before its seal (28 §5): the inbound-unit and
/// `Restore` permits and the source's payload memory claim, taken at once once all are free
/// (waiting at most [`gate::ADMIT_WAIT`]). They are kept for the Restore, and forgotten with
/// it if it never comes.
async fn admit(host: Arc<ObjectHost>, env: Envelope) -> Result<Option<Bytes>, ZLinkError> {
    let cmd: AdmitCommand = wire::decode(env.payload())?;
    let relocation = MoveRef {
        relocation: cmd.relocation,
    }
    .id()?;
    let gate = host.relocations.gate(&host.relocation_options)?.clone();
    let permits = tokio::time::timeout(gate::ADMIT_WAIT, gate.admit_inbound(cmd.bytes))
        .await
        .map_err(|_| {
            ZLinkError::from(gate::GateError::Busy {
                what: "inbound unit permit, Restore permit or payload memory",
            })
        })??;
    host.relocations.admitted.lock().insert(relocation, permits);
    let h = Arc::clone(&host);
    tokio::spawn(async move {
        tokio::time::sleep(ABANDONED_RESTORE).await;
        if h.relocations.admitted.lock().remove(&relocation).is_some() {
            tracing::info!(
                relocation,
                "relocation admitted but never restored: forgotten"
            );
        }
    });
    Ok(Some(Bytes::new()))
}

/// The source cancelled before relay-ready: the Restore, its prepared instance and its
/// temporary queue go (a move already ended here stays as it is).
async fn abort(host: Arc<ObjectHost>, env: Envelope) -> Result<Option<Bytes>, ZLinkError> {
    let relocation = wire::decode::<MoveRef>(env.payload())?.id()?;
    host.relocations.admitted.lock().remove(&relocation);
    if discard(&host, relocation, true).await {
        tracing::info!(
            relocation,
            "relocation aborted by the source: discarded here"
        );
    }
    Ok(None)
}

/// Drops the Restore `relocation` if it has not ended: still receiving, or prepared and (unless
/// `even_ready`) not yet ready. The prepared instance closes without running a message.
async fn discard(host: &Arc<ObjectHost>, relocation: u128, even_ready: bool) -> bool {
    let Some((key, stage)) = host
        .relocations
        .incoming
        .lock()
        .get(&relocation)
        .map(|i| (i.key.clone(), Arc::clone(&i.stage)))
    else {
        return false;
    };
    let mut stage = stage.lock().await;
    let live = match &*stage {
        Stage::Receiving(_) => None,
        Stage::Prepared(p) if even_ready || !p.ready => Some(Arc::clone(&p.live)),
        _ => return false,
    };
    *stage = Stage::Done(None);
    drop(stage);
    forget(host, relocation, &key);
    if let Some(live) = live {
        live.close().await;
    }
    true
}

/// Runs NewOwner for the prepared `relocation` once (the cutover, or the cutover wait ran
/// out): committed → the activation joins the live set, its temporary queue runs in order and
/// dispatch opens; a conflict → the prepared instance closes without running a message.
/// `None` when nothing ready is prepared under that id; else the committed record version, or
/// `None` inside (not committed).
async fn commit(host: &Arc<ObjectHost>, relocation: u128) -> Option<Option<CutoverReply>> {
    let (key, kind, part, stage) = {
        let incoming = host.relocations.incoming.lock();
        let i = incoming.get(&relocation)?;
        (
            i.key.clone(),
            i.cmd.kind,
            i.cmd.per_actor.clone(),
            Arc::clone(&i.stage),
        )
    };
    let mut stage = stage.lock().await;
    let prepared = match std::mem::replace(&mut *stage, Stage::Done(None)) {
        Stage::Prepared(p) if p.ready => *p,
        Stage::Done(ok) => {
            *stage = Stage::Done(ok.clone());
            return Some(ok);
        }
        other => {
            *stage = other;
            return None;
        }
    };
    // Tried again on a lost reply until the Store failure grace has passed (spec 21 §10).
    let until = tokio::time::Instant::now() + host.location.options().store_failure_grace;
    let outcome = super::owner_change::new_owner_settled(
        host.location.authority(),
        kind.object_kind(),
        &key.1,
        &prepared.reservation,
        until,
        part.as_ref().map_or(
            super::owner_change::Change::Single,
            super::owner_change::Change::PerActor,
        ),
    )
    .await;
    let ok = match outcome {
        Ok(Outcome::Applied(handle)) => {
            host.relocations.completions.committed(relocation);
            host.relocations.completions.settled(relocation);
            host.insert_live(key.clone(), Arc::clone(&prepared.live), &handle);
            host.relocations.open(&key, prepared.live.as_ref());
            host.routes.forget(&key);
            tracing::info!(relocation, object = %key.1.as_str(), "relocation committed: this node owns the object");
            Some(CutoverReply {
                version: handle.version().as_str().to_owned(),
                owner_generation: handle.authority_owner_generation().get().to_string(),
            })
        }
        Ok(Outcome::Conflict(c)) => {
            tracing::info!(
                relocation,
                ?c,
                "relocation NewOwner conflicted: prepared instance dropped"
            );
            None
        }
        Err(e) => {
            tracing::warn!(relocation, error = %store_failure(e), "relocation NewOwner failed");
            None
        }
    };
    *stage = Stage::Done(ok.clone());
    drop(stage);
    host.relocations.incoming.lock().remove(&relocation);
    if ok.is_none() {
        host.relocations.completions.abandoned(relocation);
        host.relocations.abandon(&key);
        prepared.live.close().await;
    }
    Some(ok)
}

/// Tests: every Restore in progress on this node arrives again exactly as its source would
/// resend it (the same command and binding), followed by its prepare request. A Restore
/// already prepared here is reused: no second temporary queue, factory or `Restore`. Returns
/// how many were resent.
#[cfg(test)]
pub(crate) async fn resend_restores(host: &Arc<ObjectHost>) -> Result<usize, ZLinkError> {
    let cmds: Vec<(u128, RestoreCommand)> = host
        .relocations
        .incoming
        .lock()
        .iter()
        .map(|(r, i)| (*r, i.cmd.clone()))
        .collect();
    let envelope = |body: Bytes| -> Result<Envelope, ZLinkError> {
        let op = zlink_transport::OperationId::new(1).map_err(|e| failed(&e.to_string()))?;
        let generation = zlink_codec::Generation::new(1).map_err(|e| failed(&e.to_string()))?;
        Ok(Envelope::one_way(op, &host.rid, generation, body))
    };
    for (relocation, cmd) in &cmds {
        restore(Arc::clone(host), envelope(wire::encode(cmd)?)?).await?;
        let prepare_body = wire::encode(&MoveRef::of(*relocation))?;
        prepare(Arc::clone(host), envelope(prepare_body)?).await?;
    }
    Ok(cmds.len())
}
