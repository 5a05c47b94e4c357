//! What a running host reports: its status and each node's, the ordered stream of its state
//! changes and terminal results, and the results of host Relocate and shutdown (spec 06 §24;
//! 28 §2, §3, §9, §11). A failed start is a [`crate::StartupError`].

pub use crate::host::{
    ApplicationJobQueueStatus, CompletionCounts, DescriptorStep, HostEvent, HostObserver,
    HostState, HostStatus, InterruptionSummary, LeaveReport, LiveObjects, LocationHealth,
    RelocateError, RelocateErrorKind, RelocationOutcome, RelocationReason, ShutdownFailure,
    ShutdownOutcome, ShutdownReason, ShutdownReport,
};
pub use crate::mesh::node::{
    ConnectionState, ConnectionStatus, ManualPeerStatus, NodeStatus, NotReady, PeerRole,
    PeerStatus, Waiting,
};
pub use zlink_location::{LeaseHealthStatus, LeaseState, StoreHealthStatus};

display_by_name!(
    ShutdownOutcome,
    ShutdownReason,
    RelocationOutcome,
    RelocationReason,
    RelocateErrorKind,
    ConnectionState
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_or_reason_shows_as_its_spec_name() {
        assert_eq!(ShutdownOutcome::ForceStopped.to_string(), "ForceStopped");
        assert_eq!(
            ShutdownReason::DeadlineExceeded.to_string(),
            "DeadlineExceeded"
        );
        assert_eq!(RelocationOutcome::Blocked.to_string(), "Blocked");
        assert_eq!(
            RelocationReason::TargetUnavailable.to_string(),
            "TargetUnavailable"
        );
        assert_eq!(
            crate::config::RelocationMode::PlannedMaintenance.to_string(),
            "PlannedMaintenance"
        );
        assert_eq!(
            crate::handler::ClosingReason::HostShutdown.to_string(),
            "HostShutdown"
        );
    }
}
