//! The per-run index (runtime-private, `docs/formats.md` §9): one entry per authority row under
//! the run its record names, so the owner sweeps and the restore of a dead run's Instance
//! Spots read that run's rows, not every row of the mesh.
//!
//! - **Kept in the record's own batch.** Every operation that gives a record an owner run
//!   (Reserve, NewOwner, the aggregate NewOwner, a member following its Spot, an Instance
//!   Spot takeover) puts that run's entry, and every one that takes the record from a run
//!   (those, and every delete) removes that run's entry, in the same conditional batch
//!   ([`Op::move_run_entry`]). A Store that loses writes loses the record change and its
//!   entry change together.
//! - **The marker.** A run's lease is acquired in a batch that also writes its marker
//!   (`lease.rs`): every record of a run with a marker is in the run's index. A run without one
//!   (its lease acquired before the index existed, or its marker already removed by a sweep)
//!   is read the old way, from every authority row ([`RunRows::marker`] is `None`).
//! - **Entries are candidates.** An entry whose record is gone or names another run is stale
//!   (it cannot come from this runtime's batches, but a Store or an operator can leave one):
//!   the sweep removes it under its version.
//! - **The marker goes last.** A sweep pass that completed removes the marker under its
//!   version: a row it left behind (a move a live target may finish, a member that moved with
//!   its Spot) removes its own entry when its record leaves the run, and a later sweep of the
//!   run reads every authority row. So no key of a swept run stays under the prefix.

use zlink_store_spi::{LocationStore, Mutation, ReadResult, StoreKey, StoreVersion};

use super::super::error::LocationError;
use super::super::identity::{HostRun, ObjectId, ObjectKind};
use super::super::keys::{self, RunRow};
use super::AuthorityClient;
use super::op::{Op, Write};

/// The value of every entry and marker: the rows say what they are by their key.
pub(crate) const RUN_ROW_VALUE: &[u8] = br#"{"recordVersion":1}"#;

/// The marker of `run`, for the batch that acquires its lease.
pub(crate) fn marker_put(run: &HostRun) -> Result<Mutation, LocationError> {
    Ok(Mutation::put(keys::run_marker(run)?, RUN_ROW_VALUE))
}

impl Op {
    /// The record of `(kind, id)` leaves `from`'s index and joins `to`'s in this op's batch
    /// (nothing when both are the same run). The entries are own keys of the job without a
    /// condition: the record's own condition decides the batch.
    pub(super) fn move_run_entry(
        &mut self,
        kind: ObjectKind,
        id: &ObjectId,
        from: Option<&HostRun>,
        to: Option<&HostRun>,
    ) -> Result<(), LocationError> {
        if from == to {
            return Ok(());
        }
        let mut moves = Vec::with_capacity(2);
        if let Some(run) = from {
            let key = keys::run_object(run, kind, id)?;
            self.plan.own.push((key.clone(), None));
            moves.push(Mutation::Delete(key));
        }
        if let Some(run) = to {
            let key = keys::run_object(run, kind, id)?;
            self.plan.own.push((key.clone(), None));
            moves.push(Mutation::put(key, RUN_ROW_VALUE));
        }
        self.plan.size_hint += 256 * moves.len();
        match &mut self.write {
            Write::Issued { also, .. } | Write::Encoded { also, .. } => also.extend(moves),
            Write::Rows(rows) => rows.extend(moves),
        }
        Ok(())
    }
}

/// One authority row that may be the run's.
pub(super) struct RunRowRead {
    /// The authority key.
    pub key: StoreKey,
    /// Its bytes as read.
    pub bytes: zlink_store_spi::Bytes,
    /// Its version as read.
    pub version: StoreVersion,
    /// The run's index entry that named it, with its version (indexed runs only).
    pub entry: Option<(StoreKey, StoreVersion)>,
}

/// The authority rows that may be one run's.
pub(super) struct RunRows {
    /// The run's marker with its version, when they come from the run's index (`None`: from
    /// every authority row).
    pub marker: Option<(StoreKey, StoreVersion)>,
    /// The rows (every one must still be checked against the run: a candidate only).
    pub rows: Vec<RunRowRead>,
    /// Keys the Store could not read.
    pub unreadable: usize,
    /// Index entries whose authority row is gone (with their version).
    pub stale: Vec<(StoreKey, StoreVersion)>,
}

impl AuthorityClient {
    /// The authority rows that may be `run`'s: from its index when it has a marker (one scan of
    /// its prefix, then its rows read in batches), else from one snapshot of every authority
    /// row. See the module docs.
    pub(super) async fn run_rows(&self, run: &HostRun) -> Result<RunRows, LocationError> {
        let listing = self.scan_all(&keys::run_objects_prefix(run)?).await?;
        let mut unreadable = listing.unreadable.len();
        let mut marker = None;
        let mut entries = Vec::new();
        for item in listing.items {
            match keys::parse_run_row(run, &item.key) {
                Some(RunRow::Marker) => marker = Some((item.key, item.version)),
                Some(RunRow::Entry(authority)) => entries.push((authority, item.key, item.version)),
                None => {
                    tracing::warn!(key = %item.key, "run index: skips a key of another shape");
                    unreadable += 1;
                }
            }
        }
        let Some(marker) = marker else {
            let all = self.scan_all(&keys::authority_prefix()).await?;
            return Ok(RunRows {
                marker: None,
                unreadable: all.unreadable.len(),
                rows: all
                    .items
                    .into_iter()
                    .map(|item| RunRowRead {
                        key: item.key,
                        bytes: item.bytes,
                        version: item.version,
                        entry: None,
                    })
                    .collect(),
                stale: Vec::new(),
            });
        };
        let mut rows = Vec::with_capacity(entries.len());
        let mut stale = Vec::new();
        for chunk in entries.chunks(zlink_store_spi::MAX_READ_MANY_KEYS) {
            let keys: Vec<StoreKey> = chunk.iter().map(|(k, _, _)| k.clone()).collect();
            let reads = match self.store.read_many(&keys).await {
                Ok(reads) => reads,
                Err(zlink_store_spi::StoreError::Unreadable(_)) => {
                    // One key of the batch cannot be read: each is read alone, so it costs
                    // only itself.
                    let mut one_by_one = Vec::with_capacity(keys.len());
                    for key in &keys {
                        match self.store.read(key).await {
                            Ok(read) => one_by_one.push(Some(read)),
                            Err(zlink_store_spi::StoreError::Unreadable(u)) => {
                                tracing::warn!(key = %u.key, kind = %u.kind, "run index: skips an authority row the Store cannot read");
                                one_by_one.push(None);
                            }
                            Err(e) => return Err(e.into()),
                        }
                    }
                    for ((key, entry, version), read) in chunk.iter().zip(one_by_one) {
                        match read {
                            Some(read) => {
                                push_read(&mut rows, &mut stale, key, entry, version, read)
                            }
                            None => unreadable += 1,
                        }
                    }
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            for ((key, entry, version), read) in chunk.iter().zip(reads) {
                push_read(&mut rows, &mut stale, key, entry, version, read);
            }
        }
        Ok(RunRows {
            marker: Some(marker),
            rows,
            unreadable,
            stale,
        })
    }
}

/// One read of an indexed row: a candidate when found, a stale entry when gone.
fn push_read(
    rows: &mut Vec<RunRowRead>,
    stale: &mut Vec<(StoreKey, StoreVersion)>,
    key: &StoreKey,
    entry: &StoreKey,
    entry_version: &StoreVersion,
    read: ReadResult,
) {
    match read {
        ReadResult::Found { bytes, version, .. } => rows.push(RunRowRead {
            key: key.clone(),
            bytes,
            version,
            entry: Some((entry.clone(), entry_version.clone())),
        }),
        ReadResult::Missing { .. } => stale.push((entry.clone(), entry_version.clone())),
    }
}
