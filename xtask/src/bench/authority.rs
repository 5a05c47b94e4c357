//! `cargo xtask bench authority [--redis URL] [--seconds S] [--ops N]`: the location runtime's
//! authority operations on the Redis Location Store, beside the provider's raw single-batch
//! write throughput measured in the same run, as a ratio.
//!
//! - **raw single-batch write**: one conditional batch per operation (`Missing(k)` +
//!   `Put(k, 256 B)` on a fresh key): the most a caller can get out of the provider.
//! - **Reserve+Commit**: one host reserves an actor on itself, then commits it; a pair is two
//!   conditional batches plus the cached reads (counters, capacity row, lease) they carry.
//!   Concurrent operations of the host are coalesced into shared batches by the runtime.
//! - **NewOwner**: a second host takes over actors whose target capacity was secured
//!   beforehand (securing is not timed).
//!
//! Each figure is measured at concurrency 1 and 50: raw writes and Reserve+Commit for `S`
//! seconds each (default 2), NewOwner over `N` prepared objects (default 8,000; a quarter at
//! concurrency 1). Target: Reserve+Commit pairs/s at concurrency 50 at least 0.4x the raw
//! single-batch figure at concurrency 50.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
use zlink_runtime::location::testing::{
    self, AuthorityHandle, Outcome, ReserveRequest, TargetNode, TargetReservation,
};
use zlink_runtime::location::{
    CapacityLimits, LocationRuntime, MeshName, NodeKey, ObjectId, ObjectKind, RoutingId, StableType,
};
use zlink_store_spi::{
    Condition, DynLocationStore, LocationStore, Mutation, StoreKey, WriteRequest,
};

const CONCURRENCY: [usize; 2] = [1, 50];
const TARGET_RATIO: f64 = 0.4;

struct Args {
    url: String,
    ops: usize,
    seconds: f64,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        url: std::env::var("ZLINK_TEST_REDIS_URL")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_string()),
        ops: 8000,
        seconds: 2.0,
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
            "--seconds" => {
                parsed.seconds = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n: &f64| *n > 0.0)
                    .ok_or("bench authority: --seconds needs a positive number")?;
            }
            other => {
                return Err(format!(
                    "bench authority: unknown option `{other}` (known: --redis URL, --seconds S, --ops N)"
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
        let prefix = format!("zlbench-authority-{}", uuid::Uuid::new_v4().simple());
        let result = bench(&args, &prefix).await;
        // Best effort: a failed purge leaves keys under a unique prefix, never a wrong result.
        let _ = super::purge_prefix(&args.url, &prefix).await;
        result
    })
}

/// How many operations a run at `concurrency` performs (fewer when sequential).
fn ops_at(args: &Args, concurrency: usize) -> usize {
    if concurrency == 1 {
        (args.ops / 4).max(100)
    } else {
        args.ops
    }
}

/// Runs operations on `concurrency` tasks for at least `seconds`; returns operations per second.
async fn measure_for<F, Fut>(concurrency: usize, seconds: f64, op: F) -> Result<f64, String>
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
    Ok(done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64())
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
    let reserved = testing::authority(rt)
        .reserve(ReserveRequest {
            kind: ObjectKind::Actor,
            id,
            stable_type: stable_type()?,
            target: target.clone(),
            payload: vec![0u8; 64],
            pending_creation: None,
        })
        .await
        .map_err(|e| e.to_string())?
        .applied()
        .ok_or("reserve conflicted")?;
    testing::authority(rt)
        .commit(&reserved, None)
        .await
        .map_err(|e| e.to_string())?
        .applied()
        .ok_or_else(|| "commit conflicted".to_string())
}

async fn bench(args: &Args, prefix: &str) -> Result<(), String> {
    let options = RedisLocationOptions::from_url(&args.url)
        .and_then(|o| o.with_key_prefix(prefix))
        .map_err(|e| e.to_string())?;
    let store: Arc<dyn DynLocationStore> = Arc::new(
        RedisLocationStore::connect(options)
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", args.url))?,
    );
    println!("authority bench on {} (key prefix {prefix})", args.url);

    // Raw single-batch writes.
    let mut raw = Vec::new();
    for c in CONCURRENCY {
        let s = store.clone();
        let tag = format!("raw-{c}");
        let rate = measure_for(c, args.seconds, move |i| {
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
                    Ok(_) => Err("raw write conflicted".to_string()),
                    Err(e) => Err(e.to_string()),
                }
            }
        })
        .await?;
        raw.push(rate);
    }

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

    // Warm-up (scripts, caches).
    for i in 0..20 {
        reserve_commit(&a, &ta, object("warm", i)?).await?;
    }

    // Reserve + Commit.
    let mut pairs = Vec::new();
    for c in CONCURRENCY {
        let (rt, t) = (a.clone(), ta.clone());
        let rate = measure_for(c, args.seconds, move |i| {
            let (rt, t) = (rt.clone(), t.clone());
            async move {
                reserve_commit(&rt, &t, object(&format!("rc{c}"), i)?).await?;
                Ok(())
            }
        })
        .await?;
        pairs.push(rate);
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
                let res = testing::authority(&ra)
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
                match testing::authority(&rb).new_owner(&h, &res).await {
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
        "{:<28} {:>14} {:>14}",
        "operation", "c=1 (ops/s)", "c=50 (ops/s)"
    );
    println!(
        "{:<28} {:>14.0} {:>14.0}",
        "raw single-batch write", raw[0], raw[1]
    );
    println!(
        "{:<28} {:>14.0} {:>14.0}",
        "Reserve+Commit (pairs)", pairs[0], pairs[1]
    );
    println!(
        "{:<28} {:>14.0} {:>14.0}",
        "NewOwner", new_owner[0], new_owner[1]
    );
    println!();
    println!(
        "ratio to raw single-batch     c=1: Reserve+Commit {:.2}x, NewOwner {:.2}x",
        pairs[0] / raw[0],
        new_owner[0] / raw[0]
    );
    println!(
        "ratio to raw single-batch     c=50: Reserve+Commit {:.2}x, NewOwner {:.2}x",
        pairs[1] / raw[1],
        new_owner[1] / raw[1]
    );
    let ratio = pairs[1] / raw[1];
    println!(
        "target: Reserve+Commit >= {TARGET_RATIO:.1}x raw at c=50: {} ({ratio:.2}x)",
        if ratio >= TARGET_RATIO {
            "met"
        } else {
            "MISSED"
        }
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
