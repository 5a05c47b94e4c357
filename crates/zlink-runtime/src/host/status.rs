//! Caller-owned status snapshots of the host and its shutdown (spec 06 §24, 28 §3, §11).

use std::fmt;
use std::sync::Arc;

use zlink_codec::MeshName;
use zlink_codec::records::HostState;

use crate::mesh::node::NodeStatus;
use zlink_location::{LocationError, SweepReport};

use super::config::{HostedError, HostedFailure, HostedStage};
use crate::messaging::BoxError;
use crate::objects::host::ClosingFailure;

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
    /// Each MeshNode, in registration order (each with every connection intent and its state).
    pub nodes: Vec<NodeStatus>,
    /// The Location Store's and the owner lease's health (`None` without a Location Store;
    /// guide-10 §4). Health only: no Store key, version, owner token or relocation record.
    pub health: Option<super::LocationHealth>,
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
    /// Moves into this host whose owner change was not confirmed before the Restore
    /// operation's deadline, over every MeshNode (spec 21 §10 `location_update_failed`): the
    /// prepared objects were removed and never served here. Each is also logged at `error`.
    pub location_update_failed: u64,
    /// The live activations of each Object Server MeshNode, in registration order (a node
    /// without an object role is not listed).
    pub live: Vec<LiveObjects>,
    /// The host-wide Application Job Queue now (spec 06 §3): depth and effective maximum.
    pub application_jobs: ApplicationJobQueueStatus,
}

/// The host-wide Application Job Queue's pressure now (spec 06 §3): cheap to read (two atomic
/// loads), for dashboards and tests. [`ZLinkHost::application_jobs`](super::ZLinkHost::application_jobs)
/// reads it alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ApplicationJobQueueStatus {
    /// Permits in use: application jobs waiting for their handler to start, plus relocation
    /// staging (which may draw past the cap). An idle host has 0.
    pub in_use: usize,
    /// `EffectiveMaxQueuedApplicationJobs`, fixed at startup.
    pub effective_max: u32,
    /// Whether receiving is paused (pressure reached the pause count and has not yet fallen
    /// to the resume count): the MeshNodes read no application frame meanwhile.
    pub paused: bool,
}

/// How many activations one Object Server MeshNode has live now: those in its live set,
/// dispatching (an object prepared hidden for a relocation to this node is not counted until
/// its move commits here).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LiveObjects {
    /// The node's MeshName.
    pub mesh: MeshName,
    /// The node's routing id.
    pub routing_id: zlink_codec::RoutingId,
    /// Live Actors.
    pub actors: u64,
    /// Live Spots (every kind).
    pub spots: u64,
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
    /// The metrics label value (`stopped`, `force_stopped`).
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Stopped => "stopped",
            Self::ForceStopped => "force_stopped",
        }
    }

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
    /// The metrics label value (`none`, `deadline_exceeded`, `teardown_failed`).
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::DeadlineExceeded => "deadline_exceeded",
            Self::TeardownFailed => "teardown_failed",
        }
    }

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
    pub failures: Vec<ShutdownFailure>,
}

/// Which descriptor write of a shutdown or a Relocate rollback failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DescriptorStep {
    /// Publishing `Draining` at the start of the shutdown (spec 28 §9 step 2).
    Draining,
    /// Withdrawing the descriptor after the self-sweep (spec 28 §9).
    Withdraw,
    /// Writing `Serving` back after a Relocate that could not complete (spec 28 §8).
    ServingRollback,
}

impl fmt::Display for DescriptorStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Draining => "Draining descriptor",
            Self::Withdraw => "descriptor withdrawal",
            Self::ServingRollback => "Serving rollback of the descriptor",
        })
    }
}

/// One cleanup step of a shutdown that failed (spec 28 §9); its typed cause is the source.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ShutdownFailure {
    /// A hosted service's stop request or stop failed (spec 06 §22).
    #[error("hosted service `{service}` {stage}: {error}")]
    Hosted {
        /// The service's name.
        service: String,
        /// The stage that failed.
        stage: HostedStage,
        /// The service's error.
        #[source]
        error: Arc<HostedError>,
    },
    /// A descriptor write failed.
    #[error("{step} of {mesh}: {source}")]
    Descriptor {
        /// The MeshNode's MeshName.
        mesh: MeshName,
        /// Which write.
        step: DescriptorStep,
        /// The Location Store's error.
        #[source]
        source: Arc<LocationError>,
    },
    /// The self-sweep of this host's owner records failed (spec 21 §10).
    #[error("self-sweep: {0}")]
    SelfSweep(#[source] Arc<LocationError>),
    /// Releasing the owner lease failed.
    #[error("owner lease release: {0}")]
    LeaseRelease(#[source] Arc<LocationError>),
    /// A Spot's `HostShutdown` closing callback returned an error (spec 28 §9 step 4).
    #[error("closing callback of {object}: {source}")]
    ClosingCallback {
        /// The object.
        object: crate::messaging::Target,
        /// The callback's error.
        #[source]
        source: Arc<BoxError>,
    },
    /// A closing callback's task panicked or was cancelled.
    #[error("closing callback task: {0}")]
    ClosingTask(#[source] Arc<tokio::task::JoinError>),
}

impl From<ClosingFailure> for ShutdownFailure {
    fn from(f: ClosingFailure) -> Self {
        match f {
            ClosingFailure::Callback { object, error } => Self::ClosingCallback {
                object,
                source: Arc::new(error),
            },
            ClosingFailure::Task(e) => Self::ClosingTask(Arc::new(e)),
        }
    }
}

impl ShutdownFailure {
    /// A hosted-service stage failure.
    pub(crate) fn hosted(f: HostedFailure) -> Self {
        Self::Hosted {
            service: f.service,
            stage: f.stage,
            error: Arc::new(f.error),
        }
    }

    /// A failed descriptor write of `mesh`.
    pub(crate) fn descriptor(mesh: &MeshName, step: DescriptorStep, e: LocationError) -> Self {
        Self::Descriptor {
            mesh: mesh.clone(),
            step,
            source: Arc::new(e),
        }
    }
}
