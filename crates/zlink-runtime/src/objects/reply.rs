//! A handler's reply (spec 06 §7): encoded for a caller on another node, or handed to a
//! caller on this node as the value itself. A same-node request needs no codec for its reply
//! (nothing crosses a wire or is stored), so the handler's value goes to the caller as it is;
//! it is encoded only when it must be sent on (a relay, an answer to another node) or when the
//! caller expects another type under the same packet name (then it is encoded and decoded, as
//! if it had crossed the mesh).

use zlink_codec::payload::Registry;

use crate::messaging::ZLinkError;

/// A handler's reply: encoded (canonical content type and bytes), or — for a request made on
/// this node that asked for it ([`ObjectCall::typed_reply`](super::registration::ObjectCall::typed_reply)) — the typed value itself, which
/// the caller takes without the codec (encoded only when its type is not the one the caller
/// expects, or when something else must send it on).
pub(crate) enum Reply {
    /// Content type and bytes.
    Encoded(String, Vec<u8>),
    /// The value, with how to encode it.
    Typed(TypedReply),
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reply::Encoded(ct, bytes) => f
                .debug_struct("Encoded")
                .field("content_type", ct)
                .field("len", &bytes.len())
                .finish(),
            Reply::Typed(_) => f.write_str("Typed"),
        }
    }
}

/// A reply value handed over without the codec.
pub(crate) struct TypedReply(Box<dyn TypedValue>);

/// A reply value that can still be encoded.
trait TypedValue: Send {
    fn encode(&self, codecs: &Registry) -> Result<(String, Vec<u8>), ZLinkError>;
    fn as_any(&self) -> &(dyn std::any::Any + Send);
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send>;
}

impl<V: serde::Serialize + Send + 'static> TypedValue for V {
    fn encode(&self, codecs: &Registry) -> Result<(String, Vec<u8>), ZLinkError> {
        crate::messaging::encode_payload(codecs, self)
    }

    fn as_any(&self) -> &(dyn std::any::Any + Send) {
        self
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

impl Reply {
    /// The typed reply `value`.
    pub(crate) fn typed<V: serde::Serialize + Send + 'static>(value: V) -> Self {
        Reply::Typed(TypedReply(Box::new(value)))
    }

    /// Content type and bytes (a typed value is encoded with `codecs`).
    pub(crate) fn into_encoded(self, codecs: &Registry) -> Result<(String, Vec<u8>), ZLinkError> {
        match self {
            Reply::Encoded(ct, bytes) => Ok((ct, bytes)),
            Reply::Typed(t) => t.0.encode(codecs),
        }
    }

    /// The reply as a `V`: a typed value of that type as it is, anything else decoded (a
    /// typed value of another type is encoded first, as if it had crossed the mesh).
    pub(crate) fn into_value<V: serde::de::DeserializeOwned + 'static>(
        self,
        codecs: &Registry,
    ) -> Result<V, ZLinkError> {
        let (ct, bytes) = match self {
            Reply::Typed(t) if t.0.as_any().is::<V>() => {
                return t.0.into_any().downcast::<V>().map(|v| *v).map_err(|_| {
                    ZLinkError::Internal(crate::messaging::InternalError::Invariant {
                        what: "a typed reply changed its type",
                    })
                });
            }
            Reply::Typed(t) => t.0.encode(codecs)?,
            Reply::Encoded(ct, bytes) => (ct, bytes),
        };
        crate::messaging::decode_payload::<V>(codecs, ct.as_bytes(), &bytes)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde::{Deserialize, Serialize, Serializer};

    use super::*;

    /// Counts its encodings.
    #[derive(Debug, Deserialize)]
    struct Counted(u64, #[serde(skip)] Option<Arc<AtomicUsize>>);

    impl Serialize for Counted {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            if let Some(n) = &self.1 {
                n.fetch_add(1, Ordering::SeqCst);
            }
            self.0.serialize(s)
        }
    }

    fn counted(v: u64) -> (Counted, Arc<AtomicUsize>) {
        let n = Arc::new(AtomicUsize::new(0));
        (Counted(v, Some(Arc::clone(&n))), n)
    }

    #[test]
    fn a_typed_reply_of_the_expected_type_is_taken_without_the_codec() {
        let (value, encodings) = counted(7);
        let got: Counted = Reply::typed(value)
            .into_value(&Registry::default())
            .expect("taken");
        assert_eq!(got.0, 7);
        assert_eq!(encodings.load(Ordering::SeqCst), 0, "never encoded");
    }

    #[test]
    fn a_typed_reply_of_another_type_is_encoded_and_decoded_as_over_the_mesh() {
        let (value, encodings) = counted(7);
        let got: u64 = Reply::typed(value)
            .into_value(&Registry::default())
            .expect("decoded");
        assert_eq!(got, 7);
        assert_eq!(encodings.load(Ordering::SeqCst), 1);
        let err = Reply::typed(counted(7).0)
            .into_value::<String>(&Registry::default())
            .expect_err("not a string");
        assert_eq!(err.kind(), crate::messaging::ErrorKind::ProtocolError);
    }

    #[test]
    fn a_typed_reply_sent_on_is_encoded_like_any_other() {
        let codecs = Registry::default();
        let (value, encodings) = counted(7);
        let (ct, bytes) = Reply::typed(value).into_encoded(&codecs).expect("encoded");
        assert_eq!(encodings.load(Ordering::SeqCst), 1);
        let (ct2, bytes2) = crate::messaging::encode_payload(&codecs, &7u64).expect("u64");
        assert_eq!(
            (ct, bytes),
            (ct2, bytes2),
            "the same bytes as the value's own encoding"
        );
        let plain = Reply::Encoded("application/json".into(), b"7".to_vec());
        assert_eq!(plain.into_value::<u64>(&codecs).expect("decoded"), 7);
    }
}
