//! Handler filters (spec 06 §10).
//!
//! Filters are process-level and apply to node-direct and channel dispatch only (Spot, Actor
//! and STREAM handlers never reach this dispatcher). They run in registration order on the way
//! in; calling [`Next::run`] runs the next filter, and the last filter's `next` runs the
//! handler; each filter's code after `next` then runs in reverse registration order.
//!
//! - `next` runs at most once: a second call returns [`ZLinkError::NextCalledTwice`] (an
//!   application code error) without running the handler again, and nothing retries it.
//! - A filter that returns without calling `next` ends the dispatch: a request gets a
//!   `Rejected` error reply, a send just ends.
//! - A filter never builds or substitutes a reply: `next` reports only whether the rest of the
//!   chain succeeded, and the reply the handler produced is kept by the dispatch itself.
//! - The filter's per-dispatch instance is the future its [`Filter::call`] returns; it is
//!   created once when the chain reaches the filter and dropped exactly once.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use super::context::{FilterContext, HandlerContext};
use super::error::ZLinkError;
use super::handler::{BoxFuture, HandlerResult, Invocation};

/// A handler filter.
///
/// Closures `Fn(FilterContext, Next) -> impl Future<Output = Result<(), ZLinkError>>` are
/// registered with `DispatcherBuilder::filter`; implement this trait for a filter object.
pub trait Filter: Send + Sync + 'static {
    /// Runs the filter for one dispatch. Call `next.run().await` at most once to continue.
    fn call(&self, ctx: FilterContext, next: Next) -> BoxFuture<'static, Result<(), ZLinkError>>;
}

/// A closure filter.
pub(crate) struct FnFilter<F>(pub(crate) F);

impl<F, Fut> Filter for FnFilter<F>
where
    F: Fn(FilterContext, Next) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), ZLinkError>> + Send + 'static,
{
    fn call(&self, ctx: FilterContext, next: Next) -> BoxFuture<'static, Result<(), ZLinkError>> {
        Box::pin((self.0)(ctx, next))
    }
}

/// One dispatch's filter chain: the filters, the bound handler and the handler's result.
pub(crate) struct Chain {
    filters: Arc<[Arc<dyn Filter>]>,
    base: HandlerContext,
    invocation: Mutex<Option<Invocation>>,
    result: Mutex<Option<HandlerResult>>,
}

impl Chain {
    pub(crate) fn new(
        filters: Arc<[Arc<dyn Filter>]>,
        base: HandlerContext,
        invocation: Invocation,
    ) -> Arc<Self> {
        Arc::new(Self {
            filters,
            base,
            invocation: Mutex::new(Some(invocation)),
            result: Mutex::new(None),
        })
    }

    /// The `next` that starts the chain.
    pub(crate) fn start(self: &Arc<Self>) -> Next {
        Next {
            chain: Arc::clone(self),
            index: 0,
            used: AtomicBool::new(false),
        }
    }

    /// What the handler produced, or `None` when it never ran.
    pub(crate) fn take_result(&self) -> Option<HandlerResult> {
        self.result.lock().take()
    }
}

/// The continuation a filter calls to run the rest of the chain (spec 06 §10).
pub struct Next {
    chain: Arc<Chain>,
    index: usize,
    used: AtomicBool,
}

impl std::fmt::Debug for Next {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Next")
            .field("position", &self.index)
            .field("used", &self.used.load(Ordering::Acquire))
            .finish()
    }
}

impl Next {
    /// Runs the next filter, or the handler after the last filter. `Ok` when the rest of the
    /// chain and the handler completed normally; otherwise their error. A second call returns
    /// [`ZLinkError::NextCalledTwice`] and runs nothing.
    pub fn run(&self) -> BoxFuture<'static, Result<(), ZLinkError>> {
        if self.used.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                packet = %self.chain.base.packet(),
                "a handler filter called next more than once; the handler does not run again"
            );
            return Box::pin(std::future::ready(Err(ZLinkError::NextCalledTwice)));
        }
        let chain = Arc::clone(&self.chain);
        let index = self.index;
        match chain.filters.get(index).cloned() {
            Some(filter) => {
                let next = Next {
                    chain: Arc::clone(&chain),
                    index: index + 1,
                    used: AtomicBool::new(false),
                };
                filter.call(FilterContext::new(chain.base.clone()), next)
            }
            None => Box::pin(async move {
                let invocation = chain.invocation.lock().take();
                // Each `Next` runs once and only the last one reaches here, so the invocation
                // is always present; an absent one means the handler already ran.
                let Some(invocation) = invocation else {
                    return Err(ZLinkError::NextCalledTwice);
                };
                let result = invocation(chain.base.clone()).await;
                let reported = result.as_ref().map(|_| ()).map_err(Clone::clone);
                *chain.result.lock() = Some(result);
                reported
            }),
        }
    }
}
