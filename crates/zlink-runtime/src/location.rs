//! The location vocabulary an application configures and reads: the location options and their
//! relocation settings, identities, generations, capacity limits, the admission state and the
//! operational query types. The location core itself is the `zlink-location` crate; this module
//! re-exports the part of it applications use — not the location engine (its runtime, builder
//! or authority operations): an application creates, finds and moves objects only through the
//! framework (spec 21 §2.1, guide-10 §1). A [`LocationError`]'s common kind is
//! [`crate::ErrorKind::from`] of it (the one `ErrorKind` of this crate; `zlink-location`'s own
//! kind stays that crate's).
//!
//! Neither path reaches the location engine:
//!
//! ```compile_fail
//! use zlink_runtime::location::LocationRuntime;
//! ```
//!
//! ```compile_fail
//! use zlink_runtime::LocationRuntime;
//! ```

pub use zlink_location::{
    Admission, AdmissionOp, AdmissionRefused, AuthorityOwnerGeneration, CapacityLimits,
    ConfigError, ContractViolation, DEFAULT_COLD_ACTIVATION_RETENTION, DEFAULT_WEIGHT, EntryState,
    GenerationKind, HostRun, InvalidOperation, ListFilter, LocationEntry, LocationError,
    LocationOptions, LookupKind, MAX_ENTRY_LEN, MAX_PAGE_SIZE, MAX_SLOTS, MAX_WEIGHT,
    ManualMonotonic, MonotonicClock, NodeKey, NodeUsage, ObjectGeneration, ObjectId, ObjectKind,
    OwnerId, OwnerLeaseGeneration, Page, PageToken, ROUTE_CACHE_FOLLOW_GAP, RecordName, RoutingId,
    SlotKind, StableType, SweepReport, SystemMonotonic, Usage,
};
