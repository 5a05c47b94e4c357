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

use zlink_codec::Generation;
use zlink_codec::counter;
use zlink_store_spi::{Condition, Mutation, ReadResult, StoreKey, StoreVersion};

use super::error::LocationError;
use super::keys;

/// The stored sentinel that marks an exhausted counter, `2^63 - 1`.
pub const COUNTER_EXHAUSTED: u64 = counter::EXHAUSTED;

/// The largest value ever issued, `2^63 - 2`.
pub const MAX_ISSUED: u64 = counter::MAX_ISSUED;

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
        keys::counter_key(self.counter())
    }

    /// The codec's name for this counter.
    pub fn counter(self) -> counter::Counter {
        match self {
            GenerationKind::OwnerLease => counter::Counter::OwnerLease,
            GenerationKind::Object => counter::Counter::Object,
            GenerationKind::AuthorityOwner => counter::Counter::AuthorityOwner,
        }
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

            /// As the codec's record field type.
            pub fn to_codec(self) -> Generation {
                // 1..=2^63-2 is inside the codec's 1..=2^63-1.
                Generation::new(self.0).unwrap_or(Generation::MAX)
            }

            /// From a record field; a value outside the issued range is a corrupt record.
            pub(crate) fn from_codec(g: Generation, what: &'static str) -> Result<Self, LocationError> {
                Self::new(g.get()).ok_or(LocationError::CorruptRecord { what })
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

/// One counter row as read: the next value to issue and the row's version (`None` if absent).
/// Parsing and issuance follow the codec crate's canonical counter rules.
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
                next: counter::CounterValue::INITIAL.get(),
                version: None,
            }),
            ReadResult::Found { bytes, version, .. } => {
                let next = counter::parse(bytes)
                    .map_err(|_| LocationError::CorruptRecord {
                        what: "generation counter",
                    })?
                    .get();
                Ok(CounterRow {
                    kind,
                    next,
                    version: Some(version.clone()),
                })
            }
        }
    }

    /// Issues a block of `n >= 1` values: the first one, and the row's new stored value.
    /// `GenerationExhausted` if fewer than `n` remain; nothing is issued then.
    pub(crate) fn issue(&self, n: u64) -> Result<(u64, u64), LocationError> {
        let stored = self.next.to_string();
        let issued = counter::issue_block(Some(stored.as_bytes()), n)
            .map_err(|_| LocationError::GenerationExhausted { kind: self.kind })?;
        Ok((issued.first().get(), issued.stored_next().get()))
    }

    /// The condition that the row is still as read.
    pub(crate) fn condition(&self) -> Condition {
        let key = self.kind.counter_key();
        match &self.version {
            Some(v) => Condition::Version(key, v.clone()),
            None => Condition::Missing(key),
        }
    }

    /// The mutation storing `new_next` (canonical decimal).
    pub(crate) fn put(&self, new_next: u64) -> Mutation {
        Mutation::put(self.kind.counter_key(), new_next.to_string())
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
