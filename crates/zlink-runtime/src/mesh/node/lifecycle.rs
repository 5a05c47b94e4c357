//! The host lifecycle (spec 28 §3, §10): the host state, admission of new application work per
//! state, and the count of accepted work that shutdown waits for.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use tokio::sync::{Notify, watch};
use zlink_codec::records::HostState;

use crate::messaging::{Cancellation, UnavailableReason, ZLinkError};

/// The shared lifecycle of one started root: its state and its accepted work.
#[derive(Debug)]
pub(crate) struct Lifecycle {
    state: watch::Sender<HostState>,
    /// Serialises state changes (a watch send is not a compare-and-swap).
    change: Mutex<()>,
    accepted: AtomicUsize,
    idle: Notify,
    /// Cancelled when shutdown passes its deadline: work still running is abandoned.
    force: Cancellation,
    /// Told of every state change, in order, under the change lock.
    listener: Arc<dyn StateListener>,
}

/// Where a lifecycle reports each state change (the host's observers), in order.
pub(crate) trait StateListener: Send + Sync + std::fmt::Debug {
    /// The state is now `to`; called under the lifecycle's change lock.
    fn changed(&self, to: HostState);
}

/// A listener that ignores every change.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct NoListener;

#[cfg(test)]
impl StateListener for NoListener {
    fn changed(&self, _: HostState) {}
}

impl Lifecycle {
    pub(crate) fn new(listener: Arc<dyn StateListener>) -> Arc<Self> {
        Arc::new(Self {
            state: watch::Sender::new(HostState::Preparing),
            change: Mutex::new(()),
            accepted: AtomicUsize::new(0),
            idle: Notify::new(),
            force: Cancellation::new(),
            listener,
        })
    }

    /// The current state.
    pub(crate) fn state(&self) -> HostState {
        *self.state.borrow()
    }

    /// Moves to `to` when the current state is one of `from`; returns whether it moved.
    pub(crate) fn transition(&self, from: &[HostState], to: HostState) -> bool {
        let _g = self.change.lock();
        let now = self.state();
        if !from.contains(&now) {
            return false;
        }
        tracing::info!(from = ?now, to = ?to, "host state changed");
        self.state.send_replace(to);
        self.listener.changed(to);
        true
    }

    /// Runs `f` with the current state while no state change can happen, so whatever `f`
    /// does is ordered against every change the listener hears of.
    pub(crate) fn serialized<R>(&self, f: impl FnOnce(HostState) -> R) -> R {
        let _g = self.change.lock();
        f(self.state())
    }

    /// A receiver of every state change.
    pub(crate) fn subscribe(&self) -> watch::Receiver<HostState> {
        self.state.subscribe()
    }

    /// Completes once the state is `Serving` or later.
    pub(crate) async fn serving(&self) {
        let mut rx = self.state.subscribe();
        let _ = rx.wait_for(|s| *s != HostState::Preparing).await;
    }

    /// Admits one piece of new application work (an outbound call or an inbound dispatch):
    /// `Serving`, `Relocating` (existing owners run their messages until each unit's seal)
    /// and `Relocated` (messages for moved objects are followed or answered by the record;
    /// node-direct requests are refused by the inbound path) admit; `Draining` and later end
    /// it with ShuttingDown (spec 28 §10).
    pub(crate) fn admit(self: &Arc<Self>) -> Result<WorkGuard, ZLinkError> {
        match self.state() {
            HostState::Serving | HostState::Relocating | HostState::Relocated => {
                self.accepted.fetch_add(1, Ordering::AcqRel);
                // Re-check: a shutdown that sealed admission in between must not miss this one.
                if !self.state().admits_work() {
                    drop(WorkGuard {
                        life: Arc::clone(self),
                    });
                    return Err(ZLinkError::ShuttingDown);
                }
                Ok(WorkGuard {
                    life: Arc::clone(self),
                })
            }
            HostState::Preparing | HostState::Error => Err(ZLinkError::Unavailable {
                target: crate::messaging::Target::ThisHost,
                reason: UnavailableReason::NotServing,
            }),
            _ => Err(ZLinkError::ShuttingDown),
        }
    }

    /// Accepted work still running.
    pub(crate) fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Acquire)
    }

    /// Completes once no accepted work is left.
    pub(crate) async fn drained(&self) {
        loop {
            let notified = self.idle.notified();
            if self.accepted() == 0 {
                return;
            }
            notified.await;
        }
    }

    /// The signal shutdown cancels when its deadline passes.
    pub(crate) fn force(&self) -> &Cancellation {
        &self.force
    }
}

/// Which states admit new application work.
trait AdmitsWork {
    fn admits_work(self) -> bool;
}

impl AdmitsWork for HostState {
    fn admits_work(self) -> bool {
        matches!(
            self,
            HostState::Serving | HostState::Relocating | HostState::Relocated
        )
    }
}

/// One accepted piece of work; dropping it returns it.
#[derive(Debug)]
pub(crate) struct WorkGuard {
    life: Arc<Lifecycle>,
}

impl Drop for WorkGuard {
    fn drop(&mut self) {
        if self.life.accepted.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.life.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_serving_admits_and_draining_answers_shutting_down() {
        let life = Lifecycle::new(Arc::new(NoListener));
        let err = life.admit().unwrap_err();
        assert_eq!(err.kind(), crate::messaging::ErrorKind::Unavailable);
        assert!(life.transition(&[HostState::Preparing], HostState::Serving));
        let guard = life.admit().unwrap();
        assert_eq!(life.accepted(), 1);
        assert!(life.transition(&[HostState::Serving], HostState::Draining));
        let err = life.admit().unwrap_err();
        assert_eq!(err.kind(), crate::messaging::ErrorKind::ShuttingDown);
        let waiter = tokio::spawn({
            let life = Arc::clone(&life);
            async move { life.drained().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(guard);
        waiter.await.unwrap();
        assert_eq!(life.accepted(), 0);
    }
}
