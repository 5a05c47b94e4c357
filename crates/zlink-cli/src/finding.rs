//! What the checks report: a [`Mismatch`] (one field against its canonical form) and a
//! [`Finding`] (a nonconforming Redis key and why).

use std::fmt;

/// One departure from the canonical format: the field, what the format wants, what is there,
/// and where (a byte offset into the bytes checked, when it has one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The field (`originalKey`, `value.descriptor.state`, `type`, …).
    pub field: String,
    /// The byte offset in the checked bytes, when the departure has one.
    pub offset: Option<usize>,
    /// What the canonical format wants.
    pub expected: String,
    /// What is stored.
    pub found: String,
}

impl Mismatch {
    /// A departure at byte `offset`.
    pub fn at(
        field: impl Into<String>,
        offset: usize,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) -> Self {
        Mismatch {
            field: field.into(),
            offset: Some(offset),
            expected: expected.into(),
            found: found.into(),
        }
    }

    /// A departure without a byte offset (a whole value, a Redis type, a missing key).
    pub fn new(
        field: impl Into<String>,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) -> Self {
        Mismatch {
            field: field.into(),
            offset: None,
            expected: expected.into(),
            found: found.into(),
        }
    }

    /// The same departure with `prefix.` before the field and `shift` added to the offset (a
    /// value's mismatch inside the member that holds it).
    pub fn within(mut self, prefix: &str, shift: Option<usize>) -> Self {
        self.field = if self.field.is_empty() {
            prefix.to_owned()
        } else {
            format!("{prefix}.{}", self.field)
        };
        self.offset = match (self.offset, shift) {
            (Some(o), Some(s)) => Some(o + s),
            (o, _) => o,
        };
        self
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "field `{}`", self.field)?;
        if let Some(o) = self.offset {
            write!(f, " at byte {o}")?;
        }
        write!(f, ": expected {}, found {}", self.expected, self.found)
    }
}

/// A nonconforming Redis key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The Redis key, as text (non-UTF-8 bytes escaped).
    pub key: String,
    /// What the key is meant to be (`record`, `seq`, `index`, `foreign`, …).
    pub role: String,
    /// The logical key of the record, when known (NUL shown as `\0`).
    pub logical_key: Option<String>,
    /// Why it does not conform.
    pub mismatch: Mismatch,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}]", self.key, self.role)?;
        if let Some(k) = &self.logical_key {
            write!(f, " ({k})")?;
        }
        write!(f, ": {}", self.mismatch)
    }
}

/// Bytes as display text: UTF-8 kept, NUL as `\0`, other control and invalid bytes escaped.
pub fn show_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\0' => out.push_str("\\0"),
                '\\' => out.push_str("\\\\"),
                c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Where `found` first departs from `expected`: the offset and a short window of each.
pub fn first_difference(expected: &[u8], found: &[u8]) -> Option<(usize, String, String)> {
    if expected == found {
        return None;
    }
    let at = expected
        .iter()
        .zip(found)
        .position(|(a, b)| a != b)
        .unwrap_or(expected.len().min(found.len()));
    let window = |b: &[u8]| {
        let end = (at + 24).min(b.len());
        if at >= b.len() {
            "end of bytes".to_owned()
        } else {
            format!("\"{}\"", show_bytes(&b[at..end]))
        }
    };
    Some((at, window(expected), window(found)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_difference_points_at_the_first_unequal_byte() {
        assert_eq!(first_difference(b"abc", b"abc"), None);
        let (at, e, f) = first_difference(b"{\"a\":1}", b"{\"a\": 1}").expect("differs");
        assert_eq!((at, e.as_str(), f.as_str()), (5, "\"1}\"", "\" 1}\""));
        let (at, _, f) = first_difference(b"ab", b"a").expect("differs");
        assert_eq!((at, f.as_str()), (1, "end of bytes"));
    }

    #[test]
    fn show_bytes_escapes_nul_and_invalid_utf8() {
        assert_eq!(show_bytes(b"a\0b\xff"), "a\\0b\\xff");
    }
}
