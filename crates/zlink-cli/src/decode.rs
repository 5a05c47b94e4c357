//! `zlink decode`: one stored record member, field by field, with its value decoded and
//! checked. The input is the member's bytes in hex, or a key whose stored members are read.
//! Pure apart from [`Input`] parsing.

use serde::Serialize;

use crate::audit::HASHTAG;
use crate::family::classify;
use crate::finding::{Mismatch, show_bytes};
use crate::member::decode_member;
use crate::value::check_value;

/// One line of a decoded member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldLine {
    /// The field's byte offset in the member.
    pub offset: usize,
    /// Its length in bytes, header included.
    pub len: usize,
    /// The field.
    pub field: String,
    /// The MessagePack form.
    pub form: String,
    /// Its value as text.
    pub value: String,
}

/// A decoded member.
#[derive(Debug, Clone, Serialize)]
pub struct DecodedMember {
    /// The member's fields.
    pub fields: Vec<FieldLine>,
    /// The record family, if the key names one.
    pub family: Option<String>,
    /// The value's fields (`path`, `value`), when it conforms.
    pub value: Vec<(String, String)>,
    /// Why the member or its value does not conform, if it does not.
    pub problem: Option<String>,
}

/// Decodes `bytes` as a record member, then its value.
pub fn decode(bytes: &[u8]) -> DecodedMember {
    let member = match decode_member(bytes) {
        Ok(m) => m,
        Err(e) => {
            return DecodedMember {
                fields: Vec::new(),
                family: None,
                value: Vec::new(),
                problem: Some(e.to_string()),
            };
        }
    };
    let fields = member
        .fields
        .iter()
        .map(|f| {
            let value = match f.name {
                "tag" => "0x01".to_owned(),
                "array" => "5 elements".to_owned(),
                "originalKey" => show_bytes(&member.original_key),
                "rawBytes" => format!("{} bytes", member.raw_bytes.len()),
                "version" => member.version.to_string(),
                "expiresAtMs" if member.expires_at_ms == 0 => "0 (durable)".to_owned(),
                "expiresAtMs" => member.expires_at_ms.to_string(),
                _ => member.tombstone.to_string(),
            };
            FieldLine {
                offset: f.offset,
                len: f.len,
                field: f.name.to_owned(),
                form: f.form.to_owned(),
                value,
            }
        })
        .collect();
    if member.tombstone {
        return DecodedMember {
            fields,
            family: None,
            value: Vec::new(),
            problem: None,
        };
    }
    let checked = classify(&member.original_key).and_then(|family| {
        check_value(family, &member.original_key, &member.raw_bytes)
            .map_err(|m| m.within("rawBytes", None))
    });
    match checked {
        Ok(d) => DecodedMember {
            fields,
            family: Some(d.family.as_str().to_owned()),
            value: d.fields,
            problem: None,
        },
        Err(m) => DecodedMember {
            fields,
            family: classify(&member.original_key)
                .ok()
                .map(|f| f.as_str().to_owned()),
            value: vec![(
                "rawBytes".into(),
                format!("\"{}\"", show_bytes(&member.raw_bytes)),
            )],
            problem: Some(m.to_string()),
        },
    }
}

/// What `zlink decode` was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Member bytes.
    Hex(Vec<u8>),
    /// A Redis key name.
    RedisKey(Vec<u8>),
}

/// Parses the argument: a Redis key (`{prefix}:{zlink-location-v3}:…`), a logical key with NUL
/// written as `\0` (mapped to its record key under `prefix`), or hex member bytes.
pub fn parse_input(arg: &str, prefix: &str) -> Result<Input, Mismatch> {
    if arg.contains(HASHTAG) {
        return Ok(Input::RedisKey(arg.as_bytes().to_vec()));
    }
    let hex: String = arg.chars().filter(|c| !c.is_whitespace()).collect();
    let hex = hex.strip_prefix("0x").unwrap_or(&hex);
    if !hex.is_empty() && hex.len() % 2 == 0 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| Mismatch::new("input", "hex", arg))?;
        return Ok(Input::Hex(bytes));
    }
    let logical = arg.replace("\\0", "\0");
    if logical.contains('\0') || zlink_codec::Counter::from_logical_key(&logical).is_some() {
        let sha = zlink_codec::hashed_key_part(logical.as_bytes());
        return Ok(Input::RedisKey(
            format!("{prefix}:{HASHTAG}:opaque:{sha}").into_bytes(),
        ));
    }
    Err(Mismatch::new(
        "input",
        "hex member bytes, a Redis key of the store, or a logical key with NUL written as \\0",
        arg,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_input_decodes_the_golden_tombstone() {
        let Input::Hex(bytes) = parse_input(
            "0195b36f776e65722d6c65617365006f776e65722d61a0a2343300c3",
            "p",
        )
        .unwrap() else {
            panic!("hex")
        };
        let d = decode(&bytes);
        assert_eq!(d.problem, None);
        assert_eq!(d.fields.len(), 7);
        assert_eq!(d.fields[4].value, "43");
    }

    #[test]
    fn logical_keys_map_to_their_record_key() {
        let Input::RedisKey(k) = parse_input("mesh-node\\0main\\001020304", "app1").unwrap() else {
            panic!("key")
        };
        assert_eq!(
            String::from_utf8(k).unwrap(),
            "app1:{zlink-location-v3}:opaque:aac806d675ecd83db362198ca6460d35232ef282da1058bf60dc4bf30999fd56"
        );
        assert!(parse_input("not a key", "p").is_err());
    }

    #[test]
    fn a_broken_value_is_decoded_with_its_problem() {
        let m = crate::member::encode_member(b"zlink:v11:object-counter", b"007", 3, 0, false);
        let d = decode(&m);
        assert_eq!(d.family.as_deref(), Some("counter"));
        assert!(
            d.problem
                .as_deref()
                .unwrap_or("")
                .contains("rawBytes.value"),
            "{:?}",
            d.problem
        );
    }
}
