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
use zlink_codec::counter::{self, MAX_ISSUED};
use zlink_store_spi::StoreKey;

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
        // A short ASCII literal: always a valid key (`counter_literals_are_valid_store_keys`).
        StoreKey::new(self.counter().logical_key()).unwrap_or_else(|_| unreachable!())
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

            /// The first value ever issued, 1.
            pub const MIN: Self = Self(1);

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

            /// From a record field; `None` outside the issued range (a corrupt record).
            pub fn from_codec(g: Generation) -> Option<Self> {
                Self::new(g.get())
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
        assert!(ObjectGeneration::new(counter::EXHAUSTED).is_none());
        assert!(OwnerLeaseGeneration::new(counter::EXHAUSTED).is_none());
        assert!(AuthorityOwnerGeneration::new(counter::EXHAUSTED).is_none());
    }

    #[test]
    fn counter_literals_are_valid_store_keys() {
        for kind in [
            GenerationKind::OwnerLease,
            GenerationKind::Object,
            GenerationKind::AuthorityOwner,
        ] {
            assert_eq!(kind.counter_key().as_str(), kind.counter().logical_key());
        }
    }
}
