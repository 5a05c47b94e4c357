//! The byte layouts of the chunk envelope and the leading index (documented in
//! `docs/relocation-blob-format.md`); the plan that splits a payload into stripes and chunks
//! is `plan.rs`. Pure functions: no I/O.

use bytes::{BufMut, Bytes, BytesMut};
use zlink_store_spi::{BLOB_ENVELOPE_LEN, BlobRef, MAX_BLOB_LEN, MAX_DATA_CHUNK_LEN};

use crate::blob::error::{BlobArgumentError, EnvelopeError, IndexFormatError};

/// The most data chunks under one leading index.
pub const MAX_CHUNKS: usize = 4096;
/// The most ordered stripes of one relocation root.
pub const MAX_STRIPES: usize = 64;
/// The largest whole payload across all chunks: 256 GiB (4,096 chunks of 64 MiB).
pub const MAX_PAYLOAD_LEN: u64 = 256 * 1024 * 1024 * 1024;
/// The suffix a chunk reference appends to the index reference: `#` and four decimal digits.
pub(crate) const CHUNK_REF_SUFFIX_LEN: usize = 5;
/// The longest index reference (so that every chunk reference fits in 4,096 bytes).
pub const MAX_INDEX_REF_LEN: usize = BlobRef::MAX_LEN - CHUNK_REF_SUFFIX_LEN;

const ENVELOPE_MAGIC: [u8; 4] = *b"ZLRC";
const ENVELOPE_VERSION: u8 = 1;
const KIND_DATA_CHUNK: u8 = 1;
/// Bytes of the envelope covered by its header checksum.
const ENVELOPE_CHECKED_LEN: usize = 19;

const INDEX_MAGIC: [u8; 4] = *b"ZLRI";
/// The leading index format version this crate writes and reads.
pub const INDEX_FORMAT_VERSION: u8 = 1;
const INDEX_HEADER_LEN: usize = 56;
const STRIPE_ENTRY_LEN: usize = 12;
const CHUNK_ENTRY_FIXED_LEN: usize = 11;
const INDEX_TRAILER_LEN: usize = 4;

/// The reference of chunk `order` of the unit whose index is `index`: `{index}#{order:04}`.
pub(crate) fn chunk_ref(index: &BlobRef, order: u16) -> Result<BlobRef, BlobArgumentError> {
    BlobRef::new(format!("{index}#{order:04}")).map_err(|_| BlobArgumentError::ReferenceLength {
        actual: index.len(),
        max: MAX_INDEX_REF_LEN,
    })
}

/// The CRC-32C (Castagnoli) of `bytes`.
pub(crate) fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// The header fields of one chunk envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EnvelopeHeader {
    pub(crate) stripe: u8,
    pub(crate) order: u16,
    pub(crate) chunk_count: u16,
    pub(crate) data_len: u32,
    pub(crate) data_crc: u32,
}

/// The blob of one chunk: the 23-byte envelope followed by the data.
pub(crate) fn encode_chunk(header: &EnvelopeHeader, data: &[u8]) -> Bytes {
    let mut blob = BytesMut::with_capacity(BLOB_ENVELOPE_LEN + data.len());
    blob.put_slice(&ENVELOPE_MAGIC);
    blob.put_u8(ENVELOPE_VERSION);
    blob.put_u8(KIND_DATA_CHUNK);
    blob.put_u8(header.stripe);
    blob.put_u16(header.order);
    blob.put_u16(header.chunk_count);
    blob.put_u32(header.data_len);
    blob.put_u32(header.data_crc);
    let header_crc = crc32c(&blob[..ENVELOPE_CHECKED_LEN]);
    blob.put_u32(header_crc);
    debug_assert_eq!(blob.len(), BLOB_ENVELOPE_LEN);
    blob.put_slice(data);
    blob.freeze()
}

fn be_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// Checks a chunk blob against what the index expects of it and returns its data (a slice of
/// `blob`, no copy). Verifies magic, version, kind, the header checksum, every header field
/// against `expected`, the length, and the data checksum.
pub(crate) fn open_chunk(blob: &Bytes, expected: &EnvelopeHeader) -> Result<Bytes, EnvelopeError> {
    if blob.len() < BLOB_ENVELOPE_LEN {
        return Err(EnvelopeError::Truncated);
    }
    if blob[..4] != ENVELOPE_MAGIC {
        return Err(EnvelopeError::BadMagic);
    }
    if blob[4] != ENVELOPE_VERSION {
        return Err(EnvelopeError::UnsupportedVersion(blob[4]));
    }
    if blob[5] != KIND_DATA_CHUNK {
        return Err(EnvelopeError::WrongKind(blob[5]));
    }
    if crc32c(&blob[..ENVELOPE_CHECKED_LEN]) != be_u32(blob, ENVELOPE_CHECKED_LEN) {
        return Err(EnvelopeError::HeaderChecksum);
    }
    let found = EnvelopeHeader {
        stripe: blob[6],
        order: be_u16(blob, 7),
        chunk_count: be_u16(blob, 9),
        data_len: be_u32(blob, 11),
        data_crc: be_u32(blob, 15),
    };
    if found.stripe != expected.stripe
        || found.order != expected.order
        || found.chunk_count != expected.chunk_count
    {
        return Err(EnvelopeError::Misplaced);
    }
    if found.data_len != expected.data_len
        || blob.len() - BLOB_ENVELOPE_LEN != expected.data_len as usize
    {
        return Err(EnvelopeError::Length);
    }
    if found.data_crc != expected.data_crc {
        return Err(EnvelopeError::DataChecksum);
    }
    let data = blob.slice(BLOB_ENVELOPE_LEN..);
    if crc32c(&data) != expected.data_crc {
        return Err(EnvelopeError::DataChecksum);
    }
    Ok(data)
}

/// One chunk entry of the leading index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexChunk {
    pub(crate) stripe: u8,
    pub(crate) len: u32,
    pub(crate) crc: u32,
    pub(crate) reference: BlobRef,
}

/// The leading index of a stored unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Index {
    pub(crate) total_len: u64,
    pub(crate) crc32c: u32,
    pub(crate) sha256: [u8; 32],
    pub(crate) chunk_limit: u32,
    /// (first chunk, chunk count, length) per stripe.
    pub(crate) stripes: Vec<(u16, u16, u64)>,
    pub(crate) chunks: Vec<IndexChunk>,
}

impl Index {
    /// The envelope header chunk `order` must carry.
    pub(crate) fn envelope(&self, order: u16) -> EnvelopeHeader {
        let c = &self.chunks[usize::from(order)];
        EnvelopeHeader {
            stripe: c.stripe,
            order,
            chunk_count: self.chunks.len() as u16,
            data_len: c.len,
            data_crc: c.crc,
        }
    }

    /// The payload offset of every chunk, in order.
    pub(crate) fn offsets(&self) -> Vec<u64> {
        let mut at = 0u64;
        self.chunks
            .iter()
            .map(|c| {
                let o = at;
                at += u64::from(c.len);
                o
            })
            .collect()
    }

    pub(crate) fn encode(&self) -> Bytes {
        let refs: usize = self.chunks.iter().map(|c| c.reference.len()).sum();
        let len = INDEX_HEADER_LEN
            + self.stripes.len() * STRIPE_ENTRY_LEN
            + self.chunks.len() * CHUNK_ENTRY_FIXED_LEN
            + refs
            + INDEX_TRAILER_LEN;
        let mut b = BytesMut::with_capacity(len);
        b.put_slice(&INDEX_MAGIC);
        b.put_u8(INDEX_FORMAT_VERSION);
        b.put_u8(self.stripes.len() as u8);
        b.put_u16(self.chunks.len() as u16);
        b.put_u64(self.total_len);
        b.put_u32(self.crc32c);
        b.put_slice(&self.sha256);
        b.put_u32(self.chunk_limit);
        for &(first, count, len) in &self.stripes {
            b.put_u16(first);
            b.put_u16(count);
            b.put_u64(len);
        }
        for c in &self.chunks {
            b.put_u8(c.stripe);
            b.put_u32(c.len);
            b.put_u32(c.crc);
            b.put_u16(c.reference.len() as u16);
            b.put_slice(c.reference.as_bytes());
        }
        let crc = crc32c(&b);
        b.put_u32(crc);
        debug_assert_eq!(b.len(), len);
        b.freeze()
    }

    /// Decodes and validates an index; anything inconsistent is an error, never guessed at.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Index, IndexFormatError> {
        use IndexFormatError as E;
        if bytes.len() < INDEX_HEADER_LEN + INDEX_TRAILER_LEN {
            return Err(E::Truncated);
        }
        if bytes[..4] != INDEX_MAGIC {
            return Err(E::BadMagic);
        }
        if bytes[4] != INDEX_FORMAT_VERSION {
            return Err(E::UnsupportedVersion(bytes[4]));
        }
        if bytes.len() > MAX_BLOB_LEN {
            return Err(E::Layout("index larger than a blob"));
        }
        let (body, trailer) = bytes.split_at(bytes.len() - INDEX_TRAILER_LEN);
        if crc32c(body) != be_u32(trailer, 0) {
            return Err(E::Checksum);
        }
        let stripe_count = usize::from(body[5]);
        let chunk_count = usize::from(be_u16(body, 6));
        if !(1..=MAX_STRIPES).contains(&stripe_count) {
            return Err(E::StripeCount(stripe_count));
        }
        if !(1..=MAX_CHUNKS).contains(&chunk_count) {
            return Err(E::ChunkCount(chunk_count));
        }
        let total_len = be_u64(body, 8);
        if total_len > MAX_PAYLOAD_LEN {
            return Err(E::TotalTooLarge(total_len));
        }
        let crc = be_u32(body, 16);
        let mut sha256 = [0u8; 32];
        sha256.copy_from_slice(&body[20..52]);
        let chunk_limit = be_u32(body, 52);
        if chunk_limit == 0 || chunk_limit as usize > MAX_DATA_CHUNK_LEN {
            return Err(E::Layout("chunk limit outside 1..=64 MiB"));
        }
        let mut at = INDEX_HEADER_LEN;
        if body.len() < at + stripe_count * STRIPE_ENTRY_LEN {
            return Err(E::Truncated);
        }
        let mut stripes = Vec::with_capacity(stripe_count);
        let mut next_chunk = 0usize;
        let mut stripe_total = 0u64;
        for _ in 0..stripe_count {
            let first = be_u16(body, at);
            let count = be_u16(body, at + 2);
            let len = be_u64(body, at + 4);
            at += STRIPE_ENTRY_LEN;
            if usize::from(first) != next_chunk || count == 0 {
                return Err(E::Layout("stripes are not contiguous runs of chunks"));
            }
            next_chunk += usize::from(count);
            stripe_total = stripe_total.saturating_add(len);
            stripes.push((first, count, len));
        }
        if next_chunk != chunk_count {
            return Err(E::Layout("stripes do not cover every chunk"));
        }
        if stripe_total != total_len {
            return Err(E::Layout("stripe lengths do not add up to the total"));
        }
        let mut chunks = Vec::with_capacity(chunk_count);
        for (s, &(_, count, stripe_len)) in stripes.iter().enumerate() {
            let mut sum = 0u64;
            for _ in 0..count {
                if body.len() < at + CHUNK_ENTRY_FIXED_LEN {
                    return Err(E::Truncated);
                }
                let stripe = body[at];
                let len = be_u32(body, at + 1);
                let crc = be_u32(body, at + 5);
                let ref_len = usize::from(be_u16(body, at + 9));
                at += CHUNK_ENTRY_FIXED_LEN;
                if usize::from(stripe) != s {
                    return Err(E::Layout("chunk listed under the wrong stripe"));
                }
                if len > chunk_limit || (len == 0 && total_len != 0) {
                    return Err(E::Layout("chunk length outside 1..=chunk limit"));
                }
                if body.len() < at + ref_len {
                    return Err(E::Truncated);
                }
                let reference =
                    BlobRef::from_utf8(&body[at..at + ref_len]).map_err(|_| E::Reference)?;
                at += ref_len;
                sum += u64::from(len);
                chunks.push(IndexChunk {
                    stripe,
                    len,
                    crc,
                    reference,
                });
            }
            if sum != stripe_len {
                return Err(E::Layout("chunk lengths do not add up to their stripe"));
            }
        }
        if at != body.len() {
            return Err(E::Layout("trailing bytes after the last chunk"));
        }
        Ok(Index {
            total_len,
            crc32c: crc,
            sha256,
            chunk_limit,
            stripes,
            chunks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::plan::{UnitPlan, schedule};

    fn header() -> EnvelopeHeader {
        EnvelopeHeader {
            stripe: 3,
            order: 0x0102,
            chunk_count: 0x0fff,
            data_len: 4,
            data_crc: crc32c(b"data"),
        }
    }

    #[test]
    fn envelope_is_23_bytes_in_the_documented_layout() {
        let h = header();
        let blob = encode_chunk(&h, b"data");
        assert_eq!(blob.len(), 23 + 4);
        assert_eq!(&blob[0..4], b"ZLRC");
        assert_eq!(blob[4], 1, "envelope version");
        assert_eq!(blob[5], 1, "kind: data chunk");
        assert_eq!(blob[6], 3, "stripe");
        assert_eq!(&blob[7..9], &[0x01, 0x02], "order, big-endian");
        assert_eq!(&blob[9..11], &[0x0f, 0xff], "chunk count");
        assert_eq!(&blob[11..15], &[0, 0, 0, 4], "data length");
        assert_eq!(
            &blob[15..19],
            &crc32c(b"data").to_be_bytes(),
            "data CRC-32C"
        );
        assert_eq!(
            &blob[19..23],
            &crc32c(&blob[..19]).to_be_bytes(),
            "header CRC-32C"
        );
        assert_eq!(&blob[23..], b"data");
        assert_eq!(open_chunk(&blob, &h).unwrap(), Bytes::from_static(b"data"));
    }

    #[test]
    fn crc32c_is_the_castagnoli_polynomial() {
        // The standard check value of CRC-32C.
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn every_envelope_byte_is_checked() {
        let h = header();
        let blob = encode_chunk(&h, b"data");
        for at in 0..blob.len() {
            let mut bad = blob.to_vec();
            bad[at] ^= 0x40;
            assert!(open_chunk(&Bytes::from(bad), &h).is_err(), "byte {at}");
        }
        assert_eq!(
            open_chunk(&blob.slice(..22), &h),
            Err(EnvelopeError::Truncated)
        );
        assert_eq!(
            open_chunk(&blob.slice(..26), &h),
            Err(EnvelopeError::Length)
        );
        let moved = EnvelopeHeader { order: 7, ..h };
        assert_eq!(open_chunk(&blob, &moved), Err(EnvelopeError::Misplaced));
    }

    fn index(total: u64, limit: usize, stripes: usize) -> Index {
        let plan = UnitPlan::new(total, limit, stripes).unwrap();
        let base = BlobRef::new("unit").unwrap();
        Index {
            total_len: total,
            crc32c: 7,
            sha256: [9; 32],
            chunk_limit: plan.chunk_limit,
            stripes: plan.stripe_table(),
            chunks: plan
                .chunks
                .iter()
                .map(|c| IndexChunk {
                    stripe: c.stripe,
                    len: c.len,
                    crc: c.order.into(),
                    reference: chunk_ref(&base, c.order).unwrap(),
                })
                .collect(),
        }
    }

    #[test]
    fn index_round_trips_and_every_byte_is_checked() {
        let i = index(1000, 64, 4);
        let bytes = i.encode();
        assert_eq!(Index::decode(&bytes).unwrap(), i);
        assert_eq!(&bytes[..4], b"ZLRI");
        for at in 0..bytes.len() {
            let mut bad = bytes.to_vec();
            bad[at] ^= 0x01;
            assert!(Index::decode(&bad).is_err(), "byte {at}");
        }
        for cut in [0, 10, bytes.len() - 1] {
            assert!(Index::decode(&bytes[..cut]).is_err());
        }
    }

    /// Re-seals an edited index body with a valid trailer, so only the edit is judged.
    fn reseal(mut body: Vec<u8>) -> Vec<u8> {
        body.truncate(body.len() - 4);
        let crc = crc32c(&body);
        body.extend_from_slice(&crc.to_be_bytes());
        body
    }

    #[test]
    fn index_with_more_than_64_stripes_or_4096_chunks_is_rejected() {
        let bytes = index(64 * 64, 64, 64).encode().to_vec();
        assert!(Index::decode(&bytes).is_ok());
        let mut bad = bytes.clone();
        bad[5] = 65;
        assert_eq!(
            Index::decode(&reseal(bad)),
            Err(IndexFormatError::StripeCount(65))
        );
        let mut bad = bytes.clone();
        bad[6..8].copy_from_slice(&4097u16.to_be_bytes());
        assert_eq!(
            Index::decode(&reseal(bad)),
            Err(IndexFormatError::ChunkCount(4097))
        );
        let mut bad = bytes;
        bad[8..16].copy_from_slice(&(MAX_PAYLOAD_LEN + 1).to_be_bytes());
        assert_eq!(
            Index::decode(&reseal(bad)),
            Err(IndexFormatError::TotalTooLarge(MAX_PAYLOAD_LEN + 1))
        );
    }

    #[test]
    fn index_of_4096_chunks_with_longest_references_fits_one_blob() {
        let plan = UnitPlan::new(MAX_PAYLOAD_LEN, MAX_DATA_CHUNK_LEN, MAX_STRIPES).unwrap();
        let base = BlobRef::new("x".repeat(MAX_INDEX_REF_LEN)).unwrap();
        let i = Index {
            total_len: MAX_PAYLOAD_LEN,
            crc32c: 0,
            sha256: [0; 32],
            chunk_limit: plan.chunk_limit,
            stripes: plan.stripe_table(),
            chunks: plan
                .chunks
                .iter()
                .map(|c| IndexChunk {
                    stripe: c.stripe,
                    len: c.len,
                    crc: 0,
                    reference: chunk_ref(&base, c.order).unwrap(),
                })
                .collect(),
        };
        let bytes = i.encode();
        assert!(bytes.len() <= MAX_BLOB_LEN, "{}", bytes.len());
        assert_eq!(Index::decode(&bytes).unwrap(), i);
    }

    #[test]
    fn whole_payload_of_256_gib_plans_4096_chunks_of_64_mib_in_64_stripes() {
        let plan = UnitPlan::new(MAX_PAYLOAD_LEN, MAX_DATA_CHUNK_LEN, MAX_STRIPES).unwrap();
        assert_eq!(plan.stripes.len(), 64);
        assert_eq!(plan.chunks.len(), 4096);
        assert!(
            plan.chunks
                .iter()
                .all(|c| c.len as usize == MAX_DATA_CHUNK_LEN)
        );
        assert_eq!(
            UnitPlan::new(MAX_PAYLOAD_LEN + 1, MAX_DATA_CHUNK_LEN, MAX_STRIPES),
            Err(BlobArgumentError::PayloadTooLarge {
                actual: MAX_PAYLOAD_LEN + 1,
                max: MAX_PAYLOAD_LEN
            })
        );
    }

    #[test]
    fn plan_splits_stripes_and_chunks_evenly() {
        let plan = UnitPlan::new(1001, 100, 4).unwrap();
        let lens: Vec<u64> = plan.stripes.iter().map(|s| s.len).collect();
        assert_eq!(lens, vec![251, 250, 250, 250]);
        // 251 bytes at most 100 per chunk: three chunks of 84, 84, 83.
        let first: Vec<u32> = plan.chunks[..3].iter().map(|c| c.len).collect();
        assert_eq!(first, vec![84, 84, 83]);
        assert_eq!(plan.chunks.len(), 12);
        assert_eq!(schedule(&plan.stripe_table())[..4], [0, 3, 6, 9]);
        let two = UnitPlan::new(10, 2, 2).unwrap();
        assert_eq!(schedule(&two.stripe_table()), vec![0, 3, 1, 4, 2, 5]);
        // A 4-byte stripe target with 100-byte chunks: 1001 bytes over 64 stripes of 15 or 16.
        let spread = UnitPlan::with_stripe_target(1001, 100, 64, 4).unwrap();
        assert_eq!(spread.stripes.len(), 64);
        assert_eq!(spread.chunks.len(), 64);
        // 64 MiB chunks with a 4 MiB target: 16 MiB is four stripes of one 4 MiB chunk.
        let mid = UnitPlan::with_stripe_target(16 << 20, MAX_DATA_CHUNK_LEN, 64, 4 << 20).unwrap();
        assert_eq!(mid.chunks.len(), 4);
        assert!(mid.chunks.iter().all(|c| c.len == 4 << 20));
        // The bound is unchanged: 256 GiB is still 4,096 chunks of 64 MiB.
        let full =
            UnitPlan::with_stripe_target(MAX_PAYLOAD_LEN, MAX_DATA_CHUNK_LEN, 64, 4 << 20).unwrap();
        assert_eq!(full.chunks.len(), 4096);
        let empty = UnitPlan::new(0, 100, 64).unwrap();
        assert_eq!(empty.stripes.len(), 1);
        assert_eq!(empty.chunks.len(), 1);
        assert_eq!(empty.chunks[0].len, 0);
    }
}
