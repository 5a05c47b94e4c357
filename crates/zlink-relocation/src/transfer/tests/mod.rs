//! Tests of the direct payload transfer.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod assembly;
mod budget;
mod memory;
mod properties;
mod sender;
mod settings;
mod wire;

use bytes::Bytes;

use super::{ChunkLimit, SourceFence, TransferBinding};

const RELOCATION: u128 = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210;

/// The binding of attempt `attempt` of the test move.
fn binding(attempt: u64) -> TransferBinding {
    TransferBinding::new(RELOCATION, attempt, SourceFence::new(7, 3).unwrap()).unwrap()
}

/// A chunk limit carrying `data` payload bytes per chunk.
fn data_limit(data: usize) -> ChunkLimit {
    ChunkLimit::new(super::CHUNK_HEADER_LEN + data).unwrap()
}

/// `len` bytes of a non-repeating-looking pattern.
fn payload(len: usize) -> Bytes {
    (0..len)
        .map(|i| (i.wrapping_mul(31) ^ (i >> 7)) as u8)
        .collect::<Vec<u8>>()
        .into()
}
