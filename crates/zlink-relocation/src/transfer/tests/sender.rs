//! Sender-side chunking.

use bytes::Bytes;

use super::super::{
    ChunkLimit, ChunkingError, MAX_RESTORE_PAYLOAD_LEN, TransferErrorKind, chunk_payload,
};
use super::{binding, data_limit, payload};

#[test]
fn chunks_are_zero_copy_slices_at_most_the_limit() {
    let data = payload(1_000);
    let limit = data_limit(300);
    let (header, chunks) = chunk_payload(binding(1), data.clone(), limit).unwrap();
    assert_eq!(header.total_len(), 1_000);
    assert_eq!(header.chunk_len(), 300);
    assert_eq!(header.chunk_count(), 4);
    assert_eq!(header.crc32c(), crc32c::crc32c(&data));
    assert_eq!(header.binding(), binding(1));
    assert_eq!(chunks.len(), 4);
    let chunks: Vec<_> = chunks.collect();
    let lens: Vec<_> = chunks.iter().map(|c| c.bytes().len()).collect();
    assert_eq!(lens, [300, 300, 300, 100]);
    for (i, chunk) in chunks.iter().enumerate() {
        assert_eq!(chunk.index(), i as u32);
        assert_eq!(chunk.binding(), binding(1));
        assert!(chunk.encoded_len() <= limit.get());
        assert_eq!(chunk.bytes().as_ptr(), data[i * 300..].as_ptr());
    }
}

#[test]
fn payload_smaller_than_one_chunk_is_one_chunk() {
    let data = payload(10);
    let (header, chunks) = chunk_payload(binding(1), data.clone(), ChunkLimit::default()).unwrap();
    assert_eq!((header.chunk_len(), header.chunk_count()), (10, 1));
    let chunks: Vec<_> = chunks.collect();
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].bytes(), &data);
}

#[test]
fn empty_payload_has_a_header_and_no_chunks() {
    let (header, chunks) = chunk_payload(binding(1), Bytes::new(), data_limit(1)).unwrap();
    assert_eq!(
        (header.total_len(), header.chunk_len(), header.chunk_count()),
        (0, 0, 0)
    );
    assert_eq!(header.crc32c(), crc32c::crc32c(&[]));
    assert_eq!(chunks.count(), 0);
}

#[test]
fn payload_of_256_mib_is_chunked_and_one_byte_more_is_refused() {
    let max = MAX_RESTORE_PAYLOAD_LEN as usize;
    let limit = ChunkLimit::default();
    let (header, chunks) = chunk_payload(binding(1), Bytes::from(vec![0u8; max]), limit).unwrap();
    assert_eq!(header.total_len(), MAX_RESTORE_PAYLOAD_LEN);
    let per_chunk = limit.data_len();
    assert_eq!(header.chunk_count() as usize, max.div_ceil(per_chunk));
    assert_eq!(chunks.len(), header.chunk_count() as usize);

    let err = chunk_payload(binding(1), Bytes::from(vec![0u8; max + 1]), limit).unwrap_err();
    assert_eq!(
        err,
        ChunkingError::PayloadTooLarge {
            actual: MAX_RESTORE_PAYLOAD_LEN + 1,
            max: MAX_RESTORE_PAYLOAD_LEN,
        }
    );
    assert_eq!(err.kind(), TransferErrorKind::TooLarge);
}

#[test]
fn chunking_the_same_payload_again_gives_the_same_header_and_chunks() {
    let data = payload(5_000);
    let (h1, c1) = chunk_payload(binding(4), data.clone(), data_limit(777)).unwrap();
    let (h2, c2) = chunk_payload(binding(4), data, data_limit(777)).unwrap();
    assert_eq!(h1, h2);
    assert!(c1.eq(c2));
}
