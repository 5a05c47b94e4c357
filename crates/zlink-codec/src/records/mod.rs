//! The five canonical store records of spec 21 §3.4.
//!
//! Each record encodes to the exact canonical JSON the golden fixture pins (member order as
//! the fixture, no whitespace, generations/revisions/timestamps as decimal JSON strings,
//! magnitudes as JSON numbers, nulls written out) and decodes strictly.
//!
//! The descriptor records ([`MeshNodeRecord`], [`ClientServerRecord`],
//! [`FanoutPublisherRecord`]) hold `ownerId` / `leaseGeneration` / `descriptorRevision` once;
//! the encoder writes them both at the top level and inside `descriptor`, and the decoder
//! rejects a record whose two copies differ.

mod authority;
mod descriptors;
mod enums;

pub use authority::{
    Allocation, AllocationCapacity, AuthorityRecord, DescriptorRef, PendingCreation, SpotTypeSlots,
};
pub use descriptors::{
    ActivationConcurrency, ClientServerDescriptor, Descriptor, DescriptorCapacity,
    DescriptorRecord, FanoutPublisherDescriptor, MeshNodeDescriptor, ObjectCapability, SlotUsage,
    SpotTypeUsage,
};
pub use enums::{AllocationState, HostState, ObjectKind, ObjectRole, RelocationPolicy};

use crate::Generation;
use crate::error::CodecError;
use crate::ids::OwnerId;
use crate::json::{self, Fields, Json, ObjWriter};
use crate::keys::LogicalKey;

/// A MeshNode descriptor record.
pub type MeshNodeRecord = DescriptorRecord<MeshNodeDescriptor>;
/// A ClientServer server descriptor record.
pub type ClientServerRecord = DescriptorRecord<ClientServerDescriptor>;
/// A fanout publisher descriptor record.
pub type FanoutPublisherRecord = DescriptorRecord<FanoutPublisherDescriptor>;

/// The record JSON structure version this implementation reads and writes.
pub const RECORD_VERSION: u64 = 1;

/// Largest encoded record (and descriptor) in bytes: 1 MiB.
pub const MAX_RECORD_BYTES: usize = 1_048_576;

/// Largest number of entries of `objectCapabilities` and of `spotTypes`.
pub const MAX_LIST_ENTRIES: usize = 1_024;

/// Largest weight (`channelWeights` values, `placementWeight`, `weight`).
pub const MAX_WEIGHT: u16 = 10_000;

/// Largest slot count, limit or usage (2^31 − 1).
pub const MAX_SLOTS: u32 = i32::MAX as u32;

/// Largest decimal timestamp / application version (2^63 − 1).
pub const MAX_DECIMAL: u64 = crate::ids::MAX_U63;

/// An owner lease record: `{recordVersion, ownerId, leaseGeneration}`. Its expiry is the
/// store row's retention, not a field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerLeaseRecord {
    /// The host run's owner id.
    pub owner_id: OwnerId,
    /// The host run's lease generation.
    pub lease_generation: Generation,
}

impl OwnerLeaseRecord {
    /// The record's logical key: `owner-lease\0{OwnerId}`.
    pub fn key(&self) -> LogicalKey {
        LogicalKey::owner_lease(&self.owner_id)
    }

    /// Encodes the canonical JSON bytes.
    pub fn encode(&self) -> Result<Vec<u8>, CodecError> {
        let mut out = String::with_capacity(96);
        ObjWriter::new(&mut out)
            .num("recordVersion", RECORD_VERSION)
            .str("ownerId", self.owner_id.as_str())
            .dec_str("leaseGeneration", self.lease_generation.get())
            .end();
        Ok(out.into_bytes())
    }

    /// Decodes and validates canonical JSON bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let mut f = open_record(bytes)?;
        let owner_id = owner_id(&mut f, "ownerId")?;
        let lease_generation = f.generation("leaseGeneration")?;
        f.finish()?;
        Ok(Self {
            owner_id,
            lease_generation,
        })
    }
}

/// Checks the size, parses, and checks `recordVersion` before anything else.
pub(crate) fn open_record(bytes: &[u8]) -> Result<Fields, CodecError> {
    check_record_size(bytes.len())?;
    let v = json::parse(bytes)?;
    let mut f = Fields::new("", v)?;
    match f.take("recordVersion")? {
        Json::Number(n) if n == "1" => Ok(f),
        Json::Number(n) => Err(CodecError::UnsupportedRecordVersion { found: n }),
        Json::String(s) => Err(CodecError::UnsupportedRecordVersion {
            found: format!("{s:?}"),
        }),
        other => Err(CodecError::UnsupportedRecordVersion {
            found: other.type_name().to_owned(),
        }),
    }
}

pub(crate) fn check_record_size(len: usize) -> Result<(), CodecError> {
    if len > MAX_RECORD_BYTES {
        return Err(CodecError::TooLarge {
            what: "record",
            actual: len,
            max: MAX_RECORD_BYTES,
        });
    }
    Ok(())
}

pub(crate) fn owner_id(f: &mut Fields, name: &str) -> Result<OwnerId, CodecError> {
    typed(f, name, OwnerId::new)
}

/// Reads a string field through a validating constructor, reporting the field path.
pub(crate) fn typed<T>(
    f: &mut Fields,
    name: &str,
    parse: impl FnOnce(String) -> Result<T, CodecError>,
) -> Result<T, CodecError> {
    let s = f.string(name)?;
    parse(s).map_err(|e| CodecError::invalid_field(f.path(name), e.to_string()))
}

/// Reads a closed-set string field.
pub(crate) fn closed<T>(
    f: &mut Fields,
    name: &str,
    parse: fn(&str) -> Result<T, CodecError>,
) -> Result<T, CodecError> {
    typed(f, name, |s| parse(&s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease() -> OwnerLeaseRecord {
        OwnerLeaseRecord {
            owner_id: OwnerId::new("owner-a").unwrap(),
            lease_generation: Generation::new(5).unwrap(),
        }
    }

    #[test]
    fn owner_lease_encodes_the_fixture_bytes() {
        assert_eq!(
            lease().encode().unwrap(),
            br#"{"recordVersion":1,"ownerId":"owner-a","leaseGeneration":"5"}"#
        );
    }

    #[test]
    fn unknown_record_version_is_an_explicit_error() {
        for v in ["2", "0", "1.0", "\"1\"", "null"] {
            let bytes =
                format!(r#"{{"recordVersion":{v},"ownerId":"owner-a","leaseGeneration":"5"}}"#);
            let e = OwnerLeaseRecord::decode(bytes.as_bytes()).unwrap_err();
            assert!(
                matches!(e, CodecError::UnsupportedRecordVersion { .. }),
                "{v}: {e}"
            );
            assert_eq!(e.kind(), crate::CodecErrorKind::UnsupportedVersion);
        }
    }

    #[test]
    fn record_version_is_checked_before_other_fields() {
        let e = OwnerLeaseRecord::decode(br#"{"recordVersion":2,"future":true}"#).unwrap_err();
        assert!(matches!(e, CodecError::UnsupportedRecordVersion { .. }));
    }

    #[test]
    fn owner_lease_rejects_unknown_missing_and_bad_fields() {
        assert!(matches!(
            OwnerLeaseRecord::decode(
                br#"{"recordVersion":1,"ownerId":"a","leaseGeneration":"5","x":1}"#
            ),
            Err(CodecError::UnknownField { .. })
        ));
        assert!(matches!(
            OwnerLeaseRecord::decode(br#"{"recordVersion":1,"ownerId":"a"}"#),
            Err(CodecError::MissingField { .. })
        ));
        assert!(
            OwnerLeaseRecord::decode(br#"{"recordVersion":1,"ownerId":"a","leaseGeneration":5}"#)
                .is_err()
        );
        assert!(
            OwnerLeaseRecord::decode(br#"{"recordVersion":1,"ownerId":"a","leaseGeneration":"0"}"#)
                .is_err()
        );
        assert!(
            OwnerLeaseRecord::decode(br#"{"recordVersion":1,"ownerId":"","leaseGeneration":"1"}"#)
                .is_err()
        );
    }

    #[test]
    fn decode_accepts_any_member_order() {
        let r = OwnerLeaseRecord::decode(
            br#"{"leaseGeneration":"5","ownerId":"owner-a","recordVersion":1}"#,
        )
        .unwrap();
        assert_eq!(r, lease());
    }

    #[test]
    fn record_over_one_mib_is_rejected_before_parsing() {
        let big = vec![b' '; MAX_RECORD_BYTES + 1];
        assert!(matches!(
            OwnerLeaseRecord::decode(&big),
            Err(CodecError::TooLarge { .. })
        ));
    }
}
