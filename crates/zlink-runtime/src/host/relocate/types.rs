//! The public values of a host Relocate (spec 06 §2, 28 §2–§3): options, result, reasons and
//! argument errors.

use std::time::Duration;

pub use crate::objects::DEFAULT_RELOCATE_DEADLINE;

/// Which nodes a host Relocate may move its objects to (spec 28 §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RelocationMode {
    /// Nodes of this host's own application version (inspect or reboot the host). Wire 0.
    PlannedMaintenance,
    /// Nodes of one exact newer application version prepared beforehand. Wire 1.
    RollingUpdate,
}

impl RelocationMode {
    /// The metrics label value (`planned_maintenance`, `rolling_update`).
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::PlannedMaintenance => "planned_maintenance",
            Self::RollingUpdate => "rolling_update",
        }
    }

    /// The wire value.
    pub fn code(self) -> u8 {
        match self {
            Self::PlannedMaintenance => 0,
            Self::RollingUpdate => 1,
        }
    }
}

/// What a host Relocate is asked to do (spec 28 §2). Build it with
/// [`planned_maintenance`](Self::planned_maintenance) or
/// [`rolling_update`](Self::rolling_update); [`new`](Self::new) takes any combination and
/// lets [`ZLinkHost::relocate`](crate::host::ZLinkHost::relocate) refuse an invalid one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelocateOptions {
    mode: RelocationMode,
    target_version: Option<u64>,
    deadline: Duration,
}

impl RelocateOptions {
    /// Any mode and target version; checked when the Relocate starts.
    pub fn new(mode: RelocationMode, target_version: Option<u64>) -> Self {
        Self {
            mode,
            target_version,
            deadline: DEFAULT_RELOCATE_DEADLINE,
        }
    }

    /// `PlannedMaintenance`: targets run this host's application version.
    pub fn planned_maintenance() -> Self {
        Self::new(RelocationMode::PlannedMaintenance, None)
    }

    /// `RollingUpdate` to exactly `version`, which must be greater than this host's.
    pub fn rolling_update(version: u64) -> Self {
        Self::new(RelocationMode::RollingUpdate, Some(version))
    }

    /// The deadline (default [`DEFAULT_RELOCATE_DEADLINE`]; must be greater than zero).
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// The mode.
    pub fn mode(&self) -> RelocationMode {
        self.mode
    }

    /// The requested target version, if any.
    pub fn target_version(&self) -> Option<u64> {
        self.target_version
    }

    /// The deadline.
    pub fn deadline_value(&self) -> Duration {
        self.deadline
    }

    /// The effective target version for a host of `source` version, or why the options are
    /// invalid (checked before any state or admission change).
    pub(crate) fn effective_version(&self, source: u64) -> Result<u64, RelocateError> {
        if self.deadline.is_zero() {
            return Err(RelocateError::ZeroDeadline);
        }
        match (self.mode, self.target_version) {
            (RelocationMode::PlannedMaintenance, None) => Ok(source),
            (RelocationMode::PlannedMaintenance, Some(requested)) => {
                Err(RelocateError::VersionWithPlannedMaintenance { requested })
            }
            (RelocationMode::RollingUpdate, None) => Err(RelocateError::MissingTargetVersion),
            (RelocationMode::RollingUpdate, Some(requested)) if requested <= source => {
                Err(RelocateError::TargetVersionNotNewer {
                    current: source,
                    requested,
                })
            }
            (RelocationMode::RollingUpdate, Some(requested)) => Ok(requested),
        }
    }
}

/// How a host Relocate ended (spec 28 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RelocationOutcome {
    /// Every stateful object left this host (wire 0; the reason is `None`).
    Relocated,
    /// It could not start or did not finish (wire 1; the reason says why).
    Blocked,
}

impl RelocationOutcome {
    /// The metrics label value (`relocated`, `blocked`).
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Relocated => "relocated",
            Self::Blocked => "blocked",
        }
    }

    /// The wire value.
    pub fn code(self) -> u8 {
        match self {
            Self::Relocated => 0,
            Self::Blocked => 1,
        }
    }
}

/// Why a host Relocate was blocked (spec 28 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RelocationReason {
    /// Not blocked (0).
    None,
    /// No eligible target of the version was ready by the deadline (1).
    TargetUnavailable,
    /// A Store read or write failed before the first owner change (2).
    StoreUnavailable,
    /// An object whose type has `DisableRelocation` is on this host (3).
    RelocationDisabled,
    /// An object cannot move to the targets: its state or its kind (4).
    StateIncompatible,
    /// The deadline passed with objects still here (5).
    DeadlineExceeded,
    /// A started move could not finish (6).
    RelocationFailed,
    /// The host is not `Serving` (7).
    RuntimeNotReady,
    /// A manual topology component is registered (8).
    ManualTopologyUnsupported,
    /// A shutdown came first or interrupted it (9).
    ShutdownRequested,
    /// Another Relocate with other options is running (10).
    OperationInProgress,
}

impl RelocationReason {
    /// The metrics label value (snake case of the variant: `none`, `target_unavailable`, ...).
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::TargetUnavailable => "target_unavailable",
            Self::StoreUnavailable => "store_unavailable",
            Self::RelocationDisabled => "relocation_disabled",
            Self::StateIncompatible => "state_incompatible",
            Self::DeadlineExceeded => "deadline_exceeded",
            Self::RelocationFailed => "relocation_failed",
            Self::RuntimeNotReady => "runtime_not_ready",
            Self::ManualTopologyUnsupported => "manual_topology_unsupported",
            Self::ShutdownRequested => "shutdown_requested",
            Self::OperationInProgress => "operation_in_progress",
        }
    }

    /// The wire value.
    pub fn code(self) -> u8 {
        match self {
            Self::None => 0,
            Self::TargetUnavailable => 1,
            Self::StoreUnavailable => 2,
            Self::RelocationDisabled => 3,
            Self::StateIncompatible => 4,
            Self::DeadlineExceeded => 5,
            Self::RelocationFailed => 6,
            Self::RuntimeNotReady => 7,
            Self::ManualTopologyUnsupported => 8,
            Self::ShutdownRequested => 9,
            Self::OperationInProgress => 10,
        }
    }
}

/// The terminal result of a host Relocate (spec 28 §2): mode, effective target version,
/// outcome and reason — filled even when no target was found — and what moved.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelocationResult {
    /// The mode asked for.
    pub mode: RelocationMode,
    /// The effective target application version.
    pub target_version: u64,
    /// Relocated or Blocked.
    pub outcome: RelocationOutcome,
    /// Why it was blocked (`None` when relocated).
    pub reason: RelocationReason,
    /// Objects this operation moved (they stay on their targets whatever the outcome).
    pub moved: usize,
    /// Stateful objects still owned by this host when it ended.
    pub remaining: usize,
    /// The interruption of every unit this host moved out since it started (spec 28 §5,
    /// `zlink.relocation.interruption`: from the unit's seal to the target's signal that
    /// processing starts), over all its object nodes.
    pub interruption: crate::relocation::InterruptionSummary,
}

impl RelocationResult {
    /// A Relocate blocked before it moved anything, with `remaining` stateful objects still
    /// here.
    pub(crate) fn blocked(
        mode: RelocationMode,
        target_version: u64,
        why: RelocationReason,
        remaining: usize,
    ) -> Self {
        Self {
            mode,
            target_version,
            outcome: RelocationOutcome::Blocked,
            reason: why,
            moved: 0,
            remaining,
            interruption: crate::relocation::InterruptionSummary::default(),
        }
    }

    /// Whether every stateful object left the host.
    pub fn is_relocated(&self) -> bool {
        self.outcome == RelocationOutcome::Relocated
    }
}

/// Options a host Relocate refuses before any state or admission change (spec 28 §2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RelocateError {
    /// `RollingUpdate` needs a target version.
    #[error("RollingUpdate needs a target application version")]
    MissingTargetVersion,
    /// `RollingUpdate`'s version must be greater than this host's.
    #[error("RollingUpdate target version {requested} is not greater than this host's {current}")]
    TargetVersionNotNewer {
        /// This host's application version.
        current: u64,
        /// The requested one.
        requested: u64,
    },
    /// `PlannedMaintenance` takes no target version (its targets run this host's).
    #[error("PlannedMaintenance takes no target version (got {requested})")]
    VersionWithPlannedMaintenance {
        /// The requested version.
        requested: u64,
    },
    /// The deadline must be greater than zero.
    #[error("the Relocate deadline must be greater than zero")]
    ZeroDeadline,
}

/// The kind of a [`RelocateError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RelocateErrorKind {
    /// An invalid mode, version or deadline.
    InvalidArgument,
}

impl RelocateError {
    /// The kind.
    pub fn kind(&self) -> RelocateErrorKind {
        RelocateErrorKind::InvalidArgument
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_mode_and_version_combinations_are_argument_errors() {
        let v = |o: RelocateOptions| o.effective_version(5);
        assert_eq!(v(RelocateOptions::planned_maintenance()), Ok(5));
        assert_eq!(v(RelocateOptions::rolling_update(6)), Ok(6));
        assert_eq!(
            v(RelocateOptions::rolling_update(5)),
            Err(RelocateError::TargetVersionNotNewer {
                current: 5,
                requested: 5
            })
        );
        assert_eq!(
            v(RelocateOptions::new(RelocationMode::RollingUpdate, None)),
            Err(RelocateError::MissingTargetVersion)
        );
        assert_eq!(
            v(RelocateOptions::new(
                RelocationMode::PlannedMaintenance,
                Some(5)
            )),
            Err(RelocateError::VersionWithPlannedMaintenance { requested: 5 })
        );
        assert_eq!(
            v(RelocateOptions::planned_maintenance().deadline(Duration::ZERO)),
            Err(RelocateError::ZeroDeadline)
        );
        assert_eq!(
            v(RelocateOptions::planned_maintenance().deadline(Duration::from_nanos(1))),
            Ok(5)
        );
        let e = RelocateError::ZeroDeadline;
        assert_eq!(e.kind(), RelocateErrorKind::InvalidArgument);
    }

    #[test]
    fn outcome_and_reason_wire_values_match_the_spec() {
        assert_eq!(RelocationOutcome::Relocated.code(), 0);
        assert_eq!(RelocationOutcome::Blocked.code(), 1);
        assert_eq!(RelocationMode::PlannedMaintenance.code(), 0);
        assert_eq!(RelocationMode::RollingUpdate.code(), 1);
        let reasons = [
            RelocationReason::None,
            RelocationReason::TargetUnavailable,
            RelocationReason::StoreUnavailable,
            RelocationReason::RelocationDisabled,
            RelocationReason::StateIncompatible,
            RelocationReason::DeadlineExceeded,
            RelocationReason::RelocationFailed,
            RelocationReason::RuntimeNotReady,
            RelocationReason::ManualTopologyUnsupported,
            RelocationReason::ShutdownRequested,
            RelocationReason::OperationInProgress,
        ];
        for (i, r) in reasons.iter().enumerate() {
            assert_eq!(usize::from(r.code()), i, "{r:?}");
        }
    }
}
