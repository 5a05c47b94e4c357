//! Sender side: split the payload the source keeps in memory into a Restore header and chunks.

use bytes::Bytes;

use super::binding::TransferBinding;
use super::error::ChunkingError;
use super::settings::ChunkLimit;
use super::wire::{MAX_RESTORE_PAYLOAD_LEN, PayloadChunk, RestoreHeader, RestoreShape};

/// Splits `payload` into the Restore header and its chunks under `limit` (21 §1.3 step 4).
///
/// Every chunk but the last carries exactly `limit.data_len()` bytes (so every encoded chunk
/// is at most `limit`), the last carries the rest; an empty payload has no chunks. Chunks are
/// zero-copy slices of `payload`. The split is deterministic: splitting the same payload again
/// for a retransmission gives the same header and chunks. A payload over
/// [`MAX_RESTORE_PAYLOAD_LEN`] is [`ChunkingError::PayloadTooLarge`].
pub fn chunk_payload(
    binding: TransferBinding,
    payload: Bytes,
    limit: ChunkLimit,
) -> Result<(RestoreHeader, PayloadChunks), ChunkingError> {
    let total_len = payload.len() as u64;
    if total_len > MAX_RESTORE_PAYLOAD_LEN {
        return Err(ChunkingError::PayloadTooLarge {
            actual: total_len,
            max: MAX_RESTORE_PAYLOAD_LEN,
        });
    }
    // Both fit u32: total_len <= 256 MiB and data_len <= 16 MiB.
    let chunk_len = limit.data_len().min(payload.len());
    let chunk_count = if chunk_len == 0 {
        0
    } else {
        payload.len().div_ceil(chunk_len)
    };
    let shape = RestoreShape {
        total_len,
        chunk_len: u32::try_from(chunk_len).unwrap_or(u32::MAX),
        chunk_count: u32::try_from(chunk_count).unwrap_or(u32::MAX),
        crc32c: crc32c::crc32c(&payload),
    };
    // The shape is consistent by construction; a failure here would be a bug, surfaced as the
    // size error rather than a panic.
    let header =
        RestoreHeader::new(binding, shape).map_err(|_| ChunkingError::PayloadTooLarge {
            actual: total_len,
            max: MAX_RESTORE_PAYLOAD_LEN,
        })?;
    Ok((
        header,
        PayloadChunks {
            binding,
            payload,
            chunk_len,
            next: 0,
            chunk_count: shape.chunk_count,
        },
    ))
}

/// The chunks of one payload, in index order (see [`chunk_payload`]).
#[derive(Debug, Clone)]
pub struct PayloadChunks {
    binding: TransferBinding,
    payload: Bytes,
    chunk_len: usize,
    next: u32,
    chunk_count: u32,
}

impl Iterator for PayloadChunks {
    type Item = PayloadChunk;

    fn next(&mut self) -> Option<PayloadChunk> {
        if self.next >= self.chunk_count {
            return None;
        }
        let index = self.next;
        let start = index as usize * self.chunk_len;
        let end = (start + self.chunk_len).min(self.payload.len());
        self.next += 1;
        // 1..=MAX_CHUNK_DATA_LEN bytes by construction, so `new` cannot refuse it.
        PayloadChunk::new(self.binding, index, self.payload.slice(start..end)).ok()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.chunk_count - self.next) as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for PayloadChunks {}
