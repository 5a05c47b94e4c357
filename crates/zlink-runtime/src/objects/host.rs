//! The objects of one Object Server MeshNode: its registered Actor types and the activations it
//! owns. Creation on this node runs the factory for a `Reserved` record this host run owns and
//! commits it `Ready` (spec 21 §7); a failed factory aborts the reservation and returns its
//! capacity.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use zlink_codec::payload::Registry;
use zlink_codec::records::{AllocationState, ObjectKind};
use zlink_codec::{MeshName, ObjectId, RoutingId, StableType};

use super::actor::{ErasedActorType, LiveObject};
use super::registration::{ActorCall, ActorOutput, FactoryContext};
use crate::location::{AuthorityHandle, AuthorityRead, LocationRuntime, Outcome};
use crate::mesh::messaging::{ErrorKind, RouteKind, UnavailableReason, ZLinkError};

/// A snapshot of one Actor incarnation (spec 21 §7.2): never a message target.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ActorRef {
    /// The global id.
    pub id: ObjectId,
    /// The ObjectGeneration of this incarnation.
    pub generation: u64,
    /// The MeshName at lookup time.
    pub mesh: MeshName,
    /// The node RID at lookup time.
    pub node: RoutingId,
}

mod decimal {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&v.to_string())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The wire form of an [`ActorRef`] in command replies (ObjectGeneration as a decimal string,
/// spec 21 §7.2; the RID as lowercase hex).
#[derive(Debug, Serialize, Deserialize)]
struct ActorRefWire {
    id: String,
    #[serde(rename = "objectGeneration", with = "decimal")]
    generation: u64,
    #[serde(rename = "meshName")]
    mesh: String,
    #[serde(rename = "routingIdHex")]
    node_hex: String,
}

impl ActorRef {
    /// The command-reply JSON.
    pub(crate) fn to_json(&self) -> Result<Vec<u8>, ZLinkError> {
        let wire = ActorRefWire {
            id: self.id.as_str().to_owned(),
            generation: self.generation,
            mesh: self.mesh.as_str().to_owned(),
            node_hex: self.node.to_string(),
        };
        serde_json::to_vec(&wire)
            .map_err(|e| ZLinkError::application(ErrorKind::InternalFailure, &e.to_string()))
    }

    /// Parses the command-reply JSON.
    pub(crate) fn from_json(bytes: &[u8]) -> Result<Self, ZLinkError> {
        let bad = |e: String| {
            ZLinkError::application(ErrorKind::ProtocolError, &format!("actor ref: {e}"))
        };
        let w: ActorRefWire = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
        let hex = w.node_hex.as_bytes();
        if hex.len() % 2 != 0 {
            return Err(bad("odd RID hex".into()));
        }
        let mut raw = Vec::with_capacity(hex.len() / 2);
        for pair in hex.chunks(2) {
            let text = std::str::from_utf8(pair).map_err(|e| bad(e.to_string()))?;
            raw.push(u8::from_str_radix(text, 16).map_err(|e| bad(e.to_string()))?);
        }
        Ok(Self {
            id: ObjectId::new(w.id).map_err(|e| bad(e.to_string()))?,
            generation: w.generation,
            mesh: MeshName::new(w.mesh).map_err(|e| bad(e.to_string()))?,
            node: RoutingId::new(raw).map_err(|e| bad(e.to_string()))?,
        })
    }

    pub(crate) fn of(handle: &AuthorityHandle) -> Self {
        let node = handle.node();
        Self {
            id: handle.id().clone(),
            generation: handle.object_generation().get(),
            mesh: node.mesh,
            node: node.routing_id,
        }
    }
}

/// The `zlink.actor.create` command body: which reserved incarnation to create.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CreateCommand {
    pub(crate) id: String,
    #[serde(with = "decimal")]
    pub(crate) generation: u64,
    pub(crate) stable_type: String,
}

/// The Actor side of one Object Server node.
pub(crate) struct ObjectHost {
    pub(crate) mesh: MeshName,
    pub(crate) rid: RoutingId,
    types: HashMap<StableType, Arc<dyn ErasedActorType>>,
    live: Mutex<HashMap<ObjectId, Arc<dyn LiveObject>>>,
    codecs: Registry,
    pub(crate) location: Arc<LocationRuntime>,
    pub(crate) routes: super::routes::RouteCache,
    mailbox: (usize, usize),
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

/// The default per-Actor mailbox: jobs.
pub const DEFAULT_ACTOR_MAILBOX_JOBS: usize = 1024;
/// The default per-Actor mailbox: bytes (16 MiB).
pub const DEFAULT_ACTOR_MAILBOX_BYTES: usize = 16 * 1024 * 1024;

impl ObjectHost {
    pub(crate) fn new(
        mesh: MeshName,
        rid: RoutingId,
        types: HashMap<StableType, Arc<dyn ErasedActorType>>,
        codecs: Registry,
        location: Arc<LocationRuntime>,
        route_cache_max_age: std::time::Duration,
    ) -> Self {
        Self {
            mesh,
            rid,
            types,
            live: Mutex::new(HashMap::new()),
            codecs,
            location,
            routes: super::routes::RouteCache::new(route_cache_max_age),
            mailbox: (DEFAULT_ACTOR_MAILBOX_JOBS, DEFAULT_ACTOR_MAILBOX_BYTES),
        }
    }

    /// Creates the incarnation `handle` reserves on this node: runs the factory, starts the
    /// activation, commits `Ready`. A failing factory aborts the reservation (its capacity
    /// returns) and the creation ends with its error; a commit that finds the record changed
    /// (stale fence) drops the activation and ends `Unavailable`.
    pub(crate) async fn create_reserved(
        &self,
        handle: &AuthorityHandle,
    ) -> Result<ActorRef, ZLinkError> {
        let node = handle.node();
        let run = self.location.host_run();
        if handle.state() != AllocationState::Reserved
            || handle.kind() != ObjectKind::Actor
            || node.routing_id != self.rid
            || node.mesh != self.mesh
            || Some(handle.owner()) != run.as_ref()
        {
            return Err(stale("the reservation does not name this node's run"));
        }
        let Some(kind) = self.types.get(handle.stable_type()) else {
            return Err(ZLinkError::application(
                ErrorKind::TypeMismatch,
                &format!(
                    "this node has no Actor type {:?}",
                    handle.stable_type().as_str()
                ),
            ));
        };
        let ctx = FactoryContext {
            id: handle.id().as_str().to_owned(),
            stable_type: handle.stable_type().as_str().to_owned(),
        };
        let live = match kind
            .activate(ctx, self.codecs.clone(), self.mailbox.0, self.mailbox.1)
            .await
        {
            Ok(live) => live,
            Err(e) => {
                if let Err(abort) = self.location.authority().abort(handle).await {
                    tracing::warn!(error = %abort, "aborting a failed creation failed");
                }
                return Err(ZLinkError::application(
                    ErrorKind::InternalFailure,
                    &format!("the factory failed: {e}"),
                ));
            }
        };
        match self.location.authority().commit(handle, None).await {
            Ok(Outcome::Applied(ready)) => {
                let r = ActorRef::of(&ready);
                self.live.lock().insert(ready.id().clone(), live);
                Ok(r)
            }
            Ok(Outcome::Conflict(c)) => {
                live.close().await;
                tracing::info!(?c, "creation commit conflicted");
                Err(stale("the record changed before the commit"))
            }
            Err(e) => {
                live.close().await;
                Err(ZLinkError::application(
                    ErrorKind::InternalFailure,
                    &format!("the creation commit failed: {e}"),
                ))
            }
        }
    }

    /// Runs the `zlink.actor.create` command: re-reads the record and creates the reserved
    /// incarnation it names (the id, type and generation must all match).
    pub(crate) async fn create_command(&self, cmd: CreateCommand) -> Result<ActorRef, ZLinkError> {
        let id = ObjectId::new(cmd.id)
            .map_err(|e| ZLinkError::application(ErrorKind::ProtocolError, &e.to_string()))?;
        let read = self
            .location
            .authority()
            .read(ObjectKind::Actor, &id)
            .await
            .map_err(store_failure)?;
        match read {
            AuthorityRead::Found { handle, .. }
                if handle.object_generation().get() == cmd.generation
                    && handle.stable_type().as_str() == cmd.stable_type =>
            {
                self.create_reserved(&handle).await
            }
            _ => Err(stale("the reserved record is gone or another incarnation")),
        }
    }

    /// Delivers one message to a live Actor of this node.
    pub(crate) fn deliver(
        &self,
        id: &ObjectId,
        route: RouteKind,
        call: ActorCall,
        cost: usize,
        reply: Option<tokio::sync::oneshot::Sender<ActorOutput>>,
    ) -> Result<(), ZLinkError> {
        let live = self.live.lock().get(id).map(Arc::clone);
        match live {
            Some(l) => l.submit(route, call, cost, reply),
            None => Err(ZLinkError::Unavailable {
                target: format!("actor {:?}", id.as_str()),
                reason: UnavailableReason::NotConnected,
            }),
        }
    }

    /// Destroys the incarnation `generation` of `id` owned by this node (spec 21 §7.2): the
    /// record is deleted (its capacity returned) and then the activation closes after its
    /// accepted turns. Missing → `false`; another incarnation → `InvalidOperation`; a record
    /// this node does not own → `Unavailable`.
    pub(crate) async fn destroy(&self, id: &ObjectId, generation: u64) -> Result<bool, ZLinkError> {
        let read = self
            .location
            .authority()
            .read(ObjectKind::Actor, id)
            .await
            .map_err(store_failure)?;
        let handle = match read {
            AuthorityRead::Missing { .. } => return Ok(false),
            AuthorityRead::Found { handle, .. } => handle,
        };
        if handle.object_generation().get() != generation {
            return Err(ZLinkError::application(
                ErrorKind::InvalidOperation,
                &format!(
                    "actor {:?} is incarnation {}, not {generation}",
                    id.as_str(),
                    handle.object_generation().get()
                ),
            ));
        }
        match self.location.authority().delete(&handle).await {
            Ok(Outcome::Applied(())) => {}
            Ok(Outcome::Conflict(c)) => {
                tracing::info!(?c, "destroy conflicted");
                return Err(stale("the record is not an Active record of this node"));
            }
            Err(e) => return Err(store_failure(e)),
        }
        let live = self.live.lock().remove(id);
        if let Some(l) = live {
            l.close().await;
        }
        Ok(true)
    }

    /// Whether `id` has a live activation here.
    pub(crate) fn is_live(&self, id: &ObjectId) -> bool {
        self.live.lock().contains_key(id)
    }

    /// Why a message for `id` found no live activation here, by the record: none → `NotFound`
    /// (destroyed or never created), else `Unavailable` (another node or incarnation owns it,
    /// or it is being created).
    pub(crate) async fn not_live(location: Arc<LocationRuntime>, id: ObjectId) -> ZLinkError {
        let id = &id;
        match location.authority().read(ObjectKind::Actor, id).await {
            Ok(AuthorityRead::Missing { .. }) => ZLinkError::NoRoute {
                target: format!("actor {:?}", id.as_str()),
            },
            Ok(AuthorityRead::Found { .. }) => ZLinkError::Unavailable {
                target: format!("actor {:?}", id.as_str()),
                reason: UnavailableReason::NotConnected,
            },
            Err(e) => store_failure(e),
        }
    }

    /// Closes every activation (shutdown): accepted messages finish first.
    pub(crate) async fn close_all(&self) {
        let all: Vec<Arc<dyn LiveObject>> = self.live.lock().drain().map(|(_, l)| l).collect();
        for l in all {
            l.close().await;
        }
    }
}

pub(crate) fn stale(why: &str) -> ZLinkError {
    ZLinkError::application(
        ErrorKind::Unavailable,
        &format!("stale authority fence: {why}"),
    )
}

pub(crate) fn store_failure(e: crate::location::LocationError) -> ZLinkError {
    ZLinkError::application(ErrorKind::InternalFailure, &format!("location store: {e}"))
}
