//! A small strict JSON reader and the canonical JSON writer used by the store records.
//!
//! Writer rules (see `docs/formats.md`): no whitespace; members in the record's fixed order;
//! strings escape `"` `\\` and U+0000..U+001F only (`\b \t \n \f \r` short forms, the rest as
//! `\u00xx` with lowercase hex), everything else (including `/` and non-ASCII) written as raw
//! UTF-8; integers as canonical decimal.
//!
//! Reader: RFC 8259 JSON (insignificant whitespace allowed), nesting depth at most 32,
//! numbers kept as text so integer fields can be checked for canonical form.

use std::fmt::Write as _;

use crate::error::CodecError;

/// Maximum nesting depth the reader accepts.
const MAX_DEPTH: usize = 32;

/// A parsed JSON value; objects keep member order and numbers keep their text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }
}

/// Parses one JSON document.
pub(crate) fn parse(bytes: &[u8]) -> Result<Json, CodecError> {
    let mut p = Parser { b: bytes, i: 0 };
    p.ws();
    let v = p.value(0)?;
    p.ws();
    if p.i != p.b.len() {
        return Err(p.err("trailing bytes after the value"));
    }
    Ok(v)
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn err(&self, reason: &'static str) -> CodecError {
        CodecError::Json {
            offset: self.i,
            reason,
        }
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn expect_lit(&mut self, lit: &[u8]) -> Result<(), CodecError> {
        if self.b[self.i..].starts_with(lit) {
            self.i += lit.len();
            Ok(())
        } else {
            Err(self.err("invalid literal"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, CodecError> {
        if depth > MAX_DEPTH {
            return Err(self.err("nesting deeper than 32"));
        }
        match self.peek() {
            None => Err(self.err("unexpected end of input")),
            Some(b'n') => self.expect_lit(b"null").map(|()| Json::Null),
            Some(b't') => self.expect_lit(b"true").map(|()| Json::Bool(true)),
            Some(b'f') => self.expect_lit(b"false").map(|()| Json::Bool(false)),
            Some(b'"') => self.string().map(Json::String),
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(Json::Array(items));
                }
                loop {
                    self.ws();
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Json::Array(items));
                        }
                        _ => return Err(self.err("expected `,` or `]`")),
                    }
                }
            }
            Some(b'{') => {
                self.i += 1;
                let mut members = Vec::new();
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(Json::Object(members));
                }
                loop {
                    self.ws();
                    if self.peek() != Some(b'"') {
                        return Err(self.err("expected a member name"));
                    }
                    let name = self.string()?;
                    self.ws();
                    if self.peek() != Some(b':') {
                        return Err(self.err("expected `:`"));
                    }
                    self.i += 1;
                    self.ws();
                    let v = self.value(depth + 1)?;
                    members.push((name, v));
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Json::Object(members));
                        }
                        _ => return Err(self.err("expected `,` or `}`")),
                    }
                }
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err("unexpected byte")),
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> Result<Json, CodecError> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.err("invalid number")),
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return Err(self.err("invalid number fraction"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err(self.err("invalid number exponent"));
            }
        }
        // The slice holds only ASCII bytes checked above.
        let text = String::from_utf8_lossy(&self.b[start..self.i]).into_owned();
        Ok(Json::Number(text))
    }

    fn hex4(&mut self) -> Result<u32, CodecError> {
        let Some(h) = self.b.get(self.i..self.i + 4) else {
            return Err(self.err("truncated \\u escape"));
        };
        let mut v = 0u32;
        for c in h {
            let d = (*c as char)
                .to_digit(16)
                .ok_or_else(|| self.err("invalid \\u escape"))?;
            v = v * 16 + d;
        }
        self.i += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, CodecError> {
        // Caller checked the opening quote.
        self.i += 1;
        // Fast path: no escape before the closing quote.
        let rest = &self.b[self.i..];
        if let Some(end) = rest
            .iter()
            .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
        {
            if rest[end] == b'"' {
                let s = std::str::from_utf8(&rest[..end])
                    .map_err(|_| self.err("string is not valid UTF-8"))?
                    .to_owned();
                self.i += end + 1;
                return Ok(s);
            }
        }
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.err("unterminated string"));
            };
            match c {
                b'"' => {
                    self.i += 1;
                    break;
                }
                b'\\' => {
                    self.i += 1;
                    let Some(e) = self.peek() else {
                        return Err(self.err("unterminated escape"));
                    };
                    self.i += 1;
                    let ch = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hi = self.hex4()?;
                            let code = if (0xd800..0xdc00).contains(&hi) {
                                if !self.b[self.i..].starts_with(b"\\u") {
                                    return Err(self.err("lone high surrogate"));
                                }
                                self.i += 2;
                                let lo = self.hex4()?;
                                if !(0xdc00..0xe000).contains(&lo) {
                                    return Err(self.err("invalid low surrogate"));
                                }
                                0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00)
                            } else if (0xdc00..0xe000).contains(&hi) {
                                return Err(self.err("lone low surrogate"));
                            } else {
                                hi
                            };
                            char::from_u32(code).ok_or_else(|| self.err("invalid code point"))?
                        }
                        _ => return Err(self.err("invalid escape")),
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
                0x00..=0x1f => return Err(self.err("unescaped control character in string")),
                _ => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
        String::from_utf8(out).map_err(|_| self.err("string is not valid UTF-8"))
    }
}

/// Writes a JSON string with the canonical escaping.
pub(crate) fn write_str(out: &mut String, s: &str) {
    out.push('"');
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let esc: Option<&str> = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\u{8}' => Some("\\b"),
            '\t' => Some("\\t"),
            '\n' => Some("\\n"),
            '\u{c}' => Some("\\f"),
            '\r' => Some("\\r"),
            c if (c as u32) < 0x20 => None,
            _ => continue,
        };
        out.push_str(&s[start..i]);
        match esc {
            Some(e) => out.push_str(e),
            None => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
        }
        start = i + c.len_utf8();
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// A JSON object under construction, written in call order.
pub(crate) struct ObjWriter<'a> {
    out: &'a mut String,
    first: bool,
}

impl<'a> ObjWriter<'a> {
    pub(crate) fn new(out: &'a mut String) -> Self {
        out.push('{');
        Self { out, first: true }
    }

    fn key(&mut self, name: &str) -> &mut String {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        write_str(self.out, name);
        self.out.push(':');
        self.out
    }

    pub(crate) fn str(&mut self, name: &str, v: &str) -> &mut Self {
        let out = self.key(name);
        write_str(out, v);
        self
    }

    pub(crate) fn opt_str(&mut self, name: &str, v: Option<&str>) -> &mut Self {
        match v {
            Some(v) => self.str(name, v),
            None => self.raw(name, "null"),
        }
    }

    /// A decimal integer written as a JSON string.
    pub(crate) fn dec_str(&mut self, name: &str, v: u64) -> &mut Self {
        let out = self.key(name);
        let _ = write!(out, "\"{v}\"");
        self
    }

    pub(crate) fn num(&mut self, name: &str, v: u64) -> &mut Self {
        let out = self.key(name);
        let _ = write!(out, "{v}");
        self
    }

    pub(crate) fn bool(&mut self, name: &str, v: bool) -> &mut Self {
        self.raw(name, if v { "true" } else { "false" })
    }

    pub(crate) fn raw(&mut self, name: &str, raw: &str) -> &mut Self {
        self.key(name).push_str(raw);
        self
    }

    /// Writes a nested value with a closure.
    pub(crate) fn with(&mut self, name: &str, f: impl FnOnce(&mut String)) -> &mut Self {
        f(self.key(name));
        self
    }

    pub(crate) fn end(&mut self) {
        self.out.push('}');
    }
}

/// Writes a JSON array of items with a closure per item.
pub(crate) fn write_array<T>(out: &mut String, items: &[T], mut f: impl FnMut(&mut String, &T)) {
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        f(out, item);
    }
    out.push(']');
}

/// Field-by-field reader of one JSON object: rejects duplicate and unknown members.
pub(crate) struct Fields {
    path: String,
    /// Members not taken yet.
    members: Vec<(String, Json)>,
}

impl Fields {
    pub(crate) fn new(path: &str, v: Json) -> Result<Self, CodecError> {
        let Json::Object(members) = v else {
            return Err(CodecError::invalid_field(
                display_path(path),
                format!("expected an object, found {}", v.type_name()),
            ));
        };
        let duplicate = if members.len() <= 32 {
            members
                .iter()
                .enumerate()
                .find(|(i, (name, _))| members[..*i].iter().any(|(n, _)| n == name))
                .map(|(_, (name, _))| name)
        } else {
            let mut seen = std::collections::HashSet::with_capacity(members.len());
            members
                .iter()
                .map(|(name, _)| name)
                .find(|name| !seen.insert(name.as_str()))
        };
        if let Some(name) = duplicate {
            return Err(CodecError::DuplicateField {
                field: join(path, name),
            });
        }
        Ok(Self {
            path: path.to_owned(),
            members,
        })
    }

    pub(crate) fn path(&self, name: &str) -> String {
        join(&self.path, name)
    }

    pub(crate) fn take(&mut self, name: &str) -> Result<Json, CodecError> {
        match self.members.iter().position(|(k, _)| k == name) {
            Some(i) => Ok(self.members.swap_remove(i).1),
            None => Err(CodecError::MissingField {
                field: join(&self.path, name),
            }),
        }
    }

    pub(crate) fn string(&mut self, name: &str) -> Result<String, CodecError> {
        match self.take(name)? {
            Json::String(s) => Ok(s),
            other => Err(self.wrong(name, "a string", &other)),
        }
    }

    pub(crate) fn opt_string(&mut self, name: &str) -> Result<Option<String>, CodecError> {
        match self.take(name)? {
            Json::String(s) => Ok(Some(s)),
            Json::Null => Ok(None),
            other => Err(self.wrong(name, "a string or null", &other)),
        }
    }

    pub(crate) fn bool(&mut self, name: &str) -> Result<bool, CodecError> {
        match self.take(name)? {
            Json::Bool(b) => Ok(b),
            other => Err(self.wrong(name, "a boolean", &other)),
        }
    }

    /// A JSON number that is a canonical non-negative integer `<= max`.
    pub(crate) fn uint(&mut self, name: &str, max: u64) -> Result<u64, CodecError> {
        match self.take(name)? {
            Json::Number(n) => {
                let v = crate::ids::parse_canonical_u64(&n).ok_or_else(|| {
                    CodecError::invalid_field(
                        self.path(name),
                        format!("{n} is not a canonical integer"),
                    )
                })?;
                if v > max {
                    return Err(CodecError::invalid_field(
                        self.path(name),
                        format!("{v} is above {max}"),
                    ));
                }
                Ok(v)
            }
            other => Err(self.wrong(name, "a number", &other)),
        }
    }

    /// A JSON string holding canonical decimal `<= max`.
    pub(crate) fn dec_str(&mut self, name: &str, max: u64) -> Result<u64, CodecError> {
        let s = self.string(name)?;
        let v = crate::ids::parse_canonical_u64(&s).ok_or_else(|| {
            CodecError::invalid_field(self.path(name), format!("{s:?} is not canonical decimal"))
        })?;
        if v > max {
            return Err(CodecError::invalid_field(
                self.path(name),
                format!("{v} is above {max}"),
            ));
        }
        Ok(v)
    }

    /// A JSON string holding a generation (1..=2^63−1).
    pub(crate) fn generation(&mut self, name: &str) -> Result<crate::Generation, CodecError> {
        let v = self.dec_str(name, crate::ids::MAX_U63)?;
        crate::Generation::new(v)
            .map_err(|_| CodecError::invalid_field(self.path(name), "0 is not a generation"))
    }

    pub(crate) fn object(&mut self, name: &str) -> Result<Fields, CodecError> {
        let path = self.path(name);
        let v = self.take(name)?;
        Fields::new(&path, v)
    }

    pub(crate) fn opt_object(&mut self, name: &str) -> Result<Option<Fields>, CodecError> {
        let path = self.path(name);
        match self.take(name)? {
            Json::Null => Ok(None),
            v => Fields::new(&path, v).map(Some),
        }
    }

    pub(crate) fn array(&mut self, name: &str) -> Result<Vec<Json>, CodecError> {
        match self.take(name)? {
            Json::Array(a) => Ok(a),
            other => Err(self.wrong(name, "an array", &other)),
        }
    }

    /// Members in order, for map-shaped objects.
    pub(crate) fn into_members(self) -> Vec<(String, Json)> {
        self.members
    }

    /// Fails if a member was not taken.
    pub(crate) fn finish(self) -> Result<(), CodecError> {
        if let Some((k, _)) = self.members.first() {
            return Err(CodecError::UnknownField {
                field: join(&self.path, k),
            });
        }
        Ok(())
    }

    fn wrong(&self, name: &str, expected: &str, found: &Json) -> CodecError {
        CodecError::invalid_field(
            self.path(name),
            format!("expected {expected}, found {}", found.type_name()),
        )
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn display_path(path: &str) -> String {
    if path.is_empty() {
        "(record)".to_owned()
    } else {
        path.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_escapes_only_quote_backslash_and_controls() {
        let mut s = String::new();
        write_str(&mut s, "a\"b\\c/d\u{1}\n\té€\u{1f}");
        assert_eq!(s, "\"a\\\"b\\\\c/d\\u0001\\n\\té€\\u001f\"");
    }

    #[test]
    fn reader_round_trips_escapes() {
        let v = parse(br#""\u0041\ud83d\ude00\/\b""#).unwrap();
        assert_eq!(v, Json::String("A😀/\u{8}".to_owned()));
    }

    #[test]
    fn reader_rejects_malformed_documents() {
        for bad in [
            &br#"{"a":1,}"#[..],
            br#"{"a" 1}"#,
            br#"[1 2]"#,
            br#""\ud800""#,
            br#""\udc00""#,
            b"\"a\x01\"",
            b"01",
            b"1.",
            b"-",
            b"{} {}",
            b"nul",
            b"\"\xff\"",
            b"",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn reader_limits_nesting_depth() {
        let ok = format!("{}{}", "[".repeat(33), "]".repeat(33));
        assert!(parse(ok.as_bytes()).is_ok());
        let deep = format!("{}{}", "[".repeat(34), "]".repeat(34));
        assert!(parse(deep.as_bytes()).is_err());
    }

    #[test]
    fn fields_reject_duplicates_and_unknown_members() {
        let v = parse(br#"{"a":1,"a":2}"#).unwrap();
        assert!(matches!(
            Fields::new("", v),
            Err(CodecError::DuplicateField { .. })
        ));
        let v = parse(br#"{"a":1,"b":2}"#).unwrap();
        let mut f = Fields::new("", v).unwrap();
        assert_eq!(f.uint("a", 10).unwrap(), 1);
        assert!(matches!(f.finish(), Err(CodecError::UnknownField { .. })));
    }

    #[test]
    fn integer_fields_must_be_canonical() {
        for bad in [&br#"{"a":1.0}"#[..], br#"{"a":-0}"#, br#"{"a":1e2}"#] {
            let mut f = Fields::new("", parse(bad).unwrap()).unwrap();
            assert!(f.uint("a", 1000).is_err());
        }
        let mut f = Fields::new("", parse(br#"{"a":"007"}"#).unwrap()).unwrap();
        assert!(f.dec_str("a", 1000).is_err());
    }
}
