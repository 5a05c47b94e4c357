//! Store keys. The runtime hands the Location Store the *logical key preimage* itself as the
//! opaque [`StoreKey`] (UTF-8, `\0`-separated, at most 1,024 bytes; `\0` is valid UTF-8). A
//! provider maps it to its physical layout; the official Redis provider stores it under
//! `{prefix}:{zlink-location-v3}:opaque:{sha256hex(preimage)}` with the preimage kept as the
//! member's `originalKey`, so scans by preimage prefix work on every provider.

use zlink_codec::{ChannelName, LogicalKey};
use zlink_store_spi::{ArgumentError, ScanPrefix, StoreKey};

use super::identity::{HostRun, MeshName, NodeKey, ObjectId, ObjectKind, StableType};

/// A runtime-private row: the rows the location runtime keeps beside the public records of
/// the codec's [`LogicalKey`] (spec 21 §3.4). Every private key is built here and nowhere else,
/// so two rows can never disagree on a layout. Components are `\0`-separated like the public
/// preimages; each is at most 255 bytes without NUL, so every key stays below 1,024 bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum PrivateKey<'a> {
    /// `node-capacity\0{MeshName}\0{hex(RoutingId)}`: a node's allocation row.
    NodeCapacity(&'a NodeKey),
    /// `location-index\0{objectKind}\0{stableType}\0{Id}`: the lookup index row of an object,
    /// written and removed in the same batch as its authority row.
    LocationIndex {
        /// The object kind.
        kind: ObjectKind,
        /// The stable type.
        stable_type: &'a StableType,
        /// The global id.
        id: &'a ObjectId,
    },
    /// `capacity-reservation\0{32 lowercase hex digits}`: relocation target capacity secured
    /// ahead of a NewOwner (spec 21 §8.1).
    CapacityReservation(u128),
    /// `creation-deadline\0{objectKind}\0{Id}`: the creation deadline and operation of a
    /// `Reserved` record (spec 21 §7), written in the Reserve batch and removed with the
    /// reservation (Commit, Abort, any delete of the Reserved record).
    CreationDeadline {
        /// The object kind.
        kind: ObjectKind,
        /// The global id.
        id: &'a ObjectId,
    },
    /// `mesh-change\0{MeshName}`: the descriptor change number of one mesh.
    MeshChange(&'a MeshName),
    /// `client-server-change\0{ChannelName}`.
    ClientServerChange(&'a ChannelName),
    /// `fanout-publisher-change\0{ChannelName}`.
    FanoutPublisherChange(&'a ChannelName),
    /// `run-objects\0{OwnerId}\0{LeaseGeneration}\0{actor|spot}\0{Id}`: the entry of one
    /// authority row in the per-run index of the run its record names (the authority key with
    /// its `authority\0` tag replaced by the run's prefix), written and removed in the same
    /// batch as every change of the record's owner run.
    RunObject {
        /// The run the record names.
        run: &'a HostRun,
        /// The object kind (the Spot kinds share one authority row, and one entry).
        kind: ObjectKind,
        /// The global id.
        id: &'a ObjectId,
    },
    /// `run-objects\0{OwnerId}\0{LeaseGeneration}\0run`: the marker of a run whose records
    /// are all indexed, written in the batch that acquires its lease.
    RunMarker(&'a HostRun),
}

/// The families of private rows, for prefix scans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PrivateFamily {
    /// Every node allocation row.
    NodeCapacity,
    /// Every relocation target capacity reservation.
    CapacityReservation,
}

impl PrivateFamily {
    fn tag(self) -> &'static str {
        match self {
            PrivateFamily::NodeCapacity => "node-capacity",
            PrivateFamily::CapacityReservation => "capacity-reservation",
        }
    }

    /// The scan prefix of the whole family (`{tag}\0`).
    pub(crate) fn prefix(self) -> ScanPrefix {
        ScanPrefix::new(format!("{}\0", self.tag())).unwrap_or_else(|_| unreachable!())
    }
}

impl PrivateKey<'_> {
    /// The opaque Store key.
    pub(crate) fn store_key(&self) -> Result<StoreKey, ArgumentError> {
        let joined = match self {
            PrivateKey::NodeCapacity(node) => [
                PrivateFamily::NodeCapacity.tag(),
                node.mesh.as_str(),
                &node.routing_id.to_hex(),
            ]
            .join("\0"),
            PrivateKey::LocationIndex {
                kind,
                stable_type,
                id,
            } => [
                LOCATION_INDEX,
                kind.as_str(),
                stable_type.as_str(),
                id.as_str(),
            ]
            .join("\0"),
            PrivateKey::CapacityReservation(id) => {
                format!("{}\0{id:032x}", PrivateFamily::CapacityReservation.tag())
            }
            PrivateKey::CreationDeadline { kind, id } => {
                [CREATION_DEADLINE, kind.as_str(), id.as_str()].join("\0")
            }
            PrivateKey::MeshChange(mesh) => format!("mesh-change\0{}", mesh.as_str()),
            PrivateKey::ClientServerChange(c) => format!("client-server-change\0{}", c.as_str()),
            PrivateKey::FanoutPublisherChange(c) => {
                format!("fanout-publisher-change\0{}", c.as_str())
            }
            PrivateKey::RunObject { run, kind, id } => {
                let auth = authority(*kind, id)?;
                // Every authority key starts with its tag (`authority\0`).
                let rest = auth.as_str().get(AUTHORITY_TAG.len()..).unwrap_or_default();
                format!("{}{rest}", run_prefix_text(run))
            }
            PrivateKey::RunMarker(run) => format!("{}{RUN_MARKER}", run_prefix_text(run)),
        };
        // The bound is checked, never assumed.
        StoreKey::new(joined)
    }
}

/// A codec logical key as a Store key (the preimage itself, see the module docs).
pub(crate) fn store_key(key: &LogicalKey) -> Result<StoreKey, ArgumentError> {
    StoreKey::new(key.as_str())
}

/// Runtime-private: a node's allocation row.
pub(crate) fn node_capacity(node: &NodeKey) -> Result<StoreKey, ArgumentError> {
    PrivateKey::NodeCapacity(node).store_key()
}

/// The Store key of an object's authority row: `authority\0{actor|spot}\0{Id}` (spec 22: the key
/// preimage is the logical key).
pub fn authority(kind: ObjectKind, id: &ObjectId) -> Result<StoreKey, ArgumentError> {
    store_key(&LogicalKey::authority(kind.authority_kind(), id))
}

/// The scan prefix of every authority row.
pub(crate) fn authority_prefix() -> ScanPrefix {
    ScanPrefix::new(zlink_codec::keys::prefix::authorities()).unwrap_or_else(|_| unreachable!())
}

/// The tag of the per-run index rows.
const RUN_OBJECTS: &str = "run-objects";
/// The last component of a run's marker row (never an authority kind).
const RUN_MARKER: &str = "run";
/// What every authority key starts with.
const AUTHORITY_TAG: &str = "authority\0";

/// `run-objects\0{OwnerId}\0{LeaseGeneration}\0`: the prefix of one run's index rows.
fn run_prefix_text(run: &HostRun) -> String {
    format!(
        "{RUN_OBJECTS}\0{}\0{}\0",
        run.owner_id.as_str(),
        run.lease_generation.get()
    )
}

/// Runtime-private: the per-run index entry of the authority row of `(kind, id)` under `run`.
pub(crate) fn run_object(
    run: &HostRun,
    kind: ObjectKind,
    id: &ObjectId,
) -> Result<StoreKey, ArgumentError> {
    PrivateKey::RunObject { run, kind, id }.store_key()
}

/// Runtime-private: the marker row of a run whose records are all in its index.
pub(crate) fn run_marker(run: &HostRun) -> Result<StoreKey, ArgumentError> {
    PrivateKey::RunMarker(run).store_key()
}

/// The scan prefix of one run's index rows (its entries and its marker).
pub(crate) fn run_objects_prefix(run: &HostRun) -> Result<ScanPrefix, ArgumentError> {
    ScanPrefix::new(run_prefix_text(run))
}

/// What a key under [`run_objects_prefix`]`(run)` is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunRow {
    /// The run's marker.
    Marker,
    /// The entry of this authority key.
    Entry(StoreKey),
}

/// Parses a key found under `run`'s prefix; `None` for a key of another shape.
pub(crate) fn parse_run_row(run: &HostRun, key: &StoreKey) -> Option<RunRow> {
    let rest = key.as_str().strip_prefix(run_prefix_text(run).as_str())?;
    if rest == RUN_MARKER {
        return Some(RunRow::Marker);
    }
    let authority = StoreKey::new(format!("{AUTHORITY_TAG}{rest}")).ok()?;
    match LogicalKey::parse(authority.as_str()) {
        Ok(zlink_codec::KeyParts::Authority { .. }) => Some(RunRow::Entry(authority)),
        _ => None,
    }
}

/// Runtime-private: the lookup index row of an object.
pub(crate) fn location_index(
    kind: ObjectKind,
    stable_type: &StableType,
    id: &ObjectId,
) -> Result<StoreKey, ArgumentError> {
    PrivateKey::LocationIndex {
        kind,
        stable_type,
        id,
    }
    .store_key()
}

/// The tag of the creation deadline rows.
const CREATION_DEADLINE: &str = "creation-deadline";

/// Runtime-private: the creation deadline row of a `Reserved` record.
pub(crate) fn creation_deadline(
    kind: ObjectKind,
    id: &ObjectId,
) -> Result<StoreKey, ArgumentError> {
    PrivateKey::CreationDeadline { kind, id }.store_key()
}

/// The tag of the lookup index rows.
const LOCATION_INDEX: &str = "location-index";

/// The scan prefix of the lookup index rows of one object kind (`location-index\0{kind}\0`),
/// or of one kind and stable type (`…\0{stableType}\0`).
pub(crate) fn location_index_prefix(
    kind: ObjectKind,
    stable_type: Option<&StableType>,
) -> Result<ScanPrefix, ArgumentError> {
    let mut p = format!("{LOCATION_INDEX}\0{}\0", kind.as_str());
    if let Some(t) = stable_type {
        p.push_str(t.as_str());
        p.push('\0');
    }
    ScanPrefix::new(p)
}

/// The (kind, stable type, id) of a lookup index key; `None` for any other key.
pub(crate) fn parse_location_index(key: &StoreKey) -> Option<(ObjectKind, StableType, ObjectId)> {
    let text = std::str::from_utf8(key.as_bytes()).ok()?;
    let mut parts = text.split('\0');
    if parts.next()? != LOCATION_INDEX {
        return None;
    }
    let kind = ObjectKind::parse(parts.next()?).ok()?;
    let stable_type = StableType::new(parts.next()?).ok()?;
    let id = ObjectId::new(parts.next()?).ok()?;
    parts.next().is_none().then_some((kind, stable_type, id))
}

/// Runtime-private: a relocation target capacity reservation.
pub(crate) fn capacity_reservation(reservation_id: u128) -> Result<StoreKey, ArgumentError> {
    PrivateKey::CapacityReservation(reservation_id).store_key()
}

/// The MeshNode descriptor row of a node.
#[cfg(test)]
pub(crate) fn mesh_node(node: &NodeKey) -> Result<StoreKey, ArgumentError> {
    store_key(&LogicalKey::mesh_node(&node.mesh, &node.routing_id))
}

/// The scan prefix of the MeshNode descriptors of one mesh: `mesh-node\0{MeshName}\0`.
pub(crate) fn mesh_node_prefix(mesh: &MeshName) -> Result<ScanPrefix, ArgumentError> {
    ScanPrefix::new(zlink_codec::keys::prefix::mesh_nodes_of(mesh))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::RoutingId;
    use zlink_codec::counter::Counter;

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
    fn location_index_keys_parse_back_and_match_their_prefixes() {
        let ty = StableType::new("chat").expect("type");
        let id = ObjectId::new("user:1").expect("id");
        let key = location_index(ObjectKind::UserSpot, &ty, &id).expect("key");
        assert_eq!(
            parse_location_index(&key),
            Some((ObjectKind::UserSpot, ty.clone(), id))
        );
        let by_kind = location_index_prefix(ObjectKind::UserSpot, None).expect("p");
        let by_type = location_index_prefix(ObjectKind::UserSpot, Some(&ty)).expect("p");
        let other_type = StableType::new("cha").expect("type");
        assert!(by_kind.matches(&key) && by_type.matches(&key));
        assert!(
            !location_index_prefix(ObjectKind::UserSpot, Some(&other_type))
                .expect("p")
                .matches(&key)
        );
        assert!(
            !location_index_prefix(ObjectKind::InstanceSpot, None)
                .expect("p")
                .matches(&key)
        );
        assert_eq!(
            parse_location_index(
                &authority(ObjectKind::Actor, &ObjectId::new("x").expect("id")).expect("k")
            ),
            None
        );
    }

    #[test]
    fn private_prefixes_never_cover_public_records_or_counters() {
        let mesh = MeshName::new("main").expect("mesh");
        let change = PrivateKey::MeshChange(&mesh).store_key().expect("key");
        assert!(!mesh_node_prefix(&mesh).expect("p").matches(&change));
        for c in [
            Counter::OwnerLease,
            Counter::Object,
            Counter::AuthorityOwner,
        ] {
            let counter = StoreKey::new(c.logical_key()).expect("counter key");
            assert!(!authority_prefix().matches(&counter));
            assert!(!PrivateFamily::NodeCapacity.prefix().matches(&counter));
            assert!(
                !PrivateFamily::CapacityReservation
                    .prefix()
                    .matches(&counter)
            );
        }
    }

    fn run(owner: &str, generation: u64) -> HostRun {
        HostRun {
            owner_id: crate::identity::OwnerId::new(owner).expect("owner"),
            lease_generation: crate::generation::OwnerLeaseGeneration::new(generation)
                .expect("generation"),
        }
    }

    #[test]
    fn run_index_keys_parse_back_to_their_authority_key_and_stay_in_their_run() {
        let r = run("host-a", 5);
        let id = ObjectId::new("user:42").expect("id");
        let entry = run_object(&r, ObjectKind::Actor, &id).expect("key");
        assert_eq!(
            entry.as_bytes(),
            b"run-objects\0host-a\x005\0actor\0user:42"
        );
        let prefix = run_objects_prefix(&r).expect("prefix");
        assert!(prefix.matches(&entry));
        assert_eq!(
            parse_run_row(&r, &entry),
            Some(RunRow::Entry(authority(ObjectKind::Actor, &id).expect("k")))
        );
        // The Spot kinds share one authority row, and so one entry.
        assert_eq!(
            run_object(&r, ObjectKind::UserSpot, &id).expect("k"),
            run_object(&r, ObjectKind::InstanceSpot, &id).expect("k")
        );
        let marker = run_marker(&r).expect("marker");
        assert!(prefix.matches(&marker));
        assert_eq!(parse_run_row(&r, &marker), Some(RunRow::Marker));
        // Another generation of the same owner (5 vs 50) and another owner never share it.
        for other in [run("host-a", 50), run("host-a", 6), run("host-ab", 5)] {
            assert!(!prefix.matches(&run_object(&other, ObjectKind::Actor, &id).expect("k")));
            assert!(!prefix.matches(&run_marker(&other).expect("k")));
            assert_eq!(parse_run_row(&r, &run_marker(&other).expect("k")), None);
        }
        assert!(!authority_prefix().matches(&entry));
        assert!(!PrivateFamily::NodeCapacity.prefix().matches(&entry));
    }

    #[test]
    fn the_longest_run_index_keys_fit_the_store_bound() {
        let r = run(&"x".repeat(255), zlink_codec::counter::MAX_ISSUED);
        let id = ObjectId::new("y".repeat(255)).expect("id");
        let entry = run_object(&r, ObjectKind::InstanceSpot, &id).expect("fits");
        assert_eq!(
            parse_run_row(&r, &entry),
            Some(RunRow::Entry(
                authority(ObjectKind::InstanceSpot, &id).expect("k")
            ))
        );
        assert!(run_marker(&r).is_ok());
    }
}
