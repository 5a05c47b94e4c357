#![doc = include_str!("../README.md")]
//!
//! # Module layout
//!
//! Modules build upward: vocabulary (`identity`, `generation`, `clock`, `admission`,
//! `options`), then `error`, then `keys`, `counters` and `epoch`, then `lease`, `capacity`,
//! `placement`, `engine`, `authority`, `descriptor`, `discovery`, `query`, `written` (the
//! verification of acknowledged writes), `health` (Store and owner-lease health for readiness
//! queries), `renew` (the renew loop) and `runtime`.
//!
//! # Verification map
//!
//! `docs/verification.md`, section "zlink-location: the location core".

mod admission;
mod authority;
mod capacity;
mod clock;
mod counters;
mod descriptor;
mod discovery;
mod engine;
mod epoch;
mod error;
mod generation;
mod health;
mod identity;
mod keys;
mod lease;
mod options;
mod placement;
mod query;
mod reader;
mod renew;
mod runtime;
mod written;

pub use admission::{Admission, AdmissionOp, AdmissionRefused};
pub use authority::SweepReport;
pub use capacity::{CapacityLimits, MAX_SLOTS, NodeUsage, Usage};
pub use clock::{ManualMonotonic, MonotonicClock, SystemMonotonic};
pub use error::{
    ContractViolation, ErrorKind, InvalidOperation, LocationError, RecordName, SlotKind,
};
pub use generation::{
    AuthorityOwnerGeneration, GenerationKind, ObjectGeneration, OwnerLeaseGeneration,
};
pub use health::{HealthProbe, LeaseHealthStatus, LeaseRenewals, LeaseState, StoreHealthStatus};
pub use identity::{
    HostRun, MeshName, NodeKey, ObjectId, ObjectKind, OwnerId, RoutingId, StableType,
};
pub use options::{
    ConfigError, DEFAULT_COLD_ACTIVATION_RETENTION, DEFAULT_CREATION_CLEANUP_WINDOW,
    DescriptorRejected, LocationOptions, MAX_DEAD_RUN_SWEEP_INTERVAL, ROUTE_CACHE_FOLLOW_GAP,
};
pub use placement::{DEFAULT_WEIGHT, MAX_WEIGHT};
pub use query::{
    EntryState, ListFilter, LocationEntry, LookupKind, MAX_ENTRY_LEN, MAX_PAGE_SIZE, Page,
    PageToken,
};
pub use reader::LocationReader;
pub use runtime::{LocationRuntime, LocationRuntimeBuilder};

pub use authority::{
    Abandoned, AuthorityClient, AuthorityHandle, AuthorityRead, Conflict, CreationMark,
    MemberResolver, OperationKey, Outcome, OwnerChangeRead, OwnerRuns, PerActorMoveRecord,
    ReservationWire, ReserveRequest, TargetReservation, TerminalWrite,
};
pub use capacity::{CapacityBundle, CapacityRow, SpotTypeSlots};
pub use descriptor::{DescriptorPublisher, PublishOutcome, PublishableDescriptor};
pub use discovery::{
    DiscoveredNode, Discovery, DiscoveryStatus, DiscoveryView, PageStats, target_of,
};
pub use identity::new_owner_id;
pub use keys::authority as authority_key;
pub use lease::LeaseTerm;
#[cfg(test)]
pub(crate) use lease::RenewOutcome;
pub use placement::{Candidate, PlacementRng, TargetNode, check_weight, choose};

#[cfg(test)]
pub(crate) mod tests;
