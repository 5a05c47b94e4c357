//! Test support: the backends (memory, Redis single node, Redis Cluster), descriptor builders,
//! hosts and whole-store snapshots. Failures, lost replies and latency come from the shared
//! `zlink_store_conformance::FaultyLocationStore`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use zlink_codec::Generation;
use zlink_codec::records::{
    ActivationConcurrency, DescriptorCapacity, HostState, MeshNodeDescriptor, ObjectCapability,
    ObjectKind, ObjectRole, RelocationPolicy, SlotUsage,
};
use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
use zlink_store_conformance::{FaultyLocationStore, live};
use zlink_store_spi::{
    Bytes, Condition, DynLocationStore, LocationStore, LocationStoreExt, ManualClock,
    MemoryLocationStore, Mutation, PageLimit, ReadResult, ScanPrefix, StoreKey, StoreVersion,
    UnreadableKind, WriteRequest,
};

use super::purge::Purge;

use crate::location::testing::{TargetNode, target_of};
use crate::location::{
    HostRun, LocationOptions, LocationRuntime, ManualMonotonic, MeshName, NodeKey, RoutingId,
    StableType,
};

pub(crate) const REDIS_ENV: &str = "ZLINK_TEST_REDIS_URL";
pub(crate) const CLUSTER_ENV: &str = "ZLINK_TEST_REDIS_CLUSTER";

/// One backend of the suite.
pub(crate) struct Harness {
    pub(crate) store: Arc<dyn DynLocationStore>,
    /// The memory store's clock (Redis time cannot be moved).
    pub(crate) store_clock: Option<ManualClock>,
    pub(crate) backend: &'static str,
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
    pub(crate) fn memory() -> Harness {
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
    pub(crate) async fn redis(test: &str) -> Option<Harness> {
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
    pub(crate) async fn cluster(test: &str) -> Option<Harness> {
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

    /// A host on the mesh `main` with routing id `[rid]`, over `store` with these options and
    /// clock (renew loop off).
    pub(crate) async fn host_with(
        &self,
        store: Arc<dyn DynLocationStore>,
        options: LocationOptions,
        clock: Option<ManualMonotonic>,
        rid: u8,
    ) -> Host {
        Host {
            rt: self.runtime_with(store, options, clock).await,
            desc: descriptor("main", &[rid]),
        }
    }

    /// Puts each of `keys` (any bytes), then makes it a key the Store cannot read: on Redis its
    /// record becomes a plain string (a foreign Redis type under the namespace); on memory,
    /// which can hold only bytes, a `FaultyLocationStore` over it reports the keys unreadable
    /// as a provider does. Returns the store to run over.
    pub(crate) async fn plant_foreign(&self, keys: &[StoreKey]) -> Arc<dyn DynLocationStore> {
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

    /// Puts garbage bytes under `key` through the Store: a record the Store reads, whose bytes
    /// are no record of the runtime.
    pub(crate) async fn plant_garbage(&self, key: &StoreKey) {
        let put =
            WriteRequest::new(vec![], vec![Mutation::put(key.clone(), "garbage")]).expect("put");
        self.store.write(&put).await.expect("put");
    }

    pub(crate) async fn runtime(&self) -> LocationRuntime {
        self.runtime_with(self.store.clone(), LocationOptions::default(), None)
            .await
    }
}

fn fresh_prefix(test: &str) -> String {
    format!("zlrt-{test}-{}", uuid::Uuid::new_v4().simple())
}

/// The store key of an object's authority record (for tests outside the location layer).
pub(crate) fn authority_key(
    kind: crate::location::ObjectKind,
    id: &crate::location::ObjectId,
) -> zlink_store_spi::StoreKey {
    crate::location::keys::authority(kind, id).expect("authority key")
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
        .items
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
