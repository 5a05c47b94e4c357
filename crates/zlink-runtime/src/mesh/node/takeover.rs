//! After a lease takeover (spec 21 §3.1, §4): when this host's owner lease was lost and the
//! renew loop acquired it again under a new LeaseGeneration, every MeshNode descriptor is
//! republished under the new run (until then the list names a run whose lease is gone, so
//! peers drop the node), and the earlier run's activations and rows are reclaimed like those
//! of any dead run (the objects issue's recovery extension: delete only), so capacity never
//! leaks across the takeover.

use std::sync::Arc;

use super::core::NodeInner;
use zlink_location::{HostRun, LocationRuntime};

/// Follows the run `rt` holds until the runtime is dropped; `nodes` are this host's nodes.
pub(crate) async fn follow(rt: Arc<LocationRuntime>, nodes: Vec<Arc<NodeInner>>) {
    let mut runs = rt.watch_runs();
    let mut last: Option<HostRun> = runs.borrow_and_update().clone();
    drop(rt);
    while runs.changed().await.is_ok() {
        let Some(now) = runs.borrow_and_update().clone() else {
            continue;
        };
        let earlier = last.replace(now.clone());
        let Some(earlier) = earlier.filter(|e| *e != now) else {
            continue;
        };
        tracing::warn!(
            owner = %now.owner_id,
            earlier = %earlier.lease_generation,
            generation = %now.lease_generation,
            "owner lease taken over: descriptors republished, the earlier run reclaimed"
        );
        for node in &nodes {
            if let Some(d) = &node.descriptor {
                d.republish(node).await;
                node.discovery_wake.notify_one();
            }
            if let Some(objects) = node.objects.get() {
                objects.owner_gone(earlier.clone());
            }
        }
    }
}
