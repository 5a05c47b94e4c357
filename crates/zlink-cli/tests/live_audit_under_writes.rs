//! An audit of a store in use reports nothing while conforming records are created, rewritten
//! and deleted through the real provider during it (a key that changed between two reads is
//! read again, never reported on a stale read).

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use support::{Backend, Prefix};
use zlink_cli::redis::Raw;
use zlink_store_spi::{LocationStore, Mutation, StoreKey, WriteRequest};

async fn audit_under_writes(backend: Backend, test: &str) {
    let prefix = Prefix::new(&backend, test);
    let store = Arc::new(backend.store(&prefix.name).await);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (store, stop) = (store.clone(), stop.clone());
        tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let key = StoreKey::new(format!("mesh-change\0m{}", i % 40)).unwrap();
                let m = if i % 3 == 0 {
                    Mutation::Delete(key)
                } else {
                    Mutation::put(key, i.to_string().into_bytes())
                };
                store
                    .write(&WriteRequest::new(vec![], vec![m]).unwrap())
                    .await
                    .unwrap();
            }
            i
        })
    };
    let raw = Raw::connect(&backend.target, Duration::from_secs(5))
        .await
        .unwrap();
    for _ in 0..8 {
        let report = raw.audit_prefix(&prefix.name).await.unwrap();
        assert!(
            report.is_clean(),
            "{}: {:#?}",
            backend.name,
            report.findings
        );
    }
    raw.quit().await;
    stop.store(true, Ordering::Relaxed);
    let writes = writer.await.unwrap();
    assert!(
        writes > 40,
        "the writer ran during the audits ({writes} writes)"
    );
}

#[tokio::test]
async fn an_audit_on_redis_during_writes_reports_nothing() {
    let test = "busy_redis";
    let Some(backend) = support::single(test) else {
        return;
    };
    audit_under_writes(backend, test).await;
}

#[tokio::test]
async fn an_audit_on_the_cluster_during_writes_reports_nothing() {
    let test = "busy_cluster";
    let Some(backend) = support::cluster(test) else {
        return;
    };
    audit_under_writes(backend, test).await;
}
