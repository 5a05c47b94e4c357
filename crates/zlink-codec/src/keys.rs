//! Logical keys: the byte-exact preimages of spec 21 §3.4 and the counter keys of 22 §8.
//!
//! A [`LogicalKey`] is what the runtime hands to a Location Store as its `StoreKey`: UTF-8,
//! values separated by `\0`, at most 1,024 bytes by construction (every component is bounded
//! to 255 bytes). The official Redis provider stores it as the opaque member's `originalKey`
//! and addresses the row by `{prefix}:{zlink-location-v3}:opaque:{sha256hex(preimage)}`;
//! [`hashed_key_part`] computes that last segment.

use std::fmt;

use sha2::{Digest, Sha256};

use crate::counter::Counter;
use crate::error::CodecError;
use crate::ids::{ChannelName, Generation, MeshName, ObjectId, OwnerId, RoutingId, lower_hex};

/// Largest key the Location Store SPI accepts (bytes).
pub const MAX_KEY_LEN: usize = 1024;

const MESH_NODE: &str = "mesh-node";
const OWNER_LEASE: &str = "owner-lease";
const CLIENT_SERVER: &str = "client-server";
const FANOUT_PUBLISHER: &str = "fanout-publisher";
const AUTHORITY: &str = "authority";
const CREATION_TERMINAL: &str = "creation-terminal";

/// The object-kind segment of an authority key. Every Spot kind (Entry, User, Instance)
/// shares `spot`, so one id has exactly one authority row per segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AuthorityKind {
    /// `actor`
    Actor,
    /// `spot`
    Spot,
}

impl AuthorityKind {
    /// The literal segment.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Actor => "actor",
            Self::Spot => "spot",
        }
    }
}

/// A 128-bit creation OperationId (non-zero), written in keys as 32 lowercase hex digits
/// (the high 64 bits then the low 64 bits, each zero-padded to 16 digits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OperationId(u128);

impl OperationId {
    /// Validates a non-zero id.
    pub fn new(value: u128) -> Result<Self, CodecError> {
        if value == 0 {
            return Err(CodecError::invalid_argument("OperationId", "zero"));
        }
        Ok(Self(value))
    }

    /// Builds the id from its high and low 64-bit halves.
    pub fn from_parts(high: u64, low: u64) -> Result<Self, CodecError> {
        Self::new((u128::from(high) << 64) | u128::from(low))
    }

    /// The value.
    pub fn get(self) -> u128 {
        self.0
    }

    /// The high 64 bits.
    pub fn high(self) -> u64 {
        (self.0 >> 64) as u64
    }

    /// The low 64 bits.
    pub fn low(self) -> u64 {
        self.0 as u64
    }

    /// The 32-digit lowercase hex form used in the creation-terminal preimage.
    pub fn to_hex(self) -> String {
        format!("{:016x}{:016x}", self.high(), self.low())
    }
}

/// A logical key preimage (the Location Store key the runtime uses).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LogicalKey(String);

impl LogicalKey {
    fn join(parts: &[&str]) -> Self {
        Self(parts.join("\0"))
    }

    /// `mesh-node\0{MeshName}\0{hex(RoutingId)}`
    pub fn mesh_node(mesh: &MeshName, routing_id: &RoutingId) -> Self {
        Self::join(&[MESH_NODE, mesh.as_str(), &routing_id.to_hex()])
    }

    /// `owner-lease\0{OwnerId}`
    pub fn owner_lease(owner: &OwnerId) -> Self {
        Self::join(&[OWNER_LEASE, owner.as_str()])
    }

    /// `client-server\0{ChannelName}\0{hex(RoutingId)}`
    pub fn client_server(channel: &ChannelName, routing_id: &RoutingId) -> Self {
        Self::join(&[CLIENT_SERVER, channel.as_str(), &routing_id.to_hex()])
    }

    /// `fanout-publisher\0{ChannelName}\0{hex(RoutingId)}`
    pub fn fanout_publisher(channel: &ChannelName, routing_id: &RoutingId) -> Self {
        Self::join(&[FANOUT_PUBLISHER, channel.as_str(), &routing_id.to_hex()])
    }

    /// `authority\0{actor|spot}\0{Id}`
    pub fn authority(kind: AuthorityKind, id: &ObjectId) -> Self {
        Self::join(&[AUTHORITY, kind.as_str(), id.as_str()])
    }

    /// `creation-terminal\0{hex(sourceNodeRid)}\0{sourceHostGeneration}\0{hex32(OperationId)}`:
    /// the key of a stored creation-operation-terminal-v1 value (golden fixture).
    pub fn creation_terminal(
        source_node_rid: &RoutingId,
        source_host_generation: Generation,
        operation_id: OperationId,
    ) -> Self {
        Self::join(&[
            CREATION_TERMINAL,
            &source_node_rid.to_hex(),
            &source_host_generation.to_string(),
            &operation_id.to_hex(),
        ])
    }

    /// The counter's literal key (`zlink:v11:...`).
    pub fn counter(counter: Counter) -> Self {
        Self(counter.logical_key().to_owned())
    }

    /// The preimage text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The preimage bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// Unwraps the preimage text.
    pub fn into_string(self) -> String {
        self.0
    }

    /// Lowercase hex SHA-256 of the preimage (the last segment of the Redis key).
    pub fn sha256_hex(&self) -> String {
        hashed_key_part(self.as_bytes())
    }

    /// The preimage with each `\0` shown as `\u0000` (the fixture's printable form).
    pub fn printable(&self) -> String {
        printable_preimage(&self.0)
    }

    /// Parses a preimage (for example a key a scan returned) back into its parts.
    pub fn parse(preimage: &str) -> Result<KeyParts, CodecError> {
        KeyParts::parse(preimage)
    }
}

impl fmt::Debug for LogicalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LogicalKey({:?})", self.printable())
    }
}

impl fmt::Display for LogicalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.printable())
    }
}

impl AsRef<str> for LogicalKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<LogicalKey> for String {
    fn from(k: LogicalKey) -> String {
        k.0
    }
}

/// What a logical key names.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyParts {
    /// A MeshNode descriptor key.
    MeshNode {
        /// The mesh.
        mesh: MeshName,
        /// The node's RoutingId.
        routing_id: RoutingId,
    },
    /// An owner lease key.
    OwnerLease {
        /// The owner.
        owner: OwnerId,
    },
    /// A ClientServer server descriptor key.
    ClientServer {
        /// The channel.
        channel: ChannelName,
        /// The server's RoutingId.
        routing_id: RoutingId,
    },
    /// A fanout publisher descriptor key.
    FanoutPublisher {
        /// The channel.
        channel: ChannelName,
        /// The publisher's RoutingId.
        routing_id: RoutingId,
    },
    /// An authority key.
    Authority {
        /// `actor` or `spot`.
        kind: AuthorityKind,
        /// The global id.
        id: ObjectId,
    },
    /// A creation terminal key.
    CreationTerminal {
        /// The source node's RoutingId.
        source_node_rid: RoutingId,
        /// The source host run generation.
        source_host_generation: Generation,
        /// The operation id.
        operation_id: OperationId,
    },
    /// A counter key.
    Counter(Counter),
}

impl KeyParts {
    /// Parses a preimage; the inverse of the [`LogicalKey`] builders.
    pub fn parse(preimage: &str) -> Result<Self, CodecError> {
        let bad = |reason: &str| CodecError::invalid_argument("logical key", reason.to_owned());
        if let Some(c) = Counter::from_logical_key(preimage) {
            return Ok(Self::Counter(c));
        }
        let parts: Vec<&str> = preimage.split('\0').collect();
        let parsed = match parts.as_slice() {
            [MESH_NODE, mesh, rid] => Self::MeshNode {
                mesh: MeshName::new(*mesh)?,
                routing_id: RoutingId::from_hex(rid)?,
            },
            [OWNER_LEASE, owner] => Self::OwnerLease {
                owner: OwnerId::new(*owner)?,
            },
            [CLIENT_SERVER, channel, rid] => Self::ClientServer {
                channel: ChannelName::new(*channel)?,
                routing_id: RoutingId::from_hex(rid)?,
            },
            [FANOUT_PUBLISHER, channel, rid] => Self::FanoutPublisher {
                channel: ChannelName::new(*channel)?,
                routing_id: RoutingId::from_hex(rid)?,
            },
            [AUTHORITY, kind, id] => Self::Authority {
                kind: match *kind {
                    "actor" => AuthorityKind::Actor,
                    "spot" => AuthorityKind::Spot,
                    _ => return Err(bad("authority kind is neither actor nor spot")),
                },
                id: ObjectId::new(*id)?,
            },
            [CREATION_TERMINAL, rid, generation, op] => {
                if op.len() != 32 {
                    return Err(bad("operation id is not 32 hex digits"));
                }
                let op_bytes = crate::ids::decode_lower_hex(op)
                    .ok_or_else(|| bad("operation id is not lowercase hex"))?;
                let mut v: u128 = 0;
                for b in op_bytes {
                    v = (v << 8) | u128::from(b);
                }
                Self::CreationTerminal {
                    source_node_rid: RoutingId::from_hex(rid)?,
                    source_host_generation: Generation::parse(generation)?,
                    operation_id: OperationId::new(v)?,
                }
            }
            _ => return Err(bad("not a zlink logical key")),
        };
        Ok(parsed)
    }

    /// Rebuilds the logical key.
    pub fn to_key(&self) -> LogicalKey {
        match self {
            Self::MeshNode { mesh, routing_id } => LogicalKey::mesh_node(mesh, routing_id),
            Self::OwnerLease { owner } => LogicalKey::owner_lease(owner),
            Self::ClientServer {
                channel,
                routing_id,
            } => LogicalKey::client_server(channel, routing_id),
            Self::FanoutPublisher {
                channel,
                routing_id,
            } => LogicalKey::fanout_publisher(channel, routing_id),
            Self::Authority { kind, id } => LogicalKey::authority(*kind, id),
            Self::CreationTerminal {
                source_node_rid,
                source_host_generation,
                operation_id,
            } => LogicalKey::creation_terminal(
                source_node_rid,
                *source_host_generation,
                *operation_id,
            ),
            Self::Counter(c) => LogicalKey::counter(*c),
        }
    }
}

/// Scan prefixes over logical keys (every prefix ends in `\0`, so a prefix never matches a
/// longer name that merely starts with the same text, and never matches a counter key).
pub mod prefix {
    use super::*;

    /// Every MeshNode descriptor: `mesh-node\0`.
    pub fn mesh_nodes() -> String {
        format!("{MESH_NODE}\0")
    }

    /// The MeshNode descriptors of one mesh: `mesh-node\0{MeshName}\0`.
    pub fn mesh_nodes_of(mesh: &MeshName) -> String {
        format!("{MESH_NODE}\0{}\0", mesh.as_str())
    }

    /// Every owner lease: `owner-lease\0`.
    pub fn owner_leases() -> String {
        format!("{OWNER_LEASE}\0")
    }

    /// Every ClientServer server descriptor: `client-server\0`.
    pub fn client_servers() -> String {
        format!("{CLIENT_SERVER}\0")
    }

    /// The ClientServer servers of one channel: `client-server\0{ChannelName}\0`.
    pub fn client_servers_of(channel: &ChannelName) -> String {
        format!("{CLIENT_SERVER}\0{}\0", channel.as_str())
    }

    /// Every fanout publisher descriptor: `fanout-publisher\0`.
    pub fn fanout_publishers() -> String {
        format!("{FANOUT_PUBLISHER}\0")
    }

    /// The fanout publishers of one channel: `fanout-publisher\0{ChannelName}\0`.
    pub fn fanout_publishers_of(channel: &ChannelName) -> String {
        format!("{FANOUT_PUBLISHER}\0{}\0", channel.as_str())
    }

    /// Every authority row: `authority\0`.
    pub fn authorities() -> String {
        format!("{AUTHORITY}\0")
    }

    /// The authority rows of one kind: `authority\0{actor|spot}\0`.
    pub fn authorities_of(kind: AuthorityKind) -> String {
        format!("{AUTHORITY}\0{}\0", kind.as_str())
    }
}

/// Lowercase hex SHA-256 of a preimage: the SPI-agnostic hashed key part.
pub fn hashed_key_part(preimage: &[u8]) -> String {
    lower_hex(&Sha256::digest(preimage))
}

/// Shows each `\0` of a preimage as `\u0000`.
pub fn printable_preimage(preimage: &str) -> String {
    preimage.replace('\0', "\\u0000")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rid() -> RoutingId {
        RoutingId::new(vec![1, 2, 3, 4]).unwrap()
    }

    #[test]
    fn preimages_match_the_spec_shapes() {
        let mesh = MeshName::new("main").unwrap();
        assert_eq!(
            LogicalKey::mesh_node(&mesh, &rid()).as_str(),
            "mesh-node\x00main\x0001020304"
        );
        let owner = OwnerId::new("owner-a").unwrap();
        assert_eq!(
            LogicalKey::owner_lease(&owner).as_str(),
            "owner-lease\0owner-a"
        );
        let id = ObjectId::new("user:42").unwrap();
        assert_ne!(
            LogicalKey::authority(AuthorityKind::Actor, &id),
            LogicalKey::authority(AuthorityKind::Spot, &id)
        );
    }

    #[test]
    fn creation_terminal_matches_fixture_components() {
        let key = LogicalKey::creation_terminal(
            &rid(),
            Generation::new(7).unwrap(),
            OperationId::from_parts(42, 1).unwrap(),
        );
        assert_eq!(
            key.as_str(),
            "creation-terminal\x0001020304\x007\x00000000000000002a0000000000000001"
        );
        assert_eq!(
            key.sha256_hex(),
            "8cf62444954aeae82a91bb2939e437a39acafa8ee2e66b5a9fe833d048c8fa91"
        );
    }

    #[test]
    fn longest_possible_preimage_fits_the_store_key_bound() {
        let name = "n".repeat(255);
        let rid = RoutingId::new(vec![0xff; 255]).unwrap();
        let k = LogicalKey::mesh_node(&MeshName::new(name.clone()).unwrap(), &rid);
        assert!(k.as_bytes().len() <= MAX_KEY_LEN);
        let k = LogicalKey::fanout_publisher(&ChannelName::new(name).unwrap(), &rid);
        assert!(k.as_bytes().len() <= MAX_KEY_LEN);
        let k = LogicalKey::creation_terminal(
            &rid,
            Generation::MAX,
            OperationId::new(u128::MAX).unwrap(),
        );
        assert!(k.as_bytes().len() <= MAX_KEY_LEN);
    }

    #[test]
    fn parse_inverts_every_builder() {
        let keys = [
            LogicalKey::mesh_node(&MeshName::new("m").unwrap(), &rid()),
            LogicalKey::owner_lease(&OwnerId::new("o").unwrap()),
            LogicalKey::client_server(&ChannelName::new("c").unwrap(), &rid()),
            LogicalKey::fanout_publisher(&ChannelName::new("c").unwrap(), &rid()),
            LogicalKey::authority(AuthorityKind::Spot, &ObjectId::new("room:1").unwrap()),
            LogicalKey::creation_terminal(
                &rid(),
                Generation::new(9).unwrap(),
                OperationId::new(5).unwrap(),
            ),
            LogicalKey::counter(Counter::Object),
        ];
        for k in keys {
            assert_eq!(KeyParts::parse(k.as_str()).unwrap().to_key(), k);
        }
    }

    #[test]
    fn parse_rejects_foreign_keys() {
        for bad in [
            "",
            "mesh-node\0main",
            "authority\0entry\0x",
            "authority\0actor\0",
            "mesh-node\0main\0ABCD",
            "zlink:v11:counter:object",
            "creation-terminal\x000102\x001\x00abc",
        ] {
            assert!(KeyParts::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn prefixes_end_in_nul_and_exclude_counters() {
        let mesh = MeshName::new("main").unwrap();
        let key = LogicalKey::mesh_node(&mesh, &rid());
        assert!(key.as_str().starts_with(&prefix::mesh_nodes_of(&mesh)));
        assert!(
            !LogicalKey::mesh_node(&MeshName::new("main2").unwrap(), &rid())
                .as_str()
                .starts_with(&prefix::mesh_nodes_of(&mesh))
        );
        for c in Counter::ALL {
            let k = LogicalKey::counter(c);
            for p in [
                prefix::authorities(),
                prefix::mesh_nodes(),
                prefix::owner_leases(),
            ] {
                assert!(!k.as_str().starts_with(&p));
            }
        }
    }
}
