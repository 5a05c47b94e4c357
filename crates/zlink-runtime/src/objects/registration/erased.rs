//! The registered object type with its state type erased: what startup validation reads
//! ([`Registration`]) and the typed side the activations are built from ([`TypedObject`]).

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use zlink_codec::records::ObjectKind;

use super::super::lifecycle::Lifecycle;
use super::{
    Actor, ActorType, AdapterContext, Factory, HandlerTable, ReadinessMode, RelocationChoice, Spot,
    SpotCallback, SpotExecution, SpotType,
};
use crate::messaging::{BoxError, BoxFuture};

/// One object type as registered, with its state type erased (validated at startup).
#[derive(Clone)]
pub(crate) struct Registration {
    pub(crate) kind: ObjectKind,
    pub(crate) stable_type: String,
    pub(crate) has_factory: bool,
    pub(crate) choices: Vec<RelocationChoice>,
    pub(crate) has_adapter: bool,
    pub(crate) execution: Option<SpotExecution>,
    pub(crate) readiness: Option<ReadinessMode>,
    /// A handler key registered twice on this type, if any.
    pub(crate) duplicate_handler: Option<String>,
    /// The activation side of the type (factory, callback and handlers).
    pub(crate) erased: Arc<dyn crate::objects::live::ErasedType>,
}

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("kind", &self.kind)
            .field("stable_type", &self.stable_type)
            .field("has_factory", &self.has_factory)
            .field("choices", &self.choices)
            .field("has_adapter", &self.has_adapter)
            .field("execution", &self.execution)
            .field("readiness", &self.readiness)
            .finish_non_exhaustive()
    }
}

/// An adapter's capture as registered: it is told which object and node it runs for.
pub(crate) type AdapterCaptureFn<T> =
    Arc<dyn Fn(&AdapterContext, &T) -> Result<Bytes, BoxError> + Send + Sync>;
/// An adapter's restore with the state type known, told which object and node it runs for.
pub(crate) type RestoreFn<T> =
    Arc<dyn Fn(&AdapterContext, Bytes) -> Result<T, BoxError> + Send + Sync>;

/// A type's timer handler ([`Actor::on_timer`] / [`Spot::on_timer`]) with the state type known.
pub(crate) type TimerFn<T> = Arc<
    dyn for<'a> Fn(
            &'a mut T,
            crate::objects::TimerContext,
            &'a str,
        ) -> BoxFuture<'a, Result<(), BoxError>>
        + Send
        + Sync,
>;

/// The typed side of one registered Actor or Spot type.
pub(crate) struct TypedObject<T: Send + 'static> {
    /// The type's stable type, shared by every activation's adapter context.
    pub(crate) stable_type: Arc<str>,
    pub(crate) factory: Option<Factory<T>>,
    /// The PreserveStateWith adapter's capture (live relocation), if the type has one.
    pub(crate) capture: Option<AdapterCaptureFn<T>>,
    /// The PreserveStateWith adapter's restore, if the type has one.
    pub(crate) restore: Option<RestoreFn<T>>,
    pub(crate) handlers: Arc<HandlerTable<T>>,
    pub(crate) callback: Option<SpotCallback<T>>,
    /// The Spot's lifecycle callbacks (none for an Actor).
    pub(crate) lifecycle: Lifecycle<T>,
    /// The type's timer handler.
    pub(crate) on_timer: TimerFn<T>,
}

impl Registration {
    pub(crate) fn actor<A: Actor>(stable_type: String, t: ActorType<A>) -> Self {
        let (capture, restore) = match t.adapter.clone() {
            Some(a) => {
                let r = Arc::clone(&a);
                let capture: AdapterCaptureFn<A> =
                    Arc::new(move |ctx: &AdapterContext, s: &A| a.capture_in(ctx, s));
                let restore: RestoreFn<A> =
                    Arc::new(move |ctx: &AdapterContext, b: Bytes| r.restore_in(ctx, b));
                (Some(capture), Some(restore))
            }
            None => (None, None),
        };
        let erased = Arc::new(TypedObject {
            stable_type: Arc::from(stable_type.as_str()),
            factory: t.factory.clone(),
            capture,
            restore,
            handlers: Arc::new(t.handlers),
            callback: None,
            lifecycle: Lifecycle::default(),
            on_timer: Arc::new(|a: &mut A, ctx, name| Box::pin(a.on_timer(ctx, name))),
        });
        Self {
            kind: ObjectKind::Actor,
            stable_type,
            has_factory: t.factory.is_some(),
            choices: t.choices,
            has_adapter: t.adapter.is_some(),
            execution: None,
            readiness: None,
            duplicate_handler: t.duplicate,
            erased,
        }
    }

    pub(crate) fn spot<S: Spot>(kind: ObjectKind, stable_type: String, t: SpotType<S>) -> Self {
        let (capture, restore) = match t.adapter.clone() {
            Some(a) => {
                let r = Arc::clone(&a);
                let capture: AdapterCaptureFn<S> =
                    Arc::new(move |ctx: &AdapterContext, s: &S| a.capture_in(ctx, s));
                let restore: RestoreFn<S> =
                    Arc::new(move |ctx: &AdapterContext, b: Bytes| r.restore_in(ctx, b));
                (Some(capture), Some(restore))
            }
            None => (None, None),
        };
        let mut lifecycle = t.lifecycle;
        lifecycle.signaled = kind == ObjectKind::UserSpot
            && t.execution.unwrap_or_default() == SpotExecution::SpotWide
            && t.readiness == Some(ReadinessMode::ApplicationSignaled);
        let erased = Arc::new(TypedObject {
            stable_type: Arc::from(stable_type.as_str()),
            factory: t.factory.clone(),
            capture,
            restore,
            handlers: Arc::new(t.handlers),
            callback: t.callback,
            lifecycle,
            on_timer: Arc::new(|s: &mut S, ctx, name| Box::pin(s.on_timer(ctx, name))),
        });
        Self {
            kind,
            stable_type,
            has_factory: t.factory.is_some(),
            choices: t.choices,
            has_adapter: t.adapter.is_some(),
            execution: t.execution,
            readiness: t.readiness,
            duplicate_handler: t.duplicate,
            erased,
        }
    }
}
