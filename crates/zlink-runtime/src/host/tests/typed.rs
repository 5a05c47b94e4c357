//! Handlers written as `async fn`s in trait impls, and Actor and Spot handles typed by the
//! object's state type (issue 40).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::support::*;
use crate::MeshNodeBuilder;
use crate::handler::{Handles, NodeHandler, Receives};
use crate::objects::{Actor, Spot};
use crate::{Message, MessageContext, ZLink, ZLinkError, ZLinkHost};

/// A counter, registered as an Actor type and as a User Spot type.
struct Tally {
    n: u64,
}
impl Actor for Tally {}
impl Spot for Tally {}

#[derive(Debug, Serialize, Deserialize)]
struct Reset;
impl Message for Reset {
    const PACKET: &'static str = "Reset";
}

impl Handles<Incr> for Tally {
    async fn handle(&mut self, _: Incr, _: MessageContext) -> Result<u64, ZLinkError> {
        self.n += 1;
        Ok(self.n)
    }
}

impl Receives<Reset> for Tally {
    async fn receive(&mut self, _: Reset, _: MessageContext) -> Result<(), ZLinkError> {
        self.n = 0;
        Ok(())
    }
}

/// A started, ready Object Server root on a memory Location Store with the object types
/// `types` registers.
async fn serve(
    types: impl FnOnce(MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler>,
) -> ZLinkHost {
    let store: Arc<dyn zlink_store_spi::DynLocationStore> =
        Arc::new(zlink_store_spi::MemoryLocationStore::new());
    let host = ZLink::builder()
        .location_store(store)
        .route_mesh(mesh(), |b| {
            types(b.object_role(zlink_codec::records::ObjectRole::Server))
        })
        .build()
        .start()
        .await
        .expect("the host starts");
    host.ready(WAIT).await.expect("ready");
    host
}

#[tokio::test]
async fn trait_handlers_answer_through_a_handle_typed_by_the_actor() {
    let host = serve(|b| {
        b.actor_type::<Tally>("tally", |t| {
            t.factory(|_ctx| async { Ok(Tally { n: 0 }) })
                .disable_relocation()
                .handles::<Incr>()
                .receives::<Reset>()
        })
    })
    .await;
    let actors = host.actors().expect("manager");
    actors.get_or_create("tally", "t-1").await.expect("created");
    let t = actors.actor::<Tally>("t-1");
    assert_eq!(t.id(), "t-1");
    assert_eq!(t.request(&Incr).await.expect("incr"), 1);
    assert_eq!(t.request(&Incr).await.expect("incr"), 2);
    t.send(&Reset).await.expect("sent");
    // A one-way send and a later request from the same caller run in order.
    assert_eq!(t.request(&Incr).await.expect("incr"), 1);
    host.shutdown().await;
}

#[tokio::test]
async fn trait_handlers_answer_through_a_handle_typed_by_the_spot() {
    let host = serve(|b| {
        b.user_spot_type::<Tally>("board", |t| {
            t.factory(|_ctx| async { Ok(Tally { n: 0 }) })
                .disable_relocation()
                .handles::<Incr>()
                .receives::<Reset>()
        })
    })
    .await;
    let spots = host.spots().expect("manager");
    spots.get_or_create("board", "b-1").await.expect("created");
    let b = spots.spot::<Tally>("b-1");
    assert_eq!(b.id(), "b-1");
    assert_eq!(b.request(&Incr).await.expect("incr"), 1);
    assert_eq!(b.request(&Incr).await.expect("incr"), 2);
    b.send(&Reset).await.expect("sent");
    assert_eq!(b.request(&Incr).await.expect("incr"), 1);
    let err = spots
        .spot::<Tally>("b-2")
        .request(&Incr)
        .await
        .expect_err("no such Spot");
    assert_eq!(err.kind(), crate::ErrorKind::NotFound, "{err}");
    host.shutdown().await;
}

/// An Actor whose handler asks another Actor through its own context's manager.
struct Caller;
impl Actor for Caller {}

#[derive(Debug, Serialize, Deserialize)]
struct AskTally(String);
impl Message for AskTally {
    const PACKET: &'static str = "AskTally";
}
impl crate::Request for AskTally {
    type Reply = u64;
}

impl Handles<AskTally> for Caller {
    async fn handle(&mut self, ask: AskTally, ctx: MessageContext) -> Result<u64, ZLinkError> {
        let actors = ctx.actors()?;
        actors.get_or_create("tally", &ask.0).await?;
        actors.actor::<Tally>(ask.0).request(&Incr).await
    }
}

#[tokio::test]
async fn a_handler_calls_another_actor_through_its_context() {
    let host = serve(|b| {
        b.actor_type::<Tally>("tally", |t| {
            t.factory(|_ctx| async { Ok(Tally { n: 0 }) })
                .disable_relocation()
                .handles::<Incr>()
        })
        .actor_type::<Caller>("caller", |t| {
            t.factory(|_ctx| async { Ok(Caller) })
                .disable_relocation()
                .handles::<AskTally>()
        })
    })
    .await;
    let actors = host.actors().expect("manager");
    actors
        .get_or_create("caller", "c-1")
        .await
        .expect("created");
    let c = actors.actor::<Caller>("c-1");
    // The handler creates `t-1` on its first call and asks it each time.
    assert_eq!(c.request(&AskTally("t-1".into())).await.expect("asked"), 1);
    assert_eq!(c.request(&AskTally("t-1".into())).await.expect("asked"), 2);
    assert_eq!(
        actors
            .actor::<Tally>("t-1")
            .request(&Incr)
            .await
            .expect("incr"),
        3
    );
    host.shutdown().await;
}
