//! Byte layouts, bounds and typed decode errors of the Restore header and chunks.

use bytes::Bytes;

use super::super::{
    BindingError, CHUNK_HEADER_LEN, FenceField, FormatError, MAX_CHUNK_DATA_LEN, MAX_CHUNK_LIMIT,
    MAX_FENCE_GENERATION, MAX_RESTORE_PAYLOAD_LEN, PayloadChunk, RESTORE_HEADER_LEN, RestoreHeader,
    RestoreShape, SourceFence, TransferBinding, TransferErrorKind,
};
use super::binding;

fn shape(total_len: u64, chunk_len: u32, chunk_count: u32) -> RestoreShape {
    RestoreShape {
        total_len,
        chunk_len,
        chunk_count,
        crc32c: 0xdead_beef,
    }
}

/// A valid header's encoding with the shape fields overwritten (to reach decode bounds).
fn encoded_with(total_len: u64, chunk_len: u32, chunk_count: u32) -> Vec<u8> {
    let mut raw = RestoreHeader::new(binding(1), shape(10, 10, 1))
        .unwrap()
        .encode()
        .to_vec();
    raw[42..50].copy_from_slice(&total_len.to_be_bytes());
    raw[50..54].copy_from_slice(&chunk_len.to_be_bytes());
    raw[54..58].copy_from_slice(&chunk_count.to_be_bytes());
    raw
}

#[test]
fn restore_header_round_trips_through_its_62_byte_encoding() {
    let header = RestoreHeader::new(binding(9), shape(1_000, 300, 4)).unwrap();
    let raw = header.encode();
    assert_eq!(raw.len(), RESTORE_HEADER_LEN);
    assert_eq!(RESTORE_HEADER_LEN, 62);
    assert_eq!(raw[0], 0x01);
    assert_eq!(raw[1], 1);
    assert_eq!(&raw[2..18], &super::RELOCATION.to_be_bytes());
    let back = RestoreHeader::decode(&raw).unwrap();
    assert_eq!(back, header);
    assert_eq!(back.total_len(), 1_000);
    assert_eq!(back.chunk_len(), 300);
    assert_eq!(back.chunk_count(), 4);
    assert_eq!(back.crc32c(), 0xdead_beef);
    assert_eq!(back.binding().target_attempt().get(), 9);
    assert_eq!(
        back.binding()
            .source_fence()
            .authority_owner_generation()
            .get(),
        7
    );
    assert_eq!(
        back.binding().source_fence().owner_lease_generation().get(),
        3
    );
}

#[test]
fn payload_chunk_round_trips_and_decodes_zero_copy() {
    let chunk = PayloadChunk::new(binding(2), 5, Bytes::from_static(b"some bytes")).unwrap();
    let raw = chunk.encode();
    assert_eq!(raw.len(), CHUNK_HEADER_LEN + 10);
    assert_eq!(chunk.encoded_len(), raw.len());
    assert_eq!(&raw[..CHUNK_HEADER_LEN], &chunk.encode_header());
    let back = PayloadChunk::decode(raw.clone()).unwrap();
    assert_eq!(back, chunk);
    assert_eq!(back.bytes().as_ptr(), raw[CHUNK_HEADER_LEN..].as_ptr());
}

#[test]
fn restore_header_of_256_mib_is_accepted_and_one_byte_more_is_malformed() {
    let max = MAX_RESTORE_PAYLOAD_LEN;
    assert_eq!(max, 256 * 1024 * 1024);
    let chunk = 256 * 1024;
    let count = u32::try_from(max.div_ceil(chunk)).unwrap();
    let ok = RestoreHeader::new(binding(1), shape(max, chunk as u32, count)).unwrap();
    assert_eq!(RestoreHeader::decode(&ok.encode()).unwrap(), ok);

    let past = shape(max + 1, chunk as u32, count + 1);
    let want = FormatError::PayloadTooLarge {
        actual: max + 1,
        max,
    };
    assert_eq!(RestoreHeader::new(binding(1), past), Err(want));
    let raw = encoded_with(max + 1, chunk as u32, count + 1);
    assert_eq!(RestoreHeader::decode(&raw), Err(want));
    assert_eq!(want.kind(), TransferErrorKind::Malformed);
}

#[test]
fn declared_chunk_length_at_the_chunk_bound_is_accepted_and_one_more_is_malformed() {
    let at = MAX_CHUNK_DATA_LEN as u32;
    let total = u64::from(at) * 2;
    assert!(RestoreHeader::decode(&encoded_with(total, at, 2)).is_ok());
    assert_eq!(
        RestoreHeader::decode(&encoded_with(total, at + 1, 2)),
        Err(FormatError::ChunkTooLarge {
            actual: u64::from(at) + 1,
            max: MAX_CHUNK_DATA_LEN as u64,
        })
    );
}

#[test]
fn chunk_count_disagreeing_with_length_is_malformed() {
    // 1,000 bytes in chunks of 300 is exactly 4 chunks.
    assert!(RestoreHeader::new(binding(1), shape(1_000, 300, 4)).is_ok());
    for (total, len, count) in [
        (1_000, 300, 3),
        (1_000, 300, 5),
        (1_000, 1_001, 1),
        (5, 0, 0),
    ] {
        assert_eq!(
            RestoreHeader::new(binding(1), shape(total, len, count)),
            Err(FormatError::Shape {
                total_len: total,
                chunk_len: len,
                chunk_count: count,
            })
        );
        assert!(matches!(
            RestoreHeader::decode(&encoded_with(total, len, count)),
            Err(FormatError::Shape { .. })
        ));
    }
}

#[test]
fn empty_payload_declares_no_chunks() {
    assert!(RestoreHeader::new(binding(1), shape(0, 0, 0)).is_ok());
    for (len, count) in [(0, 1), (1, 0), (1, 1)] {
        assert!(matches!(
            RestoreHeader::new(binding(1), shape(0, len, count)),
            Err(FormatError::Shape { .. })
        ));
    }
}

#[test]
fn chunk_of_max_encoded_length_decodes_and_one_byte_more_is_malformed() {
    let data = Bytes::from(vec![0xa5; MAX_CHUNK_DATA_LEN]);
    let chunk = PayloadChunk::new(binding(1), 0, data).unwrap();
    let raw = chunk.encode();
    assert_eq!(raw.len(), MAX_CHUNK_LIMIT);
    assert_eq!(PayloadChunk::decode(raw.clone()).unwrap(), chunk);

    let mut longer = raw.to_vec();
    longer.push(0);
    let want = FormatError::ChunkTooLarge {
        actual: MAX_CHUNK_DATA_LEN as u64 + 1,
        max: MAX_CHUNK_DATA_LEN as u64,
    };
    assert_eq!(PayloadChunk::decode(Bytes::from(longer)), Err(want));
    let too_big = Bytes::from(vec![0; MAX_CHUNK_DATA_LEN + 1]);
    assert_eq!(PayloadChunk::new(binding(1), 0, too_big), Err(want));
}

#[test]
fn chunk_without_data_is_malformed() {
    assert_eq!(
        PayloadChunk::new(binding(1), 0, Bytes::new()),
        Err(FormatError::EmptyChunk)
    );
    let header_only = PayloadChunk::new(binding(1), 3, Bytes::from_static(b"x"))
        .unwrap()
        .encode()
        .slice(..CHUNK_HEADER_LEN);
    assert_eq!(
        PayloadChunk::decode(header_only),
        Err(FormatError::EmptyChunk)
    );
}

#[test]
fn truncated_and_overlong_messages_are_malformed() {
    let header = RestoreHeader::new(binding(1), shape(10, 10, 1))
        .unwrap()
        .encode();
    for len in 0..RESTORE_HEADER_LEN {
        assert_eq!(
            RestoreHeader::decode(&header[..len]),
            Err(FormatError::Truncated {
                needed: RESTORE_HEADER_LEN,
                actual: len,
            })
        );
    }
    let mut longer = header.to_vec();
    longer.push(0);
    assert_eq!(
        RestoreHeader::decode(&longer),
        Err(FormatError::TrailingBytes {
            expected: RESTORE_HEADER_LEN,
            actual: RESTORE_HEADER_LEN + 1,
        })
    );
    let chunk = PayloadChunk::new(binding(1), 0, Bytes::from_static(b"x"))
        .unwrap()
        .encode();
    for len in 0..CHUNK_HEADER_LEN {
        assert_eq!(
            PayloadChunk::decode(chunk.slice(..len)),
            Err(FormatError::Truncated {
                needed: CHUNK_HEADER_LEN,
                actual: len,
            })
        );
    }
}

#[test]
fn another_message_kind_or_format_version_is_malformed() {
    let header = RestoreHeader::new(binding(1), shape(10, 10, 1))
        .unwrap()
        .encode();
    let chunk = PayloadChunk::new(binding(1), 0, Bytes::from_static(b"x"))
        .unwrap()
        .encode();
    assert_eq!(
        RestoreHeader::decode(&chunk),
        Err(FormatError::UnexpectedKind(0x02))
    );
    assert_eq!(
        PayloadChunk::decode(header.clone()),
        Err(FormatError::UnexpectedKind(0x01))
    );
    let mut v2 = header.to_vec();
    v2[1] = 2;
    assert_eq!(
        RestoreHeader::decode(&v2),
        Err(FormatError::UnsupportedVersion(2))
    );
}

#[test]
fn binding_values_out_of_range_are_refused() {
    let fence = SourceFence::new(1, 1).unwrap();
    assert_eq!(
        TransferBinding::new(0, 1, fence),
        Err(BindingError::ZeroRelocationId)
    );
    assert_eq!(
        TransferBinding::new(1, 0, fence),
        Err(BindingError::ZeroTargetAttempt)
    );
    assert!(SourceFence::new(MAX_FENCE_GENERATION, MAX_FENCE_GENERATION).is_ok());
    assert_eq!(MAX_FENCE_GENERATION, (1 << 63) - 2);
    for (owner, lease, field, value) in [
        (0, 1, FenceField::AuthorityOwnerGeneration, 0),
        (
            MAX_FENCE_GENERATION + 1,
            1,
            FenceField::AuthorityOwnerGeneration,
            MAX_FENCE_GENERATION + 1,
        ),
        (1, 0, FenceField::OwnerLeaseGeneration, 0),
        (
            1,
            MAX_FENCE_GENERATION + 1,
            FenceField::OwnerLeaseGeneration,
            MAX_FENCE_GENERATION + 1,
        ),
    ] {
        let err = SourceFence::new(owner, lease).unwrap_err();
        assert_eq!(
            err,
            BindingError::GenerationOutOfRange {
                field,
                value,
                max: MAX_FENCE_GENERATION,
            }
        );
        assert_eq!(err.kind(), TransferErrorKind::InvalidArgument);
    }
}

#[test]
fn decoded_binding_values_out_of_range_are_malformed() {
    let good = RestoreHeader::new(binding(1), shape(10, 10, 1))
        .unwrap()
        .encode();
    let cases: [(std::ops::Range<usize>, BindingError); 3] = [
        (2..18, BindingError::ZeroRelocationId),
        (18..26, BindingError::ZeroTargetAttempt),
        (
            26..34,
            BindingError::GenerationOutOfRange {
                field: FenceField::AuthorityOwnerGeneration,
                value: 0,
                max: MAX_FENCE_GENERATION,
            },
        ),
    ];
    for (range, want) in cases {
        let mut raw = good.to_vec();
        raw[range].fill(0);
        assert_eq!(RestoreHeader::decode(&raw), Err(FormatError::Binding(want)));
    }
    let mut raw = PayloadChunk::new(binding(1), 0, Bytes::from_static(b"x"))
        .unwrap()
        .encode()
        .to_vec();
    raw[34..42].copy_from_slice(&u64::MAX.to_be_bytes());
    assert!(matches!(
        PayloadChunk::decode(Bytes::from(raw)),
        Err(FormatError::Binding(BindingError::GenerationOutOfRange {
            field: FenceField::OwnerLeaseGeneration,
            ..
        }))
    ));
}
