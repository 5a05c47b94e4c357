//! The bytes of Instance Spot cold activation (spec 06 §16, 21 §7.1): the activation envelope
//! (the body of `zlink.spot.activate` and the immutable recovery root stored in the
//! Relocation Store), the recovery root the authority record carries while the first message
//! has not completed, and the command's reply.
//!
//! **Envelope** (`zlink-cold-activation-v1`): the 8-byte magic `ZLCAENV1`, a big-endian `u32`
//! header length, the header (UTF-8 JSON, below), a big-endian `u32` metadata length, the
//! encoded metadata, then the first message's payload bytes to the end. The header holds the
//! Spot id, its stable type and MeshName, the target descriptor fence (target RID in hex and
//! its MeshNode lifecycle generation), the source (RID in hex and host run generation), the
//! 128-bit OperationId (32 lowercase hex digits), the route (`request` / `send`), the packet
//! name and content type, the milliseconds left before the call's deadline and the forward
//! count. Generations are decimal strings. The whole envelope is bounded by the transport frame
//! (16 MiB + 64 KiB), far below one Relocation Store blob (64 MiB + 23 B), so it is stored as
//! one blob.
//!
//! **Blob reference**: `cold-activation-v1/{target RID hex}/{target lifecycle
//! generation}/{OperationId hex}` — unique per target MeshNode lifecycle and operation.
//!
//! **Recovery root** (the authority record's framework-internal `payload` from the
//! reservation until the first handler's completion; empty afterwards):
//! `{"recordVersion":1,"coldActivation":{"reference":…,"sha256":…,"encodedSize":…,"cursor":"0"}}`
//! — the blob reference, the SHA-256 (lowercase hex) and size of the stored envelope, and the
//! inbox cursor: how many inbox records have completed (0: the envelope's first message has
//! not). The payload field is used rather than `pendingCreation` because the root must
//! survive the Ready commit (which ends `pendingCreation`) and be removed by a Preserve, the
//! one operation that changes only the framework-internal data (spec 21 §6.1, 06 §16).
//!
//! **Reply**: a big-endian `u16` content-type length, the content type, then the reply
//! payload; both empty for a one-way send.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};
use zlink_codec::{MeshName, ObjectId, OperationId, RoutingId, StableType};
use zlink_store_spi::BlobRef;

use crate::messaging::{
    InternalError, PacketName, PayloadError, RelocationStoreError, RouteKind, ZLinkError,
};

/// The envelope's magic bytes.
const MAGIC: &[u8; 8] = b"ZLCAENV1";

/// How many times an envelope may be forwarded to the node a record names (spec 21 §7.3's
/// hop bound).
pub(crate) const MAX_HOPS: u8 = 8;

/// A malformed activation envelope (or command reply): `ProtocolError`.
fn malformed(problem: PayloadError) -> ZLinkError {
    ZLinkError::malformed_payload("activation envelope")(problem)
}

/// A malformed activation envelope whose layout breaks the rule `what`.
fn protocol(what: &'static str) -> ZLinkError {
    malformed(PayloadError::Format(what))
}

/// One first message with everything its cold activation needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ActivationEnvelope {
    pub(crate) id: ObjectId,
    pub(crate) stable_type: StableType,
    pub(crate) mesh: MeshName,
    /// The target descriptor fence: the node's RID …
    pub(crate) target: RoutingId,
    /// … and its MeshNode lifecycle generation.
    pub(crate) target_lifecycle: u64,
    pub(crate) source: RoutingId,
    /// The source host run generation (its OwnerLeaseGeneration).
    pub(crate) source_run: u64,
    pub(crate) operation: OperationId,
    pub(crate) route: RouteKind,
    pub(crate) packet: PacketName,
    pub(crate) content_type: String,
    /// Time left before the call's deadline when the envelope was sent.
    pub(crate) remaining: Duration,
    /// How many times it was forwarded to the node a record names.
    pub(crate) hops: u8,
    pub(crate) metadata: Bytes,
    pub(crate) payload: Bytes,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Header {
    spot_id: String,
    stable_type: String,
    mesh_name: String,
    target_routing_id_hex: String,
    target_lifecycle_generation: String,
    source_routing_id_hex: String,
    source_run_generation: String,
    operation_id: String,
    route: String,
    packet: String,
    content_type: String,
    remaining_ms: u64,
    hops: u8,
}

fn decimal(text: &str, field: &'static str) -> Result<u64, ZLinkError> {
    text.parse()
        .map_err(|source| malformed(PayloadError::Number { field, source }))
}

fn take_u32(bytes: &[u8], at: usize) -> Result<(usize, usize), ZLinkError> {
    let raw: [u8; 4] = bytes
        .get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| protocol("truncated"))?;
    Ok((u32::from_be_bytes(raw) as usize, at + 4))
}

impl ActivationEnvelope {
    /// The wire and storage form (see the module docs).
    pub(crate) fn encode(&self) -> Result<Bytes, ZLinkError> {
        let header = Header {
            spot_id: self.id.as_str().to_owned(),
            stable_type: self.stable_type.as_str().to_owned(),
            mesh_name: self.mesh.as_str().to_owned(),
            target_routing_id_hex: self.target.to_hex(),
            target_lifecycle_generation: self.target_lifecycle.to_string(),
            source_routing_id_hex: self.source.to_hex(),
            source_run_generation: self.source_run.to_string(),
            operation_id: self.operation.to_hex(),
            route: self.route.to_string(),
            packet: self.packet.as_str().to_owned(),
            content_type: self.content_type.clone(),
            remaining_ms: u64::try_from(self.remaining.as_millis()).unwrap_or(u64::MAX),
            hops: self.hops,
        };
        let header = serde_json::to_vec(&header).map_err(|e| malformed(e.into()))?;
        let too_large = || protocol("a part is over 4 GiB");
        let header_len = u32::try_from(header.len()).map_err(|_| too_large())?;
        let metadata_len = u32::try_from(self.metadata.len()).map_err(|_| too_large())?;
        let mut out = BytesMut::with_capacity(
            MAGIC.len() + 8 + header.len() + self.metadata.len() + self.payload.len(),
        );
        out.put_slice(MAGIC);
        out.put_u32(header_len);
        out.put_slice(&header);
        out.put_u32(metadata_len);
        out.put_slice(&self.metadata);
        out.put_slice(&self.payload);
        Ok(out.freeze())
    }

    /// Parses and checks an envelope (every field validated; anything else is a
    /// `ProtocolError`).
    pub(crate) fn decode(bytes: &Bytes) -> Result<Self, ZLinkError> {
        if bytes.get(..MAGIC.len()) != Some(MAGIC.as_slice()) {
            return Err(protocol("unknown format"));
        }
        let (header_len, at) = take_u32(bytes, MAGIC.len())?;
        let header_end = at
            .checked_add(header_len)
            .filter(|end| *end <= bytes.len())
            .ok_or_else(|| protocol("truncated header"))?;
        let h: Header =
            serde_json::from_slice(&bytes[at..header_end]).map_err(|e| malformed(e.into()))?;
        let (metadata_len, at) = take_u32(bytes, header_end)?;
        let metadata_end = at
            .checked_add(metadata_len)
            .filter(|end| *end <= bytes.len())
            .ok_or_else(|| protocol("truncated metadata"))?;
        let route = match h.route.as_str() {
            "request" => RouteKind::Request,
            "send" => RouteKind::Send,
            _ => return Err(protocol("unknown route")),
        };
        let operation = u128::from_str_radix(&h.operation_id, 16)
            .ok()
            .filter(|_| h.operation_id.len() == 32)
            .and_then(|v| OperationId::new(v).ok())
            .ok_or_else(|| protocol("operationId is not 32 hex digits of an OperationId"))?;
        let bad = |e: zlink_codec::CodecError| malformed(e.into());
        Ok(Self {
            id: ObjectId::new(h.spot_id).map_err(bad)?,
            stable_type: StableType::new(h.stable_type).map_err(bad)?,
            mesh: MeshName::new(h.mesh_name).map_err(bad)?,
            target: RoutingId::from_hex(&h.target_routing_id_hex).map_err(bad)?,
            target_lifecycle: decimal(&h.target_lifecycle_generation, "targetLifecycle")?,
            source: RoutingId::from_hex(&h.source_routing_id_hex).map_err(bad)?,
            source_run: decimal(&h.source_run_generation, "sourceRun")?,
            operation,
            route,
            packet: PacketName::checked(h.packet)
                .map_err(|reason| malformed(PayloadError::PacketName(reason)))?,
            content_type: h.content_type,
            remaining: Duration::from_millis(h.remaining_ms),
            hops: h.hops,
            metadata: bytes.slice(at..metadata_end),
            payload: bytes.slice(metadata_end..),
        })
    }

    /// The same first message and operation for the node `target` of lifecycle generation
    /// `lifecycle` (the node a record names), one hop further, with `remaining` left.
    pub(crate) fn retarget(&self, target: RoutingId, lifecycle: u64, remaining: Duration) -> Self {
        Self {
            target,
            target_lifecycle: lifecycle,
            remaining,
            hops: self.hops.saturating_add(1),
            ..self.clone()
        }
    }

    /// The Relocation Store reference of this envelope on its target (see the module docs).
    pub(crate) fn reference(&self) -> Result<BlobRef, ZLinkError> {
        BlobRef::new(format!(
            "cold-activation-v1/{}/{}/{}",
            self.target.to_hex(),
            self.target_lifecycle,
            self.operation.to_hex()
        ))
        .map_err(|source| ZLinkError::RelocationStore(RelocationStoreError::Reference { source }))
    }
}

/// What the authority record carries while the stored envelope is needed (see the module
/// docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecoveryRoot {
    pub(crate) reference: String,
    pub(crate) sha256: [u8; 32],
    pub(crate) size: u64,
    pub(crate) cursor: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RootWire {
    record_version: u32,
    cold_activation: ColdWire,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ColdWire {
    reference: String,
    sha256: String,
    encoded_size: u64,
    cursor: String,
}

impl RecoveryRoot {
    /// The root of the stored envelope `bytes` under `reference`, nothing completed yet.
    pub(crate) fn of(reference: &BlobRef, bytes: &[u8]) -> Self {
        Self {
            reference: reference.as_str().to_owned(),
            sha256: zlink_codec::inline_ref::sha256(bytes),
            size: bytes.len() as u64,
            cursor: 0,
        }
    }

    /// The record payload.
    pub(crate) fn encode(&self) -> Result<Vec<u8>, ZLinkError> {
        serde_json::to_vec(&RootWire {
            record_version: 1,
            cold_activation: ColdWire {
                reference: self.reference.clone(),
                sha256: zlink_codec::lower_hex(&self.sha256),
                encoded_size: self.size,
                cursor: self.cursor.to_string(),
            },
        })
        .map_err(|e| ZLinkError::Internal(InternalError::json("recovery root")(e)))
    }

    /// The root a record payload holds, if it holds one (an empty payload, or any other
    /// content, is `None`).
    pub(crate) fn decode(payload: &[u8]) -> Option<Self> {
        let w: RootWire = serde_json::from_slice(payload).ok()?;
        if w.record_version != 1 || w.cold_activation.sha256.len() != 64 {
            return None;
        }
        let mut sha256 = [0u8; 32];
        for (i, byte) in sha256.iter_mut().enumerate() {
            *byte = u8::from_str_radix(w.cold_activation.sha256.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Self {
            reference: w.cold_activation.reference,
            sha256,
            size: w.cold_activation.encoded_size,
            cursor: w.cold_activation.cursor.parse().ok()?,
        })
    }

    /// The blob reference.
    pub(crate) fn blob(&self) -> Result<BlobRef, ZLinkError> {
        BlobRef::new(self.reference.clone()).map_err(|source| {
            ZLinkError::RelocationStore(RelocationStoreError::StoredReference { source })
        })
    }

    /// Whether `bytes` are exactly the envelope this root names.
    pub(crate) fn verifies(&self, bytes: &[u8]) -> bool {
        bytes.len() as u64 == self.size && zlink_codec::inline_ref::sha256(bytes) == self.sha256
    }
}

/// The command's reply for the first message's output (`None`: a send).
pub(crate) fn encode_output(out: Option<(String, Vec<u8>)>) -> Result<Bytes, ZLinkError> {
    let (ct, payload) = out.unwrap_or_default();
    let len = u16::try_from(ct.len()).map_err(|_| protocol("content type over 64 KiB"))?;
    let mut b = BytesMut::with_capacity(2 + ct.len() + payload.len());
    b.put_u16(len);
    b.put_slice(ct.as_bytes());
    b.put_slice(&payload);
    Ok(b.freeze())
}

/// The content type and payload of a command reply.
pub(crate) fn decode_output(bytes: &Bytes) -> Result<(Bytes, Bytes), ZLinkError> {
    let raw: [u8; 2] = bytes
        .get(..2)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| protocol("truncated reply"))?;
    let end = 2 + usize::from(u16::from_be_bytes(raw));
    if bytes.len() < end {
        return Err(protocol("truncated reply"));
    }
    Ok((bytes.slice(2..end), bytes.slice(end..)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messaging::ErrorKind;

    fn sample() -> ActivationEnvelope {
        ActivationEnvelope {
            id: ObjectId::new("room-1").expect("id"),
            stable_type: StableType::new("room").expect("type"),
            mesh: MeshName::new("game").expect("mesh"),
            target: RoutingId::new(b"node-a".to_vec()).expect("rid"),
            target_lifecycle: 17,
            source: RoutingId::new(b"node-b".to_vec()).expect("rid"),
            source_run: 3,
            operation: OperationId::new(0xabc).expect("op"),
            route: RouteKind::Request,
            packet: PacketName::new("Say").expect("packet"),
            content_type: "application/json".into(),
            remaining: Duration::from_millis(2500),
            hops: 0,
            metadata: Bytes::from_static(b"\x00\x01"),
            payload: Bytes::from_static(b"{\"text\":\"hi\"}"),
        }
    }

    #[test]
    fn envelopes_round_trip_and_a_damaged_one_is_refused() {
        let e = sample();
        let bytes = e.encode().expect("encode");
        assert_eq!(ActivationEnvelope::decode(&bytes).expect("decode"), e);
        let moved = e.retarget(
            RoutingId::new(b"node-c".to_vec()).expect("rid"),
            9,
            Duration::ZERO,
        );
        assert_eq!((moved.hops, moved.target_lifecycle), (1, 9));
        assert_ne!(moved.reference().expect("ref"), e.reference().expect("ref"));
        for cut in [0, 7, 12, bytes.len() - e.payload.len() - 3] {
            let err = ActivationEnvelope::decode(&bytes.slice(..cut)).expect_err("truncated");
            assert_eq!(err.kind(), ErrorKind::ProtocolError, "cut at {cut}");
        }
        let mut other = bytes.to_vec();
        other[0] = b'X';
        assert!(ActivationEnvelope::decode(&Bytes::from(other)).is_err());
    }

    #[test]
    fn recovery_roots_round_trip_and_verify_only_their_bytes() {
        let e = sample();
        let bytes = e.encode().expect("encode");
        let root = RecoveryRoot::of(&e.reference().expect("ref"), &bytes);
        let payload = root.encode().expect("encode");
        assert_eq!(RecoveryRoot::decode(&payload), Some(root.clone()));
        assert!(root.verifies(&bytes));
        assert!(!root.verifies(&bytes[1..]));
        let mut flipped = bytes.to_vec();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(!root.verifies(&flipped));
        assert_eq!(RecoveryRoot::decode(b""), None);
        assert_eq!(RecoveryRoot::decode(b"{\"other\":1}"), None);
    }

    #[test]
    fn replies_carry_content_type_and_payload() {
        let b = encode_output(Some(("application/json".into(), b"7".to_vec()))).expect("encode");
        let (ct, payload) = decode_output(&b).expect("decode");
        assert_eq!(
            (&ct[..], &payload[..]),
            (&b"application/json"[..], &b"7"[..])
        );
        let (ct, payload) = decode_output(&encode_output(None).expect("encode")).expect("decode");
        assert!(ct.is_empty() && payload.is_empty());
        assert!(decode_output(&Bytes::from_static(b"\x00\x09ab")).is_err());
    }
}
