//! The batching engine as seen through the operations: lost replies, coalescing, recovery (spec 21 §10).

use super::prelude::*;

/// When a write's reply is lost, the engine settles the outcome by an exact read of the
/// witness key and its first-read version (never guessing): Reserve and Commit are reported
/// applied with the stored version, and the capacity row stays consistent.
pub(super) async fn lost_write_reply_is_reconstructed_from_the_store(h: &Harness) {
    let lossy = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let rt = h
        .runtime_with(lossy.clone(), LocationOptions::default(), None)
        .await;
    let a = Host {
        rt,
        desc: descriptor("main", &[1]),
    };
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
    let rt = h
        .runtime_with(counting.clone(), LocationOptions::default(), None)
        .await;
    let a = Arc::new(Host {
        rt,
        desc: descriptor("main", &[1]),
    });
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
