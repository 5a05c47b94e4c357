//! After a lease takeover (spec 21 §3.1, §4): when this host's owner lease was lost and the
//! renew loop acquired it again — after it expired, or after the Store lost its data (the row
//! vanished while held, or a counter answered below a generation this host holds; see the
//! store-epoch decision in `docs/store-epoch.md`) — every MeshNode descriptor is republished
//! under the new run (until then the list names a run whose lease is gone, so peers drop the
//! node), and the earlier run's activations and rows are reclaimed like those of any dead run
//! (the objects issue's recovery extension: delete only), so capacity never leaks across the
//! takeover and no activation of the earlier run stays live beside a recreated one.
//!
//! A new holding is told by its lease *term* (each acquisition of this host is a new term),
//! not by the generation alone; the location core issues every re-acquire a LeaseGeneration
//! strictly above any this host has seen, so the earlier run always differs from the new one.

use std::sync::Arc;

use super::core::NodeInner;
use zlink_location::{LeaseTerm, LocationRuntime};

/// Follows the term `rt` holds until the runtime is dropped; `nodes` are this host's nodes.
pub(crate) async fn follow(rt: Arc<LocationRuntime>, nodes: Vec<Arc<NodeInner>>) {
    let mut terms = rt.watch_terms();
    let mut last: Option<LeaseTerm> = terms.borrow_and_update().clone();
    drop(rt);
    while terms.changed().await.is_ok() {
        let Some(now) = terms.borrow_and_update().clone() else {
            continue;
        };
        let earlier = last.replace(now.clone());
        let Some(earlier) = earlier.filter(|e| e.term != now.term) else {
            continue;
        };
        if earlier.run == now.run {
            // Never issued so by the location core; republishing is still right, but the
            // earlier run cannot be told from the current one, so nothing is reclaimed.
            tracing::error!(
                owner = %now.run.owner_id,
                generation = %now.run.lease_generation,
                "owner lease re-acquired under the same run: descriptors republished, nothing reclaimed"
            );
        } else {
            tracing::warn!(
                owner = %now.run.owner_id,
                earlier = %earlier.run.lease_generation,
                generation = %now.run.lease_generation,
                "owner lease taken over: descriptors republished, the earlier run reclaimed"
            );
        }
        for node in &nodes {
            if let Some(d) = &node.descriptor {
                d.republish(node).await;
                node.discovery_wake.notify_one();
            }
            if earlier.run == now.run {
                continue;
            }
            if let Some(objects) = node.objects.get() {
                objects.owner_gone(earlier.run.clone());
            }
        }
    }
}
