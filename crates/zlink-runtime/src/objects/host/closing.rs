//! The end of a node's activations: a lost earlier run's (`close_run`) and the shutdown's
//! (spec 28 §9 step 4, the `HostShutdown` closing callbacks, then `close_all`).

use std::sync::Arc;

use zlink_codec::ObjectId;
use zlink_codec::keys::AuthorityKind;
use zlink_location::HostRun;

use super::{LiveObject, ObjectHost, what};

/// How the `HostShutdown` closing callbacks of one node ended (spec 28 §9).
#[derive(Debug, Default)]
pub(crate) struct ClosingEnd {
    /// Each failed callback (→ `ForceStopped/TeardownFailed`).
    pub(crate) failures: Vec<ClosingFailure>,
    /// A callback still ran at the deadline (→ `ForceStopped/DeadlineExceeded`).
    pub(crate) late: bool,
}

/// One `HostShutdown` closing callback that failed.
#[derive(Debug)]
pub(crate) enum ClosingFailure {
    /// The callback returned an error.
    Callback {
        /// The object.
        object: crate::messaging::Target,
        /// The callback's error.
        error: crate::messaging::BoxError,
    },
    /// The callback's task panicked or was cancelled.
    Task(tokio::task::JoinError),
}

impl ObjectHost {
    /// Closes every activation whose record names `run` (an earlier run of this host whose
    /// lease was lost: its records are about to be reclaimed, so no message may run on them).
    /// Returns how many closed.
    pub(crate) async fn close_run(&self, run: &HostRun) -> usize {
        let closing: Vec<Arc<dyn LiveObject>> = self
            .live
            .lock()
            .remove_where(|e| &e.run == run)
            .into_iter()
            .map(|e| e.object)
            .collect();
        let n = closing.len();
        for l in closing {
            l.close().await;
        }
        n
    }

    /// Shutdown step 4 (spec 28 §9): every Spot here — the Entry Spot (its node's closing
    /// callback) and every live User and Instance Spot (its type's) — gets a `HostShutdown`
    /// closing context with `deadline`, all at once, while membership and instances are still
    /// valid; no member Actor gets one. Returns the failed callbacks and whether one was still
    /// running at the deadline.
    pub(crate) async fn shutdown_closing(&self, deadline: tokio::time::Instant) -> ClosingEnd {
        use crate::objects::lifecycle::LifecycleCall;
        use crate::objects::{ClosingContext, ClosingReason};
        let ctx = |id: &ObjectId| {
            ClosingContext::new(
                ClosingReason::HostShutdown,
                id.as_str().to_owned(),
                Some(deadline),
            )
        };
        let mut running = tokio::task::JoinSet::new();
        if let (Some(cb), Some(id)) = (&self.entry_closing, &self.entry_spot) {
            let fut = (cb.0)(ctx(id));
            let what = what(AuthorityKind::Spot, id);
            running.spawn(async move { (what, fut.await) });
        }
        let spots: Vec<(ObjectId, Arc<dyn LiveObject>)> = self
            .live
            .lock()
            .iter()
            .filter(|(_, e)| e.kind.is_spot())
            .map(|(k, e)| (k.1.clone(), Arc::clone(&e.object)))
            .collect();
        for (id, live) in spots {
            let fut = live.lifecycle(LifecycleCall::Closing(ctx(&id)));
            let what = what(AuthorityKind::Spot, &id);
            running.spawn(async move { (what, fut.await) });
        }
        let mut end = ClosingEnd::default();
        let all = async {
            while let Some(done) = running.join_next().await {
                match done {
                    Ok((_, Ok(()))) => {}
                    Ok((object, Err(error))) => end
                        .failures
                        .push(ClosingFailure::Callback { object, error }),
                    Err(e) => end.failures.push(ClosingFailure::Task(e)),
                }
            }
        };
        if tokio::time::timeout_at(deadline, all).await.is_err() {
            end.late = true;
        }
        end
    }

    /// Closes every activation (shutdown): accepted messages finish first.
    pub(crate) async fn close_all(&self) {
        let all: Vec<Arc<dyn LiveObject>> =
            self.live.lock().drain().map(|(_, e)| e.object).collect();
        for l in all {
            l.close().await;
        }
    }
}
