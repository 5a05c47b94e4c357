//! Host Relocate (spec 28 §2–§12): the host moves every Actor to eligible nodes, its state,
//! results, concurrency and the race with Shutdown.

use std::sync::Arc;
use std::time::Duration;

use zlink_codec::records::{HostState, ObjectRole};
use zlink_store_spi::{DynRelocationStore, MemoryRelocationStore};

use super::{Incr, Policy, Seen, counter_type};
use crate::host::tests::support::*;
use crate::host::{
    HostEvent, RelocateError, RelocateOptions, RelocationMode, RelocationOutcome, RelocationReason,
    ShutdownOutcome, ZLinkHost,
};
use crate::mesh::node::MeshNode;
use zlink_testkit::Harness;

/// One root of the relocation tests: role, policy, application version, maintenance wave.
#[derive(Clone)]
pub(super) struct Spec {
    pub(super) role: ObjectRole,
    pub(super) policy: Policy,
    pub(super) version: u64,
    pub(super) wave: Option<&'static str>,
}

fn server(version: u64) -> Spec {
    Spec {
        role: ObjectRole::Server,
        policy: Policy::Preserve,
        version,
        wave: None,
    }
}

fn client() -> Spec {
    Spec {
        role: ObjectRole::Client,
        ..server(1)
    }
}

/// Starts one root of `spec` over the harness's store (a memory Relocation Store of its own).
pub(super) async fn start_root(
    h: &Harness,
    spec: Spec,
    seen: &Arc<Seen>,
    options: &impl RootOptions,
) -> (ZLinkHost, MeshNode) {
    let relocation: Arc<dyn DynRelocationStore> = Arc::new(MemoryRelocationStore::new());
    start_root_with(Arc::clone(&h.store), spec, seen, options, relocation).await
}

/// [`start_root`] over the Location Store `store` (the harness's, or a fault wrapper of it)
/// and the Relocation Store `relocation`.
pub(super) async fn start_root_with(
    store: Arc<dyn zlink_store_spi::DynLocationStore>,
    spec: Spec,
    seen: &Arc<Seen>,
    options: &impl RootOptions,
    relocation: Arc<dyn DynRelocationStore>,
) -> (ZLinkHost, MeshNode) {
    let seen = Arc::clone(seen);
    let (role, policy, version, wave) = (spec.role, spec.policy, spec.version, spec.wave);
    let root = |b| {
        let b = options.apply(b).application_version(version);
        match wave {
            Some(w) => b.maintenance_wave(w),
            None => b,
        }
    };
    object_root_with(store, relocation, role, root, move |n| {
        if role == ObjectRole::Server {
            n.actor_type::<super::Counter>("counter", counter_type(policy, seen))
        } else {
            n
        }
    })
    .await
}

/// Roots started in order, all Ready peers of each other, each discovery listing the others.
struct Roots {
    roots: Vec<(ZLinkHost, MeshNode)>,
}

impl Roots {
    async fn start(h: &Harness, specs: &[Spec]) -> Self {
        Self::start_with(h, specs, &fast_options()).await
    }

    async fn start_with(h: &Harness, specs: &[Spec], options: &impl RootOptions) -> Self {
        let seen = Arc::new(Seen::default());
        let mut roots = Vec::new();
        for s in specs {
            roots.push(start_root(h, s.clone(), &seen, options).await);
        }
        wait_connected(&roots).await;
        Self { roots }
    }

    fn host(&self, i: usize) -> &ZLinkHost {
        &self.roots[i].0
    }

    fn rid(&self, i: usize) -> zlink_codec::RoutingId {
        self.roots[i].1.routing_id().clone()
    }

    /// Creates `n` counters through root `via` until `on` owns `n` of them, each incremented
    /// once; returns the ids on `on`.
    async fn counters_on(&self, via: usize, on: usize, n: usize, prefix: &str) -> Vec<String> {
        let caller = self.host(via).actors().expect("manager");
        let mut ids = Vec::new();
        let mut i = 0;
        while ids.len() < n {
            i += 1;
            assert!(i < 50 * n + 50, "placement never chose root {on}");
            let id = format!("{prefix}-{i}");
            let r = caller.get_or_create("counter", &id).await.expect("created");
            assert_eq!(caller.request(&id, &Incr).await.expect("incr"), 1);
            if r.node == self.rid(on) {
                ids.push(id);
            }
        }
        ids
    }

    async fn shutdown(self) {
        for (h, _) in self.roots.into_iter().rev() {
            h.shutdown().await;
        }
    }
}

/// Where `id` lives now, read through `via`'s manager.
async fn owner_of(via: &ZLinkHost, id: &str) -> zlink_codec::RoutingId {
    via.actors()
        .expect("manager")
        .find(id)
        .await
        .expect("find")
        .expect("the Actor exists")
        .node
}

on_every_store!(
    planned_maintenance_moves_every_actor_to_a_same_version_node,
    rolling_update_moves_only_to_the_requested_exact_version,
    without_an_eligible_target_the_relocate_is_blocked_and_the_host_serves_on,
    a_node_of_the_same_maintenance_wave_is_no_target,
    a_disabled_type_blocks_the_relocate_before_anything_changes,
    same_options_share_one_operation_and_other_options_are_operation_in_progress,
    shutdown_during_a_relocate_ends_it_with_shutdown_requested,
    an_empty_host_is_relocated_without_a_target_search,
    a_registered_manual_peer_blocks_the_relocate,
    after_the_deadline_no_unit_starts_and_started_units_end_safely,
    shutdown_after_relocated_leaves_the_moved_actors_serving,
    shutdown_during_the_moves_finishes_the_started_units_and_starts_no_other,
    an_unconfirmed_relocating_descriptor_rolls_back_to_serving_with_store_unavailable,
    a_relocated_host_refuses_node_direct_requests_and_keeps_its_connections,
    a_leaving_host_moves_its_actors_away_then_stops,
    a_host_leaving_without_a_target_still_stops_and_its_actors_come_back_new,
);

async fn planned_maintenance_moves_every_actor_to_a_same_version_node(h: &Harness) {
    // 0: the source (v1), 1: same version, 2: a newer version, 3: the client.
    let r = Roots::start(h, &[server(1), server(1), server(2), client()]).await;
    let ids = r.counters_on(3, 0, 6, "pm").await;
    let mut observer = r.host(0).observe();
    let result = r
        .host(0)
        .relocate(RelocateOptions::planned_maintenance())
        .await
        .expect("valid options");
    assert_eq!(result.outcome, RelocationOutcome::Relocated, "{result:?}");
    assert_eq!(result.reason, RelocationReason::None);
    assert_eq!(result.mode, RelocationMode::PlannedMaintenance);
    assert_eq!(
        result.target_version, 1,
        "the effective version is the host's"
    );
    assert_eq!(result.moved, 6);
    assert_eq!(
        result.interruption.count, 6,
        "one interruption per moved unit"
    );
    assert!(result.interruption.p50 <= result.interruption.max);
    assert!(result.interruption.max > Duration::ZERO);
    assert_eq!(r.host(0).state(), HostState::Relocated);
    let caller = r.host(3).actors().expect("manager");
    for id in &ids {
        assert_eq!(
            owner_of(r.host(3), id).await,
            r.rid(1),
            "{id} went to the v1 node"
        );
        // The state moved with it (PreserveStateWith): the second increment answers 2.
        assert_eq!(caller.request(id, &Incr).await.expect("incr"), 2);
    }
    // Infrastructure kept: the relocated host is still a Ready peer of the others.
    assert!(r.roots[0].1.status().peers.len() >= 3);
    // Observe: the state it was in, Relocating, Relocated, then the terminal result.
    let mut events = Vec::new();
    while let Some(e) = observer.try_next() {
        events.push(e);
    }
    let states: Vec<HostState> = events
        .iter()
        .filter_map(|e| match e {
            HostEvent::State(s) => Some(*s),
            _ => None,
        })
        .collect();
    assert_eq!(
        states,
        [
            HostState::Serving,
            HostState::Relocating,
            HostState::Relocated
        ]
    );
    assert!(
        matches!(events.last(), Some(HostEvent::Relocation(res)) if *res == result),
        "the terminal result is announced last: {events:?}"
    );
    assert_eq!(r.host(0).status().last_relocation, Some(result.clone()));
    // A repeat in Relocated returns the first result.
    let again = r
        .host(0)
        .relocate(RelocateOptions::planned_maintenance())
        .await
        .expect("valid");
    assert_eq!(again, result);
    // Shutdown stays a separate step.
    assert_eq!(r.host(0).state(), HostState::Relocated);
    // Relocated: new objects are placed elsewhere only (once the others' discovery read the
    // `relocated` descriptor; before that, a creation placed here is refused and cancelled).
    let others: Vec<&ZLinkHost> = (1..r.roots.len()).map(|i| r.host(i)).collect();
    wait_listed_in_state(&others, &r.rid(0), HostState::Relocated).await;
    for i in 0..8 {
        let made = caller
            .get_or_create("counter", &format!("pm-new-{i}"))
            .await
            .expect("created elsewhere");
        assert_ne!(made.node, r.rid(0), "nothing new on the relocated host");
    }
    r.shutdown().await;
}

async fn rolling_update_moves_only_to_the_requested_exact_version(h: &Harness) {
    // 0: the source (v1), 1: v1, 2: v2, 3: v3, 4: the client.
    let r = Roots::start(h, &[server(1), server(1), server(2), server(3), client()]).await;
    let ids = r.counters_on(4, 0, 4, "ru").await;
    let err = r
        .host(0)
        .relocate(RelocateOptions::rolling_update(1))
        .await
        .expect_err("not newer");
    assert!(matches!(err, RelocateError::TargetVersionNotNewer { .. }));
    assert_eq!(r.host(0).state(), HostState::Serving, "nothing changed");
    let result = r
        .host(0)
        .relocate(RelocateOptions::rolling_update(2))
        .await
        .expect("valid");
    assert_eq!(result.outcome, RelocationOutcome::Relocated, "{result:?}");
    assert_eq!(result.target_version, 2);
    for id in &ids {
        assert_eq!(
            owner_of(r.host(4), id).await,
            r.rid(2),
            "{id} went to v2 only"
        );
    }
    r.shutdown().await;
}

async fn without_an_eligible_target_the_relocate_is_blocked_and_the_host_serves_on(h: &Harness) {
    let r = Roots::start(h, &[server(1), client()]).await;
    let ids = r.counters_on(1, 0, 2, "nt").await;
    let result = r
        .host(0)
        .relocate(RelocateOptions::planned_maintenance().deadline(Duration::from_millis(600)))
        .await
        .expect("valid");
    assert_eq!(result.outcome, RelocationOutcome::Blocked);
    assert_eq!(result.reason, RelocationReason::TargetUnavailable);
    assert_eq!(result.target_version, 1, "filled even without a target");
    assert_eq!(
        result.remaining, 2,
        "both Actors are still here: {result:?}"
    );
    assert_eq!(r.host(0).state(), HostState::Serving);
    let caller = r.host(1).actors().expect("manager");
    for id in &ids {
        assert_eq!(caller.request(id, &Incr).await.expect("served"), 2);
    }
    // After Blocked nothing is kept: a later Relocate with another version runs its checks.
    let other = r
        .host(0)
        .relocate(RelocateOptions::rolling_update(9).deadline(Duration::from_millis(300)))
        .await
        .expect("valid");
    assert_eq!(other.reason, RelocationReason::TargetUnavailable);
    assert_eq!(other.target_version, 9);
    r.shutdown().await;
}

async fn a_node_of_the_same_maintenance_wave_is_no_target(h: &Harness) {
    let waved = |w| Spec {
        wave: Some(w),
        ..server(1)
    };
    let r = Roots::start(h, &[waved("a"), waved("a"), waved("b"), client()]).await;
    let ids = r.counters_on(3, 0, 3, "mw").await;
    let result = r
        .host(0)
        .relocate(RelocateOptions::planned_maintenance())
        .await
        .expect("valid");
    assert_eq!(result.outcome, RelocationOutcome::Relocated, "{result:?}");
    for id in &ids {
        assert_eq!(owner_of(r.host(3), id).await, r.rid(2), "{id} left wave a");
    }
    r.shutdown().await;
}

async fn a_disabled_type_blocks_the_relocate_before_anything_changes(h: &Harness) {
    let disabled = Spec {
        policy: Policy::Disable,
        ..server(1)
    };
    let r = Roots::start(h, &[disabled.clone(), disabled, client()]).await;
    let ids = r.counters_on(2, 0, 2, "dis").await;
    let mut observer = r.host(0).observe();
    let result = r
        .host(0)
        .relocate(RelocateOptions::planned_maintenance())
        .await
        .expect("valid");
    assert_eq!(result.reason, RelocationReason::RelocationDisabled);
    assert_eq!(r.host(0).state(), HostState::Serving);
    assert!(
        matches!(
            observer.try_next(),
            Some(HostEvent::State(HostState::Serving))
        ),
        "subscribed in Serving"
    );
    assert!(
        matches!(observer.try_next(), Some(HostEvent::Relocation(_))),
        "no state change before the blocked result"
    );
    for id in &ids {
        assert_eq!(owner_of(r.host(2), id).await, r.rid(0), "{id} stayed");
    }
    r.shutdown().await;
}

async fn same_options_share_one_operation_and_other_options_are_operation_in_progress(h: &Harness) {
    // No target: the operation waits out its deadline, long enough to race it.
    let r = Roots::start(h, &[server(1), client()]).await;
    r.counters_on(1, 0, 1, "cc").await;
    let host = r.host(0).clone();
    let first = tokio::spawn({
        let host = host.clone();
        async move {
            host.relocate(RelocateOptions::planned_maintenance().deadline(Duration::from_secs(1)))
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Joins the first; its own (longer) deadline is ignored.
    let joined = tokio::spawn({
        let host = host.clone();
        async move {
            host.relocate(RelocateOptions::planned_maintenance().deadline(Duration::from_secs(60)))
                .await
        }
    });
    let other = host
        .relocate(RelocateOptions::rolling_update(2))
        .await
        .expect("valid");
    assert_eq!(other.reason, RelocationReason::OperationInProgress);
    assert_eq!(other.target_version, 2);
    // A waiter that gives up ends only its own wait.
    let quitter = tokio::spawn({
        let host = host.clone();
        async move { host.relocate(RelocateOptions::planned_maintenance()).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    quitter.abort();
    let a = first.await.expect("task").expect("valid");
    let b = tokio::time::timeout(WAIT, joined)
        .await
        .expect("the joined call ends with the first one's deadline")
        .expect("task")
        .expect("valid");
    assert_eq!(a, b, "one operation, one terminal result");
    assert_eq!(a.reason, RelocationReason::TargetUnavailable);
    r.shutdown().await;
}

async fn shutdown_during_a_relocate_ends_it_with_shutdown_requested(h: &Harness) {
    let r = Roots::start(h, &[server(1), client()]).await;
    r.counters_on(1, 0, 1, "sd").await;
    let host = r.host(0).clone();
    let waiting = tokio::spawn({
        let host = host.clone();
        async move {
            host.relocate(RelocateOptions::planned_maintenance().deadline(Duration::from_secs(5)))
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let report = host.shutdown().await;
    let result = tokio::time::timeout(WAIT, waiting)
        .await
        .expect("the waiter ends")
        .expect("task")
        .expect("valid");
    assert_eq!(result.reason, RelocationReason::ShutdownRequested);
    assert_eq!(host.state(), HostState::Stopped);
    assert_eq!(
        host.status().shutdown.map(|s| s.outcome),
        Some(report.outcome)
    );
    // After the shutdown the host is `Stopped`: a Relocate is `Blocked/RuntimeNotReady`
    // (spec 28 §2), and a repeat shutdown is the same.
    let late = host
        .relocate(RelocateOptions::planned_maintenance())
        .await
        .expect("valid");
    assert_eq!(late.outcome, RelocationOutcome::Blocked);
    assert_eq!(late.reason, RelocationReason::RuntimeNotReady);
    r.shutdown().await;
}

async fn an_empty_host_is_relocated_without_a_target_search(h: &Harness) {
    let r = Roots::start(h, &[server(1), client()]).await;
    let result = r
        .host(0)
        .relocate(RelocateOptions::planned_maintenance().deadline(Duration::from_millis(200)))
        .await
        .expect("valid");
    assert_eq!(result.outcome, RelocationOutcome::Relocated);
    assert_eq!(result.moved, 0);
    assert_eq!(r.host(0).state(), HostState::Relocated);
    // Relocated: new objects are never placed here.
    let caller = r.host(1).actors().expect("manager");
    let err = caller
        .get_or_create("counter", "after")
        .await
        .expect_err("no other server");
    assert_ne!(
        err.kind(),
        crate::messaging::ErrorKind::InternalFailure,
        "{err}"
    );
    r.shutdown().await;
}

async fn a_registered_manual_peer_blocks_the_relocate(h: &Harness) {
    let r = Roots::start(h, &[server(1), server(1), client()]).await;
    r.counters_on(2, 0, 1, "mt").await;
    r.roots[0]
        .1
        .add_manual_peer("127.0.0.1:9", None)
        .expect("intent registered");
    let result = r
        .host(0)
        .relocate(RelocateOptions::planned_maintenance())
        .await
        .expect("valid");
    assert_eq!(result.reason, RelocationReason::ManualTopologyUnsupported);
    assert_eq!(r.host(0).state(), HostState::Serving, "admission untouched");
    assert!(r.roots[0].1.release_manual_peer("127.0.0.1:9"));
    let moved = r
        .host(0)
        .relocate(RelocateOptions::planned_maintenance())
        .await
        .expect("valid");
    assert_eq!(moved.outcome, RelocationOutcome::Relocated, "{moved:?}");
    r.shutdown().await;
}

async fn after_the_deadline_no_unit_starts_and_started_units_end_safely(h: &Harness) {
    // One unit at a time and a short deadline: the deadline falls while units remain.
    let r = one_unit_at_a_time(h).await;
    let ids = r.counters_on(2, 0, 24, "dl").await;
    let result = r
        .host(0)
        .relocate(RelocateOptions::planned_maintenance().deadline(Duration::from_millis(120)))
        .await
        .expect("valid");
    assert_eq!(result.moved + result.remaining, ids.len(), "{result:?}");
    if result.outcome == RelocationOutcome::Blocked {
        assert_eq!(
            result.reason,
            RelocationReason::DeadlineExceeded,
            "{result:?}"
        );
        assert_eq!(
            r.host(0).state(),
            HostState::Serving,
            "unmoved units serve on"
        );
    }
    // Every Actor answers exactly once more wherever it is, its state intact.
    let caller = r.host(2).actors().expect("manager");
    let mut here = 0;
    for id in &ids {
        assert_eq!(caller.request(id, &Incr).await.expect("served"), 2, "{id}");
        if owner_of(r.host(2), id).await == r.rid(0) {
            here += 1;
        }
    }
    assert_eq!(
        here, result.remaining,
        "what the result says is left is left"
    );
    r.shutdown().await;
}

async fn shutdown_after_relocated_leaves_the_moved_actors_serving(h: &Harness) {
    let r = Roots::start(h, &[server(1), server(1), client()]).await;
    let ids = r.counters_on(2, 0, 3, "sr").await;
    let result = r
        .host(0)
        .relocate(RelocateOptions::planned_maintenance())
        .await
        .expect("valid");
    assert!(result.is_relocated(), "{result:?}");
    shutdown_leaves_nothing_to_sweep(r.host(0), "no authority row was left to sweep").await;
    let caller = r.host(2).actors().expect("manager");
    for id in &ids {
        assert_eq!(caller.request(id, &Incr).await.expect("served"), 2);
        assert_eq!(owner_of(r.host(2), id).await, r.rid(1));
    }
    r.shutdown().await;
}

/// Issue 40 (a graceful leave helper): `leave` moves every Actor to the other server with its
/// state, then stops the host `Stopped` with nothing of its run left to sweep.
async fn a_leaving_host_moves_its_actors_away_then_stops(h: &Harness) {
    let r = Roots::start(h, &[server(1), server(1), client()]).await;
    let ids = r.counters_on(2, 0, 3, "lv").await;
    let report = r.host(0).leave(Duration::from_secs(30)).await;
    assert!(report.is_clean(), "{report:?}");
    let moved = report.relocation.as_ref().expect("valid");
    assert_eq!((moved.moved, moved.remaining), (3, 0), "{moved:?}");
    let sweep = report.shutdown.sweep.as_ref().expect("swept");
    assert_eq!(sweep.removed, 0, "nothing of the run was left: {sweep:?}");
    let caller = r.host(2).actors().expect("manager");
    for id in &ids {
        // The state came along: the count goes on from 1.
        assert_eq!(caller.request(id, &Incr).await.expect("served"), 2);
        assert_eq!(owner_of(r.host(2), id).await, r.rid(1));
    }
    r.shutdown().await;
}

/// A host that leaves with no eligible target (the other server is of another version)
/// reports the Relocate `Blocked/TargetUnavailable` and still stops `Stopped`; its Actors
/// were swept, so the next `get_or_create` makes each one new (count from 0).
async fn a_host_leaving_without_a_target_still_stops_and_its_actors_come_back_new(h: &Harness) {
    let r = Roots::start(h, &[server(1), server(2), client()]).await;
    let ids = r.counters_on(2, 0, 2, "ln").await;
    let report = r.host(0).leave(Duration::from_secs(5)).await;
    assert!(!report.is_clean(), "{report:?}");
    let blocked = report.relocation.as_ref().expect("valid");
    assert_eq!(
        blocked.reason,
        RelocationReason::TargetUnavailable,
        "{blocked:?}"
    );
    assert_eq!(blocked.remaining, 2, "{blocked:?}");
    assert_eq!(
        report.shutdown.outcome,
        ShutdownOutcome::Stopped,
        "{report:?}"
    );
    let caller = r.host(2).actors().expect("manager");
    for id in &ids {
        caller
            .get_or_create("counter", id)
            .await
            .expect("created again");
        assert_eq!(caller.request(id, &Incr).await.expect("served"), 1);
        assert_eq!(owner_of(r.host(2), id).await, r.rid(1));
    }
    r.shutdown().await;
}

/// A source, a target and a client whose relocations move one unit at a time.
async fn one_unit_at_a_time(h: &Harness) -> Roots {
    let options = WithRelocation(
        fast_options(),
        crate::objects::RelocationOptions::default().max_active_outbound(1),
    );
    Roots::start_with(h, &[server(1), server(1), client()], &options).await
}

async fn shutdown_during_the_moves_finishes_the_started_units_and_starts_no_other(h: &Harness) {
    let r = one_unit_at_a_time(h).await;
    let ids = r.counters_on(2, 0, 24, "sm").await;
    let mut observer = r.host(0).observe();
    let host = r.host(0).clone();
    let waiting =
        tokio::spawn(async move { host.relocate(RelocateOptions::planned_maintenance()).await });
    // Shut down as soon as the host is Relocating (units are moving one at a time).
    loop {
        match tokio::time::timeout(WAIT, observer.next()).await {
            Ok(Some(HostEvent::State(HostState::Relocating))) => break,
            Ok(Some(_)) => {}
            other => panic!("no Relocating state: {other:?}"),
        }
    }
    let report = r.host(0).shutdown().await;
    let result = tokio::time::timeout(WAIT, waiting)
        .await
        .expect("the waiter ends")
        .expect("task")
        .expect("valid");
    assert_eq!(
        result.reason,
        RelocationReason::ShutdownRequested,
        "{result:?}"
    );
    assert_eq!(
        report.abandoned, 0,
        "the started unit finished before the teardown"
    );
    // Every moved Actor serves from the target with its state; none is left half-moved: the
    // others ended with the source (their rows swept), and are gone.
    let caller = r.host(2).actors().expect("manager");
    let mut on_target = 0;
    for id in &ids {
        let found = caller.find(id).await.expect("find");
        if let Some(a) = found {
            assert_eq!(a.node, r.rid(1), "{id} is on the target or gone");
            assert_eq!(caller.request(id, &Incr).await.expect("served"), 2, "{id}");
            on_target += 1;
        }
    }
    assert_eq!(on_target, result.moved, "{result:?}");
    r.shutdown().await;
}

async fn an_unconfirmed_relocating_descriptor_rolls_back_to_serving_with_store_unavailable(
    h: &Harness,
) {
    let (m, faulty) = super::stages::faulty_mesh(h, fast_options()).await;
    let (caller, r) = m.counter_at_one("ud").await;
    let (source, _) = m.owner_and_other(&r);
    let i = usize::from(source.nodes()[0].routing_id() != m.servers[0].1.routing_id());
    // The usage projection of the new Actor is published first (polling interval 100 ms).
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The source's next descriptor write — its Relocating publication — fails before it
    // reaches the store; the rollback to Serving is confirmed (28 §8).
    faulty[i].fail_next_write_touching(
        source.descriptor_key(0),
        zlink_store_conformance::Fault::UNAVAILABLE,
    );
    let mut observer = source.observe();
    let result = source
        .relocate(RelocateOptions::planned_maintenance())
        .await
        .expect("valid");
    faulty[i].heal();
    assert_eq!(result.outcome, RelocationOutcome::Blocked);
    assert_eq!(
        result.reason,
        RelocationReason::StoreUnavailable,
        "{result:?}"
    );
    assert_eq!(result.moved, 0);
    assert_eq!(source.state(), HostState::Serving, "rolled back");
    let mut states = Vec::new();
    while let Some(e) = observer.try_next() {
        if let HostEvent::State(s) = e {
            states.push(s);
        }
    }
    assert_eq!(
        states,
        [
            HostState::Serving,
            HostState::Relocating,
            HostState::Serving
        ]
    );
    // The Actor never left and serves on; the stored descriptor still says serving.
    assert_eq!(caller.request("ud", &Incr).await.expect("served"), 2);
    assert_eq!(owner_of(&m.client.0, "ud").await, r.node);
    let stored = m
        .client
        .0
        .object_discovery(0)
        .refresh()
        .await
        .expect("list");
    let d = stored
        .nodes
        .iter()
        .find(|n| n.record.descriptor.routing_id == r.node)
        .expect("the source's descriptor");
    assert_eq!(d.record.descriptor.state, HostState::Serving);
    m.shutdown().await;
}

async fn a_relocated_host_refuses_node_direct_requests_and_keeps_its_connections(h: &Harness) {
    let (a, na) = start(h, |n| echo_node(n.object_role(ObjectRole::Server))).await;
    let (b, nb) = start(h, |n| echo_node(n.object_role(ObjectRole::Server))).await;
    wait_peers(&na, 1).await;
    wait_peers(&nb, 1).await;
    let echo = |text: &str| crate::host::tests::support::Echo { text: text.into() };
    assert_eq!(
        nb.request(na.routing_id(), &echo("hi"))
            .await
            .expect("served"),
        "hi"
    );
    let result = a
        .relocate(RelocateOptions::planned_maintenance())
        .await
        .expect("valid");
    assert!(result.is_relocated(), "{result:?}");
    let err = nb
        .request(na.routing_id(), &echo("again"))
        .await
        .expect_err("refused: no local owner");
    assert_eq!(
        err.kind(),
        crate::messaging::ErrorKind::Unavailable,
        "{err}"
    );
    // The relocated host still calls out, and its connection stays up.
    assert_eq!(
        na.request(nb.routing_id(), &echo("out"))
            .await
            .expect("served"),
        "out"
    );
    assert_eq!(na.status().peers.len(), 1);
    a.shutdown().await;
    b.shutdown().await;
}
