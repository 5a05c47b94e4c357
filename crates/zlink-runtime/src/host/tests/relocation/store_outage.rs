//! A Location Store outage in the middle of a host Relocate (spec 21 §1.1, §9, §10; 28 §8):
//! the Store stops answering every root while some units have moved and others are in flight
//! or still to start, long enough for every root's admission deadline to pass, then answers
//! again. Each object ends with one owner, and what the outage cancelled moves once the Store
//! answers again: the Relocate ends `Relocated`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;
use zlink_codec::records::ObjectRole;
use zlink_store_conformance::{Fault, FaultyLocationStore, LocationOp};
use zlink_store_spi::{DynLocationStore, MemoryRelocationStore};

use super::host::{Spec, start_root_with};
use super::{Incr, Policy, Seen};
use crate::host::tests::support::*;
use crate::host::{RelocateOptions, RelocationOutcome, RelocationReason, ZLinkHost};
use crate::mesh::node::MeshNode;
use crate::objects::RelocationOptions;
use zlink_location::{LocationOptions, NodeKey};
use zlink_testkit::Harness;

on_every_store!(a_store_outage_mid_host_relocate_leaves_one_owner_per_object);

/// How many Actors the source holds.
const IDS: usize = 16;

/// The lease TTL of every root: the invariants must hold within TTL + 5 s of the heal.
const TTL: Duration = Duration::from_millis(3_000);

/// Three counter Object Servers (root 0 the source) and a client, all over `store`.
async fn roots(store: &Arc<dyn DynLocationStore>, seen: &Arc<Seen>) -> Vec<(ZLinkHost, MeshNode)> {
    let options = WithRelocation(
        LocationOptions::default()
            .polling_interval(Duration::from_millis(100))
            .owner_lease_renew_interval(Duration::from_millis(100))
            .owner_lease_renew_timeout(Duration::from_millis(200))
            .owner_lease_ttl(TTL)
            .owner_lease_fencing_margin(Duration::from_millis(1_000)),
        // Two units at a time: the outage falls between moved units and units to come.
        RelocationOptions::default().max_active_outbound(2),
    );
    let mut roots = Vec::new();
    for role in [
        ObjectRole::Server,
        ObjectRole::Server,
        ObjectRole::Server,
        ObjectRole::Client,
    ] {
        let spec = Spec {
            role,
            policy: Policy::Preserve,
            version: 1,
            wave: None,
        };
        let relocation = Arc::new(MemoryRelocationStore::new());
        roots.push(start_root_with(Arc::clone(store), spec, seen, &options, relocation).await);
    }
    wait_connected(&roots).await;
    roots
}

/// The server roots (0..3) each Actor id is live on.
fn live_on(roots: &[(ZLinkHost, MeshNode)]) -> BTreeMap<String, Vec<usize>> {
    let mut out: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, (h, _)) in roots.iter().enumerate().take(3) {
        for ((_, id), _, _) in h.object_host(0).live_list() {
            out.entry(id.as_str().to_owned()).or_default().push(i);
        }
    }
    out
}

/// What breaks "one owner per object" now: an id live on no root or on two, a record that
/// names another node than the one it is live on, a counter instance kept beside the live
/// ones (built for a move that did not commit and never dropped), a capacity row that does not
/// add up to the activations live on its node.
async fn breaks(roots: &[(ZLinkHost, MeshNode)], ids: &[String], seen: &Seen) -> Vec<String> {
    let mut out = Vec::new();
    let live = live_on(roots);
    let caller = roots[3].0.actors().expect("manager");
    for id in ids {
        let on = live.get(id).cloned().unwrap_or_default();
        let [i] = on.as_slice() else {
            out.push(format!("{id} is live on roots {on:?}"));
            continue;
        };
        match caller.find(id).await {
            Ok(Some(r)) if r.node == *roots[*i].1.routing_id() => {}
            other => out.push(format!(
                "{id} is live on root {i}, its record reads {other:?}"
            )),
        }
    }
    let instances = seen.factories.load(Ordering::SeqCst) + seen.restores.load(Ordering::SeqCst)
        - seen.drops.load(Ordering::SeqCst);
    if instances != ids.len() {
        out.push(format!(
            "{instances} counter instances in memory for {} live Actors",
            ids.len()
        ));
    }
    for (i, (h, n)) in roots.iter().enumerate().take(3) {
        let objects = h.object_host(0);
        let node = NodeKey {
            mesh: mesh(),
            routing_id: n.routing_id().clone(),
        };
        let here = objects.live_list().len() as u64;
        match objects.location.authority().node_capacity(&node).await {
            Ok(row) if row.actors == here => {}
            other => out.push(format!("root {i}: {here} live, capacity row {other:?}")),
        }
    }
    out
}

async fn a_store_outage_mid_host_relocate_leaves_one_owner_per_object(h: &Harness) {
    let faulty = Arc::new(FaultyLocationStore::new(Arc::clone(&h.store)));
    let store: Arc<dyn DynLocationStore> = faulty.clone();
    let seen = Arc::new(Seen::default());
    let roots = roots(&store, &seen).await;
    let caller = roots[3].0.actors().expect("manager");
    let mut ids = Vec::new();
    for i in 0..200 {
        if ids.len() == IDS {
            break;
        }
        let id = format!("out-{i}");
        let r = caller.get_or_create("counter", &id).await.expect("created");
        assert_eq!(caller.request(&id, &Incr).await.expect("incr"), 1);
        if r.node == *roots[0].1.routing_id() {
            ids.push(id);
        }
    }
    assert_eq!(ids.len(), IDS, "placement put {IDS} Actors on the source");
    let all: Vec<String> = live_on(&roots).into_keys().collect();

    let source = roots[0].0.clone();
    let relocating = tokio::spawn(async move {
        source
            .relocate(RelocateOptions::planned_maintenance())
            .await
    });
    wait_until("a few units moved", || {
        live_on(&roots)
            .values()
            .filter(|on| on.iter().any(|i| *i != 0))
            .count()
            >= all.len() - IDS + 3
    })
    .await;
    faulty.set_fault(LocationOp::ALL, Fault::UNAVAILABLE);
    wait_until("every server's admission deadline passes", || {
        roots
            .iter()
            .take(3)
            .all(|(h, _)| !h.object_host(0).location.is_admitting())
    })
    .await;
    faulty.heal();
    let healed = Instant::now();

    let result = tokio::time::timeout(Duration::from_secs(90), relocating)
        .await
        .expect("the Relocate ends")
        .expect("the Relocate task")
        .expect("valid options");
    // The outage ended well before the deadline and the Store failure grace: every unit the
    // outage cancelled before its owner change moves once the Store answers again.
    assert_eq!(
        (
            result.outcome,
            result.reason,
            result.moved,
            result.remaining
        ),
        (RelocationOutcome::Relocated, RelocationReason::None, IDS, 0),
        "{result:?}"
    );
    // Within lease TTL + 5 s of the heal, every object has exactly one owner.
    let until = healed + TTL + Duration::from_secs(5);
    let mut last = breaks(&roots, &all, &seen).await;
    while !last.is_empty() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
        last = breaks(&roots, &all, &seen).await;
    }
    assert!(
        last.is_empty(),
        "{} after the outage (Relocate {result:?}): {last:#?}",
        last.len()
    );
    assert_eq!(
        roots[0].0.object_host(0).live_list().len(),
        result.remaining,
        "what the Relocate reports remaining is what stayed on the source"
    );
    // Each moved or stayed with its state, its increment run once.
    for id in &ids {
        assert_eq!(caller.request(id, &Incr).await.expect("incr"), 2, "{id}");
    }
    for (h, _) in roots.into_iter().rev() {
        h.shutdown().await;
    }
}
