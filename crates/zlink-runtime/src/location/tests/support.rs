//! Test support: the two backends, a store wrapper that fails, loses replies or adds latency,
//! descriptor builders, and whole-store snapshots.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use zlink_codec::Generation;
use zlink_codec::records::{
    ActivationConcurrency, DescriptorCapacity, HostState, MeshNodeDescriptor, ObjectCapability,
    ObjectKind, ObjectRole, RelocationPolicy, SlotUsage,
};
use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
use zlink_store_spi::{
    Bytes, Condition, DynLocationStore, FailureKind, LocationStore, LocationStoreExt, ManualClock,
    MemoryLocationStore, Mutation, PageLimit, ReadResult, ScanPrefix, ScanRequest, ScanResult,
    StoreError, StoreKey, StoreResult, StoreVersion, WriteRequest, WriteResult,
};

use crate::location::testing::{TargetNode, target_of};
use crate::location::{
    HostRun, LocationOptions, LocationRuntime, ManualMonotonic, MeshName, NodeKey, RoutingId,
    StableType,
};

pub(crate) const REDIS_ENV: &str = "ZLINK_TEST_REDIS_URL";

/// One backend of the suite.
pub(crate) struct Harness {
    pub(crate) store: Arc<dyn DynLocationStore>,
    /// The memory store's clock (Redis time cannot be moved).
    pub(crate) store_clock: Option<ManualClock>,
    pub(crate) backend: &'static str,
    purge: Option<Purge>,
}

struct Purge {
    url: String,
    prefix: String,
}

impl Purge {
    async fn run(&self) {
        use fred::interfaces::{ClientLike, KeysInterface};
        let Ok(config) = fred::types::config::Config::from_url(&self.url) else {
            return;
        };
        let Ok(client) = fred::types::Builder::from_config(config).build() else {
            return;
        };
        if client.init().await.is_err() {
            return;
        }
        let pattern = format!("{}:*", self.prefix);
        let mut cursor = "0".to_owned();
        loop {
            let args: Vec<fred::types::Value> = vec![
                cursor.as_str().into(),
                "MATCH".into(),
                pattern.as_str().into(),
                "COUNT".into(),
                1000.into(),
            ];
            let reply: Result<fred::types::Value, _> = client
                .custom(
                    fred::types::CustomCommand::new_static("SCAN", None, false),
                    args,
                )
                .await;
            let Ok(reply) = reply else { break };
            let parts = reply.into_array();
            let Some(next) = parts.first().and_then(|v| v.as_string()) else {
                break;
            };
            let keys: Vec<String> = parts
                .get(1)
                .cloned()
                .map(|v| v.into_array())
                .unwrap_or_default()
                .into_iter()
                .filter_map(|k| k.as_string())
                .collect();
            if !keys.is_empty() {
                let _: Result<i64, _> = client.del(keys).await;
            }
            if next == "0" {
                break;
            }
            cursor = next;
        }
        let _ = client.quit().await;
    }
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
    pub(crate) fn memory() -> Harness {
        let clock = ManualClock::starting_now();
        Harness {
            store: Arc::new(MemoryLocationStore::with_clock(Arc::new(clock.clone()))),
            store_clock: Some(clock),
            backend: "memory",
            purge: None,
        }
    }

    /// The live Redis under a fresh key prefix, or `None` (said loudly) without the env var.
    pub(crate) async fn redis(test: &str) -> Option<Harness> {
        let Ok(url) = std::env::var(REDIS_ENV) else {
            eprintln!("SKIPPED: {REDIS_ENV} not set ({test} runs on the memory store only)");
            return None;
        };
        let prefix = format!("zlrt-{test}-{}", uuid::Uuid::new_v4().simple());
        let options = RedisLocationOptions::from_url(&url)
            .expect("ZLINK_TEST_REDIS_URL is a Redis URL")
            .with_key_prefix(prefix.clone())
            .expect("prefix");
        let store = RedisLocationStore::connect(options)
            .await
            .expect("the test Redis is reachable");
        Some(Harness {
            store: Arc::new(store),
            store_clock: None,
            backend: "redis",
            purge: Some(Purge { url, prefix }),
        })
    }

    /// Moves the Store's clock forward: the memory clock directly, Redis by waiting.
    pub(crate) async fn advance_store_time(&self, by: Duration) {
        match &self.store_clock {
            Some(c) => c.advance(by),
            None => tokio::time::sleep(by).await,
        }
    }

    /// Every logical key with its bytes and version, read from one snapshot.
    pub(crate) async fn snapshot(&self) -> BTreeMap<StoreKey, (Bytes, StoreVersion)> {
        snapshot_of(self.store.as_ref(), "").await
    }

    /// A runtime over this store with the given options and clock, renew loop off.
    pub(crate) async fn runtime_with(
        &self,
        store: Arc<dyn DynLocationStore>,
        options: LocationOptions,
        clock: Option<ManualMonotonic>,
    ) -> LocationRuntime {
        let mut b = LocationRuntime::builder(store)
            .options(options)
            .renew_loop(false);
        if let Some(c) = clock {
            b = b.clock(Arc::new(c));
        }
        b.start().await.expect("runtime starts")
    }

    pub(crate) async fn runtime(&self) -> LocationRuntime {
        self.runtime_with(self.store.clone(), LocationOptions::default(), None)
            .await
    }
}

pub(crate) async fn snapshot_of(
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
        .into_iter()
        .map(|i| (i.key, (i.bytes, i.version)))
        .collect()
}

/// Short lease timings for tests that wait for a lease to expire: 100 + 100 < 1000 - 500.
pub(crate) fn short_lease() -> LocationOptions {
    LocationOptions::default()
        .owner_lease_renew_interval(Duration::from_millis(100))
        .owner_lease_renew_timeout(Duration::from_millis(100))
        .owner_lease_ttl(Duration::from_millis(1000))
        .owner_lease_fencing_margin(Duration::from_millis(500))
}

pub(crate) fn ty(s: &str) -> StableType {
    StableType::new(s).expect("stable type")
}

pub(crate) fn capability(kind: ObjectKind, stable_type: &str, limit: u32) -> ObjectCapability {
    ObjectCapability {
        object_kind: kind,
        stable_type: ty(stable_type),
        policy: RelocationPolicy::Recreate,
        has_snapshot_adapter: false,
        limit,
    }
}

/// A serving Object Server descriptor offering actor `chat` and userSpot `game`.
pub(crate) fn descriptor(mesh: &str, rid: &[u8]) -> MeshNodeDescriptor {
    MeshNodeDescriptor {
        mesh_name: MeshName::new(mesh).expect("mesh"),
        routing_id: RoutingId::new(rid.to_vec()).expect("rid"),
        lifecycle_generation: Generation::MIN,
        endpoint: "tcp://127.0.0.1:5000".into(),
        entry_spot_id: None,
        channel_weights: BTreeMap::new(),
        application_version: 1,
        object_capabilities: vec![
            capability(ObjectKind::Actor, "chat", 0),
            capability(ObjectKind::UserSpot, "game", 0),
        ],
        object_role: ObjectRole::Server,
        placement_weight: 100,
        capacity: DescriptorCapacity {
            actors: SlotUsage {
                active: 0,
                reserved: 0,
                limit: 0,
            },
            spots: SlotUsage {
                active: 0,
                reserved: 0,
                limit: 0,
            },
            spot_types: Vec::new(),
        },
        activation_concurrency: ActivationConcurrency {
            active: 0,
            limit: 128,
        },
        maintenance_wave: None,
        state: HostState::Serving,
        security_identity: "test-identity".into(),
        updated_at_epoch_ms: 0,
    }
}

/// One host of a test: its runtime and its node.
pub(crate) struct Host {
    pub(crate) rt: LocationRuntime,
    pub(crate) desc: MeshNodeDescriptor,
}

impl Host {
    pub(crate) fn run(&self) -> HostRun {
        self.rt.host_run().expect("lease held")
    }

    pub(crate) fn target(&self) -> TargetNode {
        target_of(&self.run(), &self.desc)
    }

    /// The node (from the descriptor: known even once the lease is gone).
    pub(crate) fn node(&self) -> NodeKey {
        NodeKey {
            mesh: self.desc.mesh_name.clone(),
            routing_id: self.desc.routing_id.clone(),
        }
    }
}

pub(crate) async fn host(h: &Harness, mesh: &str, rid: u8) -> Host {
    Host {
        rt: h.runtime().await,
        desc: descriptor(mesh, &[rid]),
    }
}

/// Writes `bytes` under `key` unconditionally (read its version first).
pub(crate) async fn force_put(store: &dyn DynLocationStore, key: &StoreKey, bytes: &[u8]) {
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
pub(crate) async fn force_delete(store: &dyn DynLocationStore, key: &StoreKey) {
    if let ReadResult::Found { version, .. } = store.read(key).await.expect("read") {
        let request = WriteRequest::new(
            vec![Condition::Version(key.clone(), version)],
            vec![Mutation::Delete(key.clone())],
        )
        .expect("request");
        assert!(store.write(&request).await.expect("write").is_applied());
    }
}

/// How a [`TestStore`] behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Mode {
    /// Passes everything through.
    Normal = 0,
    /// Every operation fails as unavailable (nothing reaches the inner store).
    Down = 1,
    /// Writes are applied, then answer `TimedOut` (a lost reply).
    LoseReplies = 2,
}

/// A store wrapper for failure, lost-reply and latency tests, counting writes.
#[derive(Debug)]
pub(crate) struct TestStore {
    inner: Arc<dyn DynLocationStore>,
    mode: AtomicU8,
    writes: AtomicU64,
    latency: Mutex<Option<(ManualMonotonic, Duration)>>,
    in_flight: Mutex<Option<Duration>>,
}

impl TestStore {
    pub(crate) fn new(inner: Arc<dyn DynLocationStore>) -> Arc<TestStore> {
        Arc::new(TestStore {
            inner,
            mode: AtomicU8::new(Mode::Normal as u8),
            writes: AtomicU64::new(0),
            latency: Mutex::new(None),
            in_flight: Mutex::new(None),
        })
    }

    pub(crate) fn set_mode(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
    }

    fn mode(&self) -> Mode {
        match self.mode.load(Ordering::SeqCst) {
            1 => Mode::Down,
            2 => Mode::LoseReplies,
            _ => Mode::Normal,
        }
    }

    /// Every write takes `delay` on `clock` (the monotonic clock moves while it is in flight).
    pub(crate) fn set_latency(&self, latency: Option<(ManualMonotonic, Duration)>) {
        *self.latency.lock() = latency;
    }

    /// Every write stays in flight for `delay` of real time before reaching the inner store
    /// (so operations submitted meanwhile queue up behind it).
    pub(crate) fn set_in_flight(&self, delay: Option<Duration>) {
        *self.in_flight.lock() = delay;
    }

    pub(crate) fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }

    fn down() -> StoreError {
        StoreError::failure_kind(FailureKind::Unavailable)
    }
}

impl LocationStore for TestStore {
    async fn read(&self, key: &StoreKey) -> StoreResult<ReadResult> {
        if self.mode() == Mode::Down {
            return Err(Self::down());
        }
        self.inner.read(key).await
    }

    async fn write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
        if self.mode() == Mode::Down {
            return Err(Self::down());
        }
        self.writes.fetch_add(1, Ordering::SeqCst);
        let latency = self.latency.lock().clone();
        if let Some((clock, d)) = latency {
            clock.advance(d);
        }
        let in_flight = *self.in_flight.lock();
        if let Some(d) = in_flight {
            tokio::time::sleep(d).await;
        }
        let result = self.inner.write(request).await;
        if self.mode() == Mode::LoseReplies {
            result?;
            return Err(StoreError::TimedOut);
        }
        result
    }

    async fn scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
        if self.mode() == Mode::Down {
            return Err(Self::down());
        }
        self.inner.scan(request).await
    }
}
