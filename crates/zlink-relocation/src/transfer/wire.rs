//! The two command-plane messages of the direct transfer and their compact byte layouts (all
//! integers big-endian):
//!
//! ```text
//! Restore header (62 bytes)            Payload chunk (46-byte header + data)
//!   0  kind = 0x01                       0  kind = 0x02
//!   1  format version = 1                1  format version = 1
//!   2  binding (40 bytes):               2  binding (40 bytes, same layout)
//!        relocation id   u128           42  chunk index u32
//!        target attempt  u64            46  data (1..=MAX_CHUNK_DATA_LEN bytes, to the end)
//!        authority owner generation u64
//!        owner lease generation     u64
//!  42  total length  u64
//!  50  chunk length  u32  (data bytes of every chunk but the last)
//!  54  chunk count   u32
//!  58  CRC-32C of the whole payload u32
//! ```
//!
//! The chunk length is carried beside the spec's total length, chunk count and checksum (21
//! §1.3 step 4) so the target can check that the three agree and that every chunk has exactly
//! the length its index implies, whatever chunk limit the source was configured with.

use bytes::Bytes;

use super::binding::{TransferBinding, be_u32, be_u64};
use super::error::FormatError;
use super::settings::MAX_CHUNK_LIMIT;

/// The format version byte both messages carry.
pub const TRANSFER_FORMAT_VERSION: u8 = 1;

/// The encoded length of a [`RestoreHeader`].
pub const RESTORE_HEADER_LEN: usize = 2 + TransferBinding::ENCODED_LEN + 8 + 4 + 4 + 4;

/// The encoded length of a [`PayloadChunk`] before its data bytes.
pub const CHUNK_HEADER_LEN: usize = 2 + TransferBinding::ENCODED_LEN + 4;

/// The most data bytes one chunk carries: the largest encoded chunk
/// ([`MAX_CHUNK_LIMIT`](super::MAX_CHUNK_LIMIT), 16 MiB) minus the chunk header.
pub const MAX_CHUNK_DATA_LEN: usize = MAX_CHUNK_LIMIT - CHUNK_HEADER_LEN;

/// The largest payload one Restore carries: 256 MiB. One object's payload — at most 64 MiB of
/// adapter state plus its queue, journal and timers — must fit the 256 MiB payload memory cap
/// (28 §5: "a single Actor or Instance Spot must fit in 256 MiB"); a `SpotWide` aggregate
/// larger than that is still one Restore per participant.
pub const MAX_RESTORE_PAYLOAD_LEN: u64 = 256 * 1024 * 1024;

const KIND_RESTORE: u8 = 0x01;
const KIND_CHUNK: u8 = 0x02;

/// What a Restore request declares about its payload: the values a retransmitted Restore with
/// the same binding must repeat to reuse the assembly (21 §9.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RestoreShape {
    /// The payload length in bytes.
    pub total_len: u64,
    /// The data length of every chunk but the last (0 only for an empty payload).
    pub chunk_len: u32,
    /// The number of chunks (0 only for an empty payload).
    pub chunk_count: u32,
    /// The CRC-32C (Castagnoli) of the whole payload.
    pub crc32c: u32,
}

impl RestoreShape {
    /// Checks the bounds and that total length, chunk length and chunk count agree: an empty
    /// payload has no chunks and chunk length 0; otherwise `1 <= chunk_len <= total_len` and
    /// `chunk_count == ceil(total_len / chunk_len)`.
    fn check(&self) -> Result<(), FormatError> {
        if self.total_len > MAX_RESTORE_PAYLOAD_LEN {
            return Err(FormatError::PayloadTooLarge {
                actual: self.total_len,
                max: MAX_RESTORE_PAYLOAD_LEN,
            });
        }
        if self.chunk_len as usize > MAX_CHUNK_DATA_LEN {
            return Err(FormatError::ChunkTooLarge {
                actual: u64::from(self.chunk_len),
                max: MAX_CHUNK_DATA_LEN as u64,
            });
        }
        let consistent = if self.total_len == 0 {
            self.chunk_len == 0 && self.chunk_count == 0
        } else {
            self.chunk_len > 0
                && u64::from(self.chunk_len) <= self.total_len
                && u64::from(self.chunk_count) == self.total_len.div_ceil(u64::from(self.chunk_len))
        };
        if consistent {
            Ok(())
        } else {
            Err(FormatError::Shape {
                total_len: self.total_len,
                chunk_len: self.chunk_len,
                chunk_count: self.chunk_count,
            })
        }
    }

    /// The data length chunk `index` must have (`index < chunk_count`).
    pub(crate) fn chunk_len_at(&self, index: u32) -> u32 {
        if index + 1 < self.chunk_count {
            self.chunk_len
        } else {
            // The last chunk: what is left. Fits u32 because it is at most chunk_len.
            let before = u64::from(self.chunk_count.saturating_sub(1)) * u64::from(self.chunk_len);
            u32::try_from(self.total_len.saturating_sub(before)).unwrap_or(u32::MAX)
        }
    }
}

/// The Restore request's payload declaration: the binding plus total length, chunk length,
/// chunk count and CRC-32C (21 §1.3 step 4, §9.1). Always consistent (checked on construction
/// and on decode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RestoreHeader {
    binding: TransferBinding,
    shape: RestoreShape,
}

impl RestoreHeader {
    /// A header, checked: total length at most [`MAX_RESTORE_PAYLOAD_LEN`], chunk length at
    /// most [`MAX_CHUNK_DATA_LEN`], and the three agreeing (see [`RestoreShape`]).
    pub fn new(binding: TransferBinding, shape: RestoreShape) -> Result<Self, FormatError> {
        shape.check()?;
        Ok(RestoreHeader { binding, shape })
    }

    /// The binding every chunk of this Restore must carry.
    pub fn binding(&self) -> TransferBinding {
        self.binding
    }

    /// The declared length, chunking and checksum.
    pub fn shape(&self) -> RestoreShape {
        self.shape
    }

    /// The declared payload length.
    pub fn total_len(&self) -> u64 {
        self.shape.total_len
    }

    /// The declared chunk count.
    pub fn chunk_count(&self) -> u32 {
        self.shape.chunk_count
    }

    /// The declared data length of every chunk but the last.
    pub fn chunk_len(&self) -> u32 {
        self.shape.chunk_len
    }

    /// The declared CRC-32C of the whole payload.
    pub fn crc32c(&self) -> u32 {
        self.shape.crc32c
    }

    /// The 62-byte encoding.
    pub fn encode(&self) -> Bytes {
        let mut out = Vec::with_capacity(RESTORE_HEADER_LEN);
        out.push(KIND_RESTORE);
        out.push(TRANSFER_FORMAT_VERSION);
        self.binding.put(&mut out);
        out.extend_from_slice(&self.shape.total_len.to_be_bytes());
        out.extend_from_slice(&self.shape.chunk_len.to_be_bytes());
        out.extend_from_slice(&self.shape.chunk_count.to_be_bytes());
        out.extend_from_slice(&self.shape.crc32c.to_be_bytes());
        Bytes::from(out)
    }

    /// Decodes exactly [`RESTORE_HEADER_LEN`] bytes, checking every bound.
    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        prefix(b, KIND_RESTORE, RESTORE_HEADER_LEN)?;
        if b.len() > RESTORE_HEADER_LEN {
            return Err(FormatError::TrailingBytes {
                expected: RESTORE_HEADER_LEN,
                actual: b.len(),
            });
        }
        let binding = read_binding(b)?;
        let shape = RestoreShape {
            total_len: be_u64(&b[42..50]),
            chunk_len: be_u32(&b[50..54]),
            chunk_count: be_u32(&b[54..58]),
            crc32c: be_u32(&b[58..62]),
        };
        RestoreHeader::new(binding, shape)
    }
}

/// One chunk of a payload: the binding, its index and a (zero-copy) slice of the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadChunk {
    binding: TransferBinding,
    index: u32,
    bytes: Bytes,
}

impl PayloadChunk {
    /// A chunk of 1..=[`MAX_CHUNK_DATA_LEN`] data bytes.
    pub fn new(binding: TransferBinding, index: u32, bytes: Bytes) -> Result<Self, FormatError> {
        if bytes.is_empty() {
            return Err(FormatError::EmptyChunk);
        }
        if bytes.len() > MAX_CHUNK_DATA_LEN {
            return Err(FormatError::ChunkTooLarge {
                actual: bytes.len() as u64,
                max: MAX_CHUNK_DATA_LEN as u64,
            });
        }
        Ok(PayloadChunk {
            binding,
            index,
            bytes,
        })
    }

    /// The binding the chunk carries.
    pub fn binding(&self) -> TransferBinding {
        self.binding
    }

    /// The chunk index (0-based, in payload order).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The data bytes.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Takes the data bytes out.
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// The encoded length: [`CHUNK_HEADER_LEN`] plus the data (the number the chunk limit
    /// bounds).
    pub fn encoded_len(&self) -> usize {
        CHUNK_HEADER_LEN + self.bytes.len()
    }

    /// The 46-byte header alone, for a sender that writes header and data as two parts without
    /// copying the data.
    pub fn encode_header(&self) -> [u8; CHUNK_HEADER_LEN] {
        let mut head = Vec::with_capacity(CHUNK_HEADER_LEN);
        head.push(KIND_CHUNK);
        head.push(TRANSFER_FORMAT_VERSION);
        self.binding.put(&mut head);
        head.extend_from_slice(&self.index.to_be_bytes());
        let mut out = [0u8; CHUNK_HEADER_LEN];
        out.copy_from_slice(&head);
        out
    }

    /// The whole encoding (header then data) in one buffer.
    pub fn encode(&self) -> Bytes {
        let mut out = Vec::with_capacity(self.encoded_len());
        out.extend_from_slice(&self.encode_header());
        out.extend_from_slice(&self.bytes);
        Bytes::from(out)
    }

    /// Decodes a chunk message; the data is a zero-copy slice of `b`. At most
    /// [`MAX_CHUNK_LIMIT`](super::MAX_CHUNK_LIMIT) bytes in all, and at least one data byte.
    pub fn decode(b: Bytes) -> Result<Self, FormatError> {
        prefix(&b, KIND_CHUNK, CHUNK_HEADER_LEN)?;
        if b.len() > MAX_CHUNK_LIMIT {
            return Err(FormatError::ChunkTooLarge {
                actual: (b.len() - CHUNK_HEADER_LEN) as u64,
                max: MAX_CHUNK_DATA_LEN as u64,
            });
        }
        let binding = read_binding(&b)?;
        let index = be_u32(&b[42..46]);
        PayloadChunk::new(binding, index, b.slice(CHUNK_HEADER_LEN..))
    }
}

/// Checks the kind byte, the version byte and the minimum length.
fn prefix(b: &[u8], kind: u8, min_len: usize) -> Result<(), FormatError> {
    match b.first() {
        None => {
            return Err(FormatError::Truncated {
                needed: min_len,
                actual: 0,
            });
        }
        Some(&k) if k != kind => return Err(FormatError::UnexpectedKind(k)),
        Some(_) => {}
    }
    match b.get(1) {
        Some(&v) if v != TRANSFER_FORMAT_VERSION => {
            return Err(FormatError::UnsupportedVersion(v));
        }
        _ => {}
    }
    if b.len() < min_len {
        return Err(FormatError::Truncated {
            needed: min_len,
            actual: b.len(),
        });
    }
    Ok(())
}

/// Reads the binding at offset 2 (the caller checked the length).
fn read_binding(b: &[u8]) -> Result<TransferBinding, FormatError> {
    let mut raw = [0u8; TransferBinding::ENCODED_LEN];
    raw.copy_from_slice(&b[2..2 + TransferBinding::ENCODED_LEN]);
    Ok(TransferBinding::read(&raw)?)
}
