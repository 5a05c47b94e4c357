//! The command-plane messages of a live relocation (our commands for spec 21 §1.3 steps 4–6):
//! the Restore declaration (one-way, then its chunks one-way, in order on the same peer
//! connection), the prepare request answered relay-ready, and the cutover request answered
//! when the target's NewOwner committed.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use zlink_codec::{Generation, RoutingId};
use zlink_transport::{Envelope, OperationId, ReplyRouteId};

use crate::location::ReservationWire;
use crate::mesh::messaging::{ErrorKind, ZLinkError};

/// The Restore declaration (one-way): what moves and the transfer header.
pub(crate) const RESTORE: &str = "zlink.relocation.restore";
/// One payload chunk (one-way; the body is the chunk's own byte layout).
pub(crate) const CHUNK: &str = "zlink.relocation.chunk";
/// Prepare (request): assemble, verify, build the instance, queue early messages; the reply
/// is relay-ready.
pub(crate) const PREPARE: &str = "zlink.relocation.prepare";
/// Cutover (request): run NewOwner and open dispatch; the reply ([`CutoverReply`]) says it
/// committed and at which record version (a conflict is a `stale` error).
pub(crate) const CUTOVER: &str = "zlink.relocation.cutover";
/// Ready (request, after the source recorded `Prepared`): the target takes the reservation
/// now expecting the `Prepared` record's version (its NewOwner is conditioned on it), starts
/// its cutover wait, and answers relay-ready.
pub(crate) const READY: &str = "zlink.relocation.ready";
/// Abort (one-way, a move cancelled before relay-ready): the target discards the Restore's
/// assembly, its prepared instance and its temporary queue (queued requests get
/// `Unavailable`). A move already ended there is left as it is.
pub(crate) const ABORT: &str = "zlink.relocation.abort";

/// The body of [`READY`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReadyCommand {
    /// The RelocationId, decimal.
    pub(crate) relocation: String,
    /// The reservation as the `Prepared` record carried it.
    pub(crate) reservation: ReservationWire,
}

/// The reply to [`CUTOVER`] when NewOwner applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CutoverReply {
    /// The record's StoreVersion after NewOwner.
    pub(crate) version: String,
}

/// How the target builds the instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Rebuild {
    /// RecreateOnRelocation: the factory, no payload.
    Recreate,
    /// PreserveStateWith: the factory, then the adapter restores the payload.
    Preserve,
}

/// The body of [`RESTORE`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RestoreCommand {
    /// The transfer header (`RestoreHeader::encode`).
    pub(crate) header: Vec<u8>,
    pub(crate) id: String,
    pub(crate) stable_type: String,
    /// The ObjectGeneration, decimal.
    pub(crate) generation: String,
    pub(crate) rebuild: Rebuild,
    pub(crate) reservation: ReservationWire,
}

/// The body of [`PREPARE`] and [`CUTOVER`]: the move they are for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MoveRef {
    /// The RelocationId, decimal.
    pub(crate) relocation: String,
}

impl MoveRef {
    pub(crate) fn of(relocation: u128) -> Self {
        Self {
            relocation: relocation.to_string(),
        }
    }

    pub(crate) fn id(&self) -> Result<u128, ZLinkError> {
        self.relocation
            .parse()
            .map_err(|_| protocol("relocationId is not a decimal u128"))
    }
}

pub(crate) fn protocol(what: &str) -> ZLinkError {
    ZLinkError::application(ErrorKind::ProtocolError, what)
}

/// Encodes a JSON body.
pub(crate) fn encode<T: Serialize>(body: &T) -> Result<Bytes, ZLinkError> {
    serde_json::to_vec(body)
        .map(Bytes::from)
        .map_err(|e| ZLinkError::application(ErrorKind::InternalFailure, &e.to_string()))
}

/// Decodes a JSON body.
pub(crate) fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, ZLinkError> {
    serde_json::from_slice(bytes).map_err(|e| protocol(&e.to_string()))
}

/// One held message relayed to the target before the cutover (one-way, in hold order, on the
/// command plane of the same peer connection the cutover follows): the RelocationId and the
/// message's envelope as it reached the source — OperationId, reply route, original source
/// and its generation, address, packet name, content type, metadata and payload — so the
/// target answers the original source itself.
pub(crate) const RELAY: &str = "zlink.relocation.relay";

/// The head of a [`RELAY`] body (JSON), followed by the metadata and payload bytes.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RelayHead {
    relocation: String,
    operation: String,
    reply_route: Option<u64>,
    source: String,
    source_generation: u64,
    address: String,
    packet: String,
    content_type: String,
    metadata_len: usize,
}

/// Encodes a [`RELAY`] body: `u32` head length (big-endian), the head, metadata, payload.
pub(crate) fn encode_relay(relocation: u128, env: &Envelope) -> Result<Bytes, ZLinkError> {
    let head = RelayHead {
        relocation: relocation.to_string(),
        operation: env.operation_id().get().to_string(),
        reply_route: env.reply_route().map(|r| r.get()),
        source: env.source_rid().to_hex(),
        source_generation: env.source_generation().get(),
        address: env.address().to_owned(),
        packet: env.packet_name().to_owned(),
        content_type: env.content_type().to_owned(),
        metadata_len: env.metadata().len(),
    };
    let head = serde_json::to_vec(&head)
        .map_err(|e| ZLinkError::application(ErrorKind::InternalFailure, &e.to_string()))?;
    let len = u32::try_from(head.len()).map_err(|_| protocol("relay head too long"))?;
    let mut out = Vec::with_capacity(4 + head.len() + env.metadata().len() + env.payload().len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(env.metadata());
    out.extend_from_slice(env.payload());
    Ok(Bytes::from(out))
}

/// Decodes a [`RELAY`] body into the RelocationId and the envelope as the source received it.
pub(crate) fn decode_relay(body: &Bytes) -> Result<(u128, Envelope), ZLinkError> {
    let bad = |what: &str| protocol(&format!("relayed message: {what}"));
    let len_bytes: [u8; 4] = body
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| bad("too short"))?;
    let len = u32::from_be_bytes(len_bytes) as usize;
    let head_end = 4usize.checked_add(len).filter(|&e| e <= body.len());
    let head_end = head_end.ok_or_else(|| bad("head past the end"))?;
    let head: RelayHead = decode(&body[4..head_end])?;
    let meta_end = head_end
        .checked_add(head.metadata_len)
        .filter(|&e| e <= body.len())
        .ok_or_else(|| bad("metadata past the end"))?;
    let relocation: u128 = head.relocation.parse().map_err(|_| bad("relocationId"))?;
    let operation = head
        .operation
        .parse::<u128>()
        .ok()
        .and_then(|o| OperationId::new(o).ok())
        .ok_or_else(|| bad("operationId"))?;
    let source = RoutingId::from_hex(&head.source).map_err(|e| bad(&e.to_string()))?;
    let generation = Generation::new(head.source_generation).map_err(|e| bad(&e.to_string()))?;
    let payload = body.slice(meta_end..);
    let env = match head.reply_route {
        Some(r) => {
            let route = ReplyRouteId::new(r).ok_or_else(|| bad("replyRouteId"))?;
            Envelope::request(operation, route, &source, generation, payload)
        }
        None => Envelope::one_way(operation, &source, generation, payload),
    };
    let t = |e: zlink_transport::TransportError| bad(&e.to_string());
    let env = env
        .with_address(&head.address)
        .map_err(t)?
        .with_packet_name(&head.packet)
        .map_err(t)?
        .with_content_type(&head.content_type)
        .map_err(t)?
        .with_metadata(body.slice(head_end..meta_end))
        .map_err(t)?;
    Ok((relocation, env))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relayed_message_keeps_its_envelope() {
        let source = RoutingId::from_hex("0a0b0c0d0e0f10111213141516171819").expect("rid");
        let op = OperationId::new(7 << 64 | 9).expect("op");
        let route = ReplyRouteId::new(42).expect("route");
        let generation = Generation::new(3).expect("generation");
        let env = Envelope::request(op, route, &source, generation, Bytes::from_static(b"pay"))
            .with_address("actor")
            .and_then(|e| e.with_packet_name("Incr"))
            .and_then(|e| e.with_content_type("application/json"))
            .and_then(|e| e.with_metadata(Bytes::from_static(b"meta")))
            .expect("envelope");
        let body = encode_relay(5, &env).expect("encode");
        let (relocation, back) = decode_relay(&body).expect("decode");
        assert_eq!(relocation, 5);
        assert_eq!(back, env);
        let one_way = Envelope::one_way(op, &source, generation, Bytes::new());
        let (_, back) = decode_relay(&encode_relay(5, &one_way).expect("encode")).expect("decode");
        assert_eq!(back, one_way);
        assert!(
            decode_relay(&body.slice(..body.len().min(6))).is_err(),
            "truncated"
        );
    }
}
