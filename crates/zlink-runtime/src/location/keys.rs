//! Store keys. The runtime hands the Location Store the *logical key preimage* itself as the
//! opaque [`StoreKey`] (UTF-8, `\0`-separated, at most 1,024 bytes; `\0` is valid UTF-8). A
//! provider maps it to its physical layout; the official Redis provider stores it under
//! `{prefix}:{zlink-location-v3}:opaque:{sha256hex(preimage)}` with the preimage kept as the
//! member's `originalKey`, so scans by preimage prefix work on every provider.

use zlink_store_spi::{ScanPrefix, StoreKey};

use super::error::LocationError;
use super::identity::{MeshName, NodeKey, ObjectId, ObjectKind, StableType};
use zlink_codec::{Counter, LogicalKey};

fn key(parts: &[&str]) -> Result<StoreKey, LocationError> {
    // Every component is bounded to 255 bytes and carries no NUL, so the keys built here stay
    // far below 1,024 bytes; the check is still made, never assumed.
    Ok(StoreKey::new(parts.join("\0"))?)
}

/// The logical counter key (spec 22 §8).
pub(crate) fn counter_key(counter: Counter) -> StoreKey {
    // A short ASCII literal: always a valid key.
    StoreKey::new(counter.logical_key()).expect("counter literal is a valid store key")
}

/// A codec logical key as a Store key (the preimage itself, see the module docs).
pub(crate) fn store_key(key: &LogicalKey) -> Result<StoreKey, LocationError> {
    Ok(StoreKey::new(key.as_str())?)
}

/// Runtime-private: a node's allocation row, `node-capacity\0{MeshName}\0{hex(RoutingId)}`.
pub(crate) fn node_capacity(node: &NodeKey) -> Result<StoreKey, LocationError> {
    key(&[
        "node-capacity",
        node.mesh.as_str(),
        &node.routing_id.to_hex(),
    ])
}

/// The scan prefix of every node capacity row.
#[cfg(test)]
pub(crate) fn node_capacity_prefix() -> ScanPrefix {
    ScanPrefix::new("node-capacity\0").expect("literal prefix is valid")
}

/// The authority row of an object: `authority\0{actor|spot}\0{Id}`.
pub(crate) fn authority(kind: ObjectKind, id: &ObjectId) -> Result<StoreKey, LocationError> {
    store_key(&LogicalKey::authority(kind.authority_kind(), id))
}

/// The scan prefix of every authority row.
pub(crate) fn authority_prefix() -> ScanPrefix {
    ScanPrefix::new(zlink_codec::keys::prefix::authorities()).expect("literal prefix is valid")
}

/// Runtime-private: the lookup index row of an object,
/// `location-index\0{objectKind}\0{stableType}\0{Id}` (listing by kind and stable type scans
/// its prefix; it is written and removed in the same batch as the authority row).
pub(crate) fn location_index(
    kind: ObjectKind,
    stable_type: &StableType,
    id: &ObjectId,
) -> Result<StoreKey, LocationError> {
    key(&[
        "location-index",
        kind.as_str(),
        stable_type.as_str(),
        id.as_str(),
    ])
}

/// Runtime-private: a relocation target capacity reservation,
/// `capacity-reservation\0{32 lowercase hex digits of the ReservationId}`.
pub(crate) fn capacity_reservation(reservation_id: u128) -> Result<StoreKey, LocationError> {
    key(&["capacity-reservation", &format!("{reservation_id:032x}")])
}

/// The scan prefix of every relocation target capacity reservation.
pub(crate) fn capacity_reservation_prefix() -> ScanPrefix {
    ScanPrefix::new("capacity-reservation\0").expect("literal prefix is valid")
}

/// The MeshNode descriptor row of a node.
#[cfg(test)]
pub(crate) fn mesh_node(node: &NodeKey) -> Result<StoreKey, LocationError> {
    store_key(&LogicalKey::mesh_node(&node.mesh, &node.routing_id))
}

/// The scan prefix of the MeshNode descriptors of one mesh: `mesh-node\0{MeshName}\0`.
pub(crate) fn mesh_node_prefix(mesh: &MeshName) -> Result<ScanPrefix, LocationError> {
    Ok(ScanPrefix::new(zlink_codec::keys::prefix::mesh_nodes_of(
        mesh,
    ))?)
}

/// Runtime-private: the descriptor change number of one mesh, `mesh-change\0{MeshName}`
/// (bare canonical decimal, moved in the same batch as every descriptor publish or removal of
/// that mesh; discovery compares it before and after a list read).
pub(crate) fn mesh_change(mesh: &MeshName) -> Result<StoreKey, LocationError> {
    key(&["mesh-change", mesh.as_str()])
}

/// Runtime-private: the change number of one channel's descriptors,
/// `{client-server-change|fanout-publisher-change}\0{ChannelName}`.
pub(crate) fn channel_change(
    family: &str,
    channel: &zlink_codec::ChannelName,
) -> Result<StoreKey, LocationError> {
    key(&[family, channel.as_str()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::location::identity::RoutingId;

    #[test]
    fn preimage_keys_with_nul_are_valid_utf8_store_keys() {
        let id = ObjectId::new("user:42").expect("id");
        let k = authority(ObjectKind::Actor, &id).expect("key");
        assert_eq!(k.as_bytes(), b"authority\0actor\0user:42");
        assert!(std::str::from_utf8(k.as_bytes()).is_ok());
        // The Spot kinds share one authority row per id.
        assert_eq!(
            authority(ObjectKind::UserSpot, &id).expect("k"),
            authority(ObjectKind::InstanceSpot, &id).expect("k")
        );
        assert_ne!(k, authority(ObjectKind::UserSpot, &id).expect("k"));
    }

    #[test]
    fn the_longest_runtime_keys_fit_the_store_bound() {
        let long = "x".repeat(255);
        let node = NodeKey {
            mesh: MeshName::new(long.clone()).expect("mesh"),
            routing_id: RoutingId::new(vec![0xff; 255]).expect("rid"),
        };
        assert!(node_capacity(&node).is_ok());
        assert!(mesh_node(&node).is_ok());
        let ty = StableType::new(long.clone()).expect("type");
        let id = ObjectId::new(long).expect("id");
        assert!(location_index(ObjectKind::InstanceSpot, &ty, &id).is_ok());
        assert!(capacity_reservation(u128::MAX).is_ok());
    }

    #[test]
    fn private_prefixes_never_cover_public_records_or_counters() {
        let mesh = MeshName::new("main").expect("mesh");
        let change = mesh_change(&mesh).expect("key");
        assert!(!mesh_node_prefix(&mesh).expect("p").matches(&change));
        for c in [
            Counter::OwnerLease,
            Counter::Object,
            Counter::AuthorityOwner,
        ] {
            assert!(!authority_prefix().matches(&counter_key(c)));
            assert!(!node_capacity_prefix().matches(&counter_key(c)));
        }
    }
}
