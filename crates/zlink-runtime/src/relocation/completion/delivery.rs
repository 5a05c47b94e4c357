//! Delivery of completion results to their requesters (`zlink.relocation.completion`) and
//! the requester's handler that completes the waiting request.

use super::*;
#[cfg(test)]
use crate::relocation::MovesOf;

/// Tests: delivers every result the ended log `relocation` delivered once more, as a
/// retransmission would, and returns how each was confirmed this time.
#[cfg(test)]
pub(crate) async fn redeliver(
    host: &Arc<ObjectHost>,
    node: &Arc<NodeInner>,
    relocation: u128,
) -> Vec<Confirmation> {
    let entries = host.relocations().completions.probe.ended(relocation);
    let mut out = Vec::new();
    for (e, _) in entries {
        out.push(deliver_one(host, node, relocation, &e).await);
    }
    out
}

/// Delivers one result to its requester until it is confirmed (module doc, step 4).
pub(super) async fn deliver_one(
    host: &Arc<ObjectHost>,
    node: &Arc<NodeInner>,
    relocation: u128,
    entry: &Entry,
) -> Confirmation {
    let body = encode_entries(relocation, std::slice::from_ref(entry));
    let until = tokio::time::Instant::now() + DELIVERY_WINDOW;
    let mut pause = Duration::from_millis(20);
    loop {
        let answer = match node.route_to(&entry.requester) {
            Ok(peer) => {
                node.control_request(&peer, COMPLETION, body.clone(), DELIVERY_TIMEOUT)
                    .await
            }
            Err(e) => Err(e),
        };
        match answer {
            Ok(ReplyBody::Ok { payload, .. }) if payload.as_ref() == RECEIVED => {
                return Confirmation::TerminalReceived;
            }
            Ok(ReplyBody::Ok { payload, .. }) if payload.as_ref() == ALREADY => {
                return Confirmation::AlreadyTerminal;
            }
            Ok(other) => tracing::warn!(?other, "unexpected completion delivery answer"),
            Err(e) => tracing::debug!(error = %e, "completion delivery failed: trying again"),
        }
        let run = entry
            .requester_run
            .clone()
            .or_else(|| host.instances.run_of(&entry.requester));
        if let Some(run) = run {
            match host.location.authority().lease_ended(&run).await {
                Ok(true) => return Confirmation::SourceLeaseExpired,
                Ok(false) => {}
                Err(e) => tracing::debug!(error = %e, "requester lease not read"),
            }
        }
        if tokio::time::Instant::now() >= until {
            tracing::warn!(
                requester = %entry.requester,
                "completion result not delivered within its retention"
            );
            return Confirmation::AlreadyTerminal;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_BACKOFF);
    }
}

/// The `zlink.relocation.completion` handler on the requester: completes the waiting request
/// with the delivered result (`received`), or answers `already` when it had ended.
pub(crate) async fn delivered(
    node: Arc<NodeInner>,
    env: Envelope,
) -> Result<Option<Bytes>, ZLinkError> {
    let (_, entries) =
        decode_entries(env.payload()).ok_or_else(|| ZLinkError::MalformedPayload {
            what: "completion record",
            source: crate::messaging::PayloadError::Format("undecodable entries"),
        })?;
    let mut took = false;
    for e in entries {
        if e.requester_generation != node.generation.get() {
            continue;
        }
        took |= node.pending.complete_from(e.reply, env.source_rid());
    }
    Ok(Some(Bytes::from_static(if took {
        RECEIVED
    } else {
        ALREADY
    })))
}
