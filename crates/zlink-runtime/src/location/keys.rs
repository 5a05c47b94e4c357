//! Store keys. The runtime hands the Location Store the *logical key preimage* itself as the
//! opaque [`StoreKey`] (UTF-8, `\0`-separated, at most 1,024 bytes; `\0` is valid UTF-8). A
//! provider maps it to its physical layout; the official Redis provider stores it under
//! `{prefix}:{zlink-location-v3}:opaque:{sha256hex(preimage)}` with the preimage kept as the
//! member's `originalKey`, so scans by preimage prefix work on every provider.

use zlink_store_spi::{ScanPrefix, StoreKey};

use super::error::LocationError;
use super::generation::GenerationKind;
use super::identity::NodeKey;

fn key(parts: &[&str]) -> Result<StoreKey, LocationError> {
    // Every component is bounded to 255 bytes and carries no NUL, so the keys built here stay
    // far below 1,024 bytes; the check is still made, never assumed.
    Ok(StoreKey::new(parts.join("\0"))?)
}

/// The logical counter key (spec 22 §8).
pub(crate) fn counter_key(kind: GenerationKind) -> StoreKey {
    let literal = match kind {
        GenerationKind::OwnerLease => "zlink:v11:owner-counter",
        GenerationKind::Object => "zlink:v11:object-counter",
        GenerationKind::AuthorityOwner => "zlink:v11:authority-owner-counter",
    };
    // A short ASCII literal: always a valid key.
    StoreKey::new(literal).expect("counter literal is a valid store key")
}

/// Runtime-private: a node's capacity row, `node-capacity\0{MeshName}\0{hex(RoutingId)}`.
pub(crate) fn node_capacity(node: &NodeKey) -> Result<StoreKey, LocationError> {
    key(&[
        "node-capacity",
        node.mesh.as_str(),
        &node.routing_id.to_hex(),
    ])
}

/// The scan prefix of every node capacity row.
pub(crate) fn node_capacity_prefix() -> ScanPrefix {
    ScanPrefix::new("node-capacity\0").expect("literal prefix is valid")
}
