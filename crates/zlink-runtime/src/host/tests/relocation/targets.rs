//! Host Relocate target selection (spec 28 §4 filter step 4 and "No target yet", §8) and
//! placement while a host takes no new objects (28 §10; 21 §4).

use std::sync::Arc;
use std::time::Duration;

use zlink_codec::RoutingId;
use zlink_codec::records::{HostState, ObjectRole};

use super::instance::{Tally, tally_type};
use super::{Counter, Incr, Policy, Seen, counter_type};
use crate::host::config::MeshNodeBuilder;
use crate::host::tests::support::*;
use crate::host::{RelocateOptions, RelocationOutcome, RelocationReason, ZLinkHost};
use crate::mesh::node::MeshNode;
use crate::messaging::{ErrorKind, NodeHandler};
use zlink_location::LocationOptions;
use zlink_testkit::Harness;

/// How a server root's MeshNode is shaped beyond its types (limits, weight).
type Shape = fn(MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler>;

fn plain(n: MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler> {
    n
}

fn room_for_one(n: MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler> {
    n.actor_limit(1)
}

fn room_for_two(n: MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler> {
    n.actor_limit(2)
}

/// A root over the harness's store: an Object Server of `counter` and the Instance Spot type
/// `tally` (both `PreserveStateWith`) shaped by `shape`, or an Object Client.
async fn root(
    h: &Harness,
    role: ObjectRole,
    seen: &Arc<Seen>,
    options: LocationOptions,
    shape: Shape,
) -> (ZLinkHost, MeshNode) {
    let seen = Arc::clone(seen);
    object_root(Arc::clone(&h.store), role, &options, move |n| {
        shape(
            n.instance_spot_type::<Tally>("tally", tally_type(Policy::Preserve, Arc::clone(&seen)))
                .actor_type::<Counter>("counter", counter_type(Policy::Preserve, seen)),
        )
    })
    .await
}

/// A source holding `n` counters (each at 1), created while it was the only Object Server,
/// a client, and then one target per shape: all Ready peers, each discovery listing the others.
struct Hosts {
    source: (ZLinkHost, MeshNode),
    client: (ZLinkHost, MeshNode),
    targets: Vec<(ZLinkHost, MeshNode)>,
    ids: Vec<String>,
    seen: Arc<Seen>,
}

impl Hosts {
    async fn start(h: &Harness, n: usize, prefix: &str, shapes: &[Shape]) -> Self {
        let seen = Arc::new(Seen::default());
        let source = root(h, ObjectRole::Server, &seen, fast_options(), plain).await;
        let client = root(h, ObjectRole::Client, &seen, fast_options(), plain).await;
        wait_connected([&source, &client]).await;
        let caller = client.0.actors().expect("manager");
        let mut ids = Vec::new();
        for i in 0..n {
            let id = format!("{prefix}-{i}");
            let r = caller.get_or_create("counter", &id).await.expect("created");
            assert_eq!(&r.node, source.1.routing_id(), "the only Object Server");
            assert_eq!(caller.request(&id, &Incr).await.expect("incr"), 1);
            ids.push(id);
        }
        let mut hosts = Hosts {
            source,
            client,
            targets: Vec::new(),
            ids,
            seen,
        };
        for shape in shapes {
            hosts.add_target(h, *shape).await;
        }
        hosts
    }

    /// Starts one more target shaped by `shape` and waits until every root sees every other.
    async fn add_target(&mut self, h: &Harness, shape: Shape) {
        let t = root(h, ObjectRole::Server, &self.seen, fast_options(), shape).await;
        self.targets.push(t);
        let all: Vec<_> = [&self.source, &self.client]
            .into_iter()
            .chain(self.targets.iter())
            .collect();
        wait_connected(all).await;
    }

    fn target(&self, i: usize) -> RoutingId {
        self.targets[i].1.routing_id().clone()
    }

    /// Where each counter lives now, read through the client.
    async fn owners(&self) -> Vec<RoutingId> {
        let caller = self.client.0.actors().expect("manager");
        let mut out = Vec::new();
        for id in &self.ids {
            let found = caller.find(id).await.expect("find").expect("exists");
            out.push(found.node);
        }
        out
    }

    /// How many counters live on `rid` now.
    async fn count_on(&self, rid: &RoutingId) -> usize {
        self.owners().await.iter().filter(|o| *o == rid).count()
    }

    /// Every counter answers its second increment: its state moved (or stayed) intact.
    async fn all_answer_two(&self) {
        let caller = self.client.0.actors().expect("manager");
        for id in &self.ids {
            assert_eq!(caller.request(id, &Incr).await.expect("served"), 2, "{id}");
        }
    }

    async fn shutdown(self) {
        self.client.0.shutdown().await;
        for (t, _) in self.targets.into_iter().rev() {
            t.shutdown().await;
        }
        self.source.0.shutdown().await;
    }
}

on_every_store!(
    host_relocate_counts_capacity_taken_by_earlier_units,
    a_target_without_room_is_not_chosen_and_the_kind_is_capacity_exceeded,
    host_relocate_waits_for_an_eligible_target_until_the_deadline,
    a_host_not_taking_new_objects_never_places_on_itself,
);

async fn host_relocate_counts_capacity_taken_by_earlier_units(h: &Harness) {
    // Three Actors, one target with room for two: the third unit has no target (28 §4
    // filter step 4) and is never started; once the deadline passes with no target the host
    // is Blocked/TargetUnavailable (28 §4 "No target yet", §8), the two moved units stay on
    // the target and the third serves on from the source (28 §3, §8).
    let hosts = Hosts::start(h, 3, "cap", &[room_for_two]).await;
    let source = hosts.source.0.clone();
    let result = source
        .relocate(RelocateOptions::planned_maintenance().deadline(Duration::from_millis(1500)))
        .await
        .expect("valid");
    assert_eq!(result.outcome, RelocationOutcome::Blocked, "{result:?}");
    assert_eq!(
        result.reason,
        RelocationReason::TargetUnavailable,
        "{result:?}"
    );
    assert_eq!((result.moved, result.remaining), (2, 1), "{result:?}");
    assert_eq!(
        source.state(),
        HostState::Serving,
        "the source serves again"
    );
    assert_eq!(
        hosts.count_on(&hosts.target(0)).await,
        2,
        "moved, kept there"
    );
    assert_eq!(hosts.count_on(hosts.source.1.routing_id()).await, 1);
    hosts.all_answer_two().await;
    hosts.shutdown().await;
}

async fn a_target_without_room_is_not_chosen_and_the_kind_is_capacity_exceeded(h: &Harness) {
    // Target 0 has room for one Actor, target 1 for any number: after target 0 took one unit
    // it is no target any more, and every other unit goes to target 1.
    let hosts = Hosts::start(h, 4, "full", &[room_for_one, plain]).await;
    let result = hosts
        .source
        .0
        .relocate(RelocateOptions::planned_maintenance().deadline(Duration::from_secs(10)))
        .await
        .expect("valid");
    assert_eq!(result.outcome, RelocationOutcome::Relocated, "{result:?}");
    assert_eq!(result.moved, 4);
    let owners = hosts.owners().await;
    let (full, open) = (hosts.target(0), hosts.target(1));
    assert!(
        owners.iter().all(|o| *o == full || *o == open),
        "{owners:?}"
    );
    assert!(owners.iter().filter(|o| **o == full).count() <= 1);
    hosts.all_answer_two().await;
    // A move named to a target without room is refused as CapacityExceeded, nothing changes.
    let i = owners
        .iter()
        .position(|o| *o == open)
        .expect("one on target 1");
    let id = &hosts.ids[i];
    let mover = hosts.targets[1].0.actors().expect("manager");
    let actor = mover.find(id).await.expect("find").expect("exists");
    if hosts.count_on(&full).await == 0 {
        // Target 0 still has its room: fill it first.
        let other = &hosts.ids[owners.iter().rposition(|o| *o == open).expect("another")];
        let r = mover.find(other).await.expect("find").expect("exists");
        crate::relocation::relocate_actor(&mover.client, &r, Some(&full))
            .await
            .expect("moved into the last room");
    }
    let err = crate::relocation::relocate_actor(&mover.client, &actor, Some(&full))
        .await
        .expect_err("no room");
    assert_eq!(err.kind(), ErrorKind::CapacityExceeded, "{err}");
    let caller = hosts.client.0.actors().expect("manager");
    assert_eq!(
        caller.find(id).await.expect("find").map(|a| a.node),
        Some(open)
    );
    assert_eq!(caller.request(id, &Incr).await.expect("served"), 3);
    hosts.shutdown().await;
}

async fn host_relocate_waits_for_an_eligible_target_until_the_deadline(h: &Harness) {
    // Three Actors, a target with room for two: the third unit waits for an eligible target
    // (28 §4 "No target yet") and moves to the one that appears before the deadline.
    let mut hosts = Hosts::start(h, 3, "wait", &[room_for_two]).await;
    let source = hosts.source.0.clone();
    let running = tokio::spawn(async move {
        source
            .relocate(RelocateOptions::planned_maintenance().deadline(Duration::from_secs(30)))
            .await
    });
    let first = hosts.target(0);
    let until = tokio::time::Instant::now() + WAIT;
    while hosts.count_on(&first).await < 2 {
        assert!(tokio::time::Instant::now() < until, "two units never moved");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    hosts.add_target(h, plain).await;
    let result = tokio::time::timeout(WAIT, running)
        .await
        .expect("the relocate ends once the new target is eligible")
        .expect("task")
        .expect("valid");
    assert_eq!(result.outcome, RelocationOutcome::Relocated, "{result:?}");
    assert_eq!(result.moved, 3);
    assert_eq!(hosts.source.0.state(), HostState::Relocated);
    assert_eq!(hosts.count_on(&first).await, 2);
    assert_eq!(hosts.count_on(&hosts.target(1)).await, 1);
    hosts.all_answer_two().await;
    hosts.shutdown().await;
}

async fn a_host_not_taking_new_objects_never_places_on_itself(h: &Harness) {
    // The source outweighs the target 10000:1 and re-reads its discovery list only every
    // 30 s: right after Relocated its own list still shows it `serving` (21 §4 takes the last
    // full list). It takes no new objects (28 §10), so it never places one on itself.
    fn heavy(n: MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler> {
        n.placement_weight(10_000)
    }
    fn light(n: MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler> {
        n.placement_weight(1)
    }
    const PROBES: usize = 8;
    let seen = Arc::new(Seen::default());
    let target = root(h, ObjectRole::Server, &seen, fast_options(), light).await;
    let slow = fast_options().polling_interval(Duration::from_secs(30));
    let source = root(h, ObjectRole::Server, &seen, slow, heavy).await;
    wait_peers(&source.1, 1).await;
    wait_peers(&target.1, 1).await;
    // An Instance Spot on the source, cold-activated by itself (its list names itself).
    let spots = source.0.spots().expect("manager");
    let mut own = None;
    for i in 0..20 {
        let id = format!("self-{i}");
        assert_eq!(
            spots
                .instance(&id)
                .stable_type("tally")
                .request(&Incr)
                .await
                .expect("created"),
            1
        );
        if source.0.spots().expect("manager").client.objects.is_live(&(
            zlink_codec::keys::AuthorityKind::Spot,
            zlink_codec::ObjectId::new(&id).expect("id"),
        )) {
            own = Some(id);
            break;
        }
    }
    assert!(own.is_some(), "placement never chose the heavy source");
    let result = source
        .0
        .relocate(RelocateOptions::planned_maintenance())
        .await
        .expect("valid");
    assert_eq!(result.outcome, RelocationOutcome::Relocated, "{result:?}");
    // At once: first messages of new Instance Spots and new Actors from the relocated host.
    let actors = source.0.actors().expect("manager");
    for i in 0..PROBES {
        let id = format!("after-{i}");
        let got = spots
            .instance(&id)
            .stable_type("tally")
            .request(&Incr)
            .await;
        assert_eq!(got.expect("placed on an eligible node"), 1, "{id}");
        let made = actors
            .get_or_create("counter", &id)
            .await
            .expect("created on an eligible node");
        assert_eq!(&made.node, target.1.routing_id(), "{id}");
    }
    source.0.shutdown().await;
    target.0.shutdown().await;
}
