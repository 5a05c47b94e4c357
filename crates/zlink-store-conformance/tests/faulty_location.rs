//! `FaultyLocationStore` does what each mode says, proven on the in-memory reference store.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use zlink_store_conformance::{
    Fault, FaultyLocationStore, InjectedError, LocationCapabilities, LocationOp, run_location_suite,
};
use zlink_store_spi::{
    Bytes, Condition, DynLocationStore, FailureKind, LocationStore, ManualClock,
    MemoryLocationStore, Mutation, PageLimit, ReadResult, ScanPrefix, ScanRequest, ScanResult,
    StoreError, StoreErrorKind, StoreKey, StoreVersion, WriteRequest,
};

fn key(s: &str) -> StoreKey {
    StoreKey::new(s).unwrap()
}

fn put(k: &StoreKey, bytes: &'static str) -> WriteRequest {
    WriteRequest::new(vec![], vec![Mutation::put(k.clone(), bytes)]).unwrap()
}

fn cas(k: &StoreKey, version: &StoreVersion, bytes: &'static str) -> WriteRequest {
    WriteRequest::new(
        vec![Condition::Version(k.clone(), version.clone())],
        vec![Mutation::put(k.clone(), bytes)],
    )
    .unwrap()
}

fn scan_all() -> ScanRequest {
    ScanRequest::first(ScanPrefix::all(), PageLimit::LARGEST)
}

/// The bytes and version under `k`, read from the inner store directly.
async fn state(store: &impl LocationStore, k: &StoreKey) -> Option<(Bytes, StoreVersion)> {
    match store.read(k).await.unwrap() {
        ReadResult::Found { bytes, version, .. } => Some((bytes, version)),
        ReadResult::Missing { .. } => None,
    }
}

/// A store holding `k = "old"`, and its version.
async fn seeded(k: &StoreKey) -> (MemoryLocationStore, StoreVersion) {
    let memory = MemoryLocationStore::new();
    memory.write(&put(k, "old")).await.unwrap();
    let (_, version) = state(&memory, k).await.unwrap();
    (memory, version)
}

fn failure_kind(e: &StoreError) -> Option<FailureKind> {
    match e {
        StoreError::Failure { kind, .. } => Some(*kind),
        _ => None,
    }
}

fn counting_hook() -> (Arc<AtomicU64>, zlink_store_conformance::WriteHook) {
    let runs = Arc::new(AtomicU64::new(0));
    let counter = runs.clone();
    (
        runs,
        Arc::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        }),
    )
}

#[tokio::test]
async fn pass_through_returns_inner_results_and_counts_every_call() {
    let k = key("k");
    let memory = MemoryLocationStore::new();
    let faulty = FaultyLocationStore::new(memory.clone());
    assert!(faulty.write(&put(&k, "v")).await.unwrap().is_applied());
    let read = faulty.read(&k).await.unwrap();
    assert_eq!(read.bytes().map(|b| b.as_ref()), Some(&b"v"[..]));
    assert_eq!(
        read.version(),
        state(&memory, &k).await.map(|s| s.1).as_ref()
    );
    for _ in 0..2 {
        match faulty.scan(&scan_all()).await.unwrap() {
            ScanResult::Page(page) => assert_eq!(page.items.len(), 1),
            ScanResult::Expired => panic!("a first page cannot be expired"),
        }
    }
    assert_eq!((faulty.reads(), faulty.writes(), faulty.scans()), (1, 1, 2));
    assert_eq!(faulty.calls(LocationOp::Scan), 2);
}

#[tokio::test]
async fn unavailable_fails_every_operation_and_changes_nothing() {
    let k = key("k");
    let (memory, version) = seeded(&k).await;
    let faulty = FaultyLocationStore::new(memory.clone());
    let (hook_runs, hook) = counting_hook();
    faulty.set_write_hook(Some(hook));
    faulty.set_fault(LocationOp::ALL, Fault::UNAVAILABLE);

    let e = faulty.write(&put(&k, "new")).await.unwrap_err();
    assert_eq!(failure_kind(&e), Some(FailureKind::Unavailable), "{e:?}");
    let e = faulty.read(&k).await.unwrap_err();
    assert_eq!(failure_kind(&e), Some(FailureKind::Unavailable), "{e:?}");
    let e = faulty.scan(&scan_all()).await.unwrap_err();
    assert_eq!(failure_kind(&e), Some(FailureKind::Unavailable), "{e:?}");

    // Nothing reached the inner store: same bytes, same version, the hook never ran.
    assert_eq!(
        state(&memory, &k).await,
        Some((Bytes::from_static(b"old"), version))
    );
    assert_eq!(hook_runs.load(Ordering::SeqCst), 0);
    // Every call reached the wrapper and was counted.
    assert_eq!((faulty.reads(), faulty.writes(), faulty.scans()), (1, 1, 1));
}

#[tokio::test]
async fn fail_before_answers_the_chosen_error_and_changes_nothing() {
    let k = key("k");
    let (memory, version) = seeded(&k).await;
    let faulty = FaultyLocationStore::new(memory.clone());
    for (injected, kind) in [
        (InjectedError::TimedOut, StoreErrorKind::TimedOut),
        (InjectedError::Cancelled, StoreErrorKind::Cancelled),
        (
            InjectedError::Failure(FailureKind::Backend),
            StoreErrorKind::Failure,
        ),
    ] {
        faulty.set_fault([LocationOp::Write], Fault::FailBefore(injected));
        let e = faulty.write(&cas(&k, &version, "new")).await.unwrap_err();
        assert_eq!(e.kind(), kind, "{e:?}");
        assert_eq!(
            state(&memory, &k).await,
            Some((Bytes::from_static(b"old"), version.clone()))
        );
    }
    let e = faulty.write(&put(&k, "new")).await.unwrap_err();
    assert_eq!(failure_kind(&e), Some(FailureKind::Backend));
    // The fault was set for writes only.
    assert!(!faulty.read(&k).await.unwrap().is_missing());
}

#[tokio::test]
async fn lose_reply_applies_the_write_exactly_once_then_times_out() {
    let k = key("k");
    let (memory, version) = seeded(&k).await;
    // Outer: loses replies. Inner: passes through and counts what reached the store.
    let counting = Arc::new(FaultyLocationStore::new(memory.clone()));
    let lossy = FaultyLocationStore::losing_write_replies(counting.clone());
    assert_eq!(lossy.fault(LocationOp::Write), Fault::LOSE_REPLY);

    let request = cas(&k, &version, "new");
    let e = lossy.write(&request).await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::TimedOut, "{e:?}");
    assert!(e.outcome_unknown());
    assert_eq!(counting.writes(), 1, "the write reached the store once");

    let (bytes, new_version) = state(&memory, &k).await.unwrap();
    assert_eq!(bytes.as_ref(), b"new", "the lost write was applied");
    assert_ne!(new_version, version);
    // The same conditional write now conflicts: it was applied exactly once.
    assert!(!memory.write(&request).await.unwrap().is_applied());
    // Reads are not affected by a write fault.
    assert_eq!(lossy.read(&k).await.unwrap().version(), Some(&new_version));
}

#[tokio::test]
async fn fail_after_applies_the_write_and_answers_the_chosen_error() {
    let k = key("k");
    let (memory, version) = seeded(&k).await;
    let faulty = FaultyLocationStore::new(memory.clone());
    faulty.set_fault(
        [LocationOp::Write],
        Fault::FailAfter(InjectedError::Failure(FailureKind::Backend)),
    );
    let e = faulty.write(&cas(&k, &version, "new")).await.unwrap_err();
    assert_eq!(failure_kind(&e), Some(FailureKind::Backend), "{e:?}");
    let (bytes, new_version) = state(&memory, &k).await.unwrap();
    assert_eq!(bytes.as_ref(), b"new");
    assert_ne!(new_version, version);
}

#[tokio::test]
async fn fail_after_passes_an_inner_error_through() {
    let k = key("k");
    let (memory, version) = seeded(&k).await;
    let inner = FaultyLocationStore::new(memory.clone());
    inner.set_fault(LocationOp::ALL, Fault::UNAVAILABLE);
    let outer = FaultyLocationStore::losing_write_replies(inner);
    let e = outer.write(&put(&k, "new")).await.unwrap_err();
    assert_eq!(failure_kind(&e), Some(FailureKind::Unavailable), "{e:?}");
    assert_eq!(
        state(&memory, &k).await,
        Some((Bytes::from_static(b"old"), version))
    );
}

#[tokio::test]
async fn write_hook_runs_once_per_write_that_reaches_the_inner_store() {
    let clock = ManualClock::starting_now();
    let memory = MemoryLocationStore::with_clock(Arc::new(clock.clone()));
    let faulty = FaultyLocationStore::new(memory.clone());
    let (hook_runs, _) = counting_hook();
    let (runs, advancing) = (hook_runs.clone(), clock.clone());
    // What the runtime tests do: every write takes 2 s on the clock while in flight.
    faulty.set_write_hook(Some(Arc::new(move || {
        runs.fetch_add(1, Ordering::SeqCst);
        advancing.advance(Duration::from_secs(2));
    })));
    let k = key("k");

    let before = memory.read(&k).await.unwrap().store_now();
    let applied = faulty.write(&put(&k, "a")).await.unwrap();
    assert_eq!(before.millis_until(applied.store_now()), 2000);
    faulty.read(&k).await.unwrap();
    faulty.scan(&scan_all()).await.unwrap();
    assert_eq!(
        hook_runs.load(Ordering::SeqCst),
        1,
        "reads and scans skip it"
    );

    faulty.set_fault([LocationOp::Write], Fault::LOSE_REPLY);
    faulty.write(&put(&k, "b")).await.unwrap_err();
    assert_eq!(
        hook_runs.load(Ordering::SeqCst),
        2,
        "a lost reply reached the store"
    );

    faulty.set_fault([LocationOp::Write], Fault::UNAVAILABLE);
    faulty.write(&put(&k, "c")).await.unwrap_err();
    assert_eq!(
        hook_runs.load(Ordering::SeqCst),
        2,
        "a write failed before never ran it"
    );

    faulty.set_write_hook(None);
    faulty.heal();
    faulty.write(&put(&k, "d")).await.unwrap();
    assert_eq!(hook_runs.load(Ordering::SeqCst), 2);
    assert_eq!(faulty.writes(), 4);
}

/// Single-threaded runtime: the delayed write can only progress when this test awaits, so the
/// order of events is fixed, not raced against time.
#[tokio::test(flavor = "current_thread")]
async fn write_delay_holds_writes_but_not_reads() {
    let k = key("k");
    let memory = MemoryLocationStore::new();
    let faulty = Arc::new(FaultyLocationStore::new(memory.clone()));
    faulty.set_delay([LocationOp::Write], Some(Duration::from_millis(50)));

    let writer = faulty.clone();
    let request = put(&k, "v");
    let write = tokio::spawn(async move { writer.write(&request).await });
    while faulty.writes() == 0 {
        tokio::task::yield_now().await;
    }
    // The write reached the wrapper but not the store; a read through the same wrapper is not
    // held behind it (were reads delayed too, the earlier write would land first).
    assert!(faulty.read(&k).await.unwrap().is_missing());
    assert!(faulty.scan(&scan_all()).await.is_ok());
    assert!(!write.is_finished());
    assert!(write.await.unwrap().unwrap().is_applied());
    assert!(!faulty.read(&k).await.unwrap().is_missing());

    // A write cancelled during its delay never reaches the store.
    faulty.set_delay([LocationOp::Write], Some(Duration::from_secs(3600)));
    let writer = faulty.clone();
    let other = key("other");
    let request = put(&other, "v");
    let write = tokio::spawn(async move { writer.write(&request).await });
    while faulty.writes() == 1 {
        tokio::task::yield_now().await;
    }
    write.abort();
    assert!(write.await.unwrap_err().is_cancelled());
    assert!(memory.read(&other).await.unwrap().is_missing());
}

#[tokio::test]
async fn heal_passes_everything_through_and_keeps_counters() {
    let k = key("k");
    let faulty = FaultyLocationStore::new(MemoryLocationStore::new());
    faulty.set_fault(LocationOp::ALL, Fault::UNAVAILABLE);
    faulty.scan(&scan_all()).await.unwrap_err();
    faulty.set_delay(LocationOp::READS, Some(Duration::from_secs(3600)));
    faulty.fail_next([LocationOp::Write], 5, Fault::LOSE_REPLY);
    faulty.heal();
    assert_eq!(faulty.fail_next_remaining(), 0);
    for op in LocationOp::ALL {
        assert_eq!(faulty.fault(op), Fault::PassThrough);
    }
    assert!(faulty.write(&put(&k, "v")).await.unwrap().is_applied());
    assert!(!faulty.read(&k).await.unwrap().is_missing());
    assert!(faulty.scan(&scan_all()).await.is_ok());
    assert_eq!((faulty.reads(), faulty.writes(), faulty.scans()), (1, 1, 2));
}

#[test]
fn debug_shows_faults_delays_counters_and_hook() {
    let faulty = FaultyLocationStore::losing_write_replies(MemoryLocationStore::new());
    faulty.set_delay([LocationOp::Scan], Some(Duration::from_millis(7)));
    faulty.fail_next([LocationOp::Read], 2, Fault::UNAVAILABLE);
    faulty.set_write_hook(Some(Arc::new(|| {})));
    let shown = format!("{faulty:?}");
    for part in [
        "FaultyLocationStore",
        "Write: FailAfter(TimedOut)",
        "Read: PassThrough",
        "Scan: Some(7ms)",
        "2 of [Read]",
        "write_hook: true",
    ] {
        assert!(shown.contains(part), "{part} missing from {shown}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pass_through_wrapper_passes_the_whole_suite_through_arc_dyn() {
    let clock = ManualClock::starting_now();
    let memory: Arc<dyn DynLocationStore> =
        Arc::new(MemoryLocationStore::with_clock(Arc::new(clock.clone())));
    let faulty = Arc::new(FaultyLocationStore::new(memory.clone()));
    let store: Arc<dyn DynLocationStore> = faulty.clone();
    let caps = LocationCapabilities::new()
        .with_manual_clock(clock)
        .with_model_cases(100)
        .with_lossy_writer(Arc::new(FaultyLocationStore::losing_write_replies(memory)));
    let report = run_location_suite(store.as_ref(), &caps).await;
    report.assert_all_passed();
    assert!(faulty.writes() > 0 && faulty.reads() > 0 && faulty.scans() > 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// `fail_next(writes, n, ..)` fails exactly the next `n` writes (reads in between do not
    /// use the burst up), then writes pass through again.
    #[test]
    fn fail_next_fails_exactly_the_next_n_writes(
        n in 0u64..6,
        writes in 0usize..10,
        read_between in any::<bool>(),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let memory = MemoryLocationStore::new();
            let faulty = FaultyLocationStore::new(memory.clone());
            faulty.fail_next([LocationOp::Write], n, Fault::UNAVAILABLE);
            let mut outcomes = Vec::new();
            for i in 0..writes {
                let k = key(&format!("k{i}"));
                let failed = faulty.write(&put(&k, "v")).await.is_err();
                // A failed write changed nothing; a passed one applied.
                prop_assert_eq!(memory.read(&k).await.unwrap().is_missing(), failed);
                outcomes.push(failed);
                if read_between {
                    prop_assert!(faulty.read(&k).await.is_ok());
                }
            }
            let expected: Vec<bool> = (0..writes).map(|i| (i as u64) < n).collect();
            prop_assert_eq!(outcomes, expected);
            prop_assert_eq!(faulty.fail_next_remaining(), n.saturating_sub(writes as u64));
            prop_assert_eq!(faulty.writes(), writes as u64);
            Ok(())
        })?;
    }
}

#[tokio::test]
async fn a_keyed_fault_hits_only_the_next_operation_touching_its_key() {
    let (k, other) = (key("k"), key("other"));
    let (memory, version) = seeded(&k).await;
    let faulty = FaultyLocationStore::new(memory.clone());
    faulty.fail_next_write_touching(k.clone(), Fault::LOSE_REPLY);
    faulty.fail_next_read_of(k.clone(), Fault::UNAVAILABLE);

    // Operations on another key pass through and leave the keyed faults armed.
    assert!(faulty.write(&put(&other, "x")).await.unwrap().is_applied());
    assert!(faulty.read(&other).await.is_ok());

    // The write conditioned on `k` applies and loses its reply, once.
    let e = faulty.write(&cas(&k, &version, "new")).await.unwrap_err();
    assert!(matches!(e, StoreError::TimedOut), "{e:?}");
    let (bytes, now) = state(&memory, &k).await.unwrap();
    assert_eq!(bytes, Bytes::from_static(b"new"));
    // The next read of `k` fails, once; the one after it passes.
    let e = faulty.read(&k).await.unwrap_err();
    assert_eq!(failure_kind(&e), Some(FailureKind::Unavailable), "{e:?}");
    assert_eq!(faulty.read(&k).await.unwrap().version(), Some(&now));
    assert!(
        faulty
            .write(&cas(&k, &now, "newer"))
            .await
            .unwrap()
            .is_applied()
    );

    // `heal` clears keyed faults not yet used.
    faulty.fail_next_read_of(k.clone(), Fault::UNAVAILABLE);
    faulty.heal();
    assert!(faulty.read(&k).await.is_ok());
}

#[tokio::test]
async fn a_prefix_read_fault_hits_only_the_next_read_of_a_key_under_its_prefix() {
    let (k, other) = (key("row\0k"), key("other"));
    let (memory, _) = seeded(&k).await;
    let faulty = FaultyLocationStore::new(memory.clone());
    faulty.fail_next_read_under(ScanPrefix::new("row\0").unwrap(), Fault::UNAVAILABLE);

    // A key outside the prefix and a write under it pass through and leave the fault armed.
    assert!(faulty.read(&other).await.is_ok());
    assert!(faulty.write(&put(&key("row\0w"), "x")).await.is_ok());
    // The next read under the prefix fails, once; the one after it passes.
    let e = faulty.read(&k).await.unwrap_err();
    assert_eq!(failure_kind(&e), Some(FailureKind::Unavailable), "{e:?}");
    assert!(faulty.read(&k).await.is_ok());
}
