//! The demo's Counter Actor type — its state moves with it (PreserveStateWith, a JSON adapter) —
//! and the phase that relocates root 1 under load: roots 2 and 3 each run two concurrent
//! sequential streams of numbered `Step` requests per Actor of root 1, root 1 relocates
//! (PlannedMaintenance) while they run, and the streams' answers are checked against what each
//! Actor applied — at most `--concurrency` steps in flight over all streams together, so the
//! load is the demo's steady request rate, not one request loop per stream: nothing lost
//! (answered but never run), nothing duplicated, no step run
//! without its answer arriving, every stream in order, each Actor's state the sum of its steps
//! and its `Incr` count kept. The streaming roots are the Relocate's targets, so some streams
//! reach an Actor moving to their own root.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use zlink_codec::RoutingId;
use zlink_runtime::Actor;
use zlink_runtime::ActorManager;
use zlink_runtime::BoxError;
use zlink_runtime::CallOptions;
use zlink_runtime::ErrorKind;
use zlink_runtime::Message;
use zlink_runtime::Request;
use zlink_runtime::ZLinkHost;
use zlink_runtime::config::ActorType;
use zlink_runtime::relocate::ActorStateAdapter;
use zlink_runtime::relocate::RelocateOptions;
use zlink_runtime::status::CompletionCounts;
use zlink_runtime::status::RelocationOutcome;
use zlink_runtime::status::RelocationReason;

/// The relocated root (root 1 in the output).
const SOURCE: usize = 0;
/// The roots whose streams load it.
const STREAMERS: [usize; 2] = [1, 2];
/// Streams per Actor from each streaming root.
const LANES_PER_ROOT: u32 = 2;
/// The Relocate's deadline.
const RELOCATE_DEADLINE: Duration = Duration::from_secs(60);
/// How many steps each stream has answered, on average, before the Relocate starts.
const WARM_STEPS: u64 = 5;
/// How long the streams run on after the Relocate returned (callers following or re-reading).
const AFTER: Duration = Duration::from_secs(1);
/// The reply timeout of one step.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stream waits before it sends a refused step again.
const RETRY_PAUSE: Duration = Duration::from_millis(10);
/// How long the streams may take to warm up.
const WARM_WAIT: Duration = Duration::from_secs(20);

/// What one stream's steps did on a counter.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Lane {
    /// Steps applied.
    applied: u64,
    /// The sum of their sequence numbers.
    sum: u64,
    /// The last sequence number applied.
    last: u64,
    /// Steps whose number was not above the last one.
    dups: u64,
    /// Steps whose number skipped past the last one + 1.
    gaps: u64,
}

/// A counter Actor: `Incr` adds one and returns the count, `Get` returns it, `Step` records a
/// numbered step of one stream.
#[derive(Default, Serialize, Deserialize)]
pub(super) struct Counter {
    n: u64,
    lanes: BTreeMap<u32, Lane>,
}
impl Actor for Counter {}

/// Adds one to the counter; replies with the new count.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Incr;
impl Message for Incr {
    const PACKET: &'static str = "Incr";
}
impl Request for Incr {
    type Reply = u64;
}

/// Reads the counter.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Get;
impl Message for Get {
    const PACKET: &'static str = "Get";
}
impl Request for Get {
    type Reply = u64;
}

/// Step `seq` of stream `lane`; replies with `seq`.
#[derive(Debug, Serialize, Deserialize)]
struct Step {
    lane: u32,
    seq: u64,
}
impl Message for Step {
    const PACKET: &'static str = "Step";
}
impl Request for Step {
    type Reply = u64;
}

/// Every stream's record on the counter.
#[derive(Debug, Serialize, Deserialize)]
struct Lanes;
impl Message for Lanes {
    const PACKET: &'static str = "Lanes";
}
impl Request for Lanes {
    type Reply = BTreeMap<u32, Lane>;
}

/// Captures and restores the whole counter as JSON.
struct Json;
impl ActorStateAdapter<Counter> for Json {
    fn capture(&self, c: &Counter) -> Result<Vec<u8>, BoxError> {
        Ok(serde_json::to_vec(c)?)
    }
    fn restore(&self, bytes: &[u8]) -> Result<Counter, BoxError> {
        Ok(serde_json::from_slice(bytes)?)
    }
}

/// The counter type's registration: its handlers, and its state moving with it.
pub(super) fn counter_type(t: ActorType<Counter>) -> ActorType<Counter> {
    t.factory(|_ctx| async { Ok(Counter::default()) })
        .on_request::<Incr, _>(|c, _incr, _ctx| {
            Box::pin(async move {
                c.n += 1;
                Ok(c.n)
            })
        })
        .on_request::<Get, _>(|c, _get, _ctx| Box::pin(async move { Ok(c.n) }))
        .on_request::<Step, _>(|c, step, _ctx| {
            Box::pin(async move {
                let lane = c.lanes.entry(step.lane).or_default();
                if step.seq <= lane.last {
                    lane.dups += 1;
                } else if step.seq > lane.last + 1 {
                    lane.gaps += 1;
                }
                lane.last = step.seq;
                lane.applied += 1;
                lane.sum += step.seq;
                Ok(step.seq)
            })
        })
        .on_request::<Lanes, _>(|c, _lanes, _ctx| {
            let lanes = c.lanes.clone();
            Box::pin(async move { Ok(lanes) })
        })
        .preserve_state_with(Json)
}

/// What one stream saw.
struct Streamed {
    id: String,
    lane: u32,
    /// The last step answered (every one before it was answered too).
    last: u64,
    /// Replies that were not their step's number.
    wrong_replies: u64,
    /// Refusals by error kind (the step was sent again).
    refused: BTreeMap<String, u64>,
    /// Steps that timed out (0 or 1: a time-out ends the stream).
    timeouts: u64,
}

/// What the relocation phase measured and checked.
#[derive(Debug, Default)]
pub(crate) struct Relocation {
    /// Actors the Relocate moved.
    pub(crate) moved: usize,
    /// Steps answered.
    pub(crate) answered: u64,
    /// Answered steps the Actor never ran.
    pub(crate) lost: u64,
    /// Steps that ran more than once.
    pub(crate) duplicated: u64,
    /// Steps that ran out of their stream's order.
    pub(crate) order: u64,
    /// Steps that ran though their answer never arrived (refused or timed out).
    pub(crate) unanswered: u64,
}

/// Relocates root 1 while roots 2 and 3 stream steps to its Actors `ids` (each holding the
/// `Incr` count `expected[id]`), prints what happened, and fails unless every check holds.
pub(super) async fn relocate_under_load(
    hosts: &[ZLinkHost],
    managers: &Arc<Vec<ActorManager>>,
    rids: &[RoutingId],
    ids: &[(String, u64)],
    concurrency: usize,
) -> Result<Relocation, String> {
    let stop = Arc::new(AtomicBool::new(false));
    // Steps in flight over every stream together (each stream stays sequential).
    let in_flight = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let answered = Arc::new(AtomicU64::new(0));
    let mut streams = Vec::new();
    for (k, root) in STREAMERS.into_iter().enumerate() {
        for lane in (0..LANES_PER_ROOT).map(|l| k as u32 * LANES_PER_ROOT + l) {
            for (id, _) in ids {
                let (m, id) = (managers[root].clone(), id.clone());
                let (stop, answered) = (Arc::clone(&stop), Arc::clone(&answered));
                let in_flight = Arc::clone(&in_flight);
                streams.push(tokio::spawn(async move {
                    stream(m, (id, lane), stop, answered, in_flight).await
                }));
            }
        }
    }
    // Every stream under way (on average) before the Relocate starts.
    let warm = WARM_STEPS * streams.len() as u64;
    let deadline = Instant::now() + WARM_WAIT;
    while answered.load(Ordering::Relaxed) < warm && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let before = answered.load(Ordering::Relaxed);
    let t = Instant::now();
    let result = hosts[SOURCE]
        .relocate(RelocateOptions::planned_maintenance().deadline(RELOCATE_DEADLINE))
        .await
        .map_err(|e| format!("relocate: {e}"))?;
    let took = t.elapsed();
    let during = answered.load(Ordering::Relaxed) - before;
    tokio::time::sleep(AFTER).await;
    stop.store(true, Ordering::Relaxed);
    let mut seen = Vec::new();
    for s in streams {
        seen.push(s.await.map_err(|e| format!("a stream failed: {e}"))?);
    }

    // Each Actor's own record against its streams, its Incr count, and where it is now.
    let mut out = Relocation {
        moved: result.moved,
        ..Relocation::default()
    };
    let (mut timeouts, mut wrong_replies) = (0, 0);
    let mut refused: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_id: BTreeMap<&str, Vec<&Streamed>> = BTreeMap::new();
    for s in &seen {
        out.answered += s.last;
        timeouts += s.timeouts;
        wrong_replies += s.wrong_replies;
        for (kind, n) in &s.refused {
            *refused.entry(kind.clone()).or_default() += n;
        }
        by_id.entry(&s.id).or_default().push(s);
    }
    let reader = &managers[STREAMERS[0]];
    let (mut state_off, mut counts_off, mut not_moved) = (Vec::new(), Vec::new(), Vec::new());
    for (id, expected) in ids {
        let lanes = reader
            .request(id, &Lanes)
            .await
            .map_err(|e| format!("Lanes {id}: {e}"))?;
        for s in by_id.get(id.as_str()).into_iter().flatten() {
            let got = lanes.get(&s.lane).copied().unwrap_or_default();
            out.lost += s.last.saturating_sub(got.applied);
            out.duplicated += got.dups;
            out.order += got.gaps;
            // Past the last answered step: it ran, but its answer never arrived.
            out.unanswered += got.last.saturating_sub(s.last);
            if (got.applied, got.sum) != (s.last, s.last * (s.last + 1) / 2) {
                state_off.push(format!("{id}/{}: {got:?}, {} answered", s.lane, s.last));
            }
        }
        let n = reader
            .request(id, &Get)
            .await
            .map_err(|e| format!("Get {id}: {e}"))?;
        if n != *expected {
            counts_off.push(format!("{id}={n} (expected {expected})"));
        }
        let now = reader
            .find(id)
            .await
            .map_err(|e| format!("find {id}: {e}"))?
            .map(|r| r.node);
        if !now
            .as_ref()
            .is_some_and(|n| STREAMERS.iter().any(|k| rids[*k] == *n))
        {
            not_moved.push(id.clone());
        }
    }

    let ok = |good: bool| if good { "ok" } else { "WRONG" };
    let refusals = if refused.is_empty() {
        String::new()
    } else {
        let kinds: Vec<String> = refused.iter().map(|(k, n)| format!("{k} {n}")).collect();
        format!(" ({})", kinds.join(", "))
    };
    println!();
    println!(
        "relocate   root {} under load: {:?}/{:?}, moved {} actors ({} remaining) in {:.2} s; \
         {} streams from roots {} and {}, {during} steps answered during the Relocate",
        SOURCE + 1,
        result.outcome,
        result.reason,
        result.moved,
        result.remaining,
        took.as_secs_f64(),
        seen.len(),
        STREAMERS[0] + 1,
        STREAMERS[1] + 1,
    );
    println!(
        "           accepted {}, answered {}, refused {}{refusals}, timed out {timeouts}",
        out.answered + timeouts,
        out.answered,
        refused.values().sum::<u64>(),
    );
    println!(
        "           lost {} {}, duplicated {} {}, order violations {} {}, ran unanswered {} {}, \
         wrong replies {wrong_replies} {}",
        out.lost,
        ok(out.lost == 0),
        out.duplicated,
        ok(out.duplicated == 0),
        out.order,
        ok(out.order == 0),
        out.unanswered,
        ok(out.unanswered == 0),
        ok(wrong_replies == 0),
    );
    println!(
        "           state = sum of the steps: {}; Incr counts kept: {}; on roots {} and {} now: {}",
        ok(state_off.is_empty()),
        ok(counts_off.is_empty()),
        STREAMERS[0] + 1,
        STREAMERS[1] + 1,
        ok(not_moved.is_empty()),
    );
    // Requests the source held at a seal and relayed finished on the targets as completion
    // records (stored, recorded, delivered to the streaming roots, spec 21 §9.3).
    let completions = STREAMERS
        .iter()
        .map(|k| hosts[*k].status().completions)
        .fold(CompletionCounts::default(), |a, b| a + b);
    println!(
        "           completion records on roots {} and {}: recorded {}, delivered {} (already \
         ended {}, requester gone {}), data lost {} {}",
        STREAMERS[0] + 1,
        STREAMERS[1] + 1,
        completions.recorded,
        completions.terminal_received,
        completions.already_terminal,
        completions.source_lease_expired,
        completions.data_lost,
        ok(completions.data_lost == 0),
    );

    let mut failed = Vec::new();
    if completions.data_lost > 0 {
        failed.push(format!("{} completion results lost", completions.data_lost));
    }
    if (result.outcome, result.reason, result.remaining)
        != (RelocationOutcome::Relocated, RelocationReason::None, 0)
    {
        failed.push(format!("the Relocate ended {result:?}"));
    }
    if result.moved < ids.len() {
        failed.push(format!("moved {} of {} actors", result.moved, ids.len()));
    }
    if out.lost + out.duplicated + out.order + out.unanswered + wrong_replies + timeouts > 0 {
        failed.push(format!(
            "lost {}, duplicated {}, order {}, ran unanswered {}, wrong replies {wrong_replies}, \
             timeouts {timeouts}",
            out.lost, out.duplicated, out.order, out.unanswered
        ));
    }
    for (what, list) in [
        ("state off", &state_off),
        ("Incr counts off", &counts_off),
        ("not on roots 2/3", &not_moved),
    ] {
        if !list.is_empty() {
            let shown: Vec<&String> = list.iter().take(5).collect();
            failed.push(format!("{} {what}, e.g. {shown:?}", list.len()));
        }
    }
    if failed.is_empty() {
        Ok(out)
    } else {
        Err(format!("relocation under load: {}", failed.join("; ")))
    }
}

/// One sequential stream of steps `1, 2, …` of `lane` to `id` until `stop`: an answered step
/// moves on, a refused one is sent again with the same number, a timed-out one ends the stream
/// (its outcome is unknown).
async fn stream(
    m: ActorManager,
    (id, lane): (String, u32),
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicU64>,
    in_flight: Arc<tokio::sync::Semaphore>,
) -> Streamed {
    let options = CallOptions::default().reply_timeout(STEP_TIMEOUT);
    let mut s = Streamed {
        id,
        lane,
        last: 0,
        wrong_replies: 0,
        refused: BTreeMap::new(),
        timeouts: 0,
    };
    while !stop.load(Ordering::Relaxed) {
        let seq = s.last + 1;
        let Ok(_permit) = in_flight.acquire().await else {
            break;
        };
        match m.request_with(&s.id, &Step { lane, seq }, &options).await {
            Ok(reply) => {
                if reply != seq {
                    s.wrong_replies += 1;
                }
                s.last = seq;
                answered.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) if e.kind() == ErrorKind::DeadlineExceeded => {
                // It may have run: sending it again could run it twice.
                s.timeouts += 1;
                break;
            }
            Err(e) => {
                *s.refused.entry(e.kind().to_string()).or_default() += 1;
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
    s
}
