//! The Actor commands of `--objects`: `ACTORS`, `GET`, `INCR`, `TOTALS`, `STREAM` and `LOAD`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use zlink_runtime::ActorManager;
use zlink_runtime::CallOptions;
use zlink_runtime::ErrorKind;

use crate::counter::{COUNTER, Incr, Probe, Step, Totals};
use crate::say;

/// How many `get_or_create` calls one `ACTORS` / `GET` command runs at a time.
const CREATE_CONCURRENCY: usize = 32;

/// How long a `STREAM` loop waits before it sends a refused step again.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// The reply timeout of one `STREAM` step.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs one Actor command line; prints its per-id lines and returns its last line.
pub(crate) async fn actor_command(actors: &ActorManager, words: &[String]) -> String {
    let arg = |i: usize| words.get(i).map(String::as_str);
    let number = |i: usize| arg(i).and_then(|v| v.parse::<u64>().ok());
    match arg(0) {
        Some("ACTORS") => {
            let (Some(prefix), Some(first), Some(count)) = (arg(1), number(2), number(3)) else {
                return "BAD ACTORS <prefix> <first> <count>".into();
            };
            get_or_create_all(actors, ids(prefix, first, count)).await
        }
        Some("GET") if words.len() >= 2 => get_or_create_all(actors, words[1..].to_vec()).await,
        Some("INCR") if words.len() >= 2 => {
            let mut options = CallOptions::default();
            if let Some(ms) = number(2) {
                options = options.reply_timeout(Duration::from_millis(ms));
            }
            match actors.request_with(&words[1], &Incr, &options).await {
                Ok(n) => format!("REPLY {n}"),
                Err(e) => format!("ERR {}", e.kind()),
            }
        }
        Some("TOTALS") if words.len() == 2 => match actors.request(&words[1], &Totals).await {
            Ok([applied, sum, dups, gaps]) => {
                format!("TOTALS {} {applied} {sum} {dups} {gaps}", words[1])
            }
            Err(e) => format!("ERR {}", e.kind()),
        },
        Some("STREAM") => {
            let (Some(prefix), Some(first), Some(count), Some(millis)) =
                (arg(1), number(2), number(3), number(4))
            else {
                return "BAD STREAM <prefix> <first> <count> <millis>".into();
            };
            stream(
                actors,
                ids(prefix, first, count),
                Duration::from_millis(millis),
            )
            .await
        }
        Some("LOAD") => {
            let (Some(prefix), Some(first), Some(count), Some(millis), Some(pause), Some(timeout)) = (
                arg(1),
                number(2),
                number(3),
                number(4),
                number(5),
                number(6),
            ) else {
                return "BAD LOAD <prefix> <first> <count> <millis> <pause-ms> <timeout-ms>".into();
            };
            load(
                actors,
                ids(prefix, first, count),
                Duration::from_millis(millis),
                Duration::from_millis(pause),
                Duration::from_millis(timeout),
            )
            .await
        }
        _ => format!("BAD {}", words.join(" ")),
    }
}

/// Milliseconds since the Unix epoch (every process of a fault run shares the machine's clock).
fn wall_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default()
}

/// One sequential loop of `Probe`s per id, all ids at once, for `window`, `pause` apart: every
/// request ends in exactly one line, `P <id> <sent-ms> <answered-ms> <node> <generation>
/// <nonce> <count> <late-ms>` (late-ms: how long past its node's admission deadline the handler
/// started, 0 when before it) or `E <id> <sent-ms> <ended-ms> <kind> [ConnectionLost]` (the last word for
/// an `Unavailable` whose connection went down after the request was sent). After a `NotFound` the loop asks
/// `get_or_create` for the id (the Actor may have been recreated elsewhere) before its next
/// probe. Returns `LOAD-DONE <answered> <failed>`.
async fn load(
    actors: &ActorManager,
    ids: Vec<String>,
    window: Duration,
    pause: Duration,
    timeout: Duration,
) -> String {
    let end = Instant::now() + window;
    let options = CallOptions::default().reply_timeout(timeout);
    let (answered, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut tasks = Vec::new();
    for id in ids {
        let (actors, options) = (actors.clone(), options.clone());
        let (answered, failed) = (Arc::clone(&answered), Arc::clone(&failed));
        tasks.push(tokio::spawn(async move {
            while Instant::now() < end {
                let sent = wall_ms();
                match actors.request_with(&id, &Probe, &options).await {
                    Ok(r) => {
                        answered.fetch_add(1, Ordering::Relaxed);
                        say(&format!(
                            "P {id} {sent} {} {} {} {} {} {}",
                            wall_ms(),
                            r.node,
                            r.generation,
                            r.nonce,
                            r.count,
                            r.late_ms
                        ));
                    }
                    Err(e) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                        say(&format!(
                            "E {id} {sent} {} {}{}",
                            wall_ms(),
                            e.kind(),
                            lost(&e)
                        ));
                        if e.kind() == ErrorKind::NotFound {
                            let _ = actors.get_or_create(COUNTER, &id).await;
                        }
                    }
                }
                tokio::time::sleep(pause).await;
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    format!(
        "LOAD-DONE {} {}",
        answered.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed)
    )
}

/// ` ConnectionLost` for a request whose connection went down after it was sent (it may have
/// run: the outcome is unknown to the caller), else nothing.
fn lost(e: &zlink_runtime::ZLinkError) -> &'static str {
    match e {
        zlink_runtime::ZLinkError::Unavailable {
            reason: zlink_runtime::handler::UnavailableReason::ConnectionLost,
            ..
        } => " ConnectionLost",
        _ => "",
    }
}

/// The ids `<prefix>-<i>` for `i` in `first..first+count`.
fn ids(prefix: &str, first: u64, count: u64) -> Vec<String> {
    (first..first.saturating_add(count))
        .map(|i| format!("{prefix}-{i}"))
        .collect()
}

/// `get_or_create` of every id ([`CREATE_CONCURRENCY`] at a time): one `ACTOR …` or
/// `ACTOR-ERR …` line per id as each ends, then the returned `ACTORS-DONE <ok> <failed>` (an
/// id not reported `ACTOR` counts as failed).
async fn get_or_create_all(actors: &ActorManager, ids: Vec<String>) -> String {
    let ids = Arc::new(ids);
    let next = Arc::new(AtomicU64::new(0));
    let ok = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CREATE_CONCURRENCY.min(ids.len()) {
        let (actors, ids, next, ok) = (
            actors.clone(),
            Arc::clone(&ids),
            Arc::clone(&next),
            Arc::clone(&ok),
        );
        tasks.push(tokio::spawn(async move {
            while let Some(id) = usize::try_from(next.fetch_add(1, Ordering::Relaxed))
                .ok()
                .and_then(|i| ids.get(i))
            {
                match actors.get_or_create(COUNTER, id).await {
                    Ok(r) => {
                        ok.fetch_add(1, Ordering::Relaxed);
                        say(&format!("ACTOR {} {} {}", r.id, r.generation, r.node));
                    }
                    Err(e) => say(&format!("ACTOR-ERR {id} {}", e.kind())),
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let ok = ok.load(Ordering::Relaxed);
    format!("ACTORS-DONE {ok} {}", ids.len() as u64 - ok)
}

/// What one Actor's `STREAM` loop saw.
#[derive(Default)]
struct Streamed {
    /// The last `seq` answered (every one before it was answered too).
    last: u64,
    /// Refusals by error kind (a refused step is sent again).
    refused: BTreeMap<String, u64>,
    /// The `seq` of the step that timed out, which ended the loop (it may have run: sending it
    /// again could run it twice).
    timeout: Option<u64>,
    /// Replies that were not the step's own `seq`.
    wrong: Vec<(u64, u64)>,
}

/// One sequential loop of `Step`s per id, all ids at once, for `window`: a step answered moves
/// on to the next `seq`, a refused one is sent again with the same `seq` after
/// [`RETRY_PAUSE`], a timed-out one ends the loop. Prints per id
/// `STREAMED <id> <last-seq-answered>` (and `STREAM-WRONG <id> <seq> <reply>` for a reply that
/// is not its step's `seq`, `STREAM-TIMEOUT <id> <seq>` for a step that timed out), per error kind
/// `STREAM-REFUSED <kind> <n>`, and returns `STREAM-DONE <answered> <refused> <timeouts>`.
async fn stream(actors: &ActorManager, ids: Vec<String>, window: Duration) -> String {
    let end = Instant::now() + window;
    let options = CallOptions::default().reply_timeout(STEP_TIMEOUT);
    let mut tasks = Vec::new();
    for id in ids {
        let (actors, options) = (actors.clone(), options.clone());
        tasks.push(tokio::spawn(async move {
            let mut s = Streamed::default();
            while Instant::now() < end {
                let seq = s.last + 1;
                match actors.request_with(&id, &Step { seq }, &options).await {
                    Ok(reply) => {
                        if reply != seq {
                            s.wrong.push((seq, reply));
                        }
                        s.last = seq;
                    }
                    Err(e) if e.kind() == ErrorKind::DeadlineExceeded => {
                        s.timeout = Some(seq);
                        break;
                    }
                    Err(e) => {
                        *s.refused.entry(e.kind().to_string()).or_default() += 1;
                        tokio::time::sleep(RETRY_PAUSE).await;
                    }
                }
            }
            (id, s)
        }));
    }
    let (mut answered, mut timeouts) = (0, 0);
    let mut refused: BTreeMap<String, u64> = BTreeMap::new();
    for t in tasks {
        let Ok((id, s)) = t.await else {
            say("STREAM-WRONG a stream task panicked");
            continue;
        };
        say(&format!("STREAMED {id} {}", s.last));
        for (seq, reply) in &s.wrong {
            say(&format!("STREAM-WRONG {id} {seq} {reply}"));
        }
        if let Some(seq) = s.timeout {
            say(&format!("STREAM-TIMEOUT {id} {seq}"));
        }
        answered += s.last;
        timeouts += u64::from(s.timeout.is_some());
        for (kind, n) in s.refused {
            *refused.entry(kind).or_default() += n;
        }
    }
    for (kind, n) in &refused {
        say(&format!("STREAM-REFUSED {kind} {n}"));
    }
    let refused: u64 = refused.values().sum();
    format!("STREAM-DONE {answered} {refused} {timeouts}")
}
