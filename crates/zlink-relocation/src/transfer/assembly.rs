//! Target side: assemble the chunks of one Restore, bound to its binding, and verify the whole
//! payload before anything can be restored (21 §1.3 step 5, §9.1, §9.2, §9.4).

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};

use super::binding::TransferBinding;
use super::error::AssemblyError;
use super::wire::{PayloadChunk, RestoreHeader};

/// What [`Assembly::accept`] did with a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChunkOutcome {
    /// The chunk is in; `received` of `expected` chunks are in.
    Accepted {
        /// Chunks in, this one included.
        received: u32,
        /// Chunks declared.
        expected: u32,
    },
    /// This was the last chunk and the payload matched its length and CRC-32C:
    /// [`Assembly::payload`] now returns it.
    Complete,
    /// The chunk carries another binding (an earlier attempt, another move or another source
    /// fence): discarded without touching the assembly, and counted.
    Discarded,
}

/// What [`Assembly::accept_restore`] did with a retransmitted Restore request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RestoreOutcome {
    /// Same binding, same length, chunking and checksum: the existing assembly continues.
    Reused,
    /// Another binding: discarded without touching the assembly, and counted.
    Discarded,
}

/// Where an assembly stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AssemblyStatus {
    /// Waiting for chunks.
    Receiving {
        /// Chunks in.
        received: u32,
        /// Chunks declared.
        expected: u32,
    },
    /// Every chunk is in and the payload verified.
    Complete,
    /// Every chunk was in but the CRC-32C did not match: ended, nothing restorable.
    ChecksumMismatch {
        /// The declared CRC-32C.
        declared: u32,
        /// The CRC-32C of the assembled bytes.
        actual: u32,
    },
}

/// What a cancelled assembly held when it was discarded (for logs and metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CancelledAssembly {
    /// The binding of the cancelled Restore.
    pub binding: TransferBinding,
    /// Chunks that had been received.
    pub received_chunks: u32,
    /// Payload bytes that were held and are now dropped.
    pub held_bytes: u64,
    /// Chunks and Restore requests discarded for another binding.
    pub discarded: u64,
}

#[derive(Debug)]
enum State {
    Receiving(Receiving),
    Complete(Bytes),
    Failed { actual: u32 },
}

/// Chunks `0..next` are copied, in order, into `prefix` (with their running CRC-32C); chunks
/// that arrived ahead of a gap wait in `pending` as zero-copy slices.
#[derive(Debug, Default)]
struct Receiving {
    prefix: BytesMut,
    crc: u32,
    next: u32,
    pending: BTreeMap<u32, Bytes>,
    pending_bytes: u64,
}

impl Receiving {
    fn append(&mut self, bytes: &[u8], total_len: u64) {
        if self.prefix.capacity() == 0 {
            // At most 256 MiB (the header is checked); reserved once, when data first arrives.
            self.prefix.reserve(usize::try_from(total_len).unwrap_or(0));
        }
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.prefix.extend_from_slice(bytes);
        self.next += 1;
    }

    fn received(&self) -> u32 {
        self.next + self.pending.len() as u32
    }
}

/// The target-side assembly of one Restore's payload.
///
/// Created from the Restore header; only chunks whose binding equals the header's are put in,
/// every other chunk is [`ChunkOutcome::Discarded`]. Each chunk must have the exact length its
/// index implies (so all chunks together have exactly the declared total length), and once the
/// last is in the whole payload is checked against the declared CRC-32C. A mismatch ends the
/// assembly with [`AssemblyError::ChecksumMismatch`]: the held bytes are dropped and
/// [`payload`](Self::payload) never returns anything. Only a verified payload is ever handed
/// out, whole.
///
/// Chunks may arrive in any order; in order (the normal case on one ordered connection) each
/// is copied once into the final buffer, and a single-chunk payload is not copied at all.
#[derive(Debug)]
pub struct Assembly {
    header: RestoreHeader,
    state: State,
    discarded: u64,
}

impl Assembly {
    /// A new, empty assembly for `header`. An empty payload (no chunks) is verified at once.
    pub fn new(header: RestoreHeader) -> Self {
        let mut assembly = Assembly {
            header,
            state: State::Receiving(Receiving::default()),
            discarded: 0,
        };
        if header.chunk_count() == 0 {
            // The outcome is visible through `status` and `payload`.
            let _ = assembly.finish(Bytes::new(), crc32c::crc32c(&[]));
        }
        assembly
    }

    /// The Restore header this assembly is bound to.
    pub fn header(&self) -> &RestoreHeader {
        &self.header
    }

    /// Chunks and Restore requests discarded so far for carrying another binding.
    pub fn discarded(&self) -> u64 {
        self.discarded
    }

    /// Where the assembly stands.
    pub fn status(&self) -> AssemblyStatus {
        match &self.state {
            State::Receiving(r) => AssemblyStatus::Receiving {
                received: r.received(),
                expected: self.header.chunk_count(),
            },
            State::Complete(_) => AssemblyStatus::Complete,
            State::Failed { actual } => AssemblyStatus::ChecksumMismatch {
                declared: self.header.crc32c(),
                actual: *actual,
            },
        }
    }

    /// Payload bytes held right now (0 once ended by a checksum mismatch).
    pub fn held_bytes(&self) -> u64 {
        match &self.state {
            State::Receiving(r) => r.prefix.len() as u64 + r.pending_bytes,
            State::Complete(b) => b.len() as u64,
            State::Failed { .. } => 0,
        }
    }

    /// Takes one chunk.
    ///
    /// Another binding → [`ChunkOutcome::Discarded`] (counted, nothing else changes). An index
    /// not below the chunk count, a length other than the index implies, or an index already
    /// in → a rejection error and nothing changes. The last chunk triggers verification:
    /// [`ChunkOutcome::Complete`], or [`AssemblyError::ChecksumMismatch`], which ends the
    /// assembly (every later chunk gets the same error).
    pub fn accept(&mut self, chunk: PayloadChunk) -> Result<ChunkOutcome, AssemblyError> {
        if chunk.binding() != self.header.binding() {
            self.discarded += 1;
            tracing::debug!(
                expected = ?self.header.binding(),
                got = ?chunk.binding(),
                index = chunk.index(),
                "relocation chunk with another binding discarded"
            );
            return Ok(ChunkOutcome::Discarded);
        }
        let shape = self.header.shape();
        let index = chunk.index();
        let receiving = match &mut self.state {
            State::Receiving(r) => r,
            State::Complete(_) => return Err(AssemblyError::DuplicateChunk { index }),
            State::Failed { actual } => {
                return Err(AssemblyError::ChecksumMismatch {
                    declared: shape.crc32c,
                    actual: *actual,
                });
            }
        };
        if index >= shape.chunk_count {
            return Err(AssemblyError::IndexOutOfRange {
                index,
                chunk_count: shape.chunk_count,
            });
        }
        let expected = shape.chunk_len_at(index);
        let actual = u32::try_from(chunk.bytes().len()).unwrap_or(u32::MAX);
        if actual != expected {
            return Err(AssemblyError::ChunkLengthMismatch {
                index,
                expected,
                actual,
            });
        }
        if index < receiving.next || receiving.pending.contains_key(&index) {
            return Err(AssemblyError::DuplicateChunk { index });
        }
        let bytes = chunk.into_bytes();
        if shape.chunk_count == 1 {
            // The whole payload in one chunk: no copy.
            let crc = crc32c::crc32c(&bytes);
            return self.finish(bytes, crc);
        }
        if index == receiving.next {
            receiving.append(&bytes, shape.total_len);
            while let Some(next) = receiving.pending.remove(&receiving.next) {
                receiving.pending_bytes -= next.len() as u64;
                receiving.append(&next, shape.total_len);
            }
        } else {
            receiving.pending_bytes += bytes.len() as u64;
            receiving.pending.insert(index, bytes);
        }
        if receiving.next == shape.chunk_count {
            let payload = std::mem::take(&mut receiving.prefix).freeze();
            let crc = receiving.crc;
            return self.finish(payload, crc);
        }
        Ok(ChunkOutcome::Accepted {
            received: receiving.received(),
            expected: shape.chunk_count,
        })
    }

    /// Takes a retransmitted Restore request (21 §9.1). Another binding →
    /// [`RestoreOutcome::Discarded`] (counted); the same binding with the same length,
    /// chunking and checksum → [`RestoreOutcome::Reused`]; the same binding with any other
    /// declared value → [`AssemblyError::Conflict`], and the assembly is left exactly as it
    /// was (neither reused nor overwritten). After a checksum mismatch the same Restore gets
    /// that mismatch again: there is no retry of a failed assembly.
    pub fn accept_restore(
        &mut self,
        header: &RestoreHeader,
    ) -> Result<RestoreOutcome, AssemblyError> {
        if header.binding() != self.header.binding() {
            self.discarded += 1;
            tracing::debug!(
                expected = ?self.header.binding(),
                got = ?header.binding(),
                "relocation Restore with another binding discarded"
            );
            return Ok(RestoreOutcome::Discarded);
        }
        if header.shape() != self.header.shape() {
            tracing::warn!(
                binding = ?self.header.binding(),
                first = ?self.header.shape(),
                retransmitted = ?header.shape(),
                "retransmitted relocation Restore conflicts with the first"
            );
            return Err(AssemblyError::Conflict {
                first: self.header.shape(),
                retransmitted: header.shape(),
            });
        }
        if let State::Failed { actual } = self.state {
            return Err(AssemblyError::ChecksumMismatch {
                declared: self.header.crc32c(),
                actual,
            });
        }
        Ok(RestoreOutcome::Reused)
    }

    /// The verified payload, whole. Before the last chunk:
    /// [`AssemblyError::Incomplete`]; after a mismatch: [`AssemblyError::ChecksumMismatch`].
    /// There is no way to obtain a partial payload. The payload stays available (a cheap
    /// clone) so a Restore retried within the same target process can use it again (21 §9.2).
    pub fn payload(&self) -> Result<Bytes, AssemblyError> {
        match &self.state {
            State::Complete(b) => Ok(b.clone()),
            State::Receiving(r) => Err(AssemblyError::Incomplete {
                received: r.received(),
                expected: self.header.chunk_count(),
            }),
            State::Failed { actual } => Err(AssemblyError::ChecksumMismatch {
                declared: self.header.crc32c(),
                actual: *actual,
            }),
        }
    }

    /// Cancels the move's assembly staging (21 §9.4 step 4): every held byte is dropped.
    pub fn cancel(self) -> CancelledAssembly {
        let received_chunks = match &self.state {
            State::Receiving(r) => r.received(),
            State::Complete(_) => self.header.chunk_count(),
            State::Failed { .. } => 0,
        };
        let cancelled = CancelledAssembly {
            binding: self.header.binding(),
            received_chunks,
            held_bytes: self.held_bytes(),
            discarded: self.discarded,
        };
        tracing::debug!(?cancelled, "relocation payload assembly cancelled");
        cancelled
    }

    fn finish(&mut self, payload: Bytes, crc: u32) -> Result<ChunkOutcome, AssemblyError> {
        let declared = self.header.crc32c();
        if crc == declared && payload.len() as u64 == self.header.total_len() {
            self.state = State::Complete(payload);
            Ok(ChunkOutcome::Complete)
        } else {
            tracing::warn!(
                binding = ?self.header.binding(),
                declared,
                actual = crc,
                "relocation payload checksum mismatch: nothing is restored"
            );
            self.state = State::Failed { actual: crc };
            Err(AssemblyError::ChecksumMismatch {
                declared,
                actual: crc,
            })
        }
    }
}
