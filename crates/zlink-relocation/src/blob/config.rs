//! Configuration of the blob layer and the shared in-flight byte budget.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use zlink_store_spi::{Retention, StoreError};

use crate::blob::error::BlobArgumentError;
use crate::blob::format::{MAX_CHUNKS, MAX_STRIPES};
use crate::blob::plan::UnitPlan;
use zlink_store_spi::MAX_DATA_CHUNK_LEN;

/// A bound on the encoded bytes of chunk reads and writes in flight at once, shared by every
/// blob layer that holds a clone of it (spec 23: 256 MiB per process by default).
///
/// A chunk takes its encoded size (envelope included) from the budget while it is written and
/// read back, or read and verified; a chunk larger than the whole budget runs alone. The
/// leading index (written once, read once per operation, before or after the chunks) is not
/// counted.
#[derive(Clone)]
pub struct TransferBudget {
    semaphore: Arc<Semaphore>,
    bytes: usize,
}

impl fmt::Debug for TransferBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransferBudget")
            .field("bytes", &self.bytes)
            .field("available", &self.available())
            .finish()
    }
}

impl TransferBudget {
    /// The default budget: 256 MiB.
    pub const DEFAULT_BYTES: usize = 256 * 1024 * 1024;

    /// A new budget of `bytes` (at least 1), not shared with any other.
    pub fn new(bytes: usize) -> Result<Self, BlobArgumentError> {
        if bytes == 0 || bytes > Semaphore::MAX_PERMITS {
            return Err(BlobArgumentError::Budget {
                actual: bytes,
                max: Semaphore::MAX_PERMITS,
            });
        }
        Ok(TransferBudget {
            semaphore: Arc::new(Semaphore::new(bytes)),
            bytes,
        })
    }

    /// The process-wide budget of [`DEFAULT_BYTES`](Self::DEFAULT_BYTES), shared by every
    /// layer configured with the default.
    pub fn process_default() -> Self {
        static DEFAULT: OnceLock<TransferBudget> = OnceLock::new();
        DEFAULT
            .get_or_init(|| TransferBudget {
                semaphore: Arc::new(Semaphore::new(Self::DEFAULT_BYTES)),
                bytes: Self::DEFAULT_BYTES,
            })
            .clone()
    }

    /// The budget in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes not taken right now.
    pub fn available(&self) -> usize {
        self.semaphore.available_permits()
    }

    /// Takes `cost` bytes (capped at the whole budget) until the permit is dropped.
    pub(crate) async fn take(&self, cost: usize) -> Result<OwnedSemaphorePermit, StoreError> {
        // Capped at the budget, and a chunk is at most 64 MiB + 23 bytes: fits a u32.
        let cost = cost.clamp(1, self.bytes).min(u32::MAX as usize) as u32;
        self.semaphore
            .clone()
            .acquire_many_owned(cost)
            .await
            .map_err(|_| StoreError::Cancelled)
    }
}

/// How the blob layer splits, bounds and keeps payloads.
///
/// ```
/// use zlink_relocation::BlobLayerConfig;
/// let config = BlobLayerConfig::default().with_chunk_limit(1024).unwrap();
/// assert_eq!(config.chunk_limit(), 1024);
/// // 64 MiB is the largest data chunk.
/// assert!(BlobLayerConfig::default().with_chunk_limit(64 * 1024 * 1024 + 1).is_err());
/// assert!(BlobLayerConfig::default().with_max_stripes(65).is_err());
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BlobLayerConfig {
    chunk_limit: usize,
    max_stripes: usize,
    stripe_target: usize,
    retention: Retention,
    budget: TransferBudget,
    parallelism: usize,
}

impl Default for BlobLayerConfig {
    fn default() -> Self {
        BlobLayerConfig {
            chunk_limit: MAX_DATA_CHUNK_LEN,
            max_stripes: MAX_STRIPES,
            stripe_target: Self::DEFAULT_STRIPE_TARGET,
            // 24 h is a valid retention; the fallback is never taken.
            retention: Retention::new(Self::DEFAULT_RETENTION).unwrap_or(Retention::MAX),
            budget: TransferBudget::process_default(),
            parallelism: Self::DEFAULT_PARALLELISM,
        }
    }
}

impl BlobLayerConfig {
    /// The default retention of every chunk and index: 24 h.
    pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 3600);
    /// The default stripe target length: 4 MiB. Payloads up to 256 MiB are spread over stripes
    /// (and chunks) of about this size, which transfer in parallel; larger ones over 64 stripes.
    pub const DEFAULT_STRIPE_TARGET: usize = 4 * 1024 * 1024;
    /// The default number of chunk operations in flight at once (one per stripe).
    pub const DEFAULT_PARALLELISM: usize = MAX_STRIPES;
    /// The largest parallelism.
    pub const MAX_PARALLELISM: usize = MAX_CHUNKS;

    /// Sets the data chunk limit: 1..=64 MiB (64 MiB, the default, is the production value;
    /// smaller limits are for tests).
    pub fn with_chunk_limit(mut self, bytes: usize) -> Result<Self, BlobArgumentError> {
        if !(1..=MAX_DATA_CHUNK_LEN).contains(&bytes) {
            return Err(BlobArgumentError::ChunkLimit {
                actual: bytes,
                max: MAX_DATA_CHUNK_LEN,
            });
        }
        self.chunk_limit = bytes;
        Ok(self)
    }

    /// Sets the most stripes a payload is split into: 1..=64 (default 64).
    pub fn with_max_stripes(mut self, stripes: usize) -> Result<Self, BlobArgumentError> {
        if !(1..=MAX_STRIPES).contains(&stripes) {
            return Err(BlobArgumentError::Stripes {
                actual: stripes,
                max: MAX_STRIPES,
            });
        }
        self.max_stripes = stripes;
        Ok(self)
    }

    /// Sets the stripe target length: 1..=64 MiB (default 4 MiB). A payload is split into
    /// `min(max stripes, ceil(len / min(target, chunk limit)))` even stripes; the chunk limit
    /// still caps every chunk.
    pub fn with_stripe_target(mut self, bytes: usize) -> Result<Self, BlobArgumentError> {
        if !(1..=MAX_DATA_CHUNK_LEN).contains(&bytes) {
            return Err(BlobArgumentError::StripeTarget {
                actual: bytes,
                max: MAX_DATA_CHUNK_LEN,
            });
        }
        self.stripe_target = bytes;
        Ok(self)
    }

    /// Sets the retention of every chunk and index written (default 24 h).
    pub fn with_retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// Uses `budget` (default: [`TransferBudget::process_default`]).
    pub fn with_budget(mut self, budget: TransferBudget) -> Self {
        self.budget = budget;
        self
    }

    /// Sets how many chunk operations may be in flight at once: 1..=4096 (default 64). The
    /// byte budget bounds them too.
    pub fn with_parallelism(mut self, parallelism: usize) -> Result<Self, BlobArgumentError> {
        if !(1..=Self::MAX_PARALLELISM).contains(&parallelism) {
            return Err(BlobArgumentError::Parallelism {
                actual: parallelism,
                max: Self::MAX_PARALLELISM,
            });
        }
        self.parallelism = parallelism;
        Ok(self)
    }

    /// The data chunk limit.
    pub fn chunk_limit(&self) -> usize {
        self.chunk_limit
    }

    /// The most stripes.
    pub fn max_stripes(&self) -> usize {
        self.max_stripes
    }

    /// The stripe target length.
    pub fn stripe_target(&self) -> usize {
        self.stripe_target
    }

    /// The retention of what is written.
    pub fn retention(&self) -> Retention {
        self.retention
    }

    /// The in-flight byte budget.
    pub fn budget(&self) -> &TransferBudget {
        &self.budget
    }

    /// The parallelism.
    pub fn parallelism(&self) -> usize {
        self.parallelism
    }

    /// How a payload of `total_len` bytes would be split with this configuration.
    pub fn plan(&self, total_len: u64) -> Result<UnitPlan, BlobArgumentError> {
        UnitPlan::with_stripe_target(
            total_len,
            self.chunk_limit,
            self.max_stripes,
            self.stripe_target,
        )
    }
}
