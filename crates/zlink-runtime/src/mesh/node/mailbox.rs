//! The node's application mailbox (spec 06 §11): inbound node-direct and channel jobs, bounded
//! on both a count axis and a bytes axis, reserved together and returned after the handler
//! finishes (pending and executing jobs both count).

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// The fixed per-job cost added to payload and metadata bytes (envelope and queue node).
pub const JOB_OVERHEAD_BYTES: usize = 256;

/// The default mailbox bound on jobs.
pub const DEFAULT_MAILBOX_JOBS: u32 = 1024;

/// The default mailbox bound on bytes (64 MiB).
pub const DEFAULT_MAILBOX_BYTES: u64 = 64 * 1024 * 1024;

/// The byte cost of one job: payload + metadata + [`JOB_OVERHEAD_BYTES`], saturating.
pub(crate) fn job_cost(payload: usize, metadata: usize) -> usize {
    payload
        .saturating_add(metadata)
        .saturating_add(JOB_OVERHEAD_BYTES)
}

#[derive(Debug, Default)]
struct Used {
    jobs: usize,
    bytes: usize,
    /// Reservations waiting for room (a release notifies only when there are any).
    waiters: usize,
}

/// A count- and bytes-bounded mailbox.
#[derive(Debug)]
pub(crate) struct Mailbox {
    max_jobs: usize,
    max_bytes: usize,
    used: Mutex<Used>,
    freed: Notify,
}

impl Mailbox {
    pub(crate) fn new(max_jobs: usize, max_bytes: usize) -> Arc<Self> {
        Arc::new(Self {
            max_jobs: max_jobs.max(1),
            max_bytes: max_bytes.max(1),
            used: Mutex::new(Used::default()),
            freed: Notify::new(),
        })
    }

    /// Reserves both axes at once, or neither. A job larger than the byte bound is admitted
    /// only into an empty mailbox (so it can never wait forever).
    pub(crate) fn try_reserve(self: &Arc<Self>, bytes: usize) -> Option<MailboxPermit> {
        let mut u = self.used.lock();
        self.reserve_locked(&mut u, bytes)
    }

    /// [`try_reserve`](Self::try_reserve), noting whether the mailbox was empty (no job
    /// pending or executing) before this reservation.
    pub(crate) fn try_reserve_noting(
        self: &Arc<Self>,
        bytes: usize,
    ) -> Option<(MailboxPermit, bool)> {
        let mut u = self.used.lock();
        let alone = u.jobs == 0;
        self.reserve_locked(&mut u, bytes).map(|p| (p, alone))
    }

    fn reserve_locked(self: &Arc<Self>, u: &mut Used, bytes: usize) -> Option<MailboxPermit> {
        let fits_jobs = u.jobs < self.max_jobs;
        let fits_bytes = u
            .bytes
            .checked_add(bytes)
            .is_some_and(|b| b <= self.max_bytes)
            || u.jobs == 0;
        if !(fits_jobs && fits_bytes) {
            return None;
        }
        u.jobs += 1;
        u.bytes = u.bytes.saturating_add(bytes);
        Some(MailboxPermit {
            mailbox: Arc::clone(self),
            bytes,
        })
    }

    /// Reserves both axes without checking the bounds: for work a relocation already accepted
    /// into its own bounded hold (it enters the mailbox past the bound rather than being
    /// refused; `relocation` module doc). The permit returns it like any other.
    pub(crate) fn reserve_past_bound(self: &Arc<Self>, bytes: usize) -> MailboxPermit {
        let mut u = self.used.lock();
        u.jobs += 1;
        u.bytes = u.bytes.saturating_add(bytes);
        MailboxPermit {
            mailbox: Arc::clone(self),
            bytes,
        }
    }

    /// Waits for room on both axes.
    pub(crate) async fn reserve(self: &Arc<Self>, bytes: usize) -> MailboxPermit {
        if let Some(p) = self.try_reserve(bytes) {
            return p;
        }
        loop {
            // Created before the check, so a release after the check always wakes it.
            let freed = self.freed.notified();
            {
                let mut u = self.used.lock();
                if let Some(p) = self.reserve_locked(&mut u, bytes) {
                    return p;
                }
                u.waiters += 1;
            }
            let _waiting = Waiting(self);
            freed.await;
        }
    }

    /// (jobs, bytes) in use.
    pub(crate) fn usage(&self) -> (usize, usize) {
        let u = self.used.lock();
        (u.jobs, u.bytes)
    }
}

/// Counts one waiting reservation until dropped (also when the waiting future is dropped).
struct Waiting<'a>(&'a Mailbox);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.used.lock().waiters -= 1;
    }
}

/// One reserved job; dropping it (after the handler finished) returns both axes.
#[derive(Debug)]
pub(crate) struct MailboxPermit {
    mailbox: Arc<Mailbox>,
    bytes: usize,
}

impl Drop for MailboxPermit {
    fn drop(&mut self) {
        let waiting = {
            let mut u = self.mailbox.used.lock();
            u.jobs -= 1;
            u.bytes -= self.bytes;
            u.waiters > 0
        };
        if waiting {
            self.mailbox.freed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_full_axis_refuses_both_and_changes_nothing() {
        let m = Mailbox::new(2, 1000);
        let a = m.try_reserve(600).unwrap();
        assert!(m.try_reserve(401).is_none(), "bytes axis full");
        assert_eq!(m.usage(), (1, 600));
        let b = m.try_reserve(400).unwrap();
        assert!(m.try_reserve(0).is_none(), "count axis full");
        assert_eq!(m.usage(), (2, 1000));
        drop(a);
        drop(b);
        assert_eq!(m.usage(), (0, 0));
    }

    #[test]
    fn an_oversized_job_enters_only_an_empty_mailbox() {
        let m = Mailbox::new(4, 100);
        let big = m.try_reserve(1_000).unwrap();
        assert!(m.try_reserve(1).is_none());
        drop(big);
        let small = m.try_reserve(1).unwrap();
        assert!(m.try_reserve(1_000).is_none());
        drop(small);
    }

    #[test]
    fn job_cost_counts_a_fixed_overhead_and_saturates() {
        assert_eq!(job_cost(0, 0), JOB_OVERHEAD_BYTES);
        assert_eq!(job_cost(usize::MAX, 5), usize::MAX);
    }

    #[tokio::test]
    async fn a_waiting_reservation_gets_room_a_release_returns() {
        let m = Mailbox::new(1, 1000);
        let held = m.try_reserve(10).unwrap();
        let waiter = tokio::spawn({
            let m = Arc::clone(&m);
            async move { m.reserve(20).await }
        });
        while m.used.lock().waiters == 0 {
            tokio::task::yield_now().await;
        }
        assert!(!waiter.is_finished());
        drop(held);
        let permit = tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("the waiter is woken")
            .unwrap();
        assert_eq!(m.usage(), (1, 20));
        assert_eq!(m.used.lock().waiters, 0);
        drop(permit);
    }

    #[test]
    fn a_dropped_waiting_reservation_stops_counting_as_a_waiter() {
        let m = Mailbox::new(1, 1000);
        let held = m.try_reserve(10).unwrap();
        {
            let mut wait = Box::pin(m.reserve(20));
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            assert!(wait.as_mut().poll(&mut cx).is_pending());
            assert_eq!(m.used.lock().waiters, 1);
        }
        assert_eq!(m.used.lock().waiters, 0);
        drop(held);
        assert_eq!(m.usage(), (0, 0));
    }

    proptest! {
        /// Whatever the order of reserves and returns, usage never passes a bound (except a
        /// lone oversized job) and returns to zero.
        #[test]
        fn usage_stays_within_both_bounds(ops in proptest::collection::vec((any::<bool>(), 0usize..300), 1..200)) {
            let m = Mailbox::new(5, 1000);
            let mut held = Vec::new();
            for (reserve, bytes) in ops {
                if reserve || held.is_empty() {
                    if let Some(p) = m.try_reserve(bytes) { held.push(p); }
                } else {
                    held.remove(bytes % held.len());
                }
                let (jobs, used) = m.usage();
                prop_assert!(jobs <= 5);
                prop_assert!(used <= 1000 || jobs == 1);
                prop_assert_eq!(jobs, held.len());
            }
            held.clear();
            prop_assert_eq!(m.usage(), (0, 0));
        }
    }
}
