//! What a running host reports: its status and each node's, the ordered stream of its state
//! changes and terminal results, and the results of host Relocate and shutdown (spec 06 §24;
//! 28 §2, §3, §9, §11). A failed start is a [`crate::StartupError`].

pub use crate::host::{
    ApplicationJobQueueStatus, CompletionCounts, DescriptorStep, HostEvent, HostObserver,
    HostState, HostStatus, InterruptionSummary, LiveObjects, LocationHealth, RelocateError,
    RelocateErrorKind, RelocationOutcome, RelocationReason, ShutdownFailure, ShutdownOutcome,
    ShutdownReason, ShutdownReport,
};
pub use crate::mesh::node::{
    ConnectionState, ConnectionStatus, ManualPeerStatus, NodeStatus, NotReady, PeerRole,
    PeerStatus, Waiting,
};
pub use zlink_location::{LeaseHealthStatus, LeaseState, StoreHealthStatus};
