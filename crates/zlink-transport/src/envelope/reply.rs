//! Replies and error replies: the completion of one request, on the reply lane.

use super::*;

/// Whether a reply completes normally or with an error (the runtime encodes the error kind in
/// the payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReplyStatus {
    /// A business reply.
    Ok,
    /// An error reply.
    Error,
}

/// A reply or error reply: the completion of one request, sent on the reply lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    status: ReplyStatus,
    operation_id: OperationId,
    reply_route: ReplyRouteId,
    content_type: Text,
    metadata: Bytes,
    payload: Bytes,
}

impl Reply {
    /// A reply to the request `operation_id`, travelling on `reply_route`.
    pub fn new(
        status: ReplyStatus,
        operation_id: OperationId,
        reply_route: ReplyRouteId,
        payload: Bytes,
    ) -> Self {
        Self {
            status,
            operation_id,
            reply_route,
            content_type: Text::default(),
            metadata: Bytes::new(),
            payload,
        }
    }

    /// The reply to `request` (its OperationId and reply route), or `None` for a one-way.
    pub fn to(request: &Envelope, status: ReplyStatus, payload: Bytes) -> Option<Self> {
        request
            .reply_route
            .map(|route| Self::new(status, request.operation_id, route, payload))
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

    /// Sets the metadata bytes (opaque, at most [`MAX_METADATA_LEN`] bytes; a reply does not
    /// copy the request's metadata, spec 06 §7).
    pub fn with_metadata(mut self, metadata: impl Into<Bytes>) -> Result<Self, TransportError> {
        let metadata = metadata.into();
        check_len("metadata", metadata.len(), MAX_METADATA_LEN)?;
        self.metadata = metadata;
        Ok(self)
    }

    /// The status.
    pub fn status(&self) -> ReplyStatus {
        self.status
    }

    /// The OperationId of the request this completes.
    pub fn operation_id(&self) -> OperationId {
        self.operation_id
    }

    /// The reply route.
    pub fn reply_route(&self) -> ReplyRouteId {
        self.reply_route
    }

    /// The content type as shared bytes (valid UTF-8; a zero-copy slice of a received frame).
    pub fn content_type_bytes(&self) -> &Bytes {
        &self.content_type.0
    }

    /// The content type (empty when unset).
    pub fn content_type(&self) -> &str {
        self.content_type.as_str()
    }

    /// The metadata text.
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

    /// The encoded frame body length.
    pub fn encoded_len(&self) -> usize {
        1 + 1 + 16 + 8 + 1 + self.content_type.len() + 2 + self.metadata.len() + self.payload.len()
    }

    pub(crate) fn encode(&self) -> Result<Bytes, TransportError> {
        let len = self.encoded_len();
        if len > MAX_FRAME_LEN {
            return Err(TransportError::FrameTooLarge {
                len,
                max: MAX_FRAME_LEN,
            });
        }
        let mut out = BytesMut::with_capacity(len);
        out.put_u8(kind::REPLY);
        out.put_u8(match self.status {
            ReplyStatus::Ok => 0,
            ReplyStatus::Error => 1,
        });
        out.put_u128(self.operation_id.get());
        out.put_u64(self.reply_route.get());
        out.put_u8(self.content_type.len() as u8);
        out.put_slice(&self.content_type.0);
        out.put_u16(self.metadata.len() as u16);
        out.put_slice(&self.metadata);
        out.put_slice(&self.payload);
        Ok(out.freeze())
    }

    pub(crate) fn decode(mut body: Bytes) -> Result<Self, TransportError> {
        let bad = |why: &str| TransportError::Protocol(format!("reply: {why}"));
        if body.remaining() < 1 + 1 + 16 + 8 {
            return Err(bad("truncated header"));
        }
        if body.get_u8() != kind::REPLY {
            return Err(bad("not a REPLY frame"));
        }
        let status = match body.get_u8() {
            0 => ReplyStatus::Ok,
            1 => ReplyStatus::Error,
            _ => return Err(bad("unknown status")),
        };
        let operation_id = OperationId::new(body.get_u128()).map_err(|_| bad("OperationId 0"))?;
        let reply_route = ReplyRouteId::new(body.get_u64()).ok_or_else(|| bad("ReplyRouteId 0"))?;
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
            status,
            operation_id,
            reply_route,
            content_type,
            metadata,
            payload: body,
        })
    }
}
