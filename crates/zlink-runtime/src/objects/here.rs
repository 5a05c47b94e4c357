//! Running an object's job on the caller's task when its activation is idle.
//!
//! A caller that waits for the job anyway (a request on this node, or a message the mesh's
//! receive loop delivers) submits it inside [`offered`]. The activation that accepts the job
//! decides, under the same locks as any submission (the relocation gate's included), whether
//! it can run in place: no other job pending or executing and its state free
//! ([`Bound::Here`](super::activation::Bound::Here)). Then it
//! hands the job back ([`keep`]) instead of queueing it, and the caller runs it after those
//! locks are released ([`RunHere::run`]): polled once at once, and spawned only when its
//! handler waits. The job holds the activation's state while it runs, so every job submitted
//! after it waits for it exactly as it would wait for a queued one; a request answered there
//! pays no hand-over to the activation's task and no wake-up.
//!
//! The offer is a thread-local flag set only for the synchronous submission inside
//! [`offered`] and taken by the first activation that accepts a job there, so no other
//! submission on this thread sees it. Jobs run in place nest (a handler requesting another
//! idle object runs that object's job on its own stack) at most [`MAX_DEPTH`] deep; past that,
//! jobs are queued as usual.

use std::cell::{Cell, RefCell};
use std::task::Poll;

use crate::mesh::node::inline::{contained, poll_once};
use crate::messaging::BoxFuture;

/// How deep jobs run in place may nest on one thread before further ones are queued.
pub(crate) const MAX_DEPTH: u32 = 4;

thread_local! {
    /// Set while [`offered`] runs its submission; taken by the activation that accepts it.
    static OFFERED: Cell<bool> = const { Cell::new(false) };
    /// How many jobs run in place are being polled on this thread right now.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// The job handed back by [`keep`], until [`offered`] returns it.
    static KEPT: RefCell<Option<RunHere>> = const { RefCell::new(None) };
}

/// A job an idle activation accepted to run on its caller's task, holding the activation's
/// state. Dropped without [`run`](Self::run), it is spawned (it always runs).
#[must_use = "a job run in place holds its activation until it runs"]
pub(crate) struct RunHere(Option<BoxFuture<'static, ()>>);

impl RunHere {
    /// Wraps an accepted job.
    pub(crate) fn new(job: BoxFuture<'static, ()>) -> Self {
        Self(Some(job))
    }

    /// Polls the job once here. A job that waits is returned for the caller to spawn (its
    /// task's poll registers the task's waker in place of this poll's no-op one).
    pub(crate) fn run(mut self) -> Option<BoxFuture<'static, ()>> {
        let mut job = self.0.take()?;
        DEPTH.with(|d| d.set(d.get() + 1));
        // The job catches its own panic (it closes its activation); this is a second guard
        // so that nothing of the job can unwind through the caller.
        let first = contained(|| poll_once(&mut job));
        DEPTH.with(|d| d.set(d.get() - 1));
        match first {
            Some(Poll::Pending) => Some(job),
            Some(Poll::Ready(())) | None => None,
        }
    }

    /// [`run`](Self::run), spawning the job when it waits.
    pub(crate) fn run_or_spawn(self) {
        if let Some(rest) = self.run() {
            tokio::spawn(rest);
        }
    }
}

impl Drop for RunHere {
    fn drop(&mut self) {
        if let Some(job) = self.0.take() {
            tokio::spawn(job);
        }
    }
}

/// Runs `submit` (one synchronous submission to an activation) offering to run the job on
/// this task; returns its result and the job when an idle activation handed it back.
pub(crate) fn offered<R>(submit: impl FnOnce() -> R) -> (R, Option<RunHere>) {
    if DEPTH.with(Cell::get) >= MAX_DEPTH {
        return (submit(), None);
    }
    /// Withdraws the offer however `submit` ends; a job kept by a submission that then
    /// panicked is spawned rather than left for another caller.
    struct Withdraw;
    impl Drop for Withdraw {
        fn drop(&mut self) {
            OFFERED.with(|o| o.set(false));
            if std::thread::panicking() {
                drop(KEPT.with(RefCell::take));
            }
        }
    }
    OFFERED.with(|o| o.set(true));
    let withdraw = Withdraw;
    let out = submit();
    drop(withdraw);
    (out, KEPT.with(RefCell::take))
}

/// Whether the submission running now was offered to run in place; the offer is taken (one
/// job per offer).
pub(crate) fn take_offer() -> bool {
    OFFERED.with(|o| o.replace(false))
}

/// Hands an accepted job back to the caller that offered to run it.
pub(crate) fn keep(job: RunHere) {
    // The offer was taken by this job, so the slot is empty; an earlier occupant would be
    // spawned by its drop.
    KEPT.with(|k| *k.borrow_mut() = Some(job));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn counting(ran: &Arc<AtomicUsize>) -> RunHere {
        let ran = Arc::clone(ran);
        RunHere::new(Box::pin(async move {
            ran.fetch_add(1, Ordering::SeqCst);
        }))
    }

    #[tokio::test]
    async fn an_offer_is_taken_once_and_only_inside_its_submission() {
        assert!(!take_offer(), "no offer outside `offered`");
        let ((first, second), kept) = offered(|| (take_offer(), take_offer()));
        assert!(first && !second, "one job per offer");
        assert!(kept.is_none());
        assert!(!take_offer(), "withdrawn after the submission");
    }

    #[tokio::test]
    async fn a_kept_job_comes_back_to_the_offering_caller_and_runs_there() {
        let ran = Arc::new(AtomicUsize::new(0));
        let ((), kept) = offered(|| {
            assert!(take_offer());
            keep(counting(&ran));
        });
        let kept = kept.expect("handed back");
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        assert!(kept.run().is_none(), "completed on its first poll");
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_job_dropped_without_running_is_spawned() {
        let ran = Arc::new(AtomicUsize::new(0));
        drop(counting(&ran));
        for _ in 0..100 {
            if ran.load(Ordering::SeqCst) == 1 {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the dropped job never ran");
    }

    #[tokio::test]
    async fn jobs_nest_in_place_at_most_max_depth_deep() {
        fn nested(level: u32, deepest: Arc<AtomicUsize>) -> RunHere {
            RunHere::new(Box::pin(async move {
                deepest.fetch_max(level as usize, Ordering::SeqCst);
                let ((), kept) = offered(|| {
                    if take_offer() {
                        keep(nested(level + 1, Arc::clone(&deepest)));
                    }
                });
                if let Some(k) = kept {
                    assert!(k.run().is_none());
                }
            }))
        }
        let deepest = Arc::new(AtomicUsize::new(0));
        assert!(nested(1, Arc::clone(&deepest)).run().is_none());
        assert_eq!(deepest.load(Ordering::SeqCst), MAX_DEPTH as usize);
    }

    #[tokio::test]
    async fn a_submission_that_panics_withdraws_its_offer_and_spawns_what_it_kept() {
        let ran = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&ran);
        let caught = std::panic::catch_unwind(move || {
            offered(|| {
                assert!(take_offer());
                keep(counting(&r));
                panic!("the submission failed after keeping its job");
            })
        });
        assert!(caught.is_err());
        assert!(!take_offer());
        let ((), kept) = offered(|| ());
        assert!(kept.is_none(), "nothing left over for the next caller");
        for _ in 0..100 {
            if ran.load(Ordering::SeqCst) == 1 {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the kept job never ran");
    }
}
