//! A Location Store that lost its data while the roots ran (spec 21 §3, §5, §10; the
//! store-epoch decision in `docs/store-epoch.md`).

use std::sync::Arc;
use std::time::Duration;

use zlink_store_spi::{
    Condition, DynLocationStore, LocationStore, Mutation, ReadResult, WriteRequest,
};
use zlink_testkit::{Harness, snapshot_of};

use super::support::*;

/// Deletes every key of the store (the Redis prefix of the test): a Store restarted without
/// persistence. Each key of one snapshot is deleted once, under the version it holds then (the
/// roots keep renewing meanwhile).
async fn wipe(store: &dyn DynLocationStore) {
    for key in snapshot_of(store, "").await.keys() {
        for _ in 0..64 {
            let ReadResult::Found { version, .. } = store.read(key).await.expect("read") else {
                break;
            };
            let delete = WriteRequest::new(
                vec![Condition::Version(key.clone(), version)],
                vec![Mutation::Delete(key.clone())],
            )
            .expect("request");
            if store.write(&delete).await.expect("write").is_applied() {
                break;
            }
        }
    }
}

on_every_store!(
    after_store_data_loss_nodes_rejoin_and_actors_are_recreated_with_higher_generations
);

/// Three roots with live counter Actors; every key of the Store is deleted. Each root notices
/// the lost lease, takes it over under a new, higher LeaseGeneration, republishes its
/// descriptor (every node sees its peers again) and closes the activations of its earlier run
/// (their records are gone); every Actor is then reachable again as a new incarnation with an
/// ObjectGeneration above the one it had, live on exactly one node.
async fn after_store_data_loss_nodes_rejoin_and_actors_are_recreated_with_higher_generations(
    h: &Harness,
) {
    let ([ha, hb, hc], [a, b, c]) = three_counter_servers(&h.store).await;
    let hosts = [&ha, &hb, &hc];
    let m = ha.actors().expect("manager");
    let old = counters_asked_once(&m, "c", 12).await;
    let runs: Vec<_> = hosts
        .iter()
        .map(|x| x.object_host(0).location.host_run().expect("run"))
        .collect();

    wipe(h.store.as_ref()).await;

    // Every root holds its lease again under a higher generation, and the activations of its
    // earlier run are closed (their records are gone).
    wait_until(
        "every root re-acquired above its earlier generation",
        || {
            hosts.iter().zip(&runs).all(|(x, first)| {
                x.object_host(0).location.host_run().is_some_and(|r| {
                    r.owner_id == first.owner_id && r.lease_generation > first.lease_generation
                })
            })
        },
    )
    .await;
    wait_until("the earlier runs' activations are closed", || {
        live_per_id(&hosts).is_empty()
    })
    .await;
    // Every node sees its peers again: the descriptors are republished under the new runs.
    for n in [&a, &b, &c] {
        wait_peers(n, 2).await;
    }
    // A wipe is not atomic: a root may notice a later part of it (a counter answering below
    // what it saw, a row it wrote gone) after it first re-acquired, and take its lease over
    // once more. What must hold is that the list names every root's current run.
    let discovery = ha.object_discovery(0);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        // `None` while a root is between two runs.
        let now: Option<Vec<_>> = hosts
            .iter()
            .map(|x| x.object_host(0).location.host_run())
            .collect();
        let listed = discovery
            .refresh()
            .await
            .ok()
            .map(|v| v.nodes.iter().map(|n| n.run.clone()).collect::<Vec<_>>());
        if let (Some(now), Some(listed)) = (&now, &listed)
            && now.iter().all(|r| listed.contains(r))
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not every node listed again: runs {now:?}, listed {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Every Actor is reachable again, a new incarnation with a higher ObjectGeneration.
    for r in &old {
        let deadline = tokio::time::Instant::now() + WAIT;
        let again = loop {
            match m.get_or_create("counter", r.id.as_str()).await {
                Ok(again) => break again,
                Err(e) => {
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "{r:?} not recreated: {e}"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        assert!(again.generation > r.generation, "{again:?} after {r:?}");
        assert_eq!(
            m.request(r.id.as_str(), &Incr).await.expect("incr"),
            1,
            "{r:?}: a new incarnation"
        );
    }
    // No Actor is live on two nodes.
    let live = live_per_id(&hosts);
    assert_eq!(live.len(), old.len(), "{live:?}");
    assert!(live.values().all(|&n| n == 1), "{live:?}");
    stop_all(&hosts).await;
}

/// Three roots with live counter Actors on a memory store; the Store then fails over to a
/// replica that missed the last writes (`roll_back_to` a checkpoint taken between two batches
/// of creations). Every host whose writes or lease row the failover lost notices it — a renew
/// conflicting onto an earlier version of its lease row, or the verification of its
/// acknowledged writes after its next renew — and takes its lease over: within a bound of a few
/// renew intervals no activation of a lost Actor is live any more, no id is live twice, and
/// every lost Actor is then recreated on demand under a higher ObjectGeneration (never stuck
/// in Creating), as is every Actor of the earlier runs.
#[tokio::test]
async fn after_a_failover_rollback_lost_actors_close_and_come_back_with_higher_generations() {
    let mem = Arc::new(zlink_store_spi::MemoryLocationStore::new());
    let store: Arc<dyn DynLocationStore> = mem.clone();
    let ([ha, hb, hc], _) = three_counter_servers(&store).await;
    let hosts = [&ha, &hb, &hc];
    let m = ha.actors().expect("manager");
    let kept = counters_asked_once(&m, "k", 6).await;
    let checkpoint = mem.checkpoint();
    let lost = counters_asked_once(&m, "l", 6).await;
    let runs: Vec<_> = hosts
        .iter()
        .map(|x| x.object_host(0).location.host_run().expect("run"))
        .collect();
    let lost_ids: Vec<String> = lost.iter().map(|r| r.id.as_str().to_owned()).collect();

    mem.roll_back_to(&checkpoint).expect("the same store");
    let rolled_back = tokio::time::Instant::now();

    // The bound: every host renews each 100 ms (timeout 100 ms) and reads back what it wrote
    // after each renew; 3 s is 30 renew intervals, room for a loaded machine.
    let bound = Duration::from_secs(3);
    while live_per_id(&hosts).keys().any(|id| lost_ids.contains(id)) {
        assert!(
            rolled_back.elapsed() < bound,
            "lost Actors still live {:?} after the rollback: {:?}",
            rolled_back.elapsed(),
            live_per_id(&hosts)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Whoever lost writes took its lease over under a higher generation.
    let retaken: Vec<bool> = hosts
        .iter()
        .zip(&runs)
        .map(|(x, first)| {
            x.object_host(0)
                .location
                .host_run()
                .is_some_and(|r| r.lease_generation > first.lease_generation)
        })
        .collect();
    assert!(retaken.iter().any(|&t| t), "no host noticed the rollback");
    assert!(live_per_id(&hosts).values().all(|&n| n == 1));

    // Every lost Actor comes back as a new incarnation above the one it had; every other
    // Actor answers again too (recreated if its host's earlier run was reclaimed).
    for r in lost.iter().chain(&kept) {
        let deadline = tokio::time::Instant::now() + WAIT;
        let again = loop {
            match m.get_or_create("counter", r.id.as_str()).await {
                Ok(again) => break again,
                Err(e) => {
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "{r:?} not answered again: {e}"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        if lost.iter().any(|l| l.id == r.id) {
            assert!(again.generation > r.generation, "{again:?} after {r:?}");
            assert_eq!(
                m.request(r.id.as_str(), &Incr).await.expect("incr"),
                1,
                "{r:?}: a new incarnation"
            );
        } else {
            assert!(again.generation >= r.generation, "{again:?} after {r:?}");
            m.request(r.id.as_str(), &Incr).await.expect("incr");
        }
    }
    let live = live_per_id(&hosts);
    assert!(live.values().all(|&n| n == 1), "{live:?}");
    stop_all(&hosts).await;
}
