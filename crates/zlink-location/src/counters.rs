//! Generation counter rows as the authority engine and the owner lease read and move them
//! (spec 22 §8): bare canonical decimal holding the *next* value to issue; an absent row means
//! 1; issuing a block of `n` from `v` stores `v+n`; the sentinel `2^63-1` is never issued.

use zlink_codec::counter;
use zlink_store_spi::{Condition, Mutation, ReadResult, StoreVersion};

use super::error::{LocationError, RecordName};
use super::generation::GenerationKind;

/// One counter row as read: the next value to issue and the row's version (`None` if absent).
/// Parsing and issuance follow the codec crate's canonical counter rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CounterRow {
    pub kind: GenerationKind,
    pub next: u64,
    pub version: Option<StoreVersion>,
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
                    .map_err(|_| LocationError::corrupt(RecordName::GenerationCounter))?
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
    use zlink_codec::counter::{EXHAUSTED, MAX_ISSUED};

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
        assert_eq!(row(MAX_ISSUED).issue(1).ok(), Some((MAX_ISSUED, EXHAUSTED)));
        assert!(matches!(
            row(MAX_ISSUED).issue(2),
            Err(LocationError::GenerationExhausted { .. })
        ));
        assert!(matches!(
            row(EXHAUSTED).issue(1),
            Err(LocationError::GenerationExhausted { .. })
        ));
    }
}
