//! Closing the Redis Relocation Store (`ZLINK_TEST_REDIS_URL`): a store closed by its owner
//! (a root's shutdown, spec 21 §2) and then dropped quits its connections once — fred warns
//! "Attempted to quit client that was already stopped" for every second quit, which a
//! process that keeps running printed once per pool connection at each root's shutdown.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;

/// Counts the warnings fred logs about quitting a stopped client.
struct QuitWarnings(AtomicUsize);

impl log::Log for QuitWarnings {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Warn
    }

    fn log(&self, record: &log::Record<'_>) {
        if record.level() <= log::Level::Warn
            && record.args().to_string().contains("already stopped")
        {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn flush(&self) {}
}

static WARNINGS: QuitWarnings = QuitWarnings(AtomicUsize::new(0));

#[tokio::test]
async fn a_closed_store_dropped_afterwards_quits_its_connections_once() {
    let Some(url) = single_url("a_closed_store_dropped_afterwards_quits_its_connections_once")
    else {
        return;
    };
    log::set_logger(&WARNINGS).unwrap();
    log::set_max_level(log::LevelFilter::Warn);
    let store = connect_single(&url, &random_prefix(), Duration::from_secs(5)).await;
    store.close().await;
    store.close().await;
    drop(store);
    // The drop's quit (if any) runs as a task of this runtime.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(WARNINGS.0.load(Ordering::SeqCst), 0, "a quit after close");
}
