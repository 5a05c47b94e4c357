//! Target-side assembly: binding checks, rejections, verification, retransmission, cancel.

use bytes::Bytes;

use super::super::{
    Assembly, AssemblyError, AssemblyStatus, ChunkOutcome, PayloadChunk, RestoreHeader,
    RestoreOutcome, RestoreShape, SourceFence, TransferBinding, TransferErrorKind, chunk_payload,
};
use super::{RELOCATION, binding, data_limit, payload};

/// The header and chunks of `len` pattern bytes in chunks of `per_chunk`, for attempt 1.
fn split(len: usize, per_chunk: usize) -> (Bytes, RestoreHeader, Vec<PayloadChunk>) {
    let data = payload(len);
    let (header, chunks) = chunk_payload(binding(1), data.clone(), data_limit(per_chunk)).unwrap();
    (data, header, chunks.collect())
}

/// The same chunk (index and length) with other bytes and `binding`.
fn foreign(chunk: &PayloadChunk, binding: TransferBinding) -> PayloadChunk {
    let bytes = chunk.bytes().iter().map(|b| !b).collect::<Vec<u8>>();
    PayloadChunk::new(binding, chunk.index(), bytes.into()).unwrap()
}

fn with_crc(header: &RestoreHeader, crc32c: u32) -> RestoreHeader {
    RestoreHeader::new(
        header.binding(),
        RestoreShape {
            crc32c,
            ..header.shape()
        },
    )
    .unwrap()
}

#[test]
fn in_order_chunks_assemble_to_the_payload() {
    let (data, header, chunks) = split(1_000, 300);
    let mut assembly = Assembly::new(header);
    let mut outcomes = Vec::new();
    for chunk in chunks {
        outcomes.push(assembly.accept(chunk).unwrap());
    }
    assert_eq!(
        outcomes,
        [
            ChunkOutcome::Accepted {
                received: 1,
                expected: 4
            },
            ChunkOutcome::Accepted {
                received: 2,
                expected: 4
            },
            ChunkOutcome::Accepted {
                received: 3,
                expected: 4
            },
            ChunkOutcome::Complete,
        ]
    );
    assert_eq!(assembly.status(), AssemblyStatus::Complete);
    assert_eq!(assembly.payload().unwrap(), data);
    assert_eq!(assembly.held_bytes(), 1_000);
}

#[test]
fn out_of_order_chunks_assemble_to_the_payload() {
    let (data, header, mut chunks) = split(1_000, 300);
    chunks.reverse();
    let mut assembly = Assembly::new(header);
    let last = chunks.pop().unwrap(); // chunk 0 last
    for chunk in chunks {
        assert!(matches!(
            assembly.accept(chunk),
            Ok(ChunkOutcome::Accepted { .. })
        ));
    }
    assert_eq!(assembly.held_bytes(), 700);
    assert_eq!(assembly.accept(last), Ok(ChunkOutcome::Complete));
    assert_eq!(assembly.payload().unwrap(), data);
}

#[test]
fn single_chunk_payload_is_handed_over_without_a_copy() {
    let (_, header, chunks) = split(100, 300);
    let ptr = chunks[0].bytes().as_ptr();
    let mut assembly = Assembly::new(header);
    assert_eq!(
        assembly.accept(chunks.into_iter().next().unwrap()),
        Ok(ChunkOutcome::Complete)
    );
    assert_eq!(assembly.payload().unwrap().as_ptr(), ptr);
}

#[test]
fn empty_payload_is_complete_at_once() {
    let (data, header, chunks) = split(0, 10);
    assert!(chunks.is_empty());
    let assembly = Assembly::new(header);
    assert_eq!(assembly.status(), AssemblyStatus::Complete);
    assert_eq!(assembly.payload().unwrap(), data);

    let bad = Assembly::new(with_crc(&header, 1));
    assert!(matches!(
        bad.payload(),
        Err(AssemblyError::ChecksumMismatch { declared: 1, .. })
    ));
}

#[test]
fn chunk_with_another_binding_is_discarded_never_assembled() {
    let (data, header, chunks) = split(1_000, 300);
    let fence = SourceFence::new(7, 3).unwrap();
    let others = [
        binding(2),                                              // earlier/later attempt
        TransferBinding::new(RELOCATION + 1, 1, fence).unwrap(), // another move
        TransferBinding::new(RELOCATION, 1, SourceFence::new(8, 3).unwrap()).unwrap(), // other owner gen
        TransferBinding::new(RELOCATION, 1, SourceFence::new(7, 4).unwrap()).unwrap(), // other run
    ];
    let mut assembly = Assembly::new(header);
    let mut discarded = 0;
    for chunk in chunks {
        for other in others {
            assert_eq!(
                assembly.accept(foreign(&chunk, other)),
                Ok(ChunkOutcome::Discarded)
            );
            discarded += 1;
        }
        assembly.accept(chunk).unwrap();
    }
    assert_eq!(assembly.discarded(), discarded);
    assert_eq!(assembly.payload().unwrap(), data);
}

#[test]
fn chunk_with_another_binding_does_not_fill_a_missing_index() {
    let (_, header, chunks) = split(600, 300);
    let mut assembly = Assembly::new(header);
    assembly.accept(chunks[0].clone()).unwrap();
    assert_eq!(
        assembly.accept(foreign(&chunks[1], binding(2))),
        Ok(ChunkOutcome::Discarded)
    );
    assert_eq!(
        assembly.status(),
        AssemblyStatus::Receiving {
            received: 1,
            expected: 2
        }
    );
    assert_eq!(
        assembly.payload(),
        Err(AssemblyError::Incomplete {
            received: 1,
            expected: 2
        })
    );
}

#[test]
fn checksum_mismatch_restores_nothing() {
    let (_, header, chunks) = split(1_000, 300);
    let declared = header.crc32c() ^ 1;
    let mut assembly = Assembly::new(with_crc(&header, declared));
    let mut results: Vec<_> = chunks.iter().cloned().map(|c| assembly.accept(c)).collect();
    let last = results.pop().unwrap();
    assert!(
        results
            .iter()
            .all(|r| matches!(r, Ok(ChunkOutcome::Accepted { .. })))
    );
    let want = AssemblyError::ChecksumMismatch {
        declared,
        actual: header.crc32c(),
    };
    assert_eq!(last, Err(want));
    assert_eq!(want.kind(), TransferErrorKind::ChecksumMismatch);
    assert_eq!(
        assembly.status(),
        AssemblyStatus::ChecksumMismatch {
            declared,
            actual: header.crc32c()
        }
    );
    assert_eq!(assembly.payload(), Err(want));
    assert_eq!(assembly.held_bytes(), 0);
    // Nothing revives it: neither a chunk again nor the same Restore again.
    assert_eq!(assembly.accept(chunks[0].clone()), Err(want));
    assert_eq!(
        assembly.accept_restore(&with_crc(&header, declared)),
        Err(want)
    );
}

#[test]
fn corrupted_chunk_byte_restores_nothing() {
    let (_, header, mut chunks) = split(1_000, 300);
    let mut bytes = chunks[2].bytes().to_vec();
    bytes[17] ^= 0x40;
    chunks[2] = PayloadChunk::new(binding(1), 2, bytes.into()).unwrap();
    let mut assembly = Assembly::new(header);
    let last = chunks
        .into_iter()
        .map(|c| assembly.accept(c))
        .last()
        .unwrap();
    assert!(matches!(last, Err(AssemblyError::ChecksumMismatch { .. })));
    assert!(assembly.payload().is_err());
}

#[test]
fn duplicate_chunk_is_rejected_and_changes_nothing() {
    let (data, header, chunks) = split(1_000, 300);
    let mut assembly = Assembly::new(header);
    assembly.accept(chunks[0].clone()).unwrap();
    assembly.accept(chunks[2].clone()).unwrap();
    for index in [0, 2] {
        let err = assembly.accept(chunks[index].clone()).unwrap_err();
        assert_eq!(
            err,
            AssemblyError::DuplicateChunk {
                index: index as u32
            }
        );
        assert_eq!(err.kind(), TransferErrorKind::Rejected);
    }
    assert_eq!(
        assembly.status(),
        AssemblyStatus::Receiving {
            received: 2,
            expected: 4
        }
    );
    assert_eq!(assembly.held_bytes(), 600);
    assembly.accept(chunks[1].clone()).unwrap();
    assert_eq!(
        assembly.accept(chunks[3].clone()),
        Ok(ChunkOutcome::Complete)
    );
    assert_eq!(
        assembly.accept(chunks[3].clone()),
        Err(AssemblyError::DuplicateChunk { index: 3 })
    );
    assert_eq!(assembly.payload().unwrap(), data);
}

#[test]
fn last_chunk_index_is_accepted_and_one_past_it_is_out_of_range() {
    let (_, header, chunks) = split(1_000, 300);
    let mut assembly = Assembly::new(header);
    let past = PayloadChunk::new(binding(1), 4, chunks[3].bytes().clone()).unwrap();
    assert_eq!(
        assembly.accept(past),
        Err(AssemblyError::IndexOutOfRange {
            index: 4,
            chunk_count: 4
        })
    );
    assert_eq!(assembly.held_bytes(), 0);
    assert!(matches!(
        assembly.accept(chunks[3].clone()),
        Ok(ChunkOutcome::Accepted { received: 1, .. })
    ));
}

#[test]
fn chunk_with_another_length_than_its_index_implies_is_rejected() {
    let (_, header, _) = split(1_000, 300);
    let mut assembly = Assembly::new(header);
    for (index, len, expected) in [(0, 299, 300), (0, 301, 300), (3, 300, 100), (3, 99, 100)] {
        let chunk = PayloadChunk::new(binding(1), index, payload(len)).unwrap();
        assert_eq!(
            assembly.accept(chunk),
            Err(AssemblyError::ChunkLengthMismatch {
                index,
                expected,
                actual: len as u32
            })
        );
    }
    assert_eq!(assembly.held_bytes(), 0);
}

#[test]
fn retransmitted_restore_with_same_values_reuses_the_assembly() {
    let (data, header, chunks) = split(1_000, 300);
    let mut assembly = Assembly::new(header);
    assembly.accept(chunks[0].clone()).unwrap();
    assert_eq!(assembly.accept_restore(&header), Ok(RestoreOutcome::Reused));
    assert_eq!(assembly.held_bytes(), 300);
    for chunk in chunks.into_iter().skip(1) {
        assembly.accept(chunk).unwrap();
    }
    assert_eq!(assembly.accept_restore(&header), Ok(RestoreOutcome::Reused));
    assert_eq!(assembly.payload().unwrap(), data);
}

#[test]
fn retransmitted_restore_with_other_checksum_conflicts() {
    let (data, header, chunks) = split(1_000, 300);
    let mut assembly = Assembly::new(header);
    assembly.accept(chunks[0].clone()).unwrap();
    let other = with_crc(&header, header.crc32c() ^ 0xffff);
    let err = assembly.accept_restore(&other).unwrap_err();
    assert_eq!(
        err,
        AssemblyError::Conflict {
            first: header.shape(),
            retransmitted: other.shape()
        }
    );
    assert_eq!(err.kind(), TransferErrorKind::Conflict);
    // Neither reused nor overwritten: the first declaration still governs.
    assert_eq!(assembly.header(), &header);
    assert_eq!(assembly.held_bytes(), 300);
    for chunk in chunks.into_iter().skip(1) {
        assembly.accept(chunk).unwrap();
    }
    assert_eq!(assembly.payload().unwrap(), data);
}

#[test]
fn retransmitted_restore_with_other_length_conflicts() {
    let (_, header, _) = split(1_000, 300);
    let mut assembly = Assembly::new(header);
    let longer = RestoreHeader::new(
        header.binding(),
        RestoreShape {
            total_len: 1_001,
            ..header.shape()
        },
    )
    .unwrap();
    assert!(matches!(
        assembly.accept_restore(&longer),
        Err(AssemblyError::Conflict { .. })
    ));
    assert_eq!(assembly.header(), &header);
}

#[test]
fn restore_for_another_attempt_is_discarded() {
    let (_, header, chunks) = split(1_000, 300);
    let mut assembly = Assembly::new(header);
    assembly.accept(chunks[0].clone()).unwrap();
    let (other, _) = chunk_payload(binding(2), payload(1_000), data_limit(300)).unwrap();
    assert_eq!(
        assembly.accept_restore(&other),
        Ok(RestoreOutcome::Discarded)
    );
    assert_eq!(assembly.discarded(), 1);
    assert_eq!(assembly.header(), &header);
    assert_eq!(assembly.held_bytes(), 300);
}

#[test]
fn cancellation_discards_the_assembly() {
    let (_, header, chunks) = split(1_000, 300);
    let mut assembly = Assembly::new(header);
    assembly.accept(chunks[1].clone()).unwrap();
    assembly.accept(chunks[0].clone()).unwrap();
    assembly.accept(foreign(&chunks[2], binding(2))).unwrap();
    let cancelled = assembly.cancel();
    assert_eq!(cancelled.binding, binding(1));
    assert_eq!(cancelled.received_chunks, 2);
    assert_eq!(cancelled.held_bytes, 600);
    assert_eq!(cancelled.discarded, 1);
}

#[test]
fn payload_before_the_last_chunk_is_incomplete() {
    let (_, header, chunks) = split(1_000, 300);
    let mut assembly = Assembly::new(header);
    for chunk in chunks.into_iter().take(3) {
        assembly.accept(chunk).unwrap();
    }
    let err = assembly.payload().unwrap_err();
    assert_eq!(
        err,
        AssemblyError::Incomplete {
            received: 3,
            expected: 4
        }
    );
    assert_eq!(err.kind(), TransferErrorKind::Incomplete);
}
