//! `cargo xtask bench authority [--redis URL] [--seconds S] [--rounds R] [--ops N]`: the
//! location runtime's Reserve+Commit pair on the Redis Location Store, beside the raw script
//! baseline measured in the same run, as ratios.
//!
//! **Ours.** One host reserves an actor on itself, then commits it: a pair is two conditional
//! batches (the runtime coalesces concurrent operations of the host into shared batches). The
//! store is wrapped in a counter of what the runtime asks of it, so each figure comes with the
//! mean number of operations per batch (Reserve and Commit each write one authority row: rows
//! written / authority batches). Measured at concurrency 1 (one operation per batch) and 50
//! for `S` seconds (default 2) per round.
//!
//! **Redis script µs per pair** is the growth of `usec` of `EVALSHA` and `EVAL` in
//! `INFO commandstats` over a window, divided by the pairs completed in it: every script the
//! pairs cost, reads and the owner-lease renewals of the window included. The number of script
//! calls must match the calls the counting wrapper saw; if it does not, another client is
//! using the server and the figure is flagged. Run it on a Redis of its own.
//!
//! **Baseline** ([`replay`]): the same two scripts, a Reserve batch and a Commit batch as the
//! runtime sent them, replayed by `redis-benchmark` with fresh keys per call, in a variant whose
//! conditions hold (every condition `Missing` on a fresh key; puts keep their value bytes), at
//! the same concurrency and with the same number of operations per batch (at c=50 the mean our
//! run reached in a probe before the rounds, rounded). Every replay run is verified as applied
//! by counting the rows it created. Baseline pairs/s is `m / (1/R + 1/C)` for `m` operations per
//! batch and `R`, `C` calls/s of the two scripts; µs per pair is
//! `(µs per Reserve call + µs per Commit call) / m`. Fresh keys skip what an existing record
//! costs (decoding it for a condition, trimming its history) but pay for creating keys and
//! index entries instead, so the baseline does comparable, not identical, work.
//!
//! Each figure is the median of `R` alternating rounds (default 3: ours, then the baseline);
//! `busy` is the share of the wall time Redis spent in scripts (pairs/s × µs per pair). Target:
//! at both concurrencies our throughput at least 0.8x the baseline's. `INFO commandstats` times
//! are wall-clock: on a loaded machine they include preemption, so compare figures of one run,
//! or of runs made under the same load.
//!
//! Then the write verification (`verify`): pairs on a host reading back its writes after each
//! renew beside one that does not, as a ratio.
//!
//! Then NewOwner: a second host takes over actors whose target capacity was secured beforehand
//! (untimed), over `N` prepared objects (default 8,000; a quarter at concurrency 1), beside the
//! provider's single-key conditional write (`Missing(k)` + `Put(k, 256 B)` on a fresh key).
//!
//! Needs a single Redis node (default `redis://127.0.0.1:6379`, or `ZLINK_TEST_REDIS_URL`) and
//! `redis-benchmark` and `redis-cli` on the `PATH`. Everything is written under fresh key
//! prefixes, deleted at the end.

mod counted;
mod replay;
mod verify;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use zlink_location::{
    AuthorityHandle, CapacityLimits, LocationRuntime, MeshName, NodeKey, ObjectId, ObjectKind,
    Outcome, ReserveRequest, RoutingId, StableType, TargetNode, TargetReservation,
};
use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
use zlink_store_spi::{
    Condition, DynLocationStore, LocationStore, Mutation, StoreKey, WriteRequest,
};

use super::redis_location::{Checker, Endpoint};
use counted::{Counted, Counts};
use replay::{Pair, RawTarget, Replay, Variant};

const CONCURRENCY: [usize; 2] = [1, 50];
const TARGET_RATIO: f64 = 0.8;

struct Args {
    url: String,
    ops: usize,
    seconds: f64,
    rounds: usize,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        url: std::env::var("ZLINK_TEST_REDIS_URL")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_string()),
        ops: 8000,
        seconds: 2.0,
        rounds: 3,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--redis" => {
                parsed.url = it
                    .next()
                    .ok_or("bench authority: --redis needs a URL")?
                    .clone();
            }
            "--ops" => {
                parsed.ops = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| *n >= 100)
                    .ok_or("bench authority: --ops needs a number of at least 100")?;
            }
            "--rounds" => {
                parsed.rounds = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| (1..=15).contains(n))
                    .ok_or("bench authority: --rounds needs a number, 1..=15")?;
            }
            "--seconds" => {
                parsed.seconds = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n: &f64| *n > 0.0)
                    .ok_or("bench authority: --seconds needs a positive number")?;
            }
            other => {
                return Err(format!(
                    "bench authority: unknown option `{other}` (known: --redis URL, --seconds S, --rounds R, --ops N)"
                ));
            }
        }
    }
    Ok(parsed)
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let args = parse(args)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let prefix = format!("zlbench-authority-{id}");
        let raw_prefix = format!("zlbench-authority-raw-{id}");
        let result = bench(&args, &prefix, &raw_prefix).await;
        // Best effort: a failed purge leaves keys under a unique prefix, never a wrong result.
        let _ = super::purge_prefix(&args.url, &prefix).await;
        let _ = super::purge_prefix(&args.url, &raw_prefix).await;
        result
    })
}

/// How many operations a NewOwner run at `concurrency` performs (fewer when sequential).
fn ops_at(args: &Args, concurrency: usize) -> usize {
    if concurrency == 1 {
        (args.ops / 4).max(100)
    } else {
        args.ops
    }
}

/// Runs operations on `concurrency` tasks for at least `seconds`; returns the operations done
/// and the seconds they took.
async fn measure_for<F, Fut>(
    concurrency: usize,
    seconds: f64,
    op: F,
) -> Result<(usize, f64), String>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), String>> + Send,
{
    let op = Arc::new(op);
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (op, next, done) = (op.clone(), next.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            while start.elapsed().as_secs_f64() < seconds {
                op(next.fetch_add(1, Ordering::Relaxed)).await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok((done.load(Ordering::Relaxed), start.elapsed().as_secs_f64()))
}

/// Runs `total` operations on `concurrency` tasks; returns operations per second.
async fn measure<F, Fut>(concurrency: usize, total: usize, op: F) -> Result<f64, String>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), String>> + Send,
{
    let op = Arc::new(op);
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (op, next) = (op.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    return Ok::<(), String>(());
                }
                op(i).await?;
            }
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok(total as f64 / start.elapsed().as_secs_f64())
}

fn target_of(rt: &LocationRuntime, rid: u8) -> Result<TargetNode, String> {
    let run = rt.host_run().ok_or("no owner lease")?;
    Ok(TargetNode {
        node: NodeKey {
            mesh: MeshName::new("bench").map_err(|e| e.to_string())?,
            routing_id: RoutingId::new(vec![rid]).map_err(|e| e.to_string())?,
        },
        run,
        lifecycle_generation: 1,
        limits: CapacityLimits::unlimited(),
        offers: BTreeSet::from([(ObjectKind::Actor, stable_type()?)]),
    })
}

fn stable_type() -> Result<StableType, String> {
    StableType::new("bench").map_err(|e| e.to_string())
}

fn object(tag: &str, i: usize) -> Result<ObjectId, String> {
    ObjectId::new(format!("{tag}-{i}")).map_err(|e| e.to_string())
}

async fn reserve_commit(
    rt: &LocationRuntime,
    target: &TargetNode,
    id: ObjectId,
) -> Result<AuthorityHandle, String> {
    let reserved = rt
        .authority()
        .reserve(ReserveRequest {
            kind: ObjectKind::Actor,
            id,
            stable_type: stable_type()?,
            target: target.clone(),
            payload: vec![0u8; 64],
            pending_creation: None,
            creation: None,
        })
        .await
        .map_err(|e| e.to_string())?
        .applied()
        .ok_or("reserve conflicted")?;
    rt.authority()
        .commit(&reserved, None)
        .await
        .map_err(|e| e.to_string())?
        .applied()
        .ok_or_else(|| "commit conflicted".to_string())
}

/// One round of our pairs.
#[derive(Debug, Clone, Copy)]
struct Ours {
    pairs_per_sec: f64,
    usec_per_pair: f64,
    calls_per_pair: f64,
    reads_per_pair: f64,
    work: Counts,
    /// Script calls in the window that were not ours.
    foreign_calls: u64,
}

/// One round of the baseline.
#[derive(Debug, Clone, Copy)]
struct Raw {
    pairs_per_sec: f64,
    usec_per_pair: f64,
}

struct Bench {
    args: Args,
    ep: Endpoint,
    checker: Checker,
    counted: Arc<Counted>,
    host: Arc<LocationRuntime>,
    target: Arc<TargetNode>,
}

impl Bench {
    /// Pairs on `concurrency` tasks for the configured time, objects tagged `tag`.
    async fn ours(&self, concurrency: usize, tag: String) -> Result<Ours, String> {
        let counts = self.counted.counts();
        let stats = replay::script_stats(&self.checker).await?;
        let (rt, t) = (self.host.clone(), self.target.clone());
        let (pairs, secs) = measure_for(concurrency, self.args.seconds, move |i| {
            let (rt, t, tag) = (rt.clone(), t.clone(), tag.clone());
            async move {
                reserve_commit(&rt, &t, object(&tag, i)?).await?;
                Ok(())
            }
        })
        .await?;
        let stats = replay::script_stats(&self.checker).await?.since(&stats);
        let work = self.counted.counts().since(&counts);
        let p = pairs.max(1) as f64;
        Ok(Ours {
            pairs_per_sec: pairs as f64 / secs,
            usec_per_pair: stats.usec as f64 / p,
            calls_per_pair: stats.calls as f64 / p,
            reads_per_pair: work.reads as f64 / p,
            work,
            foreign_calls: stats.calls.saturating_sub(work.calls()),
        })
    }

    /// The baseline: each script replayed `calls` times on `concurrency` connections.
    async fn raw(
        &self,
        raw_prefix: &str,
        scripts: &[(Variant, Vec<Vec<u8>>); 2],
        ops: usize,
        concurrency: usize,
        calls: usize,
        run: u32,
    ) -> Result<Raw, String> {
        let mut replays: Vec<Replay> = Vec::with_capacity(2);
        for (variant, args) in scripts {
            let args = replay::randomized(args, variant, run);
            let target = RawTarget {
                ep: &self.ep,
                url: &self.args.url,
                checker: &self.checker,
                prefix: raw_prefix,
            };
            replays.push(replay::replay(&target, variant, &args, concurrency, calls).await?);
        }
        let m = ops as f64;
        Ok(Raw {
            pairs_per_sec: m / replays.iter().map(|r| 1.0 / r.calls_per_sec).sum::<f64>(),
            usec_per_pair: replays.iter().map(|r| r.usec_per_call).sum::<f64>() / m,
        })
    }
}

/// The median of `values`.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The Reserve and the Commit batches of two sequential pairs.
async fn capture_pairs(b: &Bench) -> Result<(Pair, Pair), String> {
    b.counted.start_capture();
    let mut result = Ok(());
    for i in 0..2 {
        if let Err(e) = reserve_commit(&b.host, &b.target, object("capture", i)?).await {
            result = Err(e);
            break;
        }
    }
    let batches = b.counted.stop_capture();
    result?;
    let prefix = b.counted.authority_prefix().to_owned();
    let (mut reserves, mut commits) = (Vec::new(), Vec::new());
    for r in batches {
        // A Reserve creates its authority row (Missing), a Commit replaces it (Version).
        let creates = r
            .conditions()
            .iter()
            .any(|c| matches!(c, Condition::Missing(k) if counted::is_authority(k, &prefix)));
        if creates {
            reserves.push(r);
        } else {
            commits.push(r);
        }
    }
    let pair = |mut v: Vec<WriteRequest>, what: &str| -> Result<Pair, String> {
        if v.len() != 2 {
            return Err(format!(
                "expected 2 {what} batches from two sequential pairs, saw {}",
                v.len()
            ));
        }
        let second = v.pop().ok_or("no batch")?;
        let first = v.pop().ok_or("no batch")?;
        Ok(Pair { first, second })
    };
    Ok((pair(reserves, "Reserve")?, pair(commits, "Commit")?))
}

/// The two scripts with `ops` operations each, captured as command lines and verified.
async fn scripts(
    b: &Bench,
    raw_store: &RedisLocationStore,
    raw_prefix: &str,
    reserve: &Pair,
    commit: &Pair,
    ops: usize,
) -> Result<[(Variant, Vec<Vec<u8>>); 2], String> {
    super::purge_prefix(&b.args.url, raw_prefix).await?;
    let r = replay::variant(reserve, ops, 'r')?;
    let c = replay::variant(commit, ops, 'c')?;
    let mut lines = replay::capture(&b.ep, raw_store, raw_prefix, &[&r, &c])
        .await?
        .into_iter();
    let (lr, lc) = (
        lines.next().ok_or("no Reserve command captured")?,
        lines.next().ok_or("no Commit command captured")?,
    );
    for (v, l) in [(&r, &lr), (&c, &lc)] {
        replay::verify(&b.checker, &replay::randomized(l, v, 0)).await?;
    }
    Ok([(r, lr), (c, lc)])
}

async fn bench(args: &Args, prefix: &str, raw_prefix: &str) -> Result<(), String> {
    let ep = Endpoint::parse(&args.url)?;
    let connect = |p: &str| {
        let options = RedisLocationOptions::from_url(&args.url)
            .and_then(|o| o.with_key_prefix(p))
            .map_err(|e| e.to_string());
        async move {
            RedisLocationStore::connect(options?)
                .await
                .map_err(|e| format!("cannot connect to {}: {e}", args.url))
        }
    };
    let plain = connect(prefix).await?;
    let raw_store = connect(raw_prefix).await?;
    let counted = Arc::new(Counted::new(plain.clone()));
    let store: Arc<dyn DynLocationStore> = counted.clone();
    let checker = Checker::connect(&args.url).await?;
    println!("authority bench on {} (key prefix {prefix})", args.url);

    let a = Arc::new(
        LocationRuntime::builder(store.clone())
            .start()
            .await
            .map_err(|e| e.to_string())?,
    );
    let b = Arc::new(
        LocationRuntime::builder(store.clone())
            .start()
            .await
            .map_err(|e| e.to_string())?,
    );
    let ta = Arc::new(target_of(&a, 1)?);
    let tb = Arc::new(target_of(&b, 2)?);
    let bench = Bench {
        args: Args {
            url: args.url.clone(),
            ops: args.ops,
            seconds: args.seconds,
            rounds: args.rounds,
        },
        ep,
        checker,
        counted,
        host: a.clone(),
        target: ta.clone(),
    };

    // Warm-up (scripts, caches), then the two batches of a pair, as the runtime sends them.
    for i in 0..20 {
        reserve_commit(&a, &ta, object("warm", i)?).await?;
    }
    let (reserve, commit) = capture_pairs(&bench).await?;

    println!(
        "\nReserve+Commit pairs vs the same two scripts replayed raw (fresh keys, conditions hold); median of {} rounds of {}s",
        args.rounds, args.seconds
    );
    println!(
        "{:>3} {:>9} {:>4} | {:>10} {:>10} {:>6} | {:>9} {:>9} {:>6} | {:>9} | {:>10} {:>10}",
        "c",
        "ops/batch",
        "raw",
        "ours p/s",
        "raw p/s",
        "ratio",
        "ours µs/p",
        "raw µs/p",
        "ratio",
        "busy o/r",
        "calls/pair",
        "reads/pair"
    );
    let mut verdicts = Vec::new();
    for c in CONCURRENCY {
        // The batch size of the baseline: one at c=1, else what a probe run reached.
        let ops = if c == 1 {
            1
        } else {
            let probe = bench.ours(c, format!("probe{c}")).await?;
            (probe.work.ops_per_batch().round() as usize).max(1)
        };
        let scripts = scripts(&bench, &raw_store, raw_prefix, &reserve, &commit, ops).await?;
        let mut ours = Vec::new();
        let mut raw = Vec::new();
        for round in 0..args.rounds {
            let o = bench.ours(c, format!("rc{c}-{round}")).await?;
            let pairs = (o.pairs_per_sec * args.seconds) as usize;
            let calls = (pairs / ops).max(200);
            raw.push(
                bench
                    .raw(raw_prefix, &scripts, ops, c, calls, round as u32 + 1)
                    .await?,
            );
            ours.push(o);
        }
        let work = ours.iter().fold(Counts::default(), |acc, o| Counts {
            reads: acc.reads + o.work.reads,
            scans: acc.scans + o.work.scans,
            authority_batches: acc.authority_batches + o.work.authority_batches,
            authority_ops: acc.authority_ops + o.work.authority_ops,
            other_writes: acc.other_writes + o.work.other_writes,
        });
        let foreign: u64 = ours.iter().map(|o| o.foreign_calls).sum();
        let o_pps = median(ours.iter().map(|o| o.pairs_per_sec).collect());
        let r_pps = median(raw.iter().map(|r| r.pairs_per_sec).collect());
        let o_us = median(ours.iter().map(|o| o.usec_per_pair).collect());
        let r_us = median(raw.iter().map(|r| r.usec_per_pair).collect());
        // The share of the time Redis spent running scripts.
        let busy = |pps: f64, us: f64| (pps * us / 1e4).round();
        let o_busy = median(
            ours.iter()
                .map(|o| busy(o.pairs_per_sec, o.usec_per_pair))
                .collect(),
        );
        let r_busy = median(
            raw.iter()
                .map(|r| busy(r.pairs_per_sec, r.usec_per_pair))
                .collect(),
        );
        println!(
            "{:>3} {:>9.2} {:>4} | {:>10.0} {:>10.0} {:>5.2}x | {:>9.1} {:>9.1} {:>5.2}x | {:>3.0}%/{:>3.0}% | {:>10.2} {:>10.3}{}",
            c,
            work.ops_per_batch(),
            ops,
            o_pps,
            r_pps,
            o_pps / r_pps,
            o_us,
            r_us,
            o_us / r_us,
            o_busy,
            r_busy,
            median(ours.iter().map(|o| o.calls_per_pair).collect()),
            median(ours.iter().map(|o| o.reads_per_pair).collect()),
            if foreign > 0 {
                format!("  UNRELIABLE: {foreign} script calls were not ours")
            } else {
                String::new()
            }
        );
        verdicts.push((c, o_pps / r_pps));
    }
    for (c, ratio) in verdicts {
        println!(
            "target: throughput >= {TARGET_RATIO:.1}x the raw scripts at c={c}: {} ({ratio:.2}x)",
            if ratio >= TARGET_RATIO {
                "met"
            } else {
                "MISSED"
            }
        );
    }

    // What reading back acknowledged writes after each renew costs.
    verify::run(store.clone(), &bench.counted, args.seconds, args.rounds).await?;

    // The provider's single-key conditional write, for reference.
    let mut single = Vec::new();
    for c in CONCURRENCY {
        let s = plain.clone();
        let tag = format!("raw-{c}");
        let (n, secs) = measure_for(c, args.seconds, move |i| {
            let s = s.clone();
            let key = StoreKey::new(format!("bench\0{tag}\0{i}"));
            async move {
                let key = key.map_err(|e| e.to_string())?;
                let request = WriteRequest::new(
                    vec![Condition::Missing(key.clone())],
                    vec![Mutation::put(key, vec![7u8; 256])],
                )
                .map_err(|e| e.to_string())?;
                match s.write(&request).await {
                    Ok(r) if r.is_applied() => Ok(()),
                    Ok(_) => Err("single write conflicted".to_string()),
                    Err(e) => Err(e.to_string()),
                }
            }
        })
        .await?;
        single.push(n as f64 / secs);
    }

    // NewOwner: objects created on A with B's capacity secured beforehand (untimed).
    let mut new_owner = Vec::new();
    for c in CONCURRENCY {
        let n = ops_at(args, c);
        let prepared = Arc::new(new_pool(n));
        let (ra, pa, ptb, pool) = (a.clone(), ta.clone(), tb.clone(), prepared.clone());
        measure(50, n, move |i| {
            let (ra, pa, ptb, pool) = (ra.clone(), pa.clone(), ptb.clone(), pool.clone());
            async move {
                let h = reserve_commit(&ra, &pa, object(&format!("no{c}"), i)?).await?;
                let res = ra
                    .authority()
                    .secure_target(&h, (*ptb).clone(), None)
                    .await
                    .map_err(|e| e.to_string())?
                    .applied()
                    .ok_or("secure conflicted")?;
                pool.put(i, h, res);
                Ok(())
            }
        })
        .await?;
        let (rb, pool) = (b.clone(), prepared.clone());
        let rate = measure(c, n, move |i| {
            let (rb, pool) = (rb.clone(), pool.clone());
            async move {
                let (h, res) = pool.take(i).ok_or("missing prepared object")?;
                match rb.authority().new_owner(&h, &res).await {
                    Ok(Outcome::Applied(_)) => Ok(()),
                    Ok(Outcome::Conflict(c)) => Err(format!("new owner conflicted: {c:?}")),
                    Err(e) => Err(e.to_string()),
                }
            }
        })
        .await?;
        new_owner.push(rate);
    }
    println!();
    println!(
        "{:<34} {:>14} {:>14}",
        "operation", "c=1 (ops/s)", "c=50 (ops/s)"
    );
    println!(
        "{:<34} {:>14.0} {:>14.0}",
        "single-key conditional write", single[0], single[1]
    );
    println!(
        "{:<34} {:>14.0} {:>14.0}",
        "NewOwner", new_owner[0], new_owner[1]
    );
    Ok(())
}

/// Prepared (record, reservation) pairs, one slot per operation index.
struct Pool {
    slots: Vec<std::sync::Mutex<Option<(AuthorityHandle, TargetReservation)>>>,
}

fn new_pool(n: usize) -> Pool {
    Pool {
        slots: (0..n).map(|_| std::sync::Mutex::new(None)).collect(),
    }
}

impl Pool {
    fn put(&self, i: usize, h: AuthorityHandle, r: TargetReservation) {
        if let Some(slot) = self.slots.get(i) {
            if let Ok(mut s) = slot.lock() {
                *s = Some((h, r));
            }
        }
    }

    fn take(&self, i: usize) -> Option<(AuthorityHandle, TargetReservation)> {
        self.slots.get(i)?.lock().ok()?.take()
    }
}
