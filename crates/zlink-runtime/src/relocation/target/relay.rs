//! Held messages the source relays after relay-ready and while its cutover is answered (21
//! §9.2, §9.3): each enters the temporary queue of its participant prepared here, behind
//! everything already there (or, once the move committed, the live object's queue).

use std::sync::Arc;

use bytes::Bytes;
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::ObjectKind;
use zlink_transport::{Envelope, Reply, ReplyStatus};

use super::Spec;
use crate::mesh::node::NodeInner;
use crate::messaging::RouteKind;
use crate::messaging::{ErrorReply, ZLinkError};
use crate::objects::host::ObjectHost;
use crate::objects::inbound;
use crate::objects::live::Completion;
use crate::relocation::Held;
use crate::relocation::MovesOf;
use crate::relocation::wire;

/// A held message the source relays after relay-ready: it enters the temporary queue of the
/// prepared instance (behind everything already there) and is answered to its original
/// source when it runs. One that arrives once the move committed here (the source relays
/// while it waits for the cutover's answer) runs on the live object, answered directly. A
/// relay for no prepared move and no live object here is answered `Unavailable`.
pub(super) async fn relay(
    host: Arc<ObjectHost>,
    node: Arc<NodeInner>,
    env: Envelope,
) -> Result<Option<Bytes>, ZLinkError> {
    host.relocations().probe.relay().await;
    let (relocation, message) = wire::decode_relay(env.payload())?;
    let from = env.source_rid().clone();
    let (id, mut call, cost) = inbound::prepare(&message)?;
    // Target staging draws from the host's Application Job Queue (guide-10 §3), never
    // waiting: the cutover is behind this command on the same loop.
    call.job = node.jobs.stage();
    let spec = host
        .relocations()
        .incoming
        .lock()
        .get(&relocation)
        .map(|i| {
            let single = match &i.spec {
                Spec::Single { key, cmd, .. } => Some((key.clone(), cmd.kind.object_kind())),
                Spec::SpotWide(_) => None,
            };
            (single, i.deadline)
        });
    let (spec, deadline) = match spec {
        Some((single, deadline)) => (Some(single), deadline),
        None => (None, None),
    };
    let incoming = match spec {
        Some(Some(single)) => Some(single),
        // A participant of a `SpotWide` aggregate prepared here (its queue takes it, if it is
        // one).
        Some(None) if message.address() == crate::mesh::node::SPOT_ADDRESS => {
            Some(((AuthorityKind::Spot, id.clone()), ObjectKind::UserSpot))
        }
        Some(None) => Some(((AuthorityKind::Actor, id.clone()), ObjectKind::Actor)),
        None => None,
    };
    let key = incoming.as_ref().map(|(k, _)| k.clone());
    let reply = message.reply_route().is_some().then(|| match &incoming {
        _ if message.source_rid() == &node.rid => {
            answering_here(Arc::clone(&node), message.clone())
        }
        // Accepted at the source, finishing after the owner change: a completion result of
        // the move (21 §9.3, `completion.rs`).
        Some((key, kind)) if key.1 == id => host.relocations().completions.accept(
            &host,
            &node,
            (relocation, key, *kind),
            deadline,
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
    let leftover = match &key {
        Some(key) if key.1 == id => host.relocations().intercept(key, held),
        _ => Some(held),
    };
    let Some(m) = leftover else {
        return Ok(None);
    };
    // The move committed here before the relay arrived (the source relays what it holds while
    // its cutover is answered): the object is live, and the message runs there in its order.
    let kind = if message_is_spot(&m) {
        AuthorityKind::Spot
    } else {
        AuthorityKind::Actor
    };
    let live_key = key.unwrap_or((kind, id.clone()));
    if live_key.1 == id {
        if let Some(live) = host.live_object(&live_key) {
            if let Err(e) =
                host.relocations()
                    .submit_unless_taken(&live_key, m, live.as_ref(), None)
            {
                tracing::debug!(relocation, error = %e, "a relayed message was refused by the live object");
            }
            return Ok(None);
        }
    }
    if let Some(done) = m.reply {
        done.complete(Err(ZLinkError::Unavailable {
            target: crate::messaging::Target::Relocation(relocation),
            reason: crate::messaging::UnavailableReason::NotServing,
        }));
    }
    Ok(None)
}

/// Whether the held message `m` is addressed to a Spot.
fn message_is_spot(m: &Held) -> bool {
    m.origin
        .as_ref()
        .is_some_and(|e| e.address() == crate::mesh::node::SPOT_ADDRESS)
}

/// The completion of a relayed request this node sent itself: its waiter is here, so the
/// reply completes it directly (sent, it would go to the relocation's source, a peer, where
/// nothing waits for it).
fn answering_here(node: Arc<NodeInner>, request: Envelope) -> Completion {
    Completion::new(move |out| {
        let out = out
            .and_then(|o| o.ok_or_else(|| ZLinkError::NoReply))
            .and_then(|r| r.into_encoded(node.codecs()));
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
