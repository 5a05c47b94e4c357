//! The composition root (spec 06 §2, §22, §23; 28): the root and MeshNode builders and their
//! validation ([`config`]), `start` (owner lease, listeners, descriptors, hosted services,
//! object hosts), the running [`ZLinkHost`] with its status and observers, host Relocate
//! (spec 28 §2–§8) and shutdown (spec 28 §9). It is the only layer that sees every other one.
//!
//! # Verification map
//!
//! `docs/verification.md`, section "zlink-runtime running hosts: mesh, objects, relocation, shutdown".

pub(crate) mod config;
mod disposal;
mod health;
mod leave;
pub(crate) mod observe;
pub(crate) mod relocate;
pub(crate) mod running;
mod sampler;
mod shutdown;
pub(crate) mod start;
mod status;

#[cfg(test)]
mod tests;

pub use crate::relocation::{CompletionCounts, InterruptionSummary};
pub use health::LocationHealth;
pub use leave::LeaveReport;
pub use observe::{HostEvent, HostObserver};
pub use relocate::{
    DEFAULT_RELOCATE_DEADLINE, ObjectRelocation, ObjectTarget, ObjectToMove, RelocateError,
    RelocateErrorKind, RelocateOptions, RelocationMode, RelocationOutcome, RelocationReason,
    RelocationResult,
};
pub use running::{DEFAULT_SHUTDOWN_DEADLINE, ZLinkHost};
pub use status::{
    ApplicationJobQueueStatus, DescriptorStep, HostStatus, LiveObjects, ShutdownFailure,
    ShutdownOutcome, ShutdownReason, ShutdownReport,
};
pub use zlink_codec::records::HostState;
