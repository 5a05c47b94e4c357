//! OperationId / ReplyRouteId issuing (spec 21 §9.3: non-zero, never reused within a host run).

use std::fmt;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};

pub use zlink_codec::OperationId;

use crate::error::TransportError;

/// The route a request's reply travels back on (spec 21 §9.3). Non-zero; absent for one-way
/// sends.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReplyRouteId(NonZeroU64);

impl ReplyRouteId {
    /// Validates a non-zero value.
    ///
    /// ```
    /// use zlink_transport::ReplyRouteId;
    /// assert!(ReplyRouteId::new(0).is_none());
    /// assert_eq!(ReplyRouteId::new(7).map(|r| r.get()), Some(7));
    /// ```
    pub fn new(value: u64) -> Option<Self> {
        NonZeroU64::new(value).map(Self)
    }

    /// The value.
    pub fn get(self) -> u64 {
        self.0.get()
    }
}

impl fmt::Debug for ReplyRouteId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ReplyRouteId({})", self.0)
    }
}

/// Issues OperationIds and ReplyRouteIds that are non-zero and never repeat within one issuer.
///
/// An OperationId is `salt << 64 | n` where `salt` is a random 64-bit value drawn once per
/// issuer and `n` counts up from 1; a ReplyRouteId is a second counter from 1. Neither counter
/// wraps: past `u64::MAX` issuing fails with [`TransportError::Exhausted`].
#[derive(Debug)]
pub struct IdIssuer {
    salt: u64,
    operations: AtomicU64,
    routes: AtomicU64,
}

impl IdIssuer {
    /// A new issuer with a random run salt.
    pub fn new() -> Self {
        Self::with_salt((uuid::Uuid::new_v4().as_u128() >> 64) as u64)
    }

    /// A new issuer with a given salt (tests, replays).
    pub fn with_salt(salt: u64) -> Self {
        Self {
            salt,
            operations: AtomicU64::new(0),
            routes: AtomicU64::new(0),
        }
    }

    /// The run salt (the high 64 bits of every OperationId this issuer gives).
    pub fn salt(&self) -> u64 {
        self.salt
    }

    /// The next OperationId.
    pub fn next_operation_id(&self) -> Result<OperationId, TransportError> {
        let n = bump(&self.operations).ok_or(TransportError::Exhausted("OperationId"))?;
        OperationId::from_parts(self.salt, n).map_err(|_| TransportError::Exhausted("OperationId"))
    }

    /// The next ReplyRouteId.
    pub fn next_reply_route_id(&self) -> Result<ReplyRouteId, TransportError> {
        bump(&self.routes)
            .and_then(ReplyRouteId::new)
            .ok_or(TransportError::Exhausted("ReplyRouteId"))
    }

    #[cfg(test)]
    pub(crate) fn set_counters(&self, value: u64) {
        self.operations.store(value, Ordering::Relaxed);
        self.routes.store(value, Ordering::Relaxed);
    }
}

impl Default for IdIssuer {
    fn default() -> Self {
        Self::new()
    }
}

/// Increments and returns the new value, or `None` once `u64::MAX` was handed out.
fn bump(counter: &AtomicU64) -> Option<u64> {
    counter
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_add(1))
        .ok()
        .map(|prev| prev + 1)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn operation_and_route_ids_are_non_zero_and_unique_over_a_large_run() {
        let issuer = IdIssuer::new();
        let mut ops = HashSet::new();
        let mut routes = HashSet::new();
        for _ in 0..200_000 {
            let op = issuer.next_operation_id().unwrap();
            let route = issuer.next_reply_route_id().unwrap();
            assert_ne!(op.get(), 0);
            assert_ne!(route.get(), 0);
            assert!(ops.insert(op));
            assert!(routes.insert(route));
        }
    }

    #[test]
    fn ids_are_unique_across_threads() {
        let issuer = std::sync::Arc::new(IdIssuer::new());
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let issuer = issuer.clone();
                std::thread::spawn(move || {
                    (0..20_000)
                        .map(|_| issuer.next_operation_id().unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all = HashSet::new();
        for h in handles {
            for id in h.join().unwrap() {
                assert!(all.insert(id));
            }
        }
        assert_eq!(all.len(), 80_000);
    }

    #[test]
    fn issuing_past_the_last_value_is_exhausted_not_a_wrap() {
        let issuer = IdIssuer::with_salt(0);
        issuer.set_counters(u64::MAX - 1);
        assert_eq!(
            issuer.next_operation_id().unwrap().get(),
            u128::from(u64::MAX)
        );
        assert_eq!(issuer.next_reply_route_id().unwrap().get(), u64::MAX);
        let op = issuer.next_operation_id().unwrap_err();
        assert_eq!(op.kind(), crate::TransportErrorKind::Exhausted);
        let route = issuer.next_reply_route_id().unwrap_err();
        assert_eq!(route.kind(), crate::TransportErrorKind::Exhausted);
    }

    proptest! {
        #[test]
        fn ids_from_any_salt_and_start_are_non_zero_and_strictly_increasing(
            salt in any::<u64>(),
            start in 0u64..u64::MAX - 64,
        ) {
            let issuer = IdIssuer::with_salt(salt);
            issuer.set_counters(start);
            let mut last = 0u128;
            for _ in 0..32 {
                let id = issuer.next_operation_id().unwrap().get();
                prop_assert_ne!(id, 0);
                prop_assert_eq!((id >> 64) as u64, salt);
                prop_assert!(id > last);
                last = id;
                prop_assert_ne!(issuer.next_reply_route_id().unwrap().get(), 0);
            }
        }
    }
}
