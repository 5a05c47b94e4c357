//! The door every piece of new object work passes (spec 21 §5): starting an Actor, Spot or
//! Instance message job, local or from the mesh, and making a factory's activation live.
//! Past the host's local admission deadline the caller gets `Unavailable`
//! ([`UnavailableReason::AdmissionClosed`]) and nothing runs.
//!
//! The check is the admission gate's lock-free [`LocationRuntime::is_admitting`]: one atomic
//! load and one monotonic clock read, no lock and no allocation on the admitted path.

use std::sync::Arc;

use super::activation::JobGauge;
use super::timer::{TimerConfig, TimerLimits};
use zlink_codec::{MeshName, RoutingId};

use crate::messaging::{UnavailableReason, ZLinkError};
use zlink_location::{AdmissionOp, LocationRuntime};

/// A cheap handle to the host's admission gate (clones share it), which node it is the door
/// of (the node a handler that passed it runs on), and the node's timer limits and counters, so
/// every activation built through the door shares them.
#[derive(Clone)]
pub(crate) struct Door(
    Option<Arc<LocationRuntime>>,
    RunsOn,
    TimerConfig,
    /// The host's Application Job Queue, which timer ticks take their permits from (06 §3).
    Option<Arc<crate::mesh::JobQueue>>,
    /// The jobs reserved in the mailboxes of every activation built through this door.
    JobGauge,
);

/// The node an object handler runs on (`MessageContext`): its MeshName and routing id, and,
/// once the host started its discovery, a weak handle to its object client (the managers a
/// handler calls other objects through; weak, so a context kept past the host's stop holds
/// nothing of it).
#[derive(Debug, Clone, Default)]
pub(crate) struct RunsOn(Option<Arc<NodeOf>>);

/// What [`RunsOn`] shares.
#[derive(Debug)]
pub(crate) struct NodeOf {
    mesh: MeshName,
    rid: RoutingId,
    client: std::sync::OnceLock<super::client::WeakClient>,
}

impl RunsOn {
    /// The node's MeshName and routing id, once an activation set it.
    pub(crate) fn get(&self) -> Option<(&MeshName, &RoutingId)> {
        self.0.as_deref().map(|n| (&n.mesh, &n.rid))
    }

    /// Keeps (weakly) the node's object client, once the host made it (discovery started).
    pub(crate) fn set_client(&self, client: &super::client::ObjectClient) {
        if let Some(n) = &self.0 {
            let _ = n.client.set(client.downgrade());
        }
    }

    /// The node's object client: `NotConfigured` before the host started the node's
    /// discovery (or on a context no activation queued), `ShuttingDown` once the host stopped.
    pub(crate) fn client(&self) -> Result<super::client::ObjectClient, ZLinkError> {
        let weak =
            self.0
                .as_deref()
                .and_then(|n| n.client.get())
                .ok_or(ZLinkError::NotConfigured(
                    crate::messaging::Unconfigured::AutomaticTopology,
                ))?;
        weak.upgrade().ok_or(ZLinkError::ShuttingDown)
    }
}

impl Door {
    /// The door of the node `(mesh, rid)` whose host's location runtime is `location`.
    pub(crate) fn new(location: Arc<LocationRuntime>, mesh: MeshName, rid: RoutingId) -> Self {
        Self(
            Some(location),
            RunsOn(Some(Arc::new(NodeOf {
                mesh,
                rid,
                client: std::sync::OnceLock::new(),
            }))),
            TimerConfig::default(),
            None,
            JobGauge::default(),
        )
    }

    /// A door without a gate, always open (activations built by unit tests with no location
    /// runtime).
    #[cfg(test)]
    pub(crate) fn unguarded() -> Self {
        Self(
            None,
            RunsOn::default(),
            TimerConfig::default(),
            None,
            JobGauge::default(),
        )
    }

    /// The node this is the door of.
    pub(crate) fn runs_on(&self) -> RunsOn {
        self.1.clone()
    }

    /// The same door with the node's validated timer limits (fresh counters).
    pub(crate) fn with_timers(self, limits: TimerLimits) -> Self {
        Self(self.0, self.1, TimerConfig::new(limits), self.3, self.4)
    }

    /// The same door drawing timer ticks' permits from the host's Application Job Queue.
    pub(crate) fn with_jobs(self, jobs: Arc<crate::mesh::JobQueue>) -> Self {
        Self(self.0, self.1, self.2, Some(jobs), self.4)
    }

    /// A permit for one timer tick from the host's Application Job Queue (06 §3), never
    /// waiting: `None` when every permit is in use (the tick is skipped like one that finds
    /// the mailbox full). A door with no queue hands out an empty permit.
    pub(crate) fn tick_permit(&self) -> Option<crate::mesh::JobPermit> {
        match &self.3 {
            None => Some(crate::mesh::JobPermit::none()),
            Some(q) => q.try_acquire(),
        }
    }

    /// The jobs reserved in the mailboxes of every activation built through this door (and
    /// its clones).
    pub(crate) fn jobs(&self) -> &JobGauge {
        &self.4
    }

    /// The node's timer limits and counters.
    pub(crate) fn timers(&self) -> &TimerConfig {
        &self.2
    }

    /// Asks the admission gate for a timer tick's start (`AdmissionOp::TimerStart`, spec 21
    /// §5): past the deadline the `Unavailable` refusal.
    pub(crate) fn admit_timer(&self) -> Result<(), ZLinkError> {
        match &self.0 {
            None => Ok(()),
            Some(l) => match l.admit(AdmissionOp::TimerStart) {
                Ok(_) => Ok(()),
                Err(e) => {
                    tracing::debug!(error = %e, "timer tick refused by the admission gate");
                    Err(refused())
                }
            },
        }
    }

    /// `Ok` while new object work may start; past the deadline the `Unavailable` refusal.
    pub(crate) fn check(&self) -> Result<(), ZLinkError> {
        admitting(&self.0)
    }

    /// The admission check alone, for a job to carry to its start (one shared handle, not the
    /// whole door).
    pub(crate) fn gate(&self) -> Gate {
        Gate(self.0.clone())
    }
}

/// The admission check alone ([`Door::gate`]): what a job carries to its start.
pub(crate) struct Gate(Option<Arc<LocationRuntime>>);

impl Gate {
    /// [`Door::check`].
    pub(crate) fn check(&self) -> Result<(), ZLinkError> {
        admitting(&self.0)
    }
}

/// `Ok` while the gate (if any) admits new object work; else the `Unavailable` refusal.
fn admitting(gate: &Option<Arc<LocationRuntime>>) -> Result<(), ZLinkError> {
    if gate.as_ref().is_none_or(|l| l.is_admitting()) {
        Ok(())
    } else {
        Err(refused())
    }
}

/// The refusal of new object work past the admission deadline.
pub(crate) fn refused() -> ZLinkError {
    ZLinkError::Unavailable {
        target: crate::messaging::Target::NewObjectWork,
        reason: UnavailableReason::AdmissionClosed,
    }
}
