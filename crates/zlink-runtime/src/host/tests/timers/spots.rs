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
use crate::messaging::{BoxError, BoxFuture, Message, Request};
use crate::objects::{Spot, SpotType, TimerContext};
use zlink_testkit::Harness;

on_every_store!(
    a_user_spot_timer_ticks_until_the_spot_is_closed,
    an_instance_spot_timer_started_by_its_factory_ticks,
);

/// A Spot counting its `beat` ticks in a shared counter.
struct Beacon(Arc<AtomicUsize>);
impl Spot for Beacon {
    fn on_timer<'a>(
        &'a mut self,
        _ctx: TimerContext,
        name: &'a str,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        if name == "beat" {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        Box::pin(async { Ok(()) })
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

/// Every Beacon starts a 20 ms `beat` from its factory.
fn beacon(ticks: &Arc<AtomicUsize>) -> impl FnOnce(SpotType<Beacon>) -> SpotType<Beacon> {
    let ticks = Arc::clone(ticks);
    move |t| {
        t.factory(move |ctx| {
            let ticks = Arc::clone(&ticks);
            async move {
                ctx.timers()
                    .start_every("beat", Duration::from_millis(20))?;
                Ok(Beacon(ticks))
            }
        })
        .disable_relocation()
        .on_request::<Ping, _>(|_b, _p, _ctx| Box::pin(async { Ok(()) }))
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
