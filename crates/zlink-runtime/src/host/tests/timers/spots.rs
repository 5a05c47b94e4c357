//! User Spot and Instance Spot timers: ticks reach `Spot::on_timer` as jobs of the Spot's own
//! activation, and a closed Spot ticks no more.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use zlink_codec::records::ObjectRole;
use zlink_store_spi::{DynRelocationStore, MemoryRelocationStore};

use crate::host::config::ZLink;
use crate::host::tests::support::*;
use crate::messaging::{BoxError, Message, Request};
use crate::objects::{Spot, SpotType, TimerContext};
use zlink_testkit::Harness;

on_every_store!(
    a_user_spot_timer_ticks_until_the_spot_is_closed,
    an_instance_spot_timer_started_by_its_factory_ticks,
    an_instance_spot_timer_moves_with_it_on_a_host_relocate,
    a_spot_wide_user_spot_timer_moves_with_its_aggregate_on_a_host_relocate,
);

/// A Spot counting its `beat` ticks in a shared counter.
struct Beacon(Arc<AtomicUsize>);
impl Spot for Beacon {
    async fn on_timer(&mut self, _ctx: TimerContext, name: &str) -> Result<(), BoxError> {
        if name == "beat" {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Ping;
impl Message for Ping {
    const PACKET: &'static str = "BeaconPing";
}
impl Request for Ping {
    type Reply = ();
}

/// A Beacon that does not move starts a 20 ms `beat` from its factory; one that moves
/// (`moves`: RecreateOnRelocation) starts it at its first `Ping`, so a `beat` on a move's
/// target can only be the carried one.
fn beacon(ticks: &Arc<AtomicUsize>) -> impl FnOnce(SpotType<Beacon>) -> SpotType<Beacon> {
    beacon_moving(ticks, false)
}

fn beacon_moving(
    ticks: &Arc<AtomicUsize>,
    moves: bool,
) -> impl FnOnce(SpotType<Beacon>) -> SpotType<Beacon> {
    let ticks = Arc::clone(ticks);
    move |t| {
        let t = t.factory(move |ctx| {
            let ticks = Arc::clone(&ticks);
            async move {
                if !moves {
                    ctx.timers()
                        .start_every("beat", Duration::from_millis(20))?;
                }
                Ok(Beacon(ticks))
            }
        });
        let t = if moves {
            t.recreate_on_relocation()
        } else {
            t.disable_relocation()
        };
        t.on_request::<Ping, _>(move |_b, _p, ctx| {
            Box::pin(async move {
                if moves && ctx.timers().names().is_empty() {
                    ctx.timers()
                        .start_every("beat", Duration::from_millis(20))?;
                }
                Ok(())
            })
        })
    }
}

async fn a_user_spot_timer_ticks_until_the_spot_is_closed(h: &Harness) {
    let ticks = Arc::new(AtomicUsize::new(0));
    let t = Arc::clone(&ticks);
    let (host, _n) = start(h, move |n| {
        n.object_role(ObjectRole::Server)
            .user_spot_type::<Beacon>("beacon", beacon(&t))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let spots = host.spots().expect("manager");
    let r = spots.create("beacon").await.expect("created");
    wait_until("the Spot ticks", || ticks.load(Ordering::SeqCst) >= 3).await;
    assert!(spots.close(&r).await.expect("close"));
    let after = ticks.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        ticks.load(Ordering::SeqCst),
        after,
        "a tick after the close"
    );
    host.shutdown().await;
}

async fn an_instance_spot_timer_started_by_its_factory_ticks(h: &Harness) {
    let ticks = Arc::new(AtomicUsize::new(0));
    let t = Arc::clone(&ticks);
    let relocation: Arc<dyn DynRelocationStore> = Arc::new(MemoryRelocationStore::new());
    let host = ZLink::builder()
        .location_store(Arc::clone(&h.store))
        .location_options(fast_options())
        .relocation_store(relocation)
        .route_mesh(mesh(), move |n| {
            n.object_role(ObjectRole::Server)
                .instance_spot_type::<Beacon>("beacon", beacon(&t))
        })
        .build()
        .start()
        .await
        .expect("the host starts");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let spots = host.spots().expect("manager");
    spots
        .instance("b1")
        .stable_type("beacon")
        .request(&Ping)
        .await
        .expect("activated by its first message");
    wait_until("the Instance Spot ticks", || {
        ticks.load(Ordering::SeqCst) >= 3
    })
    .await;
    host.shutdown().await;
    let after = ticks.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        ticks.load(Ordering::SeqCst),
        after,
        "a tick after the shutdown"
    );
}

async fn instance_server(h: &Harness, ticks: &Arc<AtomicUsize>) -> crate::host::ZLinkHost {
    spot_server(h, ticks, false).await
}

/// An Object Server whose `beacon` Spot type moves (RecreateOnRelocation): an Instance Spot,
/// or a `SpotWide` User Spot when `user`.
async fn spot_server(h: &Harness, ticks: &Arc<AtomicUsize>, user: bool) -> crate::host::ZLinkHost {
    let t = Arc::clone(ticks);
    let relocation: Arc<dyn DynRelocationStore> = Arc::new(MemoryRelocationStore::new());
    ZLink::builder()
        .location_store(Arc::clone(&h.store))
        .location_options(fast_options())
        .relocation_store(relocation)
        .route_mesh(mesh(), move |n| {
            let n = n.object_role(ObjectRole::Server);
            if user {
                n.user_spot_type::<Beacon>("beacon", beacon_moving(&t, true))
            } else {
                n.instance_spot_type::<Beacon>("beacon", beacon_moving(&t, true))
            }
        })
        .build()
        .start()
        .await
        .expect("the host starts")
}

/// The Instance Spot's timer (started by its first message on the source) moves with it: after
/// the host Relocate it ticks on the target only, once per period.
async fn an_instance_spot_timer_moves_with_it_on_a_host_relocate(h: &Harness) {
    let (on_a, on_b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let a = instance_server(h, &on_a).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let spots = a.spots().expect("manager");
    spots
        .instance("b2")
        .stable_type("beacon")
        .request(&Ping)
        .await
        .expect("activated on a");
    wait_until("it ticks on a", || on_a.load(Ordering::SeqCst) >= 3).await;
    let b = instance_server(h, &on_b).await;
    relocate_and_check_the_timer_moved(&a, &b, &on_a, &on_b).await;
}

/// A `SpotWide` User Spot moves as one aggregate unit: its timer travels in the aggregate's
/// Restore command and ticks on the target only.
async fn a_spot_wide_user_spot_timer_moves_with_its_aggregate_on_a_host_relocate(h: &Harness) {
    let (on_a, on_b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let a = spot_server(h, &on_a, true).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let spots = a.spots().expect("manager");
    let r = spots.create("beacon").await.expect("created on a");
    spots.request(r.id.as_str(), &Ping).await.expect("armed");
    wait_until("it ticks on a", || on_a.load(Ordering::SeqCst) >= 3).await;
    let b = spot_server(h, &on_b, true).await;
    relocate_and_check_the_timer_moved(&a, &b, &on_a, &on_b).await;
}

/// Relocates host `a` (one ticking object, counted in `on_a`) onto `b` and checks its timer
/// moved: no tick on the source after the move, and about 20 ticks of its 20 ms timer in the
/// next 400 ms on the target (none without the carried timer); then shuts both down.
async fn relocate_and_check_the_timer_moved(
    a: &crate::host::ZLinkHost,
    b: &crate::host::ZLinkHost,
    on_a: &AtomicUsize,
    on_b: &AtomicUsize,
) {
    wait_peers(&a.node(&mesh()).expect("node"), 1).await;
    wait_peers(&b.node(&mesh()).expect("node"), 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let result = a
        .relocate(crate::host::RelocateOptions::planned_maintenance())
        .await
        .expect("relocate");
    assert_eq!(result.moved, 1, "{result:?}");
    let a_after = on_a.load(Ordering::SeqCst);
    let b_at = on_b.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        on_a.load(Ordering::SeqCst),
        a_after,
        "a tick on the source after the move"
    );
    let b_ticks = on_b.load(Ordering::SeqCst) - b_at;
    assert!(
        (5..=30).contains(&b_ticks),
        "{b_ticks} ticks on the target in 400 ms"
    );
    b.shutdown().await;
    a.shutdown().await;
}
