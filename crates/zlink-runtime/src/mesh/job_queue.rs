//! The host-wide Application Job Queue (spec 06 §3): one shared supply-permit queue for every
//! MeshNode of a host, bounding the application jobs waiting for a handler to start.
//!
//! - A permit is taken for each ordinary-ingress record (an application frame read from a
//!   peer, a call a node makes to itself or to a local object, a message a relocation stages
//!   on its target) and travels with the job through the executor, the node or object mailbox
//!   and the serial gate; [`JobPermit::release`] returns it exactly once, immediately before
//!   the handler (or the first filter) runs. Asynchronous work after that never takes it again.
//! - At the cap a new acquire waits (cancellable: dropping the future stops the wait). It is
//!   never a rejection or a drop. Waiters are served first come, first served: a returned
//!   permit goes straight to the longest waiter, and a new acquire never jumps ahead of one
//!   (tokio's semaphore is fair).
//! - Pressure (permits in use) drives the receive-flow state: at or above the pause count the
//!   queue is *paused* and the MeshNode receive loops stop reading application frames (the
//!   transport's credit then holds the senders back), until pressure falls to the resume count.
//! - Replies and error replies never take a permit: they complete on the reply lane.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// The validated sizes of a host's queue: its effective maximum and the pause and resume
/// permit counts computed from the threshold percents (spec 06 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobQueueLimits {
    /// `EffectiveMaxQueuedApplicationJobs`: the cap (1..=2^31-1).
    pub effective_max: u32,
    /// Permits in use at or above which receiving pauses: `ceil(max × pause% / 100)`.
    pub pause_at: u32,
    /// Permits in use at or below which receiving resumes: `floor(max × resume% / 100)`.
    pub resume_at: u32,
}

/// One host's shared queue (cheap to share through an `Arc`).
#[derive(Debug)]
pub(crate) struct JobQueue {
    limits: JobQueueLimits,
    permits: Arc<Semaphore>,
    /// Permits relocation staging drew past the cap ([`JobQueue::stage`]).
    staged_past_cap: AtomicUsize,
    paused: AtomicBool,
    resumed: Notify,
}

impl JobQueue {
    /// A queue of `limits` with every permit free.
    pub(crate) fn new(limits: JobQueueLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            permits: Arc::new(Semaphore::new(limits.effective_max as usize)),
            staged_past_cap: AtomicUsize::new(0),
            paused: AtomicBool::new(false),
            resumed: Notify::new(),
        })
    }

    /// The sizes the queue was built with.
    pub(crate) fn limits(&self) -> JobQueueLimits {
        self.limits
    }

    /// Permits in use now: reserved supply and queued application jobs together.
    pub(crate) fn in_use(&self) -> usize {
        (self.limits.effective_max as usize)
            .saturating_sub(self.permits.available_permits())
            .saturating_add(self.staged_past_cap.load(Ordering::Acquire))
    }

    /// Whether receiving is paused (pressure reached the pause count and has not yet fallen
    /// to the resume count).
    pub(crate) fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }

    /// Waits for a permit, first come, first served. Dropping the future cancels the wait.
    pub(crate) async fn acquire(self: &Arc<Self>) -> JobPermit {
        // The semaphore is never closed, so the error arm cannot happen; it is mapped to a
        // permit-less guard rather than a panic.
        let permit = Arc::clone(&self.permits).acquire_owned().await.ok();
        self.after_acquire();
        JobPermit {
            queue: Some(Arc::clone(self)),
            permit,
            past_cap: false,
        }
    }

    /// A permit when one is free and nobody waits, else `None`.
    pub(crate) fn try_acquire(self: &Arc<Self>) -> Option<JobPermit> {
        let permit = Arc::clone(&self.permits).try_acquire_owned().ok()?;
        self.after_acquire();
        Some(JobPermit {
            queue: Some(Arc::clone(self)),
            permit: Some(permit),
            past_cap: false,
        })
    }

    /// A permit for a message a relocation stages on its target (guide-10 §3: target staging
    /// draws from the same reservation). It never waits — the command plane that stages it
    /// must reach the cutover behind it — so at the cap it is drawn past it: counted in the
    /// pressure (the receive loops stay paused until the backlog has run) and returned like
    /// any other permit.
    pub(crate) fn stage(self: &Arc<Self>) -> JobPermit {
        if let Some(p) = self.try_acquire() {
            return p;
        }
        self.staged_past_cap.fetch_add(1, Ordering::AcqRel);
        self.after_acquire();
        JobPermit {
            queue: Some(Arc::clone(self)),
            permit: None,
            past_cap: true,
        }
    }

    /// Waits while receiving is paused (returns at once when it is not).
    pub(crate) async fn running(&self) {
        loop {
            // Created before the check, so a resume after the check always wakes it.
            let resumed = self.resumed.notified();
            if !self.is_paused() {
                return;
            }
            resumed.await;
        }
    }

    fn after_acquire(&self) {
        if self.in_use() >= self.limits.pause_at as usize && !self.is_paused() {
            self.paused.store(true, Ordering::Release);
            tracing::debug!(
                in_use = self.in_use(),
                max = self.limits.effective_max,
                "application job queue paused"
            );
            // A release may have fallen to the resume count in between.
            self.after_release();
        }
    }

    fn after_release(&self) {
        if self.is_paused()
            && self.in_use() <= self.limits.resume_at as usize
            && self
                .paused
                .compare_exchange(true, false, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            tracing::debug!(in_use = self.in_use(), "application job queue resumed");
            self.resumed.notify_waiters();
        }
    }
}

/// One queued application job's permit. It is returned exactly once: by
/// [`release`](Self::release) just before the handler starts, or when the job is dropped
/// unrun (refused, relayed elsewhere, its connection gone).
#[derive(Debug, Default)]
pub(crate) struct JobPermit {
    queue: Option<Arc<JobQueue>>,
    permit: Option<OwnedSemaphorePermit>,
    /// Drawn past the cap by staging (no semaphore permit to return).
    past_cap: bool,
}

impl JobPermit {
    /// A guard holding no permit (work that never took one: a timer tick, a restored job).
    pub(crate) fn none() -> Self {
        Self::default()
    }

    /// Returns the permit now (the handler is about to start); later calls do nothing.
    pub(crate) fn release(&mut self) {
        let Some(q) = &self.queue else { return };
        if let Some(p) = self.permit.take() {
            drop(p);
        } else if std::mem::take(&mut self.past_cap) {
            q.staged_past_cap.fetch_sub(1, Ordering::AcqRel);
        } else {
            return;
        }
        q.after_release();
    }
}

impl Drop for JobPermit {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn queue(max: u32, pause_at: u32, resume_at: u32) -> Arc<JobQueue> {
        JobQueue::new(JobQueueLimits {
            effective_max: max,
            pause_at,
            resume_at,
        })
    }

    #[tokio::test]
    async fn an_acquire_at_the_cap_waits_until_a_permit_is_released() {
        let q = queue(2, 2, 1);
        let a = q.acquire().await;
        let _b = q.acquire().await;
        assert_eq!(q.in_use(), 2);
        assert!(q.try_acquire().is_none());
        let waiter = tokio::spawn({
            let q = Arc::clone(&q);
            async move { q.acquire().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "held at the cap, not refused");
        let mut a = a;
        a.release();
        let c = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("the waiter gets the released permit")
            .expect("task");
        assert_eq!(q.in_use(), 2);
        drop(c);
        assert_eq!(q.in_use(), 1);
    }

    #[tokio::test]
    async fn a_released_permit_goes_to_the_longest_waiter_and_no_new_acquire_jumps_ahead() {
        let q = queue(1, 1, 0);
        let held = q.acquire().await;
        let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for i in 0..3 {
            let (q, order) = (Arc::clone(&q), Arc::clone(&order));
            waiters.push(tokio::spawn(async move {
                let p = q.acquire().await;
                order.lock().push(i);
                drop(p);
            }));
            // Each waiter is queued before the next one starts.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        drop(held);
        // The released permit was handed to waiter 0 (not yet run on this single thread).
        assert!(
            q.try_acquire().is_none(),
            "a new try_acquire does not overtake a waiter"
        );
        for w in waiters {
            w.await.expect("task");
        }
        assert_eq!(*order.lock(), vec![0, 1, 2]);
        assert_eq!(q.in_use(), 0);
    }

    #[test]
    fn release_returns_the_permit_exactly_once() {
        let q = queue(3, 3, 1);
        let mut p = q.try_acquire().expect("free");
        assert_eq!(q.in_use(), 1);
        p.release();
        p.release();
        assert_eq!(q.in_use(), 0);
        drop(p);
        assert_eq!(
            q.in_use(),
            0,
            "the drop after a release returns nothing more"
        );
        drop(JobPermit::none());
        assert_eq!(q.in_use(), 0);
    }

    #[tokio::test]
    async fn receiving_pauses_at_the_pause_count_and_resumes_at_the_resume_count() {
        let q = queue(10, 8, 6);
        let mut held: Vec<_> = (0..7).map(|_| q.try_acquire().expect("free")).collect();
        assert!(!q.is_paused(), "7 < pause count 8");
        held.push(q.try_acquire().expect("free"));
        assert!(q.is_paused(), "8 in use: paused");
        let resumed = tokio::spawn({
            let q = Arc::clone(&q);
            async move { q.running().await }
        });
        held.pop();
        assert!(q.is_paused(), "7 in use: still paused (hysteresis)");
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!resumed.is_finished());
        held.pop();
        assert!(!q.is_paused(), "6 in use: resumed");
        tokio::time::timeout(Duration::from_secs(5), resumed)
            .await
            .expect("the paused reader is woken")
            .expect("task");
        drop(held);
        assert_eq!(q.in_use(), 0);
    }

    #[test]
    fn staging_at_the_cap_draws_past_it_and_counts_in_the_pressure() {
        let q = queue(2, 2, 0);
        let a = q.stage();
        let b = q.stage();
        assert_eq!(q.in_use(), 2, "drawn from the same permits while they last");
        let mut c = q.stage();
        assert_eq!(q.in_use(), 3, "past the cap, still counted");
        assert!(q.is_paused());
        assert!(q.try_acquire().is_none(), "ordinary supply still waits");
        c.release();
        c.release();
        assert_eq!(q.in_use(), 2, "returned exactly once");
        drop((a, b));
        assert_eq!(q.in_use(), 0);
        assert!(!q.is_paused());
    }

    #[tokio::test]
    async fn a_cancelled_wait_takes_no_permit() {
        let q = queue(1, 1, 0);
        let held = q.acquire().await;
        let wait = tokio::time::timeout(Duration::from_millis(10), q.acquire()).await;
        assert!(wait.is_err(), "the wait was cancelled by the timeout");
        drop(held);
        assert_eq!(q.in_use(), 0);
        assert!(q.try_acquire().is_some());
    }
}
