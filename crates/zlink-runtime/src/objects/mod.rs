//! Actors and Spots (spec 06 §4, §11, §15–§18; 21 §7), being built on the MeshNode layer.
//!
//! Today it holds object type registration ([`ActorType`], [`SpotType`]: factories, the one
//! relocation policy each type chooses, User Spot execution and readiness modes; validated at
//! startup and published as the descriptor's object capabilities) and the activation core (one
//! object's state behind a count- and bytes-bounded mailbox, run one job at a time with a
//! bounded slice). Managers (Create/GetOrCreate/Find/Destroy/Close), messaging by global id and
//! the route cache are not built yet: registered factories do not run yet.

// The managers (not built yet) are the first callers outside the tests.
pub(crate) mod activation;
pub(crate) mod actor;
pub(crate) mod host;
mod inbound;
pub(crate) mod manager;
mod registration;

pub use host::{ActorRef, DEFAULT_ACTOR_MAILBOX_BYTES, DEFAULT_ACTOR_MAILBOX_JOBS};
pub(crate) use inbound::create_command;
pub use manager::{ActorManager, DEFAULT_CREATE_DEADLINE};
pub(crate) use registration::Registration;
pub use registration::{
    Actor, ActorContext, ActorStateAdapter, ActorType, FactoryContext, ReadinessMode,
    RelocationChoice, Spot, SpotExecution, SpotStateAdapter, SpotType,
};
