//! Spot lifecycle callbacks around relocation and shutdown (spec 28 §5, §6 steps 7 and 10,
//! §6 "Callbacks not called", §9 step 4; 06 §11, §17).
//!
//! A User Spot or Instance Spot type registers them on its [`SpotType`](super::SpotType);
//! every one is optional and a missing one is a no-op:
//!
//! - [`on_closing`](super::SpotType::on_closing) runs once when the activation ends for a
//!   [`ClosingReason`]: `RelocationOut` on the source User Spot (`SpotWide` aggregate) or
//!   Instance Spot after the location change named the target (never on an Entry Spot, never
//!   for a member Actor), `HostShutdown` for every Spot during shutdown step 4, with the
//!   remaining shutdown deadline in the [`ClosingContext`]. It runs as a turn of its own after
//!   every turn already accepted.
//! - [`on_relocation_ready_completed`](super::SpotType::on_relocation_ready_completed) runs
//!   only for a `SpotWide` User Spot whose readiness mode is `ApplicationSignaled`: with
//!   [`RelocationReadyOutcome::Relocated`] as the first application turn on the target after
//!   the aggregate owner change (no handler of the Spot or of a member runs restored, relayed
//!   or directly arrived work before it returns), and with
//!   [`RelocationReadyOutcome::Continued`] on the source when the boundary the application
//!   signalled was not consumed by a move (none was ready), or the move that consumed it
//!   was cancelled before its commit (after the held work went back to the queues).
//!
//! An `ApplicationSignaled` Spot's handler signals a boundary with
//! [`MessageContext::relocation_ready`](super::MessageContext::relocation_ready)`().defer()`:
//! when that handler's turn ends, a move of the Spot whose preflight, target and permits are
//! done (waiting at its seal) seals the Spot and every member right there, before any other
//! turn runs; with no such move waiting, the `Continued` callback runs as the next turn. A
//! move of such a Spot waits at its seal for that boundary — no other turn boundary — until
//! its deadline, and without one it is cancelled before anything moved.
//!
//! Callbacks may run again for the same logical event after a crash (overrides must be
//! retry-safe, 28 §5).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::messaging::{BoxError, BoxFuture};

/// Why a Spot's activation closes (spec 28 §6 step 10, §9 step 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ClosingReason {
    /// The Spot moved to another node: its old activation on the source ends after the
    /// location change (User Spot of a `SpotWide` aggregate, Instance Spot).
    RelocationOut,
    /// The host shuts down (every Entry, User and Instance Spot of it).
    HostShutdown,
}

/// What a closing callback is told.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClosingContext {
    /// Why the Spot closes.
    pub reason: ClosingReason,
    /// The global id of the Spot.
    pub id: String,
    /// When the shutdown deadline passes (`HostShutdown`; `None` for `RelocationOut`). A
    /// callback still running then makes the shutdown `ForceStopped/DeadlineExceeded`.
    pub deadline: Option<Instant>,
}

impl ClosingContext {
    pub(crate) fn new(reason: ClosingReason, id: String, deadline: Option<Instant>) -> Self {
        Self {
            reason,
            id,
            deadline,
        }
    }

    /// The cooperative cancellation signal (spec 28 §9): completes when the deadline passes;
    /// never completes without a deadline. It is the closing's own signal, never an accepted
    /// handler's.
    pub async fn expired(&self) {
        match self.deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    }

    /// The time left until the deadline (`None` without one).
    pub fn remaining(&self) -> Option<std::time::Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }
}

/// How the relocation boundary an `ApplicationSignaled` Spot signalled ended (spec 28 §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RelocationReadyOutcome {
    /// The Spot moved: the first application turn on the target.
    Relocated,
    /// The Spot stays: no move was ready for the boundary, or the move was cancelled before
    /// its commit (runs on the source).
    Continued,
}

/// A Spot closing callback, run on the state as a turn of its own.
pub(crate) type ClosingCallback<S> = Arc<
    dyn for<'a> Fn(&'a mut S, ClosingContext) -> BoxFuture<'a, Result<(), BoxError>> + Send + Sync,
>;

/// A Spot relocation-ready callback, run on the state as a turn of its own.
pub(crate) type ReadyCallback<S> = Arc<
    dyn for<'a> Fn(&'a mut S, RelocationReadyOutcome) -> BoxFuture<'a, Result<(), BoxError>>
        + Send
        + Sync,
>;

/// The lifecycle callbacks of one Spot type (`None`: a no-op).
pub(crate) struct Lifecycle<S> {
    pub(crate) closing: Option<ClosingCallback<S>>,
    pub(crate) ready: Option<ReadyCallback<S>>,
    /// Whether the type is a `SpotWide` User Spot with `ApplicationSignaled` readiness.
    pub(crate) signaled: bool,
}

impl<S> Default for Lifecycle<S> {
    fn default() -> Self {
        Self {
            closing: None,
            ready: None,
            signaled: false,
        }
    }
}

impl<S> Clone for Lifecycle<S> {
    fn clone(&self) -> Self {
        Self {
            closing: self.closing.clone(),
            ready: self.ready.clone(),
            signaled: self.signaled,
        }
    }
}

/// One lifecycle turn to run on an activation.
#[derive(Debug, Clone)]
pub(crate) enum LifecycleCall {
    Closing(ClosingContext),
    Ready(RelocationReadyOutcome),
}

/// A move waiting at its seal for the Spot's boundary: it gets a release sender; the turn
/// that signalled the boundary stays held until the release is sent or dropped.
type Waiter = oneshot::Sender<oneshot::Sender<()>>;

/// The relocation boundary of one live `ApplicationSignaled` activation, shared by its
/// handlers' [`RelocationReady`] handles and the moves of the Spot.
#[derive(Default)]
pub(crate) struct Readiness {
    /// Set by [`RelocationReady::defer`] during a turn; taken when the turn ends.
    deferred: AtomicBool,
    /// The move waiting at its seal, if any.
    waiter: Mutex<Option<Waiter>>,
}

/// What the end of a turn does with a deferred boundary.
pub(crate) enum Boundary {
    /// No boundary was signalled in the turn.
    None,
    /// A waiting move consumed it: the turn stays held until this completes (the move sealed).
    Consumed(oneshot::Receiver<()>),
    /// No move was ready: `Continued` runs as the next turn.
    Continued,
}

impl Readiness {
    /// Called when a turn of the activation ends (still holding the turn).
    pub(crate) fn turn_ended(&self) -> Boundary {
        if !self.deferred.swap(false, Ordering::AcqRel) {
            return Boundary::None;
        }
        while let Some(waiter) = self.waiter.lock().take() {
            let (tx, rx) = oneshot::channel();
            if waiter.send(tx).is_ok() {
                return Boundary::Consumed(rx);
            }
        }
        Boundary::Continued
    }

    /// A move whose preflight, target and permits are done waits for the next boundary: the
    /// returned receiver yields the release sender once a turn signalled one (the turn stays
    /// held until it is sent or dropped). A second waiter replaces the first.
    pub(crate) fn wait(&self) -> oneshot::Receiver<oneshot::Sender<()>> {
        let (tx, rx) = oneshot::channel();
        *self.waiter.lock() = Some(tx);
        rx
    }

    /// Whether a move waits for the next boundary now.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> bool {
        self.waiter.lock().as_ref().is_some_and(|w| !w.is_closed())
    }
}

/// The handle a handler signals its relocation boundary with (spec 28 §5
/// `RelocationReady().Defer()`); see the module docs of `zlink_runtime::objects::lifecycle`.
#[derive(Clone, Default)]
pub struct RelocationReady(pub(crate) Option<Arc<Readiness>>);

impl RelocationReady {
    /// Registers a relocation boundary at the end of the current turn. Only a handler of a
    /// `SpotWide` User Spot with `ApplicationSignaled` readiness can: `true` then, `false`
    /// (nothing registered) for every other handler.
    pub fn defer(&self) -> bool {
        match &self.0 {
            Some(r) => {
                r.deferred.store(true, Ordering::Release);
                true
            }
            None => false,
        }
    }
}

impl fmt::Debug for RelocationReady {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RelocationReady")
            .field("signaled", &self.0.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_boundary_goes_to_a_waiting_move_or_continues() {
        let r = Readiness::default();
        assert!(matches!(r.turn_ended(), Boundary::None));
        let handle = RelocationReady(Some(Arc::new(Readiness::default())));
        assert!(handle.defer());
        assert!(!RelocationReady::default().defer());
        r.deferred.store(true, Ordering::Release);
        assert!(matches!(r.turn_ended(), Boundary::Continued));
        let mut waiting = r.wait();
        r.deferred.store(true, Ordering::Release);
        assert!(matches!(r.turn_ended(), Boundary::Consumed(_)));
        assert!(waiting.try_recv().is_ok(), "the move got the release");
    }
}
