//! The client dials a restarted Redis again promptly (the default reconnect delays, 50 ms
//! doubling up to 250 ms): against a private `redis-server` it started, killed and restarted
//! on the same port, the store serves again within 0.5 s of the restart.

mod common;

use std::time::Duration;

use zlink_redis_relocation::{RedisRelocationOptions, RedisRelocationStore};
use zlink_store_conformance::{PrivateRedis, live};
use zlink_store_spi::RelocationStore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_serves_again_within_half_a_second_of_a_redis_restart() {
    // Runs where the live Redis tests run (those machines have `redis-server`).
    if common::single_url(&live::current_test()).is_none() {
        return;
    }
    let mut redis = PrivateRedis::start().await.expect("redis-server starts");
    let options = RedisRelocationOptions::from_url(&redis.url())
        .expect("url")
        .with_operation_timeout(Duration::from_millis(200))
        .expect("timeout")
        .with_pool_size(1)
        .expect("pool");
    let store = RedisRelocationStore::connect(options)
        .await
        .expect("connects");
    let reference = common::reference("reconnect-probe");
    store.read(&reference).await.expect("serves");

    redis.kill().await.expect("killed");
    assert!(
        store.read(&reference).await.is_err(),
        "nothing answers while down"
    );
    // Down long enough for the backoff to reach its longest delay.
    tokio::time::sleep(Duration::from_millis(2100)).await;

    redis.restart().await.expect("restarted on the same port");
    let served = tokio::time::timeout(Duration::from_millis(500), async {
        loop {
            match store.read(&reference).await {
                Ok(_) => return,
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    })
    .await;
    assert!(served.is_ok(), "not serving 0.5 s after the restart");
    store.close().await;
}
