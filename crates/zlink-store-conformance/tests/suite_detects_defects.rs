//! The suite is only worth running if it fails on broken providers: each defect below is a
//! plausible provider bug, and the named checks must catch it.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use bytes::Bytes;
use zlink_store_conformance::{
    LocationCapabilities, RelocationCapabilities, SuiteReport, run_location_suite,
    run_relocation_suite,
};
use zlink_store_spi::*;

/// Applies the mutations of a conflicting batch anyway (conditions checked but not enforced).
#[derive(Debug, Clone)]
struct IgnoresConflicts(MemoryLocationStore);

impl LocationStore for IgnoresConflicts {
    async fn read(&self, key: &StoreKey) -> StoreResult<ReadResult> {
        self.0.read(key).await
    }
    async fn write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
        match self.0.write(request).await? {
            WriteResult::Conflict { .. } if !request.mutations().is_empty() => {
                let unconditional = WriteRequest::new(vec![], request.mutations().to_vec())?;
                self.0.write(&unconditional).await
            }
            other => Ok(other),
        }
    }
    async fn scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
        self.0.scan(request).await
    }
}

/// Continuation pages read the present instead of the snapshot, and any cursor is accepted.
#[derive(Debug, Clone)]
struct LiveScans(MemoryLocationStore);

impl LocationStore for LiveScans {
    async fn read(&self, key: &StoreKey) -> StoreResult<ReadResult> {
        self.0.read(key).await
    }
    async fn write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
        self.0.write(request).await
    }
    async fn scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
        let after = request.cursor.as_ref().map(|c| c.as_str().to_string());
        let all = self
            .0
            .scan_all(&request.prefix, PageLimit::LARGEST, 3)
            .await?
            .unwrap_or_default();
        let rest: Vec<ScanItem> = all
            .items
            .into_iter()
            .filter(|i| after.as_deref().is_none_or(|a| i.key.as_str() > a))
            .collect();
        let more = rest.len() > request.limit.get();
        let items: Vec<ScanItem> = rest.into_iter().take(request.limit.get()).collect();
        let next_cursor = match (more, items.last()) {
            (true, Some(last)) => Some(ScanCursor::new(last.key.as_str())?),
            _ => None,
        };
        Ok(ScanResult::Page(ScanPage {
            items,
            unreadable: Vec::new(),
            next_cursor,
            store_now: StoreTime::host_now(),
        }))
    }
}

/// A batched read that leaves out the keys it did not find (answers fall out of order), and
/// reads past the key bound.
#[derive(Debug, Clone)]
struct ReadManyDropsMissing(MemoryLocationStore);

impl LocationStore for ReadManyDropsMissing {
    async fn read(&self, key: &StoreKey) -> StoreResult<ReadResult> {
        self.0.read(key).await
    }
    async fn write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
        self.0.write(request).await
    }
    async fn scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
        self.0.scan(request).await
    }
    async fn read_many(&self, keys: &[StoreKey]) -> StoreResult<Vec<ReadResult>> {
        let mut found = Vec::new();
        for k in keys {
            let r = self.0.read(k).await?;
            if !r.is_missing() {
                found.push(r);
            }
        }
        Ok(found)
    }
}

/// Never lets a blob expire.
#[derive(Debug, Clone)]
struct NeverExpires(MemoryRelocationStore);

impl RelocationStore for NeverExpires {
    async fn put(
        &self,
        r: &BlobRef,
        payload: &Bytes,
        _retention: Retention,
    ) -> StoreResult<PutResult> {
        self.0.put(r, payload, Retention::MAX).await
    }
    async fn read(&self, r: &BlobRef) -> StoreResult<BlobReadResult> {
        self.0.read(r).await
    }
    async fn renew(&self, r: &BlobRef, _retention: Retention) -> StoreResult<RenewResult> {
        self.0.renew(r, Retention::MAX).await
    }
    async fn delete(&self, r: &BlobRef) -> StoreResult<Deleted> {
        self.0.delete(r).await
    }
}

/// Answers Stored for every put, overwriting whatever was there.
#[derive(Debug, Clone)]
struct Overwrites(MemoryRelocationStore);

impl RelocationStore for Overwrites {
    async fn put(
        &self,
        r: &BlobRef,
        payload: &Bytes,
        retention: Retention,
    ) -> StoreResult<PutResult> {
        self.0.delete(r).await?;
        self.0.put(r, payload, retention).await
    }
    async fn read(&self, r: &BlobRef) -> StoreResult<BlobReadResult> {
        self.0.read(r).await
    }
    async fn renew(&self, r: &BlobRef, retention: Retention) -> StoreResult<RenewResult> {
        self.0.renew(r, retention).await
    }
    async fn delete(&self, r: &BlobRef) -> StoreResult<Deleted> {
        self.0.delete(r).await
    }
}

fn failed(report: &SuiteReport) -> Vec<&'static str> {
    report.failed.iter().map(|(n, _)| *n).collect()
}

fn location_caps(clock: &ManualClock) -> LocationCapabilities {
    LocationCapabilities::new()
        .with_manual_clock(clock.clone())
        .with_model_cases(300)
}

#[tokio::test]
async fn suite_catches_a_store_that_applies_conflicting_batches() {
    let clock = ManualClock::starting_now();
    let store = IgnoresConflicts(MemoryLocationStore::with_clock(Arc::new(clock.clone())));
    let report = run_location_suite(&store, &location_caps(&clock)).await;
    let failed = failed(&report);
    assert!(failed.contains(&"conflict_applies_no_mutation"), "{report}");
    assert!(
        failed.contains(&"version_condition_requires_current_version"),
        "{report}"
    );
    assert!(
        failed.contains(&"location_model_matches_reference"),
        "{report}"
    );
}

#[tokio::test]
async fn suite_catches_scans_that_are_not_snapshots() {
    let clock = ManualClock::starting_now();
    let store = LiveScans(MemoryLocationStore::with_clock(Arc::new(clock.clone())));
    let report = run_location_suite(&store, &location_caps(&clock)).await;
    let failed = failed(&report);
    assert!(failed.contains(&"scan_pages_read_one_snapshot"), "{report}");
    assert!(
        failed.contains(&"invalid_or_foreign_cursor_is_expired"),
        "{report}"
    );
}

#[tokio::test]
async fn suite_catches_blobs_that_never_expire() {
    let clock = ManualClock::starting_now();
    let store = NeverExpires(MemoryRelocationStore::with_clock(Arc::new(clock.clone())));
    let caps = RelocationCapabilities::new()
        .with_manual_clock(clock)
        .with_largest_blob(false);
    let report = run_relocation_suite(&store, &caps).await;
    assert!(
        failed(&report).contains(&"expiry_follows_the_provider_clock"),
        "{report}"
    );
}

#[tokio::test]
async fn suite_catches_puts_that_overwrite() {
    let clock = ManualClock::starting_now();
    let store = Overwrites(MemoryRelocationStore::with_clock(Arc::new(clock.clone())));
    let caps = RelocationCapabilities::new()
        .with_manual_clock(clock)
        .with_largest_blob(false);
    let report = run_relocation_suite(&store, &caps).await;
    let failed = failed(&report);
    assert!(
        failed.contains(&"same_bytes_already_stored_different_bytes_conflict"),
        "{report}"
    );
    assert!(
        failed.contains(&"lost_put_is_confirmed_by_retry_or_read"),
        "{report}"
    );
}

#[tokio::test]
async fn suite_catches_a_batched_read_that_drops_missing_keys() {
    let clock = ManualClock::starting_now();
    let store = ReadManyDropsMissing(MemoryLocationStore::with_clock(Arc::new(clock.clone())));
    let report = run_location_suite(&store, &location_caps(&clock)).await;
    assert_eq!(
        failed(&report),
        vec!["read_many_answers_as_exact_reads"],
        "{report}"
    );
}
