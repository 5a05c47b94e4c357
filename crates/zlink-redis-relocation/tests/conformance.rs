//! The relocation part of the `zlink-store-conformance` suite against live Redis: the single
//! node and the 3-master cluster, directly and through `Arc<dyn DynRelocationStore>`. The
//! lost-reply check uses a real lost reply ([`common::PausingPutter`]).

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use std::sync::Arc;
use std::time::Duration;

use zlink_redis_relocation::{RedisRelocationOptions, RedisRelocationStore};
use zlink_store_conformance::{RelocationCapabilities, run_relocation_suite};
use zlink_store_spi::DynRelocationStore;

use common::*;

async fn run_suite(options: RedisRelocationOptions, control: fred::prelude::Client) {
    let prefix = options.key_prefix().to_string();
    let patient = RedisRelocationStore::connect(options.clone())
        .await
        .unwrap();
    let hasty = RedisRelocationStore::connect(
        options
            .with_operation_timeout(Duration::from_millis(250))
            .unwrap(),
    )
    .await
    .unwrap();
    let lossy = PausingPutter {
        hasty,
        patient: patient.clone(),
        control,
        prefix,
    };
    let caps = RelocationCapabilities::new().with_lossy_putter(Arc::new(lossy));
    let report = run_relocation_suite(&patient, &caps).await;
    eprintln!("{report}");
    report.assert_all_passed();

    // Again through two dynamic layers (no lost-reply capability: the suite's own wrapper).
    let direct: Arc<dyn DynRelocationStore> = Arc::new(patient);
    let wrapped: Arc<dyn DynRelocationStore> = Arc::new(direct);
    let report = run_relocation_suite(
        wrapped.as_ref(),
        &RelocationCapabilities::new().with_largest_blob(false),
    )
    .await;
    eprintln!("{report}");
    report.assert_all_passed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_node_passes_the_relocation_suite() {
    let Some(url) = single_url("single_node_passes_the_relocation_suite") else {
        return;
    };
    let options = RedisRelocationOptions::from_url(&url)
        .and_then(|o| o.with_key_prefix(random_prefix()))
        .unwrap();
    run_suite(options, raw_client(&url).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_passes_the_relocation_suite() {
    let Some(seeds) = cluster_seeds("cluster_passes_the_relocation_suite") else {
        return;
    };
    let options = RedisRelocationOptions::cluster(&seeds)
        .and_then(|o| o.with_key_prefix(random_prefix()))
        .unwrap();
    run_suite(options, raw_cluster_client(&seeds).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_node_passes_the_relocation_suite_over_tls() {
    let Some((options, control)) =
        tls::single("single_node_passes_the_relocation_suite_over_tls").await
    else {
        return;
    };
    let options = options.with_key_prefix(random_prefix()).unwrap();
    run_suite(options, control).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_passes_the_relocation_suite_over_tls() {
    let Some((options, control)) =
        tls::cluster("cluster_passes_the_relocation_suite_over_tls").await
    else {
        return;
    };
    let options = options.with_key_prefix(random_prefix()).unwrap();
    run_suite(options, control).await;
}
