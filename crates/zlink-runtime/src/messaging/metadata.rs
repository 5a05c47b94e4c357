//! Application metadata: an immutable, framework-validated snapshot (spec 06 §7).
//!
//! - Setting the same key more than once keeps the last value.
//! - The UTF-8 size of all metadata — the sum of every key's and value's byte length, counted
//!   after duplicate keys collapse — is at most [`Metadata::MAX_BYTES`] (1,024).
//! - Keys are non-empty and contain no control characters; values are any UTF-8 text.
//! - A reply never copies the request's metadata.
//!
//! Wire form (`metadata-v1`), the bytes an inbound frame carries: zero or more entries, each
//! `u16` big-endian key length, key, `u16` big-endian value length, value, in ascending key
//! order with no duplicate key. Empty bytes are empty metadata. A receiver rejects anything
//! else — duplicates, bad UTF-8, a size above the bound — as a `ProtocolError`.

use std::collections::BTreeMap;

use super::error::ZLinkError;
use super::error_parts::{FramePart, InvalidText};

/// An immutable, validated metadata snapshot.
///
/// ```
/// use zlink_runtime::handler::Metadata;
/// let m = Metadata::builder().set("trace", "a").set("trace", "b").build()?;
/// assert_eq!(m.get("trace"), Some("b"));
/// assert!(Metadata::builder().set("k", "v".repeat(1_024)).build().is_err());
/// # Ok::<(), zlink_runtime::ZLinkError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Metadata {
    entries: BTreeMap<String, String>,
    size: usize,
}

impl Metadata {
    /// Largest total UTF-8 size of all keys and values, in bytes.
    pub const MAX_BYTES: usize = 1_024;

    /// Empty metadata.
    pub fn empty() -> Self {
        Self::default()
    }

    /// A builder.
    pub fn builder() -> MetadataBuilder {
        MetadataBuilder::default()
    }

    /// The value of a key.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries.get(key).map(String::as_str)
    }

    /// Every entry, in ascending key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The total UTF-8 size of all keys and values (at most [`Self::MAX_BYTES`]).
    pub fn size(&self) -> usize {
        self.size
    }

    /// Encodes `metadata-v1`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.size + 4 * self.entries.len());
        for (k, v) in &self.entries {
            for part in [k, v] {
                // Every part is at most 1,024 bytes, so its length fits a u16.
                let len = u16::try_from(part.len()).unwrap_or(u16::MAX);
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(part.as_bytes());
            }
        }
        out
    }

    /// Decodes `metadata-v1` received on the wire; anything malformed is a `ProtocolError`.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ZLinkError> {
        let bad = |detail: String| ZLinkError::malformed(FramePart::Metadata, detail);
        let mut entries = BTreeMap::new();
        let mut size = 0usize;
        let mut rest = bytes;
        let mut last_key: Option<String> = None;
        while !rest.is_empty() {
            let key = take_text(&mut rest).map_err(bad)?;
            let value = take_text(&mut rest).map_err(bad)?;
            if let Err(reason) = check_key(&key) {
                return Err(bad(format!("key {reason}")));
            }
            if last_key.as_ref().is_some_and(|last| *last >= key) {
                return Err(bad("keys are not in strictly ascending order".to_owned()));
            }
            size += key.len() + value.len();
            if size > Self::MAX_BYTES {
                return Err(bad(format!("more than the {}-byte bound", Self::MAX_BYTES)));
            }
            last_key = Some(key.clone());
            entries.insert(key, value);
        }
        Ok(Self { entries, size })
    }
}

/// Reads one length-prefixed UTF-8 part.
fn take_text(rest: &mut &[u8]) -> Result<String, String> {
    let [hi, lo, tail @ ..] = *rest else {
        return Err("truncated length".to_owned());
    };
    let len = usize::from(u16::from_be_bytes([*hi, *lo]));
    if len > Metadata::MAX_BYTES {
        return Err(format!(
            "a {len}-byte part is more than the {}-byte bound",
            Metadata::MAX_BYTES
        ));
    }
    if tail.len() < len {
        return Err("truncated text".to_owned());
    }
    let (text, tail) = tail.split_at(len);
    *rest = tail;
    String::from_utf8(text.to_vec()).map_err(|_| "text is not UTF-8".to_owned())
}

fn check_key(key: &str) -> Result<(), InvalidText> {
    if key.is_empty() {
        return Err(InvalidText::Empty);
    }
    if key.chars().any(char::is_control) {
        return Err(InvalidText::ControlCharacter);
    }
    Ok(())
}

/// Collects metadata entries; [`build`](Self::build) validates the snapshot.
#[derive(Debug, Clone, Default)]
pub struct MetadataBuilder {
    entries: BTreeMap<String, String>,
}

impl MetadataBuilder {
    /// Sets a key; setting it again replaces the value (the last value wins).
    pub fn set(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.entries.insert(key.into(), value.into());
        self
    }

    /// Validates keys and the total size and returns the immutable snapshot.
    pub fn build(self) -> Result<Metadata, ZLinkError> {
        let mut size = 0usize;
        for (k, v) in &self.entries {
            check_key(k).map_err(|reason| ZLinkError::InvalidMetadataKey { reason })?;
            size = size.saturating_add(k.len()).saturating_add(v.len());
        }
        if size > Metadata::MAX_BYTES {
            return Err(ZLinkError::MetadataTooLarge {
                actual: size,
                max: Metadata::MAX_BYTES,
            });
        }
        Ok(Metadata {
            entries: self.entries,
            size,
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::messaging::ErrorKind;

    #[test]
    fn metadata_of_1024_bytes_is_accepted_and_1025_rejected() {
        // key "k" (1 byte) + value of 1,023 bytes = 1,024.
        let at = Metadata::builder()
            .set("k", "v".repeat(1_023))
            .build()
            .unwrap();
        assert_eq!(at.size(), 1_024);
        let err = Metadata::builder()
            .set("k", "v".repeat(1_024))
            .build()
            .unwrap_err();
        assert!(matches!(
            err,
            ZLinkError::MetadataTooLarge {
                actual: 1_025,
                max: 1_024
            }
        ));
    }

    #[test]
    fn size_counts_utf8_bytes_not_characters() {
        // "é" is two bytes: 1 + 2 * 512 = 1,025.
        let err = Metadata::builder()
            .set("k", "é".repeat(512))
            .build()
            .unwrap_err();
        assert!(matches!(
            err,
            ZLinkError::MetadataTooLarge { actual: 1_025, .. }
        ));
    }

    #[test]
    fn setting_a_key_twice_keeps_the_last_value_and_counts_once() {
        let m = Metadata::builder()
            .set("k", "v".repeat(1_000))
            .set("k", "last")
            .build()
            .unwrap();
        assert_eq!(m.get("k"), Some("last"));
        assert_eq!(m.len(), 1);
        assert_eq!(m.size(), 5);
    }

    #[test]
    fn empty_or_control_character_keys_are_rejected() {
        for key in ["", "a\nb"] {
            let err = Metadata::builder().set(key, "v").build().unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidOperation);
        }
    }

    #[test]
    fn wire_metadata_at_the_bound_decodes_and_one_past_is_a_protocol_error() {
        let at = Metadata::builder()
            .set("k", "v".repeat(1_023))
            .build()
            .unwrap();
        assert_eq!(Metadata::from_bytes(&at.to_bytes()).unwrap(), at);

        let mut past = vec![0, 1, b'k', 0x04, 0x00];
        past.extend(std::iter::repeat_n(b'v', 1_024));
        let err = Metadata::from_bytes(&past).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ProtocolError);
    }

    #[test]
    fn malformed_wire_metadata_is_a_protocol_error() {
        let cases: [&[u8]; 6] = [
            &[0],                                  // truncated length
            &[0, 3, b'a'],                         // truncated text
            &[0, 1, 0xff, 0, 0],                   // key not UTF-8
            &[0, 0, 0, 0],                         // empty key
            &[0, 1, b'a', 0, 0, 0, 1, b'a', 0, 0], // duplicate key
            &[0, 1, b'b', 0, 0, 0, 1, b'a', 0, 0], // not ascending
        ];
        for bytes in cases {
            let err = Metadata::from_bytes(bytes).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::ProtocolError, "{bytes:?}");
        }
    }

    #[test]
    fn empty_bytes_are_empty_metadata() {
        assert!(Metadata::from_bytes(&[]).unwrap().is_empty());
        assert!(Metadata::empty().to_bytes().is_empty());
    }

    proptest! {
        #[test]
        fn built_metadata_round_trips_through_the_wire(
            entries in proptest::collection::vec(("[a-z]{1,8}", "\\PC{0,40}"), 0..40)
        ) {
            let mut b = Metadata::builder();
            for (k, v) in &entries {
                b = b.set(k.clone(), v.clone());
            }
            if let Ok(m) = b.build() {
                prop_assert!(m.size() <= Metadata::MAX_BYTES);
                prop_assert_eq!(Metadata::from_bytes(&m.to_bytes()).unwrap(), m);
            }
        }

        #[test]
        fn decoding_arbitrary_bytes_never_exceeds_the_bound(
            bytes in proptest::collection::vec(any::<u8>(), 0..64)
        ) {
            match Metadata::from_bytes(&bytes) {
                Ok(m) => prop_assert!(m.size() <= Metadata::MAX_BYTES),
                Err(e) => prop_assert_eq!(e.kind(), ErrorKind::ProtocolError),
            }
        }
    }
}
