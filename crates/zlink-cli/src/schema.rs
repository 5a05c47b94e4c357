//! A small strict schema for the runtime-private JSON rows (written by `serde_json` from structs
//! with `deny_unknown_fields`): members in struct order, each of one type, and the canonical
//! bytes a schema and a parsed value give, so a stored row can be compared byte for byte.

use serde_json::Value;

use crate::finding::Mismatch;

/// The type of one member.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// A JSON number: a canonical unsigned integer up to the bound.
    Num(u64),
    /// A JSON string of canonical decimal from the minimum (0 or 1) up to 2^64-1 (`u64` text).
    Dec(u64),
    /// A JSON string the check accepts, with what it should be.
    Text(fn(&str) -> bool, &'static str),
    /// A JSON boolean.
    Bool,
    /// A JSON object with exactly these members, in this order.
    Obj(&'static [(&'static str, Kind)]),
    /// A JSON array of one kind.
    Arr(&'static Kind),
    /// `null` or the kind.
    Null(&'static Kind),
    /// A JSON array of exactly these kinds (a serde tuple).
    Tuple(&'static [Kind]),
}

/// `1` as the only record version.
pub const VERSION: (&str, Kind) = ("recordVersion", Kind::Num(u64::MAX));

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Checks `value` against `kind`; `path` names it in a mismatch.
pub fn check(path: &str, kind: Kind, value: &Value) -> Result<(), Mismatch> {
    let wrong = |want: &str| Mismatch::new(path, want.to_owned(), type_of(value).to_owned());
    match kind {
        Kind::Num(max) => match value {
            Value::Number(n) => match n.as_u64() {
                Some(v) if v <= max && n.to_string() == v.to_string() => Ok(()),
                _ => Err(Mismatch::new(
                    path,
                    format!("a canonical integer in 0..={max}"),
                    n.to_string(),
                )),
            },
            _ => Err(wrong("a number")),
        },
        Kind::Dec(min) => match value {
            Value::String(s) => {
                // `to_string` of the parsed value is the canonical text: no sign, no
                // leading zero, no whitespace.
                let ok = s
                    .parse::<u64>()
                    .is_ok_and(|v| v >= min && v.to_string() == *s);
                if ok {
                    Ok(())
                } else {
                    Err(Mismatch::new(
                        path,
                        format!("a string of canonical decimal, at least {min}"),
                        format!("{s:?}"),
                    ))
                }
            }
            _ => Err(wrong("a string")),
        },
        Kind::Text(valid, what) => match value {
            Value::String(s) if valid(s) => Ok(()),
            Value::String(s) => Err(Mismatch::new(path, what, format!("{s:?}"))),
            _ => Err(wrong("a string")),
        },
        Kind::Bool => match value {
            Value::Bool(_) => Ok(()),
            _ => Err(wrong("a boolean")),
        },
        Kind::Obj(members) => {
            let Value::Object(map) = value else {
                return Err(wrong("an object"));
            };
            for (name, kind) in members {
                let sub = if path.is_empty() {
                    (*name).to_owned()
                } else {
                    format!("{path}.{name}")
                };
                match map.get(*name) {
                    Some(v) => check(&sub, *kind, v)?,
                    None => return Err(Mismatch::new(sub, "the member", "no such member")),
                }
            }
            if let Some(extra) = map.keys().find(|k| !members.iter().any(|(n, _)| n == k)) {
                return Err(Mismatch::new(
                    if path.is_empty() {
                        extra.clone()
                    } else {
                        format!("{path}.{extra}")
                    },
                    "no such member (unknown field)",
                    "an unknown member",
                ));
            }
            Ok(())
        }
        Kind::Arr(inner) => {
            let Value::Array(items) = value else {
                return Err(wrong("an array"));
            };
            for (i, v) in items.iter().enumerate() {
                check(&format!("{path}[{i}]"), *inner, v)?;
            }
            Ok(())
        }
        Kind::Null(inner) => match value {
            Value::Null => Ok(()),
            v => check(path, *inner, v),
        },
        Kind::Tuple(kinds) => {
            let Value::Array(items) = value else {
                return Err(wrong("an array"));
            };
            if items.len() != kinds.len() {
                return Err(Mismatch::new(
                    path,
                    format!("{} elements", kinds.len()),
                    format!("{} elements", items.len()),
                ));
            }
            for (i, (k, v)) in kinds.iter().zip(items).enumerate() {
                check(&format!("{path}[{i}]"), *k, v)?;
            }
            Ok(())
        }
    }
}

/// The canonical bytes of a value that passed [`check`] against `kind`: no whitespace,
/// members in schema order, strings escaped as `serde_json` escapes them.
pub fn canonical(kind: Kind, value: &Value, out: &mut String) {
    match (kind, value) {
        (Kind::Obj(members), Value::Object(map)) => {
            out.push('{');
            for (i, (name, k)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*name).to_owned()).to_string());
                out.push(':');
                if let Some(v) = map.get(*name) {
                    canonical(*k, v, out);
                }
            }
            out.push('}');
        }
        (Kind::Arr(inner), Value::Array(items)) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(*inner, v, out);
            }
            out.push(']');
        }
        (Kind::Tuple(kinds), Value::Array(items)) => {
            out.push('[');
            for (i, (k, v)) in kinds.iter().zip(items).enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(*k, v, out);
            }
            out.push(']');
        }
        (Kind::Null(inner), v) if !v.is_null() => canonical(*inner, v, out),
        (_, v) => out.push_str(&v.to_string()),
    }
}

/// Parses `bytes` as JSON, checks `recordVersion` first (an unknown one is its own reason),
/// then the whole schema, then that the bytes are the canonical ones.
pub fn check_row(bytes: &[u8], schema: Kind) -> Result<Value, Mismatch> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| json_error(bytes, &e))?;
    if let Value::Object(map) = &value {
        match map.get("recordVersion") {
            Some(Value::Number(n)) if n.as_u64() == Some(1) && n.to_string() == "1" => {}
            Some(v) => {
                return Err(Mismatch::new(
                    "recordVersion",
                    "1 (the only version this runtime writes)",
                    format!("unknown version tag {v}"),
                ));
            }
            None => {
                return Err(Mismatch::new(
                    "recordVersion",
                    "the member",
                    "no such member",
                ));
            }
        }
    }
    check("", schema, &value)?;
    let mut want = String::with_capacity(bytes.len());
    canonical(schema, &value, &mut want);
    canonical_bytes(want.as_bytes(), bytes)?;
    Ok(value)
}

/// `found` must be exactly `expected`; otherwise the first differing byte.
pub fn canonical_bytes(expected: &[u8], found: &[u8]) -> Result<(), Mismatch> {
    match crate::finding::first_difference(expected, found) {
        None => Ok(()),
        Some((at, e, f)) => Err(Mismatch::at(
            "bytes",
            at,
            format!("the canonical encoding {e}"),
            f,
        )),
    }
}

/// A `serde_json` parse error as a mismatch with its byte offset.
pub fn json_error(bytes: &[u8], e: &serde_json::Error) -> Mismatch {
    // serde_json counts lines and columns (1-based, in bytes); turn them into an offset.
    let mut offset = 0usize;
    let mut line = 1usize;
    for (i, b) in bytes.iter().enumerate() {
        if line == e.line() {
            offset = i;
            break;
        }
        if *b == b'\n' {
            line += 1;
        }
    }
    let offset = (offset + e.column().saturating_sub(1)).min(bytes.len());
    let what = if std::str::from_utf8(bytes).is_err() {
        "UTF-8 JSON"
    } else {
        "JSON"
    };
    Mismatch::at("bytes", offset, what, format!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROW: Kind = Kind::Obj(&[VERSION, ("objectGeneration", Kind::Dec(1))]);

    #[test]
    fn a_canonical_row_passes_and_each_departure_is_named() {
        assert!(check_row(br#"{"recordVersion":1,"objectGeneration":"12"}"#, ROW).is_ok());
        let field = |b: &[u8]| check_row(b, ROW).map(|_| ()).map_err(|m| m.field);
        assert_eq!(
            field(br#"{"recordVersion":2,"objectGeneration":"12"}"#),
            Err("recordVersion".into())
        );
        assert_eq!(
            field(br#"{"recordVersion":1,"objectGeneration":"012"}"#),
            Err("objectGeneration".into())
        );
        assert_eq!(
            field(br#"{"recordVersion":1,"objectGeneration":"1","x":1}"#),
            Err("x".into())
        );
        assert_eq!(
            field(br#"{"recordVersion":1}"#),
            Err("objectGeneration".into())
        );
        let e = check_row(br#"{"objectGeneration":"12","recordVersion":1}"#, ROW)
            .expect_err("member order");
        assert_eq!((e.field.as_str(), e.offset), ("bytes", Some(2)));
        let e = check_row(b"{\"recordVersion\":1,\"objectGeneration\":\"1\xff\"}", ROW)
            .expect_err("utf8");
        assert_eq!(e.field, "bytes");
        assert!(e.offset.is_some());
    }
}
