//! The three generation kinds (spec 21 §3, 22 §8) and their Store-wide counters.
//!
//! Each kind is its own type, so the compiler keeps an [`ObjectGeneration`] from ever being
//! passed where an [`AuthorityOwnerGeneration`] or an [`OwnerLeaseGeneration`] is meant, and
//! each is issued only from its own counter key ([`GenerationKind::counter_key`]).
//!
//! Counter rows hold bare canonical decimal: the *next* value to issue. An absent row means 1;
//! the stored range is `1..=2^63-1`; a row holding `2^63-1` is exhausted; issuing `v` stores
//! `v+1`, a block of `n` issues `v..v+n-1` and stores `v+n`. 0 and anything above `2^63-2` are
//! never issued. The counter move always rides in the same conditional batch as the record it
//! gates (the batch builders in this module tree add it there).

use std::fmt;

use zlink_store_spi::{Condition, Mutation, ReadResult, StoreKey, StoreVersion};

use super::error::LocationError;
use super::keys;

/// The stored sentinel that marks an exhausted counter, `2^63 - 1`.
pub const COUNTER_EXHAUSTED: u64 = i64::MAX as u64;

/// The largest value ever issued, `2^63 - 2`.
pub const MAX_ISSUED: u64 = COUNTER_EXHAUSTED - 1;

/// Which generation a counter issues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum GenerationKind {
    /// OwnerLeaseGeneration, from `zlink:v11:owner-counter`.
    OwnerLease,
    /// ObjectGeneration, from `zlink:v11:object-counter` (one Store-wide sequence).
    Object,
    /// AuthorityOwnerGeneration, from `zlink:v11:authority-owner-counter`.
    AuthorityOwner,
}

impl GenerationKind {
    /// The logical counter key (spec 22 §8).
    pub fn counter_key(self) -> StoreKey {
        keys::counter_key(self)
    }
}

impl fmt::Display for GenerationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GenerationKind::OwnerLease => "OwnerLeaseGeneration",
            GenerationKind::Object => "ObjectGeneration",
            GenerationKind::AuthorityOwner => "AuthorityOwnerGeneration",
        })
    }
}

macro_rules! generation {
    ($(#[$meta:meta])* $name:ident, $kind:expr) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(u64);

        impl $name {
            /// The counter this generation comes from.
            pub const KIND: GenerationKind = $kind;

            /// A value in the issued range `1..=2^63-2`, else `None`.
            pub fn new(value: u64) -> Option<Self> {
                (1..=MAX_ISSUED).contains(&value).then_some(Self(value))
            }

            /// The value.
            pub fn get(self) -> u64 {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

generation!(
    /// Which host process run an owner belongs to (spec 21 §3.1). Issued on acquiring owner
    /// eligibility or taking over an expired lease; renew and release keep it.
    OwnerLeaseGeneration,
    GenerationKind::OwnerLease
);
generation!(
    /// Distinguishes an object deleted and re-created under the same id (spec 21 §3.2); kept by
    /// relocation. One Store-wide sequence.
    ObjectGeneration,
    GenerationKind::Object
);
generation!(
    /// The order in which one object incarnation's owner changed (spec 21 §3.2).
    AuthorityOwnerGeneration,
    GenerationKind::AuthorityOwner
);

/// Parses a stored counter value: bare canonical decimal in `1..=2^63-1` (no sign, no leading
/// zero, no whitespace, no JSON).
pub(crate) fn parse_counter(bytes: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(bytes).ok()?;
    if text.is_empty() || text.len() > 19 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if text.starts_with('0') {
        return None;
    }
    let v: u64 = text.parse().ok()?;
    (1..=COUNTER_EXHAUSTED).contains(&v).then_some(v)
}

/// Encodes a stored counter value.
pub(crate) fn encode_counter(next: u64) -> String {
    next.to_string()
}

/// One counter row as read: the next value to issue and the row's version (`None` if absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CounterRow {
    pub(crate) kind: GenerationKind,
    pub(crate) next: u64,
    pub(crate) version: Option<StoreVersion>,
}

impl CounterRow {
    /// From an exact read of the counter key.
    pub(crate) fn from_read(
        kind: GenerationKind,
        read: &ReadResult,
    ) -> Result<Self, LocationError> {
        match read {
            ReadResult::Missing { .. } => Ok(CounterRow {
                kind,
                next: 1,
                version: None,
            }),
            ReadResult::Found { bytes, version, .. } => {
                let next = parse_counter(bytes).ok_or(LocationError::CorruptRecord {
                    what: "generation counter",
                })?;
                Ok(CounterRow {
                    kind,
                    next,
                    version: Some(version.clone()),
                })
            }
        }
    }

    /// How many values remain to issue.
    pub(crate) fn remaining(&self) -> u64 {
        COUNTER_EXHAUSTED - self.next
    }

    /// Issues a block of `n >= 1` values: the first one, and the row's new stored value.
    /// `GenerationExhausted` if fewer than `n` remain; nothing is issued then.
    pub(crate) fn issue(&self, n: u64) -> Result<(u64, u64), LocationError> {
        if n == 0 || self.remaining() < n {
            return Err(LocationError::GenerationExhausted { kind: self.kind });
        }
        Ok((self.next, self.next + n))
    }

    /// The condition that the row is still as read.
    pub(crate) fn condition(&self) -> Condition {
        let key = self.kind.counter_key();
        match &self.version {
            Some(v) => Condition::Version(key, v.clone()),
            None => Condition::Missing(key),
        }
    }

    /// The mutation storing `new_next`.
    pub(crate) fn put(&self, new_next: u64) -> Mutation {
        Mutation::put(self.kind.counter_key(), encode_counter(new_next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_values_are_limited_to_the_issued_range() {
        assert!(ObjectGeneration::new(0).is_none());
        assert_eq!(ObjectGeneration::new(1).map(|g| g.get()), Some(1));
        assert_eq!(
            ObjectGeneration::new(MAX_ISSUED).map(|g| g.get()),
            Some(MAX_ISSUED)
        );
        assert!(ObjectGeneration::new(COUNTER_EXHAUSTED).is_none());
        assert!(OwnerLeaseGeneration::new(COUNTER_EXHAUSTED).is_none());
        assert!(AuthorityOwnerGeneration::new(COUNTER_EXHAUSTED).is_none());
    }

    #[test]
    fn counter_parse_rejects_every_non_canonical_form() {
        for bad in [
            "",
            "0",
            "01",
            "+1",
            "-1",
            " 1",
            "1 ",
            "1.0",
            "\"1\"",
            "9223372036854775808",
            "18446744073709551616",
            "1e3",
        ] {
            assert_eq!(parse_counter(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse_counter(b"1"), Some(1));
        assert_eq!(
            parse_counter(b"9223372036854775807"),
            Some(COUNTER_EXHAUSTED)
        );
    }

    #[test]
    fn issuing_stores_the_next_value_and_stops_at_the_sentinel() {
        let row = |next| CounterRow {
            kind: GenerationKind::Object,
            next,
            version: None,
        };
        assert_eq!(row(1).issue(1).ok(), Some((1, 2)));
        assert_eq!(row(7).issue(3).ok(), Some((7, 10)));
        // The last issuable value is 2^63-2, leaving the sentinel stored.
        assert_eq!(
            row(MAX_ISSUED).issue(1).ok(),
            Some((MAX_ISSUED, COUNTER_EXHAUSTED))
        );
        assert!(matches!(
            row(MAX_ISSUED).issue(2),
            Err(LocationError::GenerationExhausted { .. })
        ));
        assert!(matches!(
            row(COUNTER_EXHAUSTED).issue(1),
            Err(LocationError::GenerationExhausted { .. })
        ));
    }
}
