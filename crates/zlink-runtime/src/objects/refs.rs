//! ActorRef and SpotRef (spec 21 §7.2, 06 §17): immutable snapshots of one incarnation — the
//! global id, its ObjectGeneration, and the MeshName and node RID at lookup time. A ref is
//! never a message target (messages resolve the current owner by global id); Destroy and Close
//! take one to end exactly that incarnation.

use serde::{Deserialize, Serialize};
use zlink_codec::records::ObjectKind;
use zlink_codec::terminal::ObjectRef;
use zlink_codec::{Generation, MeshName, ObjectId, RoutingId};

use crate::messaging::{InternalError, PayloadError, ZLinkError};
use zlink_location::AuthorityHandle;

/// The JSON form of a ref: ObjectGeneration as a decimal string (spec 21 §7.2), the node RID as
/// lowercase hex.
#[derive(Debug, Serialize, Deserialize)]
struct RefWire {
    id: String,
    #[serde(rename = "objectGeneration")]
    generation: String,
    #[serde(rename = "meshName")]
    mesh: String,
    #[serde(rename = "routingIdHex")]
    node_hex: String,
}

macro_rules! object_ref {
    ($name:ident, $what:literal) => {
        #[doc = concat!("A snapshot of one ", $what, " incarnation (spec 21 §7.2): never a message target.")]
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub struct $name {
            /// The global id.
            pub id: ObjectId,
            /// The ObjectGeneration of this incarnation (non-zero, 63-bit).
            pub generation: u64,
            /// The MeshName at lookup time.
            pub mesh: MeshName,
            /// The node RID at lookup time.
            pub node: RoutingId,
        }

        impl $name {
            /// The JSON form (`objectGeneration` as a decimal string, spec 21 §7.2).
            pub fn to_json(&self) -> Result<Vec<u8>, ZLinkError> {
                let wire = RefWire {
                    id: self.id.as_str().to_owned(),
                    generation: self.generation.to_string(),
                    mesh: self.mesh.as_str().to_owned(),
                    node_hex: self.node.to_hex(),
                };
                serde_json::to_vec(&wire)
                    .map_err(|e| ZLinkError::Internal(InternalError::json(concat!($what, " ref"))(e)))
            }

            /// Parses the JSON form.
            pub fn from_json(bytes: &[u8]) -> Result<Self, ZLinkError> {
                let bad = ZLinkError::malformed_payload(concat!($what, " ref"));
                let w: RefWire = serde_json::from_slice(bytes).map_err(|e| bad(e.into()))?;
                let generation: u64 = w.generation.parse().map_err(|source| {
                    bad(PayloadError::Number {
                        field: "objectGeneration",
                        source,
                    })
                })?;
                Generation::new(generation).map_err(|e| bad(e.into()))?;
                Ok(Self {
                    id: ObjectId::new(w.id).map_err(|e| bad(e.into()))?,
                    generation,
                    mesh: MeshName::new(w.mesh).map_err(|e| bad(e.into()))?,
                    node: RoutingId::from_hex(&w.node_hex).map_err(|e| bad(e.into()))?,
                })
            }

            pub(crate) fn of(handle: &AuthorityHandle) -> Self {
                let node = handle.node();
                Self {
                    id: handle.id().clone(),
                    generation: handle.object_generation().get(),
                    mesh: node.mesh,
                    node: node.routing_id,
                }
            }

            pub(crate) fn from_terminal(r: &ObjectRef) -> Self {
                Self {
                    id: r.id.clone(),
                    generation: r.object_generation.get(),
                    mesh: r.mesh_name.clone(),
                    node: r.node_rid.clone(),
                }
            }
        }
    };
}

object_ref!(ActorRef, "Actor");
object_ref!(SpotRef, "Spot");

/// The terminal-record form of the incarnation `handle` names.
pub(crate) fn terminal_ref(handle: &AuthorityHandle, kind: ObjectKind) -> ObjectRef {
    let node = handle.node();
    ObjectRef {
        object_kind: kind,
        id: handle.id().clone(),
        object_generation: handle.object_generation().to_codec(),
        mesh_name: node.mesh,
        node_rid: node.routing_id,
    }
}
