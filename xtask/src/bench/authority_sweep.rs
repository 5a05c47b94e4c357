//! `cargo xtask bench sweep [--rows N] [--rounds R]`: the self-sweep (shutdown) of one host
//! run on the in-memory Location Store, at `N` rows (default 20,000) and at `8N` rows in the
//! same run, as the wall time and the process CPU time per row at each size and their ratio
//! (`8N` per row / `N` per row): 1.0 is linear, 8 is quadratic.
//!
//! Each size gets a fresh store and a fresh host with the renew loop on (default lease
//! timings); the `N` actors are reserved and committed beforehand (untimed, 256 at a time),
//! all on one node, so every delete of the sweep moves the same allocation row, as a real
//! host's shutdown does. The figure is the median of `R` rounds (default 1), sizes
//! alternating. CPU time is the process's user + system time from `/proc/self/stat` (Linux;
//! clock ticks of 10 ms), over the sweep only. The renew loop's failures and takeovers during
//! the sweep are printed: any is a lease that starved.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use zlink_location::{
    CapacityLimits, LocationRuntime, MeshName, NodeKey, ObjectId, ObjectKind, ReserveRequest,
    RoutingId, StableType, TargetNode,
};
use zlink_store_spi::{DynLocationStore, MemoryLocationStore};

const CONCURRENCY: usize = 256;

struct Args {
    rows: usize,
    rounds: usize,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        rows: 20_000,
        rounds: 1,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--rows" => {
                parsed.rows = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| *n >= 100)
                    .ok_or("bench sweep: --rows needs a number of at least 100")?;
            }
            "--rounds" => {
                parsed.rounds = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| (1..=15).contains(n))
                    .ok_or("bench sweep: --rounds needs a number, 1..=15")?;
            }
            other => {
                return Err(format!(
                    "bench sweep: unknown option `{other}` (known: --rows N, --rounds R)"
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
    rt.block_on(bench(&args))
}

/// One sweep measured.
#[derive(Debug, Clone, Copy)]
struct Sweep {
    wall_us_per_row: f64,
    cpu_us_per_row: f64,
    renew_failures: u64,
}

async fn bench(args: &Args) -> Result<(), String> {
    let sizes = [args.rows, args.rows * 8];
    let mut small = Vec::new();
    let mut large = Vec::new();
    for round in 0..args.rounds {
        for (i, &rows) in sizes.iter().enumerate() {
            let s = sweep_of(rows).await?;
            println!(
                "round {}  {rows:>8} rows  wall {:>8.2} µs/row  cpu {:>8.2} µs/row  renew failures {}",
                round + 1,
                s.wall_us_per_row,
                s.cpu_us_per_row,
                s.renew_failures
            );
            if i == 0 {
                small.push(s);
            } else {
                large.push(s);
            }
        }
    }
    let (s, l) = (median(&small), median(&large));
    println!(
        "self-sweep per row, {} rows vs {} rows: wall {:.2} / {:.2} µs = ratio {:.2}x, cpu {:.2} / {:.2} µs = ratio {:.2}x (1.0 is linear)",
        sizes[1],
        sizes[0],
        l.wall_us_per_row,
        s.wall_us_per_row,
        l.wall_us_per_row / s.wall_us_per_row,
        l.cpu_us_per_row,
        s.cpu_us_per_row,
        l.cpu_us_per_row / s.cpu_us_per_row.max(f64::MIN_POSITIVE),
    );
    Ok(())
}

fn median(runs: &[Sweep]) -> Sweep {
    let pick = |f: fn(&Sweep) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Sweep {
        wall_us_per_row: pick(|s| s.wall_us_per_row),
        cpu_us_per_row: pick(|s| s.cpu_us_per_row),
        renew_failures: runs.iter().map(|s| s.renew_failures).sum(),
    }
}

/// A fresh host with `rows` actors, then its self-sweep, measured.
async fn sweep_of(rows: usize) -> Result<Sweep, String> {
    let store: Arc<dyn DynLocationStore> = Arc::new(MemoryLocationStore::new());
    let host = Arc::new(
        LocationRuntime::builder(store)
            .start()
            .await
            .map_err(|e| e.to_string())?,
    );
    let target = Arc::new(target_of(&host)?);
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(CONCURRENCY);
    for _ in 0..CONCURRENCY {
        let (host, target, next) = (host.clone(), target.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= rows {
                    return Ok::<(), String>(());
                }
                create(&host, &target, i).await?;
            }
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    let before = host.health_probe().renewals();
    let cpu = cpu_seconds()?;
    let start = Instant::now();
    let report = host.self_sweep().await.map_err(|e| e.to_string())?;
    let wall = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds()? - cpu;
    let after = host.health_probe().renewals();
    if report.removed != rows {
        return Err(format!(
            "bench sweep: the sweep removed {} of {rows} rows: {report:?}",
            report.removed
        ));
    }
    let host = Arc::try_unwrap(host).map_err(|_| "bench sweep: host still shared")?;
    host.release_lease().await.map_err(|e| e.to_string())?;
    Ok(Sweep {
        wall_us_per_row: wall * 1e6 / rows as f64,
        cpu_us_per_row: cpu * 1e6 / rows as f64,
        renew_failures: (after.failed - before.failed) + (after.taken_over - before.taken_over),
    })
}

fn target_of(rt: &LocationRuntime) -> Result<TargetNode, String> {
    let run = rt.host_run().ok_or("no owner lease")?;
    Ok(TargetNode {
        node: NodeKey {
            mesh: MeshName::new("bench").map_err(|e| e.to_string())?,
            routing_id: RoutingId::new(vec![1]).map_err(|e| e.to_string())?,
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

/// Reserves and commits actor `i` on `target`.
async fn create(rt: &LocationRuntime, target: &TargetNode, i: usize) -> Result<(), String> {
    let reserved = rt
        .authority()
        .reserve(ReserveRequest {
            kind: ObjectKind::Actor,
            id: ObjectId::new(format!("sweep-{i}")).map_err(|e| e.to_string())?,
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
        .ok_or("commit conflicted")?;
    Ok(())
}

/// The process's user + system CPU time so far, from `/proc/self/stat` (clock ticks of
/// 1/100 s, the Linux default).
fn cpu_seconds() -> Result<f64, String> {
    let stat = std::fs::read_to_string("/proc/self/stat").map_err(|e| e.to_string())?;
    // The command name (field 2) may hold spaces; fields after it are plain.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or("bench sweep: /proc/self/stat has no command name")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line: 11 and 12 (from 0) after the name.
    let ticks = |i: usize| -> Result<f64, String> {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .map(|t| t as f64 / 100.0)
            .ok_or_else(|| "bench sweep: /proc/self/stat is not as expected".to_string())
    };
    Ok(ticks(11)? + ticks(12)?)
}
