//! Every SPI bound: a test at the bound and one past it. Past the bound is a typed argument
//! error raised before any I/O, and the store is unchanged.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use zlink_store_spi::*;

fn length_error(e: ArgumentError, what: Argument) {
    match e {
        ArgumentError::Length { what: w, .. } => assert_eq!(w, what),
        other => panic!("expected a length error for {what}, got {other:?}"),
    }
}

#[test]
fn key_is_one_to_1024_bytes() {
    assert!(StoreKey::new("k").is_ok());
    assert!(StoreKey::new("k".repeat(1024)).is_ok());
    length_error(StoreKey::new("").unwrap_err(), Argument::Key);
    length_error(StoreKey::new("k".repeat(1025)).unwrap_err(), Argument::Key);
}

#[test]
fn key_length_counts_utf8_bytes_not_chars() {
    // 512 two-byte characters are 1,024 bytes; one more byte is past the bound.
    assert!(StoreKey::new("\u{e9}".repeat(512)).is_ok());
    length_error(
        StoreKey::new(format!("{}a", "\u{e9}".repeat(512))).unwrap_err(),
        Argument::Key,
    );
}

#[test]
fn key_from_bytes_must_be_utf8() {
    assert_eq!(
        StoreKey::from_utf8(&[0xff, 0xfe]).unwrap_err(),
        ArgumentError::NotUtf8 {
            what: Argument::Key
        }
    );
}

#[test]
fn version_is_one_to_4096_bytes() {
    assert!(StoreVersion::new("v".repeat(4096)).is_ok());
    length_error(
        StoreVersion::new("v".repeat(4097)).unwrap_err(),
        Argument::Version,
    );
    length_error(StoreVersion::new("").unwrap_err(), Argument::Version);
}

#[test]
fn scan_prefix_is_zero_to_1024_bytes() {
    assert!(ScanPrefix::new("").is_ok());
    assert!(ScanPrefix::new("p".repeat(1024)).is_ok());
    length_error(
        ScanPrefix::new("p".repeat(1025)).unwrap_err(),
        Argument::ScanPrefix,
    );
}

#[test]
fn cursor_is_one_to_4096_bytes() {
    assert!(ScanCursor::new("c".repeat(4096)).is_ok());
    length_error(
        ScanCursor::new("c".repeat(4097)).unwrap_err(),
        Argument::Cursor,
    );
    length_error(ScanCursor::new("").unwrap_err(), Argument::Cursor);
}

#[test]
fn blob_reference_is_one_to_4096_bytes() {
    assert!(BlobRef::new("r".repeat(4096)).is_ok());
    length_error(
        BlobRef::new("r".repeat(4097)).unwrap_err(),
        Argument::BlobReference,
    );
    length_error(BlobRef::new("").unwrap_err(), Argument::BlobReference);
}

#[test]
fn page_limit_is_one_to_1000() {
    assert_eq!(PageLimit::new(1).unwrap().get(), 1);
    assert_eq!(PageLimit::new(1000).unwrap().get(), 1000);
    length_error(PageLimit::new(0).unwrap_err(), Argument::PageLimit);
    length_error(PageLimit::new(1001).unwrap_err(), Argument::PageLimit);
}

fn k(i: usize) -> StoreKey {
    StoreKey::new(format!("k{i:05}")).unwrap()
}

#[test]
fn value_is_at_most_one_mib() {
    let at = WriteRequest::new(vec![], vec![Mutation::put(k(0), vec![0u8; MAX_VALUE_LEN])]);
    assert!(at.is_ok());
    let past = WriteRequest::new(
        vec![],
        vec![Mutation::put(k(0), vec![0u8; MAX_VALUE_LEN + 1])],
    );
    length_error(past.unwrap_err(), Argument::Value);
}

#[test]
fn batch_is_at_most_2048_unique_keys_across_conditions_and_mutations() {
    // 1,024 conditions + 1,024 puts on other keys = 2,048 unique keys.
    let conds: Vec<Condition> = (0..1024).map(|i| Condition::Missing(k(i))).collect();
    let muts: Vec<Mutation> = (1024..2048).map(|i| Mutation::put(k(i), "v")).collect();
    let at = WriteRequest::new(conds.clone(), muts.clone()).unwrap();
    assert_eq!(at.unique_keys(), 2048);
    let mut muts_past = muts.clone();
    muts_past.push(Mutation::put(k(2048), "v"));
    length_error(
        WriteRequest::new(conds.clone(), muts_past).unwrap_err(),
        Argument::Batch,
    );
    // A key in both a condition and a mutation counts once.
    let mut muts_shared = muts;
    muts_shared.push(Mutation::put(k(0), "v"));
    assert_eq!(
        WriteRequest::new(conds, muts_shared).unwrap().unique_keys(),
        2048
    );
}

#[test]
fn batch_is_at_most_4_mib_encoded() {
    let keys: Vec<StoreKey> = (0..4).map(k).collect();
    let key_bytes: usize = keys.iter().map(StoreKey::len).sum();
    let budget = WriteRequest::MAX_ENCODED_LEN - key_bytes;
    let sizes = [
        MAX_VALUE_LEN,
        MAX_VALUE_LEN,
        MAX_VALUE_LEN,
        budget - 3 * MAX_VALUE_LEN,
    ];
    let build = |extra: usize| {
        let muts = keys
            .iter()
            .zip(sizes)
            .enumerate()
            .map(|(i, (key, n))| {
                Mutation::put(key.clone(), vec![0u8; n + if i == 3 { extra } else { 0 }])
            })
            .collect();
        WriteRequest::new(vec![], muts)
    };
    assert_eq!(
        build(0).unwrap().encoded_len(),
        WriteRequest::MAX_ENCODED_LEN
    );
    length_error(build(1).unwrap_err(), Argument::Batch);
}

#[test]
fn a_key_may_not_repeat_within_conditions_or_within_mutations() {
    let dup_cond = WriteRequest::new(
        vec![
            Condition::Missing(k(1)),
            Condition::Version(k(1), StoreVersion::new("1").unwrap()),
        ],
        vec![],
    );
    assert!(matches!(
        dup_cond.unwrap_err(),
        ArgumentError::DuplicateKey {
            within: "conditions",
            ..
        }
    ));
    let dup_mut = WriteRequest::new(
        vec![],
        vec![Mutation::put(k(1), "a"), Mutation::Delete(k(1))],
    );
    assert!(matches!(
        dup_mut.unwrap_err(),
        ArgumentError::DuplicateKey {
            within: "mutations",
            ..
        }
    ));
    // The same key once in each is the compare-and-set shape, and fine.
    assert!(
        WriteRequest::new(
            vec![Condition::Missing(k(1))],
            vec![Mutation::put(k(1), "a")]
        )
        .is_ok()
    );
}

#[test]
fn an_empty_batch_is_rejected() {
    assert_eq!(
        WriteRequest::new(vec![], vec![]).unwrap_err(),
        ArgumentError::EmptyBatch
    );
}

#[test]
fn retention_is_positive_and_at_most_100_years() {
    assert_eq!(Retention::from_millis(1).unwrap().as_millis(), 1);
    assert!(matches!(
        Retention::from_millis(0).unwrap_err(),
        ArgumentError::Retention { .. }
    ));
    assert!(Retention::from_millis(Retention::MAX_MILLIS).is_ok());
    assert!(Retention::from_millis(Retention::MAX_MILLIS + 1).is_err());
    // Sub-millisecond durations round up rather than becoming "no expiry".
    assert_eq!(
        Retention::new(Duration::from_nanos(1)).unwrap().as_millis(),
        1
    );
}

#[tokio::test]
async fn blob_is_at_most_64_mib_plus_23_bytes_and_past_it_stores_nothing() {
    assert!(check_blob_len(MAX_BLOB_LEN).is_ok());
    length_error(
        check_blob_len(MAX_BLOB_LEN + 1).unwrap_err(),
        Argument::BlobPayload,
    );
    let store = MemoryRelocationStore::new();
    let r = BlobRef::new("too-big").unwrap();
    let err = store
        .put(
            &r,
            &Bytes::from(vec![0u8; MAX_BLOB_LEN + 1]),
            Retention::from_millis(1000).unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::InvalidArgument);
    assert!(store.is_empty());
}

/// Counts the exact reads that reach the store (so a refused `read_many` is seen doing none).
#[derive(Debug)]
struct CountingReads {
    inner: MemoryLocationStore,
    reads: std::sync::atomic::AtomicUsize,
}

impl LocationStore for CountingReads {
    async fn read(&self, key: &StoreKey) -> StoreResult<ReadResult> {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.read(key).await
    }
    async fn write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
        self.inner.write(request).await
    }
    async fn scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
        self.inner.scan(request).await
    }
}

#[tokio::test]
async fn read_many_is_at_most_1000_keys_and_past_it_reads_nothing() {
    assert!(check_read_many_len(0).is_ok());
    assert!(check_read_many_len(MAX_READ_MANY_KEYS).is_ok());
    length_error(
        check_read_many_len(MAX_READ_MANY_KEYS + 1).unwrap_err(),
        Argument::ReadMany,
    );
    let store = Arc::new(CountingReads {
        inner: MemoryLocationStore::new(),
        reads: std::sync::atomic::AtomicUsize::new(0),
    });
    let reads = || store.reads.load(std::sync::atomic::Ordering::SeqCst);
    let dyn_store: Arc<dyn DynLocationStore> = store.clone();
    // At the bound: one answer per key, through the trait and through `dyn`.
    let at: Vec<StoreKey> = (0..MAX_READ_MANY_KEYS).map(k).collect();
    let answers = store.read_many(&at).await.unwrap();
    assert_eq!(answers.len(), MAX_READ_MANY_KEYS);
    assert!(answers.iter().all(ReadResult::is_missing));
    assert_eq!(
        dyn_store.read_many(&at).await.unwrap().len(),
        MAX_READ_MANY_KEYS
    );
    let before = reads();
    // Past it: a typed argument error and no read at all, whichever way it is called.
    let past: Vec<StoreKey> = (0..=MAX_READ_MANY_KEYS).map(k).collect();
    for err in [
        store.read_many(&past).await.unwrap_err(),
        dyn_store.read_many(&past).await.unwrap_err(),
    ] {
        assert_eq!(err.kind(), StoreErrorKind::InvalidArgument);
        let StoreError::InvalidArgument(a) = err else {
            panic!("not an argument error: {err:?}");
        };
        length_error(a, Argument::ReadMany);
    }
    assert_eq!(reads(), before, "a refused read_many read something");
    // No keys: an empty answer, no read.
    assert!(store.read_many(&[]).await.unwrap().is_empty());
    assert_eq!(reads(), before);
}

#[test]
fn failure_display_never_shows_backend_text() {
    let e = StoreError::failure(
        FailureKind::Backend,
        "ERR secret-script-name at key app:{x}",
    );
    let shown = e.to_string();
    assert!(!shown.contains("secret"), "{shown}");
    assert_eq!(e.kind(), StoreErrorKind::Failure);
    assert!(
        std::error::Error::source(&e).is_some(),
        "the source stays available for logs"
    );
    assert!(e.outcome_unknown());
    assert!(!StoreError::from(ArgumentError::EmptyBatch).outcome_unknown());
}

#[tokio::test]
async fn memory_store_scan_snapshot_memory_stays_bounded_for_a_hot_key() {
    let clock = ManualClock::starting_now();
    let store = MemoryLocationStore::with_clock(Arc::new(clock.clone()));
    let hot = k(0);
    for i in 0..3 {
        let req = WriteRequest::new(vec![], vec![Mutation::put(k(i), "v")]).unwrap();
        store.write(&req).await.unwrap();
    }
    // Hold a snapshot open mid-scan.
    let first = store
        .scan(&ScanRequest::first(
            ScanPrefix::all(),
            PageLimit::new(1).unwrap(),
        ))
        .await
        .unwrap();
    let ScanResult::Page(page) = first else {
        panic!("expired")
    };
    let cursor = page.next_cursor.unwrap();
    for i in 0..10_000u32 {
        let req =
            WriteRequest::new(vec![], vec![Mutation::put(hot.clone(), i.to_string())]).unwrap();
        store.write(&req).await.unwrap();
    }
    // The hot key keeps only its present state and the one the snapshot sees.
    assert!(
        store.retained_states() <= 4,
        "{} states retained",
        store.retained_states()
    );
    let next = store
        .scan(&ScanRequest::next(
            ScanPrefix::all(),
            PageLimit::new(1000).unwrap(),
            cursor,
        ))
        .await
        .unwrap();
    assert!(matches!(next, ScanResult::Page(_)));
    assert_eq!(
        store.retained_states(),
        3,
        "the finished scan released its history"
    );
}

#[tokio::test]
async fn memory_store_snapshots_expire_and_are_capped() {
    let clock = ManualClock::starting_now();
    let options = memory::MemoryLocationOptions::default()
        .snapshot_ttl(Duration::from_secs(10))
        .max_snapshots(2);
    let store = MemoryLocationStore::with_options(Arc::new(clock.clone()), options);
    for i in 0..3 {
        let req = WriteRequest::new(vec![], vec![Mutation::put(k(i), "v")]).unwrap();
        store.write(&req).await.unwrap();
    }
    let limit = PageLimit::new(1).unwrap();
    let mut cursors = Vec::new();
    for _ in 0..3 {
        let ScanResult::Page(p) = store
            .scan(&ScanRequest::first(ScanPrefix::all(), limit))
            .await
            .unwrap()
        else {
            panic!("expired")
        };
        cursors.push(p.next_cursor.unwrap());
    }
    assert_eq!(store.live_snapshots(), 2);
    // The oldest was dropped when the third was taken.
    let oldest = store
        .scan(&ScanRequest::next(
            ScanPrefix::all(),
            limit,
            cursors[0].clone(),
        ))
        .await
        .unwrap();
    assert_eq!(oldest, ScanResult::Expired);
    clock.advance(Duration::from_secs(11));
    let late = store
        .scan(&ScanRequest::next(
            ScanPrefix::all(),
            limit,
            cursors[2].clone(),
        ))
        .await
        .unwrap();
    assert_eq!(late, ScanResult::Expired);
    assert_eq!(store.live_snapshots(), 0);
}

#[tokio::test]
async fn memory_store_cursor_of_another_store_is_expired() {
    let a = MemoryLocationStore::new();
    let b = MemoryLocationStore::new();
    for s in [&a, &b] {
        for i in 0..3 {
            let req = WriteRequest::new(vec![], vec![Mutation::put(k(i), "v")]).unwrap();
            s.write(&req).await.unwrap();
        }
    }
    let limit = PageLimit::new(1).unwrap();
    let ScanResult::Page(p) = a
        .scan(&ScanRequest::first(ScanPrefix::all(), limit))
        .await
        .unwrap()
    else {
        panic!("expired")
    };
    let foreign = b
        .scan(&ScanRequest::next(
            ScanPrefix::all(),
            limit,
            p.next_cursor.unwrap(),
        ))
        .await
        .unwrap();
    assert_eq!(foreign, ScanResult::Expired);
}
