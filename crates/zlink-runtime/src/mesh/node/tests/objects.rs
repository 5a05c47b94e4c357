//! An Object Server publishes its registered object types and its Entry Spot id.

use zlink_codec::records::{MeshNodeRecord, ObjectKind, ObjectRole, RelocationPolicy};

use super::support::*;
use crate::location::tests::Harness;
use crate::location::tests::support::snapshot_of;
use crate::objects::{Actor, Spot};

struct Counter;
impl Actor for Counter {}
struct Room;
impl Spot for Room {}

on_every_store!(object_server_descriptor_lists_its_types_and_entry_spot);

async fn object_server_descriptor_lists_its_types_and_entry_spot(h: &Harness) {
    let (host, node) = start(h, |n| {
        n.object_role(ObjectRole::Server)
            .routing_id_prefix("lobby")
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
    })
    .await;
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
