//! Actor timers through a running host (spec 21 §1, §1.2, §5; 06 §11): a periodic timer ticks
//! at its period and stops on cancel and on destroy, a one-shot fires once, a node's count
//! bound is a typed error, no tick starts past the admission deadline, and (`relocate.rs`) a
//! host Relocate under load carries every timer to the target exactly once.

mod job_queue;
mod per_actor;
mod relocate;
mod spots;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use zlink_codec::records::ObjectRole;
use zlink_store_conformance::{Fault, FaultyLocationStore, LocationOp};
use zlink_store_spi::DynLocationStore;

use super::support::*;
use crate::host::ZLinkHost;
use crate::host::config::ZLink;
use crate::messaging::{BoxError, ErrorKind, Message, Request};
use crate::objects::{Actor, ActorStateAdapter, ActorType, TimerContext, TimerLimits};
use zlink_testkit::Harness;

on_every_store!(
    a_periodic_timer_ticks_at_its_period_and_stops_on_cancel,
    a_periodic_timer_stops_when_its_actor_is_destroyed,
    a_one_shot_timer_started_by_the_factory_fires_once,
    an_actor_past_its_timer_count_gets_a_typed_error,
    no_tick_starts_after_the_admission_deadline,
);

/// One tick as the application saw it.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    pub(super) node: &'static str,
    pub(super) name: String,
    /// The Actor's own tick count after this tick (its state; moves with PreserveStateWith).
    pub(super) n: u64,
    pub(super) at: Instant,
}

/// Every tick of every Actor, by id.
pub(super) type Log = Arc<Mutex<HashMap<String, Vec<Seen>>>>;

/// An Actor that records its ticks in the shared log.
pub(super) struct Ticker {
    pub(super) node: &'static str,
    pub(super) ticks: u64,
    pub(super) log: Log,
}

impl Actor for Ticker {
    async fn on_timer(&mut self, ctx: TimerContext, name: &str) -> Result<(), BoxError> {
        self.ticks += 1;
        self.log.lock().entry(ctx.id).or_default().push(Seen {
            node: self.node,
            name: name.to_owned(),
            n: self.ticks,
            at: Instant::now(),
        });
        Ok(())
    }
}

/// Starts a periodic timer (`period_ms`) or a one-shot (`once: true`, after `period_ms`).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Start {
    pub(super) name: String,
    pub(super) period_ms: u64,
    pub(super) once: bool,
}
impl Message for Start {
    const PACKET: &'static str = "TimerStart";
}
impl Request for Start {
    type Reply = ();
}

/// Cancels by name; the reply says whether it existed.
#[derive(Debug, Serialize, Deserialize)]
struct Cancel {
    name: String,
}
impl Message for Cancel {
    const PACKET: &'static str = "TimerCancel";
}
impl Request for Cancel {
    type Reply = bool;
}

/// How a Ticker type moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Moves {
    Never,
    Recreate,
    /// PreserveStateWith: the tick count moves.
    Preserve,
}

/// The Ticker type on node `node`, moving as `moves`; `boot` is a one-shot the factory starts
/// (name, delay).
pub(super) fn ticker_type(
    node: &'static str,
    log: &Log,
    moves: Moves,
    boot: Option<(&'static str, Duration)>,
) -> impl FnOnce(ActorType<Ticker>) -> ActorType<Ticker> {
    let log = Arc::clone(log);
    let restore_log = Arc::clone(&log);
    move |t| {
        let t = t
            .factory(move |ctx| {
                let log = Arc::clone(&log);
                async move {
                    if let Some((name, after)) = boot {
                        ctx.timers().start_once(name, after)?;
                    }
                    Ok(Ticker {
                        node,
                        ticks: 0,
                        log,
                    })
                }
            })
            .on_request::<Start, _>(|_t, s, ctx| {
                Box::pin(async move {
                    let d = Duration::from_millis(s.period_ms);
                    if s.once {
                        ctx.timers().start_once(s.name, d)?;
                    } else {
                        ctx.timers().start_every(s.name, d)?;
                    }
                    Ok(())
                })
            })
            .on_request::<Cancel, _>(|_t, c, ctx| {
                Box::pin(async move { Ok(ctx.timers().cancel(&c.name)) })
            });
        match moves {
            Moves::Never => t.disable_relocation(),
            Moves::Recreate => t.recreate_on_relocation(),
            Moves::Preserve => t.preserve_state_with(Restoring {
                node,
                log: restore_log,
            }),
        }
    }
}

/// PreserveStateWith: the tick count as a big-endian `u64`, restored onto node `node`'s log.
pub(super) struct Restoring {
    node: &'static str,
    log: Log,
}
impl ActorStateAdapter<Ticker> for Restoring {
    fn capture(&self, t: &Ticker) -> Result<Vec<u8>, BoxError> {
        Ok(t.ticks.to_be_bytes().to_vec())
    }
    fn restore(&self, bytes: &[u8]) -> Result<Ticker, BoxError> {
        let b: [u8; 8] = bytes.try_into().map_err(|_| "not a tick count")?;
        Ok(Ticker {
            node: self.node,
            ticks: u64::from_be_bytes(b),
            log: Arc::clone(&self.log),
        })
    }
}

pub(super) fn ticks(log: &Log, id: &str, name: &str) -> Vec<Seen> {
    log.lock()
        .get(id)
        .map(|v| v.iter().filter(|s| s.name == name).cloned().collect())
        .unwrap_or_default()
}

async fn one_server(
    h: &Harness,
    log: &Log,
    limits: TimerLimits,
    boot: Option<(&'static str, Duration)>,
) -> ZLinkHost {
    let log = Arc::clone(log);
    let (host, _node) = start(h, move |n| {
        n.object_role(ObjectRole::Server)
            .timer_limits(limits)
            .actor_type::<Ticker>("ticker", ticker_type("a", &log, Moves::Never, boot))
    })
    .await;
    // The first discovery read lists this node as a placement candidate.
    tokio::time::sleep(Duration::from_millis(300)).await;
    host
}

pub(super) fn start_every(name: &str, period: Duration) -> Start {
    Start {
        name: name.to_owned(),
        period_ms: period.as_millis() as u64,
        once: false,
    }
}

/// Tolerance: over 10 ticks of a 50 ms timer the mean interval from the start is within
/// [50 ms, 100 ms], and no tick comes before its due time (a correctness bound, not a
/// benchmark).
async fn a_periodic_timer_ticks_at_its_period_and_stops_on_cancel(h: &Harness) {
    let log = Log::default();
    let host = one_server(h, &log, TimerLimits::default(), None).await;
    let actors = host.actors().expect("manager");
    actors.get_or_create("ticker", "t1").await.expect("created");
    let period = Duration::from_millis(50);
    let started = Instant::now();
    actors
        .request("t1", &start_every("beat", period))
        .await
        .expect("started");
    wait_until("10 ticks", || ticks(&log, "t1", "beat").len() >= 10).await;
    assert!(
        actors
            .request(
                "t1",
                &Cancel {
                    name: "beat".into()
                }
            )
            .await
            .expect("cancel")
    );
    let seen = ticks(&log, "t1", "beat");
    let tenth = seen[9].at.duration_since(started);
    assert!(tenth >= period * 10, "the 10th tick came early: {tenth:?}");
    let mean = tenth / 10;
    assert!(
        mean <= period + Duration::from_millis(50),
        "mean interval {mean:?}"
    );
    let after = ticks(&log, "t1", "beat").len();
    tokio::time::sleep(period * 5).await;
    assert_eq!(
        ticks(&log, "t1", "beat").len(),
        after,
        "a tick after the cancel"
    );
    let again = actors
        .request(
            "t1",
            &Cancel {
                name: "beat".into(),
            },
        )
        .await;
    assert!(!again.expect("cancel"), "nothing left to cancel");
    host.shutdown().await;
}

async fn a_periodic_timer_stops_when_its_actor_is_destroyed(h: &Harness) {
    let log = Log::default();
    let host = one_server(h, &log, TimerLimits::default(), None).await;
    let actors = host.actors().expect("manager");
    let r = actors.get_or_create("ticker", "t2").await.expect("created");
    let period = Duration::from_millis(20);
    actors
        .request("t2", &start_every("beat", period))
        .await
        .expect("started");
    wait_until("3 ticks", || ticks(&log, "t2", "beat").len() >= 3).await;
    assert!(actors.destroy(&r).await.expect("destroy"));
    let after = ticks(&log, "t2", "beat").len();
    tokio::time::sleep(period * 10).await;
    assert_eq!(
        ticks(&log, "t2", "beat").len(),
        after,
        "a tick after the destroy"
    );
    host.shutdown().await;
}

async fn a_one_shot_timer_started_by_the_factory_fires_once(h: &Harness) {
    let log = Log::default();
    let boot = Some(("boot", Duration::from_millis(40)));
    let host = one_server(h, &log, TimerLimits::default(), boot).await;
    let actors = host.actors().expect("manager");
    actors.get_or_create("ticker", "t3").await.expect("created");
    wait_until("the one-shot fired", || {
        ticks(&log, "t3", "boot").len() == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(ticks(&log, "t3", "boot").len(), 1, "fired once");
    host.shutdown().await;
}

async fn an_actor_past_its_timer_count_gets_a_typed_error(h: &Harness) {
    let log = Log::default();
    let limits = TimerLimits::new(2, Duration::from_millis(10));
    let host = one_server(h, &log, limits, None).await;
    let actors = host.actors().expect("manager");
    actors.get_or_create("ticker", "t4").await.expect("created");
    for name in ["a", "b"] {
        actors
            .request("t4", &start_every(name, Duration::from_secs(60)))
            .await
            .expect("at the bound");
    }
    let err = actors
        .request("t4", &start_every("c", Duration::from_secs(60)))
        .await
        .expect_err("past the bound");
    assert_eq!(err.kind(), ErrorKind::CapacityExceeded, "{err:?}");
    let short = actors
        .request("t4", &start_every("d", Duration::from_millis(5)))
        .await
        .expect_err("below the minimum period");
    // A period below the minimum is the handler's own invalid argument, no result of the
    // caller's request (spec 06 §20): `InternalFailure`, the timer's error kept as the source
    // (the count bound may refuse it first).
    if short.kind() != ErrorKind::CapacityExceeded {
        assert_eq!(short.kind(), ErrorKind::InternalFailure, "{short:?}");
        let timer = std::error::Error::source(&short)
            .and_then(|s| s.downcast_ref::<crate::messaging::ZLinkError>())
            .unwrap_or_else(|| panic!("the handler's error is the source: {short:?}"));
        assert_eq!(timer.kind(), ErrorKind::InvalidOperation, "{timer:?}");
    }
    let dup = actors
        .request("t4", &start_every("a", Duration::from_secs(60)))
        .await
        .expect_err("a name in use");
    assert_eq!(dup.kind(), ErrorKind::AlreadyExists, "{dup:?}");
    host.shutdown().await;
}

/// The owner's Store becomes unreachable: once its admission deadline has passed
/// (`short_lease`), every tick is refused at its start and counted.
async fn no_tick_starts_after_the_admission_deadline(h: &Harness) {
    let log = Log::default();
    let faulty = Arc::new(FaultyLocationStore::new(Arc::clone(&h.store)));
    let store: Arc<dyn DynLocationStore> = faulty.clone();
    let for_type = Arc::clone(&log);
    let host = ZLink::builder()
        .location_store(store)
        .location_options(short_lease().polling_interval(Duration::from_millis(100)))
        .route_mesh(mesh(), move |n| {
            n.object_role(ObjectRole::Server)
                .actor_type::<Ticker>("ticker", ticker_type("a", &for_type, Moves::Never, None))
        })
        .build()
        .start()
        .await
        .expect("the host starts");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let actors = host.actors().expect("manager");
    actors.get_or_create("ticker", "t5").await.expect("created");
    actors
        .request("t5", &start_every("beat", Duration::from_millis(20)))
        .await
        .expect("started");
    wait_until("it ticks", || ticks(&log, "t5", "beat").len() >= 3).await;
    let objects = Arc::clone(&actors.client.objects);
    let (_, refused_before, _) = objects.timer_counters().get();
    faulty.set_fault(LocationOp::ALL, Fault::UNAVAILABLE);
    let location = Arc::clone(&objects.location);
    wait_until("the admission deadline passes", || !location.is_admitting()).await;
    let at_deadline = ticks(&log, "t5", "beat").len();
    wait_until("ticks are refused at their start", || {
        objects.timer_counters().get().1 >= refused_before + 5
    })
    .await;
    // At most a tick that had already started when the deadline passed.
    assert!(
        ticks(&log, "t5", "beat").len() <= at_deadline + 1,
        "a tick ran past the admission deadline"
    );
    let stats = objects.timer_counters().get();
    assert!(stats.1 > refused_before, "refusals are counted: {stats:?}");
    faulty.heal();
    host.shutdown().await;
}
