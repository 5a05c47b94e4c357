//! `Durability::Replicas`: a write is acknowledged only once `WAIT` confirmed it on the
//! replicas; one the replicas do not confirm in time fails as a `Failure` whose outcome is
//! unknown (it is on the master), with a typed `NotReplicated` source. Against private
//! `redis-server` processes (a master with a replica; a Redis Cluster of three masters with a
//! replica each), whose replica is stopped with SIGSTOP. Run where the live Redis tests run.
#![allow(clippy::unwrap_used)]

mod common;

use std::error::Error as _;
use std::time::{Duration, Instant};

use common::private_servers::{PrivateCluster, RedisProc, ReplicaPair};
use common::{HASHTAG, fresh_prefix, key, record_key};
use zlink_redis_location::{Durability, NotReplicated, RedisLocationOptions, RedisLocationStore};
use zlink_store_conformance::live;
use zlink_store_spi::{
    Condition, LocationStore, Mutation, ReadResult, StoreErrorKind, StoreKey, WriteRequest,
    WriteResult,
};

const WAIT: Duration = Duration::from_millis(300);
const OPERATION: Duration = Duration::from_secs(2);

fn durable(options: RedisLocationOptions, prefix: &str) -> RedisLocationOptions {
    options
        .with_key_prefix(prefix)
        .unwrap()
        .with_operation_timeout(OPERATION)
        .unwrap()
        .with_durability(Durability::Replicas {
            replicas: 1,
            timeout: WAIT,
        })
        .unwrap()
}

fn create(k: &StoreKey, value: &'static str) -> WriteRequest {
    WriteRequest::new(
        vec![Condition::Missing(k.clone())],
        vec![Mutation::put(k.clone(), value)],
    )
    .unwrap()
}

/// Whether `node` (a replica) holds the record of `k`.
fn holds(node: &RedisProc, prefix: &str, k: &StoreKey) -> bool {
    node.has_key(&record_key(prefix, k.as_bytes()))
}

/// Asserts `result` is the typed not-replicated failure, outcome unknown.
fn assert_not_replicated(result: Result<WriteResult, zlink_store_spi::StoreError>) {
    let e = result.expect_err("a write no replica confirmed is not acknowledged");
    assert_eq!(e.kind(), StoreErrorKind::Failure, "{e}");
    assert!(e.outcome_unknown(), "the write is on the master: unknown");
    let why = e
        .source()
        .and_then(|s| s.downcast_ref::<NotReplicated>())
        .unwrap_or_else(|| panic!("a NotReplicated source: {:?}", e.source()));
    assert_eq!((why.confirmed, why.required, why.timeout), (0, 1, WAIT));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_is_acknowledged_once_the_replica_has_it_and_fails_as_unknown_when_it_does_not() {
    if live::env_or_skip(common::SINGLE_ENV, &live::current_test()).is_none() {
        return;
    }
    let pair = ReplicaPair::start();
    let prefix = fresh_prefix("durability");
    let options = durable(
        RedisLocationOptions::from_url(&pair.master.url()).unwrap(),
        &prefix,
    );
    let store = RedisLocationStore::connect(options.clone()).await.unwrap();
    let master_only =
        RedisLocationStore::connect(options.with_durability(Durability::Master).unwrap())
            .await
            .unwrap();

    // Acknowledged: the replica holds it already.
    let first = key("durable-1");
    let applied = store.write(&create(&first, "one")).await.unwrap();
    assert!(
        matches!(applied, WriteResult::Applied { .. }),
        "{applied:?}"
    );
    assert!(holds(&pair.replica, &prefix, &first));
    // After `SCRIPT FLUSH` the script is sent whole, with the `WAIT` behind it again.
    assert_eq!(pair.master.cli(&["SCRIPT", "FLUSH"]).as_deref(), Some("OK"));
    let flushed = key("durable-after-flush");
    let applied = store.write(&create(&flushed, "again")).await.unwrap();
    assert!(
        matches!(applied, WriteResult::Applied { .. }),
        "{applied:?}"
    );
    assert!(holds(&pair.replica, &prefix, &flushed));

    // The replica stalls: the write applies on the master, the WAIT runs out, and the write
    // fails as a Failure whose outcome is unknown, about the durability timeout later.
    pair.replica.signal("STOP");
    let second = key("durable-2");
    let started = Instant::now();
    assert_not_replicated(store.write(&create(&second, "two")).await);
    let took = started.elapsed();
    assert!(took >= WAIT && took < OPERATION, "failed after {took:?}");
    // It is on the master (an exact read there finds it); the caller reconstructs it so.
    let found = store.read(&second).await.unwrap();
    assert!(matches!(found, ReadResult::Found { .. }), "{found:?}");
    // A batch that writes nothing (its condition fails) is no error, even now.
    let conflict = store.write(&create(&second, "again")).await.unwrap();
    assert!(
        matches!(conflict, WriteResult::Conflict { .. }),
        "{conflict:?}"
    );
    // The default acknowledges on the master alone.
    let third = key("durable-3");
    let applied = master_only.write(&create(&third, "three")).await.unwrap();
    assert!(
        matches!(applied, WriteResult::Applied { .. }),
        "{applied:?}"
    );

    // The replica resumes: it catches up and writes are acknowledged again (bounded retries,
    // each under a fresh key, in case its first ack is still on the way).
    pair.replica.signal("CONT");
    let mut acknowledged = None;
    for i in 0..20 {
        let k = key(&format!("durable-after-{i}"));
        if let Ok(r) = store.write(&create(&k, "after")).await {
            acknowledged = Some((k, r));
            break;
        }
    }
    let (k, r) = acknowledged.expect("acknowledged again once the replica resumed");
    assert!(matches!(r, WriteResult::Applied { .. }), "{r:?}");
    for k in [&first, &second, &third, &k] {
        assert!(holds(&pair.replica, &prefix, k), "{k} on the replica");
    }
    store.close().await;
    master_only.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_cluster_wait_goes_to_the_master_that_took_the_write() {
    if live::env_or_skip(common::CLUSTER_ENV, &live::current_test()).is_none() {
        return;
    }
    let cluster = PrivateCluster::start(3);
    let slot = fred::util::redis_keyslot(HASHTAG.as_bytes());
    let (master, replica) = cluster.master_and_replica_of(slot);
    let other_replica = (0..cluster.nodes.len())
        .find(|&i| {
            i != replica
                && i != master
                && cluster.nodes[i].info("replication", "role").as_deref() == Some("slave")
        })
        .unwrap();
    let prefix = fresh_prefix("durability-cluster");
    let options = durable(
        RedisLocationOptions::cluster(cluster.seeds()).unwrap(),
        &prefix,
    );
    let store = RedisLocationStore::connect(options).await.unwrap();

    let first = key("cluster-durable-1");
    let applied = store.write(&create(&first, "one")).await.unwrap();
    assert!(
        matches!(applied, WriteResult::Applied { .. }),
        "{applied:?}"
    );
    assert!(holds(&cluster.nodes[replica], &prefix, &first));

    // Another master's replica stalls: the slot's master still confirms.
    cluster.nodes[other_replica].signal("STOP");
    let second = key("cluster-durable-2");
    let applied = store.write(&create(&second, "two")).await;
    cluster.nodes[other_replica].signal("CONT");
    assert!(
        matches!(applied, Ok(WriteResult::Applied { .. })),
        "{applied:?}"
    );

    // The slot master's own replica stalls: the WAIT on that master runs out. (Sent to any
    // other node it would count none of this connection's writes and answer at once.)
    cluster.nodes[replica].signal("STOP");
    let third = key("cluster-durable-3");
    let result = store.write(&create(&third, "three")).await;
    cluster.nodes[replica].signal("CONT");
    assert_not_replicated(result);
    store.close().await;
}
