//! An Object Server publishes its registered object types and its Entry Spot id.

use std::sync::Arc;

use zlink_codec::records::{MeshNodeRecord, ObjectKind, ObjectRole, RelocationPolicy};

use super::support::*;
use crate::host::{ShutdownOutcome, ShutdownReason};
use crate::objects::{Actor, Spot};
use zlink_testkit::Harness;
use zlink_testkit::snapshot_of;

struct Counter;
impl Actor for Counter {}
struct Room;
impl Spot for Room {}

/// An Object Server of the counter Actor type and the room User Spot type (at most 7 rooms).
fn counter_and_room(
    n: crate::host::config::MeshNodeBuilder<crate::messaging::NodeHandler>,
) -> crate::host::config::MeshNodeBuilder<crate::messaging::NodeHandler> {
    n.object_role(ObjectRole::Server)
        .actor_type::<Counter>("counter", |t| {
            t.factory(|_| async { Ok(Counter) }).disable_relocation()
        })
        .user_spot_type::<Room>("room", |t| {
            t.factory(|_| async { Ok(Room) }).disable_relocation()
        })
        .spot_type_limit(
            ObjectKind::UserSpot,
            zlink_codec::StableType::new("room").expect("type"),
            7,
        )
}

on_every_store!(
    object_server_descriptor_lists_its_types_and_entry_spot,
    the_descriptor_projects_the_nodes_usage,
    shutdown_completes_with_a_foreign_key_under_the_prefix,
    shutdown_is_stopped_when_one_of_its_own_rows_has_an_unreadable_newest_record,
);

async fn object_server_descriptor_lists_its_types_and_entry_spot(h: &Harness) {
    let (host, node) = start(h, |n| counter_and_room(n.routing_id_prefix("lobby"))).await;
    let rows = snapshot_of(h.store.as_ref(), "mesh-node\0game\0").await;
    let records: Vec<MeshNodeRecord> = rows
        .values()
        .map(|(bytes, _)| MeshNodeRecord::decode(bytes).expect("a MeshNode record"))
        .filter(|r| &r.descriptor.routing_id == node.routing_id())
        .collect();
    assert_eq!(records.len(), 1);
    let d = &records[0].descriptor;
    assert_eq!(d.object_role, ObjectRole::Server);
    let entry = d.entry_spot_id.as_ref().expect("an Entry Spot id");
    let text = entry.as_str();
    assert!(text.starts_with("lobby-entry-"), "{text}");
    assert!(
        uuid::Uuid::parse_str(&text["lobby-entry-".len()..]).is_ok(),
        "{text}"
    );
    let caps: Vec<_> = d
        .object_capabilities
        .iter()
        .map(|c| (c.object_kind, c.stable_type.as_str(), c.policy, c.limit))
        .collect();
    assert_eq!(
        caps,
        vec![
            (ObjectKind::Actor, "counter", RelocationPolicy::Disabled, 0),
            (ObjectKind::UserSpot, "room", RelocationPolicy::Disabled, 7),
        ]
    );
    host.shutdown().await;
}

/// The descriptor of this node, as stored.
async fn stored_descriptor(
    h: &Harness,
    node: &crate::mesh::node::MeshNode,
) -> zlink_codec::records::MeshNodeDescriptor {
    let rows = snapshot_of(h.store.as_ref(), "mesh-node\0game\0").await;
    rows.values()
        .map(|(bytes, _)| MeshNodeRecord::decode(bytes).expect("a MeshNode record"))
        .find(|r| &r.descriptor.routing_id == node.routing_id())
        .expect("the node's descriptor")
        .descriptor
}

/// The descriptor projects the node's usage (spec 21 §4: a copy for operators): live Actors
/// and Spots as `active` beside their limits, per Spot type too, and the activation permits;
/// a destroy shows within a polling interval.
async fn the_descriptor_projects_the_nodes_usage(h: &Harness) {
    let (host, node) = start(h, |n| counter_and_room(n.actor_limit(10))).await;
    wait_discovered(&[&host]).await;
    let actors = host.actors().expect("actors");
    let mut refs = Vec::new();
    for i in 0..3 {
        refs.push(
            actors
                .get_or_create("counter", &format!("p-{i}"))
                .await
                .expect("created"),
        );
    }
    host.spots()
        .expect("spots")
        .get_or_create("room", "lobby")
        .await
        .expect("room");
    let want = |actors: u32| {
        move |d: &zlink_codec::records::MeshNodeDescriptor| {
            d.capacity.actors.active == actors
                && d.capacity.actors.reserved == 0
                && d.capacity.actors.limit == 10
                && d.capacity.spots.active == 1
                && d.capacity.spot_types.len() == 1
                && d.capacity.spot_types[0].stable_type.as_str() == "room"
                && d.capacity.spot_types[0].active == 1
                && d.capacity.spot_types[0].limit == 7
                && d.activation_concurrency.active == 0
                && d.activation_concurrency.limit == 128
        }
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut d = stored_descriptor(h, &node).await;
    while !want(3)(&d) {
        assert!(tokio::time::Instant::now() < deadline, "projection: {d:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        d = stored_descriptor(h, &node).await;
    }
    assert!(actors.destroy(&refs[0]).await.expect("destroy"));
    while !want(2)(&d) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "after destroy: {d:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        d = stored_descriptor(h, &node).await;
    }
    host.shutdown().await;
}

/// Corrupt or foreign data under the store's prefix costs only its key: with a key the Store
/// cannot read (on Redis a plain string where a record lives) and a garbage record among the
/// authority rows, `object_capacity` counts the node's objects (the two skipped) and the
/// shutdown completes `Stopped`, its sweep removing every row of this run. The sweep reads
/// this run's rows through its index, so it never reads the two (`zlink-location`'s sweep
/// tests plant them in the index to count them).
async fn shutdown_completes_with_a_foreign_key_under_the_prefix(h: &Harness) {
    use super::support::authority_key;
    let foreign = authority_key(
        ObjectKind::Actor,
        &zlink_codec::ObjectId::new("f").expect("id"),
    );
    let garbage = authority_key(
        ObjectKind::Actor,
        &zlink_codec::ObjectId::new("g").expect("id"),
    );
    let store = h.plant_foreign(std::slice::from_ref(&foreign)).await;
    h.plant_garbage(&garbage).await;
    let (host, _node) = start_on(&store, counter_and_room).await;
    let actors = host.actors().expect("actors");
    // Placement needs the node's own descriptor discovered first.
    let deadline = tokio::time::Instant::now() + WAIT;
    for i in 0..3 {
        loop {
            match actors.get_or_create("counter", &format!("p-{i}")).await {
                Ok(_) => break,
                Err(e) if tokio::time::Instant::now() < deadline => {
                    tracing::debug!(error = %e, "not placeable yet");
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                Err(e) => panic!("created: {e:?}"),
            }
        }
    }
    let capacity = host.object_capacity().await.expect("object capacity");
    assert_eq!(capacity.len(), 1);
    let usage = &capacity[0].2;
    assert_eq!((usage.actors.active, usage.skipped), (3, 2), "{usage:?}");
    let report = host.shutdown().await;
    assert_eq!(
        (report.outcome, report.reason),
        (ShutdownOutcome::Stopped, ShutdownReason::None),
        "{report:?}"
    );
    let sweep = report.sweep.expect("the self-sweep ran");
    assert_eq!(
        (sweep.removed, sweep.unreadable, sweep.undecodable),
        (3, 0, 0),
        "{sweep:?}"
    );
    // Only the planted keys are left among the authority rows (the foreign one is not
    // readable on Redis, so it is not listed there).
    let left: Vec<_> = snapshot_of(h.store.as_ref(), "authority\0")
        .await
        .into_keys()
        .filter(|k| k != &foreign)
        .collect();
    assert_eq!(left, vec![garbage]);
}

/// Issue 36 item 3: a garbage record written under one of this node's OWN authority keys,
/// newer than the valid one (on Redis a member above every commit sequence, so the sweep's
/// snapshot still lists the valid record and only the conditioned delete meets the garbage;
/// on the memory store, which holds only bytes, the key is marked unreadable by the faulty
/// wrapper) costs that row only: the shutdown ends `Stopped/None`, its sweep removes every
/// other row of the run and counts the bad one (before: the engine failed the whole batch
/// and the shutdown ended `ForceStopped/TeardownFailed`).
async fn shutdown_is_stopped_when_one_of_its_own_rows_has_an_unreadable_newest_record(h: &Harness) {
    use super::support::authority_key;
    use zlink_store_conformance::FaultyLocationStore;
    use zlink_store_spi::{DynLocationStore, UnreadableKind};
    let faulty = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let store: Arc<dyn DynLocationStore> = faulty.clone();
    let (host, _node) = start_on(&store, counter_and_room).await;
    let actors = host.actors().expect("actors");
    let deadline = tokio::time::Instant::now() + WAIT;
    for i in 0..5 {
        loop {
            match actors.get_or_create("counter", &format!("b-{i}")).await {
                Ok(_) => break,
                Err(e) if tokio::time::Instant::now() < deadline => {
                    tracing::debug!(error = %e, "not placeable yet");
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                Err(e) => panic!("created: {e:?}"),
            }
        }
    }
    let bad = authority_key(
        ObjectKind::Actor,
        &zlink_codec::ObjectId::new("b-0").expect("id"),
    );
    if !h.plant_corrupt_newest(&bad).await {
        faulty.set_unreadable(bad.clone(), UnreadableKind::Corrupt);
    }
    let report = host.shutdown().await;
    assert_eq!(
        (report.outcome, report.reason),
        (ShutdownOutcome::Stopped, ShutdownReason::None),
        "{report:?}"
    );
    let sweep = report.sweep.expect("the self-sweep ran");
    assert_eq!((sweep.removed, sweep.unreadable), (4, 1), "{sweep:?}");
}
