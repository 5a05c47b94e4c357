//! What a handler and a filter see of one dispatch (spec 06 §9, §10): read-only contexts, the
//! dispatch's cancellation signal and its scope.
//!
//! Every dispatch that runs one handler gets a new [`DispatchScope`] (spec 06 §10). The filters'
//! and the handler's per-dispatch instances (the futures they return) and the scoped
//! dependencies ([`DispatchScope::dependency`]) live in that scope; the scope and everything it
//! created are dropped exactly once when the dispatch ends, whichever way it ends.

use std::any::{Any, TypeId};
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use tokio::sync::Notify;
use zlink_codec::{ChannelName, MeshName, RoutingId};
use zlink_store_spi::entropy::HashMap;

use super::error::ZLinkError;
use super::frame::Correlation;
use super::metadata::Metadata;
use super::packet::PacketName;

/// Send or request: the message-kind part of a dispatch key (spec 06 §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RouteKind {
    /// One-way: no reply.
    Send,
    /// Expects exactly one typed reply or error reply.
    Request,
}

impl fmt::Display for RouteKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Send => "send",
            Self::Request => "request",
        })
    }
}

/// The dispatch kind a filter sees (spec 06 §10). `Channel` covers RouteMesh and ClientServer
/// channels together. Classic fanout is dispatched elsewhere and has its own value there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DispatchKind {
    /// A node-direct send.
    NodeDirectSend,
    /// A node-direct request.
    NodeDirectRequest,
    /// A channel send.
    ChannelSend,
    /// A channel request.
    ChannelRequest,
}

impl DispatchKind {
    /// Send or request.
    pub fn route_kind(self) -> RouteKind {
        match self {
            Self::NodeDirectSend | Self::ChannelSend => RouteKind::Send,
            Self::NodeDirectRequest | Self::ChannelRequest => RouteKind::Request,
        }
    }
}

/// A dispatch's cancellation signal. The signal a filter sees is the one its handler sees.
#[derive(Debug, Clone)]
pub struct Cancellation {
    inner: Arc<CancelInner>,
}

#[derive(Debug, Default)]
struct CancelInner {
    cancelled: AtomicBool,
    notify: Notify,
}

impl Default for Cancellation {
    fn default() -> Self {
        Self::new()
    }
}

impl Cancellation {
    /// A signal that is not cancelled.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(CancelInner::default()),
        }
    }

    /// Cancels: every holder observes it (idempotent).
    pub fn cancel(&self) {
        if !self.inner.cancelled.swap(true, Ordering::AcqRel) {
            self.inner.notify.notify_waiters();
        }
    }

    /// Whether it was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::Acquire)
    }

    /// Completes once cancelled.
    pub async fn cancelled(&self) {
        loop {
            // Created before the check: a cancel after the check always wakes it.
            let notified = self.inner.notify.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

type Factory = Arc<dyn Fn() -> Arc<dyn Any + Send + Sync> + Send + Sync>;

/// The scoped-dependency factories registered at startup, by type.
#[derive(Clone, Default)]
pub(crate) struct ScopedFactories {
    by_type: HashMap<TypeId, Factory>,
}

impl ScopedFactories {
    pub(crate) fn insert<T: Send + Sync + 'static>(
        &mut self,
        make: impl Fn() -> T + Send + Sync + 'static,
    ) {
        let f: Factory = Arc::new(move || Arc::new(make()) as Arc<dyn Any + Send + Sync>);
        self.by_type.insert(TypeId::of::<T>(), f);
    }
}

impl fmt::Debug for ScopedFactories {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopedFactories")
            .field("types", &self.by_type.len())
            .finish()
    }
}

/// One dispatch's scope: created when the dispatch starts, shared by its filters and handler,
/// dropped exactly once when the dispatch ends (spec 06 §10, §11).
#[derive(Clone)]
pub struct DispatchScope {
    inner: Arc<ScopeInner>,
}

/// The scope and the dispatch's facts in one allocation (one per dispatch).
struct ScopeInner {
    info: DispatchInfo,
    factories: Arc<ScopedFactories>,
    created: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
    cancellation: Cancellation,
}

impl DispatchScope {
    fn new(
        info: DispatchInfo,
        factories: Arc<ScopedFactories>,
        cancellation: Cancellation,
    ) -> Self {
        Self {
            inner: Arc::new(ScopeInner {
                info,
                factories,
                created: Mutex::new(HashMap::default()),
                cancellation,
            }),
        }
    }

    /// The scoped dependency of type `T`: created by its registered factory on first use in
    /// this dispatch, then the same instance for every filter and the handler of the dispatch.
    /// A type with no registered factory is `NotConfigured`.
    pub fn dependency<T: Send + Sync + 'static>(&self) -> Result<Arc<T>, ZLinkError> {
        let missing = || ZLinkError::DependencyNotConfigured {
            type_name: std::any::type_name::<T>(),
        };
        let id = TypeId::of::<T>();
        let mut created = self.inner.created.lock();
        let any = match created.get(&id) {
            Some(existing) => Arc::clone(existing),
            None => {
                let make = self.inner.factories.by_type.get(&id).ok_or_else(missing)?;
                let fresh = make();
                created.insert(id, Arc::clone(&fresh));
                fresh
            }
        };
        any.downcast::<T>().map_err(|_| missing())
    }

    /// The dispatch's cancellation signal.
    pub fn cancellation(&self) -> &Cancellation {
        &self.inner.cancellation
    }
}

impl fmt::Debug for DispatchScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DispatchScope")
            .field("dependencies", &self.inner.created.lock().len())
            .field("cancelled", &self.inner.cancellation.is_cancelled())
            .finish()
    }
}

/// Where an inbound frame came from and which handler namespace it addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InboundTarget {
    /// A node-direct message on a RouteMesh.
    NodeDirect {
        /// The RouteMesh the frame arrived on.
        mesh: MeshName,
        /// The sender's routing id.
        source: RoutingId,
        /// This node's routing id (the target the sender addressed).
        target: RoutingId,
    },
    /// A channel message.
    Channel {
        /// The channel.
        channel: ChannelName,
        /// The RouteMesh it arrived on; `None` for a ClientServer channel.
        mesh: Option<MeshName>,
    },
}

/// The facts of one dispatch, shared by its contexts.
#[derive(Debug)]
pub(crate) struct DispatchInfo {
    pub(crate) target: InboundTarget,
    pub(crate) route: RouteKind,
    pub(crate) packet: PacketName,
    pub(crate) metadata: Metadata,
    pub(crate) correlation: Option<Correlation>,
}

impl DispatchInfo {
    pub(crate) fn dispatch_kind(&self) -> DispatchKind {
        match (&self.target, self.route) {
            (InboundTarget::NodeDirect { .. }, RouteKind::Send) => DispatchKind::NodeDirectSend,
            (InboundTarget::NodeDirect { .. }, RouteKind::Request) => {
                DispatchKind::NodeDirectRequest
            }
            (InboundTarget::Channel { .. }, RouteKind::Send) => DispatchKind::ChannelSend,
            (InboundTarget::Channel { .. }, RouteKind::Request) => DispatchKind::ChannelRequest,
        }
    }
}

/// The read-only context every handler shares: message kind, packet name, metadata,
/// correlation, cancellation and the dispatch scope. It names no MeshName (spec 06 §9).
#[derive(Debug, Clone)]
pub struct HandlerContext {
    /// Holds the dispatch's facts too: a context is one allocation per dispatch.
    scope: DispatchScope,
}

impl HandlerContext {
    /// The context of a new dispatch, with its new scope.
    pub(crate) fn new(
        info: DispatchInfo,
        factories: Arc<ScopedFactories>,
        cancellation: Cancellation,
    ) -> Self {
        Self {
            scope: DispatchScope::new(info, factories, cancellation),
        }
    }

    fn info(&self) -> &DispatchInfo {
        &self.scope.inner.info
    }

    /// The frame's addressing (for building an owner's context).
    pub(crate) fn target(&self) -> &InboundTarget {
        &self.info().target
    }

    /// Send or request.
    pub fn route_kind(&self) -> RouteKind {
        self.info().route
    }

    /// The packet name.
    pub fn packet(&self) -> &PacketName {
        &self.info().packet
    }

    /// The validated metadata snapshot.
    pub fn metadata(&self) -> &Metadata {
        &self.info().metadata
    }

    /// The request's correlation (`None` for a send).
    pub fn correlation(&self) -> Option<&Correlation> {
        self.info().correlation.as_ref()
    }

    /// The dispatch's cancellation signal (the one the filters saw).
    pub fn cancellation(&self) -> &Cancellation {
        self.scope.cancellation()
    }

    /// The dispatch scope (scoped dependencies).
    pub fn scope(&self) -> &DispatchScope {
        &self.scope
    }
}

/// A node-direct handler's context: the shared context plus MeshName and source/target RID.
#[derive(Debug, Clone)]
pub struct NodeContext {
    base: HandlerContext,
    mesh: MeshName,
    source: RoutingId,
    target: RoutingId,
}

impl NodeContext {
    pub(crate) fn new(
        base: HandlerContext,
        mesh: MeshName,
        source: RoutingId,
        target: RoutingId,
    ) -> Self {
        Self {
            base,
            mesh,
            source,
            target,
        }
    }

    /// The RouteMesh.
    pub fn mesh_name(&self) -> &MeshName {
        &self.mesh
    }

    /// The sender's routing id.
    pub fn source_rid(&self) -> &RoutingId {
        &self.source
    }

    /// This node's routing id.
    pub fn target_rid(&self) -> &RoutingId {
        &self.target
    }
}

impl Deref for NodeContext {
    type Target = HandlerContext;
    fn deref(&self) -> &HandlerContext {
        &self.base
    }
}

/// A channel handler's context: the shared context plus the ChannelName. The RouteMesh or
/// ClientServer route it arrived on is not shown to handlers (spec 06 §9).
#[derive(Debug, Clone)]
pub struct ChannelContext {
    base: HandlerContext,
    channel: ChannelName,
}

impl ChannelContext {
    pub(crate) fn new(base: HandlerContext, channel: ChannelName) -> Self {
        Self { base, channel }
    }

    /// The channel.
    pub fn channel_name(&self) -> &ChannelName {
        &self.channel
    }
}

impl Deref for ChannelContext {
    type Target = HandlerContext;
    fn deref(&self) -> &HandlerContext {
        &self.base
    }
}

/// What a filter sees (spec 06 §10): the dispatch kind and the current message's facts. A
/// MeshName is present for node-direct and RouteMesh channel dispatch only.
#[derive(Debug, Clone)]
pub struct FilterContext {
    base: HandlerContext,
}

impl FilterContext {
    pub(crate) fn new(base: HandlerContext) -> Self {
        Self { base }
    }

    /// The dispatch kind.
    pub fn dispatch_kind(&self) -> DispatchKind {
        self.base.info().dispatch_kind()
    }

    /// The RouteMesh (node direct and RouteMesh channels; `None` for ClientServer).
    pub fn mesh_name(&self) -> Option<&MeshName> {
        match &self.base.info().target {
            InboundTarget::NodeDirect { mesh, .. } => Some(mesh),
            InboundTarget::Channel { mesh, .. } => mesh.as_ref(),
        }
    }

    /// The channel (channel dispatch only).
    pub fn channel_name(&self) -> Option<&ChannelName> {
        match &self.base.info().target {
            InboundTarget::Channel { channel, .. } => Some(channel),
            InboundTarget::NodeDirect { .. } => None,
        }
    }

    /// The sender's routing id (node direct only).
    pub fn source_rid(&self) -> Option<&RoutingId> {
        match &self.base.info().target {
            InboundTarget::NodeDirect { source, .. } => Some(source),
            InboundTarget::Channel { .. } => None,
        }
    }
}

impl Deref for FilterContext {
    type Target = HandlerContext;
    fn deref(&self) -> &HandlerContext {
        &self.base
    }
}
