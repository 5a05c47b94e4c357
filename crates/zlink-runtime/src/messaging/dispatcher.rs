//! The inbound application-frame dispatcher (spec 06 §9, §10, §12, §20).
//!
//! [`DispatcherBuilder`] collects handlers, filters and scoped-dependency factories at startup;
//! [`DispatcherBuilder::build`] fails on the first registration error (a duplicate dispatch
//! key, an invalid packet name) so the host never starts serving with it. [`Dispatcher::dispatch`]
//! then turns each [`InboundFrame`] into a [`DispatchOutcome`]:
//!
//! 1. the packet name is validated (`ProtocolError`);
//! 2. the dispatch key is looked up; an unknown key is `NotFound` and no handler or filter runs;
//! 3. metadata (`metadata-v1`) and the payload (verbatim content-type lookup, then the codec)
//!    are decoded (`ProtocolError`);
//! 4. a new [`DispatchScope`] is created and the filter chain runs, then the handler;
//! 5. a request gets the encoded reply or the error it failed with (sent to another node as an
//!    [`ErrorReply`](super::ErrorReply)); a send gets nothing back.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use zlink_codec::payload::Registry;

use super::context::{Cancellation, DispatchInfo, HandlerContext, RouteKind, ScopedFactories};
use super::error::ZLinkError;
use super::error_parts::FramePart;
use super::filter::{Chain, Filter};
use super::frame::{DispatchOutcome, InboundFrame, ReplyExpectation, SendEnd};
use super::handler::{BoxFuture, HandlerKey, HandlerResult, HandlerTable, NodeHandler};
use super::metadata::Metadata;
use super::packet::PacketName;
// The typed registration methods are the messaging tests' way in; the host registers handlers
// through the plan.
#[cfg(test)]
use super::context::{ChannelContext, NodeContext};
#[cfg(test)]
use super::filter::FnFilter;
#[cfg(test)]
use super::handler::ErasedHandler;
#[cfg(test)]
use super::packet::{Message, Request};
#[cfg(test)]
use zlink_codec::{ChannelName, MeshName};

/// Collects the process-level handlers, filters and scoped dependencies (startup).
pub(crate) struct DispatcherBuilder {
    codecs: Registry,
    handlers: HandlerTable,
    filters: Vec<Arc<dyn Filter>>,
    factories: ScopedFactories,
    first_error: Option<ZLinkError>,
}

impl std::fmt::Debug for DispatcherBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DispatcherBuilder")
            .field("handlers", &self.handlers)
            .field("filters", &self.filters.len())
            .field("first_error", &self.first_error)
            .finish()
    }
}

impl DispatcherBuilder {
    #[cfg(test)]
    fn add<M: Message>(
        mut self,
        key: impl FnOnce(PacketName) -> HandlerKey,
        handler: Arc<dyn ErasedHandler>,
    ) -> Self {
        if self.first_error.is_some() {
            return self;
        }
        let result = PacketName::of::<M>().and_then(|p| self.handlers.insert(key(p), handler));
        if let Err(e) = result {
            self.first_error = Some(e);
        }
        self
    }

    #[cfg(test)]
    /// Registers a node-direct send handler for `M` on a RouteMesh.
    pub(crate) fn node_send<M, F, Fut>(self, mesh: MeshName, handler: F) -> Self
    where
        M: Message,
        F: Fn(M, NodeContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), ZLinkError>> + Send + 'static,
    {
        let route = RouteKind::Send;
        self.add::<M>(
            |packet| HandlerKey::NodeDirect {
                mesh,
                route,
                packet,
            },
            NodeHandler::send::<M, NodeContext, F, Fut>(handler).inner,
        )
    }

    #[cfg(test)]
    /// Registers a node-direct request handler for `R` on a RouteMesh.
    pub(crate) fn node_request<R, F, Fut>(self, mesh: MeshName, handler: F) -> Self
    where
        R: Request,
        F: Fn(R, NodeContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R::Reply, ZLinkError>> + Send + 'static,
    {
        let route = RouteKind::Request;
        self.add::<R>(
            |packet| HandlerKey::NodeDirect {
                mesh,
                route,
                packet,
            },
            NodeHandler::request::<R, NodeContext, F, Fut>(handler).inner,
        )
    }

    #[cfg(test)]
    /// Registers a channel send handler for `M`.
    pub(crate) fn channel_send<M, F, Fut>(self, channel: ChannelName, handler: F) -> Self
    where
        M: Message,
        F: Fn(M, ChannelContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), ZLinkError>> + Send + 'static,
    {
        let route = RouteKind::Send;
        self.add::<M>(
            |packet| HandlerKey::Channel {
                channel,
                route,
                packet,
            },
            NodeHandler::send::<M, ChannelContext, F, Fut>(handler).inner,
        )
    }

    #[cfg(test)]
    /// Registers a channel request handler for `R`.
    pub(crate) fn channel_request<R, F, Fut>(self, channel: ChannelName, handler: F) -> Self
    where
        R: Request,
        F: Fn(R, ChannelContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R::Reply, ZLinkError>> + Send + 'static,
    {
        let route = RouteKind::Request;
        self.add::<R>(
            |packet| HandlerKey::Channel {
                channel,
                route,
                packet,
            },
            NodeHandler::request::<R, ChannelContext, F, Fut>(handler).inner,
        )
    }

    /// Registers a handler built by a MeshNode builder under its validated key.
    pub(crate) fn handler(mut self, key: HandlerKey, handler: NodeHandler) -> Self {
        if self.first_error.is_none() {
            if let Err(e) = self.handlers.insert(key, handler.inner) {
                self.first_error = Some(e);
            }
        }
        self
    }

    /// Appends filters already collected by the root builder, in order.
    pub(crate) fn filters(mut self, filters: impl IntoIterator<Item = Arc<dyn Filter>>) -> Self {
        self.filters.extend(filters);
        self
    }

    /// Uses the scoped-dependency factories collected by the root builder.
    pub(crate) fn factories(mut self, factories: ScopedFactories) -> Self {
        self.factories = factories;
        self
    }

    #[cfg(test)]
    /// Appends a closure filter (filters run in registration order).
    pub(crate) fn filter<F, Fut>(self, filter: F) -> Self
    where
        F: Fn(super::context::FilterContext, super::filter::Next) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), ZLinkError>> + Send + 'static,
    {
        self.filter_object(FnFilter(filter))
    }

    #[cfg(test)]
    /// Appends a filter object (filters run in registration order).
    pub(crate) fn filter_object(mut self, filter: impl Filter) -> Self {
        self.filters.push(Arc::new(filter));
        self
    }

    #[cfg(test)]
    /// Registers the factory of a scoped dependency: one instance per dispatch, created on
    /// first use and shared by that dispatch's filters and handler. A later registration of
    /// the same type replaces the earlier one.
    pub(crate) fn scoped<T: Send + Sync + 'static>(
        mut self,
        make: impl Fn() -> T + Send + Sync + 'static,
    ) -> Self {
        self.factories.insert(make);
        self
    }

    /// Validates the registrations: the first error (a duplicate dispatch key is
    /// [`ZLinkError::DuplicateHandler`]) fails startup.
    pub(crate) fn build(self) -> Result<Dispatcher, ZLinkError> {
        if let Some(e) = self.first_error {
            return Err(e);
        }
        Ok(Dispatcher {
            inner: Arc::new(Inner {
                codecs: self.codecs,
                handlers: self.handlers,
                filters: self.filters.into(),
                factories: Arc::new(self.factories),
            }),
        })
    }
}

/// Dispatches inbound node-direct and channel application frames (cheap to clone).
#[derive(Clone)]
pub(crate) struct Dispatcher {
    inner: Arc<Inner>,
}

struct Inner {
    codecs: Registry,
    handlers: HandlerTable,
    filters: Arc<[Arc<dyn Filter>]>,
    factories: Arc<ScopedFactories>,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("handlers", &self.inner.handlers.len())
            .field("filters", &self.inner.filters.len())
            .finish()
    }
}

impl Dispatcher {
    /// A builder over the root codec registry.
    pub(crate) fn builder(codecs: Registry) -> DispatcherBuilder {
        DispatcherBuilder {
            codecs,
            handlers: HandlerTable::default(),
            filters: Vec::new(),
            factories: ScopedFactories::default(),
            first_error: None,
        }
    }

    /// The codec registry replies are encoded with.
    pub(crate) fn codecs(&self) -> &Registry {
        &self.inner.codecs
    }

    /// Dispatches one inbound frame. `cancellation` is the dispatch's signal: the filters and
    /// the handler see the same one. Dropping the returned future cancels the dispatch too;
    /// either way the scope and every per-dispatch instance are dropped exactly once.
    pub(crate) async fn dispatch(
        &self,
        frame: InboundFrame,
        cancellation: Cancellation,
    ) -> DispatchOutcome {
        match self.start(frame, cancellation) {
            Started::Done(outcome) => outcome,
            Started::Running(running) => running.await,
        }
    }

    /// [`dispatch`](Self::dispatch) in two steps: the synchronous part (packet name, handler
    /// lookup, metadata and payload decoding, the scope, the handler call) here, and what is
    /// left to wait for as a small future holding the boxed handler (or filter chain) future,
    /// so no large dispatch state is built on the stack and moved.
    pub(crate) fn start(&self, frame: InboundFrame, cancellation: Cancellation) -> Started {
        let route = frame.route_kind();
        let expect = frame.expect.clone();
        match self.prepare(frame, route, cancellation) {
            Ok(run) => Started::Running(Running { expect, run }),
            Err(e) => Started::Done(outcome(expect, Err(e))),
        }
    }

    fn prepare(
        &self,
        frame: InboundFrame,
        route: RouteKind,
        cancellation: Cancellation,
    ) -> Result<RunFuture, ZLinkError> {
        let name = std::str::from_utf8(&frame.packet)
            .map_err(|_| ZLinkError::malformed(FramePart::PacketName, "not UTF-8"))?;
        // Every registered name is valid, so a name found needs no validation; one not found
        // is validated first (an invalid name is a ProtocolError, not NotFound).
        let Some((key, handler)) = self.inner.handlers.find(&frame.target, route, name) else {
            let packet = PacketName::new(name)
                .map_err(|e| ZLinkError::malformed(FramePart::PacketName, e))?;
            let key = HandlerKey::of_target(&frame.target, route, packet);
            tracing::debug!(%key, "no handler for the inbound frame");
            return Err(ZLinkError::NoHandler { key });
        };
        let packet = key.packet().clone();
        let metadata = Metadata::from_bytes(&frame.metadata)?;
        let correlation = match frame.expect {
            ReplyExpectation::Reply(c) => Some(c),
            ReplyExpectation::None => None,
        };
        let base = |target| {
            HandlerContext::new(
                DispatchInfo {
                    target,
                    route,
                    packet,
                    metadata,
                    correlation,
                },
                Arc::clone(&self.inner.factories),
                cancellation,
            )
        };
        if self.inner.filters.is_empty() {
            // No filter: the handler is called now (what an empty chain does, without its
            // per-dispatch allocations).
            let codecs = &self.inner.codecs;
            return handler
                .invoke(
                    codecs,
                    &frame.content_type,
                    &frame.payload,
                    base(frame.target),
                )
                .map(RunFuture::Handler);
        }
        let invocation =
            handler.prepare(&self.inner.codecs, &frame.content_type, &frame.payload)?;
        let chain = Chain::new(
            Arc::clone(&self.inner.filters),
            base(frame.target),
            invocation,
        );
        Ok(RunFuture::Chain(Box::pin(async move {
            let outer = chain.start().run().await;
            let handler_result = chain.take_result();
            match (outer, handler_result) {
                (Err(e), _) | (Ok(()), Some(Err(e))) => Err(e),
                (Ok(()), Some(Ok(reply))) => Ok(Ran::Handled(reply)),
                (Ok(()), None) => Ok(Ran::EndedByFilter),
            }
        })))
    }
}

/// A dispatch after [`Dispatcher::start`].
pub(crate) enum Started {
    /// It ended before any filter or handler ran (no handler, a malformed frame).
    Done(DispatchOutcome),
    /// A filter or the handler runs: await (or poll) it for the outcome.
    Running(Running),
}

/// The rest of a started dispatch: a small future over the boxed handler or chain future.
/// Dropping it cancels the dispatch (the scope and per-dispatch instances drop once).
pub(crate) struct Running {
    expect: ReplyExpectation,
    run: RunFuture,
}

enum RunFuture {
    /// The handler's own future (no filters registered).
    Handler(BoxFuture<'static, HandlerResult>),
    /// The filter chain, then the handler.
    Chain(BoxFuture<'static, Result<Ran, ZLinkError>>),
}

impl Future for Running {
    type Output = DispatchOutcome;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<DispatchOutcome> {
        let this = self.get_mut();
        let result = match &mut this.run {
            RunFuture::Handler(f) => match f.as_mut().poll(cx) {
                Poll::Ready(r) => r.map(Ran::Handled),
                Poll::Pending => return Poll::Pending,
            },
            RunFuture::Chain(f) => match f.as_mut().poll(cx) {
                Poll::Ready(r) => r,
                Poll::Pending => return Poll::Pending,
            },
        };
        let expect = std::mem::replace(&mut this.expect, ReplyExpectation::None);
        Poll::Ready(outcome(expect, result))
    }
}

/// The outcome of a dispatch that expected `expect` and ended with `result`.
fn outcome(expect: ReplyExpectation, result: Result<Ran, ZLinkError>) -> DispatchOutcome {
    match (expect, result) {
        (ReplyExpectation::Reply(correlation), Ok(Ran::Handled(Some((ct, bytes))))) => {
            DispatchOutcome::Reply {
                correlation,
                content_type: ct,
                payload: bytes,
            }
        }
        (ReplyExpectation::Reply(correlation), Ok(Ran::Handled(None))) => {
            // A request key only ever holds a request handler, which always replies.
            DispatchOutcome::ErrorReply {
                correlation,
                error: ZLinkError::NoReply,
            }
        }
        (ReplyExpectation::Reply(correlation), Ok(Ran::EndedByFilter)) => {
            DispatchOutcome::ErrorReply {
                correlation,
                error: ZLinkError::RejectedByFilter,
            }
        }
        (ReplyExpectation::Reply(correlation), Err(e)) => DispatchOutcome::ErrorReply {
            correlation,
            error: e,
        },
        (ReplyExpectation::None, Ok(Ran::Handled(_))) => DispatchOutcome::NoReply(SendEnd::Handled),
        (ReplyExpectation::None, Ok(Ran::EndedByFilter)) => {
            DispatchOutcome::NoReply(SendEnd::EndedByFilter)
        }
        (ReplyExpectation::None, Err(e)) => DispatchOutcome::NoReply(SendEnd::Failed(e)),
    }
}

/// How a dispatch that reached the filter chain ended.
enum Ran {
    /// The handler ran and completed normally (with a reply for a request).
    Handled(Option<(String, Vec<u8>)>),
    /// A filter returned without calling `next`.
    EndedByFilter,
}
