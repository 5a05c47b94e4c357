//! Caller-owned status snapshots of the host and its shutdown (spec 06 §24, 28 §3, §11).

use zlink_codec::records::HostState;

use crate::mesh::node::NodeStatus;
use zlink_location::SweepReport;

/// The whole host: its state and each MeshNode.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HostStatus {
    /// The host state (spec 28 §3).
    pub state: HostState,
    /// The terminal result of the last host Relocate that ran, if any.
    pub last_relocation: Option<super::relocate::RelocationResult>,
    /// The shutdown's terminal result, once it ended.
    pub shutdown: Option<ShutdownReport>,
    /// Each MeshNode, in registration order.
    pub nodes: Vec<NodeStatus>,
    /// Completion results of requests relayed to objects that moved here, over every
    /// MeshNode (spec 21 §9.3).
    pub completions: crate::relocation::CompletionCounts,
    /// One-way messages the relocations of this host's objects dropped, over every MeshNode:
    /// refused by a full hold, refused when held work was resubmitted (the admission door
    /// closed, no handler, the activation closing), or queued for a move that did not commit
    /// here. Held work is never refused for a full mailbox, and a one-way the cutover accepted
    /// is never dropped for one (`relocation` module doc). Each drop is also logged at `warn`
    /// with the object and the reason.
    pub dropped_one_way: u64,
}

/// How a shutdown ended (spec 28 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ShutdownOutcome {
    /// Everything finished in time (wire value 0).
    Stopped,
    /// Bounded teardown ended cleanup (wire value 1); the host state is still `Stopped`.
    ForceStopped,
}

impl ShutdownOutcome {
    /// The wire value.
    pub fn code(self) -> u8 {
        match self {
            Self::Stopped => 0,
            Self::ForceStopped => 1,
        }
    }
}

/// Why a shutdown was forced (spec 28 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ShutdownReason {
    /// Not forced (0).
    None,
    /// Accepted work did not finish by the deadline (1).
    DeadlineExceeded,
    /// A cleanup step failed (2).
    TeardownFailed,
}

impl ShutdownReason {
    /// The wire value.
    pub fn code(self) -> u8 {
        match self {
            Self::None => 0,
            Self::DeadlineExceeded => 1,
            Self::TeardownFailed => 2,
        }
    }
}

/// The terminal result of a shutdown; concurrent and repeated shutdowns all get the same one.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Stopped or ForceStopped.
    pub outcome: ShutdownOutcome,
    /// Why it was forced.
    pub reason: ShutdownReason,
    /// The self-sweep of this run's authority rows, when a Location Store is registered and
    /// the sweep ran.
    pub sweep: Option<SweepReport>,
    /// Requests and dispatches ended by the forced teardown.
    pub abandoned: usize,
    /// Cleanup failures, in order (hosted-service stages, Store cleanup).
    pub failures: Vec<String>,
}
