//! The host's metrics sampler (`telemetry` module doc): once per [`SAMPLE_PERIOD`] it reads
//! what no message should pay to publish — every node's mailbox usage, the live activations
//! and the jobs in their mailboxes,
//! the owner lease's renew counts and the timer tick counts — and publishes it as gauge and
//! counter deltas. It holds its nodes weakly and ends when they are gone (or when the host's
//! tasks are aborted at shutdown, which takes its gauges back to zero). Reading is a few
//! locks and atomics; it never waits on the Store or the network.

use std::sync::{Arc, Weak};
use std::time::Duration;

use zlink_location::HealthProbe;

use super::start::NodeObjects;
use crate::mesh::node::NodeInner;
use crate::objects::host::ObjectHost;
use crate::telemetry::{HostSamples, Sample};

/// How often the sampler publishes.
pub(crate) const SAMPLE_PERIOD: Duration = Duration::from_secs(1);

/// What one sampler reads.
pub(crate) struct Sampled {
    nodes: Vec<Weak<NodeInner>>,
    objects: Vec<Weak<ObjectHost>>,
    health: Option<HealthProbe>,
}

impl Sampled {
    /// The nodes, object hosts and lease health of one host.
    pub(crate) fn new(
        nodes: &[Arc<NodeInner>],
        objects: &[Option<NodeObjects>],
        health: Option<HealthProbe>,
    ) -> Self {
        Self {
            nodes: nodes.iter().map(Arc::downgrade).collect(),
            objects: objects
                .iter()
                .flatten()
                .map(|o| Arc::downgrade(&o.host))
                .collect(),
            health,
        }
    }

    /// One reading (`None`: every node is gone).
    pub(crate) fn read(&self) -> Option<Sample> {
        let mut sample = Sample::default();
        let mut any = false;
        for n in self.nodes.iter().filter_map(Weak::upgrade) {
            if !any {
                // One queue per host, shared by its MeshNodes.
                sample.job_queue = n.jobs.in_use() as u64;
            }
            any = true;
            let (jobs, bytes) = n.mailbox.usage();
            sample.mailbox_jobs += jobs as u64;
            sample.mailbox_bytes += bytes as u64;
        }
        for o in self.objects.iter().filter_map(Weak::upgrade) {
            let (actors, spots) = o.live_totals();
            sample.actors += actors;
            sample.spots += spots;
            sample.object_mailbox_jobs += o.mailbox_jobs();
            let (ran, refused, skipped) = o.timer_counters().get();
            sample.ticks[0] += ran;
            sample.ticks[1] += refused;
            sample.ticks[2] += skipped;
        }
        if let Some(h) = &self.health {
            let r = h.renewals();
            sample.renewals = [r.renewed, r.failed, r.taken_over];
        }
        any.then_some(sample)
    }
}

/// Publishes a reading of `sampled` every `period` until its nodes are gone.
pub(crate) async fn run(sampled: Sampled, period: Duration) {
    let out = HostSamples::new();
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        match sampled.read() {
            Some(sample) => out.publish(sample),
            None => return,
        }
    }
}
