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
//! - A job offered to run in place ([`Bound::Here`]) is handed back to its
//!   caller when no other job is pending or executing and the state is free: the caller runs
//!   it on its own task (no hand-over, no wake-up), holding the state as the run loop would,
//!   so a job submitted after it waits for it as for any earlier job. Otherwise it is queued
//!   like any other. A job run in place that panics closes the activation (as a panic on the
//!   run loop does): later submissions are refused, queued ones dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
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

/// The state, held by the run loop for each queued job and by a job run in place; `None`
/// once the run loop dropped it at its end.
type StateCell<S> = Arc<tokio::sync::Mutex<Option<S>>>;

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

/// Room reserved for one job; [`submit`](Self::submit) hands the job over. Dropped unused,
/// the room returns.
pub(crate) struct Reserved<'a, S> {
    activation: &'a Activation<S>,
    permit: MailboxPermit,
    /// The state, taken for a job accepted to run in place.
    state: Option<tokio::sync::OwnedMutexGuard<Option<S>>>,
}

impl<S: Send + 'static> Reserved<'_, S> {
    /// Hands `job` over: queued, or — when the state was taken for it — returned as the future
    /// that runs it in place (holding the state and the reservation until it ends; the caller
    /// polls or spawns it, and every later job waits for it). A queue the run loop left in
    /// the meantime drops the job (what it owns drops with it) and is `Closed`.
    pub(crate) fn submit<F>(self, job: F) -> Result<Option<BoxFuture<'static, ()>>, SubmitError>
    where
        F: for<'b> FnOnce(&'b mut S) -> BoxFuture<'b, ()> + Send + 'static,
    {
        let Reserved {
            activation,
            permit,
            state,
        } = self;
        let Some(state) = state else {
            Self::send(activation, permit, Box::new(job))?;
            return Ok(None);
        };
        let poisoned = Arc::clone(&activation.poisoned);
        Ok(Some(Box::pin(async move {
            let ran = std::panic::AssertUnwindSafe(async move {
                let mut state = state;
                if let Some(s) = state.as_mut() {
                    job(s).await;
                }
                drop(state);
                drop(permit);
            })
            .catch_unwind()
            .await;
            if ran.is_err() {
                poisoned.store(true, Ordering::Release);
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
            activation, permit, ..
        } = self;
        Self::send(activation, permit, job)
    }

    fn send(
        activation: &Activation<S>,
        permit: MailboxPermit,
        job: Job<S>,
    ) -> Result<(), SubmitError> {
        activation
            .tx
            .send(Queued::Job { job, permit })
            .map_err(|_| SubmitError::Closed)
    }
}

/// A running activation (cheap to clone).
pub(crate) struct Activation<S> {
    tx: mpsc::UnboundedSender<Queued<S>>,
    mailbox: Arc<Mailbox>,
    state: StateCell<S>,
    /// Set when a job run in place panicked: the activation refuses everything after it.
    poisoned: Arc<AtomicBool>,
}

impl<S> Clone for Activation<S> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
            mailbox: Arc::clone(&self.mailbox),
            state: Arc::clone(&self.state),
            poisoned: Arc::clone(&self.poisoned),
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
            state: Arc::new(tokio::sync::Mutex::new(Some(state))),
            poisoned: Arc::default(),
        };
        let task = tokio::spawn(run(
            Arc::clone(&activation.state),
            Arc::clone(&activation.poisoned),
            rx,
        ));
        ActivationTask { activation, task }
    }

    /// Whether new jobs are refused (closing, closed, or a job run in place panicked).
    fn refuses(&self) -> bool {
        self.tx.is_closed() || self.poisoned.load(Ordering::Acquire)
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
        if self.refuses() {
            return Err(SubmitError::Closed);
        }
        let (permit, alone) = match bound {
            Bound::Past => (self.mailbox.reserve_past_bound(bytes), false),
            Bound::Kept | Bound::Here => self
                .mailbox
                .try_reserve_noting(bytes)
                .ok_or(SubmitError::Full)?,
        };
        // Alone: nothing is queued ahead of this job (a queued job keeps its reservation until
        // it has run), so running it now keeps the submission order. The state is taken
        // without waiting; the run loop holds it only while it runs a job of its own.
        let state = (alone && bound == Bound::Here)
            .then(|| Arc::clone(&self.state).try_lock_owned().ok())
            .flatten();
        Ok(Reserved {
            activation: self,
            permit,
            state,
        })
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

async fn run<S: Send + 'static>(
    state: StateCell<S>,
    poisoned: Arc<AtomicBool>,
    mut rx: mpsc::UnboundedReceiver<Queued<S>>,
) {
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
        // A job run in place may still hold the state: this one waits for it.
        let mut held = state.lock().await;
        let Some(s) = held.as_mut().filter(|_| !poisoned.load(Ordering::Acquire)) else {
            // A job run in place panicked: nothing more runs (what is queued is dropped).
            rx.close();
            continue;
        };
        // The first job of a slice reads no clock; the slice's time counts from the second.
        let started =
            (in_slice > 0).then(|| *slice_start.get_or_insert_with(tokio::time::Instant::now));
        job(s).await;
        drop(held);
        drop(permit);
        in_slice += 1;
        if in_slice >= SLICE_JOBS || started.is_some_and(|at| at.elapsed() >= SLICE_TIME) {
            tokio::task::yield_now().await;
            in_slice = 0;
            slice_start = None;
        }
    }
    // Dropped here, once, after a job run in place (if any) has ended.
    let taken = state.lock().await.take();
    drop(taken);
}

#[cfg(test)]
#[path = "activation_tests.rs"]
mod tests;
