//! The timer table on its own, over a sink that runs each tick at once (no activation).

use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::table::{Tick, TickSink, TimerTable};
use super::{TimerConfig, TimerKind, TimerLimits};
use crate::messaging::{ErrorKind, TimerError};
use crate::objects::activation::SubmitError;

/// Runs every tick as it is submitted and records when (or refuses, as a full mailbox).
struct Sink {
    table: Mutex<Weak<TimerTable>>,
    ticks: Arc<Mutex<Vec<(String, Instant)>>>,
    full: Mutex<bool>,
}

impl TickSink for Sink {
    fn submit_tick(&self, tick: Tick) -> Result<(), SubmitError> {
        if *self.full.lock() {
            return Err(SubmitError::Full);
        }
        let Some(table) = self.table.lock().upgrade() else {
            return Err(SubmitError::Closed);
        };
        let ticks = Arc::clone(&self.ticks);
        // Like the activation: the job runs later, on its own task.
        tokio::spawn(async move {
            if table.begin_tick(&tick.name, tick.id) {
                ticks.lock().push((tick.name.to_string(), Instant::now()));
            }
        });
        Ok(())
    }
}

struct Rig {
    table: Arc<TimerTable>,
    sink: Arc<Sink>,
    ticks: Arc<Mutex<Vec<(String, Instant)>>>,
}

fn rig(max: usize, min: Duration) -> Rig {
    let table = TimerTable::new(TimerConfig::new(TimerLimits::new(max, min)), "a1");
    let sink = Arc::new(Sink {
        table: Mutex::new(Arc::downgrade(&table)),
        ticks: Arc::default(),
        full: Mutex::new(false),
    });
    let weak: Weak<dyn TickSink> = Arc::downgrade(&sink) as Weak<dyn TickSink>;
    table.attach(weak);
    table.resume();
    let ticks = Arc::clone(&sink.ticks);
    Rig { table, sink, ticks }
}

fn count(ticks: &Mutex<Vec<(String, Instant)>>, name: &str) -> usize {
    ticks.lock().iter().filter(|(n, _)| n == name).count()
}

async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_one_shot_timer_fires_once_after_its_delay() {
    let r = rig(8, Duration::from_millis(10));
    let start = Instant::now();
    let h = r
        .table
        .start("once".into(), TimerKind::Once, Duration::from_millis(30))
        .unwrap();
    assert_eq!(h.kind(), TimerKind::Once);
    until("it fired", || count(&r.ticks, "once") == 1).await;
    let at = r.ticks.lock()[0].1;
    assert!(at.duration_since(start) >= Duration::from_millis(30));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(count(&r.ticks, "once"), 1, "fired once");
    assert!(r.table.names().is_empty(), "gone once its tick ran");
    assert!(!h.cancel(), "nothing left to cancel");
}

/// Tolerance: over 10 ticks of a 40 ms timer the mean interval is within [40 ms, 90 ms] and
/// no tick comes before its due time (fixed rate).
#[tokio::test(flavor = "current_thread")]
async fn a_periodic_timer_ticks_at_its_period_and_stops_on_cancel() {
    let r = rig(8, Duration::from_millis(10));
    let period = Duration::from_millis(40);
    let start = Instant::now();
    let h = r
        .table
        .start("p".into(), TimerKind::Every(period), period)
        .unwrap();
    until("10 ticks", || count(&r.ticks, "p") >= 10).await;
    assert!(h.cancel(), "cancelled while armed");
    let seen: Vec<Instant> = r.ticks.lock().iter().map(|(_, t)| *t).collect();
    for (i, t) in seen.iter().enumerate() {
        let due = start + period * (i as u32 + 1);
        assert!(*t >= due, "tick {i} came before its due time");
    }
    let mean = seen[9].duration_since(start) / 10;
    assert!(
        mean >= period && mean <= period + Duration::from_millis(50),
        "mean interval {mean:?}"
    );
    let after = count(&r.ticks, "p");
    tokio::time::sleep(period * 4).await;
    assert_eq!(count(&r.ticks, "p"), after, "no tick after the cancel");
    assert!(!r.table.cancel("p", None));
}

#[tokio::test(flavor = "current_thread")]
async fn a_name_in_use_is_already_exists_and_a_handle_cancels_only_its_own_timer() {
    let r = rig(8, Duration::from_millis(10));
    let first = r
        .table
        .start("t".into(), TimerKind::Once, Duration::from_secs(60))
        .unwrap();
    let err = r
        .table
        .start(
            "t".into(),
            TimerKind::Every(Duration::from_secs(1)),
            Duration::from_secs(1),
        )
        .unwrap_err();
    assert_eq!(err, TimerError::AlreadyExists { name: "t".into() });
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
    assert_eq!(r.table.names(), vec!["t".to_owned()], "nothing changed");
    assert!(r.table.cancel("t", None), "by name");
    let _second = r
        .table
        .start("t".into(), TimerKind::Once, Duration::from_secs(60))
        .unwrap();
    assert!(
        !first.cancel(),
        "the old handle does not cancel the new timer"
    );
    assert_eq!(r.table.names(), vec!["t".to_owned()]);
    for name in [String::new(), "x".repeat(256)] {
        let err = r
            .table
            .start(name.clone(), TimerKind::Once, Duration::ZERO)
            .unwrap_err();
        assert_eq!(err, TimerError::InvalidName { len: name.len() });
    }
    r.table
        .start("x".repeat(255), TimerKind::Once, Duration::from_secs(60))
        .unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn an_object_at_its_timer_count_refuses_one_more_and_changes_nothing() {
    let r = rig(2, Duration::from_millis(10));
    for n in ["a", "b"] {
        r.table
            .start(n.into(), TimerKind::Once, Duration::from_secs(60))
            .unwrap();
    }
    let err = r
        .table
        .start("c".into(), TimerKind::Once, Duration::from_secs(60))
        .unwrap_err();
    assert_eq!(err, TimerError::TooMany { max: 2 });
    assert_eq!(err.kind(), ErrorKind::CapacityExceeded);
    assert_eq!(r.table.names(), vec!["a".to_owned(), "b".to_owned()]);
}

#[tokio::test(flavor = "current_thread")]
async fn a_period_at_the_minimum_is_accepted_and_one_below_it_refused() {
    let min = Duration::from_millis(20);
    let r = rig(8, min);
    r.table
        .start("at".into(), TimerKind::Every(min), min)
        .unwrap();
    let below = min - Duration::from_nanos(1);
    let err = r
        .table
        .start("below".into(), TimerKind::Every(below), below)
        .unwrap_err();
    assert_eq!(err, TimerError::PeriodTooShort { period: below, min });
    assert_eq!(err.kind(), ErrorKind::InvalidOperation);
    assert_eq!(r.table.names(), vec!["at".to_owned()]);
}

#[tokio::test(flavor = "current_thread")]
async fn close_cancels_every_timer_exactly_once() {
    let r = rig(8, Duration::from_millis(10));
    r.table
        .start(
            "a".into(),
            TimerKind::Every(Duration::from_millis(10)),
            Duration::from_millis(10),
        )
        .unwrap();
    r.table
        .start("b".into(), TimerKind::Once, Duration::from_millis(30))
        .unwrap();
    assert_eq!(r.table.close(), 2);
    assert_eq!(r.table.close(), 0, "a second close cancels nothing");
    let err = r
        .table
        .start("c".into(), TimerKind::Once, Duration::ZERO)
        .unwrap_err();
    assert_eq!(err, TimerError::NoActivation);
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert_eq!(r.ticks.lock().len(), 0, "no tick after the close");
}

#[tokio::test(flavor = "current_thread")]
async fn a_suspended_timer_moves_with_its_due_time_and_fires_once_on_the_restoring_table() {
    let r = rig(8, Duration::from_millis(10));
    r.table
        .start("soon".into(), TimerKind::Once, Duration::from_millis(40))
        .unwrap();
    r.table
        .start(
            "every".into(),
            TimerKind::Every(Duration::from_millis(50)),
            Duration::from_millis(50),
        )
        .unwrap();
    r.table.suspend();
    // Past both due times while suspended: nothing ticks here.
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert_eq!(r.ticks.lock().len(), 0);
    let carried = r.table.snapshot();
    assert_eq!(carried.len(), 2);
    assert!(
        carried.iter().all(|w| w.due_in_ms == 0),
        "both overdue: {carried:?}"
    );
    r.table.close();

    let target = rig(8, Duration::from_millis(10));
    target.table.suspend();
    // The factory started one of the same name: the carried one replaces it.
    target
        .table
        .start("every".into(), TimerKind::Once, Duration::from_secs(60))
        .unwrap();
    target.table.restore(&carried);
    assert_eq!(
        target.table.names(),
        vec!["every".to_owned(), "soon".to_owned()]
    );
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(
        target.ticks.lock().len(),
        0,
        "hidden: nothing ticks before dispatch opens"
    );
    target.table.resume();
    until("both fired on the target", || {
        count(&target.ticks, "soon") == 1 && count(&target.ticks, "every") >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert_eq!(count(&target.ticks, "soon"), 1, "the one-shot fired once");
}

#[tokio::test(flavor = "current_thread")]
async fn a_tick_the_mailbox_refuses_is_skipped_and_counted() {
    let r = rig(8, Duration::from_millis(10));
    *r.sink.full.lock() = true;
    r.table
        .start(
            "p".into(),
            TimerKind::Every(Duration::from_millis(10)),
            Duration::from_millis(10),
        )
        .unwrap();
    until("skipped ticks are counted", || {
        r.table.counters().get().2 >= 3
    })
    .await;
    *r.sink.full.lock() = false;
    until("ticks run again", || count(&r.ticks, "p") >= 1).await;
}

#[test]
fn a_carried_timer_is_the_json_docs_formats_names() {
    use super::wire::TimerWire;
    let every = TimerWire::of(
        "beat",
        TimerKind::Every(Duration::from_millis(50)),
        Duration::from_millis(12),
    );
    assert_eq!(
        serde_json::to_string(&every).unwrap(),
        r#"{"name":"beat","kind":"every","periodMs":50,"dueInMs":12}"#
    );
    let once = TimerWire::of("boot", TimerKind::Once, Duration::ZERO);
    assert_eq!(
        serde_json::to_string(&once).unwrap(),
        r#"{"name":"boot","kind":"once","dueInMs":0}"#
    );
    for w in [&every, &once] {
        let back: TimerWire = serde_json::from_str(&serde_json::to_string(w).unwrap()).unwrap();
        assert_eq!(&back, w);
    }
    assert_eq!(
        every.kind(),
        Some(TimerKind::Every(Duration::from_millis(50)))
    );
    let unknown: TimerWire =
        serde_json::from_str(r#"{"name":"x","kind":"cron","dueInMs":0}"#).unwrap();
    assert_eq!(
        unknown.kind(),
        None,
        "an unknown kind is dropped on restore"
    );
}
