//! One object's activation (spec 06 §11, §18): the state its factory built, a mailbox bounded
//! on both a count axis and a bytes axis, and the run loop that takes jobs one at a time.
//!
//! - A job reserves both mailbox axes in one step when it is submitted ([`Activation::submit`]);
//!   either axis full refuses it and changes nothing. The reservation is returned after the job
//!   has run to its end, not when it is taken off the queue, so the bound counts pending and
//!   executing jobs together.
//! - Jobs run one at a time in submission order, each with exclusive access to the state.
//! - An idle activation has no task and no channel: its queue is a `VecDeque` (no allocation
//!   while empty) under one lock with the state, and its run loop is a task spawned by the
//!   submission that finds no loop running, which ends when it finds the queue empty (the
//!   queue's memory goes with it). An idle activation costs its state, its mailbox's counts
//!   and this one allocation.
//! - One activation occupies its worker for at most [`SLICE_JOBS`] jobs or [`SLICE_TIME`] in a
//!   row, then yields so other ready activations on the same worker run (checked at job
//!   boundaries only: one long job is not interrupted). A slice ends when the activation waits
//!   for work, so a job arriving after a pause starts a fresh one; its time counts from its
//!   second job (a job that arrives alone reads no clock).
//! - [`ActivationTask::close`] stops new submissions, lets every accepted job finish, then
//!   drops the state exactly once and returns it to the caller only through that drop.
//! - A job offered to run in place ([`Bound::Here`]) is handed back to its
//!   caller when no other job is pending or executing and the state is free: the caller runs
//!   it on its own task (no hand-over, no wake-up), holding the state as the run loop would,
//!   so a job submitted after it waits for it as for any earlier job (the run loop is started
//!   when the state comes back). Otherwise it is queued like any other. A job that panics, run
//!   in place or on the run loop, closes the activation: later submissions are refused,
//!   queued ones dropped.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::mesh::node::{Mailbox, MailboxPermit};
use crate::messaging::BoxFuture;

/// The most jobs an activation runs in a row before yielding.
pub(crate) const SLICE_JOBS: usize = 64;

/// The longest an activation runs jobs in a row before yielding.
pub(crate) const SLICE_TIME: Duration = Duration::from_millis(10);

/// One unit of work on the state.
pub(crate) type Job<S> = Box<dyn for<'a> FnOnce(&'a mut S) -> BoxFuture<'a, ()> + Send>;

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

/// The jobs pending or executing in every activation that shares it (one per object host):
/// the metrics sampler reads a host's count without a walk over its activations.
#[derive(Debug, Clone, Default)]
pub(crate) struct JobGauge(Arc<AtomicU64>);

impl JobGauge {
    /// The jobs reserved now.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// One job's mailbox reservation, counted in the activation's gauge (if any) until dropped.
struct Permit {
    _mailbox: MailboxPermit,
    gauge: Option<JobGauge>,
}

impl Permit {
    fn new(mailbox: MailboxPermit, gauge: Option<&JobGauge>) -> Self {
        if let Some(g) = gauge {
            g.0.fetch_add(1, Ordering::Relaxed);
        }
        Self {
            _mailbox: mailbox,
            gauge: gauge.cloned(),
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(g) = &self.gauge {
            g.0.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// How a job enters the mailbox ([`Activation::reserve`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    /// Within both bounds, queued.
    Kept,
    /// Past the bounds (held work a relocation accepted; never `Full`), queued.
    Past,
    /// Within both bounds, and run in place when the activation is idle.
    Here,
}

/// The queue, the state and the run loop's flags, under one lock.
struct Inner<S> {
    /// Accepted jobs not yet started, each with its reservation.
    queue: VecDeque<(Job<S>, Permit)>,
    /// The state while no job holds it; `None` once dropped (closed).
    state: Option<Box<S>>,
    /// A job (on the run loop or in place) holds the state.
    held: bool,
    /// A run loop task is running (or about to).
    running: bool,
    /// Closing or closed: nothing more is accepted.
    closed: bool,
    /// A job panicked: nothing more runs.
    poisoned: bool,
    /// Closers waiting for the activation to become idle.
    idle_waiters: Vec<oneshot::Sender<()>>,
}

impl<S> Inner<S> {
    fn refuses(&self) -> bool {
        self.closed || self.poisoned
    }

    /// No job queued, none holding the state, no run loop.
    fn idle(&self) -> bool {
        self.queue.is_empty() && !self.held && !self.running
    }

    /// When idle: the closers to wake (sent outside the lock).
    fn take_waiters_if_idle(&mut self) -> Vec<oneshot::Sender<()>> {
        if self.idle() {
            std::mem::take(&mut self.idle_waiters)
        } else {
            Vec::new()
        }
    }
}

struct Core<S> {
    mailbox: Arc<Mailbox>,
    /// The host's count of reserved jobs (`None`: not counted).
    gauge: Option<JobGauge>,
    inner: Mutex<Inner<S>>,
}

/// Room reserved for one job; [`submit`](Self::submit) hands the job over. Dropped unused,
/// the room returns.
pub(crate) struct Reserved<'a, S: Send + 'static> {
    activation: &'a Activation<S>,
    permit: Permit,
    /// The state, taken for a job accepted to run in place.
    state: Option<Loan<S>>,
}

impl<S: Send + 'static> Reserved<'_, S> {
    /// Hands `job` over: queued, or — when the state was taken for it — returned as the future
    /// that runs it in place (holding the state and the reservation until it ends; the caller
    /// polls or spawns it, and every later job waits for it). A closed queue drops the job
    /// (what it owns drops with it) and is `Closed`.
    pub(crate) fn submit<F>(self, job: F) -> Result<Option<BoxFuture<'static, ()>>, SubmitError>
    where
        F: for<'b> FnOnce(&'b mut S) -> BoxFuture<'b, ()> + Send + 'static,
    {
        let Reserved {
            activation,
            permit,
            state,
        } = self;
        let Some(loan) = state else {
            activation.push(Box::new(job), permit)?;
            return Ok(None);
        };
        Ok(Some(Box::pin(async move {
            let ran = std::panic::AssertUnwindSafe(loan.run(job, permit))
                .catch_unwind()
                .await;
            if ran.is_err() {
                tracing::error!("an activation's job panicked; the activation is closed");
            }
        })))
    }

    /// Whether the job will be handed back to run in place (the state was taken for it).
    pub(crate) fn in_place(&self) -> bool {
        self.state.is_some()
    }

    /// Queues `job` (never run in place).
    pub(crate) fn queue(self, job: Job<S>) -> Result<(), SubmitError> {
        // A state taken for a job run in place (never, with the bounds that queue) is given
        // back when this returns.
        let Reserved {
            activation,
            permit,
            state,
        } = self;
        drop(state);
        activation.push(job, permit)
    }
}

/// The state lent to one job; given back (and the run loop started when jobs wait) when
/// dropped. Dropped while its job has not run to its end (the job panicked), it closes the
/// activation.
struct Loan<S: Send + 'static> {
    core: Arc<Core<S>>,
    state: Option<Box<S>>,
    /// A job started on the state and has not ended.
    in_job: bool,
}

impl<S: Send + 'static> Loan<S> {
    fn new(core: &Arc<Core<S>>, state: Box<S>) -> Self {
        Self {
            core: Arc::clone(core),
            state: Some(state),
            in_job: false,
        }
    }

    /// Runs `job` on the state, then gives the state back and, after it, the job's room (a
    /// submitter that finds the mailbox empty finds the state free).
    async fn run<F>(mut self, job: F, permit: Permit)
    where
        F: for<'b> FnOnce(&'b mut S) -> BoxFuture<'b, ()> + Send + 'static,
    {
        if let Some(s) = self.state.as_deref_mut() {
            self.in_job = true;
            job(s).await;
            self.in_job = false;
        }
        drop(self);
        drop(permit);
    }
}

impl<S: Send + 'static> Drop for Loan<S> {
    fn drop(&mut self) {
        let state = self.state.take();
        let panicked = self.in_job;
        let (dropped, waiters, start) = {
            let mut inner = self.core.inner.lock();
            inner.state = state;
            inner.held = false;
            let dropped = if panicked {
                inner.poisoned = true;
                std::mem::take(&mut inner.queue)
            } else {
                VecDeque::new()
            };
            // Jobs queued behind the state's holder start now (the run loop left them).
            let start = !inner.poisoned && !inner.running && !inner.queue.is_empty();
            inner.running |= start;
            (dropped, inner.take_waiters_if_idle(), start)
        };
        // Dropped outside the lock: a job's drop may complete a request.
        drop(dropped);
        wake(waiters);
        if start {
            tokio::spawn(run(Arc::clone(&self.core)));
        }
    }
}

fn wake(waiters: Vec<oneshot::Sender<()>>) {
    for w in waiters {
        let _ = w.send(());
    }
}

/// A running activation (cheap to clone).
pub(crate) struct Activation<S> {
    core: Arc<Core<S>>,
}

impl<S> Clone for Activation<S> {
    fn clone(&self) -> Self {
        Self {
            core: Arc::clone(&self.core),
        }
    }
}

/// Owns the activation's end; [`close`](Self::close) ends it.
pub(crate) struct ActivationTask<S> {
    activation: Activation<S>,
}

impl<S: Send + 'static> Activation<S> {
    /// Starts an activation over `state` with a mailbox of at most `jobs` jobs and `bytes`
    /// bytes (its run loop starts with the first queued job).
    #[cfg(test)]
    pub(crate) fn spawn(state: S, jobs: usize, bytes: usize) -> ActivationTask<S> {
        Self::spawn_counted(state, (jobs, bytes), None)
    }

    /// [`spawn`](Self::spawn) with its reserved jobs also counted in `gauge`.
    pub(crate) fn spawn_counted(
        state: S,
        (jobs, bytes): (usize, usize),
        gauge: Option<JobGauge>,
    ) -> ActivationTask<S> {
        let activation = Activation {
            core: Arc::new(Core {
                mailbox: Mailbox::new(jobs, bytes),
                gauge,
                inner: Mutex::new(Inner {
                    queue: VecDeque::new(),
                    state: Some(Box::new(state)),
                    held: false,
                    running: false,
                    closed: false,
                    poisoned: false,
                    idle_waiters: Vec::new(),
                }),
            }),
        };
        ActivationTask { activation }
    }

    /// Submits a job costing `bytes` (payload + metadata + the fixed per-job cost).
    pub(crate) fn submit(&self, bytes: usize, job: Job<S>) -> Result<(), SubmitError> {
        self.reserve(bytes, Bound::Kept)?.queue(job)
    }

    /// Reserves room for one job costing `bytes` (both axes; `Bound::Past` enters past the
    /// bound), before the job is built: a refusal changes nothing and leaves the caller
    /// everything it would have moved into the job. With `Bound::Here`, the job is also
    /// accepted to run in place when no other job is pending or executing and the state is
    /// free ([`Reserved::submit`]).
    pub(crate) fn reserve(
        &self,
        bytes: usize,
        bound: Bound,
    ) -> Result<Reserved<'_, S>, SubmitError> {
        if self.core.inner.lock().refuses() {
            return Err(SubmitError::Closed);
        }
        let (permit, alone) = match bound {
            Bound::Past => (self.core.mailbox.reserve_past_bound(bytes), false),
            Bound::Kept | Bound::Here => self
                .core
                .mailbox
                .try_reserve_noting(bytes)
                .ok_or(SubmitError::Full)?,
        };
        let permit = Permit::new(permit, self.core.gauge.as_ref());
        // Alone: nothing is queued ahead of this job (a queued job keeps its reservation until
        // it has run), so running it now keeps the submission order. The state is taken only
        // when no job holds it.
        let state = (alone && bound == Bound::Here)
            .then(|| self.lend())
            .flatten();
        Ok(Reserved {
            activation: self,
            permit,
            state,
        })
    }

    /// The state, when no job holds it and the activation runs.
    fn lend(&self) -> Option<Loan<S>> {
        let mut inner = self.core.inner.lock();
        if inner.held || inner.refuses() || !inner.queue.is_empty() {
            return None;
        }
        let state = inner.state.take()?;
        inner.held = true;
        Some(Loan::new(&self.core, state))
    }

    /// Queues `job`, starting the run loop when none runs and no job holds the state.
    fn push(&self, job: Job<S>, permit: Permit) -> Result<(), SubmitError> {
        let start = {
            let mut inner = self.core.inner.lock();
            if inner.refuses() {
                drop(inner);
                // The job (and what it owns) drops outside the lock.
                drop(job);
                return Err(SubmitError::Closed);
            }
            inner.queue.push_back((job, permit));
            let start = !inner.running && !inner.held;
            inner.running |= start;
            start
        };
        if start {
            tokio::spawn(run(Arc::clone(&self.core)));
        }
        Ok(())
    }

    /// Stops new submissions, waits until every accepted job has run, then drops the state
    /// once (later calls wait the same way and find it dropped).
    pub(crate) async fn close(&self) {
        loop {
            let idle = {
                let mut inner = self.core.inner.lock();
                inner.closed = true;
                if inner.idle() {
                    None
                } else {
                    let (tx, rx) = oneshot::channel();
                    inner.idle_waiters.push(tx);
                    Some(rx)
                }
            };
            match idle {
                Some(rx) => {
                    let _ = rx.await;
                }
                None => break,
            }
        }
        let state = self.core.inner.lock().state.take();
        drop(state);
    }

    /// (jobs, bytes) pending or executing.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn usage(&self) -> (usize, usize) {
        self.core.mailbox.usage()
    }

    /// Idle (no job queued or running, no run loop) and holding no queue memory.
    #[cfg(test)]
    pub(crate) fn idle_without_queue(&self) -> bool {
        let inner = self.core.inner.lock();
        inner.idle() && inner.queue.capacity() == 0
    }
}

impl<S: Send + 'static> ActivationTask<S> {
    /// A handle to submit jobs.
    pub(crate) fn activation(&self) -> &Activation<S> {
        &self.activation
    }

    /// Stops new submissions (from every handle), waits for every accepted job, then drops
    /// the state once.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) async fn close(self) {
        self.activation.close().await;
    }
}

/// What the run loop does next.
enum Next<S: Send + 'static> {
    Run(Job<S>, Permit, Loan<S>),
    /// Nothing to run: the loop ends (a holder of the state starts it again).
    End,
}

impl<S: Send + 'static> Core<S> {
    /// The next job and the state for it; `End` (the loop marked stopped) when the queue is
    /// empty, another job holds the state, or the activation was poisoned or its state dropped
    /// (the queued jobs are dropped).
    fn next(self: &Arc<Self>) -> Next<S> {
        let (dropped, waiters) = {
            let mut inner = self.inner.lock();
            if inner.held {
                inner.running = false;
                return Next::End;
            }
            if !inner.poisoned && inner.state.is_some() {
                if let Some((job, permit)) = inner.queue.pop_front() {
                    if let Some(state) = inner.state.take() {
                        inner.held = true;
                        return Next::Run(job, permit, Loan::new(self, state));
                    }
                }
            }
            inner.running = false;
            // An idle activation keeps no queue memory.
            let dropped = std::mem::take(&mut inner.queue);
            (dropped, inner.take_waiters_if_idle())
        };
        drop(dropped);
        wake(waiters);
        Next::End
    }
}

/// The run loop: jobs in order until the queue is empty.
async fn run<S: Send + 'static>(core: Arc<Core<S>>) {
    // The current slice: the jobs run in a row since the loop started or yielded, and when
    // its second job started.
    let mut in_slice = 0usize;
    let mut slice_start: Option<tokio::time::Instant> = None;
    while let Next::Run(job, permit, loan) = core.next() {
        // The first job of a slice reads no clock; the slice's time counts from the second.
        let started =
            (in_slice > 0).then(|| *slice_start.get_or_insert_with(tokio::time::Instant::now));
        let ran = std::panic::AssertUnwindSafe(loan.run(job, permit))
            .catch_unwind()
            .await;
        if ran.is_err() {
            // The loan closed the activation; `next` drops what is queued and ends the loop.
            tracing::error!(
                "an activation's job panicked on its run loop; the activation is closed"
            );
            continue;
        }
        in_slice += 1;
        if in_slice >= SLICE_JOBS || started.is_some_and(|at| at.elapsed() >= SLICE_TIME) {
            tokio::task::yield_now().await;
            in_slice = 0;
            slice_start = None;
        }
    }
}

#[cfg(test)]
#[path = "activation_tests.rs"]
mod tests;
