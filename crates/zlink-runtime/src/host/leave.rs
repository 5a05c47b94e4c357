//! A graceful leave (issue 40): what an operator stopping one node of a mesh wants — its
//! objects moved to the other nodes first (a host Relocate, `PlannedMaintenance`), then the
//! shutdown — in one call, as Akka's graceful leave or Orleans' grain migration on shutdown.

use std::time::Duration;

use super::running::ZLinkHost;
use super::{RelocateError, RelocateOptions, RelocationResult, ShutdownReport};

/// How a graceful leave ([`ZLinkHost::leave`]) ended: the host Relocate, then the shutdown.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LeaveReport {
    /// The host Relocate that moved this host's objects away: `Relocated`, or `Blocked` with
    /// its reason (the objects it moved stay moved), or why it was refused before anything
    /// changed.
    pub relocation: Result<RelocationResult, RelocateError>,
    /// The shutdown that followed, whatever the Relocate's ending.
    pub shutdown: ShutdownReport,
}

impl LeaveReport {
    /// Every stateful object left this host before it stopped, and the shutdown ended
    /// `Stopped`.
    pub fn is_clean(&self) -> bool {
        self.relocation
            .as_ref()
            .is_ok_and(RelocationResult::is_relocated)
            && self.shutdown.outcome == super::ShutdownOutcome::Stopped
    }
}

impl ZLinkHost {
    /// Leaves the mesh gracefully: moves every stateful object of this host to the other
    /// Object Servers of its own application version (a host Relocate in
    /// `PlannedMaintenance` mode, bounded by `relocate_deadline`), then shuts the host down
    /// within the default Shutdown deadline — whatever the Relocate's ending. An object that
    /// could not move (no eligible target, `DisableRelocation`, the deadline) is swept by the
    /// shutdown like any other, and its next `get_or_create` makes a new incarnation. For
    /// another mode or deadlines, call [`relocate`](Self::relocate) and
    /// [`shutdown_within`](Self::shutdown_within) yourself.
    pub async fn leave(&self, relocate_deadline: Duration) -> LeaveReport {
        let relocation = self
            .relocate(RelocateOptions::planned_maintenance().deadline(relocate_deadline))
            .await;
        match &relocation {
            Ok(r) if !r.is_relocated() => tracing::warn!(
                outcome = %r.outcome,
                reason = %r.reason,
                remaining = r.remaining,
                "leaving with objects still here: the shutdown sweeps them"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "leaving without a Relocate"),
        }
        let shutdown = self.shutdown().await;
        LeaveReport {
            relocation,
            shutdown,
        }
    }
}
