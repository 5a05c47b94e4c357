//! Request/one-way envelopes and replies: the application and control frame bodies
//! (`docs/transport.md`). Payload, packet name, content type and metadata are opaque here; the
//! runtime fills them.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use zlink_codec::{Generation, RoutingId};

use crate::error::TransportError;
use crate::ids::{OperationId, ReplyRouteId};
use crate::lane::OutFrame;
use crate::wire::{MAX_FRAME_LEN, kind};

mod reply;

pub use reply::{Reply, ReplyStatus};

/// The largest metadata field, in bytes. Metadata is opaque here: the runtime writes its
/// encoded form (spec 06 §7 bounds the UTF-8 text at 1,024 bytes; the encoding adds a few
/// length bytes per entry, so the field allows 8 KiB).
pub const MAX_METADATA_LEN: usize = 8 * 1024;

/// The largest packet name or content type, in UTF-8 bytes (a transport bound: one length
/// byte on the wire).
pub const MAX_NAME_LEN: usize = 255;

const FLAG_REPLY_ROUTE: u8 = 0x01;

/// UTF-8 text held as shared bytes (validated once, zero-copy on receive).
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub(crate) struct Text(Bytes);

impl Text {
    fn from_str(s: &str) -> Self {
        Self(Bytes::copy_from_slice(s.as_bytes()))
    }

    fn from_wire(b: Bytes, field: &'static str) -> Result<Self, TransportError> {
        if std::str::from_utf8(&b).is_err() {
            return Err(TransportError::Protocol(format!("{field} is not UTF-8")));
        }
        Ok(Self(b))
    }

    /// A static str: UTF-8 already, no check and no copy.
    pub(crate) fn from_static(s: &'static str) -> Self {
        Self(Bytes::from_static(s.as_bytes()))
    }

    /// Caller-supplied shared bytes: UTF-8 is an argument check here.
    fn from_bytes(b: Bytes, field: &'static str) -> Result<Self, TransportError> {
        if std::str::from_utf8(&b).is_err() {
            return Err(TransportError::InvalidArgument(format!(
                "{field} is not UTF-8"
            )));
        }
        Ok(Self(b))
    }

    fn as_str(&self) -> &str {
        // Validated on construction.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

pub(crate) fn check_len(field: &'static str, len: usize, max: usize) -> Result<(), TransportError> {
    if len > max {
        return Err(TransportError::FieldTooLong { field, len, max });
    }
    Ok(())
}

/// One application or control frame: a request (with a [`ReplyRouteId`]) or a one-way send
/// (without). Every envelope carries a non-zero OperationId and its source RoutingId and
/// lifecycle generation (spec 21 §9.3) — the original source, which a relayed request keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    operation_id: OperationId,
    reply_route: Option<ReplyRouteId>,
    source_rid: RoutingId,
    source_generation: Generation,
    address: Text,
    packet_name: Text,
    content_type: Text,
    metadata: Bytes,
    payload: Bytes,
}

impl Envelope {
    /// A request whose reply travels on `reply_route`.
    pub fn request(
        operation_id: OperationId,
        reply_route: ReplyRouteId,
        source_rid: &RoutingId,
        source_generation: Generation,
        payload: Bytes,
    ) -> Self {
        Self::build(
            operation_id,
            Some(reply_route),
            source_rid,
            source_generation,
            payload,
        )
    }

    /// A one-way send (no reply route).
    pub fn one_way(
        operation_id: OperationId,
        source_rid: &RoutingId,
        source_generation: Generation,
        payload: Bytes,
    ) -> Self {
        Self::build(operation_id, None, source_rid, source_generation, payload)
    }

    fn build(
        operation_id: OperationId,
        reply_route: Option<ReplyRouteId>,
        source_rid: &RoutingId,
        source_generation: Generation,
        payload: Bytes,
    ) -> Self {
        Self {
            operation_id,
            reply_route,
            source_rid: source_rid.clone(),
            source_generation,
            address: Text::default(),
            packet_name: Text::default(),
            content_type: Text::default(),
            metadata: Bytes::new(),
            payload,
        }
    }

    /// Sets the address: an opaque routing label the runtime fills and reads (for example
    /// the handler namespace a frame addresses), at most [`MAX_NAME_LEN`] bytes.
    pub fn with_address(mut self, address: &str) -> Result<Self, TransportError> {
        check_len("address", address.len(), MAX_NAME_LEN)?;
        self.address = Text::from_str(address);
        Ok(self)
    }

    /// Sets the packet name (at most [`MAX_NAME_LEN`] bytes).
    pub fn with_packet_name(mut self, name: &str) -> Result<Self, TransportError> {
        check_len("packet name", name.len(), MAX_NAME_LEN)?;
        self.packet_name = Text::from_str(name);
        Ok(self)
    }

    /// Sets the packet name from shared bytes (UTF-8, at most [`MAX_NAME_LEN`] bytes): no
    /// copy, for a name the caller already holds as `Bytes` (a `&'static str` through
    /// `Bytes::from_static`).
    pub fn with_packet_name_bytes(mut self, name: Bytes) -> Result<Self, TransportError> {
        check_len("packet name", name.len(), MAX_NAME_LEN)?;
        self.packet_name = Text::from_bytes(name, "packet name")?;
        Ok(self)
    }

    /// Sets the packet name from a static str (at most [`MAX_NAME_LEN`] bytes): no copy and
    /// no UTF-8 check (a `str` is UTF-8).
    pub fn with_packet_name_static(mut self, name: &'static str) -> Result<Self, TransportError> {
        check_len("packet name", name.len(), MAX_NAME_LEN)?;
        self.packet_name = Text::from_static(name);
        Ok(self)
    }

    /// Sets the content type from shared bytes (UTF-8, at most [`MAX_NAME_LEN`] bytes): no
    /// copy.
    pub fn with_content_type_bytes(mut self, content_type: Bytes) -> Result<Self, TransportError> {
        check_len("content type", content_type.len(), MAX_NAME_LEN)?;
        self.content_type = Text::from_bytes(content_type, "content type")?;
        Ok(self)
    }

    /// Sets the content type from a static str (at most [`MAX_NAME_LEN`] bytes): no copy and
    /// no UTF-8 check.
    pub fn with_content_type_static(
        mut self,
        content_type: &'static str,
    ) -> Result<Self, TransportError> {
        check_len("content type", content_type.len(), MAX_NAME_LEN)?;
        self.content_type = Text::from_static(content_type);
        Ok(self)
    }

    /// Sets the content type (at most [`MAX_NAME_LEN`] bytes).
    pub fn with_content_type(mut self, content_type: &str) -> Result<Self, TransportError> {
        check_len("content type", content_type.len(), MAX_NAME_LEN)?;
        self.content_type = Text::from_str(content_type);
        Ok(self)
    }

    /// Sets the metadata bytes (opaque, at most [`MAX_METADATA_LEN`] bytes).
    ///
    /// ```
    /// # use zlink_transport::*;
    /// # use zlink_codec::{Generation, RoutingId};
    /// # let rid = RoutingId::new(vec![1]).unwrap();
    /// # let op = OperationId::new(1).unwrap();
    /// let e = Envelope::one_way(op, &rid, Generation::MIN, bytes::Bytes::new());
    /// assert!(e.clone().with_metadata(vec![b'm'; MAX_METADATA_LEN]).is_ok());
    /// assert!(e.with_metadata(vec![b'm'; MAX_METADATA_LEN + 1]).is_err());
    /// ```
    pub fn with_metadata(mut self, metadata: impl Into<Bytes>) -> Result<Self, TransportError> {
        let metadata = metadata.into();
        check_len("metadata", metadata.len(), MAX_METADATA_LEN)?;
        self.metadata = metadata;
        Ok(self)
    }

    /// The OperationId.
    pub fn operation_id(&self) -> OperationId {
        self.operation_id
    }

    /// The reply route (`None` for a one-way send).
    pub fn reply_route(&self) -> Option<ReplyRouteId> {
        self.reply_route
    }

    /// The source RoutingId.
    pub fn source_rid(&self) -> &RoutingId {
        &self.source_rid
    }

    /// The source lifecycle generation.
    pub fn source_generation(&self) -> Generation {
        self.source_generation
    }

    /// The address (empty when unset).
    pub fn address(&self) -> &str {
        self.address.as_str()
    }

    /// The packet name (empty when unset).
    pub fn packet_name(&self) -> &str {
        self.packet_name.as_str()
    }

    /// The content type (empty when unset).
    pub fn content_type(&self) -> &str {
        self.content_type.as_str()
    }

    /// The packet name as shared bytes (valid UTF-8; a zero-copy slice of a received frame).
    pub fn packet_name_bytes(&self) -> &Bytes {
        &self.packet_name.0
    }

    /// The address as bytes (valid UTF-8), without the UTF-8 check [`address`](Self::address)
    /// makes on every call.
    pub fn address_bytes(&self) -> &[u8] {
        &self.address.0
    }

    /// The content type as shared bytes (valid UTF-8; a zero-copy slice of a received frame).
    pub fn content_type_bytes(&self) -> &Bytes {
        &self.content_type.0
    }

    /// The metadata text (empty when unset).
    pub fn metadata(&self) -> &Bytes {
        &self.metadata
    }

    /// The payload.
    pub fn payload(&self) -> &Bytes {
        &self.payload
    }

    /// Takes the payload out.
    pub fn into_payload(self) -> Bytes {
        self.payload
    }

    /// The encoded frame body length (the number [`MAX_FRAME_LEN`] bounds).
    pub fn encoded_len(&self) -> usize {
        1 + 1
            + 16
            + if self.reply_route.is_some() { 8 } else { 0 }
            + 8
            + 1
            + self.source_rid.as_bytes().len()
            + 1
            + self.address.len()
            + 1
            + self.packet_name.len()
            + 1
            + self.content_type.len()
            + 2
            + self.metadata.len()
            + self.payload.len()
    }

    pub(crate) fn encode(&self, frame_kind: u8) -> Result<Bytes, TransportError> {
        self.encode_prefixed(frame_kind, &[])
    }

    /// [`Self::encode`] with `prefix` written before the payload, as if the payload were
    /// `prefix` then the payload (one copy of each, no joined payload built first).
    pub(crate) fn encode_prefixed(
        &self,
        frame_kind: u8,
        prefix: &[u8],
    ) -> Result<Bytes, TransportError> {
        let mut out = self.encode_head(frame_kind, prefix, self.payload.len())?;
        out.put_slice(&self.payload);
        Ok(out.freeze())
    }

    /// The same frame as [`Self::encode_prefixed`], byte for byte, as two parts: everything
    /// before the payload (the header and `prefix`), then the payload itself, shared and not
    /// copied (the writer writes a large one from its own buffer).
    pub(crate) fn encode_split(
        &self,
        frame_kind: u8,
        prefix: &[u8],
    ) -> Result<OutFrame, TransportError> {
        let head = self.encode_head(frame_kind, prefix, 0)?;
        Ok(OutFrame {
            head: head.freeze(),
            tail: self.payload.clone(),
        })
    }

    /// The frame's bytes before the payload (`prefix` last), in a buffer with room for
    /// `room` more bytes; the whole frame (with the payload) must fit [`MAX_FRAME_LEN`].
    fn encode_head(
        &self,
        frame_kind: u8,
        prefix: &[u8],
        room: usize,
    ) -> Result<BytesMut, TransportError> {
        let len = self.encoded_len() + prefix.len();
        if len > MAX_FRAME_LEN {
            return Err(TransportError::FrameTooLarge {
                len,
                max: MAX_FRAME_LEN,
            });
        }
        let mut out = BytesMut::with_capacity(len - self.payload.len() + room);
        out.put_u8(frame_kind);
        out.put_u8(if self.reply_route.is_some() {
            FLAG_REPLY_ROUTE
        } else {
            0
        });
        out.put_u128(self.operation_id.get());
        if let Some(r) = self.reply_route {
            out.put_u64(r.get());
        }
        out.put_u64(self.source_generation.get());
        out.put_u8(self.source_rid.as_bytes().len() as u8);
        out.put_slice(self.source_rid.as_bytes());
        out.put_u8(self.address.len() as u8);
        out.put_slice(&self.address.0);
        out.put_u8(self.packet_name.len() as u8);
        out.put_slice(&self.packet_name.0);
        out.put_u8(self.content_type.len() as u8);
        out.put_slice(&self.content_type.0);
        out.put_u16(self.metadata.len() as u16);
        out.put_slice(&self.metadata);
        out.put_slice(prefix);
        Ok(out)
    }

    /// Decodes an `APP` or `CONTROL` body (kind byte included); the payload is a zero-copy
    /// slice of `body`.
    #[cfg(test)]
    pub(crate) fn decode(body: Bytes) -> Result<Self, TransportError> {
        Self::decode_from(body, None)
    }

    /// [`Envelope::decode`]; a source RoutingId equal to `peer` (the connection's, the usual
    /// case) shares `peer`'s bytes instead of allocating its own.
    pub(crate) fn decode_from(
        mut body: Bytes,
        peer: Option<&RoutingId>,
    ) -> Result<Self, TransportError> {
        let bad = |why: &str| TransportError::Protocol(format!("envelope: {why}"));
        if body.remaining() < 1 + 1 + 16 + 8 + 1 {
            return Err(bad("truncated header"));
        }
        let frame_kind = body.get_u8();
        if frame_kind != kind::APP && frame_kind != kind::CONTROL {
            return Err(bad("not an APP or CONTROL frame"));
        }
        let flags = body.get_u8();
        if flags & !FLAG_REPLY_ROUTE != 0 {
            return Err(bad("unknown flag bits"));
        }
        let operation_id = OperationId::new(body.get_u128()).map_err(|_| bad("OperationId 0"))?;
        let reply_route = if flags & FLAG_REPLY_ROUTE != 0 {
            if body.remaining() < 8 {
                return Err(bad("truncated reply route"));
            }
            Some(ReplyRouteId::new(body.get_u64()).ok_or_else(|| bad("ReplyRouteId 0"))?)
        } else {
            None
        };
        if body.remaining() < 8 + 1 {
            return Err(bad("truncated source"));
        }
        let source_generation =
            Generation::new(body.get_u64()).map_err(|_| bad("source generation out of range"))?;
        let rid_len = usize::from(body.get_u8());
        if rid_len == 0 {
            return Err(bad("empty source RoutingId"));
        }
        let source_rid = take(&mut body, rid_len).ok_or_else(|| bad("truncated source RID"))?;
        let source_rid = match peer {
            Some(p) if p.as_bytes() == &source_rid[..] => p.clone(),
            _ => RoutingId::from_slice(&source_rid).map_err(|_| bad("source RoutingId length"))?,
        };
        let address = take_text8(&mut body, "address")?;
        let packet_name = take_text8(&mut body, "packet name")?;
        let content_type = take_text8(&mut body, "content type")?;
        if body.remaining() < 2 {
            return Err(bad("truncated metadata length"));
        }
        let meta_len = usize::from(body.get_u16());
        if meta_len > MAX_METADATA_LEN {
            return Err(bad("metadata longer than MAX_METADATA_LEN"));
        }
        let metadata = take(&mut body, meta_len).ok_or_else(|| bad("truncated metadata"))?;
        Ok(Self {
            operation_id,
            reply_route,
            source_rid,
            source_generation,
            address,
            packet_name,
            content_type,
            metadata,
            payload: body,
        })
    }
}

pub(crate) fn take(body: &mut Bytes, len: usize) -> Option<Bytes> {
    (body.remaining() >= len).then(|| body.split_to(len))
}

pub(crate) fn take_text8(body: &mut Bytes, field: &'static str) -> Result<Text, TransportError> {
    if body.remaining() < 1 {
        return Err(TransportError::Protocol(format!("truncated {field}")));
    }
    let len = usize::from(body.get_u8());
    let raw =
        take(body, len).ok_or_else(|| TransportError::Protocol(format!("truncated {field}")))?;
    Text::from_wire(raw, field)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::TransportErrorKind;

    fn rid() -> RoutingId {
        RoutingId::new(vec![0xab; 3]).unwrap()
    }

    fn op(n: u128) -> OperationId {
        OperationId::new(n).unwrap()
    }

    #[test]
    fn a_decoded_source_equal_to_the_peer_shares_the_peers_routing_id() {
        let peer = rid();
        let frame = Envelope::one_way(op(1), &peer, Generation::MIN, Bytes::new())
            .encode(kind::APP)
            .unwrap();
        let shared = Envelope::decode_from(frame.clone(), Some(&peer)).unwrap();
        assert_eq!(
            shared.source_rid().as_bytes().as_ptr(),
            peer.as_bytes().as_ptr()
        );
        let other = RoutingId::new(vec![0xcd; 3]).unwrap();
        let own = Envelope::decode_from(frame, Some(&other)).unwrap();
        assert_eq!(own.source_rid(), &peer);
    }

    #[test]
    fn names_set_from_shared_bytes_are_checked_like_text() {
        let e = Envelope::one_way(op(1), &rid(), Generation::MIN, Bytes::new());
        let named = e
            .clone()
            .with_packet_name_bytes(Bytes::from_static(b"Echo"))
            .unwrap()
            .with_content_type_bytes(Bytes::from_static(b"application/json"))
            .unwrap();
        let back = Envelope::decode(named.encode(kind::APP).unwrap()).unwrap();
        assert_eq!(back.packet_name(), "Echo");
        assert_eq!(back.content_type(), "application/json");
        let at = Bytes::from(vec![b'p'; MAX_NAME_LEN]);
        assert!(e.clone().with_packet_name_bytes(at).is_ok());
        let past = Bytes::from(vec![b'p'; MAX_NAME_LEN + 1]);
        assert_eq!(
            e.clone().with_packet_name_bytes(past).unwrap_err().kind(),
            TransportErrorKind::InvalidArgument
        );
        let not_utf8 = Bytes::from_static(b"\xff");
        assert_eq!(
            e.with_content_type_bytes(not_utf8).unwrap_err().kind(),
            TransportErrorKind::InvalidArgument
        );
    }

    #[test]
    fn metadata_at_the_field_bound_is_accepted_and_one_past_rejected() {
        let e = Envelope::one_way(op(1), &rid(), Generation::MIN, Bytes::new());
        let ok = e
            .clone()
            .with_metadata(vec![0xff; MAX_METADATA_LEN])
            .unwrap();
        assert_eq!(ok.metadata().len(), MAX_METADATA_LEN);
        let back = Envelope::decode(ok.encode(kind::APP).unwrap()).unwrap();
        assert_eq!(back.metadata().len(), MAX_METADATA_LEN);
        let err = e.with_metadata(vec![0; MAX_METADATA_LEN + 1]).unwrap_err();
        assert_eq!(err.kind(), TransportErrorKind::InvalidArgument);
        assert!(matches!(
            err,
            TransportError::FieldTooLong {
                len,
                max: MAX_METADATA_LEN,
                ..
            } if len == MAX_METADATA_LEN + 1
        ));
    }

    #[test]
    fn reply_metadata_at_the_field_bound_is_accepted_and_one_past_rejected() {
        let r = Reply::new(
            ReplyStatus::Ok,
            op(1),
            ReplyRouteId::new(1).unwrap(),
            Bytes::new(),
        );
        assert!(
            r.clone()
                .with_metadata(vec![b'm'; MAX_METADATA_LEN])
                .is_ok()
        );
        assert!(r.with_metadata(vec![b'm'; MAX_METADATA_LEN + 1]).is_err());
    }

    #[test]
    fn names_of_255_bytes_are_accepted_and_256_rejected() {
        let e = Envelope::one_way(op(1), &rid(), Generation::MIN, Bytes::new());
        assert!(e.clone().with_packet_name(&"p".repeat(255)).is_ok());
        assert!(e.clone().with_packet_name(&"p".repeat(256)).is_err());
        assert!(e.clone().with_content_type(&"c".repeat(255)).is_ok());
        assert!(e.with_content_type(&"c".repeat(256)).is_err());
    }

    #[test]
    fn envelope_encoded_len_matches_the_bytes() {
        let e = Envelope::request(
            op(9),
            ReplyRouteId::new(3).unwrap(),
            &rid(),
            Generation::MIN,
            Bytes::from_static(b"hello"),
        )
        .with_packet_name("p")
        .unwrap();
        assert_eq!(e.encode(kind::APP).unwrap().len(), e.encoded_len());
    }

    #[test]
    fn a_split_frame_is_the_prefixed_frame_byte_for_byte() {
        let payload = Bytes::from((0..300_000u32).map(|i| i as u8).collect::<Vec<u8>>());
        for (e, prefix) in [
            (
                Envelope::one_way(op(4), &rid(), Generation::MIN, payload.clone())
                    .with_packet_name("zlink.relocation.chunk")
                    .unwrap(),
                &b"chunk-head"[..],
            ),
            (
                Envelope::request(
                    op(5),
                    ReplyRouteId::new(8).unwrap(),
                    &rid(),
                    Generation::MIN,
                    Bytes::from_static(b"x"),
                )
                .with_metadata(b"m=1".to_vec())
                .unwrap(),
                &b""[..],
            ),
            (
                Envelope::one_way(op(6), &rid(), Generation::MIN, Bytes::new()),
                &b"p"[..],
            ),
        ] {
            let whole = e.encode_prefixed(kind::CONTROL, prefix).unwrap();
            let split = e.encode_split(kind::CONTROL, prefix).unwrap();
            assert_eq!(split.len(), whole.len());
            assert_eq!(split.len(), e.encoded_len() + prefix.len());
            let mut joined = split.head.to_vec();
            joined.extend_from_slice(&split.tail);
            assert_eq!(joined, whole.to_vec());
            // The payload is shared, not copied.
            assert_eq!(split.tail.as_ptr(), e.payload().as_ptr());
        }
    }

    #[test]
    fn a_split_frame_over_the_frame_limit_is_refused_like_the_whole_one() {
        let e = Envelope::one_way(op(7), &rid(), Generation::MIN, Bytes::new());
        let payload = Bytes::from(vec![0u8; MAX_FRAME_LEN - e.encoded_len()]);
        let e = Envelope::one_way(op(7), &rid(), Generation::MIN, payload);
        assert!(e.encode_split(kind::CONTROL, b"").is_ok());
        assert!(matches!(
            e.encode_split(kind::CONTROL, b"p"),
            Err(TransportError::FrameTooLarge { .. })
        ));
        assert!(matches!(
            e.encode_prefixed(kind::CONTROL, b"p"),
            Err(TransportError::FrameTooLarge { .. })
        ));
    }

    #[test]
    fn zero_ids_on_the_wire_are_protocol_errors() {
        let e = Envelope::request(
            op(1),
            ReplyRouteId::new(1).unwrap(),
            &rid(),
            Generation::MIN,
            Bytes::new(),
        );
        let good = e.encode(kind::APP).unwrap();
        let mut zero_op = good.to_vec();
        zero_op[2..18].fill(0);
        assert_eq!(
            Envelope::decode(zero_op.into()).unwrap_err().kind(),
            TransportErrorKind::Protocol
        );
        let mut zero_route = good.to_vec();
        zero_route[18..26].fill(0);
        assert_eq!(
            Envelope::decode(zero_route.into()).unwrap_err().kind(),
            TransportErrorKind::Protocol
        );
    }

    proptest! {
        #[test]
        fn envelopes_round_trip(
            op_id in 1u128..,
            route in proptest::option::of(1u64..),
            gen_ in 1u64..=zlink_codec::MAX_U63,
            rid_bytes in proptest::collection::vec(any::<u8>(), 1..=255),
            address in "[a-z.-]{0,40}",
            packet in "[a-z.]{0,40}",
            ctype in "[a-z/]{0,40}",
            meta in proptest::collection::vec(any::<u8>(), 0..100),
            payload in proptest::collection::vec(any::<u8>(), 0..512),
            control in any::<bool>(),
        ) {
            let rid = RoutingId::new(rid_bytes).unwrap();
            let generation = Generation::new(gen_).unwrap();
            let base = match route {
                Some(r) => Envelope::request(op(op_id), ReplyRouteId::new(r).unwrap(), &rid, generation, payload.into()),
                None => Envelope::one_way(op(op_id), &rid, generation, payload.into()),
            };
            let e = base.with_address(&address).unwrap().with_packet_name(&packet).unwrap().with_content_type(&ctype).unwrap();
            let e = e.with_metadata(meta).unwrap();
            let k = if control { kind::CONTROL } else { kind::APP };
            let decoded = Envelope::decode(e.encode(k).unwrap()).unwrap();
            prop_assert_eq!(decoded.source_rid(), &rid);
            prop_assert_eq!(decoded, e);
        }

        #[test]
        fn replies_round_trip(
            op_id in 1u128..,
            route in 1u64..,
            error in any::<bool>(),
            payload in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            let status = if error { ReplyStatus::Error } else { ReplyStatus::Ok };
            let r = Reply::new(status, op(op_id), ReplyRouteId::new(route).unwrap(), payload.into())
                .with_content_type("application/json").unwrap();
            prop_assert_eq!(Reply::decode(r.encode().unwrap()).unwrap(), r);
        }

        #[test]
        fn truncated_envelopes_never_panic(cut in 0usize..80) {
            let e = Envelope::request(op(5), ReplyRouteId::new(5).unwrap(), &rid(), Generation::MIN, Bytes::from_static(b"x"))
                .with_packet_name("pkt").unwrap().with_metadata(&b"k=v"[..]).unwrap();
            let full = e.encode(kind::APP).unwrap();
            let cut = cut.min(full.len());
            let _ = Envelope::decode(full.slice(..cut));
        }
    }
}
