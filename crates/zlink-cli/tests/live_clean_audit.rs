//! Records written by the real Redis provider through a real `LocationRuntime` audit clean,
//! and `nodes`, `locate`, `list` and `audit` read them — through the library and through the
//! built `zlink` binary — on the single node and on the Cluster.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use support::{Backend, Prefix, zlink};
use zlink_cli::audit::audit;
use zlink_cli::nodes::{LeaseHealth, read_nodes};
use zlink_cli::query::QueryRuntime;
use zlink_cli::redis::Raw;
use zlink_codec::records::{
    ActivationConcurrency, ClientServerDescriptor, DescriptorCapacity, HostState,
    MeshNodeDescriptor, ObjectCapability, ObjectKind, ObjectRole, RelocationPolicy, SlotUsage,
};
use zlink_codec::{
    ChannelName, Generation, MeshName, ObjectId, OperationId, RoutingId, StableType,
};
use zlink_location::{
    CreationMark, LocationRuntime, LookupKind, OperationKey, ReserveRequest, target_of,
};
use zlink_store_spi::{DynLocationStore, StoreTime};

fn capability(kind: ObjectKind, t: &str, limit: u32) -> ObjectCapability {
    ObjectCapability {
        object_kind: kind,
        stable_type: StableType::new(t).unwrap(),
        policy: RelocationPolicy::Recreate,
        has_snapshot_adapter: false,
        limit,
    }
}

fn descriptor() -> MeshNodeDescriptor {
    let slots = SlotUsage {
        active: 0,
        reserved: 0,
        limit: 0,
    };
    MeshNodeDescriptor {
        mesh_name: MeshName::new("cli").unwrap(),
        routing_id: RoutingId::new(vec![0xc1, 0x01]).unwrap(),
        lifecycle_generation: Generation::MIN,
        endpoint: "tcp://127.0.0.1:5999".into(),
        entry_spot_id: Some(ObjectId::new("entry:c101").unwrap()),
        channel_weights: BTreeMap::from([(ChannelName::new("chat").unwrap(), 250)]),
        application_version: 3,
        object_capabilities: vec![
            capability(ObjectKind::Actor, "counter", 0),
            capability(ObjectKind::UserSpot, "room", 8),
        ],
        object_role: ObjectRole::Server,
        placement_weight: 300,
        capacity: DescriptorCapacity {
            actors: slots,
            spots: slots,
            spot_types: Vec::new(),
        },
        activation_concurrency: ActivationConcurrency {
            active: 0,
            limit: 16,
        },
        maintenance_wave: None,
        state: HostState::Serving,
        security_identity: "cli-test".into(),
        updated_at_epoch_ms: 0,
    }
}

async fn runtime_records_audit_clean(backend: Backend, test: &str) {
    let prefix = Prefix::new(&backend, test);
    let store: Arc<dyn DynLocationStore> = Arc::new(backend.store(&prefix.name).await);
    let rt = LocationRuntime::builder(store.clone())
        .renew_loop(false)
        .start()
        .await
        .expect("start");
    let desc = descriptor();
    let publisher = rt.descriptor_publisher(desc.clone()).expect("publisher");
    publisher.publish(desc.clone()).await.expect("publish");
    let server = ClientServerDescriptor {
        channel_name: ChannelName::new("chat").unwrap(),
        server_routing_id: desc.routing_id.clone(),
        lifecycle_generation: Generation::MIN,
        endpoint: desc.endpoint.clone(),
        weight: 250,
        state: HostState::Serving,
        security_identity: "cli-test".into(),
        updated_at_epoch_ms: 0,
    };
    let channel = rt.descriptor_publisher(server.clone()).expect("publisher");
    channel.publish(server).await.expect("publish server");
    let target = target_of(&rt.host_run().expect("run"), &desc);
    let authority = rt.authority();
    // An Active Actor with a membership payload, and a Reserved User Spot with its creation
    // deadline row.
    let actor = authority
        .reserve(ReserveRequest {
            kind: ObjectKind::Actor,
            id: ObjectId::new("user:1").unwrap(),
            stable_type: StableType::new("counter").unwrap(),
            target: target.clone(),
            payload: Vec::new(),
            pending_creation: None,
            creation: None,
        })
        .await
        .expect("reserve")
        .applied()
        .expect("applied");
    authority
        .commit(
            &actor,
            Some(br#"m1{"spot":"entry:c101","entry":true,"spotWide":false}"#.to_vec()),
        )
        .await
        .expect("commit")
        .applied()
        .expect("committed");
    let op = OperationKey {
        source: desc.routing_id.clone(),
        source_run: Generation::MIN,
        operation: OperationId::from_parts(7, 9).unwrap(),
    };
    authority
        .reserve(ReserveRequest {
            kind: ObjectKind::UserSpot,
            id: ObjectId::new("room:1").unwrap(),
            stable_type: StableType::new("room").unwrap(),
            target,
            payload: Vec::new(),
            pending_creation: None,
            creation: Some(CreationMark::new(
                op,
                StoreTime::host_now(),
                Duration::from_secs(30),
                Duration::from_secs(30),
            )),
        })
        .await
        .expect("reserve spot")
        .applied()
        .expect("applied");

    // The audit, through the library.
    let raw = Raw::connect(&backend.target, Duration::from_secs(5))
        .await
        .expect("raw");
    let keys = raw.read_prefix(&prefix.name).await.expect("read");
    raw.quit().await;
    let report = audit(&prefix.name, &keys);
    assert!(
        report.is_clean(),
        "{}: {:#?}",
        backend.name,
        report.findings
    );
    for family in [
        "mesh-node",
        "owner-lease",
        "authority",
        "counter",
        "node-capacity",
        "location-index",
        "creation-deadline",
        "mesh-change",
    ] {
        assert!(
            report.census.families.contains_key(family),
            "{family} missing: {:?}",
            report.census
        );
    }

    // nodes: the descriptor with its lease held.
    let snap = read_nodes(store.as_ref()).await.expect("nodes");
    assert_eq!(snap.nodes.len(), 1);
    let n = &snap.nodes[0];
    assert_eq!(
        (n.mesh.as_str(), n.rid.as_str(), n.state.as_str()),
        ("cli", "c101", "serving")
    );
    assert_eq!(
        (n.weight, n.channels.clone()),
        (300, vec![("chat".to_owned(), 250)])
    );
    assert!(
        n.capabilities.contains(&"userSpot:room/8".to_owned()),
        "{:?}",
        n.capabilities
    );
    assert!(matches!(n.lease, LeaseHealth::Held { .. }), "{:?}", n.lease);
    assert_eq!(n.serves, vec!["chat".to_owned()]);

    // locate and list.
    let q = QueryRuntime::start(store.clone())
        .await
        .expect("query runtime");
    let found = q
        .locate(LookupKind::Actor, "user:1")
        .await
        .expect("locate")
        .expect("found");
    assert_eq!(
        (found.owner_rid.as_str(), found.state.as_str()),
        ("c101", "ready")
    );
    let spot = q
        .locate(LookupKind::Spot, "room:1")
        .await
        .expect("locate")
        .expect("found");
    assert_eq!(spot.state, "creating");
    assert_eq!(
        q.locate(LookupKind::Actor, "nobody").await.expect("locate"),
        None
    );
    let mut pages = Vec::new();
    let total = q
        .list(ObjectKind::Actor, None, None, 1, |p| pages.push(p))
        .await
        .expect("list");
    assert_eq!(total, 1);
    q.shutdown().await.expect("shutdown");

    // The binary, end to end.
    let out = zlink(&backend, &prefix.name, &["audit"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("audit: clean"), "{stdout}");
    let out = zlink(
        &backend,
        &prefix.name,
        &["--json", "locate", "actor", "user:1"],
    );
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        (v["ownerRid"].as_str(), v["state"].as_str()),
        (Some("c101"), Some("ready"))
    );
    for internal in ["version", "token", "key", "payload"] {
        assert!(v.get(internal).is_none(), "{internal} leaked: {v}");
    }
    let out = zlink(&backend, &prefix.name, &["locate", "actor", "nobody"]);
    assert_eq!(out.status.code(), Some(3));
    let out = zlink(&backend, &prefix.name, &["--json", "nodes"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["nodes"][0]["lease"]["state"], "held");
    let out = zlink(
        &backend,
        &prefix.name,
        &["--json", "list", "--kind", "actor", "--page-size", "1"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v.as_array().map(Vec::len), Some(1));
    // Leases the queries took were released: the store still audits clean.
    let out = zlink(&backend, &prefix.name, &["audit"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    rt.shutdown().await.expect("shutdown");
    drop(store);
    let name = prefix.name.clone();
    drop(prefix);
    assert_eq!(
        support::keys_left(&backend, &name).await,
        0,
        "the prefix is purged"
    );
}

#[tokio::test]
async fn runtime_records_on_redis_audit_clean_and_the_queries_read_them() {
    let test = "clean_redis";
    let Some(backend) = support::single(test) else {
        return;
    };
    runtime_records_audit_clean(backend, test).await;
}

#[tokio::test]
async fn runtime_records_on_the_cluster_audit_clean_and_the_queries_read_them() {
    let test = "clean_cluster";
    let Some(backend) = support::cluster(test) else {
        return;
    };
    runtime_records_audit_clean(backend, test).await;
}
