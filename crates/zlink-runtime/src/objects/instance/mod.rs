//! Instance Spot cold activation (spec 06 §15, §16, §18; 21 §7.1, §10).
//!
//! An Instance Spot has no create call: a Spot direct call with Instance intent
//! ([`SpotManager::instance`](super::SpotManager::instance) → [`InstanceCall`]) delivers its
//! message to the Ready Spot, or creates the Spot from that first message when its authority is
//! Missing. Resolve and cold activation are one terminal operation.
//!
//! **Source** (the calling node; `call.rs`): reads the record. An existing record decides the
//! stable type (another kind or type is `TypeMismatch`) and the node the message goes to (its
//! owner, Creating or Ready). A Missing record takes the stable type given, or the only
//! Instance Spot type the serving descriptors of the mesh offer (none → `NotFound`, several →
//! `InvalidOperation`), and one eligible target by placement (Serving, the type registered,
//! room, weight > 0; none → `CapacityExceeded`). It sends the activation envelope — first
//! message (packet, content type, payload, metadata), OperationId, deadline, mesh, stable type
//! and the target descriptor fence (RID + lifecycle generation) — over the command plane
//! (`zlink.spot.activate`), or runs it in-process when the target is itself. The source
//! creates no claim or reservation and never sends the message a second time: a lost reply is
//! an error of the call (the first message may have run).
//!
//! **Target** (`target.rs`): checks the fence, takes the first message's Application Job Queue
//! permit (06 §3; waited for within the deadline, carried by the message until its handler
//! starts, returned before a forward), then, until the deadline:
//! 1. a live activation of the Spot here takes the message (after any first message);
//! 2. an activation of the Spot in progress here is waited for;
//! 3. a record owned by another node: the envelope is forwarded to that node (at most 8 hops),
//!    whose answer is the answer — so a race loser delivers to the winner, which waits for its
//!    own creation to open;
//! 4. a Missing record: the envelope is **stored in the Relocation Store** under a reference
//!    unique per (target RID, lifecycle generation, OperationId) and read back and checked by
//!    SHA-256 and size; then **one Reserve batch** secures `Creating`, the Spot's capacity and
//!    the recovery root (the reference, checksum, size and inbox cursor in the record's
//!    framework-internal payload; see `envelope.rs` for why not `pendingCreation`). Losing the
//!    Reserve (the record exists) creates and deletes nothing — the envelope expires with its
//!    retention — and the loop continues at 3. Winning it runs the factory (under the node's
//!    activation-concurrency permits), commits `Ready` with the recovery root kept, queues the
//!    first message at the head of the new activation's mailbox and only then makes the
//!    activation reachable. After the first handler's terminal completion a **Preserve** CAS
//!    removes the recovery root from the record, then the envelope is **deleted** from the
//!    Relocation Store, then the first message's reply (or the send's acceptance) is
//!    answered. A factory failure or decline cancels the reservation (capacity returned).
//!    While in use — from its store until that deletion, and on a survivor that restores it —
//!    the envelope is renewed whenever 12 h of its retention are left (half a shorter
//!    retention; spec 23), so a first message that runs longer than the retention keeps it
//!    (`renewal.rs`).
//!
//! **Restarts** (spec 21 §7.1 table, `recover.rs`):
//! - stored, never reserved: no record points at the envelope; the Relocation Store removes it
//!   when `coldActivationRetention` ends;
//! - reserved (`Creating`), never Ready: the owner's run is gone from the list, so survivors'
//!   recovery-sweep removes the record and returns its capacity (the creation is cancelled);
//!   the envelope then expires likewise;
//! - Ready, first message not completed: a surviving Object Server that serves the type takes
//!   the record over in one batch conditioned on the dead run's lease row read directly
//!   (`take_over_instance`), rebuilds the Spot with the factory, runs the stored first message
//!   first, then removes the root and deletes the envelope as above. The first message's reply
//!   has no route any more (the original request ended when its owner died). A node that
//!   cannot serve such a record gives the nodes that can one owner-lease TTL before its own
//!   recovery-sweep of the run (which removes whatever is left, the first message lost and
//!   reported). If the owner died after its first handler ended but before the Preserve, the
//!   restored first message runs a second time (at-least-once, like a factory after a crash).

mod call;
mod ending;
mod envelope;
mod recover;
mod renewal;
mod target;

use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;
use tokio::sync::watch;
use zlink_codec::records::{HostState, ObjectKind, ObjectRole};
use zlink_codec::{ObjectId, StableType};
use zlink_store_spi::entropy::HashMap;
use zlink_store_spi::{DynRelocationStore, Retention};

use super::host::ObjectHost;
use crate::messaging::{CreationError, InvalidCall, UnavailableReason, Unconfigured, ZLinkError};
use zlink_location::{CapacityBundle, Discovery, LocationError, PlacementRng, TargetNode};

pub use call::InstanceCall;
pub(crate) use ending::{Ending, Endings, moving};
pub(crate) use recover::before_sweep;
pub(crate) use target::{ACTIVATE_SPOT, activate_command};

/// What the node's start gives the Instance Spot layer.
struct Configured {
    store: Option<Arc<dyn DynRelocationStore>>,
    retention: Retention,
}

/// Activations in progress on this node, by Spot id: each holds the sender of its channel
/// until the activation is reachable (or failed); waiters see the channel close.
type InProgress = Arc<Mutex<HashMap<ObjectId, watch::Receiver<()>>>>;

/// The Instance Spot state of one object node.
pub(crate) struct Instances {
    configured: OnceLock<Configured>,
    discovery: OnceLock<Arc<Discovery>>,
    host: OnceLock<Weak<ObjectHost>>,
    in_progress: InProgress,
    rng: Mutex<PlacementRng>,
    /// Close vs relocation claims of the Instance Spots this node owns (28 §7).
    pub(crate) endings: Endings,
}

impl std::fmt::Debug for Instances {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instances")
            .field("in_progress", &self.in_progress.lock().len())
            .finish_non_exhaustive()
    }
}

/// Marks one activation of a Spot in progress on this node; dropping it ends the mark and
/// wakes every waiter.
pub(crate) struct Activating {
    id: ObjectId,
    map: InProgress,
    _open: watch::Sender<()>,
}

impl Drop for Activating {
    fn drop(&mut self) {
        self.map.lock().remove(&self.id);
    }
}

impl Instances {
    pub(crate) fn new() -> Self {
        Self {
            configured: OnceLock::new(),
            discovery: OnceLock::new(),
            host: OnceLock::new(),
            in_progress: Arc::new(Mutex::new(HashMap::default())),
            rng: Mutex::new(PlacementRng::new()),
            endings: Endings::default(),
        }
    }

    /// Set once by the node's start: the object host itself, the root's Relocation Store (with
    /// an Instance Spot type startup validation guarantees one) and the envelope retention
    /// (factories run under the host's activation-concurrency permits).
    pub(crate) fn configure(
        &self,
        host: &Arc<ObjectHost>,
        store: Option<Arc<dyn DynRelocationStore>>,
        retention: Retention,
    ) {
        let _ = self.host.set(Arc::downgrade(host));
        let _ = self.configured.set(Configured { store, retention });
    }

    /// Set once the node's discovery runs (placement candidates and the node's own entry).
    pub(crate) fn set_discovery(&self, discovery: Arc<Discovery>) {
        let _ = self.discovery.set(discovery);
    }

    /// The root's Relocation Store, once the node started (relocation completion records keep
    /// their payloads there, `relocation::completion`).
    pub(crate) fn relocation_store(&self) -> Option<Arc<dyn DynRelocationStore>> {
        self.configured.get().and_then(|c| c.store.clone())
    }

    /// The host run of the node `rid` of this mesh, as the node's discovery list last read it.
    pub(crate) fn run_of(&self, rid: &zlink_codec::RoutingId) -> Option<zlink_location::HostRun> {
        let list = self.discovery.get()?.last_list()?;
        list.into_iter()
            .find(|n| &n.record.descriptor.routing_id == rid)
            .map(|n| n.run)
    }

    /// The object host, while the node runs.
    pub(crate) fn host(&self) -> Option<Arc<ObjectHost>> {
        self.host.get().and_then(Weak::upgrade)
    }

    fn configured(&self) -> Result<&Configured, ZLinkError> {
        self.configured
            .get()
            .ok_or(ZLinkError::NotConfigured(Unconfigured::NotStarted))
    }

    /// The Relocation Store and the envelope retention.
    fn store(&self) -> Result<(&Arc<dyn DynRelocationStore>, Retention), ZLinkError> {
        let c = self.configured()?;
        let store = c
            .store
            .as_ref()
            .ok_or(ZLinkError::NotConfigured(Unconfigured::RelocationStore))?;
        Ok((store, c.retention))
    }

    /// Marks an activation of `id` in progress here; `None` if one already is.
    fn begin(&self, id: &ObjectId) -> Option<Activating> {
        let mut map = self.in_progress.lock();
        if map.contains_key(id) {
            return None;
        }
        let (tx, rx) = watch::channel(());
        map.insert(id.clone(), rx);
        Some(Activating {
            id: id.clone(),
            map: Arc::clone(&self.in_progress),
            _open: tx,
        })
    }

    /// The activation of `id` in progress here, if any: wait on it with [`settled`].
    fn activating(&self, id: &ObjectId) -> Option<watch::Receiver<()>> {
        self.in_progress.lock().get(id).cloned()
    }

    /// This node as a placement target, from its own entry in its discovery list (its limits
    /// and offered types as published). `Unavailable` until the list names this run.
    pub(crate) fn own_target(&self, host: &ObjectHost) -> Result<TargetNode, ZLinkError> {
        let run = host.location.host_run().ok_or(ZLinkError::ShuttingDown)?;
        self.discovery
            .get()
            .and_then(|d| d.last_list())
            .and_then(|nodes| {
                nodes.into_iter().find(|n| {
                    n.run == run
                        && n.record.descriptor.routing_id == host.rid
                        && n.record.descriptor.mesh_name == host.mesh
                })
            })
            .map(|n| n.target())
            .ok_or_else(|| ZLinkError::Unavailable {
                target: crate::messaging::Target::ThisNode,
                reason: UnavailableReason::NotListed,
            })
    }

    /// The only Instance Spot stable type the serving Object Servers of the mesh offer (spec
    /// 06 §15): none → `NotFound`, several → `InvalidOperation`. Several nodes offering one
    /// type count once.
    fn only_type(&self) -> Result<StableType, ZLinkError> {
        let nodes = self
            .discovery
            .get()
            .and_then(|d| d.last_list())
            .unwrap_or_default();
        let mut types: Vec<StableType> = nodes
            .iter()
            .map(|n| &n.record.descriptor)
            .filter(|d| d.object_role == ObjectRole::Server && d.state == HostState::Serving)
            .flat_map(|d| d.object_capabilities.iter())
            .filter(|c| c.object_kind == ObjectKind::InstanceSpot)
            .map(|c| c.stable_type.clone())
            .collect();
        types.sort();
        types.dedup();
        match types.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(ZLinkError::NoRoute {
                target: crate::messaging::Target::InstanceSpotType,
            }),
            several => Err(ZLinkError::InvalidCall(
                InvalidCall::SeveralInstanceSpotTypes {
                    types: several.to_vec(),
                },
            )),
        }
    }

    /// One eligible target for a new Instance Spot of `stable_type`, by weight (spec 21 §4).
    async fn place(
        &self,
        host: &ObjectHost,
        stable_type: &StableType,
    ) -> Result<TargetNode, ZLinkError> {
        let discovery = self
            .discovery
            .get()
            .ok_or(ZLinkError::NotConfigured(Unconfigured::AutomaticTopology))?;
        let mut candidates = discovery
            .candidates(host.location.authority())
            .await
            .map_err(super::host::store_failure)?;
        // Never this host while it takes no new objects (28 §10), whatever its list says.
        candidates.retain(|c| host.may_place_on(&c.target.node));
        let bundle = CapacityBundle::for_object(ObjectKind::InstanceSpot, stable_type);
        let mut rng = self.rng.lock();
        match zlink_location::choose(
            &candidates,
            ObjectKind::InstanceSpot,
            stable_type,
            &bundle,
            &mut rng,
        ) {
            Ok(c) => Ok(c.target.clone()),
            Err(LocationError::CapacityExceeded) => Err(capacity_exceeded(stable_type)),
            Err(e) => Err(super::host::store_failure(e)),
        }
    }
}

/// Waits until the activation `rx` watches has ended (or the deadline passes).
async fn settled(mut rx: watch::Receiver<()>, deadline: tokio::time::Instant) {
    let _ = tokio::time::timeout_at(deadline, async {
        // The sender never sends: `changed` returns once it is dropped.
        while rx.changed().await.is_ok() {}
    })
    .await;
}

fn capacity_exceeded(stable_type: &StableType) -> ZLinkError {
    ZLinkError::Creation(CreationError::NoRoom {
        stable_type: stable_type.clone(),
    })
}

fn deadline_exceeded() -> ZLinkError {
    ZLinkError::DeadlinePassed {
        operation: "Instance Spot call",
    }
}

fn type_mismatch(id: &ObjectId, kind: ObjectKind, stable_type: &StableType) -> ZLinkError {
    ZLinkError::TypeMismatch {
        target: crate::messaging::Target::object(zlink_codec::keys::AuthorityKind::Spot, id),
        kind,
        stable_type: stable_type.clone(),
    }
}
