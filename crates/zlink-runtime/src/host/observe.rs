//! `Observe` (spec 28 §2, §11): an ordered stream of host state changes and terminal results.
//!
//! Each observer has its own unbounded queue: the host emits a handful of events in its life
//! (one per state change, one per terminal result), so nothing is dropped for a slow observer
//! — terminal events are never lost to overflow — and the host never waits for an observer.

use parking_lot::Mutex;
use tokio::sync::mpsc;
use zlink_codec::records::HostState;

use super::relocate::RelocationResult;
use super::status::ShutdownReport;
use crate::mesh::node::StateListener;

/// One change of the host, in the order it happened.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum HostEvent {
    /// The host state changed (`zlink.runtime.host.relocation_changed` carries it).
    State(HostState),
    /// A Relocate ended (`zlink.runtime.host.relocation_changed`): its terminal result.
    Relocation(RelocationResult),
    /// The shutdown ended (`zlink.runtime.host.termination_changed`): its terminal result.
    Termination(ShutdownReport),
}

/// The receiving end of [`ZLinkHost::observe`](super::ZLinkHost::observe).
#[derive(Debug)]
pub struct HostObserver {
    rx: mpsc::UnboundedReceiver<HostEvent>,
}

impl HostObserver {
    /// The next event, in order; `None` once the host is gone and every event was read.
    pub async fn next(&mut self) -> Option<HostEvent> {
        self.rx.recv().await
    }

    /// The next event if one is queued now.
    pub fn try_next(&mut self) -> Option<HostEvent> {
        self.rx.try_recv().ok()
    }
}

/// The observers of one host, and its host-level instruments (spec 28 §11: the state gauge,
/// Relocate and shutdown results), recorded from the same events.
#[derive(Debug, Default)]
pub(crate) struct HostEvents {
    observers: Mutex<Vec<mpsc::UnboundedSender<HostEvent>>>,
    metrics: crate::telemetry::HostStateMetrics,
}

impl HostEvents {
    /// A new observer whose first event is `now` (the state when it subscribed).
    pub(crate) fn subscribe(&self, now: HostState) -> HostObserver {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut observers = self.observers.lock();
        // Sent under the lock: no change emitted concurrently can come before it.
        let _ = tx.send(HostEvent::State(now));
        observers.push(tx);
        HostObserver { rx }
    }

    /// Records `event` on the host-level instruments and sends it to every observer still
    /// listening.
    pub(crate) fn emit(&self, event: HostEvent) {
        match &event {
            HostEvent::State(to) => self.metrics.changed(*to),
            HostEvent::Relocation(r) => crate::telemetry::host_relocation(
                r.mode.label(),
                r.outcome.label(),
                r.reason.label(),
            ),
            HostEvent::Termination(r) => {
                crate::telemetry::host_shutdown(r.outcome.label(), r.reason.label())
            }
        }
        self.observers
            .lock()
            .retain(|tx| tx.send(event.clone()).is_ok());
    }
}

impl StateListener for HostEvents {
    fn changed(&self, to: HostState) {
        self.emit(HostEvent::State(to));
    }
}
