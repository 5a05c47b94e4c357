//! One object's activation (spec 06 §11, §18): the state its factory built, a mailbox bounded
//! on both a count axis and a bytes axis, and the run loop that takes jobs one at a time.
//!
//! - A job reserves both mailbox axes in one step when it is submitted ([`Activation::submit`]);
//!   either axis full refuses it and changes nothing. The reservation is returned after the job
//!   has run to its end, not when it is taken off the queue, so the bound counts pending and
//!   executing jobs together.
//! - Jobs run one at a time in submission order, each with exclusive access to the state.
//! - One activation occupies its worker for at most [`SLICE_JOBS`] jobs or [`SLICE_TIME`] in a
//!   row, then yields so other ready activations on the same worker run (checked at job
//!   boundaries only: one long job is not interrupted). A slice ends when the activation waits
//!   for work, so a job arriving after a pause starts a fresh one; its time counts from its
//!   second job (a job that arrives alone reads no clock).
//! - [`Activation::close`] stops new submissions, lets every accepted job finish, then drops
//!   the state exactly once and returns it to the caller only through that drop.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::mesh::node::{Mailbox, MailboxPermit};
use crate::messaging::BoxFuture;

/// The most jobs an activation runs in a row before yielding.
pub(crate) const SLICE_JOBS: usize = 64;

/// The longest an activation runs jobs in a row before yielding.
pub(crate) const SLICE_TIME: Duration = Duration::from_millis(10);

/// One unit of work on the state.
pub(crate) type Job<S> = Box<dyn for<'a> FnOnce(&'a mut S) -> BoxFuture<'a, ()> + Send>;

enum Queued<S> {
    Job {
        job: Job<S>,
        permit: MailboxPermit,
    },
    /// Sent by [`ActivationTask::close`]: nothing is accepted after it.
    Close,
}

/// Why a job was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SubmitError {
    /// The mailbox is full on the count or the bytes axis; nothing changed.
    #[error("the mailbox is full")]
    Full,
    /// The activation is closing or closed.
    #[error("the activation is closed")]
    Closed,
}

/// A running activation (cheap to clone).
pub(crate) struct Activation<S> {
    tx: mpsc::UnboundedSender<Queued<S>>,
    mailbox: Arc<Mailbox>,
}

impl<S> Clone for Activation<S> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
            mailbox: Arc::clone(&self.mailbox),
        }
    }
}

/// Owns the run loop; [`close`](Self::close) ends the activation.
pub(crate) struct ActivationTask<S> {
    activation: Activation<S>,
    task: JoinHandle<()>,
}

impl<S: Send + 'static> Activation<S> {
    /// Starts an activation over `state` with a mailbox of at most `jobs` jobs and `bytes`
    /// bytes.
    pub(crate) fn spawn(state: S, jobs: usize, bytes: usize) -> ActivationTask<S> {
        let (tx, rx) = mpsc::unbounded_channel();
        let activation = Activation {
            tx,
            mailbox: Mailbox::new(jobs, bytes),
        };
        let task = tokio::spawn(run(state, rx));
        ActivationTask { activation, task }
    }

    /// Submits a job costing `bytes` (payload + metadata + the fixed per-job cost).
    pub(crate) fn submit(&self, bytes: usize, job: Job<S>) -> Result<(), SubmitError> {
        if self.tx.is_closed() {
            return Err(SubmitError::Closed);
        }
        let permit = self.mailbox.try_reserve(bytes).ok_or(SubmitError::Full)?;
        self.tx
            .send(Queued::Job { job, permit })
            .map_err(|_| SubmitError::Closed)
    }

    /// [`submit`](Self::submit) past the mailbox bound (held work a relocation accepted; it is
    /// never `Full`).
    pub(crate) fn submit_past_bound(&self, bytes: usize, job: Job<S>) -> Result<(), SubmitError> {
        if self.tx.is_closed() {
            return Err(SubmitError::Closed);
        }
        let permit = self.mailbox.reserve_past_bound(bytes);
        self.tx
            .send(Queued::Job { job, permit })
            .map_err(|_| SubmitError::Closed)
    }

    /// (jobs, bytes) pending or executing.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn usage(&self) -> (usize, usize) {
        self.mailbox.usage()
    }
}

impl<S: Send + 'static> ActivationTask<S> {
    /// A handle to submit jobs.
    pub(crate) fn activation(&self) -> &Activation<S> {
        &self.activation
    }

    /// Stops new submissions (from every handle), waits for every accepted job, then drops
    /// the state once.
    pub(crate) async fn close(self) {
        let ActivationTask { activation, task } = self;
        // The run loop is alive until it has seen this, so the send cannot fail.
        let _ = activation.tx.send(Queued::Close);
        drop(activation);
        if let Err(e) = task.await {
            if e.is_panic() {
                tracing::error!("an activation's run loop panicked");
            }
        }
    }
}

async fn run<S: Send + 'static>(mut state: S, mut rx: mpsc::UnboundedReceiver<Queued<S>>) {
    // The current slice: the jobs run in a row since the loop last waited for one or yielded,
    // and when its second job started.
    let mut in_slice = 0usize;
    let mut slice_start: Option<tokio::time::Instant> = None;
    loop {
        let item = match rx.try_recv() {
            Ok(item) => item,
            Err(mpsc::error::TryRecvError::Disconnected) => break,
            Err(mpsc::error::TryRecvError::Empty) => {
                // Waiting for work ends the slice: the next job starts a fresh one.
                in_slice = 0;
                slice_start = None;
                match rx.recv().await {
                    Some(item) => item,
                    None => break,
                }
            }
        };
        let Queued::Job { job, permit } = item else {
            // Refuse what comes next; jobs already queued behind the close still run.
            rx.close();
            continue;
        };
        // The first job of a slice reads no clock; the slice's time counts from the second.
        let started =
            (in_slice > 0).then(|| *slice_start.get_or_insert_with(tokio::time::Instant::now));
        job(&mut state).await;
        drop(permit);
        in_slice += 1;
        if in_slice >= SLICE_JOBS || started.is_some_and(|at| at.elapsed() >= SLICE_TIME) {
            tokio::task::yield_now().await;
            in_slice = 0;
            slice_start = None;
        }
    }
    drop(state);
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use proptest::prelude::*;
    use tokio::sync::oneshot;

    use super::*;

    struct Counted {
        value: u64,
        drops: Arc<AtomicUsize>,
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn add(n: u64, done: Option<oneshot::Sender<u64>>) -> Job<Counted> {
        Box::new(move |s: &mut Counted| {
            Box::pin(async move {
                s.value += n;
                if let Some(d) = done {
                    let _ = d.send(s.value);
                }
            })
        })
    }

    #[tokio::test]
    async fn jobs_run_in_order_and_the_state_is_dropped_exactly_once_after_accepted_work() {
        let drops = Arc::new(AtomicUsize::new(0));
        let task = Activation::spawn(
            Counted {
                value: 0,
                drops: Arc::clone(&drops),
            },
            100,
            1 << 20,
        );
        let a = task.activation().clone();
        let mut seen = Vec::new();
        for i in 1..=10 {
            let (tx, rx) = oneshot::channel();
            a.submit(1, add(i, Some(tx))).unwrap();
            seen.push(rx);
        }
        task.close().await;
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        let mut sums = Vec::new();
        for rx in seen {
            sums.push(rx.await.unwrap());
        }
        assert_eq!(
            sums,
            (1..=10)
                .scan(0, |acc, i| {
                    *acc += i;
                    Some(*acc)
                })
                .collect::<Vec<_>>()
        );
        assert_eq!(a.submit(1, add(1, None)), Err(SubmitError::Closed));
    }

    #[tokio::test]
    async fn a_full_mailbox_refuses_on_either_axis_until_the_job_has_run() {
        let drops = Arc::new(AtomicUsize::new(0));
        let task = Activation::spawn(Counted { value: 0, drops }, 2, 1000);
        let a = task.activation().clone();
        let (release_tx, release_rx) = oneshot::channel::<()>();
        let (started_tx, started_rx) = oneshot::channel::<()>();
        a.submit(
            600,
            Box::new(move |_s: &mut Counted| {
                Box::pin(async move {
                    let _ = started_tx.send(());
                    let _ = release_rx.await;
                })
            }),
        )
        .unwrap();
        started_rx.await.unwrap();
        // Taken off the queue and running: still counted.
        assert_eq!(a.usage(), (1, 600));
        assert_eq!(
            a.submit(401, add(1, None)),
            Err(SubmitError::Full),
            "bytes axis"
        );
        a.submit(400, add(1, None)).unwrap();
        assert_eq!(
            a.submit(0, add(1, None)),
            Err(SubmitError::Full),
            "count axis"
        );
        assert_eq!(a.usage(), (2, 1000));
        release_tx.send(()).unwrap();
        task.close().await;
        assert_eq!(a.usage(), (0, 0));
    }

    #[tokio::test]
    async fn a_held_job_enters_a_full_mailbox_past_its_bound_and_runs_in_order() {
        let drops = Arc::new(AtomicUsize::new(0));
        let task = Activation::spawn(Counted { value: 0, drops }, 1, 10);
        let a = task.activation().clone();
        let (release_tx, release_rx) = oneshot::channel::<()>();
        let (started_tx, started_rx) = oneshot::channel::<()>();
        a.submit(
            10,
            Box::new(move |_s: &mut Counted| {
                Box::pin(async move {
                    let _ = started_tx.send(());
                    let _ = release_rx.await;
                })
            }),
        )
        .unwrap();
        started_rx.await.unwrap();
        assert_eq!(a.submit(1, add(1, None)), Err(SubmitError::Full));
        let mut seen = Vec::new();
        for _ in 0..3 {
            let (tx, rx) = oneshot::channel();
            a.submit_past_bound(5, add(1, Some(tx))).unwrap();
            seen.push(rx);
        }
        assert_eq!(a.usage(), (4, 25), "counted past both bounds");
        release_tx.send(()).unwrap();
        let mut sums = Vec::new();
        for rx in seen {
            sums.push(rx.await.unwrap());
        }
        assert_eq!(sums, vec![1, 2, 3], "every held job ran, in order");
        task.close().await;
        assert_eq!(a.usage(), (0, 0), "returned once they ran");
        assert_eq!(
            a.submit_past_bound(1, add(1, None)),
            Err(SubmitError::Closed),
            "a closed activation still refuses"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_busy_activation_yields_to_others_after_its_slice() {
        let drops = Arc::new(AtomicUsize::new(0));
        let busy = Activation::spawn(
            Counted {
                value: 0,
                drops: Arc::clone(&drops),
            },
            10_000,
            usize::MAX,
        );
        let other = Activation::spawn(Counted { value: 0, drops }, 10, 1 << 20);
        let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
        for i in 0..(SLICE_JOBS * 4) {
            let order = Arc::clone(&order);
            busy.activation()
                .submit(
                    1,
                    Box::new(move |_s: &mut Counted| {
                        Box::pin(async move { order.lock().push(("busy", i)) })
                    }),
                )
                .unwrap();
        }
        {
            let order = Arc::clone(&order);
            other
                .activation()
                .submit(
                    1,
                    Box::new(move |_s: &mut Counted| {
                        Box::pin(async move { order.lock().push(("other", 0)) })
                    }),
                )
                .unwrap();
        }
        busy.close().await;
        other.close().await;
        let order = order.lock();
        let pos = order.iter().position(|(w, _)| *w == "other").unwrap();
        assert!(
            pos <= SLICE_JOBS,
            "the other activation ran only after {pos} busy jobs (slice {SLICE_JOBS})"
        );
    }

    /// A job that records `(who, i)` in `order` when it runs.
    fn mark(
        order: &Arc<parking_lot::Mutex<Vec<(&'static str, usize)>>>,
        who: &'static str,
        i: usize,
    ) -> Job<Counted> {
        let order = Arc::clone(order);
        Box::new(move |_s: &mut Counted| Box::pin(async move { order.lock().push((who, i)) }))
    }

    /// Waiting for work ends a slice: jobs arriving after a pause longer than `SLICE_TIME` run
    /// in a row like any others. Before, the slice's start was kept across the wait, so the
    /// first job after any pause of 10 ms or more made the activation yield (an extra
    /// reschedule of every job of an activation with sparse traffic).
    #[tokio::test(flavor = "current_thread")]
    async fn a_pause_for_work_starts_a_fresh_slice() {
        let fresh = || Counted {
            value: 0,
            drops: Arc::default(),
        };
        let busy = Activation::spawn(fresh(), 10, 1 << 20);
        let other = Activation::spawn(fresh(), 10, 1 << 20);
        let (tx, rx) = oneshot::channel();
        busy.activation().submit(1, add(1, Some(tx))).unwrap();
        rx.await.unwrap();
        tokio::time::sleep(SLICE_TIME * 2).await;
        let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
        busy.activation()
            .submit(1, mark(&order, "busy", 1))
            .unwrap();
        busy.activation()
            .submit(1, mark(&order, "busy", 2))
            .unwrap();
        other
            .activation()
            .submit(1, mark(&order, "other", 1))
            .unwrap();
        busy.close().await;
        other.close().await;
        assert_eq!(
            *order.lock(),
            vec![("busy", 1), ("busy", 2), ("other", 1)],
            "the two jobs after the pause ran in one slice"
        );
    }

    proptest! {
        /// Whatever the sizes submitted, accepted jobs never exceed either bound while queued
        /// or running, and everything is returned once they ran.
        #[test]
        fn accepted_jobs_stay_within_both_bounds(sizes in proptest::collection::vec(0usize..500, 1..100)) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let drops = Arc::new(AtomicUsize::new(0));
                let task = Activation::spawn(Counted { value: 0, drops: Arc::clone(&drops) }, 8, 2000);
                let a = task.activation().clone();
                for s in sizes {
                    let _ = a.submit(s, add(1, None));
                    let (jobs, bytes) = a.usage();
                    assert!(jobs <= 8);
                    assert!(bytes <= 2000 || jobs == 1);
                }
                task.close().await;
                assert_eq!(a.usage(), (0, 0));
                assert_eq!(drops.load(Ordering::SeqCst), 1);
            });
        }
    }
}
