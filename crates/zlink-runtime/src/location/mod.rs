//! The location runtime core (spec 21 §3–§6, §10–§11).
//!
//! Everything here works over any Location Store held as `Arc<dyn DynLocationStore>`; the
//! runtime never looks at a provider type. Store keys are the logical key preimages themselves
//! (see [`keys`](self) below): a provider maps them to its physical layout.

mod admission;
mod authority;
mod capacity;
mod clock;
mod descriptor;
mod discovery;
mod engine;
mod error;
mod generation;
mod identity;
mod keys;
mod lease;
mod options;
mod placement;
mod runtime;

pub use admission::{Admission, AdmissionGate, AdmissionOp, AdmissionRefused};
pub use authority::{
    AuthorityClient, AuthorityHandle, AuthorityRead, Conflict, Outcome, ReserveRequest,
    SweepReport, TargetReservation,
};
pub use capacity::{
    CapacityBundle, CapacityLimits, CapacityRow, MAX_SLOTS, NodeUsage, SpotTypeSlots, Usage,
};
pub use clock::{ManualMonotonic, MonotonicClock, SystemMonotonic};
pub use descriptor::{DescriptorPublisher, PublishOutcome, PublishableDescriptor};
pub use discovery::{
    DiscoveredNode, Discovery, DiscoveryStatus, DiscoveryView, PageStats, target_of,
};
pub use error::LocationError;
pub use generation::{
    AuthorityOwnerGeneration, COUNTER_EXHAUSTED, GenerationKind, MAX_ISSUED, ObjectGeneration,
    OwnerLeaseGeneration,
};
pub use identity::{
    HostRun, MeshName, NodeKey, ObjectId, ObjectKind, OwnerId, RoutingId, StableType, new_owner_id,
};
pub use lease::{OwnerLease, RenewLoop, RenewOutcome};
pub use options::{ConfigError, LocationOptions, ROUTE_CACHE_FOLLOW_GAP};
pub use placement::{
    Candidate, DEFAULT_WEIGHT, MAX_WEIGHT, PlacementRng, TargetNode, check_weight, choose,
};
pub use runtime::{LocationRuntime, LocationRuntimeBuilder};

#[cfg(test)]
mod tests;
