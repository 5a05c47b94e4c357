//! The location runtime core (spec 21 §3–§6, §10–§11): generations, the owner lease with its
//! admission gate, capacity accounting and weighted placement.

mod admission;
mod capacity;
mod clock;
mod error;
mod generation;
mod identity;
mod keys;
mod options;
mod placement;

pub use admission::{Admission, AdmissionGate, AdmissionOp, AdmissionRefused};
pub use capacity::{CapacityBundle, CapacityLimits, CapacityRow, MAX_SLOTS, SpotTypeSlots, Usage};
pub use clock::{ManualMonotonic, MonotonicClock, SystemMonotonic};
pub use error::LocationError;
pub use generation::{
    AuthorityOwnerGeneration, COUNTER_EXHAUSTED, GenerationKind, MAX_ISSUED, ObjectGeneration,
    OwnerLeaseGeneration,
};
pub use identity::{
    HostRun, MeshName, NodeKey, ObjectId, ObjectKind, OwnerId, RoutingId, StableType,
};
pub use options::{ConfigError, LocationOptions, ROUTE_CACHE_FOLLOW_GAP};
pub use placement::{
    Candidate, DEFAULT_WEIGHT, MAX_WEIGHT, PlacementRng, TargetNode, check_weight, choose,
};
