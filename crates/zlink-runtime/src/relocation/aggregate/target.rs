//! The target side of a `SpotWide` aggregate move: the Restore is assembled and verified (the
//! inventory pages against their root, the root against the target-list checksum the source
//! recorded) before anything is built; every participant is then built hidden under one new
//! shared turn, with one temporary-queue group (a queue per participant, each keeping its
//! real target); *ready* hands over the `Prepared` record's reservation; the cutover runs the
//! one aggregate NewOwner on the Spot's record, and only then do the queues open (each
//! object's relayed work before later work). A conflict, an abort or no ready within a minute
//! discards the whole group unrun.

use std::sync::Arc;

use bytes::Bytes;
use zlink_codec::ObjectId;
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::ObjectKind;
use zlink_relocation::inventory::{InventoryRoot, MemberKind, PageDigest};
use zlink_relocation::transfer::{Assembly, PayloadChunk, RestoreHeader};
use zlink_transport::Envelope;

use super::{Payload, RestoreCommand};
use crate::messaging::{ErrorKind, ZLinkError};
use crate::objects::RelocationReadyOutcome;
use crate::objects::host::{ObjectHost, ObjectKey, stale, store_failure};
use crate::objects::lifecycle::LifecycleCall;
use crate::objects::live::{Built, LiveObject, Turn};
use crate::objects::registration::{FactoryContext, RelocationChoice};
use crate::relocation::gate::{self, AdmitCommand, TargetPermits};
use crate::relocation::wire::{self, CutoverReply, MoveRef, ReadyCommand, protocol};
use zlink_location::{AuthorityRead, Outcome, TargetReservation};
use zlink_relocation::transfer::{PayloadClaim, PayloadUnit};

/// How long a Restore or a prepared group waits for the source before it is dropped.
const ABANDONED: std::time::Duration = std::time::Duration::from_secs(60);

/// One participant built hidden.
struct Built1 {
    key: ObjectKey,
    live: Arc<dyn LiveObject>,
    stable_type: zlink_codec::StableType,
    generation: u64,
}

enum Stage {
    Receiving(Result<Assembly, String>),
    /// Every participant built (the Spot first), its queue registered; `ready` once the
    /// `Prepared` record's reservation came.
    Prepared {
        group: Vec<Built1>,
        reservation: Box<TargetReservation>,
        ready: bool,
    },
    Done(Option<CutoverReply>),
}

/// One aggregate Restore on this node.
pub(crate) struct Incoming {
    cmd: RestoreCommand,
    stage: Arc<tokio::sync::Mutex<Stage>>,
    /// What the unit gate admitted this aggregate with (28 §5): the `Restore` permit and the
    /// memory go back once the group is built, the inbound permit when this entry is removed.
    permits: Option<TargetPermits>,
}

fn failed(why: &str) -> ZLinkError {
    ZLinkError::application(
        ErrorKind::InternalFailure,
        &format!("the SpotWide relocation target refused: {why}"),
    )
}

fn stage_of(host: &ObjectHost, relocation: u128) -> Option<Arc<tokio::sync::Mutex<Stage>>> {
    let incoming = host.relocations.spot_wide.lock();
    incoming.get(&relocation).map(|i| Arc::clone(&i.stage))
}

pub(super) async fn restore(
    host: Arc<ObjectHost>,
    env: Envelope,
) -> Result<Option<Bytes>, ZLinkError> {
    let cmd: RestoreCommand = wire::decode(env.payload())?;
    let header = RestoreHeader::decode(&cmd.header).map_err(|e| protocol(&e.to_string()))?;
    let relocation = header.binding().relocation_id().get();
    let declared = header.total_len();
    {
        let mut incoming = host.relocations.spot_wide.lock();
        if incoming.contains_key(&relocation) {
            return Ok(None);
        }
        // The inbound-unit and Restore permits and the payload memory (28 §5): those the
        // admission took, shrunk to the declared length, else all at once now — this ordered
        // one-way cannot wait: a short gate refuses the Restore (its prepare fails).
        let admitted = host.relocations.admitted.lock().remove(&relocation);
        let taken = match admitted {
            Some(mut p) => p
                .shrink_to(declared)
                .map(|()| p)
                .map_err(|e| format!("the Restore declares more than was admitted: {e}")),
            None => host
                .relocations
                .gate(&host.relocation_options)
                .and_then(|g| {
                    g.try_inbound_claim(PayloadClaim::exact(
                        PayloadUnit::SpotWideAggregate,
                        declared,
                    ))
                })
                .map_err(|e| e.to_string()),
        };
        let (permits, assembly) = match taken {
            Ok(p) => (Some(p), Ok(Assembly::new(header))),
            Err(e) => (None, Err(e)),
        };
        incoming.insert(
            relocation,
            Incoming {
                cmd,
                stage: Arc::new(tokio::sync::Mutex::new(Stage::Receiving(assembly))),
                permits,
            },
        );
    }
    let h = Arc::clone(&host);
    tokio::spawn(async move {
        tokio::time::sleep(ABANDONED).await;
        if discard(&h, relocation, false).await {
            tracing::info!(relocation, "SpotWide relocation never got ready: dropped");
        }
    });
    Ok(None)
}

/// The source asks this node to admit an aggregate before its seal (28 §5): an inbound-unit
/// permit, a `Restore` permit and the source's aggregate claim, taken at once once all are
/// free (an oversized claim: once no other payload memory is held here), waiting at most
/// [`gate::ADMIT_WAIT`]. They are kept for the Restore and forgotten if it never comes.
pub(super) async fn admit(
    host: Arc<ObjectHost>,
    env: Envelope,
) -> Result<Option<Bytes>, ZLinkError> {
    let cmd: AdmitCommand = wire::decode(env.payload())?;
    let relocation = MoveRef {
        relocation: cmd.relocation,
    }
    .id()?;
    let gate = host.relocations.gate(&host.relocation_options)?.clone();
    let claim = PayloadClaim::exact(PayloadUnit::SpotWideAggregate, cmd.bytes);
    let permits = tokio::time::timeout(gate::ADMIT_WAIT, gate.admit_inbound_claim(claim))
        .await
        .map_err(|_| {
            ZLinkError::from(gate::GateError::Busy {
                what: "inbound unit permit, Restore permit or payload memory",
            })
        })??;
    host.relocations.admitted.lock().insert(relocation, permits);
    let h = Arc::clone(&host);
    tokio::spawn(async move {
        tokio::time::sleep(ABANDONED).await;
        if h.relocations.admitted.lock().remove(&relocation).is_some() {
            tracing::info!(
                relocation,
                "SpotWide relocation admitted but never restored: forgotten"
            );
        }
    });
    Ok(Some(Bytes::new()))
}

pub(super) async fn chunk(
    host: Arc<ObjectHost>,
    env: Envelope,
) -> Result<Option<Bytes>, ZLinkError> {
    let chunk =
        PayloadChunk::decode(env.payload().clone()).map_err(|e| protocol(&e.to_string()))?;
    let Some(stage) = stage_of(&host, chunk.binding().relocation_id().get()) else {
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

pub(super) async fn prepare(
    host: Arc<ObjectHost>,
    env: Envelope,
) -> Result<Option<Bytes>, ZLinkError> {
    let relocation = wire::decode::<MoveRef>(env.payload())?.id()?;
    let found = {
        let incoming = host.relocations.spot_wide.lock();
        incoming
            .get(&relocation)
            .map(|i| (i.cmd.clone(), Arc::clone(&i.stage)))
    };
    let Some((cmd, stage)) = found else {
        return Err(failed("no Restore arrived for this relocation"));
    };
    let mut stage = stage.lock().await;
    let payload = match &*stage {
        Stage::Receiving(Ok(a)) => a.payload().map_err(|e| e.to_string()),
        Stage::Receiving(Err(e)) => Err(e.clone()),
        Stage::Prepared { .. } => return Ok(Some(Bytes::new())),
        Stage::Done(_) => return Err(failed("the relocation already ended")),
    };
    let built = build(&host, &cmd, payload).await;
    if let Some(p) = host
        .relocations
        .spot_wide
        .lock()
        .get_mut(&relocation)
        .and_then(|i| i.permits.as_mut())
    {
        p.end_restore();
    }
    match built {
        Ok((group, reservation)) => {
            *stage = Stage::Prepared {
                group,
                reservation: Box::new(reservation),
                ready: false,
            };
            Ok(Some(Bytes::new()))
        }
        Err(why) => {
            *stage = Stage::Done(None);
            drop(stage);
            host.relocations.spot_wide.lock().remove(&relocation);
            tracing::info!(relocation, %why, "SpotWide relocation target refused");
            Err(failed(&why))
        }
    }
}

/// Verifies the inventory and builds every participant hidden under one new turn, each with
/// its temporary queue; any failure closes what was built and drops every queue.
async fn build(
    host: &ObjectHost,
    cmd: &RestoreCommand,
    payload: Result<Bytes, String>,
) -> Result<(Vec<Built1>, TargetReservation), String> {
    let payload = Payload::decode(payload?).map_err(|e| e.to_string())?;
    let root = InventoryRoot::decode(&cmd.root).map_err(|e| e.to_string())?;
    let checksum = <[u8; 32]>::try_from(cmd.checksum.as_slice())
        .map_err(|_| "bad target-list checksum".to_owned())?;
    root.check_target_list(&zlink_relocation::inventory::TargetListChecksum::from_bytes(checksum))
        .map_err(|e| e.to_string())?;
    let pages = payload.pages.iter().map(|p| (PageDigest::of(p), p));
    let verified = root.verify_pages(pages).map_err(|e| e.to_string())?;
    let entries = verified.entries();
    if entries.len() != payload.states.len() || verified.spot().id().as_str() != cmd.spot {
        return Err("the payload does not match the inventory".into());
    }
    let own = host.instances.own_target(host).map_err(|e| e.to_string())?;
    let reservation =
        TargetReservation::from_wire(&cmd.reservation, own).map_err(|e| e.to_string())?;
    let mut keys = Vec::with_capacity(entries.len());
    for e in entries {
        let (kind, auth) = match e.kind() {
            MemberKind::UserSpot => (ObjectKind::UserSpot, AuthorityKind::Spot),
            MemberKind::Actor => (ObjectKind::Actor, AuthorityKind::Actor),
            other => return Err(format!("an inventory entry of kind {other:?}")),
        };
        match host.types.get(e.stable_type().as_str()) {
            Some(t) if t.kind == kind => {}
            _ => return Err(format!("type {:?} is not offered here", e.stable_type())),
        }
        let id = ObjectId::new(e.id().as_str()).map_err(|e| e.to_string())?;
        keys.push((auth, id));
    }
    let mut queued = Vec::new();
    let mut group = Vec::new();
    let turn = Turn::default();
    let mut outcome = Ok(());
    for ((key, e), state) in keys.iter().zip(entries).zip(payload.states) {
        if !host.relocations.queue(key) {
            outcome = Err(format!("{} is live or moving here", key.1.as_str()));
            break;
        }
        queued.push(key.clone());
        let Some(t) = host.types.get(e.stable_type().as_str()) else {
            outcome = Err("type gone".into());
            break;
        };
        let preserve = t.relocation == Some(RelocationChoice::Preserve);
        if preserve != state.is_some() {
            outcome = Err(format!("{}: the policies differ", key.1.as_str()));
            break;
        }
        let ctx = FactoryContext {
            id: key.1.as_str().to_owned(),
            stable_type: e.stable_type().as_str().to_owned(),
            generation: e.generation().get(),
            request: None,
        };
        match t
            .erased
            .rebuild(
                ctx,
                state,
                host.codecs.clone(),
                (host.mailbox, host.door.clone()),
            )
            .await
        {
            Built::Approved { live, .. } => {
                live.set_turn(Some(Arc::clone(&turn)));
                group.push(Built1 {
                    key: key.clone(),
                    live,
                    stable_type: zlink_codec::StableType::new(e.stable_type().as_str())
                        .map_err(|e| e.to_string())?,
                    generation: e.generation().get(),
                });
            }
            Built::Rejected { reason } => outcome = Err(reason),
            Built::Failed { error } | Built::Incompatible { error } => outcome = Err(error),
        }
        if outcome.is_err() {
            break;
        }
    }
    if let Err(why) = outcome {
        for key in &queued {
            host.relocations.abandon(key);
        }
        for b in group {
            b.live.close().await;
        }
        return Err(why);
    }
    Ok((group, reservation))
}

pub(super) async fn ready(
    host: Arc<ObjectHost>,
    env: Envelope,
) -> Result<Option<Bytes>, ZLinkError> {
    let cmd: ReadyCommand = wire::decode(env.payload())?;
    let relocation = MoveRef {
        relocation: cmd.relocation.clone(),
    }
    .id()?;
    let Some(stage) = stage_of(&host, relocation) else {
        return Err(failed("no prepared group for this relocation"));
    };
    let mut stage = stage.lock().await;
    let Stage::Prepared {
        reservation, ready, ..
    } = &mut *stage
    else {
        return Err(failed("the relocation is not prepared here"));
    };
    if *ready {
        return Ok(Some(Bytes::new()));
    }
    let own = host
        .instances
        .own_target(&host)
        .map_err(|e| failed(&e.to_string()))?;
    **reservation =
        TargetReservation::from_wire(&cmd.reservation, own).map_err(|e| failed(&e.to_string()))?;
    *ready = true;
    drop(stage);
    let wait = host.relocation_options.cutover_wait_timeout;
    tokio::spawn(async move {
        tokio::time::sleep(wait).await;
        if commit(&host, relocation).await.is_some() {
            tracing::info!(
                relocation,
                "no SpotWide cutover within the wait: NewOwner attempted here"
            );
        }
    });
    Ok(Some(Bytes::new()))
}

pub(super) async fn cutover(
    host: Arc<ObjectHost>,
    env: Envelope,
) -> Result<Option<Bytes>, ZLinkError> {
    let relocation = wire::decode::<MoveRef>(env.payload())?.id()?;
    match commit(&host, relocation).await {
        Some(Some(reply)) => Ok(Some(wire::encode(&reply)?)),
        Some(None) => Err(stale("the SpotWide move did not commit on the target")),
        None => Err(failed("no ready prepared group for this relocation")),
    }
}

pub(super) async fn abort(
    host: Arc<ObjectHost>,
    env: Envelope,
) -> Result<Option<Bytes>, ZLinkError> {
    let relocation = wire::decode::<MoveRef>(env.payload())?.id()?;
    host.relocations.admitted.lock().remove(&relocation);
    if discard(&host, relocation, true).await {
        tracing::info!(
            relocation,
            "SpotWide relocation aborted by the source: discarded"
        );
    }
    Ok(None)
}

/// Drops the Restore `relocation` if it has not ended (prepared and, unless `even_ready`, not
/// yet ready): every queue is dropped and every built participant closes unrun.
async fn discard(host: &Arc<ObjectHost>, relocation: u128, even_ready: bool) -> bool {
    let Some(stage) = stage_of(host, relocation) else {
        return false;
    };
    let mut stage = stage.lock().await;
    let group = match std::mem::replace(&mut *stage, Stage::Done(None)) {
        Stage::Receiving(_) => Vec::new(),
        Stage::Prepared { group, ready, .. } if even_ready || !ready => group,
        other => {
            *stage = other;
            return false;
        }
    };
    drop(stage);
    host.relocations.spot_wide.lock().remove(&relocation);
    host.relocations.completions.abandoned(relocation);
    for b in group {
        host.relocations.abandon(&b.key);
        b.live.close().await;
    }
    true
}

/// Runs the aggregate NewOwner once: committed → every participant joins the live set and its
/// queue opens (the Spot first); a conflict → the group is discarded unrun. `None` when
/// nothing ready is prepared under that id.
async fn commit(host: &Arc<ObjectHost>, relocation: u128) -> Option<Option<CutoverReply>> {
    let (cmd, stage) = {
        let incoming = host.relocations.spot_wide.lock();
        let i = incoming.get(&relocation)?;
        (i.cmd.clone(), Arc::clone(&i.stage))
    };
    let mut stage = stage.lock().await;
    let (group, reservation) = match std::mem::replace(&mut *stage, Stage::Done(None)) {
        Stage::Prepared {
            group,
            reservation,
            ready: true,
        } => (group, reservation),
        Stage::Done(ok) => {
            *stage = Stage::Done(ok.clone());
            return Some(ok);
        }
        other => {
            *stage = other;
            return None;
        }
    };
    let authority = host.location.authority();
    let spot = ObjectId::new(cmd.spot.as_str()).ok()?;
    // A lost reply is settled by reading and the same CAS tried again until the Store failure
    // grace has passed (spec 21 §10), as for a single object.
    let until = tokio::time::Instant::now() + host.location.options().store_failure_grace;
    let outcome = super::super::owner_change::new_owner_settled(
        authority,
        ObjectKind::UserSpot,
        &spot,
        &reservation,
        until,
        super::super::owner_change::Change::SpotWide { root: &cmd.root },
    )
    .await;
    let ok = match outcome {
        Ok(Outcome::Applied(handle)) => {
            host.relocations.completions.committed(relocation);
            for b in &group {
                if b.key.0 == AuthorityKind::Spot {
                    host.insert_live(b.key.clone(), Arc::clone(&b.live), &handle);
                } else {
                    let (ty, generation) = (b.stable_type.clone(), b.generation);
                    host.insert_live_member(
                        b.key.clone(),
                        Arc::clone(&b.live),
                        &handle,
                        ty,
                        generation,
                    );
                }
            }
            // `OnRelocationReadyCompleted(Relocated)` of an ApplicationSignaled Spot (28 §5,
            // §6 step 7): the first application turn here; no queue of the group opens (no
            // restored, relayed or direct work runs) before it returned.
            if let Some(spot) = group.iter().find(|b| b.key.0 == AuthorityKind::Spot) {
                if spot.live.readiness().is_some() {
                    let call = LifecycleCall::Ready(RelocationReadyOutcome::Relocated);
                    if let Err(e) = spot.live.lifecycle(call).await {
                        tracing::warn!(relocation, error = %e, "relocation-ready callback failed");
                    }
                }
            }
            for b in &group {
                host.relocations.open(&b.key, b.live.as_ref());
                host.routes.forget(&b.key);
            }
            follow_owner(host, &handle, &group).await;
            host.relocations.completions.settled(relocation);
            tracing::info!(relocation, spot = %cmd.spot, participants = group.len(), "SpotWide relocation committed here");
            Some(CutoverReply {
                version: handle.version().as_str().to_owned(),
                owner_generation: handle.authority_owner_generation().get().to_string(),
            })
        }
        Ok(Outcome::Conflict(c)) => {
            tracing::info!(
                relocation,
                ?c,
                "SpotWide NewOwner conflicted: group dropped"
            );
            None
        }
        Err(e) => {
            tracing::warn!(relocation, error = %store_failure(e), "SpotWide NewOwner failed");
            None
        }
    };
    *stage = Stage::Done(ok.clone());
    drop(stage);
    host.relocations.spot_wide.lock().remove(&relocation);
    if ok.is_none() {
        host.relocations.completions.abandoned(relocation);
        for b in group {
            host.relocations.abandon(&b.key);
            b.live.close().await;
        }
    }
    Some(ok)
}

/// After the aggregate NewOwner: every member's record follows the Spot's new owner (so the
/// allocation rows count the records again and no sweep of the source run touches them),
/// at most 64 at once. A member not rewritten still resolves through the Spot's record.
async fn follow_owner(
    host: &Arc<ObjectHost>,
    spot: &zlink_location::AuthorityHandle,
    group: &[Built1],
) {
    let mut running = tokio::task::JoinSet::new();
    let mut failed = 0usize;
    for b in group.iter().filter(|b| b.key.0 == AuthorityKind::Actor) {
        if running.len() >= 64 {
            if let Some(Ok(false)) = running.join_next().await {
                failed += 1;
            }
        }
        let (host, spot, id, generation) = (
            Arc::clone(host),
            spot.clone(),
            b.key.1.clone(),
            b.generation,
        );
        running.spawn(async move {
            let authority = host.location.authority();
            match authority.read(ObjectKind::Actor, &id).await {
                Ok(AuthorityRead::Found { handle, .. })
                    if handle.object_generation().get() == generation =>
                {
                    matches!(
                        authority.follow_spot_owner(&handle, &spot).await,
                        Ok(Outcome::Applied(_))
                    )
                }
                _ => false,
            }
        });
    }
    while let Some(done) = running.join_next().await {
        if !matches!(done, Ok(true)) {
            failed += 1;
        }
    }
    if failed > 0 {
        tracing::warn!(
            failed,
            "SpotWide members whose record did not follow the Spot's owner"
        );
    }
}
