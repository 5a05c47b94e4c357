//! The plan that splits one payload into stripes and chunks, and the order chunks are
//! scheduled in. Pure functions: no I/O.

use crate::blob::error::BlobArgumentError;
use zlink_store_spi::MAX_DATA_CHUNK_LEN;

use crate::blob::format::{MAX_CHUNKS, MAX_PAYLOAD_LEN, MAX_STRIPES};

/// One contiguous stripe of the payload and the chunks it was cut into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripePlan {
    /// Offset of the stripe in the payload.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
    /// Order of its first chunk.
    pub first_chunk: u16,
    /// How many chunks it has (at least one).
    pub chunk_count: u16,
}

/// One data chunk of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkPlan {
    /// Its order in the unit (index position), 0-based.
    pub order: u16,
    /// The stripe it belongs to.
    pub stripe: u8,
    /// Offset in the payload.
    pub offset: u64,
    /// Length in bytes (at most the chunk limit).
    pub len: u32,
}

/// How a payload is split: even stripes, each cut into even chunks no larger than the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitPlan {
    /// The payload length.
    pub total_len: u64,
    /// The chunk limit the plan was made with.
    pub chunk_limit: u32,
    /// The stripes, in payload order.
    pub stripes: Vec<StripePlan>,
    /// The chunks, in index order (= payload order).
    pub chunks: Vec<ChunkPlan>,
}

fn even_parts(total: u64, parts: u64, index: u64) -> (u64, u64) {
    // Part `index` of `total` split into `parts` lengths that differ by at most one byte (the
    // longer ones first): (offset, length).
    let base = total / parts;
    let rem = total % parts;
    let len = base + u64::from(index < rem);
    let offset = base * index + index.min(rem);
    (offset, len)
}

impl UnitPlan {
    /// Plans a payload of `total_len` bytes with stripes as long as the chunk limit allows:
    /// the same as [`with_stripe_target`](Self::with_stripe_target) with a target of
    /// `chunk_limit`.
    pub fn new(
        total_len: u64,
        chunk_limit: usize,
        max_stripes: usize,
    ) -> Result<Self, BlobArgumentError> {
        Self::with_stripe_target(total_len, chunk_limit, max_stripes, chunk_limit)
    }

    /// Plans a payload of `total_len` bytes: `S = min(max_stripes, max(1, ceil(total / T)))`
    /// stripes of even length, where `T = min(stripe_target, chunk_limit)`, each cut into the
    /// fewest even chunks of at most `chunk_limit` bytes. An empty payload is one stripe with one
    /// empty chunk. (A target below the chunk limit spreads mid-sized payloads over more,
    /// smaller chunks that transfer in parallel.)
    ///
    /// Fails when the payload exceeds 256 GiB or needs more than 4,096 chunks.
    pub fn with_stripe_target(
        total_len: u64,
        chunk_limit: usize,
        max_stripes: usize,
        stripe_target: usize,
    ) -> Result<Self, BlobArgumentError> {
        if total_len > MAX_PAYLOAD_LEN {
            return Err(BlobArgumentError::PayloadTooLarge {
                actual: total_len,
                max: MAX_PAYLOAD_LEN,
            });
        }
        if !(1..=MAX_DATA_CHUNK_LEN).contains(&chunk_limit) {
            return Err(BlobArgumentError::ChunkLimit {
                actual: chunk_limit,
                max: MAX_DATA_CHUNK_LEN,
            });
        }
        if !(1..=MAX_STRIPES).contains(&max_stripes) {
            return Err(BlobArgumentError::Stripes {
                actual: max_stripes,
                max: MAX_STRIPES,
            });
        }
        if !(1..=MAX_DATA_CHUNK_LEN).contains(&stripe_target) {
            return Err(BlobArgumentError::StripeTarget {
                actual: stripe_target,
                max: MAX_DATA_CHUNK_LEN,
            });
        }
        let limit = chunk_limit as u64;
        let target = stripe_target.min(chunk_limit) as u64;
        let stripe_count = total_len.div_ceil(target).clamp(1, max_stripes as u64);
        // Count first, so an oversized plan allocates nothing.
        let mut chunk_total: u64 = 0;
        for s in 0..stripe_count {
            let (_, len) = even_parts(total_len, stripe_count, s);
            chunk_total += len.div_ceil(limit).max(1);
        }
        if chunk_total > MAX_CHUNKS as u64 {
            return Err(BlobArgumentError::TooManyChunks {
                actual: chunk_total,
                max: MAX_CHUNKS,
            });
        }
        let mut stripes = Vec::with_capacity(stripe_count as usize);
        let mut chunks = Vec::with_capacity(chunk_total as usize);
        for s in 0..stripe_count {
            let (offset, len) = even_parts(total_len, stripe_count, s);
            let count = len.div_ceil(limit).max(1);
            // Bounded by MAX_CHUNKS and MAX_STRIPES above.
            let first_chunk = chunks.len() as u16;
            for c in 0..count {
                let (chunk_offset, chunk_len) = even_parts(len, count, c);
                chunks.push(ChunkPlan {
                    order: chunks.len() as u16,
                    stripe: s as u8,
                    offset: offset + chunk_offset,
                    // At most the chunk limit, which is at most 64 MiB.
                    len: chunk_len as u32,
                });
            }
            stripes.push(StripePlan {
                offset,
                len,
                first_chunk,
                chunk_count: count as u16,
            });
        }
        Ok(UnitPlan {
            total_len,
            chunk_limit: chunk_limit as u32,
            stripes,
            chunks,
        })
    }

    /// (first chunk, chunk count, length) of every stripe, as the index records them.
    pub(crate) fn stripe_table(&self) -> Vec<(u16, u16, u64)> {
        self.stripes
            .iter()
            .map(|s| (s.first_chunk, s.chunk_count, s.len))
            .collect()
    }
}

/// Chunk orders in the order they are scheduled: round-robin over the stripes (the first chunk
/// of every stripe, then the second, ...), so that stripes progress in parallel.
pub(crate) fn schedule(stripes: &[(u16, u16, u64)]) -> Vec<u16> {
    let deepest = stripes.iter().map(|s| s.1).max().unwrap_or(0);
    let mut order = Vec::new();
    for depth in 0..deepest {
        for &(first, count, _) in stripes {
            if depth < count {
                order.push(first + depth);
            }
        }
    }
    order
}
