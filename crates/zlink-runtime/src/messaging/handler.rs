//! Handler dispatch keys and the type-erased handler table (spec 06 §9).
//!
//! A handler is an async closure taking the typed payload and a read-only context
//! ([`NodeContext`] or [`ChannelContext`]) and returning `()` for a send or the typed reply for
//! a request. The table erases the payload type: an entry decodes the payload through the codec
//! registry, calls the closure and encodes the reply.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use serde::Serialize;
use zlink_codec::payload::Registry;
use zlink_codec::{ChannelName, MeshName};
use zlink_store_spi::entropy::HashMap;

use super::codec::{decode_payload, encode_payload};
use super::context::{ChannelContext, HandlerContext, InboundTarget, NodeContext, RouteKind};
use super::error::ZLinkError;
use super::packet::{Message, PacketName};

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A handler's dispatch key (spec 06 §9): owner, message kind and packet name. The same packet
/// name may be registered under different owners; the same key twice is a startup error.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HandlerKey {
    /// A MeshNode route handler.
    NodeDirect {
        /// The RouteMesh.
        mesh: MeshName,
        /// Send or request.
        route: RouteKind,
        /// The packet name.
        packet: PacketName,
    },
    /// A channel handler.
    Channel {
        /// The channel.
        channel: ChannelName,
        /// Send or request.
        route: RouteKind,
        /// The packet name.
        packet: PacketName,
    },
    /// A command of the runtime's control plane (spec 06 §6).
    Control {
        /// Send or request.
        route: RouteKind,
        /// The command's name.
        command: PacketName,
    },
    /// An object type's handler (of the type of the object a call reached).
    Object {
        /// Send or request.
        route: RouteKind,
        /// The packet name.
        packet: PacketName,
    },
}

impl HandlerKey {
    /// The packet name.
    pub fn packet(&self) -> &PacketName {
        match self {
            Self::NodeDirect { packet, .. }
            | Self::Channel { packet, .. }
            | Self::Object { packet, .. }
            | Self::Control {
                command: packet, ..
            } => packet,
        }
    }

    /// Send or request.
    pub fn route(&self) -> RouteKind {
        match self {
            Self::NodeDirect { route, .. }
            | Self::Channel { route, .. }
            | Self::Object { route, .. }
            | Self::Control { route, .. } => *route,
        }
    }

    /// The key an inbound frame addresses.
    pub fn of_target(target: &InboundTarget, route: RouteKind, packet: PacketName) -> Self {
        match target {
            InboundTarget::NodeDirect { mesh, .. } => Self::NodeDirect {
                mesh: mesh.clone(),
                route,
                packet,
            },
            InboundTarget::Channel { channel, .. } => Self::Channel {
                channel: channel.clone(),
                route,
                packet,
            },
        }
    }
}

impl fmt::Display for HandlerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NodeDirect {
                mesh,
                route,
                packet,
            } => write!(f, "node-direct {route} {packet:?} on MeshName {mesh:?}"),
            Self::Channel {
                channel,
                route,
                packet,
            } => write!(f, "channel {route} {packet:?} on ChannelName {channel:?}"),
            Self::Object { route, packet } => write!(f, "object {route} {packet:?}"),
            Self::Control { route, command } => write!(f, "control {route} {command:?}"),
        }
    }
}

/// An encoded reply: canonical content type and bytes.
pub(crate) type EncodedReply = (String, Vec<u8>);

/// What one handler run produced: `Some` reply for a request, `None` for a send.
pub(crate) type HandlerResult = Result<Option<EncodedReply>, ZLinkError>;

/// A decoded payload bound to its handler, waiting for the dispatch's context.
pub(crate) type Invocation =
    Box<dyn FnOnce(HandlerContext) -> BoxFuture<'static, HandlerResult> + Send>;

/// A registered handler with its payload type erased.
pub(crate) trait ErasedHandler: Send + Sync {
    /// Decodes the payload (verbatim content-type lookup) and binds it to the handler, which
    /// runs when the dispatch's context is given (after the filters).
    fn prepare(
        &self,
        codecs: &Registry,
        content_type: &[u8],
        payload: &[u8],
    ) -> Result<Invocation, ZLinkError>;

    /// Decodes the payload and calls the handler with `base` at once (no filter runs first):
    /// one allocation, the handler's future, where [`prepare`](Self::prepare) takes two.
    fn invoke(
        &self,
        codecs: &Registry,
        content_type: &[u8],
        payload: &[u8],
        base: HandlerContext,
    ) -> Result<BoxFuture<'static, HandlerResult>, ZLinkError>;
}

/// Builds a handler's own context type from the shared one.
pub(crate) trait OwnerContext: Sized + Send + 'static {
    /// `Err` (the context back) when the frame addresses another owner (never, for a
    /// matching key).
    fn from_base(base: HandlerContext) -> Result<Self, HandlerContext>;
}

impl OwnerContext for NodeContext {
    fn from_base(base: HandlerContext) -> Result<Self, HandlerContext> {
        let (mesh, source, target) = match base.target() {
            InboundTarget::NodeDirect {
                mesh,
                source,
                target,
            } => (mesh.clone(), source.clone(), target.clone()),
            InboundTarget::Channel { .. } => return Err(base),
        };
        Ok(NodeContext::new(base, mesh, source, target))
    }
}

impl OwnerContext for ChannelContext {
    fn from_base(base: HandlerContext) -> Result<Self, HandlerContext> {
        let channel = match base.target() {
            InboundTarget::Channel { channel, .. } => channel.clone(),
            InboundTarget::NodeDirect { .. } => return Err(base),
        };
        Ok(ChannelContext::new(base, channel))
    }
}

/// How a handler's output becomes the dispatch result.
pub(crate) trait Output: Send + 'static {
    fn into_reply(self, codecs: &Registry) -> HandlerResult;
}

/// A send handler's output: no reply.
pub(crate) struct NoReply;

impl Output for NoReply {
    fn into_reply(self, _: &Registry) -> HandlerResult {
        Ok(None)
    }
}

/// A request handler's output: the typed reply, encoded by its declared type.
pub(crate) struct TypedReply<T>(pub(crate) T);

impl<T: Serialize + Send + 'static> Output for TypedReply<T> {
    fn into_reply(self, codecs: &Registry) -> HandlerResult {
        encode_payload(codecs, &self.0).map(Some)
    }
}

/// A typed handler closure: payload `M`, context `C`, output `O` (after `wrap`).
pub(crate) struct TypedHandler<M, C, R, O, F> {
    f: Arc<F>,
    wrap: fn(R) -> O,
    _types: PhantomData<fn(M, C) -> R>,
}

impl<M, C, R, O, F> TypedHandler<M, C, R, O, F> {
    pub(crate) fn new(f: F, wrap: fn(R) -> O) -> Self {
        Self {
            f: Arc::new(f),
            wrap,
            _types: PhantomData,
        }
    }
}

impl<M, C, R, O, F, Fut> ErasedHandler for TypedHandler<M, C, R, O, F>
where
    M: Message,
    C: OwnerContext,
    R: Send + 'static,
    O: Output,
    F: Fn(M, C) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, ZLinkError>> + Send + 'static,
{
    fn prepare(
        &self,
        codecs: &Registry,
        content_type: &[u8],
        payload: &[u8],
    ) -> Result<Invocation, ZLinkError> {
        let message: M = decode_payload(codecs, content_type, payload)?;
        let f = Arc::clone(&self.f);
        let wrap = self.wrap;
        let codecs = codecs.clone();
        Ok(Box::new(move |base: HandlerContext| {
            call::<M, C, R, O, F, Fut>(&f, wrap, codecs, message, base)
        }))
    }

    fn invoke(
        &self,
        codecs: &Registry,
        content_type: &[u8],
        payload: &[u8],
        base: HandlerContext,
    ) -> Result<BoxFuture<'static, HandlerResult>, ZLinkError> {
        let message: M = decode_payload(codecs, content_type, payload)?;
        Ok(call::<M, C, R, O, F, Fut>(
            &self.f,
            self.wrap,
            codecs.clone(),
            message,
            base,
        ))
    }
}

/// Calls the handler with its owner's context and boxes the rest: awaiting it and encoding
/// the reply.
fn call<M, C, R, O, F, Fut>(
    f: &F,
    wrap: fn(R) -> O,
    codecs: Registry,
    message: M,
    base: HandlerContext,
) -> BoxFuture<'static, HandlerResult>
where
    M: Message,
    C: OwnerContext,
    R: Send + 'static,
    O: Output,
    F: Fn(M, C) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, ZLinkError>> + Send + 'static,
{
    match C::from_base(base) {
        Ok(ctx) => {
            let run = f(message, ctx);
            Box::pin(async move {
                let out = run.await?;
                wrap(out).into_reply(&codecs)
            })
        }
        Err(base) => Box::pin(std::future::ready(Err(ZLinkError::NoHandler {
            key: HandlerKey::of_target(base.target(), base.route_kind(), base.packet().clone()),
        }))),
    }
}

/// A typed node-direct or channel handler as registered on a MeshNode builder, with its
/// payload type erased (build it with the builder's `on_*` methods). Its dispatch key comes
/// from the registration: the MeshName or ChannelName, send or request, and the message's
/// packet name.
#[derive(Clone)]
pub struct NodeHandler {
    pub(crate) inner: Arc<dyn ErasedHandler>,
}

impl fmt::Debug for NodeHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NodeHandler")
    }
}

impl NodeHandler {
    /// A send handler for `M` whose context is `C`.
    pub(crate) fn send<M, C, F, Fut>(f: F) -> Self
    where
        M: Message,
        C: OwnerContext,
        F: Fn(M, C) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), ZLinkError>> + Send + 'static,
    {
        Self {
            inner: Arc::new(TypedHandler::<M, C, (), NoReply, F>::new(f, |()| NoReply)),
        }
    }

    /// A request handler for `R` whose context is `C`.
    pub(crate) fn request<R, C, F, Fut>(f: F) -> Self
    where
        R: super::packet::Request,
        C: OwnerContext,
        F: Fn(R, C) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R::Reply, ZLinkError>> + Send + 'static,
    {
        Self {
            inner: Arc::new(
                TypedHandler::<R, C, R::Reply, TypedReply<R::Reply>, F>::new(f, TypedReply),
            ),
        }
    }
}

/// The handler table: one handler per dispatch key, fixed at startup.
#[derive(Default)]
pub(crate) struct HandlerTable {
    by_key: HashMap<HandlerKey, Arc<dyn ErasedHandler>>,
    /// The same handlers by packet name: the inbound lookup borrows the frame's name.
    by_packet: HashMap<String, Vec<Registered>>,
}

/// One registered handler with its key.
type Registered = (HandlerKey, Arc<dyn ErasedHandler>);

impl HandlerTable {
    /// Adds a handler; a key registered before is [`ZLinkError::DuplicateHandler`].
    pub(crate) fn insert(
        &mut self,
        key: HandlerKey,
        handler: Arc<dyn ErasedHandler>,
    ) -> Result<(), ZLinkError> {
        if self.by_key.contains_key(&key) {
            return Err(ZLinkError::DuplicateHandler { key });
        }
        self.by_packet
            .entry(key.packet().as_str().to_owned())
            .or_default()
            .push((key.clone(), Arc::clone(&handler)));
        self.by_key.insert(key, handler);
        Ok(())
    }

    /// The key and handler an inbound frame addresses, looked up by its borrowed packet name
    /// (the handler registered under the [`HandlerKey::of_target`] key).
    pub(crate) fn find(
        &self,
        target: &InboundTarget,
        route: RouteKind,
        packet: &str,
    ) -> Option<(&HandlerKey, &Arc<dyn ErasedHandler>)> {
        self.by_packet
            .get(packet)?
            .iter()
            .find(|(key, _)| {
                key.route() == route
                    && match (key, target) {
                        (
                            HandlerKey::NodeDirect { mesh, .. },
                            InboundTarget::NodeDirect { mesh: m, .. },
                        ) => mesh == m,
                        (
                            HandlerKey::Channel { channel, .. },
                            InboundTarget::Channel { channel: c, .. },
                        ) => channel == c,
                        _ => false,
                    }
            })
            .map(|(key, handler)| (key, handler))
    }

    /// The handler of a key.
    #[cfg(test)]
    pub(crate) fn get(&self, key: &HandlerKey) -> Option<&Arc<dyn ErasedHandler>> {
        self.by_key.get(key)
    }

    /// Number of handlers.
    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }
}

impl fmt::Debug for HandlerTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.by_key.keys()).finish()
    }
}

#[cfg(test)]
mod tests {
    use zlink_codec::RoutingId;

    use super::*;

    #[derive(serde::Serialize, serde::Deserialize)]
    struct Ping;
    impl Message for Ping {
        const PACKET: &'static str = "Ping";
    }

    #[test]
    fn the_borrowed_lookup_finds_the_handler_of_the_full_key() {
        let mesh = MeshName::new("m").unwrap();
        let chat = ChannelName::new("chat").unwrap();
        let other = ChannelName::new("other").unwrap();
        let packet = PacketName::new("Ping").unwrap();
        let send = || NodeHandler::send::<Ping, NodeContext, _, _>(|_, _| async { Ok(()) }).inner;
        let mut table = HandlerTable::default();
        let keys = [
            HandlerKey::NodeDirect {
                mesh: mesh.clone(),
                route: RouteKind::Send,
                packet: packet.clone(),
            },
            HandlerKey::Channel {
                channel: chat.clone(),
                route: RouteKind::Request,
                packet: packet.clone(),
            },
        ];
        for k in &keys {
            table.insert(k.clone(), send()).unwrap();
        }
        let rid = RoutingId::new(vec![1]).unwrap();
        let targets = [
            InboundTarget::NodeDirect {
                mesh: mesh.clone(),
                source: rid.clone(),
                target: rid.clone(),
            },
            InboundTarget::NodeDirect {
                mesh: MeshName::new("n").unwrap(),
                source: rid.clone(),
                target: rid,
            },
            InboundTarget::Channel {
                channel: chat,
                mesh: None,
            },
            InboundTarget::Channel {
                channel: other,
                mesh: Some(mesh),
            },
        ];
        let mut found = 0;
        for target in &targets {
            for route in [RouteKind::Send, RouteKind::Request] {
                for name in ["Ping", "Pong"] {
                    let full = PacketName::new(name).unwrap();
                    let key = HandlerKey::of_target(target, route, full);
                    let by_key = table.get(&key);
                    let borrowed = table.find(target, route, name);
                    assert_eq!(by_key.is_some(), borrowed.is_some(), "{key}");
                    if let (Some(a), Some((k, b))) = (by_key, borrowed) {
                        assert!(Arc::ptr_eq(a, b));
                        assert_eq!(k, &key);
                        found += 1;
                    }
                }
            }
        }
        assert_eq!(found, keys.len());
    }
}
