//! Generation counters (spec 22 §8, 21 §3.1–§3.2).
//!
//! A counter row stores the *next value to issue* as bare UTF-8 canonical decimal: no sign,
//! no leading zero, no whitespace, no JSON envelope, no recordVersion. An absent row means
//! the next value is 1. The stored range is `1..=2^63−1`; a row storing `2^63−1` is
//! exhausted. Issuing `v` stores `v+1`; a block of `n` issues `v..=v+n−1` and stores `v+n`.
//! So 0 is never issued, and nothing above `2^63−2` is.
//!
//! These functions are pure: they compute what to issue and the bytes to CAS-put (in the
//! same conditional batch as the record the value gates). On
//! [`CodecError::GenerationExhausted`] nothing must be written.
//!
//! ```
//! use zlink_codec::counter::{self, Counter};
//!
//! let issued = counter::issue(None)?; // absent row
//! assert_eq!(issued.first().get(), 1);
//! assert_eq!(issued.stored_bytes(), b"2");
//!
//! let block = counter::issue_block(Some(b"7"), 3)?;
//! assert_eq!(block.values().map(|g| g.get()).collect::<Vec<_>>(), [7, 8, 9]);
//! assert_eq!(block.stored_bytes(), b"10");
//!
//! assert!(counter::parse(b"007").is_err()); // not canonical
//! assert!(counter::issue(Some(b"9223372036854775807")).is_err()); // exhausted
//! assert_eq!(Counter::Object.logical_key(), "zlink:v11:object-counter");
//! # Ok::<(), zlink_codec::CodecError>(())
//! ```

use std::fmt;

use crate::error::CodecError;
use crate::ids::{Generation, MAX_U63};

/// The exhausted sentinel: a row storing this value issues nothing (2^63 − 1).
pub const EXHAUSTED: u64 = MAX_U63;

/// The largest value ever issued (2^63 − 2).
pub const MAX_ISSUED: u64 = MAX_U63 - 1;

/// The three cross-language counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Counter {
    /// `zlink:v11:owner-counter`: issues OwnerLeaseGeneration.
    OwnerLease,
    /// `zlink:v11:object-counter`: issues ObjectGeneration (Store-wide monotonic sequence).
    Object,
    /// `zlink:v11:authority-owner-counter`: issues AuthorityOwnerGeneration.
    AuthorityOwner,
}

impl Counter {
    /// All counters.
    pub const ALL: [Counter; 3] = [
        Counter::OwnerLease,
        Counter::Object,
        Counter::AuthorityOwner,
    ];

    /// The literal logical key.
    pub fn logical_key(self) -> &'static str {
        match self {
            Self::OwnerLease => "zlink:v11:owner-counter",
            Self::Object => "zlink:v11:object-counter",
            Self::AuthorityOwner => "zlink:v11:authority-owner-counter",
        }
    }

    /// The counter a literal logical key names.
    pub fn from_logical_key(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.logical_key() == key)
    }
}

impl fmt::Display for Counter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.logical_key())
    }
}

/// A stored counter value (the next value to issue): `1..=2^63−1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CounterValue(u64);

impl CounterValue {
    /// The value of an absent row.
    pub const INITIAL: CounterValue = CounterValue(1);

    /// Validates `1..=2^63−1`.
    pub fn new(value: u64) -> Result<Self, CodecError> {
        if value == 0 || value > EXHAUSTED {
            return Err(CodecError::invalid_argument(
                "counter value",
                format!("{value} is outside 1..=2^63-1"),
            ));
        }
        Ok(Self(value))
    }

    /// The value.
    pub fn get(self) -> u64 {
        self.0
    }

    /// Whether this row can issue nothing more.
    pub fn is_exhausted(self) -> bool {
        self.0 == EXHAUSTED
    }

    /// The canonical decimal bytes to store.
    pub fn to_bytes(self) -> Vec<u8> {
        self.0.to_string().into_bytes()
    }
}

/// Parses a stored counter row. Every non-canonical form is rejected: empty, sign, leading
/// zero, whitespace, non-digits, JSON, 0, and values above 2^63−1.
pub fn parse(bytes: &[u8]) -> Result<CounterValue, CodecError> {
    let err = |reason| CodecError::NonCanonicalCounter { reason };
    if bytes.is_empty() {
        return Err(err("empty"));
    }
    if !bytes.iter().all(u8::is_ascii_digit) {
        return Err(err("a byte that is not an ASCII digit"));
    }
    if bytes[0] == b'0' {
        return Err(err(if bytes.len() == 1 {
            "0 is never stored"
        } else {
            "leading zero"
        }));
    }
    if bytes.len() > 19 {
        return Err(err("above 2^63-1"));
    }
    let mut v: u64 = 0;
    for b in bytes {
        v = v * 10 + u64::from(b - b'0');
    }
    if v > EXHAUSTED {
        return Err(err("above 2^63-1"));
    }
    Ok(CounterValue(v))
}

/// Formats a stored counter value as canonical decimal bytes.
pub fn format(value: CounterValue) -> Vec<u8> {
    value.to_bytes()
}

/// The next value to issue from a row (`None` = absent row, which means 1).
pub fn next_value(stored: Option<&[u8]>) -> Result<CounterValue, CodecError> {
    stored.map_or(Ok(CounterValue::INITIAL), parse)
}

/// The outcome of an issuance: the values issued and the value to CAS-put.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Issued {
    first: Generation,
    count: u64,
    stored_next: CounterValue,
}

impl Issued {
    /// The first (for a single issuance, the only) issued value.
    pub fn first(&self) -> Generation {
        self.first
    }

    /// The last issued value.
    pub fn last(&self) -> Generation {
        // first + count - 1 <= MAX_ISSUED by construction.
        Generation::new(self.first.get() + self.count - 1).unwrap_or(self.first)
    }

    /// How many values were issued.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Every issued value, in order.
    pub fn values(&self) -> impl Iterator<Item = Generation> + '_ {
        (self.first.get()..self.first.get() + self.count).filter_map(|v| Generation::new(v).ok())
    }

    /// The new stored value (next to issue).
    pub fn stored_next(&self) -> CounterValue {
        self.stored_next
    }

    /// The canonical bytes to CAS-put.
    pub fn stored_bytes(&self) -> Vec<u8> {
        self.stored_next.to_bytes()
    }
}

/// Issues one value from a row (`None` = absent row).
pub fn issue(stored: Option<&[u8]>) -> Result<Issued, CodecError> {
    issue_block(stored, 1)
}

/// Issues a block of `n >= 1` values from a row (`None` = absent row): `v..=v+n−1`, storing
/// `v+n`. If `v+n−1` would pass 2^63−2 nothing is issued: `GenerationExhausted`.
pub fn issue_block(stored: Option<&[u8]>, n: u64) -> Result<Issued, CodecError> {
    let current = next_value(stored)?;
    issue_block_from(current, n)
}

/// Issues a block of `n >= 1` values from an already parsed stored value.
pub fn issue_block_from(current: CounterValue, n: u64) -> Result<Issued, CodecError> {
    if n == 0 {
        return Err(CodecError::invalid_argument("block size", "0"));
    }
    let v = current.get();
    // v + n must stay <= 2^63-1, i.e. the last issued value v+n-1 <= 2^63-2.
    let next = v.checked_add(n).filter(|next| *next <= EXHAUSTED);
    let (Some(next), Ok(first)) = (next, Generation::new(v)) else {
        return Err(CodecError::GenerationExhausted);
    };
    Ok(Issued {
        first,
        count: n,
        stored_next: CounterValue(next),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_row_issues_one_and_stores_two() {
        let i = issue(None).unwrap();
        assert_eq!(i.first().get(), 1);
        assert_eq!(i.stored_bytes(), b"2");
    }

    #[test]
    fn issuing_v_stores_v_plus_one() {
        let i = issue(Some(b"5")).unwrap();
        assert_eq!((i.first().get(), i.stored_bytes()), (5, b"6".to_vec()));
    }

    #[test]
    fn block_of_n_issues_v_to_v_plus_n_minus_one() {
        let i = issue_block(Some(b"10"), 4).unwrap();
        assert_eq!(
            i.values().map(Generation::get).collect::<Vec<_>>(),
            [10, 11, 12, 13]
        );
        assert_eq!(i.last().get(), 13);
        assert_eq!(i.stored_bytes(), b"14");
    }

    #[test]
    fn block_of_zero_is_invalid() {
        assert!(matches!(
            issue_block(None, 0),
            Err(CodecError::InvalidArgument { .. })
        ));
    }

    #[test]
    fn max_issued_is_2_pow_63_minus_2() {
        let row = (EXHAUSTED - 1).to_string();
        let i = issue(Some(row.as_bytes())).unwrap();
        assert_eq!(i.first().get(), MAX_ISSUED);
        assert_eq!(i.stored_next().get(), EXHAUSTED);
        assert!(i.stored_next().is_exhausted());
    }

    #[test]
    fn exhausted_row_is_generation_exhausted() {
        let row = EXHAUSTED.to_string();
        let e = issue(Some(row.as_bytes())).unwrap_err();
        assert!(matches!(e, CodecError::GenerationExhausted));
        assert_eq!(e.kind(), crate::CodecErrorKind::GenerationExhausted);
        // Repeated calls give the same result.
        assert!(matches!(
            issue(Some(row.as_bytes())),
            Err(CodecError::GenerationExhausted)
        ));
    }

    #[test]
    fn block_passing_max_issued_is_exhausted_and_issues_nothing() {
        let row = (EXHAUSTED - 2).to_string();
        assert_eq!(
            issue_block(Some(row.as_bytes()), 2).unwrap().last().get(),
            MAX_ISSUED
        );
        assert!(matches!(
            issue_block(Some(row.as_bytes()), 3),
            Err(CodecError::GenerationExhausted)
        ));
        assert!(matches!(
            issue_block(Some(b"1"), u64::MAX),
            Err(CodecError::GenerationExhausted)
        ));
    }

    #[test]
    fn parse_rejects_every_non_canonical_form() {
        for bad in [
            &b""[..],
            b"0",
            b"00",
            b"01",
            b"+1",
            b"-1",
            b" 1",
            b"1 ",
            b"1\n",
            b"\"1\"",
            b"1.0",
            b"1e3",
            b"0x10",
            b"9223372036854775808",
            b"18446744073709551616",
            b"99999999999999999999999",
            "１".as_bytes(),
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn parse_accepts_the_stored_range_bounds() {
        assert_eq!(parse(b"1").unwrap().get(), 1);
        assert_eq!(parse(b"9223372036854775807").unwrap().get(), EXHAUSTED);
    }

    #[test]
    fn counter_logical_keys_are_the_spec_literals() {
        assert_eq!(Counter::OwnerLease.logical_key(), "zlink:v11:owner-counter");
        assert_eq!(Counter::Object.logical_key(), "zlink:v11:object-counter");
        assert_eq!(
            Counter::AuthorityOwner.logical_key(),
            "zlink:v11:authority-owner-counter"
        );
        assert_eq!(
            Counter::from_logical_key("zlink:v11:object-counter"),
            Some(Counter::Object)
        );
        assert_eq!(Counter::from_logical_key("zlink:v11:counter:object"), None);
    }
}
