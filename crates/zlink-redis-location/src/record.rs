//! Decoding of a stored record member (spec 22 §9).
//!
//! A member is the format tag `0x01` followed by the Lua `cmsgpack` encoding of the five-element
//! array `{originalKey, rawBytes, version, expiresAtMs, tombstone}`: three strings of the str
//! family, an unsigned integer (0 = no expiry) and a boolean. The scripts build members inside
//! Redis; this module reads them back, strictly: an unknown tag, another MessagePack type (a
//! `bin` string, a signed or float number, a map), a truncated member or trailing bytes is a
//! [`FormatError`], never a guess.

use bytes::Bytes;
use zlink_store_spi::{MAX_VALUE_LEN, StoreKey, StoreTime, StoreVersion};

/// The only record format this provider reads and writes.
pub(crate) const FORMAT_TAG: u8 = 0x01;

/// Why a stored member could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum FormatError {
    /// The member is empty.
    #[error("empty record member")]
    Empty,
    /// The first byte is not a known format tag.
    #[error("unknown record format tag 0x{0:02x}")]
    UnknownTag(u8),
    /// The body is not the five-element array.
    #[error("record body is not a five-element MessagePack array")]
    NotAnArray,
    /// A field has the wrong MessagePack type.
    #[error("record field `{0}` has the wrong MessagePack type")]
    WrongType(&'static str),
    /// The member ends inside a field.
    #[error("record member is truncated")]
    Truncated,
    /// Bytes follow the array.
    #[error("record member has trailing bytes")]
    TrailingBytes,
    /// A field violates the SPI bounds (key, version or value length, UTF-8).
    #[error("record field `{0}` is out of bounds")]
    OutOfBounds(&'static str),
    /// A reply of Redis did not have the expected shape.
    #[error("unexpected reply shape: {0}")]
    Reply(&'static str),
}

/// One decoded record member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    /// The logical key the record was written under.
    pub(crate) key: StoreKey,
    /// The value bytes, as stored (a slice of the reply buffer, no copy).
    pub(crate) bytes: Bytes,
    /// The provider-issued version.
    pub(crate) version: StoreVersion,
    /// The expiry, `None` when the stored value is 0 (durable).
    pub(crate) expires_at: Option<StoreTime>,
    /// Whether this member records a deletion.
    pub(crate) tombstone: bool,
}

impl Record {
    /// Whether the record holds a value at `now`: not a tombstone and not expired.
    pub(crate) fn alive_at(&self, now: StoreTime) -> bool {
        !self.tombstone && self.expires_at.is_none_or(|e| e > now)
    }
}

struct Reader<'a> {
    buf: &'a Bytes,
    pos: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, FormatError> {
        let b = *self.buf.get(self.pos).ok_or(FormatError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    fn be(&mut self, n: usize) -> Result<u64, FormatError> {
        let end = self.pos.checked_add(n).ok_or(FormatError::Truncated)?;
        let bytes = self.buf.get(self.pos..end).ok_or(FormatError::Truncated)?;
        self.pos = end;
        Ok(bytes.iter().fold(0u64, |acc, &b| acc << 8 | u64::from(b)))
    }

    /// A str-family string (fixstr, str8, str16, str32), never bin.
    fn str(&mut self, field: &'static str) -> Result<Bytes, FormatError> {
        let len = match self.byte()? {
            b @ 0xa0..=0xbf => u64::from(b & 0x1f),
            0xd9 => self.be(1)?,
            0xda => self.be(2)?,
            0xdb => self.be(4)?,
            _ => return Err(FormatError::WrongType(field)),
        };
        let len = usize::try_from(len).map_err(|_| FormatError::Truncated)?;
        let end = self.pos.checked_add(len).ok_or(FormatError::Truncated)?;
        if end > self.buf.len() {
            return Err(FormatError::Truncated);
        }
        let s = self.buf.slice(self.pos..end);
        self.pos = end;
        Ok(s)
    }

    /// An unsigned integer (positive fixint, uint8/16/32/64).
    fn uint(&mut self, field: &'static str) -> Result<u64, FormatError> {
        match self.byte()? {
            b @ 0x00..=0x7f => Ok(u64::from(b)),
            0xcc => self.be(1),
            0xcd => self.be(2),
            0xce => self.be(4),
            0xcf => self.be(8),
            _ => Err(FormatError::WrongType(field)),
        }
    }

    fn bool(&mut self, field: &'static str) -> Result<bool, FormatError> {
        match self.byte()? {
            0xc2 => Ok(false),
            0xc3 => Ok(true),
            _ => Err(FormatError::WrongType(field)),
        }
    }
}

/// Appends `b` as a MessagePack str-family string, the form Lua `cmsgpack` writes: fixstr
/// below 32 bytes, then str8, str16, str32 by length.
fn put_str(out: &mut Vec<u8>, b: &[u8]) {
    let len = b.len();
    if len < 32 {
        // Below 32: fits the five length bits of fixstr.
        out.push(0xa0 | len as u8);
    } else if let Ok(n) = u8::try_from(len) {
        out.push(0xd9);
        out.push(n);
    } else if let Ok(n) = u16::try_from(len) {
        out.push(0xda);
        out.extend_from_slice(&n.to_be_bytes());
    } else {
        // Values are at most 1 MiB and keys 1,024 bytes: always within u32.
        out.push(0xdb);
        out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
    }
    out.extend_from_slice(b);
}

/// The head of a member the write script completes: the tag, the five-element array marker,
/// `originalKey` and `rawBytes` (empty for a tombstone), byte for byte as Lua
/// `cmsgpack.pack` writes them. The script appends the version, the expiry and the tombstone
/// flag, which only it knows.
pub(crate) fn member_head(key: &StoreKey, bytes: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(2 + 5 + key.len() + 5 + bytes.len());
    out.push(FORMAT_TAG);
    out.push(0x95);
    put_str(&mut out, key.as_bytes());
    put_str(&mut out, bytes);
    Bytes::from(out)
}

/// Decodes one stored member (tag included).
pub(crate) fn decode_member(member: &Bytes) -> Result<Record, FormatError> {
    let mut r = Reader {
        buf: member,
        pos: 0,
    };
    let tag = r.byte().map_err(|_| FormatError::Empty)?;
    if tag != FORMAT_TAG {
        return Err(FormatError::UnknownTag(tag));
    }
    // The array family with five elements: Lua cmsgpack always writes fixarray 0x95.
    if r.byte()? != 0x95 {
        return Err(FormatError::NotAnArray);
    }
    let key = r.str("originalKey")?;
    let bytes = r.str("rawBytes")?;
    let version = r.str("version")?;
    let expires_at_ms = r.uint("expiresAtMs")?;
    let tombstone = r.bool("tombstone")?;
    if r.pos != member.len() {
        return Err(FormatError::TrailingBytes);
    }
    let key = StoreKey::from_utf8(&key).map_err(|_| FormatError::OutOfBounds("originalKey"))?;
    let version =
        StoreVersion::from_utf8(&version).map_err(|_| FormatError::OutOfBounds("version"))?;
    if bytes.len() > MAX_VALUE_LEN {
        return Err(FormatError::OutOfBounds("rawBytes"));
    }
    Ok(Record {
        key,
        bytes,
        version,
        expires_at: (expires_at_ms != 0).then(|| StoreTime::from_millis(expires_at_ms)),
        tombstone,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(parts: &[&[u8]]) -> Bytes {
        Bytes::from(parts.concat())
    }

    #[test]
    fn decodes_a_tombstone() {
        // ownerLease-tombstone of the golden fixture.
        let m = member(&[b"\x01\x95\xb3owner-lease\x00owner-a", b"\xa0\xa243\x00\xc3"]);
        let r = decode_member(&m).unwrap();
        assert_eq!(r.key.as_bytes(), b"owner-lease\0owner-a");
        assert!(r.bytes.is_empty());
        assert_eq!(r.version.as_str(), "43");
        assert_eq!(r.expires_at, None);
        assert!(r.tombstone);
        assert!(!r.alive_at(StoreTime::from_millis(0)));
    }

    #[test]
    fn decodes_uint64_expiry() {
        let m = member(&[b"\x01\x95\xa1k\xa1v\xa244\xcf\x00\x00\x01\x8b\xcf\xe5\x68\x00\xc2"]);
        let r = decode_member(&m).unwrap();
        assert_eq!(
            r.expires_at,
            Some(StoreTime::from_millis(1_700_000_000_000))
        );
        assert!(r.alive_at(StoreTime::from_millis(1_699_999_999_999)));
        assert!(!r.alive_at(StoreTime::from_millis(1_700_000_000_000)));
    }

    #[test]
    fn rejects_unknown_tag_and_malformed_members() {
        let good: &[u8] = b"\x95\xa1k\xa1v\xa11\x00\xc2";
        let cases: Vec<(Vec<u8>, FormatError)> = vec![
            (vec![], FormatError::Empty),
            ([b"\x02", good].concat(), FormatError::UnknownTag(2)),
            ([b"\x00", good].concat(), FormatError::UnknownTag(0)),
            (
                b"\x01\x94\xa1k\xa1v\xa11\x00".to_vec(),
                FormatError::NotAnArray,
            ),
            (b"\x01\x85".to_vec(), FormatError::NotAnArray),
            // bin8 instead of str for the value
            (
                b"\x01\x95\xa1k\xc4\x01v\xa11\x00\xc2".to_vec(),
                FormatError::WrongType("rawBytes"),
            ),
            // version as a number
            (
                b"\x01\x95\xa1k\xa1v\x01\x00\xc2".to_vec(),
                FormatError::WrongType("version"),
            ),
            // negative expiry
            (
                b"\x01\x95\xa1k\xa1v\xa11\xff\xc2".to_vec(),
                FormatError::WrongType("expiresAtMs"),
            ),
            // float expiry
            (
                b"\x01\x95\xa1k\xa1v\xa11\xcb\x00\x00\x00\x00\x00\x00\x00\x00\xc2".to_vec(),
                FormatError::WrongType("expiresAtMs"),
            ),
            // tombstone as an integer
            (
                b"\x01\x95\xa1k\xa1v\xa11\x00\x00".to_vec(),
                FormatError::WrongType("tombstone"),
            ),
            (b"\x01\x95\xa1k\xa5v".to_vec(), FormatError::Truncated),
            (
                [b"\x01", good, b"\xc0"].concat(),
                FormatError::TrailingBytes,
            ),
            // empty key
            (
                b"\x01\x95\xa0\xa1v\xa11\x00\xc2".to_vec(),
                FormatError::OutOfBounds("originalKey"),
            ),
            // empty version
            (
                b"\x01\x95\xa1k\xa1v\xa0\x00\xc2".to_vec(),
                FormatError::OutOfBounds("version"),
            ),
            // key not UTF-8
            (
                b"\x01\x95\xa1\xff\xa1v\xa11\x00\xc2".to_vec(),
                FormatError::OutOfBounds("originalKey"),
            ),
        ];
        for (bytes, want) in cases {
            assert_eq!(
                decode_member(&Bytes::from(bytes.clone())),
                Err(want),
                "{bytes:02x?}"
            );
        }
    }

    #[test]
    fn member_heads_use_each_str_length_form_at_its_bounds() {
        let key = StoreKey::new("k").unwrap();
        // fixstr up to 31 bytes, str8 from 32 to 255, str16 to 65,535, str32 beyond.
        for (len, header) in [
            (0usize, vec![0xa0]),
            (31, vec![0xbf]),
            (32, vec![0xd9, 32]),
            (255, vec![0xd9, 255]),
            (256, vec![0xda, 1, 0]),
            (65_535, vec![0xda, 0xff, 0xff]),
            (65_536, vec![0xdb, 0, 1, 0, 0]),
        ] {
            let value = vec![b'v'; len];
            let head = member_head(&key, &value);
            let want = [&[0x01, 0x95, 0xa1, b'k'][..], &header, &value].concat();
            assert_eq!(head.as_ref(), &want[..], "{len}");
            // Completed as the write script does, it decodes to the same key and bytes.
            let member = Bytes::from([&head[..], b"\xa17\x00\xc2"].concat());
            let r = decode_member(&member).unwrap();
            assert_eq!((r.key, r.bytes.len()), (key.clone(), len));
        }
    }

    #[test]
    fn accepts_every_str_length_form() {
        let m = member(&[b"\x01\x95\xd9\x01k\xda\x00\x01v\xdb\x00\x00\x00\x011\xcc\x05\xc2"]);
        let r = decode_member(&m).unwrap();
        assert_eq!(
            (r.key.as_str(), r.bytes.as_ref(), r.version.as_str()),
            ("k", &b"v"[..], "1")
        );
        assert_eq!(r.expires_at, Some(StoreTime::from_millis(5)));
    }
}
