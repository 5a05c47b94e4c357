//! The error-reply wire form (spec 06 §19, §20): what a request's receiver sends back instead
//! of a business reply when the dispatch fails.
//!
//! Layout, `error-reply-v1`:
//!
//! | bytes | field |
//! |---|---|
//! | 1 | format tag `0x01` |
//! | 1 | [`ErrorKind::code`] (1..=13) |
//! | 2 | message length `n`, big-endian, `n <= 256` |
//! | n | message, UTF-8, no control characters ([`ErrorMessage`]) |
//!
//! Nothing may follow the message. Decoding rejects an unknown tag or code, an over-long,
//! non-UTF-8 or control-character message and trailing bytes as a
//! [`ZLinkError::MalformedFrame`] (`ProtocolError`): a peer's text is never reinterpreted.

use super::error::{ErrorKind, ErrorMessage, ZLinkError};
use super::error_parts::FramePart;

/// The format tag of `error-reply-v1`.
pub const ERROR_REPLY_TAG: u8 = 0x01;

/// A request's error reply: a common kind and a bounded, sanitised message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ErrorReply {
    kind: ErrorKind,
    message: ErrorMessage,
}

impl ErrorReply {
    /// An error reply of a kind with a message.
    pub fn new(kind: ErrorKind, message: ErrorMessage) -> Self {
        Self { kind, message }
    }

    /// The error reply a failed dispatch sends: the error's kind and sanitised text (never its
    /// cause).
    pub fn from_error(error: &ZLinkError) -> Self {
        Self::new(error.kind(), error.reply_message())
    }

    /// The kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message.
    pub fn message(&self) -> &ErrorMessage {
        &self.message
    }

    /// The error a caller completes with when this reply arrives ([`ZLinkError::Remote`]).
    pub fn into_error(self) -> ZLinkError {
        ZLinkError::Remote {
            kind: self.kind,
            message: self.message,
        }
    }

    /// Encodes `error-reply-v1`.
    pub fn encode(&self) -> Vec<u8> {
        let text = self.message.as_str().as_bytes();
        let mut out = Vec::with_capacity(4 + text.len());
        out.push(ERROR_REPLY_TAG);
        out.push(self.kind.code());
        // ErrorMessage holds at most 256 bytes, so the length always fits in a u16.
        let len = u16::try_from(text.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(text);
        out
    }

    /// Decodes `error-reply-v1`; anything malformed is a `ProtocolError`.
    pub fn decode(bytes: &[u8]) -> Result<Self, ZLinkError> {
        let bad = |detail: &str| ZLinkError::malformed(FramePart::ErrorReply, detail);
        let [tag, code, hi, lo, rest @ ..] = bytes else {
            return Err(bad("shorter than its 4-byte header"));
        };
        if *tag != ERROR_REPLY_TAG {
            return Err(bad(&format!("unknown format tag 0x{tag:02x}")));
        }
        let kind = ErrorKind::from_code(*code)
            .ok_or_else(|| bad(&format!("unknown error kind code {code}")))?;
        let len = usize::from(u16::from_be_bytes([*hi, *lo]));
        if len > ErrorMessage::MAX_LEN {
            return Err(bad(&format!(
                "message length {len} is more than {}",
                ErrorMessage::MAX_LEN
            )));
        }
        if rest.len() != len {
            return Err(bad(&format!(
                "message length {len} but {} bytes follow",
                rest.len()
            )));
        }
        let text = std::str::from_utf8(rest).map_err(|_| bad("message is not UTF-8"))?;
        if text.chars().any(char::is_control) {
            return Err(bad("message contains a control character"));
        }
        Ok(Self::new(kind, ErrorMessage::sanitise(text)))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn reply(kind: ErrorKind, text: &str) -> ErrorReply {
        ErrorReply::new(kind, ErrorMessage::sanitise(text))
    }

    #[test]
    fn every_kind_round_trips_as_an_error_reply() {
        for kind in ErrorKind::ALL {
            let sent = reply(kind, &format!("failed with {kind}"));
            let back = ErrorReply::decode(&sent.encode()).unwrap();
            assert_eq!(back, sent);
            assert_eq!(back.clone().into_error().kind(), kind);
        }
    }

    #[test]
    fn encoding_is_tag_code_length_message() {
        let bytes = reply(ErrorKind::Rejected, "no").encode();
        assert_eq!(bytes, vec![0x01, 3, 0, 2, b'n', b'o']);
    }

    #[test]
    fn message_of_256_bytes_decodes_and_257_is_a_protocol_error() {
        let at = reply(ErrorKind::NotFound, &"m".repeat(256)).encode();
        assert_eq!(
            ErrorReply::decode(&at).unwrap().message().as_str().len(),
            256
        );

        let mut past = vec![ERROR_REPLY_TAG, 1, 1, 1];
        past.extend(std::iter::repeat_n(b'm', 257));
        let err = ErrorReply::decode(&past).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ProtocolError);
    }

    #[test]
    fn malformed_error_replies_are_protocol_errors() {
        let cases: [&[u8]; 7] = [
            &[],
            &[ERROR_REPLY_TAG, 1, 0],
            &[0x02, 1, 0, 0],
            &[ERROR_REPLY_TAG, 0, 0, 0],
            &[ERROR_REPLY_TAG, 14, 0, 0],
            &[ERROR_REPLY_TAG, 1, 0, 1, 0xff],
            &[ERROR_REPLY_TAG, 1, 0, 1, b'\n'],
        ];
        for bytes in cases {
            let err = ErrorReply::decode(bytes).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::ProtocolError, "{bytes:?}");
        }
        let trailing = [ERROR_REPLY_TAG, 1, 0, 0, b'x'];
        assert!(ErrorReply::decode(&trailing).is_err());
    }

    #[test]
    fn reply_from_a_local_error_keeps_kind_and_hides_the_cause() {
        let err = ZLinkError::handler_failed("Ping", "secret detail");
        let sent = ErrorReply::from_error(&err);
        assert_eq!(sent.kind(), ErrorKind::InternalFailure);
        assert!(!sent.message().as_str().contains("secret"));
    }

    proptest! {
        #[test]
        fn any_sanitised_text_round_trips(text in "\\PC{0,300}", code in 1u8..=13) {
            let kind = ErrorKind::from_code(code).unwrap();
            let sent = ErrorReply::new(kind, ErrorMessage::sanitise(&text));
            prop_assert_eq!(ErrorReply::decode(&sent.encode()).unwrap(), sent);
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Err(e) = ErrorReply::decode(&bytes) {
                prop_assert_eq!(e.kind(), ErrorKind::ProtocolError);
            }
        }
    }
}
