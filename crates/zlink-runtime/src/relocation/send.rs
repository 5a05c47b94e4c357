//! The source's sends to the target that the unit gate governs (28 §5, 06 §3): the admission
//! request before the seal, and the Restore chunks under the in-flight budgets, returned on
//! the target's acknowledgement (see `gate.rs`).

use bytes::Bytes;
use zlink_codec::RoutingId;
use zlink_relocation::transfer::{
    ChunkLimit, PayloadChunks, SourceFence, TransferBinding, chunk_payload,
};
use zlink_relocation::unit::PayloadSummary;
use zlink_transport::{Envelope, PeerHandle};

use super::gate::{self, UnitGate};
use super::source::answered;
use super::wire;
use crate::location::AuthorityHandle;
use crate::mesh::messaging::{ErrorKind, UnavailableReason, ZLinkError};
use crate::mesh::node::NodeInner;

/// The command-plane ping: its answer acknowledges every chunk sent before it on the same
/// connection (the target runs one-way commands in arrival order before a later request).
const ACKNOWLEDGE: &str = "zlink.ping";

/// How long the source waits for an acknowledgement of its chunks.
const ACKNOWLEDGE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

fn internal(e: &dyn std::fmt::Display) -> ZLinkError {
    ZLinkError::application(ErrorKind::InternalFailure, &e.to_string())
}

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
    .map_err(|e| internal(&e))?;
    let binding = TransferBinding::new(relocation, attempt, fence).map_err(|e| internal(&e))?;
    let limit = ChunkLimit::new(limit).map_err(|e| internal(&e))?;
    let (header, chunks) = chunk_payload(binding, payload, limit).map_err(|e| internal(&e))?;
    let summary = PayloadSummary {
        total_len: header.total_len(),
        chunk_count: header.chunk_count(),
        crc32c: header.crc32c(),
    };
    let encoded = gate::encoded_len(summary.total_len, limit);
    Ok((header.encode(), chunks, summary, encoded))
}

/// Asks the target `to` to admit the unit `relocation` with a payload memory claim of
/// `bytes`; it answers once it holds its permits (28 §5).
pub(super) async fn admit(
    inner: &NodeInner,
    to: &RoutingId,
    relocation: u128,
    bytes: u64,
) -> Result<(), ZLinkError> {
    let cmd = gate::AdmitCommand {
        relocation: relocation.to_string(),
        bytes,
    };
    let peer = inner.route_to(to)?;
    let wait = gate::ADMIT_WAIT + ACKNOWLEDGE_TIMEOUT;
    answered(
        inner
            .control_request(&peer, gate::ADMIT, wire::encode(&cmd)?, wait)
            .await,
    )
    .map(|_| ())
}

/// Sends `chunks` in order on `peer`. Each first reserves its charge against the in-flight
/// budgets (06 §3): short of budget, the target acknowledges the chunks this unit has in
/// flight, or, with none, the unit waits for another unit's release. Returns once every chunk
/// is sent and acknowledged.
pub(super) async fn chunks(
    inner: &NodeInner,
    peer: &PeerHandle,
    gate: &UnitGate,
    chunks: PayloadChunks,
) -> Result<(), ZLinkError> {
    chunks_as(inner, peer, gate, chunks, wire::CHUNK).await
}

/// [`chunks`] sent as the one-way command `packet` (a `SpotWide` aggregate's chunks go to
/// its own assembly).
pub(super) async fn chunks_as(
    inner: &NodeInner,
    peer: &PeerHandle,
    gate: &UnitGate,
    chunks: PayloadChunks,
    packet: &'static str,
) -> Result<(), ZLinkError> {
    let connection = peer.info().connection.get();
    let mut in_flight = Vec::new();
    for chunk in chunks {
        let env = chunk_frame(inner, chunk.encode(), packet)?;
        let charge = env.encoded_len() as u64;
        loop {
            let changed = gate.changed();
            tokio::pin!(changed);
            changed.as_mut().enable();
            match gate.try_chunk(connection, charge) {
                Ok(permit) => {
                    in_flight.extend(permit);
                    break;
                }
                Err(e) if in_flight.is_empty() => {
                    tracing::debug!(reason = %e, "relocation chunk waits for budget");
                    changed.await;
                }
                Err(_) => {
                    acknowledged(inner, peer).await?;
                    in_flight.clear();
                }
            }
        }
        // Waits for room on the connection's control lane (never refused for a full lane).
        peer.send_control(&env)
            .await
            .map_err(|e| ZLinkError::Unavailable {
                target: format!("relocation target ({e})"),
                reason: UnavailableReason::ConnectionLost,
            })?;
    }
    if !in_flight.is_empty() {
        acknowledged(inner, peer).await?;
    }
    Ok(())
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
        .map_err(|e| internal(&e))?;
    Envelope::one_way(op, &inner.rid, inner.generation, body)
        .with_packet_name(packet)
        .map_err(|e| internal(&e))
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
