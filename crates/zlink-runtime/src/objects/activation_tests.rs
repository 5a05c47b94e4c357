//! Tests of the activation core: order, both mailbox bounds, slices, jobs run in place.

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

/// Submits a job costing `bytes` that runs until the returned sender is used (or dropped),
/// and waits until it has started.
async fn hold(a: &Activation<Counted>, bytes: usize) -> oneshot::Sender<()> {
    let (release_tx, release_rx) = oneshot::channel::<()>();
    let (started_tx, started_rx) = oneshot::channel::<()>();
    a.submit(
        bytes,
        Box::new(move |_s: &mut Counted| {
            Box::pin(async move {
                let _ = started_tx.send(());
                let _ = release_rx.await;
            })
        }),
    )
    .unwrap();
    started_rx.await.unwrap();
    release_tx
}

#[tokio::test]
async fn a_full_mailbox_refuses_on_either_axis_until_the_job_has_run() {
    let drops = Arc::new(AtomicUsize::new(0));
    let task = Activation::spawn(Counted { value: 0, drops }, 2, 1000);
    let a = task.activation().clone();
    let release_tx = hold(&a, 600).await;
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
    let release_tx = hold(&a, 10).await;
    assert_eq!(a.submit(1, add(1, None)), Err(SubmitError::Full));
    let mut seen = Vec::new();
    for _ in 0..3 {
        let (tx, rx) = oneshot::channel();
        a.reserve(5, Bound::Past)
            .unwrap()
            .queue(add(1, Some(tx)))
            .unwrap();
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
        a.reserve(1, Bound::Past).map(|_| ()),
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

/// Submits `job` offering to run it in place.
fn offer(
    a: &Activation<Counted>,
    bytes: usize,
    job: Job<Counted>,
) -> Result<Option<BoxFuture<'static, ()>>, SubmitError> {
    a.reserve(bytes, Bound::Here)?.submit(job)
}

/// What [`recorded`] jobs write: `(job, true)` at its start, `(job, false)` at its end.
type Log = Arc<parking_lot::Mutex<Vec<(usize, bool)>>>;

/// A job that records `i` when it starts, yields `waits` times (so a job run in place goes
/// on in a task of its own), checks it is the only job on the state, then records its end.
fn recorded(log: &Log, running: &Arc<AtomicUsize>, i: usize, waits: usize) -> Job<Counted> {
    let (log, running) = (Arc::clone(log), Arc::clone(running));
    Box::new(move |s: &mut Counted| {
        Box::pin(async move {
            assert_eq!(
                running.fetch_add(1, Ordering::SeqCst),
                0,
                "two jobs on the state"
            );
            log.lock().push((i, true));
            for _ in 0..waits {
                tokio::task::yield_now().await;
            }
            s.value += 1;
            log.lock().push((i, false));
            running.fetch_sub(1, Ordering::SeqCst);
        })
    })
}

fn counted() -> (Counted, Arc<AtomicUsize>) {
    let drops = Arc::new(AtomicUsize::new(0));
    (
        Counted {
            value: 0,
            drops: Arc::clone(&drops),
        },
        drops,
    )
}

#[tokio::test(flavor = "current_thread")]
async fn an_idle_activation_hands_an_offered_job_back_to_run_in_place() {
    let (state, drops) = counted();
    let task = Activation::spawn(state, 10, 1 << 20);
    let a = task.activation().clone();
    let (tx, mut rx) = oneshot::channel();
    let here = offer(&a, 7, add(5, Some(tx)))
        .unwrap()
        .expect("handed back: nothing else is pending");
    assert_eq!(a.usage(), (1, 7), "counted until it has run");
    assert!(rx.try_recv().is_err(), "not run before its caller runs it");
    assert!(crate::objects::here::RunHere::new(here).run().is_none());
    assert_eq!(
        rx.try_recv().unwrap(),
        5,
        "ran on the first poll, on this task"
    );
    assert_eq!(a.usage(), (0, 0));
    task.close().await;
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "current_thread")]
async fn an_offered_job_behind_pending_work_is_queued_in_order() {
    let (state, _drops) = counted();
    let task = Activation::spawn(state, 10, 1 << 20);
    let a = task.activation().clone();
    let (release_tx, release_rx) = oneshot::channel::<()>();
    a.submit(
        1,
        Box::new(move |s: &mut Counted| {
            Box::pin(async move {
                let _ = release_rx.await;
                s.value = 10;
            })
        }),
    )
    .unwrap();
    // Queued but not yet taken by the run loop: the offered job still must not overtake it.
    let (tx, rx) = oneshot::channel();
    assert!(offer(&a, 1, add(1, Some(tx))).unwrap().is_none());
    release_tx.send(()).unwrap();
    assert_eq!(rx.await.unwrap(), 11, "ran after the earlier job");
    task.close().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_job_run_in_place_that_waits_keeps_later_jobs_behind_it() {
    let (state, drops) = counted();
    let task = Activation::spawn(state, 10, 1 << 20);
    let a = task.activation().clone();
    let (log, running): (Log, _) = (Arc::default(), Arc::new(AtomicUsize::new(0)));
    let (release_tx, release_rx) = oneshot::channel::<()>();
    let first: Job<Counted> = {
        let log = Arc::clone(&log);
        Box::new(move |_s: &mut Counted| {
            Box::pin(async move {
                log.lock().push((0, true));
                let _ = release_rx.await;
                log.lock().push((0, false));
            })
        })
    };
    let here = offer(&a, 1, first).unwrap().expect("idle");
    let rest = crate::objects::here::RunHere::new(here)
        .run()
        .expect("it waits");
    tokio::spawn(rest);
    a.submit(1, recorded(&log, &running, 1, 0)).unwrap();
    assert!(
        offer(&a, 1, recorded(&log, &running, 2, 0))
            .unwrap()
            .is_none(),
        "not idle: queued"
    );
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        *log.lock(),
        vec![(0, true)],
        "the run loop waits for the state"
    );
    release_tx.send(()).unwrap();
    task.close().await;
    assert_eq!(
        *log.lock(),
        vec![
            (0, true),
            (0, false),
            (1, true),
            (1, false),
            (2, true),
            (2, false)
        ]
    );
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "current_thread")]
async fn a_job_run_in_place_that_panics_closes_the_activation() {
    let (state, drops) = counted();
    let task = Activation::spawn(state, 10, 1 << 20);
    let a = task.activation().clone();
    let here = offer(
        &a,
        1,
        Box::new(|_s: &mut Counted| Box::pin(async { panic!("the handler failed") })),
    )
    .unwrap()
    .expect("idle");
    assert!(crate::objects::here::RunHere::new(here).run().is_none());
    assert_eq!(a.usage(), (0, 0), "its reservation returned");
    assert_eq!(a.submit(1, add(1, None)), Err(SubmitError::Closed));
    assert!(matches!(
        offer(&a, 1, add(1, None)),
        Err(SubmitError::Closed)
    ));
    task.close().await;
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the state dropped once");
}

#[tokio::test(flavor = "current_thread")]
async fn close_drops_the_state_once_after_a_job_run_in_place_ends() {
    let (state, drops) = counted();
    let task = Activation::spawn(state, 10, 1 << 20);
    let a = task.activation().clone();
    let (release_tx, release_rx) = oneshot::channel::<()>();
    let (done_tx, done_rx) = oneshot::channel();
    let here = offer(
        &a,
        1,
        Box::new(move |s: &mut Counted| {
            Box::pin(async move {
                let _ = release_rx.await;
                s.value += 1;
                let _ = done_tx.send(drops_now(s));
            })
        }),
    )
    .unwrap()
    .expect("idle");
    tokio::spawn(
        crate::objects::here::RunHere::new(here)
            .run()
            .expect("it waits"),
    );
    let closing = tokio::spawn(task.close());
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    assert!(
        !closing.is_finished(),
        "close waits for the job run in place"
    );
    release_tx.send(()).unwrap();
    closing.await.unwrap();
    assert_eq!(done_rx.await.unwrap(), 0, "the job ran on the live state");
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert!(matches!(
        offer(&a, 1, add(1, None)),
        Err(SubmitError::Closed)
    ));
}

/// How many times the state's counter saw a drop so far (read from inside a job).
fn drops_now(s: &Counted) -> usize {
    s.drops.load(Ordering::SeqCst)
}

proptest! {
    /// Whatever mix of queued jobs and jobs offered to run in place (some of them waiting),
    /// jobs start in submission order, one at a time on the state, and every one runs.
    #[test]
    fn jobs_run_in_place_or_queued_keep_submission_order_and_exclusion(
        jobs in proptest::collection::vec((any::<bool>(), 0usize..3, 0usize..3), 1..40)
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (state, drops) = counted();
            let task = Activation::spawn(state, 1000, usize::MAX);
            let a = task.activation().clone();
            let (log, running): (Log, _) = (Arc::default(), Arc::new(AtomicUsize::new(0)));
            for (i, (in_place, waits, pause)) in jobs.iter().copied().enumerate() {
                let job = recorded(&log, &running, i, waits);
                if in_place {
                    if let Some(here) = offer(&a, 1, job).unwrap() {
                        crate::objects::here::RunHere::new(here).run_or_spawn();
                    }
                } else {
                    a.submit(1, job).unwrap();
                }
                for _ in 0..pause {
                    tokio::task::yield_now().await;
                }
            }
            task.close().await;
            let log = log.lock().clone();
            let starts: Vec<usize> = log.iter().filter(|(_, s)| *s).map(|(i, _)| *i).collect();
            assert_eq!(starts, (0..jobs.len()).collect::<Vec<_>>());
            for pair in log.chunks(2) {
                assert_eq!((pair[0].0, pair[1].0), (pair[0].0, pair[0].0), "interleaved: {log:?}");
            }
            assert_eq!(drops.load(Ordering::SeqCst), 1);
        });
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_job_that_panics_on_the_run_loop_closes_the_activation_and_drops_what_is_queued() {
    let (state, drops) = counted();
    let task = Activation::spawn(state, 10, 1 << 20);
    let a = task.activation().clone();
    a.submit(
        1,
        Box::new(|_s: &mut Counted| Box::pin(async { panic!("the handler failed") })),
    )
    .unwrap();
    let (tx, rx) = oneshot::channel();
    a.submit(1, add(1, Some(tx))).unwrap();
    assert!(rx.await.is_err(), "the queued job was dropped, not run");
    assert_eq!(a.usage(), (0, 0), "both reservations returned");
    assert_eq!(a.submit(1, add(1, None)), Err(SubmitError::Closed));
    task.close().await;
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the state dropped once");
}

/// Idle activations hold no task and no queue: a node's many idle objects cost their state
/// and a small record each, not a run loop's task and channel apiece.
#[tokio::test(flavor = "current_thread")]
async fn idle_activations_keep_no_run_loop_task_and_no_queue() {
    let tasks = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let before = tasks();
    let mut all = Vec::new();
    for _ in 0..100 {
        let (state, _drops) = counted();
        all.push(Activation::spawn(state, 10, 1 << 20));
    }
    assert_eq!(
        tasks(),
        before,
        "no task for an activation that never ran a job"
    );
    let mut seen = Vec::new();
    for t in &all {
        for i in 0..3 {
            let (tx, rx) = oneshot::channel();
            t.activation().submit(1, add(i, Some(tx))).unwrap();
            seen.push(rx);
        }
    }
    assert_eq!(tasks(), before + 100, "one run loop each while work waits");
    for rx in seen {
        rx.await.unwrap();
    }
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(tasks(), before, "every run loop ended with its queue empty");
    assert!(
        all.iter().all(|t| t.activation().idle_without_queue()),
        "no queue memory kept"
    );
    for t in all {
        t.close().await;
    }
}

#[tokio::test]
async fn the_host_gauge_counts_reserved_jobs_of_every_activation_until_they_end() {
    let gauge = JobGauge::default();
    let counted = |jobs| {
        Activation::spawn_counted(
            Counted {
                value: 0,
                drops: Arc::default(),
            },
            (jobs, 1 << 20),
            Some(gauge.clone()),
        )
    };
    let (one, two) = (counted(100), counted(2));
    let (a, b) = (one.activation().clone(), two.activation().clone());
    // One job running and two queued behind it on `a`; one running and one queued on `b`.
    let release_a = hold(&a, 1).await;
    a.submit(1, add(1, None)).unwrap();
    a.submit(1, add(1, None)).unwrap();
    let release_b = hold(&b, 1).await;
    b.submit(1, add(1, None)).unwrap();
    assert_eq!(gauge.get(), 5);
    assert_eq!(gauge.get() as usize, a.usage().0 + b.usage().0);
    // A refused job (full mailbox) is not counted.
    assert_eq!(b.submit(1, add(1, None)), Err(SubmitError::Full));
    assert_eq!(gauge.get(), 5);
    drop(release_a);
    drop(release_b);
    one.close().await;
    two.close().await;
    assert_eq!(gauge.get(), 0, "every job ran and returned its count");
}
