//! [`Durability`]: what an acknowledged write means (the master alone, or also `N` replicas
//! through `WAIT`), and [`NotReplicated`], the error source of a write the replicas did not
//! confirm in time.

use std::time::Duration;

use fred::types::{ClusterHash, CustomCommand, Value};
use zlink_store_spi::{FailureKind, StoreError};

use crate::layout::HASHTAG;

/// When the store acknowledges a write (a conditional batch that applied).
///
/// Redis replicates asynchronously: a write the master applied may not have reached any
/// replica when its reply arrives. [`Replicas`](Self::Replicas) sends `WAIT` on the write's
/// own connection right behind it, so an acknowledgement means "applied on the master and
/// received by at least `replicas` replicas". Neither setting changes what a failover
/// promotes: see the crate README ("Durability") for what each guarantees on a single Redis,
/// under Sentinel, on Redis Cluster and on managed Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// Acknowledged once the master applied it (the default; no `WAIT`).
    #[default]
    Master,
    /// Acknowledged once the master applied it and at least `replicas` replicas confirmed
    /// receiving it within `timeout`. A write that applied but was not confirmed in time fails
    /// with a [`StoreError::Failure`] of kind [`FailureKind::Unavailable`] whose source is a
    /// [`NotReplicated`]: the write is on the master and may or may not survive a failover
    /// (the outcome is unknown). `replicas` is at least 1; `timeout` at least 1 ms and at most
    /// half the operation timeout (checked by
    /// [`RedisLocationOptions::with_durability`](crate::RedisLocationOptions::with_durability)).
    Replicas {
        /// How many replicas must confirm.
        replicas: u32,
        /// How long the master waits for them (whole milliseconds).
        timeout: Duration,
    },
}

/// The smallest `WAIT` timeout (its unit).
pub(crate) const MIN_WAIT: Duration = Duration::from_millis(1);

/// Why a durability setting was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DurabilityBound {
    /// `replicas` is zero.
    NoReplica,
    /// `timeout` is below 1 ms or above half the operation timeout.
    Timeout { max: Duration },
}

impl Durability {
    /// Checks the bounds against `operation_timeout`.
    pub(crate) fn check(self, operation_timeout: Duration) -> Result<(), DurabilityBound> {
        match self {
            Durability::Master => Ok(()),
            Durability::Replicas { replicas: 0, .. } => Err(DurabilityBound::NoReplica),
            Durability::Replicas { timeout, .. } => {
                let max = operation_timeout / 2;
                if timeout < MIN_WAIT || timeout > max {
                    Err(DurabilityBound::Timeout { max })
                } else {
                    Ok(())
                }
            }
        }
    }
}

/// A write the master applied that fewer replicas than required confirmed within the
/// durability timeout: the source of the [`StoreError::Failure`] (kind
/// [`FailureKind::Unavailable`]) the write fails with. Whether the write survives a failover
/// is unknown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the write was applied on the master but {confirmed} of {required} replicas confirmed it within {timeout:?}"
)]
#[non_exhaustive]
pub struct NotReplicated {
    /// Replicas that confirmed (the `WAIT` reply; 0 when `WAIT` itself failed).
    pub confirmed: u32,
    /// Replicas required.
    pub required: u32,
    /// The durability timeout.
    pub timeout: Duration,
}

/// `WAIT replicas timeout-ms`, routed on Redis Cluster to the node of the store's hash slot
/// (every key of the store carries [`HASHTAG`]), which is the master that took the write.
pub(crate) fn wait_command(replicas: u32, timeout: Duration) -> (CustomCommand, Vec<Value>) {
    let slot = fred::util::redis_keyslot(HASHTAG.as_bytes());
    // Not flagged blocking: the server holds the connection's later commands behind it anyway,
    // and fred's blocked-connection handling (unblocking on timeout) must not touch it.
    let cmd = CustomCommand::new_static("WAIT", ClusterHash::Custom(slot), false);
    let ms = i64::try_from(timeout.as_millis())
        .unwrap_or(i64::MAX)
        .max(1);
    (
        cmd,
        vec![Value::Integer(i64::from(replicas)), Value::Integer(ms)],
    )
}

/// The error of an applied write that `WAIT` confirmed on `confirmed` replicas only.
pub(crate) fn not_replicated(confirmed: u32, required: u32, timeout: Duration) -> StoreError {
    StoreError::failure(
        FailureKind::Unavailable,
        NotReplicated {
            confirmed,
            required,
            timeout,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const OP: Duration = Duration::from_secs(5);

    #[test]
    fn master_only_is_the_default_and_always_valid() {
        assert_eq!(Durability::default(), Durability::Master);
        assert_eq!(Durability::Master.check(Duration::from_millis(1)), Ok(()));
    }

    #[test]
    fn replicas_needs_at_least_one_replica() {
        let d = |replicas| Durability::Replicas {
            replicas,
            timeout: Duration::from_millis(100),
        };
        assert_eq!(d(1).check(OP), Ok(()));
        assert_eq!(d(0).check(OP), Err(DurabilityBound::NoReplica));
    }

    #[test]
    fn the_timeout_is_at_least_a_millisecond_and_at_most_half_the_operation_timeout() {
        let d = |timeout| Durability::Replicas {
            replicas: 1,
            timeout,
        };
        let max = DurabilityBound::Timeout { max: OP / 2 };
        assert_eq!(d(MIN_WAIT).check(OP), Ok(()));
        assert_eq!(d(MIN_WAIT - Duration::from_nanos(1)).check(OP), Err(max));
        assert_eq!(d(Duration::ZERO).check(OP), Err(max));
        assert_eq!(d(OP / 2).check(OP), Ok(()));
        assert_eq!(d(OP / 2 + Duration::from_nanos(1)).check(OP), Err(max));
    }

    #[test]
    fn wait_goes_to_the_stores_slot_in_whole_milliseconds() {
        let (cmd, args) = wait_command(2, Duration::from_micros(1_500));
        assert_eq!(&*cmd.cmd, "WAIT");
        let slot = fred::util::redis_keyslot(HASHTAG.as_bytes());
        assert!(matches!(cmd.cluster_hash, ClusterHash::Custom(s) if s == slot));
        assert_eq!(args, vec![Value::Integer(2), Value::Integer(1)]);
    }
}
