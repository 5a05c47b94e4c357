//! `cargo xtask bench objects --case cross-node --metrics`: figure 2 (cross-node Actor
//! request throughput, c=64, route cache warm) with metrics on against metrics off, in the
//! same run. Target: on / off ≥ 0.95×.
//!
//! A [`Switch`] recorder is installed globally: it hands out real Prometheus handles while it
//! is on and no-op handles (what no recorder at all gives) while it is off. The runtime
//! resolves its handles when it builds a node, so two pairs of roots are built — pair *on*
//! while the switch is on, pair *off* after it was turned off — each under its own Redis key
//! prefix (the pairs never see each other). The rounds alternate between the pairs (which one
//! goes first alternates too), and the ratio is printed over all rounds and as the median of
//! the per-round pairs. The recorder's upkeep runs every 5 s as an endpoint's would; at the
//! end the Prometheus text must count the *on* pair's messages, and never the *off* pair's.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::{PrometheusHandle, PrometheusRecorder};
use zlink_runtime::ZLinkHost;

use super::objects::{
    REMOTE_TYPE, THROUGHPUT_ACTORS, actor_load, connect, median, mesh, per_sec, populate,
    shut_down, start_roots, wait_for_mesh, warm,
};
use super::transport::{ROUNDS, Samples};

/// A recorder that is the Prometheus one while on, and records nothing while off.
struct Switch {
    on: Arc<AtomicBool>,
    inner: PrometheusRecorder,
}

impl Recorder for Switch {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_counter(key, unit, description);
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_gauge(key, unit, description);
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_histogram(key, unit, description);
    }

    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        if self.on.load(Ordering::Acquire) {
            self.inner.register_counter(key, metadata)
        } else {
            Counter::noop()
        }
    }

    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        if self.on.load(Ordering::Acquire) {
            self.inner.register_gauge(key, metadata)
        } else {
            Gauge::noop()
        }
    }

    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        if self.on.load(Ordering::Acquire) {
            self.inner.register_histogram(key, metadata)
        } else {
            Histogram::noop()
        }
    }
}

/// Installs the switch globally (on); its flag and the Prometheus handle.
fn install() -> Result<(Arc<AtomicBool>, PrometheusHandle), String> {
    let on = Arc::new(AtomicBool::new(true));
    let inner = crate::demo::metrics::prometheus::recorder();
    let handle = inner.handle();
    metrics::set_global_recorder(Switch {
        on: Arc::clone(&on),
        inner,
    })
    .map_err(|e| format!("a metrics recorder is already installed: {e}"))?;
    Ok((on, handle))
}

/// The sum of every `zlink_messages_sent` series in a Prometheus text.
fn messages_sent(text: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with("zlink_messages_sent{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// One pair of roots (A, B) under its own prefix, with B's Actors created and reachable.
struct Pair {
    hosts: Vec<ZLinkHost>,
    actors: zlink_runtime::ActorManager,
    targets: Arc<Vec<String>>,
    stores: Vec<zlink_redis_location::RedisLocationStore>,
    prefix: String,
}

async fn pair(url: &str, tag: &str) -> Result<Pair, String> {
    let prefix = format!(
        "zlink-bench-objects-{tag}-{}",
        uuid::Uuid::new_v4().simple()
    );
    let mut stores = Vec::new();
    for _ in 0..2 {
        stores.push(connect(url, &prefix).await?);
    }
    let hosts = start_roots(&stores).await?;
    let mesh = mesh()?;
    let a = hosts[0].node(&mesh).ok_or("root A has no node")?;
    let b = hosts[1].node(&mesh).ok_or("root B has no node")?;
    let actors = hosts[0].actors().map_err(|e| e.to_string())?;
    wait_for_mesh(&a, &b, &actors).await?;
    let targets = populate(&actors, "cross", REMOTE_TYPE, THROUGHPUT_ACTORS).await?;
    Ok(Pair {
        hosts,
        actors,
        targets,
        stores,
        prefix,
    })
}

async fn close(url: &str, p: Pair) -> Result<(), String> {
    let stopped = shut_down(&p.hosts).await;
    for s in &p.stores {
        s.close().await;
    }
    match super::purge_prefix(url, &p.prefix).await {
        Ok(n) => println!("purged {n} Redis key(s) under {}", p.prefix),
        Err(e) => println!("could not purge {}: {e}", p.prefix),
    }
    stopped
}

/// Figure 2 with metrics on against off (see the module doc).
pub(super) async fn cross_node_on_off(url: &str, slice: Duration) -> Result<(), String> {
    let (switch, handle) = install()?;
    let upkeep = handle.clone();
    let upkeep_task = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });
    let t = Instant::now();
    let on = pair(url, "on").await?;
    switch.store(false, Ordering::Release);
    let off = match pair(url, "off").await {
        Ok(p) => p,
        Err(e) => {
            let _ = close(url, on).await;
            return Err(e);
        }
    };
    println!(
        "pairs on (Prometheus recorder) and off (no-op handles) ready in {:.2} s, {} Actors \
         owned by each B",
        t.elapsed().as_secs_f64(),
        on.targets.len()
    );
    let measured = rounds(&on, &off, slice).await;
    upkeep_task.abort();
    let sent_on = messages_sent(&handle.render());
    let closed = close(url, on).await.and(close(url, off).await);
    let (on_lat, off_lat, paired, sent_during) = measured?;
    closed?;
    println!();
    println!(
        "2m. cross-node request/reply, c=64, A -> {THROUGHPUT_ACTORS} Actors owned by B, route \
         cache warm, metrics on vs off:"
    );
    super::objects::print_lat("metrics on  (Prometheus)", &on_lat);
    super::objects::print_lat("metrics off (no-op)", &off_lat);
    println!(
        "   on / off throughput = {:.3}x over all rounds, {:.3}x median of the {ROUNDS} paired \
         rounds (target >= 0.95x); the recorder counted {sent_on} messages sent (the on \
         pair's requests: {sent_during})",
        on_lat.per_sec / off_lat.per_sec,
        median(paired)
    );
    if sent_on < sent_during as f64 {
        return Err(format!(
            "the on pair's requests were not recorded ({sent_on} < {sent_during})"
        ));
    }
    Ok(())
}

type Measured = (
    super::transport::Latency,
    super::transport::Latency,
    Vec<f64>,
    usize,
);

async fn rounds(on: &Pair, off: &Pair, slice: Duration) -> Result<Measured, String> {
    let (mut s_on, mut s_off) = (Samples::default(), Samples::default());
    let mut paired = Vec::new();
    let mut sent = 0;
    for round in 0..ROUNDS {
        warm(&on.actors, &on.targets).await?;
        warm(&off.actors, &off.targets).await?;
        // The on pair's warm-up requests are recorded too (the off pair's are not).
        sent += on.targets.len();
        let (a, b) = if round % 2 == 0 {
            let a = actor_load(&on.actors, &on.targets, 64, slice).await?;
            (a, actor_load(&off.actors, &off.targets, 64, slice).await?)
        } else {
            let b = actor_load(&off.actors, &off.targets, 64, slice).await?;
            (actor_load(&on.actors, &on.targets, 64, slice).await?, b)
        };
        sent += a.0.len();
        paired.push(per_sec(&a) / per_sec(&b));
        s_on.add(a);
        s_off.add(b);
    }
    Ok((s_on.latency(), s_off.latency(), paired, sent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_sent_adds_every_series_of_the_counter() {
        let text = "# TYPE zlink_messages_sent counter\n\
                    zlink_messages_sent{kind=\"request\",path=\"remote\"} 10\n\
                    zlink_messages_sent{kind=\"one_way\",path=\"local\"} 2\n\
                    zlink_messages_received{kind=\"request\"} 7\n";
        assert_eq!(messages_sent(text), 12.0);
    }

    #[test]
    fn the_switch_hands_out_noop_handles_while_off() {
        let on = Arc::new(AtomicBool::new(true));
        let inner = crate::demo::metrics::prometheus::recorder();
        let handle = inner.handle();
        let switch = Switch {
            on: Arc::clone(&on),
            inner,
        };
        let counted = metrics::with_local_recorder(&switch, || metrics::counter!("zlink.t.on"));
        on.store(false, Ordering::Release);
        let silent = metrics::with_local_recorder(&switch, || metrics::counter!("zlink.t.off"));
        counted.increment(3);
        silent.increment(5);
        let text = handle.render();
        assert!(text.contains("zlink_t_on 3"), "{text}");
        assert!(!text.contains("zlink_t_off"), "{text}");
    }
}
