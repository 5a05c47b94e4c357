//! Running an inbound job without a task when it can: the job's future is polled once on the
//! receive loop, and only a job that did not complete there (its handler waits on something)
//! is spawned, where it is polled again with the task's own waker (a future registers the
//! waker of its latest poll, so nothing is lost by the first poll's no-op waker).
//!
//! Most handlers answer at once (a map lookup, a counter, an echo): they pay no task spawn, no
//! hand-off to another worker and no wake-up.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};

/// Polls `job` once here; spawns the rest when it is not done. A job that panics on this poll
/// ends there, as a panicking task would (its guards drop, the receive loop goes on).
pub(crate) fn run_or_spawn(mut job: Pin<Box<dyn Future<Output = ()> + Send + 'static>>) {
    let mut cx = Context::from_waker(Waker::noop());
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        job.as_mut().poll(&mut cx).is_pending()
    }));
    match polled {
        Ok(true) => {
            tokio::spawn(job);
        }
        Ok(false) => {}
        Err(_) => tracing::error!("an inbound job panicked; it was dropped"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn a_job_that_completes_at_once_runs_before_run_or_spawn_returns() {
        let ran = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&ran);
        run_or_spawn(Box::pin(async move {
            r.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_job_that_panics_at_once_ends_alone_and_drops_its_guards() {
        let guard = Arc::new(());
        let held = Arc::clone(&guard);
        run_or_spawn(Box::pin(async move {
            let _held = held;
            panic!("handler failed");
        }));
        assert_eq!(Arc::strong_count(&guard), 1);
    }

    #[tokio::test]
    async fn a_job_that_waits_is_finished_by_its_task_after_the_wake() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<u32>();
        run_or_spawn(Box::pin(async move {
            if let Ok(v) = rx.await {
                let _ = done_tx.send(v + 1);
            }
        }));
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
