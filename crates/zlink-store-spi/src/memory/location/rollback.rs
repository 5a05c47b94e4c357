//! Fault injection: a failover to a replica that had not received the last writes.
//!
//! A Store replicated asynchronously (Redis with replicas: Cluster, Sentinel, a managed Redis)
//! acknowledges a write before its replicas have it; when it fails over, the promoted replica
//! holds a *prefix* of the old master's write order and every acknowledged write after that
//! point is gone. [`MemoryLocationStore::checkpoint`] takes such a point and
//! [`MemoryLocationStore::roll_back_to`] makes the store what it was there, for tests and
//! simulations of the runtime's loss detection (`docs/store-epoch.md`).

use std::collections::BTreeMap;
use std::fmt;

use super::{Entry, Live, MemoryLocationStore};
use crate::StoreKey;

/// A point of a [`MemoryLocationStore`]'s write order to roll back to: every key's value with
/// its exact bytes, version and expiry, and the version sequence. Opaque; cheap to take (the
/// values' bytes are shared, not copied).
#[derive(Clone)]
pub struct MemoryCheckpoint {
    instance: u64,
    seq: u64,
    values: BTreeMap<StoreKey, (u64, Live)>,
}

impl fmt::Debug for MemoryCheckpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryCheckpoint")
            .field("seq", &self.seq)
            .field("keys", &self.values.len())
            .finish()
    }
}

impl MemoryCheckpoint {
    /// How many keys held a value at the checkpoint.
    pub fn key_count(&self) -> usize {
        self.values.len()
    }
}

/// [`MemoryLocationStore::roll_back_to`] was given a checkpoint of another store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the checkpoint was taken of another memory store")]
#[non_exhaustive]
pub struct ForeignCheckpoint;

impl MemoryLocationStore {
    /// Takes a checkpoint of the present state (see [`roll_back_to`](Self::roll_back_to)).
    /// A fault-injection tool for tests and simulation.
    pub fn checkpoint(&self) -> MemoryCheckpoint {
        let state = self.state.lock();
        let values = state
            .entries
            .iter()
            .filter_map(|(key, history)| {
                let last = history.last()?;
                let live = last.value.clone()?;
                Some((key.clone(), (last.seq, live)))
            })
            .collect();
        MemoryCheckpoint {
            instance: state.instance,
            seq: state.seq,
            values,
        }
    }

    /// Makes the store what it was at `checkpoint`, as a failover to a replica that stopped
    /// there would: every write since is gone (puts, deletes, counter moves, lease renewals),
    /// every key holds the bytes, version and expiry it held then (expiry still judged by the
    /// store clock, which does not go back), and the version sequence is the one of the
    /// checkpoint — so, as after a real failover of a Store whose version counter is data,
    /// a version issued after the rollback may equal one a lost write had. Open scan cursors
    /// answer `Expired`. A fault-injection tool for tests and simulation.
    ///
    /// A checkpoint of another store is refused and changes nothing.
    pub fn roll_back_to(&self, checkpoint: &MemoryCheckpoint) -> Result<(), ForeignCheckpoint> {
        let mut state = self.state.lock();
        if checkpoint.instance != state.instance {
            return Err(ForeignCheckpoint);
        }
        state.entries = checkpoint
            .values
            .iter()
            .map(|(key, (seq, live))| {
                (
                    key.clone(),
                    vec![Entry {
                        seq: *seq,
                        value: Some(live.clone()),
                    }],
                )
            })
            .collect();
        state.seq = checkpoint.seq;
        state.with_history.clear();
        state.snapshots.clear();
        state.writes_since_sweep = 0;
        Ok(())
    }
}
