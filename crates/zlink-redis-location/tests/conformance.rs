//! The whole Location Store contract suite (`zlink-store-conformance`, spec 22 §10 SPI items and
//! the model test) against the live single node and the live 3-master Redis Cluster.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use std::time::Duration;

use common::private_servers::ReplicaPair;
use common::{PausingWriter, Target, fresh_prefix};
use zlink_redis_location::{Durability, RedisLocationOptions, RedisLocationStore};
use zlink_store_conformance::live;
use zlink_store_conformance::{LocationCapabilities, run_location_suite};
use zlink_store_spi::DynLocationStore;

async fn suite_passes(target: Target) {
    suite_passes_with(target, |o| o).await;
}

/// The suite on a store whose options are `target`'s changed by `tune` (the lossy writer keeps
/// `target`'s own options).
async fn suite_passes_with(
    target: Target,
    tune: impl FnOnce(RedisLocationOptions) -> RedisLocationOptions,
) {
    let prefix = fresh_prefix("conformance");
    let options = tune(target.options.clone().with_key_prefix(&prefix).unwrap());
    let store: Arc<dyn DynLocationStore> =
        Arc::new(RedisLocationStore::connect(options).await.unwrap());
    let lossy = PausingWriter::new(&target, &prefix).await;
    let caps = LocationCapabilities::new()
        .with_lossy_writer(Arc::new(lossy))
        .with_model_cases(1000);
    let report = run_location_suite(store.as_ref(), &caps).await;
    eprintln!("conformance on {}:\n{report}", target.name);
    // The suite deleted every live key it wrote. Records left are expired values, which Redis
    // reclaims one snapshot lifetime after their expiry: each must carry a Redis TTL.
    let mut durable_leftovers = Vec::new();
    for k in target.raw.keys_under(&prefix).await {
        if k.contains(":opaque:") && target.raw.int("PTTL", vec![k.as_str().into()]).await < 0 {
            durable_leftovers.push(k);
        }
    }
    target.raw.purge(&prefix).await;
    report.assert_all_passed();
    assert!(
        durable_leftovers.is_empty(),
        "durable records left behind: {durable_leftovers:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_suite_passes_on_single_node() {
    if let Some(t) = common::single().await {
        suite_passes(t).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_suite_passes_on_cluster() {
    if let Some(t) = common::cluster().await {
        suite_passes(t).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_suite_passes_over_tls_on_single_node() {
    if let Some(t) = common::tls::single().await {
        suite_passes(t).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_suite_passes_over_tls_on_cluster() {
    if let Some(t) = common::tls::cluster().await {
        suite_passes(t).await;
    }
}

/// With `Durability::Replicas` (a private master and its replica) every result is the same:
/// `WAIT` changes when a write is acknowledged, never what it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_suite_passes_with_durability_on_a_replicated_master() {
    if live::env_or_skip(common::SINGLE_ENV, &live::current_test()).is_none() {
        return;
    }
    let pair = ReplicaPair::start();
    let target = common::url_target("replicated", &pair.master.url()).await;
    suite_passes_with(target, |o| {
        o.with_durability(Durability::Replicas {
            replicas: 1,
            timeout: Duration::from_secs(1),
        })
        .unwrap()
    })
    .await;
}
