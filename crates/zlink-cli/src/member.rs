//! The stored record member of the official Redis provider (spec 22 §9), decoded strictly and
//! field by field: the format tag `0x01`, then the Lua `cmsgpack` encoding of the array
//! `{originalKey, rawBytes, version, expiresAtMs, tombstone}`.
//!
//! Unlike the provider's own reader this one also insists on the *canonical* bytes Lua
//! `cmsgpack` writes — the shortest string header (fixstr below 32 bytes, then str8, str16,
//! str32) and the shortest unsigned integer — and says where a member departs from them. Pure
//! functions over bytes: no I/O, never a panic on any input.

use crate::finding::Mismatch;

/// The only member format tag the provider writes.
pub const FORMAT_TAG: u8 = 0x01;
/// The largest logical key (the SPI bound).
pub const MAX_KEY_LEN: usize = 1024;
/// The largest record value (the SPI bound).
pub const MAX_VALUE_LEN: usize = 1_048_576;

/// One field of a decoded member, with where it lies in the member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The field's name (`tag`, `array`, `originalKey`, …).
    pub name: &'static str,
    /// Offset of the field's first byte (its MessagePack header) in the member.
    pub offset: usize,
    /// Bytes the field takes, header included.
    pub len: usize,
    /// The MessagePack form it is written in (`fixstr`, `str8`, `uint32`, …).
    pub form: &'static str,
}

/// A decoded member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The logical key the record was written under (UTF-8, checked).
    pub original_key: Vec<u8>,
    /// The record's value bytes.
    pub raw_bytes: Vec<u8>,
    /// The provider-issued version (canonical decimal, checked).
    pub version: u64,
    /// The expiry in Unix epoch milliseconds by the Redis clock; 0 means durable.
    pub expires_at_ms: u64,
    /// Whether the member records a deletion.
    pub tombstone: bool,
    /// The fields in member order.
    pub fields: Vec<Field>,
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

fn err(
    field: &'static str,
    offset: usize,
    expected: impl Into<String>,
    found: impl Into<String>,
) -> Mismatch {
    Mismatch::at(field, offset, expected, found)
}

impl Reader<'_> {
    fn byte(&mut self, field: &'static str, what: &str) -> Result<u8, Mismatch> {
        let b = *self.buf.get(self.pos).ok_or_else(|| {
            err(
                field,
                self.pos,
                what.to_owned(),
                "end of member (truncated)",
            )
        })?;
        self.pos += 1;
        Ok(b)
    }

    fn be(&mut self, field: &'static str, n: usize) -> Result<u64, Mismatch> {
        let start = self.pos;
        let bytes = self
            .buf
            .get(start..start.saturating_add(n))
            .ok_or_else(|| {
                err(
                    field,
                    start,
                    format!("{n} length bytes"),
                    "end of member (truncated)",
                )
            })?;
        self.pos = start + n;
        Ok(bytes.iter().fold(0u64, |acc, &b| acc << 8 | u64::from(b)))
    }

    /// A str-family string in its shortest form.
    fn str(&mut self, field: &'static str) -> Result<(Vec<u8>, Field), Mismatch> {
        let start = self.pos;
        let head = self.byte(field, "a MessagePack str header")?;
        let (len, form, shortest) = match head {
            0xa0..=0xbf => (u64::from(head & 0x1f), "fixstr", 0u64),
            0xd9 => (self.be(field, 1)?, "str8", 32),
            0xda => (self.be(field, 2)?, "str16", 256),
            0xdb => (self.be(field, 4)?, "str32", 65_536),
            other => {
                return Err(err(
                    field,
                    start,
                    "a MessagePack str (0xa0..=0xbf, 0xd9, 0xda, 0xdb)",
                    format!("0x{other:02x} ({})", type_name(other)),
                ));
            }
        };
        if len < shortest {
            return Err(err(
                field,
                start,
                format!(
                    "the shortest str header for {len} bytes ({})",
                    shortest_str(len)
                ),
                form,
            ));
        }
        let body = self.pos;
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        let end = body
            .checked_add(len)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| {
                err(
                    field,
                    body,
                    format!("{len} bytes"),
                    format!("{} bytes (truncated)", self.buf.len() - body),
                )
            })?;
        self.pos = end;
        Ok((
            self.buf[body..end].to_vec(),
            Field {
                name: field,
                offset: start,
                len: end - start,
                form,
            },
        ))
    }

    /// An unsigned integer in its shortest form.
    fn uint(&mut self, field: &'static str) -> Result<(u64, Field), Mismatch> {
        let start = self.pos;
        let head = self.byte(field, "a MessagePack unsigned integer")?;
        let (value, form, shortest) = match head {
            0x00..=0x7f => (u64::from(head), "positive fixint", 0),
            0xcc => (self.be(field, 1)?, "uint8", 128),
            0xcd => (self.be(field, 2)?, "uint16", 256),
            0xce => (self.be(field, 4)?, "uint32", 65_536),
            0xcf => (self.be(field, 8)?, "uint64", 1u64 << 32),
            other => {
                return Err(err(
                    field,
                    start,
                    "a MessagePack unsigned integer (0x00..=0x7f, 0xcc..=0xcf)",
                    format!("0x{other:02x} ({})", type_name(other)),
                ));
            }
        };
        if value < shortest {
            return Err(err(
                field,
                start,
                format!("the shortest form for {value} ({})", shortest_uint(value)),
                form,
            ));
        }
        Ok((
            value,
            Field {
                name: field,
                offset: start,
                len: self.pos - start,
                form,
            },
        ))
    }
}

fn shortest_str(len: u64) -> &'static str {
    match len {
        0..=31 => "fixstr",
        32..=255 => "str8",
        256..=65_535 => "str16",
        _ => "str32",
    }
}

fn shortest_uint(v: u64) -> &'static str {
    match v {
        0..=127 => "positive fixint",
        128..=255 => "uint8",
        256..=65_535 => "uint16",
        65_536..=0xffff_ffff => "uint32",
        _ => "uint64",
    }
}

/// The MessagePack type a header byte starts.
pub fn type_name(b: u8) -> &'static str {
    match b {
        0x00..=0x7f => "positive fixint",
        0x80..=0x8f => "fixmap",
        0x90..=0x9f => "fixarray",
        0xa0..=0xbf => "fixstr",
        0xc0 => "nil",
        0xc1 => "never used",
        0xc2 | 0xc3 => "bool",
        0xc4..=0xc6 => "bin",
        0xc7..=0xc9 => "ext",
        0xca | 0xcb => "float",
        0xcc..=0xcf => "uint",
        0xd0..=0xd3 => "int",
        0xd4..=0xd8 => "fixext",
        0xd9..=0xdb => "str",
        0xdc | 0xdd => "array",
        0xde | 0xdf => "map",
        0xe0..=0xff => "negative fixint",
    }
}

/// Parses canonical decimal (ASCII digits, no sign, no leading zero) in `1..=2^63-1`.
pub fn canonical_decimal(bytes: &[u8]) -> Option<u64> {
    let first = *bytes.first()?;
    if first == b'0' || !bytes.iter().all(u8::is_ascii_digit) || bytes.len() > 19 {
        return None;
    }
    let text = std::str::from_utf8(bytes).ok()?;
    text.parse::<u64>().ok().filter(|&v| v <= i64::MAX as u64)
}

/// Decodes one stored member strictly (see the module docs).
pub fn decode_member(bytes: &[u8]) -> Result<Member, Mismatch> {
    let mut r = Reader { buf: bytes, pos: 0 };
    let mut fields = Vec::with_capacity(7);
    let tag = r.byte("tag", "the format tag 0x01")?;
    if tag != FORMAT_TAG {
        return Err(err(
            "tag",
            0,
            "format tag 0x01",
            format!("unknown version tag 0x{tag:02x}"),
        ));
    }
    fields.push(Field {
        name: "tag",
        offset: 0,
        len: 1,
        form: "format tag",
    });
    let array = r.byte("array", "fixarray(5) 0x95")?;
    if array != 0x95 {
        return Err(err(
            "array",
            1,
            "fixarray(5) 0x95",
            format!("0x{array:02x} ({})", type_name(array)),
        ));
    }
    fields.push(Field {
        name: "array",
        offset: 1,
        len: 1,
        form: "fixarray(5)",
    });
    let (original_key, f) = r.str("originalKey")?;
    let key_field = f.clone();
    fields.push(f);
    let (raw_bytes, f) = r.str("rawBytes")?;
    let raw_field = f.clone();
    fields.push(f);
    let (version, f) = r.str("version")?;
    let version_field = f.clone();
    fields.push(f);
    let (expires_at_ms, f) = r.uint("expiresAtMs")?;
    fields.push(f);
    let start = r.pos;
    let tombstone = match r.byte("tombstone", "a MessagePack bool (0xc2, 0xc3)")? {
        0xc2 => false,
        0xc3 => true,
        other => {
            return Err(err(
                "tombstone",
                start,
                "a MessagePack bool (0xc2, 0xc3)",
                format!("0x{other:02x} ({})", type_name(other)),
            ));
        }
    };
    fields.push(Field {
        name: "tombstone",
        offset: start,
        len: 1,
        form: "bool",
    });
    if r.pos != bytes.len() {
        return Err(err(
            "member",
            r.pos,
            "the end of the member",
            format!("{} trailing bytes", bytes.len() - r.pos),
        ));
    }
    let body = key_field.offset + key_field.len - original_key.len();
    if original_key.is_empty() || original_key.len() > MAX_KEY_LEN {
        return Err(err(
            "originalKey",
            body,
            format!("1..={MAX_KEY_LEN} bytes"),
            format!("{} bytes", original_key.len()),
        ));
    }
    if let Err(e) = std::str::from_utf8(&original_key) {
        return Err(err(
            "originalKey",
            body + e.valid_up_to(),
            "UTF-8",
            format!(
                "a byte sequence that is not UTF-8 at key byte {}",
                e.valid_up_to()
            ),
        ));
    }
    let version_body = version_field.offset + version_field.len - version.len();
    let version = canonical_decimal(&version).ok_or_else(|| {
        err(
            "version",
            version_body,
            "canonical decimal in 1..=2^63-1",
            format!("{:?}", String::from_utf8_lossy(&version)),
        )
    })?;
    if raw_bytes.len() > MAX_VALUE_LEN {
        return Err(err(
            "rawBytes",
            raw_field.offset,
            format!("at most {MAX_VALUE_LEN} bytes"),
            format!("{} bytes", raw_bytes.len()),
        ));
    }
    if tombstone && !raw_bytes.is_empty() {
        return Err(err(
            "rawBytes",
            raw_field.offset,
            "empty bytes in a tombstone",
            format!("{} bytes", raw_bytes.len()),
        ));
    }
    Ok(Member {
        original_key,
        raw_bytes,
        version,
        expires_at_ms,
        tombstone,
        fields,
    })
}

/// Encodes a member as the provider (Lua `cmsgpack`) writes it; the reference the tests and
/// the broken-record corpus build on.
pub fn encode_member(
    key: &[u8],
    value: &[u8],
    version: u64,
    expires_at_ms: u64,
    tombstone: bool,
) -> Vec<u8> {
    fn put_str(out: &mut Vec<u8>, b: &[u8]) {
        let len = b.len();
        if len < 32 {
            out.push(0xa0 | len as u8);
        } else if let Ok(n) = u8::try_from(len) {
            out.extend_from_slice(&[0xd9, n]);
        } else if let Ok(n) = u16::try_from(len) {
            out.push(0xda);
            out.extend_from_slice(&n.to_be_bytes());
        } else {
            out.push(0xdb);
            out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
        }
        out.extend_from_slice(b);
    }
    let mut out = vec![FORMAT_TAG, 0x95];
    put_str(&mut out, key);
    put_str(&mut out, value);
    put_str(&mut out, version.to_string().as_bytes());
    let v = expires_at_ms;
    if v < 128 {
        out.push(v as u8);
    } else if let Ok(n) = u8::try_from(v) {
        out.extend_from_slice(&[0xcc, n]);
    } else if let Ok(n) = u16::try_from(v) {
        out.push(0xcd);
        out.extend_from_slice(&n.to_be_bytes());
    } else if let Ok(n) = u32::try_from(v) {
        out.push(0xce);
        out.extend_from_slice(&n.to_be_bytes());
    } else {
        out.push(0xcf);
        out.extend_from_slice(&v.to_be_bytes());
    }
    out.push(if tombstone { 0xc3 } else { 0xc2 });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_golden_tombstone_member_decodes_field_by_field() {
        let m = b"\x01\x95\xb3owner-lease\x00owner-a\xa0\xa243\x00\xc3";
        let d = decode_member(m).expect("decodes");
        assert_eq!(d.original_key, b"owner-lease\0owner-a");
        assert_eq!((d.version, d.expires_at_ms, d.tombstone), (43, 0, true));
        assert_eq!(encode_member(&d.original_key, &[], 43, 0, true), m.to_vec());
        let names: Vec<_> = d.fields.iter().map(|f| f.name).collect();
        assert_eq!(
            names,
            [
                "tag",
                "array",
                "originalKey",
                "rawBytes",
                "version",
                "expiresAtMs",
                "tombstone"
            ]
        );
    }

    #[test]
    fn encode_uses_the_shortest_forms_at_each_threshold() {
        for v in [
            0u64,
            127,
            128,
            255,
            256,
            65_535,
            65_536,
            u32::MAX as u64,
            1 << 32,
        ] {
            let m = encode_member(b"k", b"v", 7, v, false);
            assert_eq!(
                decode_member(&m).expect("canonical").expires_at_ms,
                v,
                "{v}"
            );
        }
        for len in [31usize, 32, 255, 256, 65_535, 65_536] {
            let value = vec![b'x'; len];
            let m = encode_member(b"k", &value, 7, 0, false);
            assert_eq!(decode_member(&m).expect("canonical").raw_bytes.len(), len);
        }
    }

    #[test]
    fn non_shortest_forms_are_reported_with_their_offset() {
        // "k" as str8 instead of fixstr.
        let m = b"\x01\x95\xd9\x01k\xa1v\xa11\x00\xc2";
        let e = decode_member(m).expect_err("not canonical");
        assert_eq!((e.field.as_str(), e.offset), ("originalKey", Some(2)));
        assert!(e.expected.contains("fixstr"), "{e:?}");
        // expiry 5 as uint8.
        let m = b"\x01\x95\xa1k\xa1v\xa11\xcc\x05\xc2";
        let e = decode_member(m).expect_err("not canonical");
        assert_eq!((e.field.as_str(), e.offset), ("expiresAtMs", Some(8)));
    }

    #[test]
    fn malformed_members_name_the_field_and_reason() {
        let cases: Vec<(&[u8], &str, &str)> = vec![
            (b"", "tag", "truncated"),
            (b"\x02\x95", "tag", "unknown version tag 0x02"),
            (b"\x01\x94", "array", "fixarray"),
            (b"\x01\x95\xa1k\xc4\x01v\xa11\x00\xc2", "rawBytes", "bin"),
            (b"\x01\x95\xa1k\xa5v", "rawBytes", "truncated"),
            (b"\x01\x95\xa1k\xa1v\xa11\x00\xc2\xc0", "member", "trailing"),
            (
                b"\x01\x95\xa1\xff\xa1v\xa11\x00\xc2",
                "originalKey",
                "not UTF-8",
            ),
            (b"\x01\x95\xa1k\xa1v\xa201\x00\xc2", "version", "01"),
            (b"\x01\x95\xa1k\xa1v\xa11\x00\xc3", "rawBytes", "tombstone"),
            (
                b"\x01\x95\xa1k\xa1v\xa11\xff\xc2",
                "expiresAtMs",
                "negative fixint",
            ),
            (
                b"\x01\x95\xa1k\xa1v\xa11\x00\x00",
                "tombstone",
                "positive fixint",
            ),
        ];
        for (bytes, field, reason) in cases {
            let e = decode_member(bytes).expect_err("malformed");
            assert_eq!(e.field, field, "{bytes:02x?}: {e:?}");
            let text = format!("{} {}", e.expected, e.found);
            assert!(text.contains(reason), "{bytes:02x?}: {e:?}");
        }
    }

    #[test]
    fn key_and_value_lengths_at_their_bounds_and_one_past() {
        let key = vec![b'k'; MAX_KEY_LEN];
        assert!(decode_member(&encode_member(&key, b"v", 1, 0, false)).is_ok());
        let long = vec![b'k'; MAX_KEY_LEN + 1];
        let e = decode_member(&encode_member(&long, b"v", 1, 0, false)).expect_err("too long");
        assert_eq!(e.field, "originalKey");
        let value = vec![b'v'; MAX_VALUE_LEN];
        assert!(decode_member(&encode_member(b"k", &value, 1, 0, false)).is_ok());
        let value = vec![b'v'; MAX_VALUE_LEN + 1];
        let e = decode_member(&encode_member(b"k", &value, 1, 0, false)).expect_err("too large");
        assert_eq!(e.field, "rawBytes");
    }

    #[test]
    fn canonical_decimal_at_its_bounds() {
        assert_eq!(canonical_decimal(b"1"), Some(1));
        assert_eq!(
            canonical_decimal(b"9223372036854775807"),
            Some(i64::MAX as u64)
        );
        assert_eq!(canonical_decimal(b"9223372036854775808"), None);
        for bad in [&b""[..], b"0", b"01", b"+1", b" 1", b"1.0"] {
            assert_eq!(canonical_decimal(bad), None, "{bad:?}");
        }
    }
}
