//! The authority record (spec 21 §3.2–§3.4).

use base64::Engine as _;
use base64::alphabet::STANDARD;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

use super::enums::{AllocationState, ObjectKind};
use super::{MAX_RECORD_BYTES, MAX_SLOTS, RECORD_VERSION, closed, open_record, owner_id, typed};
use crate::error::CodecError;
use crate::ids::{Generation, MeshName, ObjectId, OwnerId, RoutingId, StableType, lower_hex};
use crate::inline_ref;
use crate::json::{Fields, ObjWriter};
use crate::keys::{AuthorityKind, LogicalKey};

/// Standard base64 with `=` padding, strict on decode (canonical padding and trailing bits).
const PAYLOAD_B64: GeneralPurpose = GeneralPurpose::new(
    &STANDARD,
    GeneralPurposeConfig::new()
        .with_encode_padding(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
);

/// `{meshName, routingIdHex}`: the MeshNode an allocation targets (the shape of a MeshNode
/// descriptor key).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DescriptorRef {
    /// The mesh.
    pub mesh_name: MeshName,
    /// The node's RoutingId.
    pub routing_id: RoutingId,
}

impl DescriptorRef {
    /// The MeshNode descriptor's logical key.
    pub fn key(&self) -> LogicalKey {
        LogicalKey::mesh_node(&self.mesh_name, &self.routing_id)
    }
}

/// `{objectKind, stableType, count}`: the Spot kind/stable type slot an allocation secured.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SpotTypeSlots {
    /// The Spot kind (`userSpot` or `instanceSpot`).
    pub object_kind: ObjectKind,
    /// The stable type.
    pub stable_type: StableType,
    /// Slots, `0..=2^31−1`.
    pub count: u32,
}

/// `{actors, spots, spotType}`: the slots an allocation secured.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AllocationCapacity {
    /// Actor slots, `0..=2^31−1`.
    pub actors: u32,
    /// Spot slots, `0..=2^31−1`.
    pub spots: u32,
    /// `None` for an Actor; for a Spot, the Spot kind/stable type slots.
    pub spot_type: Option<SpotTypeSlots>,
}

/// Placement information of an authority row.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Allocation {
    /// `reserved` or `active`.
    pub state: AllocationState,
    /// The object kind.
    pub object_kind: ObjectKind,
    /// The stable type.
    pub stable_type: StableType,
    /// The target MeshNode.
    pub descriptor: DescriptorRef,
    /// The target MeshNode's lifecycleGeneration (CAS-checked against it).
    pub descriptor_lifecycle_generation: Generation,
    /// The slots this allocation secured.
    pub capacity: AllocationCapacity,
}

/// Creation-in-progress state.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PendingCreation {
    /// The reservation id.
    pub reservation_id: String,
    /// The creation request as an `inline-v1` content reference (kept as written: it is
    /// verified, with [`PendingCreation::verify_request`], by the node that runs the creation).
    pub request_content_reference: String,
    /// SHA-256 of the request bytes.
    pub request_sha256: [u8; 32],
    /// Size of the request bytes, `0..=1,048,576`.
    pub request_encoded_size: u32,
}

impl PendingCreation {
    /// Builds the pending creation of request bytes (reference, SHA-256 and size computed).
    pub fn for_request(
        reservation_id: impl Into<String>,
        request: &[u8],
    ) -> Result<Self, CodecError> {
        if request.len() > inline_ref::MAX_REQUEST_BYTES {
            return Err(CodecError::TooLarge {
                what: "creation request",
                actual: request.len(),
                max: inline_ref::MAX_REQUEST_BYTES,
            });
        }
        Ok(Self {
            reservation_id: reservation_id.into(),
            request_content_reference: inline_ref::encode(request),
            request_sha256: inline_ref::sha256(request),
            // Bounded to 1 MiB above.
            request_encoded_size: request.len() as u32,
        })
    }

    /// Decodes the reference and verifies it against `requestEncodedSize` and
    /// `requestSha256`. On error the factory must not run.
    pub fn verify_request(&self) -> Result<Vec<u8>, CodecError> {
        inline_ref::decode_verified(
            &self.request_content_reference,
            u64::from(self.request_encoded_size),
            &self.request_sha256,
        )
    }
}

/// An authority record: the current owner and placement of one Actor or Spot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AuthorityRecord {
    /// Framework-internal opaque bytes (standard base64 in JSON).
    pub payload: Vec<u8>,
    /// The object's current ObjectGeneration.
    pub object_generation: Generation,
    /// The AuthorityOwnerGeneration.
    pub authority_owner_generation: Generation,
    /// The current owner's OwnerId.
    pub owner_id: OwnerId,
    /// The current owner's LeaseGeneration.
    pub owner_lease_generation: Generation,
    /// Placement information.
    pub allocation: Allocation,
    /// Creation-in-progress state, if any.
    pub pending_creation: Option<PendingCreation>,
}

fn slots(f: &mut Fields, name: &str) -> Result<u32, CodecError> {
    // MAX_SLOTS fits u32.
    f.uint(name, u64::from(MAX_SLOTS)).map(|v| v as u32)
}

impl AuthorityRecord {
    /// The row's logical key: `authority\0{actor|spot}\0{Id}` (the segment follows the
    /// allocation's object kind).
    pub fn key(&self, id: &ObjectId) -> LogicalKey {
        LogicalKey::authority(self.authority_kind(), id)
    }

    /// `actor` or `spot`, from the allocation's object kind.
    pub fn authority_kind(&self) -> AuthorityKind {
        self.allocation.object_kind.authority_kind()
    }

    /// Checks every bound and cross-field rule.
    pub fn validate(&self) -> Result<(), CodecError> {
        let cap = &self.allocation.capacity;
        for (field, v) in [
            ("allocation.capacity.actors", cap.actors),
            ("allocation.capacity.spots", cap.spots),
        ] {
            if v > MAX_SLOTS {
                return Err(CodecError::invalid_field(field, "above 2^31-1"));
            }
        }
        match (&cap.spot_type, self.allocation.object_kind.is_spot()) {
            (None, false) => {}
            (Some(_), false) => {
                return Err(CodecError::invalid_field(
                    "allocation.capacity.spotType",
                    "must be null for an actor",
                ));
            }
            (None, true) => {
                return Err(CodecError::invalid_field(
                    "allocation.capacity.spotType",
                    "must be present for a Spot",
                ));
            }
            (Some(t), true) => {
                if !t.object_kind.is_spot() {
                    return Err(CodecError::invalid_field(
                        "allocation.capacity.spotType.objectKind",
                        "a spot type must be a Spot kind",
                    ));
                }
                if t.count > MAX_SLOTS {
                    return Err(CodecError::invalid_field(
                        "allocation.capacity.spotType.count",
                        "above 2^31-1",
                    ));
                }
            }
        }
        if let Some(p) = &self.pending_creation {
            if p.request_encoded_size as usize > inline_ref::MAX_REQUEST_BYTES {
                return Err(CodecError::invalid_field(
                    "pendingCreation.requestEncodedSize",
                    "above 1,048,576",
                ));
            }
        }
        Ok(())
    }

    /// Encodes the canonical JSON bytes.
    pub fn encode(&self) -> Result<Vec<u8>, CodecError> {
        self.validate()?;
        let a = &self.allocation;
        let mut out = String::with_capacity(400 + self.payload.len() * 4 / 3);
        ObjWriter::new(&mut out)
            .num("recordVersion", RECORD_VERSION)
            .with("payload", |out| {
                out.push('"');
                PAYLOAD_B64.encode_string(&self.payload, out);
                out.push('"');
            })
            .dec_str("objectGeneration", self.object_generation.get())
            .dec_str(
                "authorityOwnerGeneration",
                self.authority_owner_generation.get(),
            )
            .str("ownerId", self.owner_id.as_str())
            .dec_str("ownerLeaseGeneration", self.owner_lease_generation.get())
            .with("allocation", |out| {
                ObjWriter::new(out)
                    .str("state", a.state.as_str())
                    .str("objectKind", a.object_kind.as_str())
                    .str("stableType", a.stable_type.as_str())
                    .with("descriptor", |out| {
                        ObjWriter::new(out)
                            .str("meshName", a.descriptor.mesh_name.as_str())
                            .str("routingIdHex", &a.descriptor.routing_id.to_hex())
                            .end();
                    })
                    .dec_str(
                        "descriptorLifecycleGeneration",
                        a.descriptor_lifecycle_generation.get(),
                    )
                    .with("capacity", |out| {
                        let mut c = ObjWriter::new(out);
                        c.num("actors", u64::from(a.capacity.actors))
                            .num("spots", u64::from(a.capacity.spots));
                        match &a.capacity.spot_type {
                            None => c.raw("spotType", "null"),
                            Some(t) => c.with("spotType", |out| {
                                ObjWriter::new(out)
                                    .str("objectKind", t.object_kind.as_str())
                                    .str("stableType", t.stable_type.as_str())
                                    .num("count", u64::from(t.count))
                                    .end();
                            }),
                        };
                        c.end();
                    })
                    .end();
            })
            .with("pendingCreation", |out| match &self.pending_creation {
                None => out.push_str("null"),
                Some(p) => ObjWriter::new(out)
                    .str("reservationId", &p.reservation_id)
                    .str("requestContentReference", &p.request_content_reference)
                    .str("requestSha256", &lower_hex(&p.request_sha256))
                    .num("requestEncodedSize", u64::from(p.request_encoded_size))
                    .end(),
            })
            .end();
        if out.len() > MAX_RECORD_BYTES {
            return Err(CodecError::TooLarge {
                what: "authority record",
                actual: out.len(),
                max: MAX_RECORD_BYTES,
            });
        }
        Ok(out.into_bytes())
    }

    /// Decodes and validates canonical JSON bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let mut f = open_record(bytes)?;
        let payload_path = f.path("payload");
        let payload_text = f.string("payload")?;
        let payload = PAYLOAD_B64
            .decode(payload_text.as_bytes())
            .map_err(|_| CodecError::invalid_field(payload_path, "not canonical padded base64"))?;
        let object_generation = f.generation("objectGeneration")?;
        let authority_owner_generation = f.generation("authorityOwnerGeneration")?;
        let owner_id = owner_id(&mut f, "ownerId")?;
        let owner_lease_generation = f.generation("ownerLeaseGeneration")?;

        let mut a = f.object("allocation")?;
        let state = closed(&mut a, "state", AllocationState::parse)?;
        let object_kind = closed(&mut a, "objectKind", ObjectKind::parse)?;
        let stable_type = typed(&mut a, "stableType", StableType::new)?;
        let mut d = a.object("descriptor")?;
        let descriptor = DescriptorRef {
            mesh_name: typed(&mut d, "meshName", MeshName::new)?,
            routing_id: typed(&mut d, "routingIdHex", |s| RoutingId::from_hex(&s))?,
        };
        d.finish()?;
        let descriptor_lifecycle_generation = a.generation("descriptorLifecycleGeneration")?;
        let mut c = a.object("capacity")?;
        let actors = slots(&mut c, "actors")?;
        let spots = slots(&mut c, "spots")?;
        let spot_type = match c.opt_object("spotType")? {
            None => None,
            Some(mut t) => {
                let r = SpotTypeSlots {
                    object_kind: closed(&mut t, "objectKind", ObjectKind::parse)?,
                    stable_type: typed(&mut t, "stableType", StableType::new)?,
                    count: slots(&mut t, "count")?,
                };
                t.finish()?;
                Some(r)
            }
        };
        c.finish()?;
        a.finish()?;

        let pending_creation = match f.opt_object("pendingCreation")? {
            None => None,
            Some(mut p) => {
                let reservation_id = p.string("reservationId")?;
                let request_content_reference = p.string("requestContentReference")?;
                let sha_path = p.path("requestSha256");
                let sha_text = p.string("requestSha256")?;
                let request_sha256: [u8; 32] = crate::ids::decode_lower_hex(&sha_text)
                    .and_then(|v| v.try_into().ok())
                    .ok_or_else(|| {
                        CodecError::invalid_field(sha_path, "not 64 lowercase hex characters")
                    })?;
                let size = p.uint("requestEncodedSize", inline_ref::MAX_REQUEST_BYTES as u64)?;
                p.finish()?;
                Some(PendingCreation {
                    reservation_id,
                    request_content_reference,
                    request_sha256,
                    // Bounded to 1 MiB above.
                    request_encoded_size: size as u32,
                })
            }
        };
        f.finish()?;
        let record = Self {
            payload,
            object_generation,
            authority_owner_generation,
            owner_id,
            owner_lease_generation,
            allocation: Allocation {
                state,
                object_kind,
                stable_type,
                descriptor,
                descriptor_lifecycle_generation,
                capacity: AllocationCapacity {
                    actors,
                    spots,
                    spot_type,
                },
            },
            pending_creation,
        };
        record.validate()?;
        Ok(record)
    }
}
