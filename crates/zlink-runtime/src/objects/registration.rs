//! Object type registration on an Object Server's MeshNode builder (spec 06 §4, §15, §17, §23).
//!
//! Each Actor, User Spot and Instance Spot type is registered under a stable type (UTF-8,
//! 1..=255 bytes, case-sensitive) with a factory, and its configure step chooses exactly one
//! relocation policy: [`disable_relocation`](ActorType::disable_relocation),
//! [`recreate_on_relocation`](ActorType::recreate_on_relocation) or
//! [`preserve_state_with`](ActorType::preserve_state_with) an adapter of the matching kind.
//! A User Spot type also fixes its execution mode ([`SpotExecution`]) and, for `SpotWide`, its
//! relocation readiness mode ([`ReadinessMode`]). Nothing is checked while registering: the
//! root's startup validation reports every problem as a typed `StartupError` before any socket
//! binds or Store request.
//!
//! An adapter of the wrong kind cannot be registered: [`ActorType`] takes only an
//! [`ActorStateAdapter`] of its own state type and [`SpotType`] only a [`SpotStateAdapter`].

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use zlink_codec::payload::Registry;
use zlink_codec::records::RelocationPolicy;
use zlink_store_spi::entropy::HashMap;

use super::lifecycle::Lifecycle;
use crate::messaging::{
    BoxError, BoxFuture, Message, Metadata, PacketName, Request, RouteKind, ZLinkError,
};

/// An Actor's state, built by its type's factory once per activation.
pub trait Actor: Send + 'static {
    /// Runs one tick of the timer `name` (a job of the activation, like a message; see
    /// [`Timers`](super::Timers)). Write it as an `async fn`. The default does nothing; an
    /// error is logged.
    fn on_timer(
        &mut self,
        ctx: super::TimerContext,
        name: &str,
    ) -> impl Future<Output = Result<(), BoxError>> + Send {
        let _ = (ctx, name);
        async { Ok(()) }
    }
}

/// A Spot's state, built by its type's factory once per activation.
pub trait Spot: Send + 'static {
    /// Runs one tick of the timer `name` (as [`Actor::on_timer`]). Write it as an `async fn`.
    /// The default does nothing.
    fn on_timer(
        &mut self,
        ctx: super::TimerContext,
        name: &str,
    ) -> impl Future<Output = Result<(), BoxError>> + Send {
        let _ = (ctx, name);
        async { Ok(()) }
    }
}

/// Which object and node a state adapter's [`capture_in`](ActorStateAdapter::capture_in) /
/// [`restore_in`](ActorStateAdapter::restore_in) runs for: the source node at capture, the
/// target node at restore.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdapterContext {
    /// The object's id.
    pub id: String,
    /// The object's stable type.
    pub stable_type: String,
    /// The MeshName of the node it runs on.
    pub mesh: zlink_codec::MeshName,
    /// The routing id of the node it runs on.
    pub routing_id: zlink_codec::RoutingId,
}

impl AdapterContext {
    /// The context of the activation a factory context builds.
    pub(crate) fn of(ctx: &FactoryContext) -> Self {
        Self {
            id: ctx.id.clone(),
            stable_type: ctx.stable_type.clone(),
            mesh: ctx.mesh.clone(),
            routing_id: ctx.routing_id.clone(),
        }
    }
}

/// Captures an Actor's state for a move and restores it on the target (spec 06 §17).
///
/// The runtime calls [`capture_bytes`](Self::capture_bytes) and
/// [`restore_bytes`](Self::restore_bytes); by default they wrap [`capture`](Self::capture)
/// and [`restore`](Self::restore). A state that already is (or holds) immutable shared bytes
/// can override them to move without copying: the captured [`Bytes`] are chunked and sent as
/// they are, and the verified payload the target assembled is handed to `restore_bytes` as it
/// is (the source's instance is only dropped after the move commits, and shared `Bytes` are
/// immutable, so neither side can change the other's copy).
pub trait ActorStateAdapter<A: Actor>: Send + Sync + 'static {
    /// The state as opaque bytes.
    fn capture(&self, actor: &A) -> Result<Vec<u8>, BoxError>;
    /// The state rebuilt from exactly the bytes [`capture`](Self::capture) produced.
    fn restore(&self, bytes: &[u8]) -> Result<A, BoxError>;
    /// The state as shared bytes (default: [`capture`](Self::capture), moved into `Bytes`
    /// without a copy).
    fn capture_bytes(&self, actor: &A) -> Result<Bytes, BoxError> {
        self.capture(actor).map(Bytes::from)
    }
    /// The state rebuilt from the verified payload, owned (default:
    /// [`restore`](Self::restore) on a borrow of it).
    fn restore_bytes(&self, bytes: Bytes) -> Result<A, BoxError> {
        self.restore(&bytes)
    }
    /// What the runtime calls to capture: [`capture_bytes`](Self::capture_bytes) told which
    /// object and node it runs for (default: ignores `ctx`).
    fn capture_in(&self, ctx: &AdapterContext, actor: &A) -> Result<Bytes, BoxError> {
        let _ = ctx;
        self.capture_bytes(actor)
    }
    /// What the runtime calls to restore: [`restore_bytes`](Self::restore_bytes) told which
    /// object and node it runs for, on the target (default: ignores `ctx`).
    fn restore_in(&self, ctx: &AdapterContext, bytes: Bytes) -> Result<A, BoxError> {
        let _ = ctx;
        self.restore_bytes(bytes)
    }
}

/// Captures a Spot's state for a move and restores it on the target (spec 06 §17).
///
/// As for [`ActorStateAdapter`], [`capture_bytes`](Self::capture_bytes) and
/// [`restore_bytes`](Self::restore_bytes) may be overridden to move the state without copying.
pub trait SpotStateAdapter<S: Spot>: Send + Sync + 'static {
    /// The state as opaque bytes.
    fn capture(&self, spot: &S) -> Result<Vec<u8>, BoxError>;
    /// The state rebuilt from exactly the bytes [`capture`](Self::capture) produced.
    fn restore(&self, bytes: &[u8]) -> Result<S, BoxError>;
    /// The state as shared bytes (default: [`capture`](Self::capture), moved into `Bytes`
    /// without a copy).
    fn capture_bytes(&self, spot: &S) -> Result<Bytes, BoxError> {
        self.capture(spot).map(Bytes::from)
    }
    /// The state rebuilt from the verified payload, owned (default:
    /// [`restore`](Self::restore) on a borrow of it).
    fn restore_bytes(&self, bytes: Bytes) -> Result<S, BoxError> {
        self.restore(&bytes)
    }
    /// What the runtime calls to capture: [`capture_bytes`](Self::capture_bytes) told which
    /// object and node it runs for (default: ignores `ctx`).
    fn capture_in(&self, ctx: &AdapterContext, spot: &S) -> Result<Bytes, BoxError> {
        let _ = ctx;
        self.capture_bytes(spot)
    }
    /// What the runtime calls to restore: [`restore_bytes`](Self::restore_bytes) told which
    /// object and node it runs for, on the target (default: ignores `ctx`).
    fn restore_in(&self, ctx: &AdapterContext, bytes: Bytes) -> Result<S, BoxError> {
        let _ = ctx;
        self.restore_bytes(bytes)
    }
}

/// How a User Spot runs its members' messages (spec 06 §17, 28 §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum SpotExecution {
    /// One turn at a time for the Spot and all its member Actors; the Spot moves as one
    /// aggregate.
    #[default]
    SpotWide,
    /// Each member Actor runs and moves on its own.
    PerActor,
}

/// When a `SpotWide` Spot is ready to move (spec 28 §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ReadinessMode {
    /// At any turn boundary.
    #[default]
    AnyTurnBoundary,
    /// Only at a boundary a handler signals with
    /// [`MessageContext::relocation_ready`]`().defer()` (see the
    /// [`on_relocation_ready_completed`](SpotType::on_relocation_ready_completed) callback).
    ApplicationSignaled,
}

/// One relocation choice of a configure step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RelocationChoice {
    /// DisableRelocation: the object never moves.
    Disable,
    /// RecreateOnRelocation: the target builds a fresh instance.
    Recreate,
    /// PreserveStateWith(adapter): the state is captured and restored.
    Preserve,
}

impl RelocationChoice {
    /// The policy as published in descriptors.
    pub fn policy(self) -> RelocationPolicy {
        match self {
            Self::Disable => RelocationPolicy::Disabled,
            Self::Recreate => RelocationPolicy::Recreate,
            Self::Preserve => RelocationPolicy::Snapshot,
        }
    }
}

impl fmt::Display for RelocationChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Disable => "DisableRelocation",
            Self::Recreate => "RecreateOnRelocation",
            Self::Preserve => "PreserveStateWith",
        })
    }
}

/// What a factory is told about the object it builds.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FactoryContext {
    /// The global id.
    pub id: String,
    /// The stable type.
    pub stable_type: String,
    /// The ObjectGeneration of the incarnation being built (the factory may run again for the
    /// same id and generation after a crash).
    pub generation: u64,
    /// The creation request bytes the creator attached, if any (Actors and User Spots).
    pub request: Option<Bytes>,
    /// The MeshName of the node that builds the object.
    pub mesh: zlink_codec::MeshName,
    /// The routing id of the node that builds the object.
    pub routing_id: zlink_codec::RoutingId,
    /// The new activation's timers (`FactoryContext::timers`).
    pub(crate) timers: super::Timers,
}

type Factory<T> =
    Arc<dyn Fn(FactoryContext) -> BoxFuture<'static, Result<T, ZLinkError>> + Send + Sync>;

/// What a handler sees of the message it runs (read-only).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MessageContext {
    /// The global id of the Actor or Spot the message is for.
    pub id: String,
    /// The packet name.
    pub packet: PacketName,
    /// The sender's metadata snapshot.
    pub metadata: Metadata,
    /// The relocation boundary handle (set for the handlers of an `ApplicationSignaled`
    /// `SpotWide` User Spot; inert for every other handler).
    pub(crate) relocation: super::lifecycle::RelocationReady,
    /// The node that runs the handler (set when the activation queues the message).
    pub(crate) node: super::door::RunsOn,
    /// The activation's timers (`MessageContext::timers`; set when the job is queued).
    pub(crate) timers: super::Timers,
}

impl MessageContext {
    /// The MeshName of the node that runs this handler (`None` only for a context no
    /// activation queued, which a handler never sees).
    pub fn mesh_name(&self) -> Option<&zlink_codec::MeshName> {
        self.node.get().map(|n| n.0)
    }

    /// The routing id of the node that runs this handler (after a move, the target's).
    pub fn routing_id(&self) -> Option<&zlink_codec::RoutingId> {
        self.node.get().map(|n| n.1)
    }

    /// The Actor manager of the node this handler runs on: the handler calls, creates and
    /// finds other Actors through it (`ctx.actors()?.request("p2", &Ping).await`). A request
    /// to the object this handler runs on waits for a turn this handler holds: it ends at its
    /// reply timeout. `NotConfigured` on a node without automatic topology (no discovery,
    /// as [`ZLinkHost::actors`](crate::ZLinkHost::actors)), `ShuttingDown` once the host
    /// stopped.
    pub fn actors(&self) -> Result<super::ActorManager, ZLinkError> {
        Ok(super::ActorManager::new(self.node.client()?))
    }

    /// The User Spot manager of the node this handler runs on (as [`actors`](Self::actors)).
    pub fn spots(&self) -> Result<super::SpotManager, ZLinkError> {
        Ok(super::SpotManager::new(self.node.client()?))
    }

    /// The handle this handler signals its relocation boundary with (spec 28 §5):
    /// `ctx.relocation_ready().defer()`. See [`RelocationReady`](super::RelocationReady).
    pub fn relocation_ready(&self) -> &super::lifecycle::RelocationReady {
        &self.relocation
    }
}

/// A handler's reply (`None` for a send).
pub(crate) type ObjectOutput = Result<Option<Reply>, ZLinkError>;

pub(crate) use super::reply::Reply;

/// One message for an object handler, payload still encoded.
pub(crate) struct ObjectCall {
    pub(crate) content_type: Bytes,
    pub(crate) payload: Bytes,
    /// The caller is on this node and takes the reply as the typed value ([`Reply::Typed`]).
    pub(crate) typed_reply: bool,
    pub(crate) context: MessageContext,
    /// The host's Application Job Queue permit this message holds while it waits (spec 06
    /// §3): returned just before its handler starts, or when the message is dropped unrun.
    pub(crate) job: crate::mesh::JobPermit,
}

/// A handler with its payload type erased: decodes, runs on the state, encodes the reply.
pub(crate) type ObjectHandler<T> = Arc<
    dyn for<'a> Fn(&'a mut T, ObjectCall, &'a Registry) -> BoxFuture<'a, ObjectOutput>
        + Send
        + Sync,
>;

/// One object type's message handlers, keyed by route and packet name, looked up by the
/// borrowed packet name (no key is built per message).
pub(crate) struct HandlerTable<T> {
    request: HashMap<String, ObjectHandler<T>>,
    send: HashMap<String, ObjectHandler<T>>,
}

impl<T> Default for HandlerTable<T> {
    fn default() -> Self {
        Self {
            request: HashMap::default(),
            send: HashMap::default(),
        }
    }
}

impl<T> HandlerTable<T> {
    fn side(&mut self, route: RouteKind) -> &mut HashMap<String, ObjectHandler<T>> {
        match route {
            RouteKind::Send => &mut self.send,
            RouteKind::Request => &mut self.request,
        }
    }

    /// Adds `handler`; `false` if `(route, packet)` already had one (it is replaced).
    fn insert(&mut self, route: RouteKind, packet: &str, handler: ObjectHandler<T>) -> bool {
        self.side(route)
            .insert(packet.to_owned(), handler)
            .is_none()
    }

    /// The handler of `(route, packet)`.
    pub(crate) fn get(&self, route: RouteKind, packet: &str) -> Option<&ObjectHandler<T>> {
        match route {
            RouteKind::Send => self.send.get(packet),
            RouteKind::Request => self.request.get(packet),
        }
    }
}

/// What a creation callback decides (spec 21 §7, 06 §17).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CreationDecision {
    /// Approved: the object becomes Ready; `reply` (optional application bytes) is returned to
    /// the creator with the ref.
    Approve {
        /// The optional application reply.
        reply: Option<Vec<u8>>,
    },
    /// A normal decline: nothing is created, the creator gets a typed `Rejected` error.
    Reject {
        /// Why (shown to the creator).
        reason: String,
    },
}

impl CreationDecision {
    /// Approves with no application reply.
    pub fn approve() -> Self {
        Self::Approve { reply: None }
    }

    /// Declines with `reason`.
    pub fn reject(reason: impl Into<String>) -> Self {
        Self::Reject {
            reason: reason.into(),
        }
    }
}

/// What a creation callback is told about the creation it decides.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CreationContext {
    /// The new object's global id.
    pub id: String,
    /// Its stable type.
    pub stable_type: String,
    /// Its ObjectGeneration.
    pub generation: u64,
    /// The creation request bytes the creator attached, if any.
    pub request: Option<Bytes>,
}

/// A User Spot's creation callback, run on the freshly built state before it is exposed.
pub(crate) type SpotCallback<S> = Arc<
    dyn for<'a> Fn(&'a mut S, CreationContext) -> BoxFuture<'a, Result<CreationDecision, BoxError>>
        + Send
        + Sync,
>;

/// The Entry Spot's Actor creation callback of an Object Server node.
#[derive(Clone)]
pub(crate) struct EntryCallback(
    pub(crate)  Arc<
        dyn Fn(CreationContext) -> BoxFuture<'static, Result<CreationDecision, BoxError>>
            + Send
            + Sync,
    >,
);

impl fmt::Debug for EntryCallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EntryCallback")
    }
}

/// The Entry Spot's closing callback of an Object Server node (`HostShutdown`, spec 28 §9).
#[derive(Clone)]
pub(crate) struct EntryClosing(
    pub(crate)  Arc<
        dyn Fn(super::ClosingContext) -> BoxFuture<'static, Result<(), BoxError>> + Send + Sync,
    >,
);

impl fmt::Debug for EntryClosing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EntryClosing")
    }
}

/// The configure step of one Actor type.
pub struct ActorType<A: Actor> {
    factory: Option<Factory<A>>,
    choices: Vec<RelocationChoice>,
    adapter: Option<Arc<dyn ActorStateAdapter<A>>>,
    handlers: HandlerTable<A>,
    duplicate: Option<String>,
}

impl<A: Actor> Default for ActorType<A> {
    fn default() -> Self {
        Self {
            factory: None,
            choices: Vec::new(),
            adapter: None,
            handlers: HandlerTable::default(),
            duplicate: None,
        }
    }
}

/// The typed message handlers every object type registers the same way.
macro_rules! message_handlers {
    ($ty:ident, $bound:ident, $what:literal) => {
        impl<T: $bound> $ty<T> {
            fn add(&mut self, route: RouteKind, packet: &str, handler: ObjectHandler<T>) {
                if !self.handlers.insert(route, packet, handler) {
                    self.duplicate
                        .get_or_insert_with(|| format!("{route} {packet:?}"));
                }
            }

            /// Registers `T`'s [`Handles<R>`](super::Handles) implementation (an `async fn`)
            /// as the request handler of `R`, as [`on_request`](Self::on_request) does.
            pub fn handles<R>(self) -> Self
            where
                R: Request,
                T: super::Handles<R>,
            {
                self.on_request::<R, _>(|state, request, ctx| {
                    Box::pin(super::Handles::handle(state, request, ctx))
                })
            }

            /// Registers `T`'s [`Receives<M>`](super::Receives) implementation (an `async fn`)
            /// as the one-way handler of `M`, as [`on_send`](Self::on_send) does.
            pub fn receives<M>(self) -> Self
            where
                M: Message,
                T: super::Receives<M>,
            {
                self.on_send::<M, _>(|state, message, ctx| {
                    Box::pin(super::Receives::receive(state, message, ctx))
                })
            }

            #[doc = concat!("Registers the request handler of `R`: it runs on the ", $what, "'s state, one")]
            /// turn at a time, and its result is the typed reply (spec 06 §9: key object type,
            /// request, `R::PACKET`). Write it as `|state, request, ctx| Box::pin(async move { .. })`.
            pub fn on_request<R, F>(mut self, handler: F) -> Self
            where
                R: Request,
                F: for<'a> Fn(&'a mut T, R, MessageContext) -> BoxFuture<'a, Result<R::Reply, ZLinkError>>
                    + Send
                    + Sync
                    + 'static,
            {
                let handler: ObjectHandler<T> = Arc::new(move |state, call, codecs| {
                    let decoded = crate::messaging::decode_payload::<R>(
                        codecs,
                        &call.content_type,
                        &call.payload,
                    );
                    match decoded {
                        Ok(request) => {
                            let typed = call.typed_reply;
                            let fut = handler(state, request, call.context);
                            Box::pin(async move {
                                // The handler's local call error is no result of the
                                // caller's call (spec 06 §20), as for a node-direct request.
                                let reply = fut
                                    .await
                                    .map_err(|e| crate::messaging::handler_error(e, R::PACKET))?;
                                if typed {
                                    return Ok(Some(Reply::typed(reply)));
                                }
                                let (ct, bytes) = crate::messaging::encode_payload(codecs, &reply)?;
                                Ok(Some(Reply::Encoded(ct, bytes)))
                            })
                        }
                        Err(e) => Box::pin(async move { Err(e) }),
                    }
                });
                self.add(RouteKind::Request, R::PACKET, handler);
                self
            }

            /// Registers the one-way handler of `M` (key object type, send, `M::PACKET`).
            pub fn on_send<M, F>(mut self, handler: F) -> Self
            where
                M: Message,
                F: for<'a> Fn(&'a mut T, M, MessageContext) -> BoxFuture<'a, Result<(), ZLinkError>>
                    + Send
                    + Sync
                    + 'static,
            {
                let handler: ObjectHandler<T> = Arc::new(move |state, call, codecs| {
                    match crate::messaging::decode_payload::<M>(
                        codecs,
                        &call.content_type,
                        &call.payload,
                    ) {
                        Ok(message) => {
                            let fut = handler(state, message, call.context);
                            Box::pin(async move { fut.await.map(|()| None) })
                        }
                        Err(e) => Box::pin(async move { Err(e) }),
                    }
                });
                self.add(RouteKind::Send, M::PACKET, handler);
                self
            }
        }
    };
}

message_handlers!(ActorType, Actor, "Actor");
message_handlers!(SpotType, Spot, "Spot");

/// The builder steps every object type shares: its factory and its one relocation choice.
macro_rules! factory_and_policy {
    ($ty:ident, $bound:ident, $adapter:ident, $what:literal) => {
        impl<T: $bound> $ty<T> {
            #[doc = concat!("The factory building the ", $what, "'s state for each activation; it may run")]
            /// again for the same id and generation after a crash, so it must not break state
            /// when repeated.
            pub fn factory<F, Fut>(mut self, f: F) -> Self
            where
                F: Fn(FactoryContext) -> Fut + Send + Sync + 'static,
                Fut: Future<Output = Result<T, ZLinkError>> + Send + 'static,
            {
                self.factory = Some(Arc::new(move |ctx| Box::pin(f(ctx))));
                self
            }

            /// Chooses DisableRelocation.
            pub fn disable_relocation(mut self) -> Self {
                self.choices.push(RelocationChoice::Disable);
                self
            }

            /// Chooses RecreateOnRelocation (needs a Relocation Store).
            pub fn recreate_on_relocation(mut self) -> Self {
                self.choices.push(RelocationChoice::Recreate);
                self
            }

            /// Chooses PreserveStateWith(`adapter`) (needs a Relocation Store).
            pub fn preserve_state_with(mut self, adapter: impl $adapter<T>) -> Self {
                self.choices.push(RelocationChoice::Preserve);
                self.adapter = Some(Arc::new(adapter));
                self
            }
        }
    };
}

factory_and_policy!(ActorType, Actor, ActorStateAdapter, "Actor");
factory_and_policy!(SpotType, Spot, SpotStateAdapter, "Spot");

/// The configure step of one User Spot or Instance Spot type.
pub struct SpotType<S: Spot> {
    factory: Option<Factory<S>>,
    choices: Vec<RelocationChoice>,
    adapter: Option<Arc<dyn SpotStateAdapter<S>>>,
    execution: Option<SpotExecution>,
    readiness: Option<ReadinessMode>,
    handlers: HandlerTable<S>,
    duplicate: Option<String>,
    callback: Option<SpotCallback<S>>,
    lifecycle: Lifecycle<S>,
}

impl<S: Spot> Default for SpotType<S> {
    fn default() -> Self {
        Self {
            factory: None,
            choices: Vec::new(),
            adapter: None,
            execution: None,
            readiness: None,
            handlers: HandlerTable::default(),
            duplicate: None,
            callback: None,
            lifecycle: Lifecycle::default(),
        }
    }
}

impl<S: Spot> SpotType<S> {
    /// The execution mode of a User Spot (default `SpotWide`); an Instance Spot has none.
    pub fn execution(mut self, mode: SpotExecution) -> Self {
        self.execution = Some(mode);
        self
    }

    /// The relocation readiness mode of a `SpotWide` User Spot (default `AnyTurnBoundary`).
    pub fn readiness(mut self, mode: ReadinessMode) -> Self {
        self.readiness = Some(mode);
        self
    }

    /// The User Spot's creation callback (spec 21 §7): it runs on the state the factory built,
    /// before the Spot is exposed, and decides the creation — `Approve` (the Spot becomes Ready,
    /// with an optional application reply), `Reject` (nothing is created; the creator gets a
    /// typed `Rejected`), or an error (the creation `Failed`). Without one, every creation is
    /// approved. Write it as `|spot, ctx| Box::pin(async move { .. })`.
    pub fn on_create<F>(mut self, callback: F) -> Self
    where
        F: for<'a> Fn(
                &'a mut S,
                CreationContext,
            ) -> BoxFuture<'a, Result<CreationDecision, BoxError>>
            + Send
            + Sync
            + 'static,
    {
        self.callback = Some(Arc::new(callback));
        self
    }

    /// The Spot's closing callback (spec 28 §6 step 10, §9 step 4): it runs once, as a turn of
    /// its own after every accepted turn, when the activation ends for the
    /// [`ClosingReason`](super::ClosingReason) its [`ClosingContext`](super::ClosingContext)
    /// names — `RelocationOut` on the source after the location change (a `SpotWide` User
    /// Spot, an Instance Spot), `HostShutdown` during shutdown (with the remaining deadline;
    /// an error makes the shutdown `ForceStopped/TeardownFailed`, running past the deadline
    /// `ForceStopped/DeadlineExceeded`). An error after a move is logged (the move stands).
    /// Without one, closing calls nothing. Write it as `|spot, ctx| Box::pin(async move { .. })`.
    pub fn on_closing<F>(mut self, callback: F) -> Self
    where
        F: for<'a> Fn(&'a mut S, super::ClosingContext) -> BoxFuture<'a, Result<(), BoxError>>
            + Send
            + Sync
            + 'static,
    {
        self.lifecycle.closing = Some(Arc::new(callback));
        self
    }

    /// The relocation-ready callback of a `SpotWide` User Spot with `ApplicationSignaled`
    /// readiness (spec 28 §5, §6 step 7); never called for any other Spot. `Relocated`: the
    /// first application turn on the target after the owner change (no handler runs restored,
    /// relayed or directly arrived work before it returns). `Continued`: on the source, the
    /// turn after a signalled boundary no move was ready for, or after a move that consumed
    /// it was cancelled before its commit. Without one, nothing is called. It may run again
    /// for the same event after a crash, so it must be retry-safe. Write it as
    /// `|spot, outcome| Box::pin(async move { .. })`.
    pub fn on_relocation_ready_completed<F>(mut self, callback: F) -> Self
    where
        F: for<'a> Fn(
                &'a mut S,
                super::RelocationReadyOutcome,
            ) -> BoxFuture<'a, Result<(), BoxError>>
            + Send
            + Sync
            + 'static,
    {
        self.lifecycle.ready = Some(Arc::new(callback));
        self
    }
}

mod erased;
pub(crate) use erased::{AdapterCaptureFn, Registration, TimerFn, TypedObject};
