//! The one host Relocate operation a root runs at a time, and the results it keeps (spec 28
//! §2: joins, `OperationInProgress`, repeats).

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;
use zlink_codec::records::HostState;

use super::run::{Ask, run};
use super::types::{RelocateError, RelocateOptions, RelocationReason, RelocationResult};
use crate::host::observe::HostEvent;
use crate::host::running::HostInner;

/// The running operation and the kept results.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    running: Option<Running>,
    /// The first `Relocated` result: a Relocate in `Relocated` returns it.
    relocated: Option<RelocationResult>,
    /// The last terminal result of an operation that ran.
    last: Option<RelocationResult>,
}

#[derive(Debug)]
struct Running {
    ask: Ask,
    done: watch::Receiver<Option<RelocationResult>>,
}

impl Slot {
    /// The last terminal result of an operation that ran.
    pub(crate) fn last(&self) -> Option<RelocationResult> {
        self.last.clone()
    }
}

/// Runs or joins a host Relocate (see the module docs of `relocate`).
pub(crate) async fn relocate(
    host: &Arc<HostInner>,
    options: RelocateOptions,
) -> Result<RelocationResult, RelocateError> {
    let version = options.effective_version(host.application_version)?;
    let mode = options.mode();
    let mut done = {
        let mut slot = host.relocate.lock();
        if let Some(r) = &slot.running {
            if r.ask.mode == mode && r.ask.version == version {
                r.done.clone()
            } else {
                return Ok(RelocationResult::blocked(
                    mode,
                    version,
                    RelocationReason::OperationInProgress,
                    super::moves::stateful_left(host),
                ));
            }
        } else {
            match host.life.state() {
                HostState::Serving => {}
                HostState::Relocated => {
                    if let Some(first) = &slot.relocated {
                        return Ok(first.clone());
                    }
                    return Ok(RelocationResult::blocked(
                        mode,
                        version,
                        RelocationReason::RuntimeNotReady,
                        super::moves::stateful_left(host),
                    ));
                }
                // Spec 28 §2: `ShutdownRequested` while the shutdown drains; a `Stopped`
                // host is not ready (its table row: Relocate in Stopped → RuntimeNotReady).
                HostState::Draining => {
                    return Ok(RelocationResult::blocked(
                        mode,
                        version,
                        RelocationReason::ShutdownRequested,
                        super::moves::stateful_left(host),
                    ));
                }
                _ => {
                    return Ok(RelocationResult::blocked(
                        mode,
                        version,
                        RelocationReason::RuntimeNotReady,
                        super::moves::stateful_left(host),
                    ));
                }
            }
            let ask = Ask {
                mode,
                version,
                end: Instant::now() + options.deadline_value(),
            };
            let (tx, rx) = watch::channel(None);
            slot.running = Some(Running {
                ask,
                done: rx.clone(),
            });
            let host = Arc::clone(host);
            tokio::spawn(async move {
                let result = run(Arc::clone(&host), ask).await;
                {
                    let mut slot = host.relocate.lock();
                    slot.running = None;
                    if result.is_relocated() && slot.relocated.is_none() {
                        slot.relocated = Some(result.clone());
                    }
                    slot.last = Some(result.clone());
                }
                host.emit(HostEvent::Relocation(result.clone()));
                let _ = tx.send(Some(result));
            });
            rx
        }
    };
    let waited = done.wait_for(Option::is_some).await;
    match waited {
        Ok(r) => match r.as_ref() {
            Some(r) => Ok(r.clone()),
            None => Ok(RelocationResult::blocked(
                mode,
                version,
                RelocationReason::RelocationFailed,
                super::moves::stateful_left(host),
            )),
        },
        // The operation's task ended without a result (the runtime is shutting down).
        Err(_) => Ok(RelocationResult::blocked(
            mode,
            version,
            RelocationReason::ShutdownRequested,
            super::moves::stateful_left(host),
        )),
    }
}

/// Keeps `Mutex` in use for the slot type (the host holds `Mutex<Slot>`).
pub(crate) type SlotCell = Mutex<Slot>;
