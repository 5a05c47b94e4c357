//! `inline-v1` creation content references (spec 21 §3.4 `pendingCreation`, golden fixture
//! `creationContentReference`).
//!
//! The only recognized form is `inline-v1:` followed by the request bytes in base64url
//! (`A-Z a-z 0-9 - _`) without `=` padding. Decoding for use always verifies the decoded bytes
//! against the record's `requestEncodedSize` and `requestSha256` ([`decode_verified`]); a
//! node that gets an error here must not run the factory.
//!
//! ```
//! use zlink_codec::inline_ref;
//!
//! let reference = inline_ref::encode(b"hello");
//! assert_eq!(reference, "inline-v1:aGVsbG8");
//! let sha = inline_ref::sha256(b"hello");
//! assert_eq!(inline_ref::decode_verified(&reference, 5, &sha)?, b"hello");
//! assert!(inline_ref::decode_verified("inline-v1:aGVsbG8=", 5, &sha).is_err()); // padding
//! # Ok::<(), zlink_codec::CodecError>(())
//! ```

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use crate::error::{CodecError, InlineRefRejection};

/// The reference prefix.
pub const PREFIX: &str = "inline-v1:";

/// Largest creation request (decoded bytes): 1,048,576.
pub const MAX_REQUEST_BYTES: usize = 1_048_576;

/// Largest base64url body for [`MAX_REQUEST_BYTES`].
const MAX_BODY_CHARS: usize = MAX_REQUEST_BYTES.div_ceil(3) * 4;

/// SHA-256 of bytes.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Builds the reference for request bytes.
pub fn encode(request: &[u8]) -> String {
    let mut out = String::with_capacity(PREFIX.len() + request.len().div_ceil(3) * 4);
    out.push_str(PREFIX);
    URL_SAFE_NO_PAD.encode_string(request, &mut out);
    out
}

/// Checks the form and decodes the bytes, without verifying size or hash. Prefer
/// [`decode_verified`]: this is for diagnostics and tests.
pub fn decode_form(reference: &str) -> Result<Vec<u8>, CodecError> {
    let reject = |r| CodecError::InlineReference(r);
    let body = reference
        .strip_prefix(PREFIX)
        .ok_or(reject(InlineRefRejection::MissingPrefix))?;
    if body.contains(':') {
        return Err(reject(InlineRefRejection::ExtraSegment));
    }
    if !body
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(reject(InlineRefRejection::InvalidCharacter));
    }
    if body.len() > MAX_BODY_CHARS {
        return Err(reject(InlineRefRejection::TooLarge));
    }
    let bytes = URL_SAFE_NO_PAD
        .decode(body)
        .map_err(|_| reject(InlineRefRejection::NonCanonicalBase64))?;
    if bytes.len() > MAX_REQUEST_BYTES {
        return Err(reject(InlineRefRejection::TooLarge));
    }
    Ok(bytes)
}

/// Decodes a reference and verifies the bytes against the record's `requestEncodedSize` and
/// `requestSha256`. Every other form is rejected with its reason.
pub fn decode_verified(
    reference: &str,
    expected_size: u64,
    expected_sha256: &[u8; 32],
) -> Result<Vec<u8>, CodecError> {
    let bytes = decode_form(reference)?;
    if bytes.len() as u64 != expected_size {
        return Err(CodecError::InlineReference(
            InlineRefRejection::SizeMismatch,
        ));
    }
    if &sha256(&bytes) != expected_sha256 {
        return Err(CodecError::InlineReference(
            InlineRefRejection::Sha256Mismatch,
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejection(r: Result<Vec<u8>, CodecError>) -> InlineRefRejection {
        match r {
            Err(CodecError::InlineReference(why)) => why,
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    #[test]
    fn fixture_reference_round_trips() {
        let payload = b"zlink create room:1 request\xfb\xff\xff";
        let r = encode(payload);
        assert_eq!(r, "inline-v1:emxpbmsgY3JlYXRlIHJvb206MSByZXF1ZXN0-___");
        assert_eq!(decode_verified(&r, 30, &sha256(payload)).unwrap(), payload);
    }

    #[test]
    fn every_other_form_is_rejected_with_its_reason() {
        let sha = sha256(b"hello");
        let cases = [
            ("aGVsbG8", InlineRefRejection::MissingPrefix),
            ("inline-v2:aGVsbG8", InlineRefRejection::MissingPrefix),
            ("INLINE-V1:aGVsbG8", InlineRefRejection::MissingPrefix),
            (
                "inline-v1:a2ad96cf:aGVsbG8",
                InlineRefRejection::ExtraSegment,
            ),
            ("inline-v1:aGVsbG8=", InlineRefRejection::InvalidCharacter),
            ("inline-v1:aGVs+G8", InlineRefRejection::InvalidCharacter),
            ("inline-v1:aGVs/G8", InlineRefRejection::InvalidCharacter),
            ("inline-v1:aGVs bG8", InlineRefRejection::InvalidCharacter),
            ("inline-v1:aGVsbG9", InlineRefRejection::NonCanonicalBase64),
            ("inline-v1:aGVsb", InlineRefRejection::NonCanonicalBase64),
        ];
        for (reference, why) in cases {
            assert_eq!(
                rejection(decode_verified(reference, 5, &sha)),
                why,
                "{reference}"
            );
        }
    }

    #[test]
    fn size_and_sha256_are_verified() {
        let sha = sha256(b"hello");
        assert_eq!(
            rejection(decode_verified("inline-v1:aGVsbG8", 4, &sha)),
            InlineRefRejection::SizeMismatch
        );
        assert_eq!(
            rejection(decode_verified("inline-v1:aGVsbG8", 5, &[0x22; 32])),
            InlineRefRejection::Sha256Mismatch
        );
    }

    #[test]
    fn request_of_one_mib_is_accepted_and_one_more_byte_rejected() {
        let max = vec![0xabu8; MAX_REQUEST_BYTES];
        let r = encode(&max);
        assert_eq!(
            decode_verified(&r, MAX_REQUEST_BYTES as u64, &sha256(&max))
                .unwrap()
                .len(),
            MAX_REQUEST_BYTES
        );
        let over = vec![0xabu8; MAX_REQUEST_BYTES + 1];
        let r = encode(&over);
        assert_eq!(
            rejection(decode_verified(&r, over.len() as u64, &sha256(&over))),
            InlineRefRejection::TooLarge
        );
    }

    #[test]
    fn empty_request_is_the_empty_body() {
        assert_eq!(encode(b""), "inline-v1:");
        assert_eq!(decode_verified("inline-v1:", 0, &sha256(b"")).unwrap(), b"");
    }
}
