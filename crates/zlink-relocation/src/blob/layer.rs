//! The blob layer: stores a payload as enveloped chunks plus a leading index on any Relocation
//! Store, restores it whole or not at all, renews and deletes it.

use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use sha2::{Digest, Sha256};
use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinSet;
use zlink_store_spi::{
    BlobReadResult, BlobRef, PutResult, RelocationStore, RenewResult, StoreError, StoreTime,
};

use crate::blob::config::BlobLayerConfig;
use crate::blob::error::{BlobArgumentError, BlobError, DataLost};
use crate::blob::format::{
    EnvelopeHeader, Index, IndexChunk, MAX_INDEX_REF_LEN, chunk_ref, crc32c, encode_chunk,
    open_chunk,
};
use crate::blob::plan::schedule;
use zlink_store_spi::BLOB_ENVELOPE_LEN;

/// What [`BlobLayer::store`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredUnit {
    /// The payload length.
    pub total_len: u64,
    /// Data chunks under the index.
    pub chunk_count: usize,
    /// Stripes the payload was split into.
    pub stripe_count: usize,
    /// CRC-32C of the whole payload.
    pub crc32c: u32,
    /// SHA-256 of the whole payload.
    pub sha256: [u8; 32],
    /// The earliest expiry among the index and its chunks (the unit is whole until then).
    pub expires_at: StoreTime,
    /// The store clock when the index was stored.
    pub store_now: StoreTime,
}

/// A payload restored by [`BlobLayer::restore`]: all of it, verified, as its data chunks in
/// index order (each a zero-copy slice of what the store returned). [`to_bytes`](Self::to_bytes)
/// gives it as one contiguous buffer (no copy when it is a single chunk); stripes are runs of
/// whole chunks, so [`stripe_chunks`](Self::stripe_chunks) never copies either.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RestoredUnit {
    /// The data chunks, in index (= payload) order.
    pub chunks: Vec<Bytes>,
    /// The ordered stripes as byte ranges of the payload (contiguous, even: lengths differ by
    /// at most one byte).
    pub stripes: Vec<Range<u64>>,
    /// Per stripe, its range of `chunks`.
    pub stripe_chunk_ranges: Vec<Range<usize>>,
    /// CRC-32C of the payload (verified).
    pub crc32c: u32,
    /// SHA-256 of the payload (verified).
    pub sha256: [u8; 32],
    /// The earliest expiry among the index and its chunks.
    pub expires_at: StoreTime,
    /// The store clock when the index was read.
    pub store_now: StoreTime,
}

fn concat(chunks: &[Bytes]) -> Bytes {
    match chunks {
        [] => Bytes::new(),
        [one] => one.clone(),
        many => {
            let mut all = Vec::with_capacity(many.iter().map(Bytes::len).sum());
            for c in many {
                all.extend_from_slice(c);
            }
            Bytes::from(all)
        }
    }
}

impl RestoredUnit {
    /// The payload length.
    pub fn len(&self) -> u64 {
        self.chunks.iter().map(|c| c.len() as u64).sum()
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.chunks.iter().all(Bytes::is_empty)
    }

    /// The payload as one contiguous buffer: the chunk itself when there is one, otherwise a
    /// copy.
    pub fn to_bytes(&self) -> Bytes {
        concat(&self.chunks)
    }

    /// The chunks of stripe `i`, in order (no copy).
    pub fn stripe_chunks(&self, i: usize) -> Option<&[Bytes]> {
        self.stripe_chunk_ranges
            .get(i)
            .map(|r| &self.chunks[r.clone()])
    }

    /// Stripe `i` as one contiguous buffer (a copy only if the stripe has several chunks).
    pub fn stripe(&self, i: usize) -> Option<Bytes> {
        self.stripe_chunks(i).map(concat)
    }
}

/// What [`BlobLayer::renew`] extended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RenewedUnit {
    /// Data chunks verified and renewed.
    pub chunk_count: usize,
    /// The earliest new expiry among the index and its chunks.
    pub expires_at: StoreTime,
    /// The store clock when the index was renewed.
    pub store_now: StoreTime,
}

/// What [`BlobLayer::delete`] removed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeletedUnit {
    /// Data chunks deleted (0 when the index was already gone or unreadable: its chunks, if
    /// any, expire on their own).
    pub chunk_count: usize,
    /// The store clock when the index was deleted.
    pub store_now: StoreTime,
}

/// The framework-side blob layer over any [`RelocationStore`] (spec 23, "Framework-side
/// chunking").
///
/// A payload is split into at most 64 even, ordered stripes, each cut into even data chunks of
/// at most the chunk limit (64 MiB); every chunk is stored in a 23-byte envelope carrying its
/// position and CRC-32C; a leading index (format version, total length, overall CRC-32C and
/// SHA-256, stripes, and each chunk's reference, length and CRC) is stored under the unit's
/// reference **last**, only after every chunk was written and read back. Chunk references are
/// `{reference}#{order:04}`.
///
/// Chunk I/O runs in parallel under the configured in-flight byte budget (writes round-robin
/// over the stripes; restore reads in index order, appending and hashing each chunk as soon as
/// its predecessors are in). A missing or corrupt chunk or index makes the whole unit
/// [`DataLost`](BlobError::DataLost); nothing is ever partially restored.
///
/// Works with any store: `BlobLayer::new(Arc::new(store))`, or an `Arc<dyn DynRelocationStore>`.
/// Needs a Tokio runtime (chunk operations are spawned tasks).
pub struct BlobLayer<S: ?Sized> {
    store: Arc<S>,
    config: BlobLayerConfig,
}

impl<S: ?Sized> Clone for BlobLayer<S> {
    fn clone(&self) -> Self {
        BlobLayer {
            store: self.store.clone(),
            config: self.config.clone(),
        }
    }
}

impl<S: RelocationStore + ?Sized> std::fmt::Debug for BlobLayer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobLayer")
            .field("store", &self.store)
            .field("config", &self.config)
            .finish()
    }
}

/// SHA-256 of a payload, computed on the blocking pool (off the async workers).
fn spawn_sha256(bytes: Bytes) -> tokio::task::JoinHandle<[u8; 32]> {
    tokio::task::spawn_blocking(move || Sha256::digest(&bytes).into())
}

/// The CRC-32C of a whole payload from the CRC-32C of its chunks, in order (no second pass over
/// the bytes).
fn combined_crc(chunks: impl IntoIterator<Item = (u32, usize)>) -> u32 {
    chunks
        .into_iter()
        .fold(0, |acc, (crc, len)| crc32c::crc32c_combine(acc, crc, len))
}

/// What the verifier saw: the chunks in index order and the overall SHA-256.
struct Verified {
    chunks: Vec<Bytes>,
    sha256: [u8; 32],
}

type ToVerifier = std::sync::mpsc::Sender<(u16, Bytes, OwnedSemaphorePermit)>;

/// A blocking-pool task that receives verified chunk data in completion order and feeds it to
/// the overall SHA-256 in index order, as soon as each chunk's predecessors are in
/// (while later chunks are still in flight). A chunk's budget permit is released once it is
/// hashed. It ends when the sender is dropped.
fn spawn_verifier(chunk_count: usize) -> (ToVerifier, tokio::task::JoinHandle<Verified>) {
    let (tx, rx) = std::sync::mpsc::channel::<(u16, Bytes, OwnedSemaphorePermit)>();
    let handle = tokio::task::spawn_blocking(move || {
        let mut chunks = Vec::with_capacity(chunk_count);
        let mut sha = Sha256::new();
        let mut waiting: BTreeMap<u16, (Bytes, OwnedSemaphorePermit)> = BTreeMap::new();
        while let Ok((order, data, permit)) = rx.recv() {
            waiting.insert(order, (data, permit));
            // Hashing a chunk releases its permit.
            while let Some((data, _permit)) = waiting.remove(&(chunks.len() as u16)) {
                sha.update(&data);
                chunks.push(data);
            }
        }
        Verified {
            chunks,
            sha256: sha.finalize().into(),
        }
    });
    (tx, handle)
}

fn join_error<T>(e: tokio::task::JoinError) -> Result<T, BlobError> {
    if e.is_panic() {
        std::panic::resume_unwind(e.into_panic());
    }
    Err(BlobError::Store(StoreError::Cancelled))
}

fn earliest(a: Option<StoreTime>, b: StoreTime) -> Option<StoreTime> {
    Some(a.map_or(b, |a| a.min(b)))
}

impl<S: RelocationStore + ?Sized> BlobLayer<S> {
    /// A layer with the default configuration (64 MiB chunks, 64 stripes, 24 h retention, the
    /// process-wide 256 MiB budget).
    pub fn new(store: Arc<S>) -> Self {
        Self::with_config(store, BlobLayerConfig::default())
    }

    /// A layer with `config`.
    pub fn with_config(store: Arc<S>, config: BlobLayerConfig) -> Self {
        BlobLayer { store, config }
    }

    /// The configuration.
    pub fn config(&self) -> &BlobLayerConfig {
        &self.config
    }

    /// The underlying Relocation Store.
    pub fn relocation_store(&self) -> &Arc<S> {
        &self.store
    }

    /// Runs `jobs` (each with its encoded byte cost) as spawned tasks, at most `parallelism` at
    /// once and within the byte budget, handing each result to `on_done` as it completes. A job
    /// receives its budget permit and may hand it on in its result (the bytes stay counted until
    /// the permit is dropped). The first error stops everything (the remaining tasks are
    /// aborted).
    async fn run_parallel<T, J, F>(
        &self,
        jobs: Vec<(usize, J)>,
        mut on_done: impl FnMut(T) -> Result<(), BlobError>,
    ) -> Result<(), BlobError>
    where
        J: FnOnce(OwnedSemaphorePermit) -> F,
        F: Future<Output = Result<T, BlobError>> + Send + 'static,
        T: Send + 'static,
    {
        let mut set: JoinSet<Result<T, BlobError>> = JoinSet::new();
        let mut pending = jobs.into_iter();
        let budget = self.config.budget();
        loop {
            while set.len() < self.config.parallelism() {
                let Some((cost, job)) = pending.next() else {
                    break;
                };
                // Wait for budget, handling completions meanwhile (they free budget).
                let permit = loop {
                    if set.is_empty() {
                        break budget.take(cost).await?;
                    }
                    tokio::select! {
                        biased;
                        done = set.join_next() => {
                            if let Some(done) = done {
                                on_done(done.or_else(join_error)??)?;
                            }
                        }
                        permit = budget.take(cost) => break permit?,
                    }
                };
                set.spawn(job(permit));
            }
            match set.join_next().await {
                Some(done) => on_done(done.or_else(join_error)??)?,
                None => return Ok(()),
            }
        }
    }

    async fn read_index(
        &self,
        reference: &BlobRef,
    ) -> Result<(Index, StoreTime, StoreTime), BlobError> {
        match self.store.read(reference).await? {
            BlobReadResult::Found {
                bytes,
                expires_at,
                store_now,
            } => {
                let index = Index::decode(&bytes).map_err(DataLost::IndexCorrupt)?;
                Ok((index, expires_at, store_now))
            }
            BlobReadResult::Missing { .. } => Err(DataLost::IndexMissing.into()),
        }
    }

    /// Stores `payload` as the unit `reference`: every chunk is written and read back, then the
    /// index is written. Storing the same payload under the same reference again
    /// succeeds (everything answers `AlreadyStored`).
    ///
    /// Bounds are checked before any I/O: at most 256 GiB, at most 4,096 chunks at the chunk
    /// limit, reference at most 4,091 bytes. If a chunk fails, no index is written (the chunks
    /// already written are orphans that expire with their retention).
    pub async fn store(
        &self,
        reference: &BlobRef,
        payload: &Bytes,
    ) -> Result<StoredUnit, BlobError> {
        if reference.len() > MAX_INDEX_REF_LEN {
            return Err(BlobArgumentError::ReferenceLength {
                actual: reference.len(),
                max: MAX_INDEX_REF_LEN,
            }
            .into());
        }
        let plan = self.config.plan(payload.len() as u64)?;
        let chunk_count = plan.chunks.len() as u16;
        let refs = plan
            .chunks
            .iter()
            .map(|c| chunk_ref(reference, c.order))
            .collect::<Result<Vec<_>, _>>()?;
        // The overall SHA-256 is computed while the chunks are written; the overall CRC-32C is
        // combined from the chunks' CRC-32C.
        let overall = spawn_sha256(payload.clone());
        let retention = self.config.retention();
        let jobs = schedule(&plan.stripe_table())
            .into_iter()
            .map(|order| {
                let c = &plan.chunks[usize::from(order)];
                let store = self.store.clone();
                let reference = refs[usize::from(order)].clone();
                let start = c.offset as usize;
                let data = payload.slice(start..start + c.len as usize);
                let (stripe, len) = (c.stripe, c.len);
                let job = move |permit: OwnedSemaphorePermit| async move {
                    // Held until this chunk is done.
                    let _permit = permit;
                    let header = EnvelopeHeader {
                        stripe,
                        order,
                        chunk_count,
                        data_len: len,
                        data_crc: crc32c(&data),
                    };
                    let blob = encode_chunk(&header, &data);
                    drop(data);
                    match store.put(&reference, &blob, retention).await? {
                        PutResult::Stored { .. } | PutResult::AlreadyStored { .. } => {}
                        PutResult::Conflict { .. } => {
                            return Err(BlobError::Conflict { reference });
                        }
                    }
                    drop(blob);
                    let expires_at = match store.read(&reference).await? {
                        BlobReadResult::Found {
                            bytes, expires_at, ..
                        } if open_chunk(&bytes, &header).is_ok() => expires_at,
                        _ => return Err(BlobError::NotVerified { reference }),
                    };
                    Ok((order, header.data_crc, expires_at))
                };
                (BLOB_ENVELOPE_LEN + len as usize, job)
            })
            .collect();
        let mut crcs = vec![0u32; plan.chunks.len()];
        let mut expires_at = None;
        let written = self
            .run_parallel(jobs, |(order, crc, exp): (u16, u32, StoreTime)| {
                crcs[usize::from(order)] = crc;
                expires_at = earliest(expires_at, exp);
                Ok(())
            })
            .await;
        if let Err(e) = written {
            tracing::warn!(%reference, error = %e, "relocation unit not stored: no index written");
            return Err(e);
        }
        let sha256 = match overall.await {
            Ok(d) => d,
            Err(e) => return join_error(e),
        };
        let crc = combined_crc(
            plan.chunks
                .iter()
                .map(|c| (crcs[usize::from(c.order)], c.len as usize)),
        );
        let index = Index {
            total_len: plan.total_len,
            crc32c: crc,
            sha256,
            chunk_limit: plan.chunk_limit,
            stripes: plan.stripe_table(),
            chunks: plan
                .chunks
                .iter()
                .zip(refs)
                .map(|(c, reference)| IndexChunk {
                    stripe: c.stripe,
                    len: c.len,
                    crc: crcs[usize::from(c.order)],
                    reference,
                })
                .collect(),
        };
        // The index is the publication: its put answers Stored or AlreadyStored (byte-identical
        // bytes) or nothing is published. (It is not read back: readers verify its checksum.)
        let (index_expiry, store_now) = match self
            .store
            .put(reference, &index.encode(), retention)
            .await?
        {
            PutResult::Stored {
                expires_at,
                store_now,
            }
            | PutResult::AlreadyStored {
                expires_at,
                store_now,
            } => (expires_at, store_now),
            PutResult::Conflict { .. } => {
                return Err(BlobError::Conflict {
                    reference: reference.clone(),
                });
            }
        };
        Ok(StoredUnit {
            total_len: plan.total_len,
            chunk_count: plan.chunks.len(),
            stripe_count: plan.stripes.len(),
            crc32c: crc,
            sha256,
            expires_at: earliest(expires_at, index_expiry).unwrap_or(index_expiry),
            store_now,
        })
    }

    /// Restores the unit `reference`: reads the index, then every chunk in parallel, verifies
    /// each, assembles them in index order whatever order they complete in, and verifies the
    /// overall CRC-32C and SHA-256.
    ///
    /// A missing or corrupt index or chunk, or an overall checksum mismatch, is
    /// [`BlobError::DataLost`]; store failures and time-outs are [`BlobError::Store`] (retry).
    pub async fn restore(&self, reference: &BlobRef) -> Result<RestoredUnit, BlobError> {
        let (index, index_expiry, store_now) = self.read_index(reference).await?;
        let index = Arc::new(index);
        let mut expires_at = Some(index_expiry);
        // Chunks are read in parallel, scheduled in index order; a verifier on the blocking pool
        // hashes each in index order as soon as its predecessors are in, while later chunks are
        // still in flight. A chunk keeps its budget bytes until it is hashed.
        let (to_verifier, verifier) = spawn_verifier(index.chunks.len());
        let jobs = (0..index.chunks.len() as u16)
            .map(|order| {
                let i = usize::from(order);
                let cost = BLOB_ENVELOPE_LEN + index.chunks[i].len as usize;
                let layer = self.clone();
                let index = index.clone();
                let job = move |permit: OwnedSemaphorePermit| async move {
                    let header = index.envelope(order);
                    let (data, exp) = layer
                        .read_chunk(&index.chunks[i].reference, order, &header)
                        .await?;
                    Ok((order, data, exp, permit))
                };
                (cost, job)
            })
            .collect();
        self.run_parallel(
            jobs,
            |(order, data, exp, permit): (u16, Bytes, StoreTime, OwnedSemaphorePermit)| {
                expires_at = earliest(expires_at, exp);
                // The verifier only stops early if it panicked; the join below reports it.
                let _ = to_verifier.send((order, data, permit));
                Ok(())
            },
        )
        .await?;
        drop(to_verifier);
        let verified = match verifier.await {
            Ok(v) => v,
            Err(e) => return join_error(e),
        };
        let len: u64 = verified.chunks.iter().map(|c| c.len() as u64).sum();
        // Every chunk's data matched its CRC-32C in the index (read_chunk), so combining those
        // is the CRC-32C of the assembled payload.
        let crc = combined_crc(index.chunks.iter().map(|c| (c.crc, c.len as usize)));
        if verified.chunks.len() != index.chunks.len()
            || len != index.total_len
            || crc != index.crc32c
            || verified.sha256 != index.sha256
        {
            return Err(DataLost::Checksum.into());
        }
        let offsets = index.offsets();
        let stripes = index
            .stripes
            .iter()
            .map(|&(first, _, len)| {
                let start = offsets[usize::from(first)];
                start..start + len
            })
            .collect();
        let stripe_chunk_ranges = index
            .stripes
            .iter()
            .map(|&(first, count, _)| usize::from(first)..usize::from(first) + usize::from(count))
            .collect();
        Ok(RestoredUnit {
            chunks: verified.chunks,
            stripes,
            stripe_chunk_ranges,
            crc32c: crc,
            sha256: verified.sha256,
            expires_at: expires_at.unwrap_or(index_expiry),
            store_now,
        })
    }

    /// Reads and verifies one chunk: its data (a slice of the blob) and expiry.
    async fn read_chunk(
        &self,
        reference: &BlobRef,
        order: u16,
        header: &EnvelopeHeader,
    ) -> Result<(Bytes, StoreTime), BlobError> {
        match self.store.read(reference).await? {
            BlobReadResult::Found {
                bytes, expires_at, ..
            } => open_chunk(&bytes, header)
                .map(|data| (data, expires_at))
                .map_err(|error| DataLost::ChunkCorrupt { order, error }.into()),
            BlobReadResult::Missing { .. } => Err(DataLost::ChunkMissing { order }.into()),
        }
    }

    /// Renews the unit `reference` by the configured retention: reads and verifies every chunk
    /// (existence and checksum) and renews it, then renews the index. A missing or corrupt chunk
    /// is [`BlobError::DataLost`] and the index is not renewed.
    pub async fn renew(&self, reference: &BlobRef) -> Result<RenewedUnit, BlobError> {
        let (index, _, _) = self.read_index(reference).await?;
        let index = Arc::new(index);
        let retention = self.config.retention();
        let jobs = schedule(&index.stripes)
            .into_iter()
            .map(|order| {
                let i = usize::from(order);
                let cost = BLOB_ENVELOPE_LEN + index.chunks[i].len as usize;
                let layer = self.clone();
                let index = index.clone();
                let job = move |permit: OwnedSemaphorePermit| async move {
                    // Held until this chunk is done.
                    let _permit = permit;
                    let reference = &index.chunks[i].reference;
                    layer
                        .read_chunk(reference, order, &index.envelope(order))
                        .await?;
                    match layer.store.renew(reference, retention).await? {
                        RenewResult::Renewed { expires_at, .. } => Ok(expires_at),
                        RenewResult::Missing { .. } => Err(DataLost::ChunkMissing { order }.into()),
                    }
                };
                (cost, job)
            })
            .collect();
        let mut expires_at = None;
        self.run_parallel(jobs, |exp: StoreTime| {
            expires_at = earliest(expires_at, exp);
            Ok(())
        })
        .await?;
        match self.store.renew(reference, retention).await? {
            RenewResult::Renewed {
                expires_at: index_expiry,
                store_now,
            } => Ok(RenewedUnit {
                chunk_count: index.chunks.len(),
                expires_at: earliest(expires_at, index_expiry).unwrap_or(index_expiry),
                store_now,
            }),
            RenewResult::Missing { .. } => Err(DataLost::IndexMissing.into()),
        }
    }

    /// Deletes the unit `reference`: the index first (so no reader finds a partial unit), then
    /// its chunks. Idempotent; an absent or unreadable index deletes only the index (its chunks,
    /// if any, expire with their retention).
    pub async fn delete(&self, reference: &BlobRef) -> Result<DeletedUnit, BlobError> {
        let index = match self.read_index(reference).await {
            Ok((index, _, _)) => Some(index),
            Err(BlobError::DataLost(_)) => None,
            Err(e) => return Err(e),
        };
        let deleted = self.store.delete(reference).await?;
        let Some(index) = index else {
            return Ok(DeletedUnit {
                chunk_count: 0,
                store_now: deleted.store_now,
            });
        };
        let chunk_count = index.chunks.len();
        let jobs = index
            .chunks
            .into_iter()
            .map(|c| {
                let store = self.store.clone();
                let job = move |permit: OwnedSemaphorePermit| async move {
                    // Held until this chunk is done.
                    let _permit = permit;
                    store.delete(&c.reference).await?;
                    Ok(())
                };
                (1, job)
            })
            .collect();
        self.run_parallel(jobs, |()| Ok(())).await?;
        Ok(DeletedUnit {
            chunk_count,
            store_now: deleted.store_now,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_crc_is_the_crc_of_the_concatenation() {
        let parts: [&[u8]; 4] = [b"relocation ", b"", b"blob", b" layer"];
        let whole: Vec<u8> = parts.concat();
        let combined = combined_crc(parts.iter().map(|p| (crc32c(p), p.len())));
        assert_eq!(combined, crc32c(&whole));
        assert_eq!(combined_crc(std::iter::empty()), crc32c(b""));
    }
}
