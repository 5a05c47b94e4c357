#![doc = include_str!("../README.md")]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
use zlink_store_conformance::{FaultyLocationStore, live};
use zlink_store_spi::{
    Bytes, Condition, DynLocationStore, LocationStore, LocationStoreExt, ManualClock,
    MemoryLocationStore, Mutation, PageLimit, ReadResult, ScanPrefix, StoreKey, StoreVersion,
    UnreadableKind, WriteRequest,
};

mod every_store;
mod purge;

use purge::Purge;

/// The variable naming the live Redis single node (a `redis://` URL).
pub const REDIS_ENV: &str = "ZLINK_TEST_REDIS_URL";
/// The variable naming the live Redis Cluster (comma-separated `host:port` seeds).
pub const CLUSTER_ENV: &str = "ZLINK_TEST_REDIS_CLUSTER";

/// One backend of the suite.
pub struct Harness {
    /// The backend's Location Store.
    pub store: Arc<dyn DynLocationStore>,
    /// The memory store's clock (Redis time cannot be moved).
    pub store_clock: Option<ManualClock>,
    /// `memory`, `redis` or `cluster`.
    pub backend: &'static str,
    purge: Option<Purge>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        // Runs even when the test panicked: the test's keys never outlive it.
        if let Some(purge) = self.purge.take() {
            let _ = std::thread::spawn(move || {
                if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    rt.block_on(purge.run());
                }
            })
            .join();
        }
    }
}

impl Harness {
    /// The in-memory store on a manual clock.
    pub fn memory() -> Harness {
        let clock = ManualClock::starting_now();
        Harness {
            store: Arc::new(MemoryLocationStore::with_clock(Arc::new(clock.clone()))),
            store_clock: Some(clock),
            backend: "memory",
            purge: None,
        }
    }

    /// The live Redis single node under a fresh key prefix; `None` after a loud skip when
    /// `ZLINK_TEST_REDIS_URL` is unset (a failure where live tests are required, see
    /// `zlink_store_conformance::live`).
    pub async fn redis(test: &str) -> Option<Harness> {
        let url = live::env_or_skip(REDIS_ENV, test)?;
        let prefix = fresh_prefix(test);
        let options = RedisLocationOptions::from_url(&url)
            .expect("ZLINK_TEST_REDIS_URL is a Redis URL")
            .with_key_prefix(prefix.clone())
            .expect("prefix");
        Some(Self::connect(options, "redis", Purge::single(url, prefix)).await)
    }

    /// The live 3-master Redis Cluster (`ZLINK_TEST_REDIS_CLUSTER`, comma-separated
    /// `host:port` seeds) under a fresh key prefix; skipped like [`redis`](Self::redis).
    pub async fn cluster(test: &str) -> Option<Harness> {
        let seeds: Vec<String> = live::env_or_skip(CLUSTER_ENV, test)?
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        let prefix = fresh_prefix(test);
        let options = RedisLocationOptions::cluster(&seeds)
            .expect("ZLINK_TEST_REDIS_CLUSTER holds host:port seeds")
            .with_key_prefix(prefix.clone())
            .expect("prefix");
        Some(Self::connect(options, "cluster", Purge::cluster(seeds, prefix)).await)
    }

    async fn connect(
        options: RedisLocationOptions,
        backend: &'static str,
        purge: Purge,
    ) -> Harness {
        let store = RedisLocationStore::connect(options)
            .await
            .expect("the test Redis is reachable");
        Harness {
            store: Arc::new(store),
            store_clock: None,
            backend,
            purge: Some(purge),
        }
    }

    /// Moves the Store's clock forward: the memory clock directly, Redis by waiting.
    pub async fn advance_store_time(&self, by: Duration) {
        match &self.store_clock {
            Some(c) => c.advance(by),
            None => tokio::time::sleep(by).await,
        }
    }

    /// Puts each of `keys` (any bytes), then makes it a key the Store cannot read: on Redis its
    /// record becomes a plain string (a foreign Redis type under the namespace); on memory,
    /// which can hold only bytes, a `FaultyLocationStore` over it reports the keys unreadable
    /// as a provider does. Returns the store to run over.
    pub async fn plant_foreign(&self, keys: &[StoreKey]) -> Arc<dyn DynLocationStore> {
        let puts = keys.iter().map(|k| Mutation::put(k.clone(), "x")).collect();
        let put = WriteRequest::new(vec![], puts).expect("put");
        self.store.write(&put).await.expect("put");
        match &self.purge {
            Some(purge) => {
                for k in keys {
                    purge.plant_foreign(k).await;
                }
                self.store.clone()
            }
            None => {
                let faulty = FaultyLocationStore::new(self.store.clone());
                for k in keys {
                    faulty.set_unreadable(k.clone(), UnreadableKind::ForeignType);
                }
                Arc::new(faulty)
            }
        }
    }

    /// Makes the newest stored record of `key` (which holds a record) one the Store cannot
    /// read, while a snapshot scan still lists the record below it: exact reads and writes
    /// that touch `key` fail with `Unreadable(Corrupt)`. On Redis a member that is not of the
    /// record format is added above every commit sequence; returns `true`. The memory store
    /// holds only bytes: returns `false`, and the test answers the same way by wrapping it.
    pub async fn plant_corrupt_newest(&self, key: &StoreKey) -> bool {
        match &self.purge {
            Some(purge) => {
                purge.plant_corrupt_newest(key).await;
                true
            }
            None => false,
        }
    }

    /// Puts garbage bytes under `key` through the Store: a record the Store reads, whose bytes
    /// are no record of the runtime.
    pub async fn plant_garbage(&self, key: &StoreKey) {
        let put =
            WriteRequest::new(vec![], vec![Mutation::put(key.clone(), "garbage")]).expect("put");
        self.store.write(&put).await.expect("put");
    }

    /// Every logical key with its bytes and version, read from one snapshot.
    pub async fn snapshot(&self) -> BTreeMap<StoreKey, (Bytes, StoreVersion)> {
        snapshot_of(self.store.as_ref(), "").await
    }
}

fn fresh_prefix(test: &str) -> String {
    format!("zlrt-{test}-{}", uuid::Uuid::new_v4().simple())
}

/// Every logical key under `prefix` with its bytes and version, read from one snapshot.
pub async fn snapshot_of(
    store: &dyn DynLocationStore,
    prefix: &str,
) -> BTreeMap<StoreKey, (Bytes, StoreVersion)> {
    store
        .scan_all(
            &ScanPrefix::new(prefix).expect("prefix"),
            PageLimit::LARGEST,
            4,
        )
        .await
        .expect("scan")
        .expect("snapshot did not expire")
        .items
        .into_iter()
        .map(|i| (i.key, (i.bytes, i.version)))
        .collect()
}

/// Writes `bytes` under `key` unconditionally (read its version first).
pub async fn force_put(store: &dyn DynLocationStore, key: &StoreKey, bytes: &[u8]) {
    let condition = match store.read(key).await.expect("read") {
        ReadResult::Missing { .. } => Condition::Missing(key.clone()),
        ReadResult::Found { version, .. } => Condition::Version(key.clone(), version),
    };
    let request = WriteRequest::new(
        vec![condition],
        vec![Mutation::put(key.clone(), bytes.to_vec())],
    )
    .expect("request");
    assert!(store.write(&request).await.expect("write").is_applied());
}

/// Deletes `key` (read its version first).
pub async fn force_delete(store: &dyn DynLocationStore, key: &StoreKey) {
    if let ReadResult::Found { version, .. } = store.read(key).await.expect("read") {
        let request = WriteRequest::new(
            vec![Condition::Version(key.clone(), version)],
            vec![Mutation::Delete(key.clone())],
        )
        .expect("request");
        assert!(store.write(&request).await.expect("write").is_applied());
    }
}
