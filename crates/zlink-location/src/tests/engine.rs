//! The batching engine as seen through the operations: lost replies, coalescing, recovery (spec 21 §10).

use super::prelude::*;

/// When a write's reply is lost, the engine settles the outcome by an exact read of the
/// witness key and its first-read version (never guessing): Reserve and Commit are reported
/// applied with the stored version, and the capacity row stays consistent.
pub(super) async fn lost_write_reply_is_reconstructed_from_the_store(h: &Harness) {
    let lossy = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let a = h
        .host_with(lossy.clone(), LocationOptions::default(), None, 1)
        .await;
    lossy.set_fault([LocationOp::Write], Fault::LOSE_REPLY);
    let x = reserve(&a, ObjectKind::Actor, "x", "chat", &a).await;
    let key = keys::authority(ObjectKind::Actor, &id("x")).expect("key");
    assert_eq!(
        h.store.read(&key).await.expect("read").version(),
        Some(x.version())
    );
    let x =
        a.rt.authority()
            .commit(&x, None)
            .await
            .expect("commit")
            .applied()
            .expect("applied");
    assert_eq!(
        h.store.read(&key).await.expect("read").version(),
        Some(x.version())
    );
    lossy.heal();
    let row = capacity(&a, &a).await;
    assert_eq!((row.actors.active, row.actors.reserved), (1, 0));
    // The engine's cached rows were refreshed: the next operation works.
    active_actor(&a, "y").await;
    assert_eq!(capacity(&a, &a).await.actors.active, 2);
}

/// Concurrent operations of one host share batches: 50 concurrent Reserve+Commit pairs take
/// far fewer than 100 writes. Each write stays in flight for 20 ms, so the operations submitted
/// meanwhile queue behind it whatever the scheduling (on a fast store they might all run one
/// by one, which is allowed, and would prove nothing).
pub(super) async fn concurrent_operations_coalesce_into_shared_batches(h: &Harness) {
    let counting = Arc::new(FaultyLocationStore::new(h.store.clone()));
    counting.set_delay([LocationOp::Write], Some(Duration::from_millis(20)));
    let a = Arc::new(
        h.host_with(counting.clone(), LocationOptions::default(), None, 1)
            .await,
    );
    let before = counting.writes();
    let mut tasks = Vec::new();
    for i in 0..50 {
        let a = a.clone();
        tasks.push(tokio::spawn(async move {
            active_actor(&a, &format!("c{i}")).await;
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    let writes = counting.writes() - before;
    assert!(writes < 100, "{writes} writes for 100 operations");
    assert_eq!(capacity(&a, &a).await.actors.active, 50);
    let ids: BTreeSet<u64> = {
        let mut s = BTreeSet::new();
        for i in 0..50 {
            if let AuthorityRead::Found { handle, .. } =
                a.rt.authority()
                    .read(ObjectKind::Actor, &id(&format!("c{i}")))
                    .await
                    .expect("read")
            {
                s.insert(handle.object_generation().get());
            }
        }
        s
    };
    assert_eq!(ids.len(), 50, "every object got its own ObjectGeneration");
}

/// A store whose exact reads of one key wait until the gate opens (everything else passes).
#[derive(Debug)]
struct GatedReads {
    inner: Arc<dyn DynLocationStore>,
    key: StoreKey,
    open: tokio::sync::watch::Sender<bool>,
    waiting: std::sync::atomic::AtomicUsize,
}

impl LocationStore for GatedReads {
    async fn read(&self, key: &StoreKey) -> zlink_store_spi::StoreResult<ReadResult> {
        if key == &self.key {
            let mut open = self.open.subscribe();
            self.waiting.fetch_add(1, Ordering::SeqCst);
            // The sender lives as long as the store.
            let _ = open.wait_for(|o| *o).await;
        }
        self.inner.read(key).await
    }

    async fn write(
        &self,
        request: &zlink_store_spi::WriteRequest,
    ) -> zlink_store_spi::StoreResult<zlink_store_spi::WriteResult> {
        self.inner.write(request).await
    }

    async fn scan(
        &self,
        request: &zlink_store_spi::ScanRequest,
    ) -> zlink_store_spi::StoreResult<zlink_store_spi::ScanResult> {
        self.inner.scan(request).await
    }
}

/// Waits (bounded) until `done` holds.
async fn eventually(what: &str, done: impl Fn() -> bool) {
    for _ in 0..2_000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{what} did not happen within 10 s");
}

/// A batch whose outcome is unknown is settled off the engine's loop: while its witness read
/// is held up, operations on other rows go through batches of their own and complete; once
/// the read answers, the first operation is settled as applied.
pub(super) async fn unknown_outcome_recovery_does_not_stall_other_batches(h: &Harness) {
    let x_key = keys::authority(ObjectKind::Actor, &id("x")).expect("key");
    let (open, _) = tokio::sync::watch::channel(true);
    let gated = Arc::new(GatedReads {
        inner: h.store.clone(),
        key: x_key,
        open,
        waiting: Default::default(),
    });
    let faulty = Arc::new(FaultyLocationStore::new(
        gated.clone() as Arc<dyn DynLocationStore>
    ));
    let a = Arc::new(
        h.host_with(faulty.clone(), LocationOptions::default(), None, 1)
            .await,
    );
    let x = active_actor(&a, "x").await;
    // The next write (x's Preserve) is applied but its reply is lost; the witness read of x's
    // row then waits for the gate.
    gated.open.send_replace(false);
    faulty.fail_next([LocationOp::Write], 1, Fault::LOSE_REPLY);
    let preserve = {
        let a = a.clone();
        tokio::spawn(async move { a.rt.authority().preserve(&x, b"kept".to_vec()).await })
    };
    eventually("the witness read of the lost batch", || {
        gated.waiting.load(Ordering::SeqCst) > 0
    })
    .await;
    // Other rows keep moving meanwhile.
    let y = tokio::time::timeout(Duration::from_secs(30), active_actor(&a, "y"))
        .await
        .expect("an operation on other rows completes while another batch is being settled");
    assert_eq!(y.state(), AllocationState::Active);
    assert!(
        !preserve.is_finished(),
        "the lost batch is still being settled"
    );
    gated.open.send_replace(true);
    let preserved = preserve
        .await
        .expect("task")
        .expect("preserve")
        .applied()
        .expect("settled as applied by the witness");
    assert_eq!(preserved.payload(), b"kept");
    assert_eq!(capacity(&a, &a).await.actors.active, 2);
}
