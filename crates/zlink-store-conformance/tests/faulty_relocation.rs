//! `FaultyRelocationStore` does what each mode says, proven on the in-memory reference store.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use zlink_store_conformance::{
    Fault, FaultyRelocationStore, InjectedError, RelocationCapabilities, RelocationOp,
    run_relocation_suite,
};
use zlink_store_spi::{
    BlobReadResult, BlobRef, Bytes, DynRelocationStore, FailureKind, ManualClock,
    MemoryRelocationStore, PutResult, RelocationStore, RenewResult, Retention, StoreError,
    StoreErrorKind,
};

fn reference(s: &str) -> BlobRef {
    BlobRef::new(s).unwrap()
}

fn hour() -> Retention {
    Retention::from_millis(3_600_000).unwrap()
}

fn payload(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}

async fn stored(store: &impl RelocationStore, r: &BlobRef) -> Option<Bytes> {
    match store.read(r).await.unwrap() {
        BlobReadResult::Found { bytes, .. } => Some(bytes),
        BlobReadResult::Missing { .. } => None,
    }
}

fn failure_kind(e: &StoreError) -> Option<FailureKind> {
    match e {
        StoreError::Failure { kind, .. } => Some(*kind),
        _ => None,
    }
}

#[tokio::test]
async fn pass_through_returns_inner_results_and_counts_every_call() {
    let r = reference("r");
    let faulty = FaultyRelocationStore::new(MemoryRelocationStore::new());
    assert!(matches!(
        faulty.put(&r, &payload("v"), hour()).await.unwrap(),
        PutResult::Stored { .. }
    ));
    assert!(matches!(
        faulty.put(&r, &payload("v"), hour()).await.unwrap(),
        PutResult::AlreadyStored { .. }
    ));
    assert_eq!(stored(&faulty, &r).await, Some(payload("v")));
    assert!(matches!(
        faulty.renew(&r, hour()).await.unwrap(),
        RenewResult::Renewed { .. }
    ));
    faulty.delete(&r).await.unwrap();
    assert_eq!(stored(&faulty, &r).await, None);
    assert_eq!(
        (
            faulty.puts(),
            faulty.reads(),
            faulty.renews(),
            faulty.deletes()
        ),
        (2, 2, 1, 1)
    );
}

#[tokio::test]
async fn unavailable_fails_every_operation_and_changes_nothing() {
    let (kept, new) = (reference("kept"), reference("new"));
    let memory = MemoryRelocationStore::new();
    memory.put(&kept, &payload("old"), hour()).await.unwrap();
    let faulty = FaultyRelocationStore::new(memory.clone());
    faulty.set_fault(RelocationOp::ALL, Fault::UNAVAILABLE);

    let errors = [
        faulty.put(&new, &payload("v"), hour()).await.unwrap_err(),
        faulty.read(&kept).await.unwrap_err(),
        faulty.renew(&kept, hour()).await.unwrap_err(),
        faulty.delete(&kept).await.unwrap_err(),
    ];
    for e in &errors {
        assert_eq!(failure_kind(e), Some(FailureKind::Unavailable), "{e:?}");
    }
    assert_eq!(stored(&memory, &new).await, None);
    assert_eq!(stored(&memory, &kept).await, Some(payload("old")));
    assert_eq!(memory.len(), 1);
}

#[tokio::test]
async fn lost_put_reply_stores_the_blob_exactly_once() {
    let r = reference("r");
    let memory = MemoryRelocationStore::new();
    let counting = Arc::new(FaultyRelocationStore::new(memory.clone()));
    let lossy = FaultyRelocationStore::losing_put_replies(counting.clone());

    let e = lossy.put(&r, &payload("v"), hour()).await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::TimedOut, "{e:?}");
    assert_eq!(counting.puts(), 1);
    assert_eq!(stored(&memory, &r).await, Some(payload("v")));
    // A retry with the same input confirms it; other operations pass through.
    assert!(matches!(
        memory.put(&r, &payload("v"), hour()).await.unwrap(),
        PutResult::AlreadyStored { .. }
    ));
    assert_eq!(stored(&lossy, &r).await, Some(payload("v")));
    lossy.delete(&r).await.unwrap();
    assert_eq!(stored(&memory, &r).await, None);
}

#[tokio::test]
async fn fail_before_and_after_on_delete() {
    let r = reference("r");
    let memory = MemoryRelocationStore::new();
    memory.put(&r, &payload("v"), hour()).await.unwrap();
    let faulty = FaultyRelocationStore::new(memory.clone());

    faulty.set_fault(
        [RelocationOp::Delete],
        Fault::FailBefore(InjectedError::Cancelled),
    );
    let e = faulty.delete(&r).await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Cancelled);
    assert_eq!(stored(&memory, &r).await, Some(payload("v")), "not deleted");

    let backend = InjectedError::Failure(FailureKind::Backend);
    faulty.set_fault([RelocationOp::Delete], Fault::FailAfter(backend));
    let e = faulty.delete(&r).await.unwrap_err();
    assert_eq!(failure_kind(&e), Some(FailureKind::Backend));
    assert_eq!(stored(&memory, &r).await, None, "deleted");
}

#[tokio::test]
async fn fail_next_covers_exactly_n_writes_of_any_write_kind() {
    let r = reference("r");
    let memory = MemoryRelocationStore::new();
    let faulty = FaultyRelocationStore::new(memory.clone());
    faulty.fail_next(RelocationOp::WRITES, 3, Fault::UNAVAILABLE);
    assert!(faulty.put(&r, &payload("v"), hour()).await.is_err());
    assert!(faulty.read(&r).await.is_ok(), "reads are not covered");
    assert!(faulty.renew(&r, hour()).await.is_err());
    assert!(faulty.delete(&r).await.is_err());
    assert_eq!(faulty.fail_next_remaining(), 0);
    assert!(faulty.put(&r, &payload("v"), hour()).await.is_ok());
    assert_eq!(stored(&memory, &r).await, Some(payload("v")));
}

#[tokio::test]
async fn write_hook_runs_on_put_renew_and_delete_only() {
    let r = reference("r");
    let faulty = FaultyRelocationStore::new(MemoryRelocationStore::new());
    let runs = Arc::new(AtomicU64::new(0));
    let counter = runs.clone();
    faulty.set_write_hook(Some(Arc::new(move || {
        counter.fetch_add(1, Ordering::SeqCst);
    })));
    faulty.put(&r, &payload("v"), hour()).await.unwrap();
    faulty.read(&r).await.unwrap();
    faulty.renew(&r, hour()).await.unwrap();
    faulty.delete(&r).await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

/// Single-threaded runtime: the delayed put can only progress when this test awaits.
#[tokio::test(flavor = "current_thread")]
async fn put_delay_holds_puts_but_not_reads() {
    let r = reference("r");
    let memory = MemoryRelocationStore::new();
    let faulty = Arc::new(FaultyRelocationStore::new(memory.clone()));
    faulty.set_delay([RelocationOp::Put], Some(Duration::from_millis(50)));
    let putter = faulty.clone();
    let target = r.clone();
    let put = tokio::spawn(async move { putter.put(&target, &payload("v"), hour()).await });
    while faulty.puts() == 0 {
        tokio::task::yield_now().await;
    }
    assert_eq!(stored(faulty.as_ref(), &r).await, None);
    assert!(!put.is_finished());
    assert!(matches!(
        put.await.unwrap().unwrap(),
        PutResult::Stored { .. }
    ));
    assert_eq!(stored(faulty.as_ref(), &r).await, Some(payload("v")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pass_through_wrapper_passes_the_whole_suite_through_arc_dyn() {
    let clock = ManualClock::starting_now();
    let memory: Arc<dyn DynRelocationStore> =
        Arc::new(MemoryRelocationStore::with_clock(Arc::new(clock.clone())));
    let faulty = Arc::new(FaultyRelocationStore::new(memory.clone()));
    let store: Arc<dyn DynRelocationStore> = faulty.clone();
    let caps = RelocationCapabilities::new()
        .with_manual_clock(clock)
        .with_largest_blob(false)
        .with_lossy_putter(Arc::new(FaultyRelocationStore::losing_put_replies(memory)));
    let report = run_relocation_suite(store.as_ref(), &caps).await;
    report.assert_all_passed();
    assert!(faulty.puts() > 0 && faulty.reads() > 0 && faulty.deletes() > 0);
}
