//! The one target receiver of a live relocation (spec 21 §1.3 steps 5–6, §8, §8.2, §9.1,
//! §9.2), for every unit shape — one object, or a `SpotWide` aggregate — with one [`Stage`]
//! per Restore: the Restore is assembled and verified before anything is built; the
//! participants are prepared hidden, each with a temporary queue for early messages
//! (`build.rs`); *ready* hands over the reservation the source's `Prepared` record carried;
//! and the cutover commits NewOwner (conditioned on that record's version) before any queue
//! opens (`commit.rs`). A target that hears no cutover within `RelocationCutoverWaitTimeout`
//! after ready attempts NewOwner itself; a move the source cancelled (its reservation
//! released) then conflicts, and the prepared objects are dropped without ever running a
//! message (it also releases its reservation, conditioned on the row as read). An *abort*
//! drops them too. A source that sends neither ready nor abort — its run ended mid-move, or it
//! stalled past the unit's deadline (a minute) — is watched for (`watchdog.rs`): the
//! reservation is released and the prepared objects are dropped unrun, unless the record
//! already names this node.

mod build;
mod commit;
mod members;
mod refusal;
mod relay;
mod watchdog;

pub(crate) use members::Following;
pub(crate) use watchdog::release_from_ended_source;

use std::sync::Arc;

use bytes::Bytes;
use zlink_codec::ObjectId;
use zlink_relocation::transfer::{
    Assembly, PayloadChunk, PayloadClaim, PayloadUnit, RestoreHeader,
};
use zlink_transport::Envelope;

use super::aggregate;
use super::gate::{self, AdmitCommand, TargetPermits};
use super::wire::{self, CutoverReply, MoveRef, ReadyCommand, RestoreCommand};
use crate::mesh::node::NodeInner;
use crate::messaging::{BoxFuture, ErrorKind, PayloadError, StaleReason, ZLinkError};
use crate::objects::host::{ObjectHost, ObjectKey};
use crate::objects::live::LiveObject;
use crate::relocation::MovesOf;
use refusal::Refusal;
use zlink_location::TargetReservation;

/// How long a Restore, or a prepared unit, waits for its source before it is forgotten
/// (longer than the source waits for relay-ready).
const ABANDONED_RESTORE: std::time::Duration = std::time::Duration::from_secs(60);

/// A relocation command handler.
pub(crate) type Command = fn(
    Arc<ObjectHost>,
    Arc<NodeInner>,
    Envelope,
) -> BoxFuture<'static, Result<Option<Bytes>, ZLinkError>>;

/// The relocation commands every Object Server node registers: each unit shape has its own
/// admission and Restore header (they differ); every later step finds the Restore by its
/// RelocationId, whatever its shape.
pub(crate) fn commands() -> Vec<(&'static str, Command)> {
    vec![
        (wire::RESTORE, |h, _, e| Box::pin(restore(h, e))),
        (wire::CHUNK, |h, _, e| Box::pin(chunk(h, e))),
        (wire::PREPARE, |h, _, e| Box::pin(prepare(h, e))),
        (wire::RELAY, |h, n, e| Box::pin(relay::relay(h, n, e))),
        (wire::READY, |h, _, e| Box::pin(ready(h, e))),
        (wire::CUTOVER, |h, _, e| Box::pin(cutover(h, e))),
        (wire::ABORT, |h, _, e| Box::pin(abort(h, e))),
        (gate::ADMIT, |h, _, e| {
            Box::pin(admit(h, e, PayloadUnit::Single))
        }),
        (aggregate::ADMIT, |h, _, e| {
            Box::pin(admit(h, e, PayloadUnit::SpotWideAggregate))
        }),
        (gate::DECLARE, |h, _, e| Box::pin(declare(h, e))),
        (aggregate::RESTORE, |h, _, e| {
            Box::pin(restore_spot_wide(h, e))
        }),
        (aggregate::CHUNK, |h, _, e| Box::pin(chunk(h, e))),
        (aggregate::PREPARE, |h, _, e| Box::pin(prepare(h, e))),
        (aggregate::READY, |h, _, e| Box::pin(ready(h, e))),
        (aggregate::CUTOVER, |h, _, e| Box::pin(cutover(h, e))),
        (aggregate::ABORT, |h, _, e| Box::pin(abort(h, e))),
    ]
}

/// One participant built hidden.
struct Hidden {
    key: ObjectKey,
    live: Arc<dyn LiveObject>,
    stable_type: zlink_codec::StableType,
    generation: u64,
}

/// The participants of a unit built hidden, waiting for the cutover.
struct Prepared {
    /// The object, or the Spot first and then every member.
    group: Vec<Hidden>,
    /// The reservation as the Restore carried it, then as the `Prepared` record carried it
    /// (after ready).
    reservation: TargetReservation,
    /// Whether the source's ready came (relay-ready answered; the cutover wait runs). Only a
    /// ready unit runs NewOwner.
    ready: bool,
}

/// Where one Restore is on this node.
enum Stage {
    /// Chunks arriving (or a refused or failed assembly, with why).
    Receiving(Result<Assembly, Refusal>),
    /// Built, not yet dispatching.
    Prepared(Box<Prepared>),
    /// The cutover ran or the move was aborted: the record version and AuthorityOwnerGeneration
    /// NewOwner committed, or `None` (not committed).
    Done(Option<CutoverReply>),
}

/// What a Restore is of.
enum Spec {
    /// One object; its temporary queue is registered when the Restore arrives (`queued`).
    Single {
        key: ObjectKey,
        cmd: RestoreCommand,
        queued: bool,
    },
    /// A `SpotWide` aggregate; its queues are registered when the group is built.
    SpotWide(aggregate::RestoreCommand),
}

/// One Restore on this node.
pub(crate) struct Incoming {
    spec: Spec,
    stage: Arc<tokio::sync::Mutex<Stage>>,
    /// What the unit gate admitted this Restore with (28 §5): the `Restore` permit and the
    /// memory go back once the unit is built (or refused), the inbound permit when this entry
    /// is removed.
    permits: Option<TargetPermits>,
    /// When this node stops waiting for the source's ready (`watchdog.rs`): set when the
    /// Restore arrives, renewed once the unit is prepared, never past `deadline`.
    until: tokio::time::Instant,
    /// The move's deadline as the Restore command carried it (`deadlineMs` after it arrived),
    /// if it had one.
    deadline: Option<tokio::time::Instant>,
    /// This host's run when the Restore arrived: only that run can commit the unit (NewOwner
    /// checks the reservation's target lease), so a takeover under a new run ends it
    /// (`watchdog.rs`).
    run: Option<zlink_location::HostRun>,
}

impl Spec {
    /// The move's deadline the Restore command carries, from `now` (`None`: absent).
    fn deadline(&self, now: tokio::time::Instant) -> Option<tokio::time::Instant> {
        let ms = match self {
            Spec::Single { cmd, .. } => cmd.deadline_ms,
            Spec::SpotWide(cmd) => cmd.deadline_ms,
        }?;
        Some(now + std::time::Duration::from_millis(ms))
    }
}

/// The stage of the Restore `relocation` in progress here, if any.
fn stage_of(host: &ObjectHost, relocation: u128) -> Option<Arc<tokio::sync::Mutex<Stage>>> {
    let incoming = host.relocations().incoming.lock();
    incoming.get(&relocation).map(|i| Arc::clone(&i.stage))
}

/// The target refused a step of the move (`InternalFailure`; the source's unit fails).
fn failed(what: &'static str) -> ZLinkError {
    ZLinkError::RelocationRefused {
        kind: ErrorKind::InternalFailure,
        what,
        source: None,
    }
}

/// A Restore command body that does not decode.
fn malformed(e: impl Into<PayloadError>) -> ZLinkError {
    wire::malformed("relocation Restore")(e.into())
}

/// A single object's Restore header.
async fn restore(host: Arc<ObjectHost>, env: Envelope) -> Result<Option<Bytes>, ZLinkError> {
    let cmd: RestoreCommand = wire::decode(env.payload())?;
    let header = RestoreHeader::decode(&cmd.header).map_err(malformed)?;
    let id = ObjectId::new(cmd.id.clone()).map_err(malformed)?;
    let key: ObjectKey = (cmd.kind.authority_kind(), id);
    let offered = match host.types.get(cmd.stable_type.as_str()) {
        Some(t) if t.kind == cmd.kind.object_kind() => Ok(()),
        _ => Err(Refusal::NotOffered {
            kind: cmd.kind.object_kind(),
            stable_type: cmd.stable_type.clone(),
        }),
    };
    let spec = Spec::Single {
        key,
        cmd,
        queued: false,
    };
    begin(host, header, spec, offered);
    Ok(None)
}

/// A `SpotWide` aggregate's Restore header.
async fn restore_spot_wide(
    host: Arc<ObjectHost>,
    env: Envelope,
) -> Result<Option<Bytes>, ZLinkError> {
    let cmd: aggregate::RestoreCommand = wire::decode(env.payload())?;
    let header = RestoreHeader::decode(&cmd.header).map_err(malformed)?;
    begin(host, header, Spec::SpotWide(cmd), Ok(()));
    Ok(None)
}

/// Starts assembling the Restore `header` of `spec` (`offered`: whether this node offers what
/// it moves). It first takes the inbound-unit and Restore permits and the payload memory (28
/// §5): those the admission took (shrunk to the declared length), else all at once now — this
/// ordered one-way cannot wait: a short gate refuses the Restore (its prepare fails). A
/// repeated header is checked against the first.
fn begin(
    host: Arc<ObjectHost>,
    header: RestoreHeader,
    mut spec: Spec,
    offered: Result<(), Refusal>,
) {
    let relocation = header.binding().relocation_id().get();
    let declared = header.total_len();
    let mut incoming = host.relocations().incoming.lock();
    if let Some(i) = incoming.get(&relocation) {
        tracing::debug!(relocation, "relocation Restore repeated");
        if let Ok(mut stage) = i.stage.try_lock() {
            if let Stage::Receiving(Ok(a)) = &mut *stage {
                if let Err(e) = a.accept_restore(&header) {
                    *stage = Stage::Receiving(Err(Refusal::Assembly(e)));
                }
            }
        }
        return;
    }
    let admitted = host.relocations().admitted.lock().remove(&relocation);
    let unit = match spec {
        Spec::Single { .. } => PayloadUnit::Single,
        Spec::SpotWide(_) => PayloadUnit::SpotWideAggregate,
    };
    let mut permits = None;
    let mut assembly = offered.and_then(|()| {
        let taken = match admitted {
            Some(mut p) => p
                .shrink_to(declared)
                .map(|()| p)
                .map_err(Refusal::OverAdmitted),
            None => host
                .relocations()
                .gate(&host.relocation_options)
                .and_then(|g| g.try_inbound_claim(PayloadClaim::exact(unit, declared)))
                .map_err(Refusal::Gate),
        };
        permits = Some(taken?);
        Ok(Assembly::new(header))
    });
    if let (Ok(_), Spec::Single { key, queued, .. }) = (&assembly, &mut spec) {
        *queued = host.relocations().queue(key);
        if !*queued {
            permits = None;
            assembly = Err(Refusal::Occupied { id: key.1.clone() });
        }
    }
    let stage = Arc::new(tokio::sync::Mutex::new(Stage::Receiving(assembly)));
    let now = tokio::time::Instant::now();
    let deadline = spec.deadline(now);
    let entry = Incoming {
        spec,
        stage,
        permits,
        until: watchdog::wait_until(&host, now, deadline),
        deadline,
        run: host.location.host_run(),
    };
    incoming.insert(relocation, entry);
    drop(incoming);
    // A Restore whose prepare or ready never comes (the source gave up, crashed or went
    // away) is abandoned: its reservation released, its prepared objects and queues dropped.
    watchdog::watch(host, relocation);
}

async fn chunk(host: Arc<ObjectHost>, env: Envelope) -> Result<Option<Bytes>, ZLinkError> {
    let chunk = PayloadChunk::decode(env.payload().clone())
        .map_err(|e| wire::malformed("relocation chunk")(e.into()))?;
    let relocation = chunk.binding().relocation_id().get();
    let Some(stage) = stage_of(&host, relocation) else {
        tracing::debug!(relocation, "relocation chunk of no Restore here discarded");
        return Ok(None);
    };
    let mut stage = stage.lock().await;
    if let Stage::Receiving(Ok(a)) = &mut *stage {
        if let Err(e) = a.accept(chunk) {
            *stage = Stage::Receiving(Err(Refusal::Assembly(e)));
        }
    }
    Ok(None)
}

/// Removes the Restore `relocation` and the temporary queues of `keys` (the move will not
/// commit here).
fn forget(host: &ObjectHost, relocation: u128, keys: impl IntoIterator<Item = ObjectKey>) {
    host.relocations().incoming.lock().remove(&relocation);
    host.relocations().completions.abandoned(relocation);
    for key in keys {
        host.relocations().abandon(&key);
    }
}

/// The queue a Restore registered when it arrived (a single object's), if any.
fn queued_key(spec: &Spec) -> Option<ObjectKey> {
    match spec {
        Spec::Single {
            key, queued: true, ..
        } => Some(key.clone()),
        _ => None,
    }
}

/// Assembles and builds the unit hidden; its answer is the Restore accepted.
async fn prepare(host: Arc<ObjectHost>, env: Envelope) -> Result<Option<Bytes>, ZLinkError> {
    let relocation = wire::decode::<MoveRef>(env.payload())?.id()?;
    let Some(stage) = stage_of(&host, relocation) else {
        return Err(failed("no Restore arrived for this relocation"));
    };
    let mut stage = stage.lock().await;
    let payload = match &*stage {
        Stage::Receiving(Ok(a)) => a.payload().map_err(Refusal::Assembly),
        Stage::Receiving(Err(e)) => Err(e.clone()),
        Stage::Prepared(_) => return Ok(Some(Bytes::new())),
        Stage::Done(_) => return Err(failed("the relocation already ended")),
    };
    let spec = {
        let incoming = host.relocations().incoming.lock();
        incoming.get(&relocation).map(|i| match &i.spec {
            Spec::Single { key, cmd, queued } => Spec::Single {
                key: key.clone(),
                cmd: cmd.clone(),
                queued: *queued,
            },
            Spec::SpotWide(cmd) => Spec::SpotWide(cmd.clone()),
        })
    };
    let Some(spec) = spec else {
        return Err(failed("the relocation already ended"));
    };
    let built = match &spec {
        Spec::Single { key, cmd, .. } => build::single(&host, key, cmd, payload).await,
        Spec::SpotWide(cmd) => build::spot_wide(&host, cmd, payload).await,
    };
    // Built or not, the Restore ran: its permit and the payload memory go back.
    if let Some(i) = host.relocations().incoming.lock().get_mut(&relocation) {
        if let Some(p) = &mut i.permits {
            p.end_restore();
        }
    }
    match built {
        Ok(prepared) => {
            *stage = Stage::Prepared(Box::new(prepared));
            drop(stage);
            let now = tokio::time::Instant::now();
            if let Some(i) = host.relocations().incoming.lock().get_mut(&relocation) {
                i.until = watchdog::wait_until(&host, now, i.deadline);
            }
            Ok(Some(Bytes::new()))
        }
        Err(why) => {
            *stage = Stage::Done(None);
            drop(stage);
            forget(&host, relocation, queued_key(&spec));
            tracing::info!(relocation, %why, "relocation target refused");
            Err(why.into_error(match &spec {
                Spec::Single { key, .. } => Some(key),
                Spec::SpotWide(_) => None,
            }))
        }
    }
}

/// The source recorded `Prepared`: the prepared unit takes the reservation the record carried
/// (NewOwner is conditioned on that record's version), the cutover wait starts, and the reply
/// is relay-ready. A repeated ready answers the same.
async fn ready(host: Arc<ObjectHost>, env: Envelope) -> Result<Option<Bytes>, ZLinkError> {
    let cmd: ReadyCommand = wire::decode(env.payload())?;
    let relocation = MoveRef {
        relocation: cmd.relocation.clone(),
    }
    .id()?;
    let Some(stage) = stage_of(&host, relocation) else {
        return Err(failed("nothing prepared for this relocation"));
    };
    let mut stage = stage.lock().await;
    let Stage::Prepared(p) = &mut *stage else {
        return Err(failed("the relocation is not prepared here"));
    };
    if p.ready {
        return Ok(Some(Bytes::new()));
    }
    let target = host.instances.own_target(&host)?;
    p.reservation = TargetReservation::from_wire(&cmd.reservation, target).map_err(
        crate::relocation::failed("reservation of the ready command"),
    )?;
    p.ready = true;
    drop(stage);
    let wait = host.relocation_options.cutover_wait_timeout;
    tokio::spawn(async move {
        tokio::time::sleep(wait).await;
        if commit::commit(&host, relocation).await.is_some() {
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
    match commit::commit(&host, relocation).await {
        Some(Some(reply)) => Ok(Some(wire::encode(&reply)?)),
        Some(None) => Err(StaleReason::MoveNotCommitted.into()),
        None => Err(failed("nothing ready is prepared for this relocation")),
    }
}

/// The source asks this node to admit a unit (of payload `unit`) before its seal (28 §5):
/// the inbound-unit and `Restore` permits and the source's payload memory claim, taken at
/// once once all are free (an oversized aggregate claim: once no other payload memory is
/// held here), waiting at most [`gate::ADMIT_WAIT`]. They are kept for the Restore, and
/// forgotten with it if it never comes.
async fn admit(
    host: Arc<ObjectHost>,
    env: Envelope,
    unit: PayloadUnit,
) -> Result<Option<Bytes>, ZLinkError> {
    let cmd: AdmitCommand = wire::decode(env.payload())?;
    let relocation = MoveRef {
        relocation: cmd.relocation,
    }
    .id()?;
    let gate = host.relocations().gate(&host.relocation_options)?.clone();
    let claim = PayloadClaim::exact(unit, cmd.bytes);
    let permits = tokio::time::timeout(gate::ADMIT_WAIT, gate.admit_inbound_claim(claim))
        .await
        .map_err(|_| {
            ZLinkError::from(gate::GateError::WaitedTooLong {
                what: "inbound unit permit, Restore permit and payload memory",
                waited: gate::ADMIT_WAIT,
            })
        })??;
    host.relocations()
        .admitted
        .lock()
        .insert(relocation, permits);
    let h = Arc::clone(&host);
    tokio::spawn(async move {
        tokio::time::sleep(ABANDONED_RESTORE).await;
        if h.relocations()
            .admitted
            .lock()
            .remove(&relocation)
            .is_some()
        {
            tracing::info!(
                relocation,
                "relocation admitted but never restored: forgotten"
            );
        }
    });
    Ok(Some(Bytes::new()))
}

/// The source captured an admitted unit and declares its encoded payload length
/// ([`gate::DECLARE`], one-way): the memory admitted for it shrinks to that now. A length over
/// the admitted claim changes nothing (the Restore header is refused then); an unknown or
/// already restored unit is ignored.
async fn declare(host: Arc<ObjectHost>, env: Envelope) -> Result<Option<Bytes>, ZLinkError> {
    let cmd: AdmitCommand = wire::decode(env.payload())?;
    let relocation = MoveRef {
        relocation: cmd.relocation,
    }
    .id()?;
    if let Some(p) = host.relocations().admitted.lock().get_mut(&relocation) {
        if let Err(e) = p.shrink_to(cmd.bytes) {
            tracing::debug!(relocation, error = %e, "declared payload length not applied");
        }
    }
    Ok(None)
}

/// The source cancelled before relay-ready: the Restore, its prepared objects and their
/// temporary queues go (a move already ended here stays as it is).
async fn abort(host: Arc<ObjectHost>, env: Envelope) -> Result<Option<Bytes>, ZLinkError> {
    let relocation = wire::decode::<MoveRef>(env.payload())?.id()?;
    host.relocations().admitted.lock().remove(&relocation);
    if discard(&host, relocation).await {
        tracing::info!(
            relocation,
            "relocation aborted by the source: discarded here"
        );
    }
    Ok(None)
}

/// Drops the Restore `relocation` if it has not ended: still receiving, or prepared (ready or
/// not). The prepared objects close without running a message.
async fn discard(host: &Arc<ObjectHost>, relocation: u128) -> bool {
    let Some((queued, stage)) = host
        .relocations()
        .incoming
        .lock()
        .get(&relocation)
        .map(|i| (queued_key(&i.spec), Arc::clone(&i.stage)))
    else {
        return false;
    };
    let mut stage = stage.lock().await;
    let group = match std::mem::replace(&mut *stage, Stage::Done(None)) {
        Stage::Receiving(_) => Vec::new(),
        Stage::Prepared(p) => p.group,
        other => {
            *stage = other;
            return false;
        }
    };
    drop(stage);
    let keys = group.iter().map(|b| b.key.clone());
    forget(host, relocation, queued.into_iter().chain(keys));
    for b in group {
        b.live.close().await;
    }
    true
}

/// Tests: every single-object Restore in progress on this node arrives again exactly as its
/// source would resend it (the same command and binding), followed by its prepare request. A
/// Restore already prepared here is reused: no second temporary queue, factory or `Restore`.
/// Returns how many were resent.
#[cfg(test)]
pub(crate) async fn resend_restores(host: &Arc<ObjectHost>) -> Result<usize, ZLinkError> {
    let cmds: Vec<(u128, RestoreCommand)> = host
        .relocations()
        .incoming
        .lock()
        .iter()
        .filter_map(|(r, i)| match &i.spec {
            Spec::Single { cmd, .. } => Some((*r, cmd.clone())),
            Spec::SpotWide(_) => None,
        })
        .collect();
    let envelope = |body: Bytes| -> Result<Envelope, ZLinkError> {
        let op = zlink_transport::OperationId::new(1)
            .map_err(crate::relocation::failed("relay envelope id"))?;
        let generation = zlink_codec::Generation::new(1)
            .map_err(crate::relocation::failed("relay envelope generation"))?;
        Ok(Envelope::one_way(op, &host.rid, generation, body))
    };
    for (relocation, cmd) in &cmds {
        restore(Arc::clone(host), envelope(wire::encode(cmd)?)?).await?;
        let prepare_body = wire::encode(&MoveRef::of(*relocation))?;
        prepare(Arc::clone(host), envelope(prepare_body)?).await?;
    }
    Ok(cmds.len())
}

#[cfg(test)]
impl super::Relocations {
    /// Tests: the Restores in progress or prepared on this node, as a target.
    pub(crate) fn incoming_units(&self) -> usize {
        self.incoming.lock().len()
    }
}
