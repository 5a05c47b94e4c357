//! `cargo xtask bench scale --million`: 1,000,000 Actors (or `--actors N`) on one root,
//! created, requested once each, then shut down within the default 30 s Shutdown deadline.

use std::time::{Duration, Instant};

use zlink_runtime::ZLinkHost;

use super::watch::{LeaseWatch, SweepProbe, describe_report, mib, rss};
use super::{
    Args, Stores, WORKERS, backend_name, create_all, first_creation, ids, mode, per, start_root,
    to_string, touch_all,
};

/// `--million`: N Actors (default 1,000,000) on one root.
pub(super) async fn million(args: &Args) -> Result<(), String> {
    let n = args.actors;
    println!(
        "scale bench --million ({} build, in-process, {WORKERS} tokio workers): {n} Actors on \
         one root, {}",
        mode(),
        backend_name(args.redis.as_deref())
    );
    let stores = Stores::new(args.redis.as_deref(), 1).await?;
    let mut hosts = Vec::new();
    let result = million_on(n, &stores, &mut hosts).await;
    for h in &hosts {
        if h.status().shutdown.is_none() {
            let _ = h.shutdown().await;
        }
    }
    drop(hosts);
    stores.purge().await;
    result
}

async fn million_on(n: usize, stores: &Stores, hosts: &mut Vec<ZLinkHost>) -> Result<(), String> {
    let started = Instant::now();
    hosts.push(start_root(stores, 0).await?);
    let host = hosts[0].clone();
    let watch = LeaseWatch::start(vec![host.clone()]);
    let actors = host.actors().map_err(to_string)?;
    first_creation(&actors).await?;
    let ids = ids(n);
    let (rss0, _) = rss();
    let took = create_all(&actors, &ids).await?;
    println!(
        "create:   {n} Actors in {:.2} s ({:.0}/s, {:.2} us each)",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64(),
        per(took, n).as_secs_f64() * 1e6
    );
    let took = touch_all(&actors, &ids).await?;
    println!(
        "request:  one to each in {:.2} s ({:.0}/s, {:.2} us each)",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64(),
        per(took, n).as_secs_f64() * 1e6
    );
    let (rss1, peak) = rss();
    println!(
        "memory:   RSS {:.0} MiB before the creations, {:.0} MiB idle ({:.0} B per Actor), \
         peak so far {:.0} MiB",
        mib(rss0),
        mib(rss1),
        rss1.saturating_sub(rss0) as f64 / n as f64,
        mib(peak)
    );
    let live: u64 = host.status().live.iter().map(|l| l.actors).sum();
    let probe = stores.memory.clone().map(SweepProbe::start);
    let t = Instant::now();
    let report = host.shutdown().await;
    let took = t.elapsed();
    println!(
        "shutdown: {live} live Actors, {:.2} s (default deadline 30 s), {}",
        took.as_secs_f64(),
        describe_report(&report)
    );
    if let Some(p) = probe {
        println!("          {}", p.finish(t).await);
    }
    let (_, renewing, expired) = watch.counts();
    println!("lease:    {}", watch.describe());
    let (_, peak) = rss();
    println!(
        "peak RSS {:.0} MiB; total {:.1} s",
        mib(peak),
        started.elapsed().as_secs_f64()
    );
    let stopped = report.outcome == zlink_runtime::status::ShutdownOutcome::Stopped;
    if stopped && renewing + expired == 0 && took <= Duration::from_secs(30) {
        println!(
            "million: passed (Stopped within the deadline, no lease sample Renewing or Expired)"
        );
    } else {
        println!("million: NOT passed");
    }
    Ok(())
}
