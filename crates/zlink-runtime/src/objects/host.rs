//! The objects of one Object Server MeshNode: its registered Actor and Spot types and the
//! activations it owns (one per object, keyed by the authority kind and global id). Creation
//! on this node lives in `create.rs`; this file holds the live set, delivery, and the end of an
//! incarnation (Destroy / Close, spec 21 §7.2).

use std::sync::Arc;

use parking_lot::Mutex;
use zlink_codec::keys::AuthorityKind;
use zlink_codec::payload::Registry;
use zlink_codec::records::{AllocationState, ObjectKind};
use zlink_codec::{MeshName, ObjectId, RoutingId, StableType};
use zlink_store_spi::entropy::HashMap;

use super::live::{ErasedType, LiveObject};
use super::live_set::{Classified, LiveCounts, LiveSet};
use super::registration::{EntryCallback, EntryClosing, ObjectCall};
use crate::messaging::{InvalidCall, RouteKind, StaleReason, UnavailableReason, ZLinkError};
use zlink_location::{AuthorityRead, HostRun, LocationRuntime, Outcome};

pub(crate) mod audit;
mod closing;
mod stale_move;
pub(crate) use closing::ClosingFailure;

/// The default per-object mailbox: jobs.
pub const DEFAULT_ACTOR_MAILBOX_JOBS: usize = 1024;
/// The default per-object mailbox: bytes (16 MiB).
pub const DEFAULT_ACTOR_MAILBOX_BYTES: usize = 16 * 1024 * 1024;

/// The default activation concurrency of a node (spec 06 §4).
pub(crate) const DEFAULT_ACTIVATION_CONCURRENCY: usize = 128;

/// Which object a live activation is: its authority kind and global id.
pub(crate) type ObjectKey = (AuthorityKind, ObjectId);

/// What a remote Destroy / Close (our command for 48) fixes besides the incarnation: the
/// AuthorityOwnerGeneration, the StoreVersion the source read and the target host run
/// generation; the owner ends the object only if all of them still hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EndFence {
    pub(crate) owner_generation: u64,
    pub(crate) version: String,
    pub(crate) target_run: u64,
}

/// One registered type as the host runs it.
#[derive(Clone)]
pub(crate) struct HostedType {
    pub(crate) kind: ObjectKind,
    /// A User Spot's execution mode.
    pub(crate) execution: Option<super::registration::SpotExecution>,
    /// The type's one relocation choice (validated at startup).
    pub(crate) relocation: Option<super::registration::RelocationChoice>,
    pub(crate) erased: Arc<dyn ErasedType>,
}

/// The object side of one Object Server node.
pub(crate) struct ObjectHost {
    pub(crate) mesh: MeshName,
    pub(crate) rid: RoutingId,
    pub(crate) types: HashMap<StableType, HostedType>,
    /// The live activations, each with the host run its record names as owner, and their
    /// counts.
    live: Mutex<LiveSet<LiveEntry>>,
    pub(crate) codecs: Registry,
    pub(crate) location: Arc<LocationRuntime>,
    /// The root's relocation settings.
    pub(crate) relocation_options: crate::objects::RelocationOptions,
    /// The admission door every message job of this node's activations passes.
    pub(crate) door: super::door::Door,
    pub(crate) routes: super::routes::RouteCache,
    pub(crate) mailbox: (usize, usize),
    /// The Entry Spot's Actor creation callback (`None`: every creation is approved).
    pub(crate) entry_callback: Option<EntryCallback>,
    /// This node lifecycle's Entry Spot id (Actors placed here become its members).
    pub(crate) entry_spot: Option<ObjectId>,
    /// The Entry Spot's closing callback (`HostShutdown` only: an Entry Spot never moves).
    pub(crate) entry_closing: Option<EntryClosing>,
    /// The activation concurrency permits (spec 06 §4): held while a factory and its
    /// initialization run, returned when they finish.
    pub(crate) activations: Arc<tokio::sync::Semaphore>,
    /// The permits `activations` started with.
    pub(crate) activation_limit: u32,
    /// The node's capacity limits (the descriptor projects them beside the usage).
    pub(crate) limits: zlink_location::CapacityLimits,
    /// Instance Spot cold activation on this node (`instance/`).
    pub(crate) instances: super::instance::Instances,
    /// Live relocations through this node: held, followed and prepared objects.
    pub(crate) interception: Arc<dyn super::interception::Interception>,
    /// Recovering dead runs' objects nobody saw leave (`recovery.rs`).
    pub(crate) recovery: super::recovery::Recovery,
    /// The single move entry a cross-node join runs through (`join.rs`): the host layer
    /// installs the relocation layer's once the host is built; unset, such a join is refused.
    pub(crate) join_mover: std::sync::OnceLock<Arc<dyn super::join::JoinMover>>,
    /// The host state (`None` in tests built without a root): new objects are placed here
    /// only while `Serving` (spec 28 §10).
    host_state: Option<tokio::sync::watch::Receiver<zlink_codec::records::HostState>>,
    /// Route sources, creations and timer ticks (resolved once, when the host was built).
    pub(crate) metrics: crate::telemetry::ObjectMetrics,
}

impl std::fmt::Debug for ObjectHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectHost")
            .field("mesh", &self.mesh)
            .field("types", &self.types.keys().collect::<Vec<_>>())
            .field("live", &self.live.lock().len())
            .finish_non_exhaustive()
    }
}

/// A live activation with what its record says of it.
struct LiveEntry {
    /// The host run the record names as owner.
    run: HostRun,
    /// The object kind and stable type (the descriptor's usage projection counts them).
    kind: ObjectKind,
    stable_type: StableType,
    /// The ObjectGeneration of the incarnation.
    generation: u64,
    /// A `SpotWide` member: `run` is its Spot's owner, which its own record follows only
    /// after the move (the audit judges such a record by its incarnation alone).
    member: bool,
    object: Arc<dyn LiveObject>,
}

impl Classified for LiveEntry {
    fn kind(&self) -> ObjectKind {
        self.kind
    }
    fn stable_type(&self) -> &StableType {
        &self.stable_type
    }
}

/// What a message names: an Actor or a Spot by global id.
pub(crate) fn what(kind: AuthorityKind, id: &ObjectId) -> crate::messaging::Target {
    crate::messaging::Target::object(kind, id)
}

impl ObjectHost {
    pub(crate) fn new(
        mesh: MeshName,
        rid: RoutingId,
        types: HashMap<StableType, HostedType>,
        codecs: Registry,
        location: Arc<LocationRuntime>,
        route_cache_max_age: std::time::Duration,
        entry: (Option<ObjectId>, Option<EntryCallback>),
    ) -> Self {
        let door = super::door::Door::new(Arc::clone(&location), mesh.clone(), rid.clone());
        Self {
            mesh,
            rid,
            types,
            live: Mutex::new(LiveSet::default()),
            codecs,
            door,
            location,
            relocation_options: crate::objects::RelocationOptions::default(),
            routes: super::routes::RouteCache::new(route_cache_max_age),
            mailbox: (DEFAULT_ACTOR_MAILBOX_JOBS, DEFAULT_ACTOR_MAILBOX_BYTES),
            entry_spot: entry.0,
            entry_callback: entry.1,
            entry_closing: None,
            activations: Arc::new(tokio::sync::Semaphore::new(DEFAULT_ACTIVATION_CONCURRENCY)),
            activation_limit: DEFAULT_ACTIVATION_CONCURRENCY as u32,
            limits: zlink_location::CapacityLimits::default(),
            instances: super::instance::Instances::new(),
            interception: Arc::new(super::interception::NoMoves),
            recovery: super::recovery::Recovery::default(),
            join_mover: std::sync::OnceLock::new(),
            host_state: None,
            metrics: crate::telemetry::ObjectMetrics::new(),
        }
    }

    /// The same host with `interception` taking its objects' messages while they move (the
    /// host layer installs the relocation layer's; without one nothing is ever intercepted).
    pub(crate) fn with_interception(
        mut self,
        interception: Arc<dyn super::interception::Interception>,
    ) -> Self {
        self.interception = interception;
        self
    }

    /// The same host with the root's relocation settings.
    pub(crate) fn with_relocation_options(
        mut self,
        options: crate::objects::RelocationOptions,
    ) -> Self {
        self.relocation_options = options;
        self
    }

    /// The same host with the Entry Spot's closing callback.
    pub(crate) fn with_entry_closing(mut self, closing: Option<EntryClosing>) -> Self {
        self.entry_closing = closing;
        self
    }

    /// The same host following the root's host state.
    pub(crate) fn with_host_state(
        mut self,
        state: tokio::sync::watch::Receiver<zlink_codec::records::HostState>,
    ) -> Self {
        self.host_state = Some(state);
        self
    }

    /// Whether a new object may be created, joined or claimed here: only while the host is
    /// `Serving` (spec 28 §10: rejected while `Relocating`, `Relocated` and `Draining`).
    pub(crate) fn accepts_new_objects(&self) -> bool {
        self.host_state
            .as_ref()
            .is_none_or(|s| *s.borrow() == zlink_codec::records::HostState::Serving)
    }

    /// Whether a new object may be placed on `node` from here (spec 21 §4 placement): any
    /// listed node, except this one while it takes no new objects (28 §10). Its own discovery
    /// list may still show it `serving` until the next full read; it never places on itself.
    pub(crate) fn may_place_on(&self, node: &zlink_location::NodeKey) -> bool {
        self.accepts_new_objects() || node.routing_id != self.rid || node.mesh != self.mesh
    }

    /// The error a creation, join or claim gets while the host does not accept new objects.
    pub(crate) fn not_accepting(&self) -> ZLinkError {
        ZLinkError::Unavailable {
            target: crate::messaging::Target::NewObjects(self.mesh.clone()),
            reason: crate::messaging::UnavailableReason::NotServing,
        }
    }

    /// Every live activation: its key, kind and stable type (a walk over all of them: for a
    /// host Relocate's preflight and tests, not a per-object path).
    pub(crate) fn live_list(&self) -> Vec<(ObjectKey, ObjectKind, StableType)> {
        self.live
            .lock()
            .iter()
            .map(|(k, e)| (k.clone(), e.kind, e.stable_type.clone()))
            .collect()
    }

    /// The same host with `permits` activation concurrency permits (positive, validated at
    /// startup).
    pub(crate) fn with_activation_concurrency(mut self, permits: u32) -> Self {
        self.activations = Arc::new(tokio::sync::Semaphore::new(permits as usize));
        self.activation_limit = permits;
        self
    }

    /// The same host with the node's capacity limits.
    pub(crate) fn with_limits(mut self, limits: zlink_location::CapacityLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Live activations here: Actors, Spots, and Spots per (kind, stable type) (kept by the
    /// live set: the cost is the number of live Spot types).
    pub(crate) fn live_counts(&self) -> LiveCounts {
        self.live.lock().counts().clone()
    }

    /// Live Actors and Spots here (kept by the live set).
    pub(crate) fn live_totals(&self) -> (u64, u64) {
        let live = self.live.lock();
        (live.counts().actors, live.counts().spots)
    }

    /// How many activations are live here.
    pub(crate) fn live_len(&self) -> usize {
        self.live.lock().len()
    }

    /// The live activation of `key` and the ObjectGeneration it runs, if it is live here.
    pub(crate) fn live_generation(&self, key: &ObjectKey) -> Option<(Arc<dyn LiveObject>, u64)> {
        self.live
            .lock()
            .get(key)
            .map(|e| (Arc::clone(&e.object), e.generation))
    }

    /// The kind and stable type of the live activation of `key`, with the activation.
    pub(crate) fn live_class(
        &self,
        key: &ObjectKey,
    ) -> Option<(ObjectKind, StableType, Arc<dyn LiveObject>)> {
        self.live
            .lock()
            .get(key)
            .map(|e| (e.kind, e.stable_type.clone(), Arc::clone(&e.object)))
    }

    /// Jobs queued or running in the mailboxes of this node's activations (a count every
    /// activation built through the node's door keeps: no walk).
    pub(crate) fn mailbox_jobs(&self) -> u64 {
        self.door.jobs().get()
    }

    /// The live activation of `key` on this node, if any.
    pub(crate) fn live_object(&self, key: &ObjectKey) -> Option<Arc<dyn LiveObject>> {
        self.live.lock().get(key).map(|e| Arc::clone(&e.object))
    }

    /// The live activation of `key` with the ObjectGeneration of its incarnation.
    pub(crate) fn live_incarnation(&self, key: &ObjectKey) -> Option<(Arc<dyn LiveObject>, u64)> {
        self.live
            .lock()
            .get(key)
            .map(|e| (Arc::clone(&e.object), e.generation))
    }

    /// Makes `live` the activation of `key`, the incarnation `record` just committed Ready.
    pub(crate) fn insert_live(
        &self,
        key: ObjectKey,
        live: Arc<dyn LiveObject>,
        record: &zlink_location::AuthorityHandle,
    ) {
        let entry = LiveEntry {
            run: self.shared_run(record.owner()),
            kind: record.kind(),
            stable_type: self.shared_type(record.stable_type()),
            generation: record.object_generation().get(),
            member: false,
            object: live,
        };
        self.live.lock().insert(key.clone(), entry);
        self.interception.went_live(&key);
    }

    /// `run` as this host's own run when it is that (its owner id shared by every live entry,
    /// not a copy decoded from each record).
    fn shared_run(&self, run: &HostRun) -> HostRun {
        match self.location.host_run() {
            Some(own) if &own == run => own,
            _ => run.clone(),
        }
    }

    /// `stable_type` as the registered type's name (shared by every live entry).
    fn shared_type(&self, stable_type: &StableType) -> StableType {
        self.types
            .get_key_value(stable_type)
            .map_or_else(|| stable_type.clone(), |(k, _)| k.clone())
    }

    /// Makes `live` the activation of `key`, the incarnation `generation` of the member Actor
    /// type `stable_type` that moved here with its `SpotWide` User Spot, whose record `spot`
    /// now names this node (the member resolves through it).
    pub(crate) fn insert_live_member(
        &self,
        key: ObjectKey,
        live: Arc<dyn LiveObject>,
        spot: &zlink_location::AuthorityHandle,
        stable_type: StableType,
        generation: u64,
    ) {
        let entry = LiveEntry {
            run: self.shared_run(spot.owner()),
            kind: ObjectKind::Actor,
            stable_type: self.shared_type(&stable_type),
            generation,
            member: true,
            object: live,
        };
        self.live.lock().insert(key.clone(), entry);
        self.interception.went_live(&key);
    }

    /// Takes the activation of `key` out of the live set (its incarnation moved away).
    pub(crate) fn remove_live(&self, key: &ObjectKey) -> Option<Arc<dyn LiveObject>> {
        self.live.lock().remove(key).map(|e| e.object)
    }

    /// Removes `live` from the live set if it is still the activation of `key` there, not a
    /// newer one made live since; whether it did.
    pub(crate) fn remove_live_if(&self, key: &ObjectKey, live: &Arc<dyn LiveObject>) -> bool {
        let mut set = self.live.lock();
        let same = set
            .get(key)
            .is_some_and(|e| std::ptr::addr_eq(Arc::as_ptr(&e.object), Arc::as_ptr(live)));
        if same {
            set.remove(key);
        }
        same
    }

    /// Delivers one message to a live activation of this node.
    pub(crate) fn deliver(
        &self,
        key: &ObjectKey,
        route: RouteKind,
        call: ObjectCall,
        cost: usize,
        reply: Option<super::live::Completion>,
    ) -> Result<(), ZLinkError> {
        let held = super::held::Held {
            route,
            call,
            cost,
            reply,
            origin: None,
        };
        // Submitted under the relocation lock when live (a seal cannot fall in between).
        if let Some(live) = self.live_object(key) {
            return self
                .interception
                .submit_unless_taken(key, held, live.as_ref(), None);
        }
        let Some(super::held::Held {
            route,
            call,
            cost,
            reply,
            ..
        }) = self.interception.intercept(key, held)
        else {
            return Ok(());
        };
        let live = self.live_object(key);
        match live {
            Some(l) => l.submit(route, call, cost, reply),
            None => Err(ZLinkError::Unavailable {
                target: what(key.0, &key.1),
                reason: UnavailableReason::NotConnected,
            }),
        }
    }

    /// Ends the incarnation `generation` of `key` owned by this node (Destroy of an Actor,
    /// Close of a Spot; spec 21 §7.2): the record is deleted (its capacity returned), then the
    /// activation closes after its accepted turns. Missing → `false`; another incarnation →
    /// `InvalidOperation`; a record this node does not own, or one not Ready → `Unavailable`.
    pub(crate) async fn end(
        &self,
        key: &ObjectKey,
        generation: u64,
        fence: Option<&EndFence>,
    ) -> Result<bool, ZLinkError> {
        let kind = match key.0 {
            AuthorityKind::Actor => ObjectKind::Actor,
            AuthorityKind::Spot => ObjectKind::UserSpot,
        };
        let read = self
            .location
            .authority()
            .read(kind, &key.1)
            .await
            .map_err(store_failure)?;
        let handle = match read {
            AuthorityRead::Missing { .. } => return Ok(false),
            AuthorityRead::Found { handle, .. } => handle,
        };
        if handle.object_generation().get() != generation {
            return Err(ZLinkError::InvalidCall(InvalidCall::OtherIncarnation {
                target: what(key.0, &key.1),
                named: generation,
                current: handle.object_generation().get(),
            }));
        }
        if handle.state() != AllocationState::Active {
            return Err(ZLinkError::Unavailable {
                target: what(key.0, &key.1),
                reason: UnavailableReason::NotServing,
            });
        }
        // An Instance Spot's Close and its relocation are ordered by their claim (28 §7).
        let _closing = match handle.kind() {
            ObjectKind::InstanceSpot => {
                match self
                    .instances
                    .endings
                    .claim(&key.1, super::instance::Ending::Closing)
                {
                    _ if self.interception.covers(key) => {
                        return Err(super::instance::moving(&key.1));
                    }
                    Ok(claim) => Some(claim),
                    Err(super::instance::Ending::Moving) => {
                        return Err(super::instance::moving(&key.1));
                    }
                    Err(super::instance::Ending::Closing) => None,
                }
            }
            _ => None,
        };
        if let Some(f) = fence {
            if handle.authority_owner_generation().get() != f.owner_generation
                || handle.version().as_str() != f.version
                || handle.owner().lease_generation.get() != f.target_run
                || self.location.host_run().as_ref() != Some(handle.owner())
            {
                return Err(StaleReason::EndFenceChanged.into());
            }
        }
        match self.location.authority().delete(&handle).await {
            Ok(Outcome::Applied(())) => {}
            Ok(Outcome::Conflict(c)) => {
                tracing::info!(?c, "destroy conflicted");
                return Err(StaleReason::NotActiveHere.into());
            }
            Err(e) => return Err(store_failure(e)),
        }
        let live = self.live.lock().remove(key);
        if let Some(LiveEntry { object: l, .. }) = live {
            l.close().await;
        }
        Ok(true)
    }

    /// Whether `key` has a live activation here.
    pub(crate) fn is_live(&self, key: &ObjectKey) -> bool {
        self.live.lock().contains_key(key)
    }

    /// Why a message for `key` found no live activation here, by the record: none → `NotFound`
    /// (destroyed or never created), else `Unavailable` (another node or incarnation owns it,
    /// or it is being created). With `judge` (this node's host), the read also judges a record
    /// of this run naming a move that no longer runs ([`Self::remove_if_stale_move`]): messages
    /// from other nodes may be the only ones that ever reach such a record's owner.
    pub(crate) async fn not_live(
        location: Arc<LocationRuntime>,
        key: ObjectKey,
        judge: Option<Arc<ObjectHost>>,
    ) -> ZLinkError {
        let kind = match key.0 {
            AuthorityKind::Actor => ObjectKind::Actor,
            AuthorityKind::Spot => ObjectKind::UserSpot,
        };
        let read = match location.authority().read(kind, &key.1).await {
            Ok(read) => read,
            Err(e) => return route_failure(&key, store_failure(e)),
        };
        if let Some(host) = judge {
            host.remove_if_stale_move(&key, &read);
        }
        match read {
            AuthorityRead::Missing { .. } => ZLinkError::NoRoute {
                target: what(key.0, &key.1),
            },
            AuthorityRead::Found { .. } => ZLinkError::Unavailable {
                target: what(key.0, &key.1),
                reason: UnavailableReason::NotConnected,
            },
        }
    }
}

/// A Location Store operation that did not succeed, as a call result: past the admission
/// deadline the work is refused (`Unavailable`, spec 21 §5); anything else is a
/// [`ZLinkError::LocationStore`] keeping the Store error, whose kind keeps a node without room
/// `CapacityExceeded` (spec 21 §4; 28 §4) and makes the rest `InternalFailure`.
pub(crate) fn store_failure(e: zlink_location::LocationError) -> ZLinkError {
    match e {
        zlink_location::LocationError::Admission(_) => super::door::refused(),
        other => ZLinkError::location_store(other),
    }
}

/// Whether `e` says the Location Store could not be reached or did not answer (the backend
/// unreachable, a timeout, a cancellation): a transient outage, not a broken record or
/// contract.
pub(crate) fn store_unreachable(e: &zlink_location::LocationError) -> bool {
    use zlink_store_spi::{FailureKind, StoreError};
    matches!(
        e,
        zlink_location::LocationError::Store(
            StoreError::Failure {
                kind: FailureKind::Unavailable,
                ..
            } | StoreError::TimedOut
                | StoreError::Cancelled
        )
    )
}

/// A failure met while finding the owner of `key` for a message (spec 21 §10, §12 "Store
/// Failure"; 06 §20 "route unavailable"): a Store that could not be reached is `Unavailable`
/// (nothing was sent, the caller may try again); every other error is kept as it is.
pub(crate) fn route_failure(key: &ObjectKey, e: ZLinkError) -> ZLinkError {
    match e {
        ZLinkError::LocationStore { source } if store_unreachable(&source) => {
            tracing::debug!(error = %source, "the owner could not be read: the store is unreachable");
            ZLinkError::Unavailable {
                target: what(key.0, &key.1),
                reason: UnavailableReason::StoreUnreachable,
            }
        }
        other => other,
    }
}
