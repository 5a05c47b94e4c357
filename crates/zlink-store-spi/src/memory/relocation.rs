use std::fmt;
use std::sync::Arc;

use crate::entropy::HashMap;
use bytes::Bytes;
use parking_lot::Mutex;

use super::clock::{StoreClock, SystemClock};
use crate::{
    BlobReadResult, BlobRef, Deleted, PutResult, RelocationStore, RenewResult, Retention,
    StoreResult, StoreTime, check_blob_len,
};

struct Blob {
    bytes: Bytes,
    expires_at: StoreTime,
}

#[derive(Default)]
struct State {
    blobs: HashMap<BlobRef, Blob>,
    puts_since_sweep: usize,
}

/// How many puts between sweeps of expired blobs.
const SWEEP_EVERY: usize = 1024;

/// The in-memory Relocation Store: the embedded default and the contract reference.
///
/// Expiry is judged by its [`StoreClock`]; expired blobs are swept periodically.
#[derive(Clone)]
pub struct MemoryRelocationStore {
    state: Arc<Mutex<State>>,
    clock: Arc<dyn StoreClock>,
}

impl fmt::Debug for MemoryRelocationStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryRelocationStore")
            .field("blobs", &self.state.lock().blobs.len())
            .field("clock", &self.clock)
            .finish()
    }
}

impl Default for MemoryRelocationStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryRelocationStore {
    /// A store on the host wall clock.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// A store on the given clock.
    pub fn with_clock(clock: Arc<dyn StoreClock>) -> Self {
        MemoryRelocationStore {
            state: Arc::new(Mutex::new(State::default())),
            clock,
        }
    }

    /// How many blobs are held (expired ones not yet swept included).
    pub fn len(&self) -> usize {
        self.state.lock().blobs.len()
    }

    /// Whether no blob is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn live<'a>(state: &'a State, reference: &BlobRef, now: StoreTime) -> Option<&'a Blob> {
        state.blobs.get(reference).filter(|b| b.expires_at > now)
    }
}

impl RelocationStore for MemoryRelocationStore {
    async fn put(
        &self,
        reference: &BlobRef,
        payload: &Bytes,
        retention: Retention,
    ) -> StoreResult<PutResult> {
        check_blob_len(payload.len())?;
        let mut state = self.state.lock();
        let now = self.clock.now();
        if let Some(existing) = Self::live(&state, reference, now) {
            return Ok(if existing.bytes == *payload {
                PutResult::AlreadyStored {
                    expires_at: existing.expires_at,
                    store_now: now,
                }
            } else {
                PutResult::Conflict { store_now: now }
            });
        }
        state.puts_since_sweep += 1;
        if state.puts_since_sweep >= SWEEP_EVERY {
            state.puts_since_sweep = 0;
            state.blobs.retain(|_, b| b.expires_at > now);
        }
        let expires_at = now.plus(retention);
        state.blobs.insert(
            reference.clone(),
            Blob {
                // The caller's buffer may be a slice of something larger: keep a copy.
                bytes: Bytes::copy_from_slice(payload),
                expires_at,
            },
        );
        Ok(PutResult::Stored {
            expires_at,
            store_now: now,
        })
    }

    async fn read(&self, reference: &BlobRef) -> StoreResult<BlobReadResult> {
        let state = self.state.lock();
        let now = self.clock.now();
        Ok(match Self::live(&state, reference, now) {
            Some(b) => BlobReadResult::Found {
                bytes: b.bytes.clone(),
                expires_at: b.expires_at,
                store_now: now,
            },
            None => BlobReadResult::Missing { store_now: now },
        })
    }

    async fn renew(&self, reference: &BlobRef, retention: Retention) -> StoreResult<RenewResult> {
        let mut state = self.state.lock();
        let now = self.clock.now();
        match state
            .blobs
            .get_mut(reference)
            .filter(|b| b.expires_at > now)
        {
            Some(b) => {
                b.expires_at = now.plus(retention);
                Ok(RenewResult::Renewed {
                    expires_at: b.expires_at,
                    store_now: now,
                })
            }
            None => Ok(RenewResult::Missing { store_now: now }),
        }
    }

    async fn delete(&self, reference: &BlobRef) -> StoreResult<Deleted> {
        let mut state = self.state.lock();
        state.blobs.remove(reference);
        Ok(Deleted {
            store_now: self.clock.now(),
        })
    }
}
