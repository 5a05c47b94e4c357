//! What the application holds of an object's timers: the [`Timers`] handle its contexts give
//! out, a [`TimerHandle`] per started timer, and the [`TimerContext`] a tick runs with.

use std::fmt;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::table::TimerTable;
use crate::messaging::TimerError;

/// A one-shot or periodic timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimerKind {
    /// Fires once, then is gone.
    Once,
    /// Fires every period (fixed rate; a late tick does not shift the next ones).
    Every(Duration),
}

/// An object's timers (cheap to clone), from [`FactoryContext::timers`],
/// [`MessageContext::timers`] or [`TimerContext::timers`].
///
/// A one-shot ([`start_once`](Self::start_once)) or periodic ([`start_every`](Self::start_every),
/// fixed rate) timer has a name unique per object (a name in use is
/// [`TimerError::AlreadyExists`]). Each tick is a job of the object's activation, like a
/// message — one turn at a time, the same bounded mailbox — delivered to
/// [`Actor::on_timer`](crate::objects::Actor::on_timer) /
/// [`Spot::on_timer`](crate::objects::Spot::on_timer); a periodic timer has at most one tick
/// waiting, and a tick the full mailbox refuses is skipped. Past the node's admission deadline
/// no tick starts. Closing, destroying or moving the object away cancels its timers once; a
/// move carries them to the target (RecreateOnRelocation and PreserveStateWith alike), where a
/// tick due during the move fires once. A context outside a running activation holds no timers
/// ([`TimerError::NoActivation`]).
///
/// [`FactoryContext::timers`]: crate::objects::FactoryContext::timers
/// [`MessageContext::timers`]: crate::objects::MessageContext::timers
#[derive(Clone, Default)]
pub struct Timers(pub(crate) Option<Weak<TimerTable>>);

impl fmt::Debug for Timers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timers")
            .field("attached", &self.table().is_some())
            .finish()
    }
}

impl Timers {
    /// The timers of `table`.
    pub(crate) fn of(table: &Arc<TimerTable>) -> Self {
        Self(Some(Arc::downgrade(table)))
    }

    fn table(&self) -> Option<Arc<TimerTable>> {
        self.0.as_ref().and_then(Weak::upgrade)
    }

    /// Starts the one-shot timer `name`, firing once after `after`.
    pub fn start_once(
        &self,
        name: impl Into<String>,
        after: Duration,
    ) -> Result<TimerHandle, TimerError> {
        let table = self.table().ok_or(TimerError::NoActivation)?;
        table.start(name.into(), TimerKind::Once, after)
    }

    /// Starts the periodic timer `name`, firing first after `period` and then every `period`.
    pub fn start_every(
        &self,
        name: impl Into<String>,
        period: Duration,
    ) -> Result<TimerHandle, TimerError> {
        let table = self.table().ok_or(TimerError::NoActivation)?;
        table.start(name.into(), TimerKind::Every(period), period)
    }

    /// Cancels the timer `name`: `true` when it existed (a tick of it already queued does not
    /// run).
    pub fn cancel(&self, name: &str) -> bool {
        self.table().is_some_and(|t| t.cancel(name, None))
    }

    /// The names of the object's timers, sorted.
    pub fn names(&self) -> Vec<String> {
        self.table().map(|t| t.names()).unwrap_or_default()
    }
}

/// One started timer: cancels exactly it (not a later timer of the same name).
#[derive(Clone)]
pub struct TimerHandle {
    pub(crate) table: Weak<TimerTable>,
    pub(crate) name: Arc<str>,
    pub(crate) id: u64,
    pub(crate) kind: TimerKind,
}

impl fmt::Debug for TimerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerHandle")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .finish()
    }
}

impl TimerHandle {
    /// The timer's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The timer's kind.
    pub fn kind(&self) -> TimerKind {
        self.kind
    }

    /// Cancels this timer: `true` when it was still armed (or its tick still queued).
    pub fn cancel(&self) -> bool {
        self.table
            .upgrade()
            .is_some_and(|t| t.cancel(&self.name, Some(self.id)))
    }
}

/// What a tick runs with ([`Actor::on_timer`](crate::objects::Actor::on_timer)).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TimerContext {
    /// The global id of the Actor or Spot.
    pub id: String,
    /// The timer's kind.
    pub kind: TimerKind,
    pub(crate) timers: Timers,
}

impl TimerContext {
    /// The object's timers (start, cancel, list).
    pub fn timers(&self) -> &Timers {
        &self.timers
    }
}

impl crate::objects::MessageContext {
    /// The timers of the object this handler runs on.
    pub fn timers(&self) -> &Timers {
        &self.timers
    }
}

impl crate::objects::FactoryContext {
    /// The timers of the activation this factory builds: they start ticking once it is live
    /// (on a move's target, a carried timer of the same name replaces one started here).
    pub fn timers(&self) -> &Timers {
        &self.timers
    }
}
