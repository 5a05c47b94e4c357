//! The whole contract suite against the in-memory reference providers, directly and through
//! `Arc<dyn ...>`.

use std::sync::Arc;

use zlink_store_conformance::{
    FaultyLocationStore, FaultyRelocationStore, LocationCapabilities, RelocationCapabilities,
    run_location_suite, run_relocation_suite,
};
use zlink_store_spi::{
    DynLocationStore, DynRelocationStore, ManualClock, MemoryLocationStore, MemoryRelocationStore,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_location_store_passes_the_suite() {
    let clock = ManualClock::starting_now();
    let store = MemoryLocationStore::with_clock(Arc::new(clock.clone()));
    let caps = LocationCapabilities::new()
        .with_manual_clock(clock.clone())
        .with_lossy_writer(Arc::new(FaultyLocationStore::losing_write_replies(
            store.clone(),
        )));
    let report = run_location_suite(&store, &caps).await;
    eprintln!("{report}");
    report.assert_all_passed();
    // Deleted keys are kept only for live snapshots and expired ones only until swept: once
    // every snapshot has expired, nothing is left.
    clock.advance(std::time::Duration::from_secs(3600));
    store.compact();
    assert_eq!(store.live_snapshots(), 0);
    assert_eq!(store.key_count(), 0, "the suite left keys behind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_location_store_passes_the_suite_through_arc_dyn() {
    let clock = ManualClock::starting_now();
    let inner = MemoryLocationStore::with_clock(Arc::new(clock.clone()));
    let direct: Arc<dyn DynLocationStore> = Arc::new(inner.clone());
    // An Arc<dyn> inside an Arc<dyn>: every call goes through both dynamic layers.
    let wrapped: Arc<dyn DynLocationStore> = Arc::new(direct);
    let caps = LocationCapabilities::new()
        .with_manual_clock(clock)
        .with_model_cases(200);
    let report = run_location_suite(wrapped.as_ref(), &caps).await;
    eprintln!("{report}");
    report.assert_all_passed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_location_store_passes_the_suite_on_the_real_clock() {
    // No clock capability: expiry checks sleep for real; the model runs without expiry.
    let store = MemoryLocationStore::new();
    let caps = LocationCapabilities::new().with_model_cases(200);
    let report = run_location_suite(&store, &caps).await;
    eprintln!("{report}");
    report.assert_all_passed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_relocation_store_passes_the_suite() {
    let clock = ManualClock::starting_now();
    let store = MemoryRelocationStore::with_clock(Arc::new(clock.clone()));
    let caps = RelocationCapabilities::new()
        .with_manual_clock(clock)
        .with_lossy_putter(Arc::new(FaultyRelocationStore::losing_put_replies(
            store.clone(),
        )));
    let report = run_relocation_suite(&store, &caps).await;
    eprintln!("{report}");
    report.assert_all_passed();
    assert!(store.is_empty(), "the suite left blobs behind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_relocation_store_passes_the_suite_through_arc_dyn() {
    let clock = ManualClock::starting_now();
    let inner: Arc<dyn DynRelocationStore> =
        Arc::new(MemoryRelocationStore::with_clock(Arc::new(clock.clone())));
    let wrapped: Arc<dyn DynRelocationStore> = Arc::new(inner);
    let caps = RelocationCapabilities::new().with_manual_clock(clock);
    let report = run_relocation_suite(wrapped.as_ref(), &caps).await;
    eprintln!("{report}");
    report.assert_all_passed();
}
