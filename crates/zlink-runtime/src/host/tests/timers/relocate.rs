//! A host Relocate under load carries every Actor's timer (spec 21 §1.2, §1.3): 1,000 Actors
//! each with a 50 ms periodic timer move from one node to another; per Actor no tick runs on
//! two nodes (all its ticks on the source come before all on the target, and a moved tick
//! count never repeats), and no gap between two ticks exceeds one period plus the longest
//! interruption the move measured plus a scheduling tolerance ([`TOLERANCE`]). Both policies.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zlink_codec::records::ObjectRole;
use zlink_store_spi::{DynRelocationStore, MemoryRelocationStore};

use super::{Log, Moves, Start, Ticker, ticker_type};
use crate::host::config::ZLink;
use crate::host::tests::support::*;
use crate::host::{RelocateOptions, RelocationOutcome, ZLinkHost};
use crate::mesh::node::MeshNode;
use zlink_testkit::Harness;

on_every_store!(
    a_host_relocate_moves_1000_periodic_timers_once_with_recreate_on_relocation,
    a_host_relocate_moves_1000_periodic_timers_once_with_preserve_state_with,
);

const ACTORS: usize = 1000;
const PERIOD: Duration = Duration::from_millis(50);
/// What the loaded test machine (two cores, shared) may add to a gap beyond one period and
/// the move's longest interruption.
const TOLERANCE: Duration = Duration::from_millis(300);

async fn server(
    h: &Harness,
    node: &'static str,
    log: &Log,
    preserve: bool,
) -> (ZLinkHost, MeshNode) {
    let relocation: Arc<dyn DynRelocationStore> = Arc::new(MemoryRelocationStore::new());
    let log = Arc::clone(log);
    let host = ZLink::builder()
        .location_store(Arc::clone(&h.store))
        .location_options(fast_options())
        .relocation_store(relocation)
        .route_mesh(mesh(), move |n| {
            n.object_role(ObjectRole::Server)
                .actor_type::<Ticker>("ticker", ticker_type(node, &log, moves(preserve), None))
        })
        .build()
        .start()
        .await
        .expect("the host starts");
    let n = host.node(&mesh()).expect("the node");
    (host, n)
}

fn moves(preserve: bool) -> Moves {
    if preserve {
        Moves::Preserve
    } else {
        Moves::Recreate
    }
}

async fn a_host_relocate_moves_1000_periodic_timers_once_with_recreate_on_relocation(h: &Harness) {
    moves_every_timer_once(h, false).await;
}

async fn a_host_relocate_moves_1000_periodic_timers_once_with_preserve_state_with(h: &Harness) {
    moves_every_timer_once(h, true).await;
}

/// One of these runs at a time in the test process (each is two hosts and 1,000 timers at
/// 20 ticks a second: run side by side on a shared two-core machine they starve each other).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn moves_every_timer_once(h: &Harness, preserve: bool) {
    let _alone = ONE_AT_A_TIME.lock().await;
    let log = Log::default();
    let (a, an) = server(h, "a", &log, preserve).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Every Actor is placed on `a`, the only Object Server so far.
    let actors = a.actors().expect("manager");
    let ids: Vec<String> = (0..ACTORS).map(|i| format!("tick-{i}")).collect();
    for chunk in ids.chunks(50) {
        let mut set = tokio::task::JoinSet::new();
        for id in chunk {
            let (actors, id) = (actors.clone(), id.clone());
            set.spawn(async move {
                actors.get_or_create("ticker", &id).await.expect("created");
                let start = Start {
                    name: "beat".into(),
                    period_ms: PERIOD.as_millis() as u64,
                    once: false,
                };
                actors.request(&id, &start).await.expect("timer started");
            });
        }
        while let Some(r) = set.join_next().await {
            r.expect("task");
        }
    }
    let (b, bn) = server(h, "b", &log, preserve).await;
    wait_peers(&an, 1).await;
    wait_peers(&bn, 1).await;
    tokio::time::sleep(Duration::from_millis(400)).await;

    let began = Instant::now();
    let result = a
        .relocate(RelocateOptions::planned_maintenance().deadline(Duration::from_secs(300)))
        .await
        .expect("relocate");
    let took = began.elapsed();
    assert_eq!(result.outcome, RelocationOutcome::Relocated, "{result:?}");
    assert_eq!(result.moved, ACTORS, "{result:?}");
    // Several periods on the target.
    tokio::time::sleep(PERIOD * 6).await;
    let log = log.lock().clone();

    let bound = PERIOD + result.interruption.max + TOLERANCE;
    let mut widest = Duration::ZERO;
    for id in &ids {
        let seen = log.get(id).unwrap_or_else(|| panic!("{id} never ticked"));
        let first_b = seen
            .iter()
            .position(|s| s.node == "b")
            .unwrap_or_else(|| panic!("{id} never ticked on the target"));
        assert!(first_b > 0, "{id} never ticked on the source");
        assert!(
            seen[first_b..].iter().all(|s| s.node == "b"),
            "{id} ticked on the source after the target: no tick on two nodes"
        );
        for w in seen.windows(2) {
            let gap = w[1].at.duration_since(w[0].at);
            widest = widest.max(gap);
            assert!(
                gap <= bound,
                "{id}: {gap:?} between two ticks ({} → {}), past one period + the longest \
                 interruption {:?} + {TOLERANCE:?}",
                w[0].node,
                w[1].node,
                result.interruption.max
            );
        }
        let counts: Vec<u64> = seen.iter().map(|s| s.n).collect();
        if preserve {
            // The count moved with the state: one sequence, never a tick counted twice.
            let expected: Vec<u64> = (1..=counts.len() as u64).collect();
            assert_eq!(counts, expected, "{id}: the ticks across the move");
        } else {
            let expected: Vec<u64> = (1..=first_b as u64)
                .chain(1..=(seen.len() - first_b) as u64)
                .collect();
            assert_eq!(counts, expected, "{id}: the ticks on each node");
        }
    }
    eprintln!(
        "{ACTORS} Actors with a {PERIOD:?} timer moved in {took:?} (preserve: {preserve}); \
         interruption p50 {:?} p99 {:?} max {:?}; widest gap between two ticks {widest:?}",
        result.interruption.p50, result.interruption.p99, result.interruption.max
    );
    b.shutdown().await;
    a.shutdown().await;
}
