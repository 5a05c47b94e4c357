//! An authority record as read: the handle every authority operation starts from.

use std::sync::Arc;

use zlink_codec::records::{AllocationState, AuthorityRecord};
use zlink_store_spi::{StoreTime, StoreVersion};

use super::super::capacity::CapacityBundle;
use super::super::error::{LocationError, RecordName};
use super::super::generation::{AuthorityOwnerGeneration, ObjectGeneration, OwnerLeaseGeneration};
use super::super::identity::{HostRun, NodeKey, ObjectId, ObjectKind, StableType};

/// One authority record as read, with the version that conditions any change of it (cheap to
/// clone). Runtime-internal: the record and its StoreVersion never reach applications (spec
/// 21 §2.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorityHandle(Arc<HandleInner>);

#[derive(Debug, PartialEq, Eq)]
struct HandleInner {
    id: ObjectId,
    record: AuthorityRecord,
    version: StoreVersion,
    bundle: CapacityBundle,
    object_generation: ObjectGeneration,
    authority_owner_generation: AuthorityOwnerGeneration,
    owner: HostRun,
}

impl AuthorityHandle {
    pub(crate) fn new(
        id: ObjectId,
        record: AuthorityRecord,
        version: StoreVersion,
    ) -> Result<Self, LocationError> {
        let corrupt = || LocationError::corrupt(RecordName::Authority);
        let bundle = CapacityBundle::from_record(&record.allocation.capacity)?;
        let object_generation =
            ObjectGeneration::from_codec(record.object_generation).ok_or_else(corrupt)?;
        let authority_owner_generation =
            AuthorityOwnerGeneration::from_codec(record.authority_owner_generation)
                .ok_or_else(corrupt)?;
        let owner = HostRun {
            owner_id: record.owner_id.clone(),
            lease_generation: OwnerLeaseGeneration::from_codec(record.owner_lease_generation)
                .ok_or_else(corrupt)?,
        };
        Ok(AuthorityHandle(Arc::new(HandleInner {
            id,
            record,
            version,
            bundle,
            object_generation,
            authority_owner_generation,
            owner,
        })))
    }

    pub(crate) fn decode(
        id: ObjectId,
        bytes: &[u8],
        version: StoreVersion,
    ) -> Result<Self, LocationError> {
        let record =
            AuthorityRecord::decode(bytes).map_err(LocationError::decode(RecordName::Authority))?;
        Self::new(id, record, version)
    }

    /// The global id.
    pub fn id(&self) -> &ObjectId {
        &self.0.id
    }

    /// The object kind.
    pub fn kind(&self) -> ObjectKind {
        self.0.record.allocation.object_kind
    }

    /// The stable type.
    pub fn stable_type(&self) -> &StableType {
        &self.0.record.allocation.stable_type
    }

    /// `reserved` or `active`.
    pub fn state(&self) -> AllocationState {
        self.0.record.allocation.state
    }

    /// The ObjectGeneration.
    pub fn object_generation(&self) -> ObjectGeneration {
        self.0.object_generation
    }

    /// The AuthorityOwnerGeneration.
    pub fn authority_owner_generation(&self) -> AuthorityOwnerGeneration {
        self.0.authority_owner_generation
    }

    /// The current owner's host run.
    pub fn owner(&self) -> &HostRun {
        &self.0.owner
    }

    /// The node the allocation is on.
    pub fn node(&self) -> NodeKey {
        NodeKey {
            mesh: self.0.record.allocation.descriptor.mesh_name.clone(),
            routing_id: self.0.record.allocation.descriptor.routing_id.clone(),
        }
    }

    /// The capacity the allocation holds.
    pub fn bundle(&self) -> &CapacityBundle {
        &self.0.bundle
    }

    /// The framework-internal payload.
    pub fn payload(&self) -> &[u8] {
        &self.0.record.payload
    }

    /// The decoded authority record.
    pub fn record(&self) -> &AuthorityRecord {
        &self.0.record
    }

    /// The Store version the record was read at.
    pub fn version(&self) -> &StoreVersion {
        &self.0.version
    }
}

/// The result of reading an authority row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthorityRead {
    /// No row: only the Store's clock; no generation or version was created.
    Missing {
        /// StoreNow of the read.
        store_now: StoreTime,
    },
    /// The current row.
    Found {
        /// The record and its version.
        handle: AuthorityHandle,
        /// StoreNow of the read.
        store_now: StoreTime,
    },
}
