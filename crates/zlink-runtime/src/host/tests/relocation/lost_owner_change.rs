//! A move whose owner change the Store lost (spec 21 §9.1, §10; the simulation's seeds 4171,
//! 7379 and 8264 found it): an asynchronous-replica failover takes the Store back to the
//! source's `prepared` stage record after the move completed. The source's own writes all
//! survive, so nothing tells it; it follows the Actor to the target, whose activation closes
//! once it sees the record name another owner. Before, every call then ended `Unavailable`
//! for good; now the source's first read of the record removes it, and the next call creates
//! the Actor again under a higher ObjectGeneration.

use zlink_relocation::unit::RecordedStage;
use zlink_store_spi::{LocationStore, Mutation, ReadResult, WriteRequest};

use std::time::Duration;

use super::*;
use crate::host::tests::support::authority_key;
use crate::relocation::MovesOf;

on_every_store!(
    a_move_whose_owner_change_the_store_lost_is_created_again_on_the_next_call,
    a_move_whose_owner_change_the_store_lost_is_created_again_for_callers_on_other_nodes,
);

/// The rows a failover to a replica takes back together with the record: every node's
/// allocation row and every relocation reservation. The lease rows are left as they are: the
/// source renewed nothing in between (its verification then finds nothing lost), so no host
/// takes its lease over and no recovery sweep removes the record.
const ROLLED_BACK: [&str; 2] = ["node-capacity\0", "capacity-reservation\0"];

/// The record of `key` and the [`ROLLED_BACK`] rows as they are now.
async fn rows_now(
    store: &dyn zlink_store_spi::DynLocationStore,
    key: &zlink_store_spi::StoreKey,
) -> Vec<(zlink_store_spi::StoreKey, Option<bytes::Bytes>)> {
    let mut rows = Vec::new();
    for prefix in ROLLED_BACK {
        for (k, (b, _)) in zlink_testkit::snapshot_of(store, prefix).await {
            rows.push((k, Some(b)));
        }
    }
    let record = match store.read(key).await.expect("read") {
        ReadResult::Found { bytes, .. } => Some(bytes),
        _ => None,
    };
    rows.push((key.clone(), record));
    rows
}

/// Moves the counter `id` (at 1) off its owner and then takes the Store back to the rows of the
/// source's `prepared` stage record, as a failover to a replica that missed the owner change
/// does. The mesh, the Actor as first created, and the source.
async fn lose_the_owner_change(h: &Harness, id: &str) -> (Mesh, ActorRef, usize) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (_caller, r) = m.counter_at_one(id).await;
    let (source, _target) = m.owner_and_other(&r);
    let id = zlink_codec::ObjectId::new(id).expect("id");
    let key = authority_key(ObjectKind::Actor, &id);
    // The rows as the source's `prepared` stage record left them.
    let prepared = Arc::new(parking_lot::Mutex::new(None));
    let (store, saved, at) = (h.store.clone(), Arc::clone(&prepared), key.clone());
    let hook: crate::relocation::StageHook = Arc::new(move |stage| {
        let (store, saved, at) = (store.clone(), Arc::clone(&saved), at.clone());
        Box::pin(async move {
            if stage == RecordedStage::Prepared {
                *saved.lock() = Some(rows_now(store.as_ref(), &at).await);
            }
        })
    });
    let objects = &source.actors().expect("manager").client.objects;
    objects.relocations().probe.on_stage(Some(hook));
    relocate(source, &r).await.expect("moved");
    objects.relocations().probe.on_stage(None);
    let rows = prepared
        .lock()
        .take()
        .expect("the rows at the prepared record");
    // The failover: those rows are back as they were, the owner change and all after it lost.
    let now: Vec<_> = rows_now(h.store.as_ref(), &key).await;
    for (k, _) in now
        .iter()
        .filter(|(k, _)| !rows.iter().any(|(r, _)| r == k))
    {
        let gone =
            WriteRequest::new(Vec::new(), vec![Mutation::Delete(k.clone())]).expect("request");
        assert!(h.store.write(&gone).await.expect("write").is_applied());
    }
    for (k, bytes) in rows {
        let back = match bytes {
            Some(b) => Mutation::put(k, b),
            None => Mutation::Delete(k),
        };
        let back = WriteRequest::new(Vec::new(), vec![back]).expect("request");
        assert!(h.store.write(&back).await.expect("write").is_applied());
    }
    let source = m
        .servers
        .iter()
        .position(|(x, _)| std::ptr::eq(x, source))
        .expect("a server");
    (m, r, source)
}

/// Calls `id` through `calls` until one is answered by an incarnation above `before`'s (within
/// [`WAIT`]; inside the rollback window the target's old activation may still answer one):
/// the count the request answered.
async fn answered_again(calls: &crate::objects::ActorManager, id: &str, before: &ActorRef) -> u64 {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let answered = match calls.get_or_create("counter", id).await {
            Ok(again) => calls.request(id, &Incr).await.map(|n| (again, n)),
            Err(e) => Err(e),
        };
        let why = match answered {
            Ok((again, n)) if again.generation > before.generation => return n,
            Ok((again, n)) => format!("answered {n} by {again:?}"),
            Err(e) => e.to_string(),
        };
        assert!(
            tokio::time::Instant::now() < deadline,
            "the Actor is not answered by a new incarnation: {why}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Calls on the source, the owner the record names: its own read of the record removes it.
async fn a_move_whose_owner_change_the_store_lost_is_created_again_on_the_next_call(h: &Harness) {
    let (m, r, source) = lose_the_owner_change(h, "lo1").await;
    let calls = m.servers[source].0.actors().expect("manager");
    let count = answered_again(&calls, "lo1", &r).await;
    assert_eq!(
        count, 1,
        "a new incarnation: the moved state went with the lost owner change"
    );
    m.shutdown().await;
}

/// Calls from the client node only (the simulation's seed 8289): they reach the source, which
/// follows them to the target; the follow's one read of the record, or the source's answer by
/// the record once the follow ended, removes it. Before, only a call made on the source
/// itself ever judged the record.
async fn a_move_whose_owner_change_the_store_lost_is_created_again_for_callers_on_other_nodes(
    h: &Harness,
) {
    let (m, r, _) = lose_the_owner_change(h, "lo2").await;
    let calls = m.client.0.actors().expect("manager");
    let count = answered_again(&calls, "lo2", &r).await;
    assert_eq!(
        count, 1,
        "a new incarnation: the moved state went with the lost owner change"
    );
    m.shutdown().await;
}
