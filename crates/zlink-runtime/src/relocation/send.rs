//! The source's sends to the target that the unit gate governs (28 §5, 06 §3): the admission
//! request before the seal, and the Restore chunks under the in-flight budgets, returned on
//! the target's acknowledgement (see `gate.rs`).

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::Poll;

use bytes::Bytes;
use zlink_relocation::transfer::{
    ChunkLimit, PayloadChunks, SourceFence, TransferBinding, chunk_payload,
};
use zlink_relocation::unit::PayloadSummary;
use zlink_transport::{Envelope, PeerHandle};

use super::gate::{self, UnitGate};
use super::source::answered;
use crate::mesh::node::NodeInner;
use crate::messaging::{UnavailableReason, ZLinkError};
use zlink_location::AuthorityHandle;

/// The command-plane ping: its answer acknowledges every chunk sent before it on the same
/// connection (the target runs one-way commands in arrival order before a later request).
const ACKNOWLEDGE: &str = "zlink.ping";

/// How long the source waits for an acknowledgement of its chunks.
const ACKNOWLEDGE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Splits the captured `payload` of the move `(relocation, attempt)` of the record `handle`
/// under the chunk limit `limit`: the encoded Restore header, its chunks, their summary for
/// the unit, and the bytes the encoded payload takes (the payload memory it shrinks to).
pub(super) fn split(
    handle: &AuthorityHandle,
    (relocation, attempt): (u128, u64),
    limit: usize,
    payload: Bytes,
) -> Result<(Bytes, PayloadChunks, PayloadSummary, u64), ZLinkError> {
    let fence = SourceFence::new(
        handle.authority_owner_generation().get(),
        handle.owner().lease_generation.get(),
    )
    .map_err(crate::relocation::failed("transfer fence"))?;
    let binding = TransferBinding::new(relocation, attempt, fence)
        .map_err(crate::relocation::failed("transfer binding"))?;
    let limit = ChunkLimit::new(limit).map_err(crate::relocation::failed("chunk limit"))?;
    let (header, chunks) = chunk_payload(binding, payload, limit)
        .map_err(crate::relocation::failed("payload chunking"))?;
    let summary = PayloadSummary {
        total_len: header.total_len(),
        chunk_count: header.chunk_count(),
        crc32c: header.crc32c(),
    };
    let encoded = gate::encoded_len(summary.total_len, limit);
    Ok((header.encode(), chunks, summary, encoded))
}

/// The charges of the last chunks sent and not yet acknowledged: the caller's next request
/// on the same connection acknowledges them (the target runs one-way commands in arrival order
/// before a later request), so they are held until its answer and then dropped.
#[must_use = "hold the charges until the next request on the connection is answered"]
pub(super) struct Unacknowledged {
    _charges: Vec<gate::ChunkPermit>,
}

/// Sends `chunks` in order on `peer`. Each first reserves its charge against the in-flight
/// budgets (06 §3): short of budget, the target acknowledges the chunks this unit has in
/// flight, or, with none, the unit waits for another unit's release. Returns once every chunk
/// is sent and every earlier acknowledgement answered, with the charges of the chunks sent
/// since the last one: no acknowledgement of its own is asked for them — the Restore's
/// prepare request that follows on the same connection acknowledges them (one round trip
/// less per unit).
/// Each is sent as the one-way command `packet` (each unit shape has its own).
pub(super) async fn chunks_as(
    inner: &NodeInner,
    peer: &PeerHandle,
    gate: &UnitGate,
    chunks: PayloadChunks,
    packet: &'static str,
) -> Result<Unacknowledged, ZLinkError> {
    let connection = peer.info().connection.get();
    // The permits of the chunks sent since the last acknowledgement request, and their sum.
    let mut in_flight = Vec::new();
    let mut in_flight_bytes = 0u64;
    // Acknowledgement requests already sent, oldest first, each with the permits of the
    // chunks sent before it: a permit is returned only once its chunk is acknowledged.
    let mut pending: VecDeque<PendingAck<'_>> = VecDeque::new();
    // Bytes sent between acknowledgement requests: halved to what a short budget held, so a
    // budget below it is still returned in steps.
    let mut every = ACKNOWLEDGE_EVERY;
    for chunk in chunks {
        // The chunk header goes before the data as the frame is encoded; the data is not
        // copied: the frame shares the chunk's slice of the payload until it is written (the
        // frame's bytes are those of the encoded chunk as payload).
        let head = chunk.encode_header();
        let env = chunk_frame(inner, chunk.into_bytes(), packet)?;
        let charge = (env.encoded_len() + head.len()) as u64;
        loop {
            let changed = gate.changed();
            tokio::pin!(changed);
            changed.as_mut().enable();
            match gate.try_chunk(connection, charge) {
                Ok(permit) => {
                    if let Some(permit) = permit {
                        in_flight.push(permit);
                        in_flight_bytes += charge;
                    }
                    break;
                }
                Err(e) if in_flight.is_empty() && pending.is_empty() => {
                    tracing::debug!(reason = %e, "relocation chunk waits for budget");
                    changed.await;
                }
                Err(_) => match pending.pop_front() {
                    // The oldest acknowledgement returns its chunks' charges (the sender
                    // keeps sending while the target assembles the later ones).
                    Some(ack) => ack.ack.await?,
                    None => {
                        every = every.min((in_flight_bytes / 2).max(1));
                        gate.note_acknowledgement();
                        acknowledged(inner, peer).await?;
                        in_flight.clear();
                        in_flight_bytes = 0;
                    }
                },
            }
        }
        // Waits for room on the connection's control lane (never refused for a full lane).
        peer.send_control_prefixed(&env, &head).await.map_err(|e| {
            tracing::debug!(error = %e, "a relocation command was not queued");
            ZLinkError::Unavailable {
                target: crate::messaging::Target::RelocationTarget,
                reason: UnavailableReason::ConnectionLost,
            }
        })?;
        if in_flight_bytes >= every {
            gate.note_acknowledgement();
            let mut ack = PendingAck {
                ack: Box::pin(acknowledged(inner, peer)),
                _permits: std::mem::take(&mut in_flight),
            };
            in_flight_bytes = 0;
            // Polled once so the request is queued behind the chunks now; awaited later.
            match std::future::poll_fn(|cx| Poll::Ready(ack.ack.as_mut().poll(cx))).await {
                Poll::Ready(r) => r?,
                Poll::Pending => pending.push_back(ack),
            }
        }
    }
    while let Some(ack) = pending.pop_front() {
        ack.ack.await?;
    }
    Ok(Unacknowledged {
        _charges: in_flight,
    })
}

/// How many bytes of chunks (by their charges) the sender sends before it asks for their
/// acknowledgement without waiting for it: below the default per-connection budget, so the
/// budget is returned in steps while sending continues (a smaller budget lowers it).
const ACKNOWLEDGE_EVERY: u64 = 4 * 1024 * 1024;

/// An acknowledgement request sent and not yet answered, holding the charges it returns.
struct PendingAck<'a> {
    ack: Pin<Box<dyn Future<Output = Result<(), ZLinkError>> + Send + 'a>>,
    _permits: Vec<gate::ChunkPermit>,
}

/// The one-way control frame carrying one chunk; its encoded length is the chunk's accounted
/// charge (06 §3: the frame's envelope metadata included).
fn chunk_frame(
    inner: &NodeInner,
    body: Bytes,
    packet: &'static str,
) -> Result<Envelope, ZLinkError> {
    let op = inner
        .transport
        .ids()
        .next_operation_id()
        .map_err(envelope_failed)?;
    Envelope::one_way(op, &inner.rid, inner.generation, body)
        .with_packet_name(packet)
        .map_err(envelope_failed)
}

/// Waits for the target to acknowledge every chunk sent so far on `peer`.
async fn acknowledged(inner: &NodeInner, peer: &PeerHandle) -> Result<(), ZLinkError> {
    answered(
        inner
            .control_request(peer, ACKNOWLEDGE, Bytes::new(), ACKNOWLEDGE_TIMEOUT)
            .await,
    )
    .map(|_| ())
}

/// A command-plane envelope of the move the transport refused to number or build.
fn envelope_failed(e: zlink_transport::TransportError) -> ZLinkError {
    ZLinkError::Internal(crate::messaging::InternalError::Envelope {
        what: "relocation command",
        source: std::sync::Arc::new(e).into(),
    })
}
