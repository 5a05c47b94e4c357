//! Test support: the location runtimes built over the shared `zlink_testkit::Harness` backends
//! (memory, Redis single node, Redis Cluster), descriptor builders and hosts. Failures, lost replies and latency come from the shared
//! `zlink_store_conformance::FaultyLocationStore`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use zlink_codec::Generation;
use zlink_codec::records::{
    ActivationConcurrency, DescriptorCapacity, HostState, MeshNodeDescriptor, ObjectCapability,
    ObjectKind, ObjectRole, RelocationPolicy, SlotUsage,
};
use zlink_store_spi::DynLocationStore;

pub(crate) use zlink_testkit::{Harness, force_delete, force_put, snapshot_of};

use crate::{
    HostRun, LocationOptions, LocationRuntime, ManualMonotonic, MeshName, NodeKey, RoutingId,
    StableType,
};
use crate::{TargetNode, target_of};

/// The location runtimes a test builds over a [`Harness`]'s store.
pub(crate) trait HarnessExt {
    /// A runtime over this store with the given options and clock, renew loop off.
    async fn runtime_with(
        &self,
        store: Arc<dyn DynLocationStore>,
        options: LocationOptions,
        clock: Option<ManualMonotonic>,
    ) -> LocationRuntime;
    /// A host on the mesh `main` with routing id `[rid]`, over `store` with these options and
    /// clock (renew loop off).
    async fn host_with(
        &self,
        store: Arc<dyn DynLocationStore>,
        options: LocationOptions,
        clock: Option<ManualMonotonic>,
        rid: u8,
    ) -> Host;
    /// A runtime over this store with the default options, renew loop off.
    async fn runtime(&self) -> LocationRuntime;
}

impl HarnessExt for Harness {
    /// A runtime over this store with the given options and clock, renew loop off.
    async fn runtime_with(
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
    async fn host_with(
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

    async fn runtime(&self) -> LocationRuntime {
        self.runtime_with(self.store.clone(), LocationOptions::default(), None)
            .await
    }
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
