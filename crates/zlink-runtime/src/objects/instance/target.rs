//! The target side of cold activation (see the module docs of `instance`): the
//! `zlink.spot.activate` command, delivery to a live Instance Spot, forwarding to the node a
//! record names, and the creation from the first message.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::oneshot;
use tokio::time::Instant;
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::{AllocationState, ObjectKind};
use zlink_store_spi::{BlobReadResult, PutResult, RelocationStore};
use zlink_transport::{Envelope, PeerHandle};

use super::envelope::{ActivationEnvelope, MAX_HOPS, RecoveryRoot, decode_output, encode_output};
use super::renewal::{Renewal, time_left};
use super::{Activating, deadline_exceeded, settled, type_mismatch};
use crate::mesh::JobPermit;
use crate::mesh::node::{NodeInner, ReplyBody, job_cost};
use crate::messaging::{
    CreationError, ErrorMessage, ErrorReply, InternalError, Metadata, PayloadError,
    RelocationStoreError, RouteKind, StaleReason, UnavailableReason, ZLinkError,
};
use crate::objects::host::{ObjectHost, ObjectKey, store_failure};
use crate::objects::live::{Built, LiveObject};
use crate::objects::messages::{ObjectHead, owner_unreachable};
use crate::objects::registration::{
    FactoryContext, MessageContext, ObjectCall, ObjectOutput, Reply,
};
use zlink_location::{AuthorityHandle, AuthorityRead, Conflict, LocationError, Outcome};
use zlink_location::{InvalidOperation, ReserveRequest};

/// The command-plane name of an Instance Spot activation envelope.
pub(crate) const ACTIVATE_SPOT: &str = "zlink.spot.activate";

/// The longest time left an envelope may claim (a day): a larger value is cut to it.
const MAX_REMAINING: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// The `zlink.spot.activate` handler: decodes the envelope, delivers or activates, and answers
/// the first message's reply (or the send's acceptance).
pub(crate) async fn activate_command(
    host: Arc<ObjectHost>,
    node: Arc<NodeInner>,
    env: Envelope,
) -> Result<Option<Bytes>, ZLinkError> {
    let envelope = ActivationEnvelope::decode(env.payload())?;
    let out = activate(&host, &node, envelope).await?;
    let out = out.map(|r| r.into_encoded(node.codecs())).transpose()?;
    Ok(Some(encode_output(out)?))
}

/// Sends `envelope` to `peer` over the command plane and decodes the answer (a lost answer is
/// an error of the call; nothing is sent again).
pub(super) async fn send_envelope(
    node: &NodeInner,
    peer: &PeerHandle,
    envelope: &ActivationEnvelope,
    deadline: Instant,
) -> ObjectOutput {
    let body = envelope.encode()?;
    let timeout = deadline.saturating_duration_since(Instant::now());
    match node
        .control_request(peer, ACTIVATE_SPOT, body, timeout)
        .await?
    {
        ReplyBody::Ok { payload, .. } => {
            let (ct, payload) = decode_output(&payload)?;
            if ct.is_empty() && envelope.route == RouteKind::Send {
                return Ok(None);
            }
            let ct = String::from_utf8(ct.to_vec()).map_err(|_| {
                ZLinkError::malformed_payload("activation reply")(PayloadError::Format(
                    "the content type is not UTF-8",
                ))
            })?;
            Ok(Some(Reply::Encoded(ct, payload.to_vec())))
        }
        ReplyBody::Error(bytes) => Err(ErrorReply::decode(&bytes)?.into_error()),
    }
}

/// Runs one activation envelope on this node (see the module docs of `instance`).
pub(super) async fn activate(
    host: &Arc<ObjectHost>,
    node: &Arc<NodeInner>,
    envelope: ActivationEnvelope,
) -> ObjectOutput {
    if envelope.target != host.rid
        || envelope.target_lifecycle != node.generation.get()
        || envelope.mesh != host.mesh
    {
        return Err(StaleReason::ActivationElsewhere.into());
    }
    let _work = node.life.admit()?;
    let deadline = Instant::now() + envelope.remaining.min(MAX_REMAINING);
    let key: ObjectKey = (AuthorityKind::Spot, envelope.id.clone());
    if !host.accepts_new_objects() && !host.is_live(&key) && !host.interception.covers(&key) {
        // Out of new claims while Relocating, Relocated or Draining (spec 28 §10).
        return Err(host.not_accepting());
    }
    // The first message's Application Job Queue permit (06 §3), held from here until just
    // before its handler starts on this node; returned before a forward (the next node takes
    // its own).
    let mut job: Option<JobPermit> = None;
    loop {
        if Instant::now() >= deadline {
            return Err(deadline_exceeded());
        }
        if host.is_live(&key) {
            take_job(&mut job, node, deadline).await?;
            match deliver_here(host, node, &key, &envelope, &mut job).await {
                // Moved away meanwhile: sent on by the record below.
                Err(e) if crate::objects::held::is_refollow(&e) => {}
                out => return out,
            }
        }
        if let Some(rx) = host.instances.activating(&envelope.id) {
            settled(rx, deadline).await;
            continue;
        }
        let read = host
            .location
            .authority()
            .read(ObjectKind::InstanceSpot, &envelope.id)
            .await
            .map_err(store_failure)?;
        match read {
            AuthorityRead::Found { handle, .. } => {
                if handle.kind() != ObjectKind::InstanceSpot
                    || handle.stable_type() != &envelope.stable_type
                {
                    return Err(type_mismatch(
                        &envelope.id,
                        handle.kind(),
                        handle.stable_type(),
                    ));
                }
                if handle.node().routing_id != host.rid {
                    drop(job.take());
                    return forward(node, &envelope, &handle, deadline).await;
                }
                // Owned by this node: an activation that began or opened since the checks
                // above is looked at again.
                if host.is_live(&key) || host.instances.activating(&envelope.id).is_some() {
                    continue;
                }
                // Moved here, its owner change applied and its activation not open yet: the
                // move's temporary queue takes the message, which runs as the activation
                // opens (before, it was refused `Unavailable`).
                if host.interception.covers(&key) {
                    take_job(&mut job, node, deadline).await?;
                    match deliver_here(host, node, &key, &envelope, &mut job).await {
                        Err(e) if crate::objects::held::is_refollow(&e) => {}
                        Err(ZLinkError::Unavailable {
                            reason: UnavailableReason::NotConnected,
                            ..
                        }) if host.is_live(&key) => continue,
                        out => return out,
                    }
                }
                // Neither live nor being activated here: the activation ended (closed), or a
                // creation's cancel did not land.
                return Err(ZLinkError::Unavailable {
                    target: crate::messaging::Target::object(
                        zlink_codec::keys::AuthorityKind::Spot,
                        &envelope.id,
                    ),
                    reason: if handle.state() == AllocationState::Reserved {
                        UnavailableReason::NotServing
                    } else {
                        UnavailableReason::NotConnected
                    },
                });
            }
            AuthorityRead::Missing { .. } => {
                take_job(&mut job, node, deadline).await?;
                if let Some(out) = create(host, &envelope, deadline, &mut job).await? {
                    return out;
                }
            }
        }
    }
}

/// Waits within `deadline` for the first message's Application Job Queue permit, unless it
/// is held already (spec 06 §3: a cancellable wait, never a refusal; past the deadline the
/// activation ends `DeadlineExceeded` with nothing created).
async fn take_job(
    job: &mut Option<JobPermit>,
    node: &NodeInner,
    deadline: Instant,
) -> Result<(), ZLinkError> {
    if job.is_none() {
        let permit = tokio::time::timeout_at(deadline, node.jobs.acquire())
            .await
            .map_err(|_| deadline_exceeded())?;
        *job = Some(permit);
    }
    Ok(())
}

/// The message as the activation runs it, carrying `job` (the permit it returns just before
/// its handler starts).
fn object_call(
    envelope: &ActivationEnvelope,
    job: JobPermit,
) -> Result<(ObjectCall, usize), ZLinkError> {
    let metadata = Metadata::from_bytes(&envelope.metadata)?;
    let cost = job_cost(envelope.payload.len(), envelope.metadata.len());
    Ok((
        ObjectCall {
            content_type: Bytes::copy_from_slice(envelope.content_type.as_bytes()),
            payload: envelope.payload.clone(),
            typed_reply: false,
            context: MessageContext {
                id: envelope.id.as_str().to_owned(),
                packet: envelope.packet.clone(),
                metadata,
                relocation: Default::default(),
                node: Default::default(),
                timers: Default::default(),
            },
            job,
        },
        cost,
    ))
}

/// Delivers to the live activation here: a request's reply, a send's admission.
///
/// A one-way goes with a `spot` envelope of its own (this node its source), so a move of the
/// Spot that holds it relays it to the target before the cutover like a one-way that came as
/// a direct message, and answers its caller only then: that caller's next one-way reaches
/// this node until the cutover and the new owner after it, behind the relayed ones (one
/// caller's one-ways stay in order across the move, 28 §7).
async fn deliver_here(
    host: &ObjectHost,
    node: &NodeInner,
    key: &ObjectKey,
    envelope: &ActivationEnvelope,
    job: &mut Option<JobPermit>,
) -> ObjectOutput {
    let (call, cost) = object_call(envelope, job.take().unwrap_or_else(JobPermit::none))?;
    match envelope.route {
        RouteKind::Send => {
            let (tx, rx) = oneshot::channel();
            let held = crate::objects::held::Held {
                route: RouteKind::Send,
                call,
                cost,
                reply: Some(tx.into()),
                origin: Some(spot_one_way(node, envelope)?),
            };
            // Checked and submitted under the gate lock, so no seal falls in between: one
            // submitted after a seal could run after that move's capture, its effect lost
            // with the old state. Admitted here, its completion ends at once; taken, it is
            // relayed to the target before its cutover (handed over: admitted there before
            // any later message), run here after a cancelled move, refused past the hold's
            // bound, or not followed (`refollow`: the caller forwards it).
            match host.live_object(key) {
                Some(live) => host
                    .interception
                    .admit_unless_taken(key, held, live.as_ref())?,
                None => {
                    if host.interception.intercept(key, held).is_some() {
                        return Err(ZLinkError::Unavailable {
                            target: crate::messaging::Target::object(key.0, &key.1),
                            reason: UnavailableReason::NotConnected,
                        });
                    }
                }
            }
            match rx.await {
                Err(_) => Ok(None),
                Ok(out) => out.map(|_| None),
            }
        }
        RouteKind::Request => {
            let (tx, rx) = oneshot::channel();
            host.deliver(key, RouteKind::Request, call, cost, Some(tx.into()))?;
            rx.await.unwrap_or(Err(ZLinkError::ShuttingDown))
        }
    }
}

/// The one-way `spot` message of `envelope` as this node would send it to the Spot's owner.
fn spot_one_way(node: &NodeInner, envelope: &ActivationEnvelope) -> Result<Envelope, ZLinkError> {
    let bad = |e: zlink_transport::TransportError| {
        ZLinkError::Internal(InternalError::Envelope {
            what: "one-way Spot message",
            source: Arc::new(e).into(),
        })
    };
    let op = node.transport.ids().next_operation_id().map_err(bad)?;
    let head = ObjectHead::new(&envelope.id);
    let mut payload = Vec::with_capacity(head.bytes().len() + envelope.payload.len());
    payload.extend_from_slice(head.bytes());
    payload.extend_from_slice(&envelope.payload);
    Envelope::one_way(op, &node.rid, node.generation, Bytes::from(payload))
        .with_address(crate::mesh::node::SPOT_ADDRESS)
        .and_then(|e| e.with_packet_name(envelope.packet.as_str()))
        .and_then(|e| e.with_content_type(&envelope.content_type))
        .and_then(|e| e.with_metadata(envelope.metadata.clone()))
        .map_err(bad)
}

/// Forwards the envelope to the node `handle` names (the winner of a race, or the current
/// owner), one hop further; its answer is ours.
async fn forward(
    node: &NodeInner,
    envelope: &ActivationEnvelope,
    handle: &AuthorityHandle,
    deadline: Instant,
) -> ObjectOutput {
    if envelope.hops >= MAX_HOPS {
        return Err(ZLinkError::Unavailable {
            target: crate::messaging::Target::object(
                zlink_codec::keys::AuthorityKind::Spot,
                &envelope.id,
            ),
            reason: UnavailableReason::TooManyHops,
        });
    }
    let owner = handle.node().routing_id;
    let next = envelope.retarget(
        owner.clone(),
        handle
            .record()
            .allocation
            .descriptor_lifecycle_generation
            .get(),
        deadline.saturating_duration_since(Instant::now()),
    );
    let peer = node.route_to(&owner).map_err(owner_unreachable)?;
    send_envelope(node, &peer, &next, deadline).await
}

/// Stores the envelope in the Relocation Store, reads it back and checks it (spec 21 §10:
/// stored and verified before any record points at it). A put whose result was lost is
/// settled by the read. The envelope is renewed from here until the returned [`Renewal`] is
/// dropped (spec 23: renew when 12 h remain).
async fn store_envelope(
    host: &ObjectHost,
    envelope: &ActivationEnvelope,
) -> Result<(RecoveryRoot, Renewal), ZLinkError> {
    let (store, retention) = host.instances.store()?;
    let bytes = envelope.encode()?;
    let reference = envelope.reference()?;
    let failure = ZLinkError::RelocationStore;
    match store.put(&reference, &bytes, retention).await {
        Ok(PutResult::Stored { .. } | PutResult::AlreadyStored { .. }) => {}
        Ok(PutResult::Conflict { .. }) => {
            return Err(failure(RelocationStoreError::Conflict));
        }
        Err(e) => tracing::debug!(error = %e, "envelope put failed; reading it back"),
    }
    let root = RecoveryRoot::of(&reference, &bytes);
    match store.read(&reference).await {
        Ok(BlobReadResult::Found {
            bytes: read,
            expires_at,
            store_now,
        }) if root.verifies(&read) => {
            let left = time_left(expires_at, store_now);
            let renewal = Renewal::start(Arc::clone(store), reference, retention, left);
            Ok((root, renewal))
        }
        Ok(BlobReadResult::Found { .. }) => Err(failure(RelocationStoreError::Unverified)),
        Ok(BlobReadResult::Missing { .. }) => Err(failure(RelocationStoreError::NotStored)),
        Err(e) => Err(failure(RelocationStoreError::operation(e))),
    }
}

/// Creates the Spot from its first message (see the module docs of `instance`): `Ok(None)`
/// when another activation of it began here or won the record (the caller looks again).
async fn create(
    host: &Arc<ObjectHost>,
    envelope: &ActivationEnvelope,
    deadline: Instant,
    job: &mut Option<JobPermit>,
) -> Result<Option<ObjectOutput>, ZLinkError> {
    let Some(mark) = host.instances.begin(&envelope.id) else {
        return Ok(None);
    };
    let hosted = host
        .types
        .get(&envelope.stable_type)
        .filter(|t| t.kind == ObjectKind::InstanceSpot)
        .cloned()
        .ok_or_else(|| StaleReason::TypeNotServed {
            stable_type: envelope.stable_type.clone(),
        })?;
    let target = host.instances.own_target(host)?;
    // Renewed while in use: until the first message's end of use below, or until this
    // activation ends otherwise (the envelope then keeps at least the renew margin).
    let (root, _renewal) = store_envelope(host, envelope).await?;
    let reserved = host
        .location
        .authority()
        .reserve(ReserveRequest {
            kind: ObjectKind::InstanceSpot,
            id: envelope.id.clone(),
            stable_type: envelope.stable_type.clone(),
            target,
            payload: root.encode()?,
            pending_creation: None,
            creation: None,
        })
        .await;
    let handle = match reserved {
        Ok(Outcome::Applied(h)) => h,
        Ok(Outcome::Conflict(Conflict::LeaseStale { .. })) => {
            return Err(ZLinkError::Unavailable {
                target: crate::messaging::Target::ThisNode,
                reason: UnavailableReason::LeaseNotHeld,
            });
        }
        // The record exists (a race lost): nothing is created or deleted here; the envelope
        // expires with its retention.
        Ok(Outcome::Conflict(c)) => {
            tracing::debug!(id = %envelope.id, ?c, "cold activation lost the reservation");
            return Ok(None);
        }
        Err(LocationError::CapacityExceeded) => {
            return Err(super::capacity_exceeded(&envelope.stable_type));
        }
        Err(LocationError::InvalidOperation(InvalidOperation::TargetDoesNotOffer { .. })) => {
            return Err(StaleReason::TypeNotOffered {
                stable_type: envelope.stable_type.clone(),
            }
            .into());
        }
        Err(e) => return Err(store_failure(e)),
    };
    let live = match build(host, &hosted, &handle, deadline).await {
        Ok(live) => live,
        Err(e) => {
            host.cancel(&handle, deadline + host.cleanup_window()).await;
            return Err(e);
        }
    };
    // Not made live past the admission deadline (spec 21 §5); the row stays for the sweep.
    if let Err(e) = host.door.check() {
        live.close().await;
        return Err(e);
    }
    let ready = match host.location.authority().commit(&handle, None).await {
        Ok(Outcome::Applied(ready)) => ready,
        Ok(Outcome::Conflict(c)) => {
            live.close().await;
            tracing::info!(?c, "cold activation commit conflicted");
            return Err(StaleReason::ChangedBeforeCommit.into());
        }
        Err(e) => {
            live.close().await;
            return Err(store_failure(e));
        }
    };
    let first = job.take().unwrap_or_else(JobPermit::none);
    let out = match open_with_first(host, live, envelope, mark, &ready, first).await {
        Ok(out) => {
            end_of_use(host, &ready, &root).await;
            out
        }
        // The activation closed before its first message ran (shutdown): the root stays.
        Err(_) => Err(ZLinkError::ShuttingDown),
    };
    Ok(Some(out))
}

/// Runs the type's factory for the reserved incarnation `handle`, under an
/// activation-concurrency permit.
pub(super) async fn build(
    host: &ObjectHost,
    hosted: &crate::objects::host::HostedType,
    handle: &AuthorityHandle,
    deadline: Instant,
) -> Result<Arc<dyn LiveObject>, ZLinkError> {
    let permits = Arc::clone(&host.activations);
    let permit = tokio::time::timeout_at(deadline, permits.acquire_owned())
        .await
        .map_err(|_| deadline_exceeded())?
        .map_err(|_| ZLinkError::ShuttingDown)?;
    let ctx = FactoryContext {
        id: handle.id().as_str().to_owned(),
        stable_type: handle.stable_type().as_str().to_owned(),
        generation: handle.object_generation().get(),
        request: None,
        mesh: host.mesh.clone(),
        routing_id: host.rid.clone(),
        timers: Default::default(),
    };
    let built = hosted
        .erased
        .build(
            ctx,
            host.codecs.clone(),
            (host.mailbox, host.door.clone()),
            None,
        )
        .await;
    drop(permit);
    match built {
        Built::Approved { live, .. } => Ok(live),
        Built::Rejected { reason } => Err(ZLinkError::Creation(CreationError::Rejected {
            reason: ErrorMessage::sanitise(&reason),
        })),
        Built::Failed { error } | Built::Incompatible { error } => {
            Err(ZLinkError::Creation(CreationError::Failed {
                failure: ErrorMessage::sanitise(&error),
            }))
        }
    }
}

/// Queues the first message at the head of the new activation's mailbox, then makes the
/// activation reachable and ends the in-progress mark (so every other message queues behind
/// it). Resolves to the first message's terminal output once its handler ran (a send's is
/// `None`, whatever its handler returned: a one-way send ends at its admission, spec 06 §20);
/// a message the activation refused is its own terminal output. `job` is the first message's
/// Application Job Queue permit (an empty one for a first message restored by recovery, which
/// no sender waits behind).
pub(super) async fn open_with_first(
    host: &ObjectHost,
    live: Arc<dyn LiveObject>,
    envelope: &ActivationEnvelope,
    mark: Activating,
    record: &AuthorityHandle,
    job: JobPermit,
) -> Result<ObjectOutput, oneshot::error::RecvError> {
    let (tx, rx) = oneshot::channel();
    let refused = match object_call(envelope, job) {
        Ok((call, cost)) => live
            .submit(envelope.route, call, cost, Some(tx.into()))
            .err(),
        Err(e) => Some(e),
    };
    // Live: the timers its factory started tick from here.
    live.timers().resume();
    host.insert_live((AuthorityKind::Spot, envelope.id.clone()), live, record);
    drop(mark);
    match (refused, envelope.route) {
        (Some(e), _) => Ok(Err(e)),
        (None, RouteKind::Request) => rx.await,
        (None, RouteKind::Send) => rx.await.map(|out| {
            if let Err(e) = out {
                tracing::warn!(id = %envelope.id, error = %e, "an Instance Spot's first one-way handler failed");
            }
            Ok(None)
        }),
    }
}

/// After the first handler's terminal completion: a Preserve CAS removes the recovery root
/// from the record, then the envelope is deleted from the Relocation Store (spec 21 §7.1,
/// §10: end of use first, deletion second). If the record no longer carries this root under
/// this node's ownership (taken over, or changed otherwise), nothing is deleted here; a record
/// that is gone ended the use, so the envelope is deleted.
pub(super) async fn end_of_use(host: &ObjectHost, ready: &AuthorityHandle, root: &RecoveryRoot) {
    let mut handle = ready.clone();
    let mut ended = false;
    for _ in 0..4 {
        match host
            .location
            .authority()
            .preserve(&handle, Vec::new())
            .await
        {
            Ok(Outcome::Applied(_)) => {
                ended = true;
                break;
            }
            Ok(Outcome::Conflict(Conflict::Record { current: None })) => {
                ended = true;
                break;
            }
            Ok(Outcome::Conflict(Conflict::Record { current: Some(now) }))
                if now.owner() == handle.owner()
                    && now.object_generation() == handle.object_generation()
                    && RecoveryRoot::decode(now.payload()).as_ref() == Some(root) =>
            {
                handle = now;
            }
            Ok(Outcome::Conflict(c)) => {
                tracing::info!(id = %handle.id(), ?c, "the record no longer carries this recovery root; the envelope is left to its retention");
                return;
            }
            Err(e) => {
                tracing::warn!(id = %handle.id(), error = %e, "the recovery root could not be removed; the envelope is left to its retention");
                return;
            }
        }
    }
    if !ended {
        return;
    }
    let deleted = match (host.instances.store(), root.blob()) {
        (Ok((store, _)), Ok(blob)) => store
            .delete(&blob)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        (Err(e), _) | (_, Err(e)) => Err(e.to_string()),
    };
    if let Err(e) = deleted {
        tracing::warn!(id = %handle.id(), error = %e, "the cold-activation envelope was not deleted; it expires with its retention");
    }
}
