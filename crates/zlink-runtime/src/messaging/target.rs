//! What an error is about — the object, node, mesh or channel a call named, or the part of this
//! host that refused it — typed, so a caller matches on it instead of parsing text (issue 40).
//! Spec 06 §20 names the target only in the error's text; [`Target`]'s `Display` is that text.

use std::fmt;

use zlink_codec::keys::AuthorityKind;
use zlink_codec::{ChannelName, MeshName, ObjectId, RoutingId};

/// The target of a [`ZLinkError`](super::ZLinkError) that names one (`NoRoute`, `Unavailable`,
/// `TypeMismatch`, `StateIncompatible`, `MovedUnconfirmed`, and a creation's `Exists` and
/// `OtherIncarnation`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Target {
    /// An Actor or a Spot, by its global id.
    Object {
        /// `actor` or `spot` (every Spot kind shares one).
        kind: AuthorityKind,
        /// Its global id.
        id: ObjectId,
    },
    /// A MeshNode, by its RoutingId.
    Node(RoutingId),
    /// A MeshNode of a MeshName this host runs, by its RoutingId.
    NodeOn {
        /// The node.
        node: RoutingId,
        /// The MeshName it was looked up on.
        mesh: MeshName,
    },
    /// A MeshName this host runs no MeshNode of.
    Mesh(MeshName),
    /// A ChannelName (not in the process-local route index, or with no eligible member).
    Channel(ChannelName),
    /// The peer connection a call went out on.
    Peer,
    /// This host: it is not serving (yet, or any more: it relocated).
    ThisHost,
    /// This node's object work: it is not listed yet, or its owner lease is not held.
    ThisNode,
    /// New object work on this host (past its admission deadline).
    NewObjectWork,
    /// New objects on the MeshNode of this MeshName (it is no Object Server).
    NewObjects(MeshName),
    /// The objects of this node: it has no object role.
    Objects,
    /// An Instance Spot type: none was named and no serving node offers one.
    InstanceSpotType,
    /// A node to move an object to.
    RelocationTarget,
    /// A live relocation, by its id.
    Relocation(u128),
}

impl Target {
    /// The Actor or Spot `id` of `kind`.
    pub fn object(kind: AuthorityKind, id: &ObjectId) -> Self {
        Self::Object {
            kind,
            id: id.clone(),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Object { kind, id } => write!(f, "{} {:?}", kind.as_str(), id.as_str()),
            Self::Node(rid) => write!(f, "node {rid}"),
            Self::NodeOn { node, mesh } => {
                write!(f, "node {node} on MeshName {:?}", mesh.as_str())
            }
            Self::Mesh(mesh) => write!(f, "MeshName {:?}", mesh.as_str()),
            Self::Channel(channel) => write!(f, "channel {:?}", channel.as_str()),
            Self::Peer => f.write_str("peer"),
            Self::ThisHost => f.write_str("this host"),
            Self::ThisNode => f.write_str("this node"),
            Self::NewObjectWork => f.write_str("new object work on this host"),
            Self::NewObjects(mesh) => write!(f, "new objects on MeshNode {:?}", mesh.as_str()),
            Self::Objects => f.write_str("objects (this node has no object role)"),
            Self::InstanceSpotType => {
                f.write_str("an Instance Spot type (no serving node offers one)")
            }
            Self::RelocationTarget => f.write_str("a relocation target"),
            Self::Relocation(id) => write!(f, "relocation {id}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_shows_as_the_text_spec_06_names_it_by() {
        let id = ObjectId::new("p1").expect("id");
        assert_eq!(
            Target::object(AuthorityKind::Actor, &id).to_string(),
            "actor \"p1\""
        );
        let mesh = MeshName::new("game").expect("mesh");
        assert_eq!(Target::Mesh(mesh.clone()).to_string(), "MeshName \"game\"");
        assert_eq!(
            Target::NewObjects(mesh).to_string(),
            "new objects on MeshNode \"game\""
        );
        let channel = ChannelName::new("chat").expect("channel");
        assert_eq!(Target::Channel(channel).to_string(), "channel \"chat\"");
        assert_eq!(Target::Relocation(7).to_string(), "relocation 7");
    }
}
