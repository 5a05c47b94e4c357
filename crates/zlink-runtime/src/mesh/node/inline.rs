//! Running an inbound job without a task when it can: the job's future is polled once on the
//! receive loop, and only a job that did not complete there (its handler waits on something)
//! is spawned, where it is polled again with the task's own waker (a future registers the
//! waker of its latest poll, so nothing is lost by the first poll's no-op waker).
//!
//! Most handlers answer at once (a map lookup, a counter, an echo): they pay no task spawn, no
//! hand-off to another worker and no wake-up.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Polls `job` once with a no-op waker. A job still pending must be polled again by a task
/// (whose poll registers the task's waker) to make progress.
pub(crate) fn poll_once<F: Future + Unpin>(job: &mut F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(Waker::noop());
    Pin::new(job).poll(&mut cx)
}

/// Runs the first, synchronous part of an inbound job on the receive loop. A job that panics
/// there ends alone, as a panicking task would (what it owned drops, the loop goes on): `None`.
pub(crate) fn contained<T>(first: impl FnOnce() -> T) -> Option<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(first)) {
        Ok(t) => Some(t),
        Err(_) => {
            tracing::error!("an inbound job panicked; it was dropped");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn a_job_that_completes_at_once_is_ready_on_the_first_poll() {
        let ran = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&ran);
        let mut job = Box::pin(async move { r.fetch_add(1, Ordering::SeqCst) + 1 });
        assert_eq!(poll_once(&mut job), Poll::Ready(1));
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_job_that_panics_at_once_ends_alone_and_drops_its_guards() {
        let guard = Arc::new(());
        let held = Arc::clone(&guard);
        let out = contained(move || {
            let _held = held;
            let mut job = Box::pin(async { panic!("handler failed") });
            poll_once(&mut job)
        });
        assert!(out.is_none());
        assert_eq!(Arc::strong_count(&guard), 1);
    }

    #[tokio::test]
    async fn a_job_that_waits_is_finished_by_its_task_after_the_wake() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<u32>();
        let mut job = Box::pin(async move {
            if let Ok(v) = rx.await {
                let _ = done_tx.send(v + 1);
            }
        });
        assert!(poll_once(&mut job).is_pending());
        tokio::spawn(job);
        // The first poll registered the no-op waker; the task's poll must replace it.
        tokio::task::yield_now().await;
        tx.send(41).unwrap();
        let got = tokio::time::timeout(std::time::Duration::from_secs(5), done_rx)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, 42);
    }
}
