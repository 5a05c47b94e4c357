//! Typed payloads through the root codec registry (spec 06 §12), for both directions.
//!
//! Send side: the codec is selected by the declared type (the Rust type parameter), JSON when
//! no registration matches, and the canonical content type goes on the wire. Receive side: the
//! wire content type must equal a registry key byte for byte; anything else is a
//! `ProtocolError` and the payload is never reinterpreted as JSON.

use serde::Serialize;
use serde::de::DeserializeOwned;
use zlink_codec::CodecError;
use zlink_codec::payload::Registry;

use super::error::ZLinkError;
use super::error_parts::FramePart;
use super::error_reply::ErrorReply;
use super::metadata::Metadata;
use super::packet::{Message, PacketName, Request};

/// Encodes a value with the codec selected for its declared type `T`: (content type, bytes).
pub(crate) fn encode_payload<T: Serialize + 'static>(
    codecs: &Registry,
    value: &T,
) -> Result<(String, Vec<u8>), ZLinkError> {
    let encoded = codecs.encode(value).map_err(|e| ZLinkError::Encode {
        type_name: std::any::type_name::<T>(),
        source: std::sync::Arc::new(e).into(),
    })?;
    Ok((encoded.content_type.to_owned(), encoded.bytes))
}

/// Decodes received bytes as `T`; the content type is looked up verbatim.
pub(crate) fn decode_payload<T: DeserializeOwned + 'static>(
    codecs: &Registry,
    content_type: &[u8],
    bytes: &[u8],
) -> Result<T, ZLinkError> {
    let unknown = || ZLinkError::UnknownContentType {
        content_type: String::from_utf8_lossy(content_type).into_owned(),
    };
    let content_type = std::str::from_utf8(content_type).map_err(|_| unknown())?;
    codecs.decode(content_type, bytes).map_err(|e| match e {
        CodecError::UnknownContentType { .. } => unknown(),
        other => ZLinkError::malformed(FramePart::Payload, other),
    })
}

/// A built-in content type as its static str (set on an envelope without a copy or a UTF-8
/// check); `None` for any other.
pub(crate) fn static_content_type(content_type: &str) -> Option<&'static str> {
    use zlink_codec::payload::{JSON_CONTENT_TYPE, MESSAGE_PACK_CONTENT_TYPE};
    match content_type {
        JSON_CONTENT_TYPE => Some(JSON_CONTENT_TYPE),
        MESSAGE_PACK_CONTENT_TYPE => Some(MESSAGE_PACK_CONTENT_TYPE),
        _ => None,
    }
}

/// The content type as shared bytes: the built-in codecs' names without a copy.
pub(crate) fn content_type_bytes(content_type: &str) -> bytes::Bytes {
    use zlink_codec::payload::{JSON_CONTENT_TYPE, MESSAGE_PACK_CONTENT_TYPE};
    match content_type {
        JSON_CONTENT_TYPE => bytes::Bytes::from_static(JSON_CONTENT_TYPE.as_bytes()),
        MESSAGE_PACK_CONTENT_TYPE => {
            bytes::Bytes::from_static(MESSAGE_PACK_CONTENT_TYPE.as_bytes())
        }
        other => bytes::Bytes::copy_from_slice(other.as_bytes()),
    }
}

/// A message ready for the transport: packet name, canonical content type, payload and
/// `metadata-v1` bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundMessage {
    /// The packet name.
    pub packet: PacketName,
    /// The canonical content type of the payload.
    pub content_type: String,
    /// The encoded payload (shared: the envelope takes it without a copy).
    pub payload: bytes::Bytes,
    /// The encoded metadata.
    pub metadata: Vec<u8>,
}

impl OutboundMessage {
    /// Encodes a typed message with the codec selected for its declared type `M`.
    pub fn encode<M: Message>(
        codecs: &Registry,
        message: &M,
        metadata: &Metadata,
    ) -> Result<Self, ZLinkError> {
        let packet = PacketName::of::<M>()?;
        let (content_type, payload) = encode_payload(codecs, message)?;
        Ok(Self {
            packet,
            content_type,
            payload: bytes::Bytes::from(payload),
            metadata: metadata.to_bytes(),
        })
    }
}

/// A reply as the requester's transport received it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboundReply<'a> {
    /// A business reply.
    Reply {
        /// The content type, exactly as received.
        content_type: &'a [u8],
        /// The payload bytes.
        payload: &'a [u8],
    },
    /// An `error-reply-v1`.
    Error(&'a [u8]),
}

/// Completes a request of type `R` from its reply: the typed reply, the peer's error
/// ([`ZLinkError::Remote`]), or a `ProtocolError` for an unknown content type or bad bytes.
pub fn decode_reply<R: Request>(
    codecs: &Registry,
    reply: InboundReply<'_>,
) -> Result<R::Reply, ZLinkError> {
    match reply {
        InboundReply::Reply {
            content_type,
            payload,
        } => decode_payload::<R::Reply>(codecs, content_type, payload),
        InboundReply::Error(bytes) => Err(ErrorReply::decode(bytes)?.into_error()),
    }
}
