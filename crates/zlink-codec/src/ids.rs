//! Validated identifiers and numbers shared by records, keys and envelopes.

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

use crate::error::CodecError;

/// The largest value of a 63-bit unsigned quantity: 2^63 − 1.
pub const MAX_U63: u64 = i64::MAX as u64;

fn check_name(what: &'static str, value: &str) -> Result<(), CodecError> {
    if value.is_empty() {
        return Err(CodecError::invalid_argument(what, "empty"));
    }
    if value.len() > 255 {
        return Err(CodecError::invalid_argument(
            what,
            format!("{} bytes, more than 255", value.len()),
        ));
    }
    if value.as_bytes().contains(&0) {
        return Err(CodecError::invalid_argument(
            what,
            "contains a NUL (\\0) byte",
        ));
    }
    Ok(())
}

macro_rules! name_type {
    ($(#[$meta:meta])* $name:ident, $what:literal) => {
        $(#[$meta])*
        ///
        /// UTF-8, 1..=255 bytes, without a NUL (`\0`) byte; compared byte for byte
        /// (no normalization, no case folding). Shared text: a clone does not allocate.
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(Arc<str>);

        impl $name {
            /// Largest length in bytes.
            pub const MAX_LEN: usize = 255;

            /// Validates and wraps a value.
            pub fn new(value: impl Into<String>) -> Result<Self, CodecError> {
                let value = value.into();
                check_name($what, &value)?;
                Ok(Self(Arc::from(value)))
            }

            /// The text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// Unwraps the text.
            pub fn into_string(self) -> String {
                self.0.to_string()
            }
        }

        impl TryFrom<String> for $name {
            type Error = CodecError;
            fn try_from(value: String) -> Result<Self, CodecError> {
                Self::new(value)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = CodecError;
            fn try_from(value: &str) -> Result<Self, CodecError> {
                Self::new(value)
            }
        }

        impl std::str::FromStr for $name {
            type Err = CodecError;
            fn from_str(value: &str) -> Result<Self, CodecError> {
                Self::new(value)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }
    };
}

name_type!(
    /// A RouteMesh group name (`MeshName`).
    MeshName,
    "MeshName"
);
name_type!(
    /// A ClientServer or fanout channel name (`ChannelName`).
    ChannelName,
    "ChannelName"
);
name_type!(
    /// A host-run owner id (`OwnerId`).
    OwnerId,
    "OwnerId"
);
name_type!(
    /// A global ActorId or SpotId (spec 21 §3.3).
    ObjectId,
    "ObjectId"
);
name_type!(
    /// A stable type: the language-neutral name a factory is registered under (spec 06 §15).
    StableType,
    "StableType"
);

/// A RoutingId: 1..=255 raw bytes, written as lowercase hex in keys and records. Shared
/// bytes: a clone does not allocate (it is on every message's path).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RoutingId(Arc<[u8]>);

impl RoutingId {
    /// Largest length in bytes.
    pub const MAX_LEN: usize = 255;

    /// Validates and wraps raw bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<Self, CodecError> {
        let bytes = bytes.into();
        if bytes.is_empty() || bytes.len() > Self::MAX_LEN {
            return Err(CodecError::invalid_argument(
                "RoutingId",
                format!("{} bytes, outside 1..=255", bytes.len()),
            ));
        }
        Ok(Self(Arc::from(bytes)))
    }

    /// Validates and copies raw bytes (one allocation, the shared buffer itself).
    pub fn from_slice(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.is_empty() || bytes.len() > Self::MAX_LEN {
            return Err(CodecError::invalid_argument(
                "RoutingId",
                format!("{} bytes, outside 1..=255", bytes.len()),
            ));
        }
        Ok(Self(Arc::from(bytes)))
    }

    /// Parses the lowercase hex form (uppercase digits are rejected).
    pub fn from_hex(hex: &str) -> Result<Self, CodecError> {
        let bytes = decode_lower_hex(hex)
            .ok_or_else(|| CodecError::invalid_argument("RoutingId", "not lowercase hex"))?;
        Self::new(bytes)
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The lowercase hex form.
    pub fn to_hex(&self) -> String {
        lower_hex(&self.0)
    }
}

impl fmt::Debug for RoutingId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RoutingId({})", self.to_hex())
    }
}

impl fmt::Display for RoutingId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// A generation or revision: 1..=2^63−1, written as a canonical decimal JSON string.
///
/// Used for LeaseGeneration, ObjectGeneration, AuthorityOwnerGeneration, lifecycle
/// generations and descriptor revisions.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Generation(u64);

impl Generation {
    /// The smallest generation.
    pub const MIN: Generation = Generation(1);
    /// The largest representable generation (2^63 − 1).
    pub const MAX: Generation = Generation(MAX_U63);

    /// Validates `1..=2^63−1`.
    pub fn new(value: u64) -> Result<Self, CodecError> {
        if value == 0 || value > MAX_U63 {
            return Err(CodecError::invalid_argument(
                "generation",
                format!("{value} is outside 1..=2^63-1"),
            ));
        }
        Ok(Self(value))
    }

    /// The value.
    pub fn get(self) -> u64 {
        self.0
    }

    /// The next generation, or `None` past 2^63 − 1.
    pub fn checked_next(self) -> Option<Self> {
        Self::new(self.0 + 1).ok()
    }

    /// Parses canonical decimal (no sign, no leading zero, no whitespace).
    pub fn parse(text: &str) -> Result<Self, CodecError> {
        let v = parse_canonical_u64(text)
            .ok_or_else(|| CodecError::invalid_argument("generation", "not canonical decimal"))?;
        Self::new(v)
    }
}

impl TryFrom<u64> for Generation {
    type Error = CodecError;
    fn try_from(value: u64) -> Result<Self, CodecError> {
        Self::new(value)
    }
}

impl From<Generation> for u64 {
    fn from(g: Generation) -> u64 {
        g.0
    }
}

impl fmt::Debug for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Generation({})", self.0)
    }
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Parses canonical unsigned decimal: `0` or `[1-9][0-9]*`, fitting u64.
pub(crate) fn parse_canonical_u64(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    if b.is_empty() || b.len() > 20 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if b[0] == b'0' && b.len() > 1 {
        return None;
    }
    text.parse::<u64>().ok()
}

/// Lowercase hex of bytes.
pub fn lower_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0x0f)] as char);
    }
    out
}

/// Decodes lowercase hex; `None` on odd length, uppercase or non-hex characters.
pub(crate) fn decode_lower_hex(hex: &str) -> Option<Vec<u8>> {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    let b = hex.as_bytes();
    if b.len() % 2 != 0 {
        return None;
    }
    b.chunks_exact(2)
        .map(|p| Some((nibble(p[0])? << 4) | nibble(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_accept_255_bytes_and_reject_256() {
        assert!(ObjectId::new("a".repeat(255)).is_ok());
        assert!(ObjectId::new("a".repeat(256)).is_err());
        assert!(MeshName::new("é".repeat(127)).is_ok()); // 254 bytes
        assert!(MeshName::new("é".repeat(128)).is_err()); // 256 bytes
    }

    #[test]
    fn names_reject_empty_and_nul() {
        assert!(OwnerId::new("").is_err());
        assert!(ChannelName::new("a\0b").is_err());
        assert!(StableType::new("\0").is_err());
    }

    #[test]
    fn routing_id_is_1_to_255_bytes_lowercase_hex() {
        assert!(RoutingId::new(vec![]).is_err());
        assert!(RoutingId::new(vec![7; 255]).is_ok());
        assert!(RoutingId::new(vec![7; 256]).is_err());
        assert_eq!(
            RoutingId::from_hex("0aff").unwrap().as_bytes(),
            &[0x0a, 0xff]
        );
        assert!(RoutingId::from_hex("0AFF").is_err());
        assert!(RoutingId::from_hex("0af").is_err());
        assert!(RoutingId::from_hex("").is_err());
    }

    #[test]
    fn a_cloned_routing_id_shares_its_bytes() {
        let a = RoutingId::new(vec![1, 2, 3]).unwrap();
        let b = a.clone();
        assert_eq!(a, b);
        assert_eq!(a.as_bytes().as_ptr(), b.as_bytes().as_ptr());
        assert_eq!(RoutingId::from_slice(&[1, 2, 3]).unwrap(), a);
        assert!(RoutingId::from_slice(&[]).is_err());
        assert!(RoutingId::from_slice(&[7; 255]).is_ok());
        assert!(RoutingId::from_slice(&[7; 256]).is_err());
    }

    #[test]
    fn a_cloned_name_shares_its_text() {
        let a = MeshName::new("demo").unwrap();
        let b = a.clone();
        assert_eq!(a.as_str().as_ptr(), b.as_str().as_ptr());
        assert_eq!(b.into_string(), "demo");
    }

    #[test]
    fn generation_range_is_1_to_2_pow_63_minus_1() {
        assert!(Generation::new(0).is_err());
        assert!(Generation::new(1).is_ok());
        assert!(Generation::new(MAX_U63).is_ok());
        assert!(Generation::new(MAX_U63 + 1).is_err());
        assert_eq!(Generation::MAX.checked_next(), None);
    }

    #[test]
    fn generation_parse_is_canonical_only() {
        assert_eq!(Generation::parse("42").unwrap().get(), 42);
        for bad in [
            "",
            "0",
            "042",
            "+1",
            "-1",
            " 1",
            "1 ",
            "1.0",
            "9223372036854775808",
        ] {
            assert!(Generation::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            Generation::parse("9223372036854775807").unwrap(),
            Generation::MAX
        );
    }
}
