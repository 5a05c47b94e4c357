//! Identities the location runtime keys records by: owner ids, host runs, nodes and objects.

use std::fmt;

use super::error::LocationError;
use super::generation::OwnerLeaseGeneration;

fn check_component(what: &str, value: &str, max: usize) -> Result<(), LocationError> {
    if value.is_empty() || value.len() > max {
        return Err(LocationError::InvalidOperation(format!(
            "{what} must be 1..={max} UTF-8 bytes, got {}",
            value.len()
        )));
    }
    if value.contains('\0') {
        return Err(LocationError::InvalidOperation(format!(
            "{what} must not contain a NUL byte"
        )));
    }
    Ok(())
}

macro_rules! text_id {
    ($(#[$meta:meta])* $name:ident, $what:expr, $max:expr) => {
        $(#[$meta])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// The largest length in UTF-8 bytes.
            pub const MAX_LEN: usize = $max;

            /// Validates: 1..=`MAX_LEN` UTF-8 bytes, no NUL (NUL separates key preimage parts).
            pub fn new(value: impl Into<String>) -> Result<Self, LocationError> {
                let value = value.into();
                check_component($what, &value, $max)?;
                Ok(Self(value))
            }

            /// The text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }
    };
}

text_id!(
    /// A host's owner id (spec 21 §3.1): never reused. [`OwnerId::generate`] issues a fresh
    /// lowercase UUID v4.
    OwnerId,
    "OwnerId",
    255
);
text_id!(
    /// A global ActorId or SpotId: UTF-8 1..=255 bytes, compared exactly (no normalisation).
    ObjectId,
    "ActorId/SpotId",
    255
);
text_id!(
    /// A RouteMesh name.
    MeshName,
    "MeshName",
    255
);
text_id!(
    /// A factory's stable type.
    StableType,
    "stable type",
    255
);

impl OwnerId {
    /// A fresh OwnerId: a lowercase canonical UUID v4, never reused.
    pub fn generate() -> Self {
        OwnerId(uuid::Uuid::new_v4().to_string())
    }
}

/// A node's routing id: raw bytes, 1..=255 of them, written as lowercase hex in keys and records.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RoutingId(Vec<u8>);

impl RoutingId {
    /// Validates 1..=255 raw bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<Self, LocationError> {
        let bytes = bytes.into();
        if bytes.is_empty() || bytes.len() > 255 {
            return Err(LocationError::InvalidOperation(format!(
                "routing id must be 1..=255 bytes, got {}",
                bytes.len()
            )));
        }
        Ok(RoutingId(bytes))
    }

    /// Parses lowercase hex.
    pub fn from_hex(hex: &str) -> Result<Self, LocationError> {
        let bad = || LocationError::InvalidOperation("routing id hex must be lowercase hex".into());
        if hex.len() % 2 != 0 {
            return Err(bad());
        }
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        let mut out = Vec::with_capacity(hex.len() / 2);
        for pair in hex.as_bytes().chunks(2) {
            let hi = digit(pair[0]).ok_or_else(bad)?;
            let lo = digit(pair[1]).ok_or_else(bad)?;
            out.push(hi << 4 | lo);
        }
        Self::new(out)
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Lowercase hex.
    pub fn to_hex(&self) -> String {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut s = String::with_capacity(self.0.len() * 2);
        for b in &self.0 {
            s.push(char::from(HEX[usize::from(b >> 4)]));
            s.push(char::from(HEX[usize::from(b & 15)]));
        }
        s
    }
}

impl fmt::Debug for RoutingId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RoutingId({})", self.to_hex())
    }
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

/// The kind of an authority-owning object (spec 21 §3.3; Entry Spots have no authority kind of
/// their own: their Actors count as actors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    /// An Actor.
    Actor,
    /// A User Spot.
    UserSpot,
    /// An Instance Spot.
    InstanceSpot,
}

impl ObjectKind {
    /// The authority key segment: `actor` or `spot` (Spot kinds share one segment, so one id
    /// has exactly one authority row).
    pub fn key_segment(self) -> &'static str {
        match self {
            ObjectKind::Actor => "actor",
            ObjectKind::UserSpot | ObjectKind::InstanceSpot => "spot",
        }
    }

    /// The record spelling: `actor`, `userSpot`, `instanceSpot`.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Actor => "actor",
            ObjectKind::UserSpot => "userSpot",
            ObjectKind::InstanceSpot => "instanceSpot",
        }
    }

    /// Whether this is a Spot kind.
    pub fn is_spot(self) -> bool {
        !matches!(self, ObjectKind::Actor)
    }

    /// Parses the record spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "actor" => Some(ObjectKind::Actor),
            "userSpot" => Some(ObjectKind::UserSpot),
            "instanceSpot" => Some(ObjectKind::InstanceSpot),
            _ => None,
        }
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_ids_are_one_to_255_bytes_without_nul() {
        assert!(ObjectId::new("a").is_ok());
        assert!(ObjectId::new("x".repeat(255)).is_ok());
        assert!(ObjectId::new("x".repeat(256)).is_err());
        assert!(ObjectId::new("").is_err());
        assert!(ObjectId::new("a\0b").is_err());
        // Case matters: two distinct ids.
        assert_ne!(ObjectId::new("User").ok(), ObjectId::new("user").ok());
    }

    #[test]
    fn routing_ids_round_trip_lowercase_hex() {
        let rid = RoutingId::new(vec![1, 2, 0xab]).expect("rid");
        assert_eq!(rid.to_hex(), "0102ab");
        assert_eq!(RoutingId::from_hex("0102ab").ok(), Some(rid));
        assert!(RoutingId::from_hex("0102AB").is_err());
        assert!(RoutingId::from_hex("").is_err());
        assert!(RoutingId::new(vec![0; 255]).is_ok());
        assert!(RoutingId::new(vec![0; 256]).is_err());
    }

    #[test]
    fn owner_ids_are_never_reused() {
        let a = OwnerId::generate();
        let b = OwnerId::generate();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 36);
        assert_eq!(a.as_str(), a.as_str().to_lowercase());
    }
}
