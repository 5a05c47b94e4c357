//! MeshNode, ClientServer server and fanout publisher descriptor records.

use std::collections::BTreeMap;

use super::enums::{HostState, ObjectKind, ObjectRole, RelocationPolicy};
use super::{
    MAX_DECIMAL, MAX_LIST_ENTRIES, MAX_RECORD_BYTES, MAX_SLOTS, MAX_WEIGHT, RECORD_VERSION, closed,
    open_record, owner_id, typed,
};
use crate::error::CodecError;
use crate::ids::{ChannelName, Generation, MeshName, ObjectId, OwnerId, RoutingId, StableType};
use crate::json::{Fields, Json, ObjWriter, write_array};
use crate::keys::LogicalKey;

mod sealed {
    pub trait Sealed {}
}

/// A descriptor body that a [`DescriptorRecord`] carries (sealed: the three spec descriptors).
pub trait Descriptor: sealed::Sealed + Clone + PartialEq + std::fmt::Debug {
    /// The record's logical key.
    fn key(&self) -> LogicalKey;
    /// Checks every bound and cross-field rule.
    fn validate(&self) -> Result<(), CodecError>;
}

/// The crate-private JSON side of a descriptor.
trait DescriptorCodec: Descriptor {
    fn write(&self, w: &mut ObjWriter<'_>, copies: &Copies<'_>);
    fn read(f: &mut Fields) -> Result<Self, CodecError>;
}

/// The three values written both at the record's top level and inside `descriptor`.
struct Copies<'a> {
    owner_id: &'a OwnerId,
    lease_generation: Generation,
    descriptor_revision: Generation,
}

impl Copies<'_> {
    fn write_revision(&self, w: &mut ObjWriter<'_>) {
        w.dec_str("descriptorRevision", self.descriptor_revision.get());
    }

    fn write_owner(&self, w: &mut ObjWriter<'_>) {
        w.str("ownerId", self.owner_id.as_str())
            .dec_str("leaseGeneration", self.lease_generation.get());
    }
}

/// A published descriptor record: `{recordVersion, ownerId, leaseGeneration,
/// descriptorRevision, descriptor}`.
#[derive(Debug, Clone, PartialEq)]
pub struct DescriptorRecord<D> {
    /// The publishing host run's owner id (also written inside `descriptor`).
    pub owner_id: OwnerId,
    /// The publishing host run's lease generation (also written inside `descriptor`).
    pub lease_generation: Generation,
    /// The descriptor revision (also written inside `descriptor`).
    pub descriptor_revision: Generation,
    /// The descriptor content.
    pub descriptor: D,
}

macro_rules! record_methods {
    ($d:ty) => {
        impl DescriptorRecord<$d> {
            /// The record's logical key (derived from the descriptor).
            pub fn key(&self) -> LogicalKey {
                self.descriptor.key()
            }

            /// Encodes the canonical JSON bytes; fails if a bound is broken (including the
            /// 1 MiB descriptor size: a descriptor is never truncated or split).
            pub fn encode(&self) -> Result<Vec<u8>, CodecError> {
                encode_record(self)
            }

            /// Decodes and validates canonical JSON bytes.
            pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
                decode_record(bytes)
            }
        }
    };
}

record_methods!(MeshNodeDescriptor);
record_methods!(ClientServerDescriptor);
record_methods!(FanoutPublisherDescriptor);

fn encode_record<D: DescriptorCodec>(r: &DescriptorRecord<D>) -> Result<Vec<u8>, CodecError> {
    r.descriptor.validate()?;
    let copies = Copies {
        owner_id: &r.owner_id,
        lease_generation: r.lease_generation,
        descriptor_revision: r.descriptor_revision,
    };
    let mut out = String::with_capacity(512);
    let mut w = ObjWriter::new(&mut out);
    w.num("recordVersion", RECORD_VERSION);
    copies.write_owner(&mut w);
    copies.write_revision(&mut w);
    w.with("descriptor", |out| {
        let mut d = ObjWriter::new(out);
        r.descriptor.write(&mut d, &copies);
        d.end();
    });
    w.end();
    if out.len() > MAX_RECORD_BYTES {
        return Err(CodecError::TooLarge {
            what: "descriptor record",
            actual: out.len(),
            max: MAX_RECORD_BYTES,
        });
    }
    Ok(out.into_bytes())
}

fn decode_record<D: DescriptorCodec>(bytes: &[u8]) -> Result<DescriptorRecord<D>, CodecError> {
    let mut f = open_record(bytes)?;
    let owner_id = self::owner_id(&mut f, "ownerId")?;
    let lease_generation = f.generation("leaseGeneration")?;
    let descriptor_revision = f.generation("descriptorRevision")?;
    let mut d = f.object("descriptor")?;
    f.finish()?;
    let descriptor = D::read(&mut d)?;
    // The in-descriptor copies.
    if self::owner_id(&mut d, "ownerId")? != owner_id {
        return Err(CodecError::CopyMismatch { field: "ownerId" });
    }
    if d.generation("leaseGeneration")? != lease_generation {
        return Err(CodecError::CopyMismatch {
            field: "leaseGeneration",
        });
    }
    if d.generation("descriptorRevision")? != descriptor_revision {
        return Err(CodecError::CopyMismatch {
            field: "descriptorRevision",
        });
    }
    d.finish()?;
    descriptor.validate()?;
    Ok(DescriptorRecord {
        owner_id,
        lease_generation,
        descriptor_revision,
        descriptor,
    })
}

fn check_weight(field: &str, w: u16) -> Result<(), CodecError> {
    if w > MAX_WEIGHT {
        return Err(CodecError::invalid_field(
            field,
            format!("{w} is above {MAX_WEIGHT}"),
        ));
    }
    Ok(())
}

fn check_slots(field: &str, v: u32) -> Result<(), CodecError> {
    if v > MAX_SLOTS {
        return Err(CodecError::invalid_field(
            field,
            format!("{v} is above 2^31-1"),
        ));
    }
    Ok(())
}

fn check_decimal(field: &str, v: u64) -> Result<(), CodecError> {
    if v > MAX_DECIMAL {
        return Err(CodecError::invalid_field(
            field,
            format!("{v} is above 2^63-1"),
        ));
    }
    Ok(())
}

fn check_entries(field: &str, n: usize) -> Result<(), CodecError> {
    if n > MAX_LIST_ENTRIES {
        return Err(CodecError::TooManyEntries {
            field: field.to_owned(),
            actual: n,
            max: MAX_LIST_ENTRIES,
        });
    }
    Ok(())
}

fn check_spot_kind(field: &str, kind: ObjectKind) -> Result<(), CodecError> {
    if !kind.is_spot() {
        return Err(CodecError::invalid_field(
            field,
            "a spot type must be a Spot kind",
        ));
    }
    Ok(())
}

fn slots(f: &mut Fields, name: &str) -> Result<u32, CodecError> {
    // MAX_SLOTS fits u32.
    f.uint(name, u64::from(MAX_SLOTS)).map(|v| v as u32)
}

fn weight(f: &mut Fields, name: &str) -> Result<u16, CodecError> {
    f.uint(name, u64::from(MAX_WEIGHT)).map(|v| v as u16)
}

fn object_fields(path: String, v: Json) -> Result<Fields, CodecError> {
    Fields::new(&path, v)
}

/// One registered object-kind placement capability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectCapability {
    /// The object kind.
    pub object_kind: ObjectKind,
    /// The registered stable type.
    pub stable_type: StableType,
    /// The relocation policy.
    pub policy: RelocationPolicy,
    /// Whether a snapshot adapter is registered.
    pub has_snapshot_adapter: bool,
    /// The per-type limit (0 = unlimited), `0..=2^31−1`.
    pub limit: u32,
}

/// `{active, reserved, limit}` slot usage (each `0..=2^31−1`; limit 0 = unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlotUsage {
    /// Slots in use.
    pub active: u32,
    /// Slots secured by in-progress operations.
    pub reserved: u32,
    /// Limit (0 = unlimited).
    pub limit: u32,
}

/// Usage of one Spot kind/stable type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpotTypeUsage {
    /// The Spot kind (`userSpot` or `instanceSpot`).
    pub object_kind: ObjectKind,
    /// The stable type.
    pub stable_type: StableType,
    /// Slots in use.
    pub active: u32,
    /// Slots secured by in-progress operations.
    pub reserved: u32,
    /// Limit (0 = unlimited).
    pub limit: u32,
}

/// The descriptor's capacity projection (a copy for operators; the authority rows are the
/// source of truth).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DescriptorCapacity {
    /// Actor slots.
    pub actors: SlotUsage,
    /// Spot slots (Entry Spot excluded).
    pub spots: SlotUsage,
    /// Per Spot kind/stable type usage (at most 1,024 entries).
    pub spot_types: Vec<SpotTypeUsage>,
}

/// Instance Spot factory concurrency `{active, limit}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ActivationConcurrency {
    /// Factories running.
    pub active: u32,
    /// Limit.
    pub limit: u32,
}

/// A MeshNode descriptor (derived from ZLinkMeshNodeDescriptor).
#[derive(Debug, Clone, PartialEq)]
pub struct MeshNodeDescriptor {
    /// The RouteMesh group name.
    pub mesh_name: MeshName,
    /// The node's RoutingId.
    pub routing_id: RoutingId,
    /// The current MeshNode run.
    pub lifecycle_generation: Generation,
    /// The advertised ROUTER endpoint.
    pub endpoint: String,
    /// The Entry Spot id; `None` unless the role is `server`.
    pub entry_spot_id: Option<ObjectId>,
    /// Selection weight per ClientServer channel (`0..=10000`); written sorted by name bytes.
    pub channel_weights: BTreeMap<ChannelName, u16>,
    /// The application deployment sequence number (`0..=2^63−1`).
    pub application_version: u64,
    /// Registered placement capabilities (at most 1,024).
    pub object_capabilities: Vec<ObjectCapability>,
    /// The object role.
    pub object_role: ObjectRole,
    /// Node-wide placement weight `0..=10000` (default 100).
    pub placement_weight: u16,
    /// The capacity projection.
    pub capacity: DescriptorCapacity,
    /// Instance Spot factory concurrency.
    pub activation_concurrency: ActivationConcurrency,
    /// Optional maintenance wave stable id.
    pub maintenance_wave: Option<String>,
    /// Running state.
    pub state: HostState,
    /// The identity that verifies the connecting peer.
    pub security_identity: String,
    /// Store time at update (Unix epoch ms, `0..=2^63−1`).
    pub updated_at_epoch_ms: u64,
}

impl sealed::Sealed for MeshNodeDescriptor {}

impl Descriptor for MeshNodeDescriptor {
    fn key(&self) -> LogicalKey {
        LogicalKey::mesh_node(&self.mesh_name, &self.routing_id)
    }

    fn validate(&self) -> Result<(), CodecError> {
        const P: &str = "descriptor";
        if self.object_role != ObjectRole::Server && self.entry_spot_id.is_some() {
            return Err(CodecError::invalid_field(
                "descriptor.entrySpotId",
                "must be null unless objectRole is server",
            ));
        }
        for (name, w) in &self.channel_weights {
            check_weight(&format!("{P}.channelWeights.{name}"), *w)?;
        }
        check_decimal("descriptor.applicationVersion", self.application_version)?;
        check_entries(
            "descriptor.objectCapabilities",
            self.object_capabilities.len(),
        )?;
        for c in &self.object_capabilities {
            check_slots("descriptor.objectCapabilities.limit", c.limit)?;
        }
        check_weight("descriptor.placementWeight", self.placement_weight)?;
        for (name, u) in [
            ("actors", &self.capacity.actors),
            ("spots", &self.capacity.spots),
        ] {
            check_slots(&format!("{P}.capacity.{name}.active"), u.active)?;
            check_slots(&format!("{P}.capacity.{name}.reserved"), u.reserved)?;
            check_slots(&format!("{P}.capacity.{name}.limit"), u.limit)?;
        }
        check_entries(
            "descriptor.capacity.spotTypes",
            self.capacity.spot_types.len(),
        )?;
        for t in &self.capacity.spot_types {
            check_spot_kind("descriptor.capacity.spotTypes.objectKind", t.object_kind)?;
            check_slots("descriptor.capacity.spotTypes.active", t.active)?;
            check_slots("descriptor.capacity.spotTypes.reserved", t.reserved)?;
            check_slots("descriptor.capacity.spotTypes.limit", t.limit)?;
        }
        check_slots(
            "descriptor.activationConcurrency.active",
            self.activation_concurrency.active,
        )?;
        check_slots(
            "descriptor.activationConcurrency.limit",
            self.activation_concurrency.limit,
        )?;
        check_decimal("descriptor.updatedAtEpochMs", self.updated_at_epoch_ms)
    }
}

impl DescriptorCodec for MeshNodeDescriptor {
    fn write(&self, w: &mut ObjWriter<'_>, copies: &Copies<'_>) {
        w.str("meshName", self.mesh_name.as_str())
            .str("routingIdHex", &self.routing_id.to_hex())
            .dec_str("lifecycleGeneration", self.lifecycle_generation.get());
        copies.write_revision(w);
        w.str("endpoint", &self.endpoint)
            .opt_str(
                "entrySpotId",
                self.entry_spot_id.as_ref().map(ObjectId::as_str),
            )
            .with("channelWeights", |out| {
                let mut m = ObjWriter::new(out);
                for (name, weight) in &self.channel_weights {
                    m.num(name.as_str(), u64::from(*weight));
                }
                m.end();
            })
            .dec_str("applicationVersion", self.application_version)
            .with("objectCapabilities", |out| {
                write_array(out, &self.object_capabilities, |out, c| {
                    ObjWriter::new(out)
                        .str("objectKind", c.object_kind.as_str())
                        .str("stableType", c.stable_type.as_str())
                        .str("policy", c.policy.as_str())
                        .bool("hasSnapshotAdapter", c.has_snapshot_adapter)
                        .num("limit", u64::from(c.limit))
                        .end();
                });
            })
            .str("objectRole", self.object_role.as_str())
            .num("placementWeight", u64::from(self.placement_weight))
            .with("capacity", |out| {
                let mut c = ObjWriter::new(out);
                for (name, u) in [
                    ("actors", &self.capacity.actors),
                    ("spots", &self.capacity.spots),
                ] {
                    c.with(name, |out| {
                        ObjWriter::new(out)
                            .num("active", u64::from(u.active))
                            .num("reserved", u64::from(u.reserved))
                            .num("limit", u64::from(u.limit))
                            .end();
                    });
                }
                c.with("spotTypes", |out| {
                    write_array(out, &self.capacity.spot_types, |out, t| {
                        ObjWriter::new(out)
                            .str("objectKind", t.object_kind.as_str())
                            .str("stableType", t.stable_type.as_str())
                            .num("active", u64::from(t.active))
                            .num("reserved", u64::from(t.reserved))
                            .num("limit", u64::from(t.limit))
                            .end();
                    });
                });
                c.end();
            })
            .with("activationConcurrency", |out| {
                ObjWriter::new(out)
                    .num("active", u64::from(self.activation_concurrency.active))
                    .num("limit", u64::from(self.activation_concurrency.limit))
                    .end();
            })
            .opt_str("maintenanceWave", self.maintenance_wave.as_deref())
            .str("state", self.state.as_str())
            .str("securityIdentity", &self.security_identity);
        copies.write_owner(w);
        w.dec_str("updatedAtEpochMs", self.updated_at_epoch_ms);
    }

    fn read(f: &mut Fields) -> Result<Self, CodecError> {
        let mesh_name = typed(f, "meshName", MeshName::new)?;
        let routing_id = typed(f, "routingIdHex", |s| RoutingId::from_hex(&s))?;
        let lifecycle_generation = f.generation("lifecycleGeneration")?;
        let endpoint = f.string("endpoint")?;
        let entry_spot_id = match f.opt_string("entrySpotId")? {
            None => None,
            Some(s) => Some(
                ObjectId::new(s)
                    .map_err(|e| CodecError::invalid_field(f.path("entrySpotId"), e.to_string()))?,
            ),
        };
        let mut channel_weights = BTreeMap::new();
        let weights = f.object("channelWeights")?;
        let weights_path = f.path("channelWeights");
        for (name, v) in weights.into_members() {
            let path = format!("{weights_path}.{name}");
            let channel = ChannelName::new(name)
                .map_err(|e| CodecError::invalid_field(&path, e.to_string()))?;
            let mut holder = Fields::new("", Json::Object(vec![("w".to_owned(), v)]))?;
            let w = weight(&mut holder, "w")
                .map_err(|e| CodecError::invalid_field(&path, e.to_string()))?;
            channel_weights.insert(channel, w);
        }
        let application_version = f.dec_str("applicationVersion", MAX_DECIMAL)?;
        let caps_path = f.path("objectCapabilities");
        let caps = f.array("objectCapabilities")?;
        check_entries(&caps_path, caps.len())?;
        let mut object_capabilities = Vec::with_capacity(caps.len());
        for (i, c) in caps.into_iter().enumerate() {
            let mut c = object_fields(format!("{caps_path}[{i}]"), c)?;
            object_capabilities.push(ObjectCapability {
                object_kind: closed(&mut c, "objectKind", ObjectKind::parse)?,
                stable_type: typed(&mut c, "stableType", StableType::new)?,
                policy: closed(&mut c, "policy", RelocationPolicy::parse)?,
                has_snapshot_adapter: c.bool("hasSnapshotAdapter")?,
                limit: slots(&mut c, "limit")?,
            });
            c.finish()?;
        }
        let object_role = closed(f, "objectRole", ObjectRole::parse)?;
        let placement_weight = weight(f, "placementWeight")?;
        let mut cap = f.object("capacity")?;
        let mut usage = |name: &str| -> Result<SlotUsage, CodecError> {
            let mut u = cap.object(name)?;
            let r = SlotUsage {
                active: slots(&mut u, "active")?,
                reserved: slots(&mut u, "reserved")?,
                limit: slots(&mut u, "limit")?,
            };
            u.finish()?;
            Ok(r)
        };
        let actors = usage("actors")?;
        let spots = usage("spots")?;
        let types_path = cap.path("spotTypes");
        let types = cap.array("spotTypes")?;
        check_entries(&types_path, types.len())?;
        let mut spot_types = Vec::with_capacity(types.len());
        for (i, t) in types.into_iter().enumerate() {
            let mut t = object_fields(format!("{types_path}[{i}]"), t)?;
            spot_types.push(SpotTypeUsage {
                object_kind: closed(&mut t, "objectKind", ObjectKind::parse)?,
                stable_type: typed(&mut t, "stableType", StableType::new)?,
                active: slots(&mut t, "active")?,
                reserved: slots(&mut t, "reserved")?,
                limit: slots(&mut t, "limit")?,
            });
            t.finish()?;
        }
        cap.finish()?;
        let mut ac = f.object("activationConcurrency")?;
        let activation_concurrency = ActivationConcurrency {
            active: slots(&mut ac, "active")?,
            limit: slots(&mut ac, "limit")?,
        };
        ac.finish()?;
        let maintenance_wave = f.opt_string("maintenanceWave")?;
        let state = closed(f, "state", HostState::parse)?;
        let security_identity = f.string("securityIdentity")?;
        let updated_at_epoch_ms = f.dec_str("updatedAtEpochMs", MAX_DECIMAL)?;
        Ok(Self {
            mesh_name,
            routing_id,
            lifecycle_generation,
            endpoint,
            entry_spot_id,
            channel_weights,
            application_version,
            object_capabilities,
            object_role,
            placement_weight,
            capacity: DescriptorCapacity {
                actors,
                spots,
                spot_types,
            },
            activation_concurrency,
            maintenance_wave,
            state,
            security_identity,
            updated_at_epoch_ms,
        })
    }
}

/// A ClientServer server descriptor (derived from ZLinkClientServerServerDescriptor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientServerDescriptor {
    /// The service channel name.
    pub channel_name: ChannelName,
    /// The server's RoutingId.
    pub server_routing_id: RoutingId,
    /// The current server run.
    pub lifecycle_generation: Generation,
    /// The advertised endpoint.
    pub endpoint: String,
    /// Selection weight `0..=10000` (default 100).
    pub weight: u16,
    /// Running state.
    pub state: HostState,
    /// The transport admission identity.
    pub security_identity: String,
    /// Store time at update (Unix epoch ms, `0..=2^63−1`).
    pub updated_at_epoch_ms: u64,
}

impl sealed::Sealed for ClientServerDescriptor {}

impl Descriptor for ClientServerDescriptor {
    fn key(&self) -> LogicalKey {
        LogicalKey::client_server(&self.channel_name, &self.server_routing_id)
    }

    fn validate(&self) -> Result<(), CodecError> {
        check_weight("descriptor.weight", self.weight)?;
        check_decimal("descriptor.updatedAtEpochMs", self.updated_at_epoch_ms)
    }
}

impl DescriptorCodec for ClientServerDescriptor {
    fn write(&self, w: &mut ObjWriter<'_>, copies: &Copies<'_>) {
        w.str("channelName", self.channel_name.as_str())
            .str("serverRoutingIdHex", &self.server_routing_id.to_hex())
            .dec_str("lifecycleGeneration", self.lifecycle_generation.get());
        copies.write_revision(w);
        w.str("endpoint", &self.endpoint)
            .num("weight", u64::from(self.weight))
            .str("state", self.state.as_str())
            .str("securityIdentity", &self.security_identity);
        copies.write_owner(w);
        w.dec_str("updatedAtEpochMs", self.updated_at_epoch_ms);
    }

    fn read(f: &mut Fields) -> Result<Self, CodecError> {
        Ok(Self {
            channel_name: typed(f, "channelName", ChannelName::new)?,
            server_routing_id: typed(f, "serverRoutingIdHex", |s| RoutingId::from_hex(&s))?,
            lifecycle_generation: f.generation("lifecycleGeneration")?,
            endpoint: f.string("endpoint")?,
            weight: weight(f, "weight")?,
            state: closed(f, "state", HostState::parse)?,
            security_identity: f.string("securityIdentity")?,
            updated_at_epoch_ms: f.dec_str("updatedAtEpochMs", MAX_DECIMAL)?,
        })
    }
}

/// A fanout publisher descriptor (the ClientServer fields minus `weight`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FanoutPublisherDescriptor {
    /// The fanout channel name.
    pub channel_name: ChannelName,
    /// The publisher's RoutingId.
    pub publisher_routing_id: RoutingId,
    /// The current publisher run.
    pub lifecycle_generation: Generation,
    /// The advertised PUB endpoint.
    pub endpoint: String,
    /// Running state.
    pub state: HostState,
    /// The connection admission identity.
    pub security_identity: String,
    /// Store time at update (Unix epoch ms, `0..=2^63−1`).
    pub updated_at_epoch_ms: u64,
}

impl sealed::Sealed for FanoutPublisherDescriptor {}

impl Descriptor for FanoutPublisherDescriptor {
    fn key(&self) -> LogicalKey {
        LogicalKey::fanout_publisher(&self.channel_name, &self.publisher_routing_id)
    }

    fn validate(&self) -> Result<(), CodecError> {
        check_decimal("descriptor.updatedAtEpochMs", self.updated_at_epoch_ms)
    }
}

impl DescriptorCodec for FanoutPublisherDescriptor {
    fn write(&self, w: &mut ObjWriter<'_>, copies: &Copies<'_>) {
        w.str("channelName", self.channel_name.as_str())
            .str("publisherRoutingIdHex", &self.publisher_routing_id.to_hex())
            .dec_str("lifecycleGeneration", self.lifecycle_generation.get());
        copies.write_revision(w);
        w.str("endpoint", &self.endpoint)
            .str("state", self.state.as_str())
            .str("securityIdentity", &self.security_identity);
        copies.write_owner(w);
        w.dec_str("updatedAtEpochMs", self.updated_at_epoch_ms);
    }

    fn read(f: &mut Fields) -> Result<Self, CodecError> {
        Ok(Self {
            channel_name: typed(f, "channelName", ChannelName::new)?,
            publisher_routing_id: typed(f, "publisherRoutingIdHex", |s| RoutingId::from_hex(&s))?,
            lifecycle_generation: f.generation("lifecycleGeneration")?,
            endpoint: f.string("endpoint")?,
            state: closed(f, "state", HostState::parse)?,
            security_identity: f.string("securityIdentity")?,
            updated_at_epoch_ms: f.dec_str("updatedAtEpochMs", MAX_DECIMAL)?,
        })
    }
}
