//! The root disposes of the stores it was given (spec 21 §2; 22 §7): once, after every use
//! ended, when it is their last owner — and never a store the application (or another root
//! still running) holds.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use zlink_store_spi::{
    BlobReadResult, BlobRef, Bytes, Deleted, DynLocationStore, LocationStore, MemoryLocationStore,
    MemoryRelocationStore, PutResult, ReadResult, RelocationStore, RenewResult, Retention,
    ScanRequest, ScanResult, StoreKey, StoreResult, WriteRequest, WriteResult,
};
use zlink_testkit::Harness;

use super::support::*;
use crate::ZLink;
use crate::host::{ShutdownOutcome, ZLinkHost};

/// What a store saw: operations, closes, and operations that came after a close.
#[derive(Debug, Default)]
struct Seen {
    ops: AtomicUsize,
    closes: AtomicUsize,
    ops_after_close: AtomicUsize,
}

impl Seen {
    fn op(&self) {
        self.ops.fetch_add(1, Ordering::SeqCst);
        if self.closes.load(Ordering::SeqCst) > 0 {
            self.ops_after_close.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn close(&self) {
        self.closes.fetch_add(1, Ordering::SeqCst);
    }
    fn get(&self) -> (usize, usize, usize) {
        (
            self.ops.load(Ordering::SeqCst),
            self.closes.load(Ordering::SeqCst),
            self.ops_after_close.load(Ordering::SeqCst),
        )
    }
}

#[derive(Debug)]
struct SeenLocation(MemoryLocationStore, Arc<Seen>);

impl LocationStore for SeenLocation {
    async fn read(&self, key: &StoreKey) -> StoreResult<ReadResult> {
        self.1.op();
        self.0.read(key).await
    }
    async fn write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
        self.1.op();
        self.0.write(request).await
    }
    async fn scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
        self.1.op();
        self.0.scan(request).await
    }
    async fn close(&self) {
        self.1.close();
    }
}

#[derive(Debug)]
struct SeenRelocation(MemoryRelocationStore, Arc<Seen>);

impl RelocationStore for SeenRelocation {
    async fn put(
        &self,
        reference: &BlobRef,
        payload: &Bytes,
        retention: Retention,
    ) -> StoreResult<PutResult> {
        self.1.op();
        self.0.put(reference, payload, retention).await
    }
    async fn read(&self, reference: &BlobRef) -> StoreResult<BlobReadResult> {
        self.1.op();
        self.0.read(reference).await
    }
    async fn renew(&self, reference: &BlobRef, retention: Retention) -> StoreResult<RenewResult> {
        self.1.op();
        self.0.renew(reference, retention).await
    }
    async fn delete(&self, reference: &BlobRef) -> StoreResult<Deleted> {
        self.1.op();
        self.0.delete(reference).await
    }
    async fn close(&self) {
        self.1.close();
    }
}

/// A counter server on `location` (and a Relocation Store, when given), ready.
async fn root(
    location: Arc<dyn DynLocationStore>,
    relocation: Option<Arc<dyn zlink_store_spi::DynRelocationStore>>,
) -> ZLinkHost {
    let mut b = ZLink::builder().location_store(location);
    if let Some(r) = relocation {
        b = b.relocation_store(r);
    }
    let host = counter_root(b, short_lease(), &Arc::default()).await;
    host.ready(WAIT).await.expect("ready");
    host
}

/// One Actor created and asked once: the stores are in use.
async fn use_it(host: &ZLinkHost) {
    let m = host.actors().expect("manager");
    m.get_or_create("counter", "c-1").await.expect("created");
    assert_eq!(m.request("c-1", &Incr).await.expect("incr"), 1);
}

#[tokio::test]
async fn a_root_closes_the_stores_it_alone_holds_once_after_every_use() {
    let (location, relocation) = (Arc::new(Seen::default()), Arc::new(Seen::default()));
    let host = root(
        Arc::new(SeenLocation(MemoryLocationStore::new(), location.clone())),
        Some(Arc::new(SeenRelocation(
            MemoryRelocationStore::new(),
            relocation.clone(),
        ))),
    )
    .await;
    use_it(&host).await;
    assert_eq!(location.get().1, 0, "not closed while running");
    let report = host.shutdown().await;
    assert_eq!(report.outcome, ShutdownOutcome::Stopped, "{report:?}");
    let (ops, closes, after) = location.get();
    assert!(ops > 0);
    assert_eq!((closes, after), (1, 0), "closed once, after its last use");
    assert_eq!(relocation.get().1, 1, "the Relocation Store too");
    // A shutdown asked again shares the first run: nothing is closed twice.
    host.shutdown().await;
    drop(host);
    assert_eq!((location.get().1, relocation.get().1), (1, 1));
}

#[tokio::test]
async fn a_store_two_roots_share_is_closed_by_the_last_to_stop() {
    let seen = Arc::new(Seen::default());
    let store: Arc<dyn DynLocationStore> =
        Arc::new(SeenLocation(MemoryLocationStore::new(), seen.clone()));
    let a = root(store.clone(), None).await;
    let b = root(store, None).await;
    use_it(&a).await;
    a.shutdown().await;
    assert_eq!(seen.get().1, 0, "b still uses it");
    // b still works on it.
    let m = b.actors().expect("manager");
    m.get_or_create("counter", "c-2").await.expect("created");
    assert_eq!(m.request("c-2", &Incr).await.expect("incr"), 1);
    b.shutdown().await;
    let (_, closes, after) = seen.get();
    assert_eq!((closes, after), (1, 0));
}

on_every_store!(a_store_the_application_still_holds_stays_open_after_shutdown);

/// The application kept its store: the root's shutdown leaves it working.
async fn a_store_the_application_still_holds_stays_open_after_shutdown(h: &Harness) {
    let host = root(h.store.clone(), None).await;
    use_it(&host).await;
    host.shutdown().await;
    let key = StoreKey::new("dispose-probe").expect("key");
    assert!(
        h.store.read(&key).await.is_ok(),
        "the store the application holds still answers"
    );
}

/// The Redis providers' connections are closed by the root that was their last owner: a clone
/// of the provider (sharing its connection) the test kept outside the root's `Arc` stops
/// answering once the root stopped.
#[tokio::test]
async fn a_redis_store_only_the_root_held_is_closed_by_its_shutdown() {
    const TEST: &str = "a_redis_store_only_the_root_held_is_closed_by_its_shutdown";
    let Some(url) = zlink_store_conformance::live::env_or_skip("ZLINK_TEST_REDIS_URL", TEST) else {
        return;
    };
    let prefix = format!("zlink-test-dispose-{}", uuid::Uuid::new_v4());
    let options = zlink_redis_location::RedisLocationOptions::from_url(&url)
        .expect("url")
        .with_key_prefix(prefix.clone())
        .expect("prefix");
    let store = zlink_redis_location::RedisLocationStore::connect(options.clone())
        .await
        .expect("Redis");
    let host = root(Arc::new(store.clone()), None).await;
    use_it(&host).await;
    let key = StoreKey::new("dispose-probe").expect("key");
    assert!(store.read(&key).await.is_ok(), "open while the root runs");
    let report = host.shutdown().await;
    assert_eq!(report.outcome, ShutdownOutcome::Stopped, "{report:?}");
    assert!(
        store.read(&key).await.is_err(),
        "the connection the root owned is closed"
    );
    // The keys the run left (counters) go with the test.
    let cleanup = zlink_redis_location::RedisLocationStore::connect(options)
        .await
        .expect("Redis");
    for key in zlink_testkit::snapshot_of(&cleanup, "").await.keys() {
        zlink_testkit::force_delete(&cleanup, key).await;
    }
}
