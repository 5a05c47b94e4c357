//! Logical keys: which record family a key preimage names, with its components checked (spec 21
//! §3.4, 22 §8, and the runtime-private rows of `zlink-location`). Pure.

use zlink_codec::records::ObjectKind;
use zlink_codec::{ChannelName, Counter, MeshName, ObjectId, OwnerId, RoutingId};

use crate::finding::{Mismatch, show_bytes};
use crate::member::canonical_decimal;

/// The record families the runtime writes to the Location Store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Family {
    /// `mesh-node\0{MeshName}\0{hex(RoutingId)}`.
    MeshNode,
    /// `owner-lease\0{OwnerId}`.
    OwnerLease,
    /// `client-server\0{ChannelName}\0{hex(RoutingId)}`.
    ClientServer,
    /// `fanout-publisher\0{ChannelName}\0{hex(RoutingId)}`.
    FanoutPublisher,
    /// `authority\0{actor|spot}\0{Id}`.
    Authority,
    /// `creation-terminal\0{hex(rid)}\0{generation}\0{hex32(OperationId)}`.
    CreationTerminal,
    /// `zlink:v11:{owner,object,authority-owner}-counter`.
    Counter,
    /// `node-capacity\0{MeshName}\0{hex(RoutingId)}` (runtime-private).
    NodeCapacity,
    /// `location-index\0{objectKind}\0{stableType}\0{Id}` (runtime-private).
    LocationIndex,
    /// `creation-deadline\0{objectKind}\0{Id}` (runtime-private).
    CreationDeadline,
    /// `capacity-reservation\0{32 hex}` (runtime-private).
    CapacityReservation,
    /// `mesh-change\0{MeshName}` (runtime-private).
    MeshChange,
    /// `client-server-change\0{ChannelName}` (runtime-private).
    ClientServerChange,
    /// `fanout-publisher-change\0{ChannelName}` (runtime-private).
    FanoutPublisherChange,
    /// `spot-per-actor-move\0{SpotId}` (runtime-private).
    PerActorMove,
    /// `spot-inventory\0{SpotId}` (runtime-private).
    SpotInventory,
    /// `run-objects\0{OwnerId}\0{LeaseGeneration}\0{actor|spot}\0{Id}` (an entry of the
    /// per-run index) or `run-objects\0{OwnerId}\0{LeaseGeneration}\0run` (its marker)
    /// (runtime-private).
    RunObjects,
}

impl Family {
    /// Every family, in census order.
    pub const ALL: [Family; 17] = [
        Family::MeshNode,
        Family::OwnerLease,
        Family::ClientServer,
        Family::FanoutPublisher,
        Family::Authority,
        Family::CreationTerminal,
        Family::Counter,
        Family::NodeCapacity,
        Family::LocationIndex,
        Family::CreationDeadline,
        Family::CapacityReservation,
        Family::MeshChange,
        Family::ClientServerChange,
        Family::FanoutPublisherChange,
        Family::PerActorMove,
        Family::SpotInventory,
        Family::RunObjects,
    ];

    /// The key's leading component (the counters: `counter`).
    pub fn as_str(self) -> &'static str {
        match self {
            Family::MeshNode => "mesh-node",
            Family::OwnerLease => "owner-lease",
            Family::ClientServer => "client-server",
            Family::FanoutPublisher => "fanout-publisher",
            Family::Authority => "authority",
            Family::CreationTerminal => "creation-terminal",
            Family::Counter => "counter",
            Family::NodeCapacity => "node-capacity",
            Family::LocationIndex => "location-index",
            Family::CreationDeadline => "creation-deadline",
            Family::CapacityReservation => "capacity-reservation",
            Family::MeshChange => "mesh-change",
            Family::ClientServerChange => "client-server-change",
            Family::FanoutPublisherChange => "fanout-publisher-change",
            Family::PerActorMove => "spot-per-actor-move",
            Family::SpotInventory => "spot-inventory",
            Family::RunObjects => "run-objects",
        }
    }

    /// Whether a record of this family must carry an expiry (`Some(true)`), must be durable
    /// (`Some(false)`), or may be either (`None`).
    pub fn expiry_rule(self) -> Option<bool> {
        match self {
            // Owner leases end unless renewed; creation terminals are kept 5 minutes past
            // the operation's deadline.
            Family::OwnerLease | Family::CreationTerminal => Some(true),
            // Counters and authority records never expire (spec 21 §3.2, §12).
            Family::Counter | Family::Authority => Some(false),
            _ => None,
        }
    }
}

/// A key component that failed its check.
fn bad(part: usize, what: &str, text: &str) -> Mismatch {
    Mismatch::new(
        format!("key[{part}]"),
        what.to_owned(),
        format!("\"{}\"", show_bytes(text.as_bytes())),
    )
}

fn mesh(part: usize, s: &str) -> Result<(), Mismatch> {
    MeshName::new(s)
        .map(|_| ())
        .map_err(|_| bad(part, "a MeshName (UTF-8, 1..=255 bytes, no NUL)", s))
}

fn channel(part: usize, s: &str) -> Result<(), Mismatch> {
    ChannelName::new(s)
        .map(|_| ())
        .map_err(|_| bad(part, "a ChannelName (UTF-8, 1..=255 bytes, no NUL)", s))
}

fn id(part: usize, s: &str) -> Result<(), Mismatch> {
    ObjectId::new(s)
        .map(|_| ())
        .map_err(|_| bad(part, "an ActorId/SpotId (UTF-8, 1..=255 bytes, no NUL)", s))
}

fn rid(part: usize, s: &str) -> Result<(), Mismatch> {
    match RoutingId::from_hex(s) {
        Ok(r) if r.to_hex() == s => Ok(()),
        _ => Err(bad(part, "lowercase hex of a 1..=255-byte RoutingId", s)),
    }
}

fn hex32(part: usize, s: &str, nonzero: bool) -> Result<(), Mismatch> {
    let ok = s.len() == 32
        && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && (!nonzero || s.bytes().any(|b| b != b'0'));
    if ok {
        Ok(())
    } else {
        Err(bad(
            part,
            if nonzero {
                "32 lowercase hex digits, not all zero"
            } else {
                "32 lowercase hex digits"
            },
            s,
        ))
    }
}

fn kind(part: usize, s: &str) -> Result<(), Mismatch> {
    ObjectKind::parse(s)
        .map(|_| ())
        .map_err(|_| bad(part, "actor, userSpot or instanceSpot", s))
}

/// The family of logical key `key`, its components checked; a mismatch names the component
/// (`key[i]`) or says the key names no family the runtime writes.
pub fn classify(key: &[u8]) -> Result<Family, Mismatch> {
    let text = std::str::from_utf8(key)
        .map_err(|_| Mismatch::new("key", "UTF-8", format!("\"{}\"", show_bytes(key))))?;
    if Counter::from_logical_key(text).is_some() {
        return Ok(Family::Counter);
    }
    let parts: Vec<&str> = text.split('\0').collect();
    let arity = |n: usize, family: Family| -> Result<(), Mismatch> {
        if parts.len() == n {
            Ok(())
        } else {
            Err(Mismatch::new(
                "key",
                format!("{n} NUL-separated components for `{}`", family.as_str()),
                format!("{} components", parts.len()),
            ))
        }
    };
    let family = match parts[0] {
        "mesh-node" => Family::MeshNode,
        "owner-lease" => Family::OwnerLease,
        "client-server" => Family::ClientServer,
        "fanout-publisher" => Family::FanoutPublisher,
        "authority" => Family::Authority,
        "creation-terminal" => Family::CreationTerminal,
        "node-capacity" => Family::NodeCapacity,
        "location-index" => Family::LocationIndex,
        "creation-deadline" => Family::CreationDeadline,
        "capacity-reservation" => Family::CapacityReservation,
        "mesh-change" => Family::MeshChange,
        "client-server-change" => Family::ClientServerChange,
        "fanout-publisher-change" => Family::FanoutPublisherChange,
        "spot-per-actor-move" => Family::PerActorMove,
        "spot-inventory" => Family::SpotInventory,
        "run-objects" => Family::RunObjects,
        _ => {
            return Err(Mismatch::new(
                "key",
                "a logical key of a family the runtime writes",
                format!("\"{}\"", show_bytes(key)),
            ));
        }
    };
    match family {
        Family::MeshNode | Family::NodeCapacity => {
            arity(3, family)?;
            mesh(1, parts[1])?;
            rid(2, parts[2])?;
        }
        Family::OwnerLease => {
            arity(2, family)?;
            OwnerId::new(parts[1])
                .map_err(|_| bad(1, "an OwnerId (UTF-8, 1..=255 bytes, no NUL)", parts[1]))?;
        }
        Family::ClientServer | Family::FanoutPublisher => {
            arity(3, family)?;
            channel(1, parts[1])?;
            rid(2, parts[2])?;
        }
        Family::Authority => {
            arity(3, family)?;
            if !matches!(parts[1], "actor" | "spot") {
                return Err(bad(1, "actor or spot", parts[1]));
            }
            id(2, parts[2])?;
        }
        Family::CreationTerminal => {
            arity(4, family)?;
            rid(1, parts[1])?;
            canonical_decimal(parts[2].as_bytes())
                .ok_or_else(|| bad(2, "canonical decimal in 1..=2^63-1", parts[2]))?;
            hex32(3, parts[3], true)?;
        }
        Family::LocationIndex => {
            arity(4, family)?;
            kind(1, parts[1])?;
            zlink_codec::StableType::new(parts[2])
                .map_err(|_| bad(2, "a stable type (UTF-8, 1..=255 bytes, no NUL)", parts[2]))?;
            id(3, parts[3])?;
        }
        Family::CreationDeadline => {
            arity(3, family)?;
            kind(1, parts[1])?;
            id(2, parts[2])?;
        }
        Family::CapacityReservation => {
            arity(2, family)?;
            hex32(1, parts[1], false)?;
        }
        Family::MeshChange => {
            arity(2, family)?;
            mesh(1, parts[1])?;
        }
        Family::ClientServerChange | Family::FanoutPublisherChange => {
            arity(2, family)?;
            channel(1, parts[1])?;
        }
        Family::PerActorMove | Family::SpotInventory => {
            arity(2, family)?;
            id(1, parts[1])?;
        }
        Family::RunObjects => {
            OwnerId::new(parts[1])
                .map_err(|_| bad(1, "an OwnerId (UTF-8, 1..=255 bytes, no NUL)", parts[1]))?;
            let generation = parts.get(2).copied().unwrap_or_default();
            canonical_decimal(generation.as_bytes())
                .ok_or_else(|| bad(2, "canonical decimal in 1..=2^63-1", generation))?;
            if parts.len() == 4 {
                if parts[3] != "run" {
                    return Err(bad(3, "run (the run's marker)", parts[3]));
                }
            } else {
                arity(5, family)?;
                if !matches!(parts[3], "actor" | "spot") {
                    return Err(bad(3, "actor or spot", parts[3]));
                }
                id(4, parts[4])?;
            }
        }
        Family::Counter => {}
    }
    Ok(family)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_key_form_classifies() {
        for (key, family) in [
            ("mesh-node\0main\x0001020304", Family::MeshNode),
            ("owner-lease\0owner-a", Family::OwnerLease),
            ("client-server\0chat\0ff", Family::ClientServer),
            ("fanout-publisher\0news\x000a", Family::FanoutPublisher),
            ("authority\0actor\0user:1", Family::Authority),
            (
                "creation-terminal\x0001020304\x007\x00000000000000002a0000000000000001",
                Family::CreationTerminal,
            ),
            ("zlink:v11:object-counter", Family::Counter),
            ("node-capacity\0main\x0001", Family::NodeCapacity),
            (
                "location-index\0userSpot\0chat\0room",
                Family::LocationIndex,
            ),
            ("creation-deadline\0actor\0a", Family::CreationDeadline),
            (
                "capacity-reservation\x00000000000000000000000000000000ff",
                Family::CapacityReservation,
            ),
            ("mesh-change\0main", Family::MeshChange),
            (
                "run-objects\0owner-a\x007\0actor\0user:1",
                Family::RunObjects,
            ),
            ("run-objects\0owner-a\x007\0run", Family::RunObjects),
            ("client-server-change\0chat", Family::ClientServerChange),
            (
                "fanout-publisher-change\0news",
                Family::FanoutPublisherChange,
            ),
            ("spot-per-actor-move\0room", Family::PerActorMove),
            ("spot-inventory\0room", Family::SpotInventory),
        ] {
            assert_eq!(classify(key.as_bytes()), Ok(family), "{key:?}");
        }
    }

    #[test]
    fn bad_components_name_their_position() {
        for (key, field) in [
            ("mesh-node\0main\0ABCD", "key[2]"),
            ("authority\0entry\0x", "key[1]"),
            ("authority\0actor\0", "key[2]"),
            ("mesh-node\0main", "key"),
            (
                "creation-terminal\x0001\x0007\x00000000000000002a0000000000000001",
                "key[2]",
            ),
            (
                "creation-terminal\x0001\x007\x0000000000000000000000000000000000",
                "key[3]",
            ),
            ("something-else\0x", "key"),
            ("run-objects\0owner-a", "key[2]"),
            ("run-objects\0owner-a\x0007\0run", "key[2]"),
            ("run-objects\0owner-a\x007\0runs", "key[3]"),
            ("run-objects\0owner-a\x007\0entry\0x", "key[3]"),
            ("run-objects\0owner-a\x007\0actor", "key[3]"),
            ("run-objects\0owner-a\x007\0actor\0x\0y", "key"),
        ] {
            assert_eq!(
                classify(key.as_bytes()).map_err(|m| m.field),
                Err(field.to_owned()),
                "{key:?}"
            );
        }
        assert_eq!(
            classify(b"owner-lease\0\xff").map_err(|m| m.field),
            Err("key".to_owned())
        );
    }
}
