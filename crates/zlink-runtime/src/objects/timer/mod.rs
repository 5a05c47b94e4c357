//! Actor, User Spot and Instance Spot timers (spec 21 §1, §1.2, §1.3, §5; 06 §11).
//!
//! An object starts a timer from its factory ([`FactoryContext::timers`]), a handler
//! ([`MessageContext::timers`]) or a tick ([`TimerContext::timers`]): a one-shot
//! ([`Timers::start_once`], after a duration) or a periodic one ([`Timers::start_every`],
//! every period, fixed rate), under a name unique per object (a name in use is
//! [`TimerError::AlreadyExists`]; cancel it first). Cancel by the returned [`TimerHandle`] or
//! by name ([`Timers::cancel`]).
//!
//! - **A tick is a job in the object's activation**, like a message: one turn at a time (under
//!   a `SpotWide` Spot's shared turn), the same bounded mailbox, in submission order; the
//!   application receives it through [`Actor::on_timer`](super::Actor::on_timer) /
//!   [`Spot::on_timer`](super::Spot::on_timer) (default: nothing). A periodic timer has at
//!   most one tick waiting in the mailbox: a tick due while the previous one still waits is
//!   skipped (coalesced); a full mailbox skips the tick (a one-shot tries again after the
//!   node's minimum period). Both are counted and logged at `debug`.
//! - **Past the node's admission deadline no tick starts** (spec 21 §5): each tick asks the
//!   admission gate for `AdmissionOp::TimerStart` when it starts; a refused tick does not run
//!   and is counted and logged. The timer itself stays armed.
//! - **Close, destroy and leave cancel every timer exactly once**: the activation's close
//!   cancels its timers before it lets its accepted jobs finish; a tick already queued is then
//!   not run.
//! - **Across a move** (both RecreateOnRelocation and PreserveStateWith) the source stops
//!   ticking at the seal; after the capture (every accepted job, every queued tick, has run)
//!   it takes each timer's name, kind, period and next due time relative to that moment, and
//!   sends them in the Restore command, the runtime-private direct handoff to the target
//!   (docs/formats.md, *Timers in the Restore*; never through a Store). The target arms them
//!   on the hidden instance — replacing a timer of the same name its factory started — and
//!   they start ticking as its dispatch opens; a tick due during the move therefore fires
//!   once, on the target. A move that is cancelled resumes the source's timers where they
//!   were (an overdue one fires at once).
//! - **Bounds** (node options, validated at startup; [`TimerLimits`]): at most
//!   `max_timers_per_object` timers per object ([`TimerError::TooMany`]) and no period below
//!   `min_timer_period` ([`TimerError::PeriodTooShort`]).
//!
//! [`FactoryContext::timers`]: super::FactoryContext::timers
//! [`MessageContext::timers`]: super::MessageContext::timers

mod context;
mod limits;
pub(crate) mod table;
#[cfg(test)]
mod tests;
pub(crate) mod tick;
pub(crate) mod wire;

pub use context::{TimerContext, TimerHandle, TimerKind, Timers};
pub(crate) use limits::TimerConfig;
pub use limits::{
    DEFAULT_MAX_TIMERS_PER_OBJECT, DEFAULT_MIN_TIMER_PERIOD, MAX_MAX_TIMERS_PER_OBJECT,
    MAX_MIN_TIMER_PERIOD, MIN_MIN_TIMER_PERIOD, TimerLimits,
};
pub(crate) use table::{TickSink, TimerTable};
