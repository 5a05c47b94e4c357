//! Identities the location runtime keys records by. The names and ids themselves are the codec
//! crate's validated types (UTF-8 1..=255 bytes, no NUL, routing ids as lowercase hex), so the
//! runtime and the records can never disagree on what a valid id is.

pub use zlink_codec::records::ObjectKind;
pub use zlink_codec::{MeshName, ObjectId, OwnerId, RoutingId, StableType};

use super::generation::OwnerLeaseGeneration;

/// A fresh OwnerId (spec 21 §3.1): a lowercase canonical UUID v4, never reused.
pub fn new_owner_id() -> OwnerId {
    // A UUID's 36 ASCII characters always satisfy the OwnerId bounds.
    OwnerId::new(zlink_store_spi::entropy::uuid_v4().to_string())
        .expect("a UUID is a valid OwnerId")
}

/// One host process run: `(OwnerId, OwnerLeaseGeneration)` (spec 21 §3.1).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostRun {
    /// The host's owner id.
    pub owner_id: OwnerId,
    /// The lease generation of this run.
    pub lease_generation: OwnerLeaseGeneration,
}

/// A MeshNode's descriptor identity: `(MeshName, RoutingId)`; the key its descriptor and its
/// capacity row live under.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeKey {
    /// The RouteMesh.
    pub mesh: MeshName,
    /// The node's routing id.
    pub routing_id: RoutingId,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_ids_are_never_reused() {
        let a = new_owner_id();
        let b = new_owner_id();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 36);
        assert_eq!(a.as_str(), a.as_str().to_lowercase());
    }
}
