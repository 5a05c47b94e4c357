//! A periodic timer on a member Actor of a `PerActor` User Spot moved by a host Relocate (the
//! Spot authority transition, then the member as its own unit; 28 §6, 21 §1.2): the timer
//! moves with the member and keeps ticking on the target, and no tick runs on both nodes.

use std::sync::Arc;
use std::time::Duration;

use zlink_codec::records::ObjectRole;
use zlink_store_spi::{DynRelocationStore, MemoryRelocationStore};

use super::{Log, Moves, Ticker, start_every, ticker_type, ticks};
use crate::host::ZLinkHost;
use crate::host::config::ZLink;
use crate::host::tests::support::*;
use crate::objects::{Spot, SpotExecution};
use zlink_testkit::Harness;

on_every_store!(
    a_periodic_timer_on_an_actor_moved_by_a_per_actor_relocation_keeps_ticking_on_the_target_only,
);

/// A `PerActor` room (no state of its own).
struct Lobby;
impl Spot for Lobby {}

/// An Object Server labelled `node` with the `lobby` PerActor Spot type and the `ticker`
/// member type (RecreateOnRelocation), logging ticks into `log`.
async fn server(h: &Harness, node: &'static str, log: &Log) -> ZLinkHost {
    let log = Arc::clone(log);
    let relocation: Arc<dyn DynRelocationStore> = Arc::new(MemoryRelocationStore::new());
    ZLink::builder()
        .location_store(Arc::clone(&h.store))
        .location_options(fast_options())
        .relocation_store(relocation)
        .route_mesh(mesh(), move |n| {
            n.object_role(ObjectRole::Server)
                .user_spot_type::<Lobby>("lobby", |t| {
                    t.factory(|_ctx| async { Ok(Lobby) })
                        .execution(SpotExecution::PerActor)
                        .recreate_on_relocation()
                })
                .actor_type::<Ticker>("ticker", ticker_type(node, &log, Moves::Recreate, None))
        })
        .build()
        .start()
        .await
        .expect("the host starts")
}

async fn a_periodic_timer_on_an_actor_moved_by_a_per_actor_relocation_keeps_ticking_on_the_target_only(
    h: &Harness,
) {
    let log: Log = Default::default();
    let a = server(h, "a", &log).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let lobby = a
        .spots()
        .expect("spots")
        .create("lobby")
        .await
        .expect("lobby on a");
    let actors = a.actors().expect("actors");
    actors
        .get_or_create("ticker", "pa-t1")
        .in_spot(&lobby)
        .await
        .expect("member on a");
    let period = Duration::from_millis(20);
    actors
        .request("pa-t1", &start_every("beat", period))
        .await
        .expect("armed");
    wait_until("it ticks on a", || ticks(&log, "pa-t1", "beat").len() >= 3).await;

    let b = server(h, "b", &log).await;
    wait_peers(&a.node(&mesh()).expect("node"), 1).await;
    wait_peers(&b.node(&mesh()).expect("node"), 1).await;
    wait_discovered(&[&a, &b]).await;
    let result = a
        .relocate(crate::host::RelocateOptions::planned_maintenance())
        .await
        .expect("valid options");
    assert_eq!(
        result.outcome,
        crate::host::RelocationOutcome::Relocated,
        "{result:?}"
    );
    assert_eq!(
        result.moved, 2,
        "the Spot transition and the member: {result:?}"
    );
    let at_move = ticks(&log, "pa-t1", "beat").len();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let seen = ticks(&log, "pa-t1", "beat");
    // Every tick on the source comes before every tick on the target: none on both nodes.
    let first_b = seen.iter().position(|s| s.node == "b");
    let first_b = first_b.expect("the moved timer ticks on the target");
    assert!(
        seen[first_b..].iter().all(|s| s.node == "b"),
        "a tick on the source after one on the target: {:?}",
        seen.iter().map(|s| s.node).collect::<Vec<_>>()
    );
    let on_b = seen.len() - first_b;
    // 400 ms (+ the move) of one 20 ms timer: about 20 ticks on the target; a timer that did
    // not move would tick there zero times (RecreateOnRelocation starts none in the factory).
    assert!((5..=40).contains(&on_b), "{on_b} ticks on the target");
    assert!(
        seen.len() > at_move,
        "it kept ticking after the move ({at_move} before)"
    );
    // No gap between consecutive ticks beyond a period + the move's interruption + 300 ms.
    let worst = result.interruption.max;
    for w in seen.windows(2) {
        let gap = w[1].at - w[0].at;
        assert!(
            gap <= period + worst + Duration::from_millis(300),
            "a skipped tick: a gap of {gap:?}"
        );
    }
    b.shutdown().await;
    a.shutdown().await;
}
