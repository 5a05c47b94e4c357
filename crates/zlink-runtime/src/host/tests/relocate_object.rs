//! `ZLinkHost::relocate_object`: one Actor or Spot moved on purpose through the unit a host
//! Relocate runs for it, on every policy, and refused targets (typed error, the object still
//! served by its owner).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};
use zlink_codec::RoutingId;
use zlink_codec::records::{HostState, ObjectRole};
use zlink_store_spi::{DynRelocationStore, MemoryRelocationStore};

use super::support::*;
use crate::host::config::ZLink;
use crate::host::{ObjectTarget, ObjectToMove, ZLinkHost};
use crate::messaging::{
    BoxError, ErrorKind, InvalidCall, Message, ObjectRelocationRefusal, Request, ZLinkError,
};
use crate::objects::{Actor, ActorStateAdapter, Spot, SpotExecution, SpotStateAdapter};
use zlink_testkit::Harness;

on_every_store!(
    a_recreate_actor_moves_to_the_named_node_and_starts_fresh,
    a_preserve_actor_moves_to_any_eligible_node_with_its_state,
    a_spot_wide_user_spot_moves_with_its_members_and_their_state,
    a_per_actor_user_spot_moves_with_each_member,
    an_instance_spot_moves_with_its_state,
    a_refused_target_is_a_typed_error_and_the_actor_is_still_served_by_its_owner,
    a_disabled_type_or_a_member_alone_is_refused_and_keeps_serving,
    an_actor_created_again_on_its_former_owner_within_the_follow_window_is_served_there,
    an_actor_moved_away_moves_back_within_the_follow_window,
);

/// A counter: `Bump` adds one and answers the count and the RID of the node that ran it.
#[derive(Default)]
struct Tally {
    n: u64,
}
impl Actor for Tally {}
impl Spot for Tally {}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Bump;
impl Message for Bump {
    const PACKET: &'static str = "Bump";
}
impl Request for Bump {
    type Reply = (u64, String);
}

struct TallyAdapter;
impl ActorStateAdapter<Tally> for TallyAdapter {
    fn capture(&self, t: &Tally) -> Result<Vec<u8>, BoxError> {
        Ok(t.n.to_be_bytes().to_vec())
    }
    fn restore(&self, bytes: &[u8]) -> Result<Tally, BoxError> {
        Ok(Tally {
            n: u64::from_be_bytes(bytes.try_into()?),
        })
    }
}
impl SpotStateAdapter<Tally> for TallyAdapter {
    fn capture(&self, t: &Tally) -> Result<Vec<u8>, BoxError> {
        Ok(t.n.to_be_bytes().to_vec())
    }
    fn restore(&self, bytes: &[u8]) -> Result<Tally, BoxError> {
        Ok(Tally {
            n: u64::from_be_bytes(bytes.try_into()?),
        })
    }
}

fn bump(t: &mut Tally, ctx: &crate::objects::MessageContext) -> (u64, String) {
    t.n += 1;
    let node = ctx.routing_id().map(RoutingId::to_hex).unwrap_or_default();
    (t.n, node)
}

/// A root with one Object Server of: `fresh` (RecreateOnRelocation Actor), `kept`
/// (PreserveStateWith Actor), `pinned` (DisableRelocation Actor), `hall` (SpotWide User
/// Spot), `lobby` (PerActor User Spot) and `desk` (Instance Spot), every factory run counted.
pub(super) async fn server(h: &Harness, factories: &Arc<AtomicUsize>) -> ZLinkHost {
    let relocation: Arc<dyn DynRelocationStore> = Arc::new(MemoryRelocationStore::new());
    let f = Arc::clone(factories);
    ZLink::builder()
        .location_store(Arc::clone(&h.store))
        .relocation_store(relocation)
        .location_options(fast_options())
        .route_mesh(mesh(), move |n| {
            let counted = move |f: &Arc<AtomicUsize>| {
                let f = Arc::clone(f);
                move |_ctx| {
                    f.fetch_add(1, Ordering::SeqCst);
                    async { Ok(Tally::default()) }
                }
            };
            n.object_role(ObjectRole::Server)
                .actor_type::<Tally>("fresh", |t| {
                    t.factory(counted(&f))
                        .recreate_on_relocation()
                        .on_request::<Bump, _>(|t, _b, ctx| {
                            let out = bump(t, &ctx);
                            Box::pin(async move { Ok(out) })
                        })
                })
                .actor_type::<Tally>("kept", |t| {
                    t.factory(counted(&f))
                        .preserve_state_with(TallyAdapter)
                        .on_request::<Bump, _>(|t, _b, ctx| {
                            let out = bump(t, &ctx);
                            Box::pin(async move { Ok(out) })
                        })
                })
                .actor_type::<Tally>("pinned", |t| {
                    t.factory(counted(&f))
                        .disable_relocation()
                        .on_request::<Bump, _>(|t, _b, ctx| {
                            let out = bump(t, &ctx);
                            Box::pin(async move { Ok(out) })
                        })
                })
                .user_spot_type::<Tally>("hall", |t| {
                    t.factory(counted(&f))
                        .execution(SpotExecution::SpotWide)
                        .preserve_state_with(TallyAdapter)
                        .on_request::<Bump, _>(|t, _b, ctx| {
                            let out = bump(t, &ctx);
                            Box::pin(async move { Ok(out) })
                        })
                })
                .user_spot_type::<Tally>("lobby", |t| {
                    t.factory(counted(&f))
                        .execution(SpotExecution::PerActor)
                        .preserve_state_with(TallyAdapter)
                        .on_request::<Bump, _>(|t, _b, ctx| {
                            let out = bump(t, &ctx);
                            Box::pin(async move { Ok(out) })
                        })
                })
                .instance_spot_type::<Tally>("desk", |t| {
                    t.factory(counted(&f))
                        .preserve_state_with(TallyAdapter)
                        .on_request::<Bump, _>(|t, _b, ctx| {
                            let out = bump(t, &ctx);
                            Box::pin(async move { Ok(out) })
                        })
                })
        })
        .build()
        .start()
        .await
        .expect("the host starts")
}

/// Two Object Servers that see each other as Ready peers and as listed relocation targets.
pub(super) struct Pair {
    pub(super) hosts: [ZLinkHost; 2],
    factories: Arc<AtomicUsize>,
}

/// Waits until the two servers `hosts` are peers and each lists both Serving (placement and
/// a move's target choice read that list).
pub(super) async fn wait_pair_serving(hosts: [&ZLinkHost; 2]) {
    for host in hosts {
        wait_peers(&host.node(&mesh()).expect("node"), 1).await;
    }
    for (i, host) in hosts.into_iter().enumerate() {
        let d = host.object_discovery(0);
        wait_until(&format!("server {i} lists both servers Serving"), || {
            d.last_list()
                .unwrap_or_default()
                .iter()
                .filter(|n| n.record.descriptor.state == HostState::Serving)
                .count()
                >= 2
        })
        .await;
    }
}

impl Pair {
    pub(super) async fn start(h: &Harness) -> Self {
        let factories = Arc::new(AtomicUsize::new(0));
        let a = server(h, &factories).await;
        let b = server(h, &factories).await;
        wait_pair_serving([&a, &b]).await;
        Self {
            hosts: [a, b],
            factories,
        }
    }

    pub(super) fn rid(&self, i: usize) -> RoutingId {
        self.hosts[i].nodes()[0].routing_id().clone()
    }

    /// The index of the host whose node is `rid`.
    pub(super) fn index_of(&self, rid: &RoutingId) -> usize {
        usize::from(self.rid(1) == *rid)
    }

    pub(super) async fn shutdown(self) {
        let [a, b] = &self.hosts;
        stop_all(&[a, b]).await;
    }
}

/// The error's refusal reason, if it is an `ObjectRelocation` refusal.
fn refusal(e: &ZLinkError) -> Option<ObjectRelocationRefusal> {
    match e {
        ZLinkError::InvalidCall(InvalidCall::ObjectRelocation { reason }) => Some(*reason),
        _ => None,
    }
}

async fn a_recreate_actor_moves_to_the_named_node_and_starts_fresh(h: &Harness) {
    let p = Pair::start(h).await;
    let actors = p.hosts[0].actors().expect("manager");
    let actor = actors.get_or_create("fresh", "f1").await.expect("created");
    for _ in 0..3 {
        actors.request("f1", &Bump).await.expect("bump");
    }
    let from = p.index_of(&actor.node);
    let to = 1 - from;
    let before = p.factories.load(Ordering::SeqCst);
    let moved = p.hosts[from]
        .relocate_object(actor.clone(), ObjectTarget::Node(p.rid(to)))
        .await
        .expect("the Actor moves");
    assert_eq!(moved.target, p.rid(to));
    assert_eq!(moved.moved, 1);
    assert_eq!(
        p.factories.load(Ordering::SeqCst),
        before + 1,
        "RecreateOnRelocation builds a new instance on the target"
    );
    let (n, ran_on) = actors
        .request("f1", &Bump)
        .await
        .expect("served on the target");
    assert_eq!(n, 1, "a recreated Actor starts from its factory state");
    assert_eq!(
        ran_on,
        p.rid(to).to_hex(),
        "the handler says it runs on the target"
    );
    let now = actors.find("f1").await.expect("find").expect("ready");
    assert_eq!(now.node, p.rid(to));
    assert_eq!(
        p.hosts[from].state(),
        HostState::Serving,
        "the source host serves on"
    );
    p.shutdown().await;
}

async fn a_preserve_actor_moves_to_any_eligible_node_with_its_state(h: &Harness) {
    let p = Pair::start(h).await;
    let actors = p.hosts[0].actors().expect("manager");
    let actor = actors.get_or_create("kept", "k1").await.expect("created");
    for _ in 0..5 {
        actors.request("k1", &Bump).await.expect("bump");
    }
    let from = p.index_of(&actor.node);
    let moved = p.hosts[from]
        .relocate_object(actor, ObjectTarget::AnyEligible)
        .await
        .expect("the Actor moves");
    assert_eq!(moved.target, p.rid(1 - from), "the only other server");
    let (n, ran_on) = actors
        .request("k1", &Bump)
        .await
        .expect("served on the target");
    assert_eq!(n, 6, "PreserveStateWith carries the state");
    assert_eq!(ran_on, moved.target.to_hex());
    p.shutdown().await;
}

async fn a_spot_wide_user_spot_moves_with_its_members_and_their_state(h: &Harness) {
    let p = Pair::start(h).await;
    let spots = p.hosts[0].spots().expect("spots");
    let actors = p.hosts[0].actors().expect("actors");
    let hall = spots.get_or_create("hall", "hall-1").await.expect("hall");
    actors
        .create("kept", "hall-m1")
        .in_spot(&hall)
        .await
        .expect("member");
    spots.request("hall-1", &Bump).await.expect("bump hall");
    actors.request("hall-m1", &Bump).await.expect("bump member");
    actors.request("hall-m1", &Bump).await.expect("bump member");
    let from = p.index_of(&hall.node);
    let moved = p.hosts[from]
        .relocate_object(hall, ObjectTarget::Node(p.rid(1 - from)))
        .await
        .expect("the hall moves");
    assert_eq!(moved.moved, 1, "one aggregate unit");
    let (n, on) = spots.request("hall-1", &Bump).await.expect("hall served");
    assert_eq!((n, on), (2, p.rid(1 - from).to_hex()));
    let (n, on) = actors
        .request("hall-m1", &Bump)
        .await
        .expect("member served");
    assert_eq!(
        (n, on),
        (3, p.rid(1 - from).to_hex()),
        "the member moved with it"
    );
    p.shutdown().await;
}

async fn a_per_actor_user_spot_moves_with_each_member(h: &Harness) {
    let p = Pair::start(h).await;
    let spots = p.hosts[0].spots().expect("spots");
    let actors = p.hosts[0].actors().expect("actors");
    let lobby = spots
        .get_or_create("lobby", "lobby-1")
        .await
        .expect("lobby");
    for m in ["lobby-m1", "lobby-m2"] {
        actors
            .create("kept", m)
            .in_spot(&lobby)
            .await
            .expect("member");
        actors.request(m, &Bump).await.expect("bump member");
    }
    let from = p.index_of(&lobby.node);
    let moved = p.hosts[from]
        .relocate_object(lobby, ObjectTarget::AnyEligible)
        .await
        .expect("the lobby moves");
    assert_eq!(moved.moved, 3, "the Spot's authority and each member");
    for m in ["lobby-m1", "lobby-m2"] {
        let (n, on) = actors.request(m, &Bump).await.expect("member served");
        assert_eq!((n, on), (2, moved.target.to_hex()), "{m}");
    }
    let (_, on) = spots.request("lobby-1", &Bump).await.expect("lobby served");
    assert_eq!(on, moved.target.to_hex());
    p.shutdown().await;
}

async fn an_instance_spot_moves_with_its_state(h: &Harness) {
    let p = Pair::start(h).await;
    let spots = p.hosts[0].spots().expect("spots");
    let bump_desk = || async {
        spots
            .instance("desk-1")
            .stable_type("desk")
            .request(&Bump)
            .await
    };
    bump_desk().await.expect("first");
    bump_desk().await.expect("second");
    let desk = spots.find("desk-1").await.expect("find").expect("ready");
    let from = p.index_of(&desk.node);
    let moved = p.hosts[from]
        .relocate_object(ObjectToMove::Spot(desk), ObjectTarget::AnyEligible)
        .await
        .expect("the desk moves");
    assert_eq!(moved.moved, 1);
    let (n, on) = bump_desk().await.expect("served on the target");
    assert_eq!((n, on), (3, moved.target.to_hex()));
    p.shutdown().await;
}

async fn a_refused_target_is_a_typed_error_and_the_actor_is_still_served_by_its_owner(h: &Harness) {
    let p = Pair::start(h).await;
    let actors = p.hosts[0].actors().expect("manager");
    let actor = actors.get_or_create("kept", "r1").await.expect("created");
    actors.request("r1", &Bump).await.expect("bump");
    let from = p.index_of(&actor.node);
    let owner = &p.hosts[from];
    let stranger = RoutingId::new(vec![0xee; 16]).expect("rid");
    let cases = [
        (
            ObjectTarget::Node(p.rid(from)),
            ObjectRelocationRefusal::TargetIsThisNode,
        ),
        (
            ObjectTarget::Node(stranger),
            ObjectRelocationRefusal::TargetNotEligible,
        ),
    ];
    for (target, want) in cases {
        let e = owner
            .relocate_object(actor.clone(), target)
            .await
            .expect_err("refused");
        assert_eq!(refusal(&e), Some(want), "{e}");
        assert_eq!(e.kind(), ErrorKind::InvalidOperation);
    }
    // From the host that does not own it: not live there.
    let e = p.hosts[1 - from]
        .relocate_object(actor.clone(), ObjectTarget::AnyEligible)
        .await
        .expect_err("refused");
    assert_eq!(refusal(&e), Some(ObjectRelocationRefusal::NotLiveHere));
    let (n, on) = actors.request("r1", &Bump).await.expect("still served");
    assert_eq!(
        (n, on),
        (2, p.rid(from).to_hex()),
        "by its owner, state kept"
    );
    p.shutdown().await;
}

async fn a_disabled_type_or_a_member_alone_is_refused_and_keeps_serving(h: &Harness) {
    let p = Pair::start(h).await;
    let actors = p.hosts[0].actors().expect("actors");
    let spots = p.hosts[0].spots().expect("spots");
    let pinned = actors.get_or_create("pinned", "p1").await.expect("created");
    let from = p.index_of(&pinned.node);
    let e = p.hosts[from]
        .relocate_object(pinned, ObjectTarget::AnyEligible)
        .await
        .expect_err("refused");
    assert_eq!(
        refusal(&e),
        Some(ObjectRelocationRefusal::RelocationDisabled)
    );
    let hall = spots.get_or_create("hall", "hall-2").await.expect("hall");
    let member = actors
        .create("kept", "hall-2-m")
        .in_spot(&hall)
        .await
        .expect("member");
    let e = p.hosts[p.index_of(&member.node)]
        .relocate_object(member, ObjectTarget::AnyEligible)
        .await
        .expect_err("refused");
    assert_eq!(refusal(&e), Some(ObjectRelocationRefusal::MovesWithSpot));
    let (_, on) = actors.request("p1", &Bump).await.expect("served");
    assert_eq!(on, p.rid(from).to_hex());
    let (_, on) = actors.request("hall-2-m", &Bump).await.expect("served");
    assert_eq!(on, hall.node.to_hex());
    p.shutdown().await;
}

/// An Actor moves from one node to the other; the target shuts down (its sweep removes the
/// record) while the former owner still follows the Actor's messages to it (the 30 s Message
/// Follow window). The Actor is created again on the former owner: its calls there run on the
/// new activation (count 1, this node), not forwarded by the old follow to a node that no
/// longer holds it (seed 47 of the simulation's moves: every call of that node failed
/// `Unavailable` until the window ended).
async fn an_actor_created_again_on_its_former_owner_within_the_follow_window_is_served_there(
    h: &Harness,
) {
    let p = Pair::start(h).await;
    let first = p.hosts[0].actors().expect("manager");
    let actor = first.get_or_create("fresh", "f1").await.expect("created");
    let from = p.index_of(&actor.node);
    let to = 1 - from;
    p.hosts[from]
        .relocate_object(actor.clone(), ObjectTarget::Node(p.rid(to)))
        .await
        .expect("the Actor moves");
    let actors = p.hosts[from].actors().expect("manager");
    let (n, ran_on) = actors.request("f1", &Bump).await.expect("followed");
    assert_eq!((n, ran_on), (1, p.rid(to).to_hex()));

    stop_all(&[&p.hosts[to]]).await;
    let d = p.hosts[from].object_discovery(0);
    wait_until("the former owner lists only itself", || {
        d.last_list()
            .unwrap_or_default()
            .iter()
            .filter(|n| n.record.descriptor.state == HostState::Serving)
            .count()
            == 1
    })
    .await;
    let again = actors
        .get_or_create("fresh", "f1")
        .await
        .expect("created again");
    assert_eq!(again.node, p.rid(from));
    assert!(
        again.generation > actor.generation,
        "{again:?} after {actor:?}"
    );
    for expected in 1..=3 {
        let (n, ran_on) = actors
            .request("f1", &Bump)
            .await
            .expect("served on the former owner");
        assert_eq!((n, ran_on), (expected, p.rid(from).to_hex()));
    }
    stop_all(&[&p.hosts[from]]).await;
}

/// An Actor moves from one node to the other and straight back, while the first node still
/// follows its calls to the second (the 30 s Message Follow window): the move back is made
/// and the Actor is served on the first node again.
async fn an_actor_moved_away_moves_back_within_the_follow_window(h: &Harness) {
    let p = Pair::start(h).await;
    let actors = p.hosts[0].actors().expect("manager");
    let actor = actors.get_or_create("kept", "k1").await.expect("created");
    let from = p.index_of(&actor.node);
    let to = 1 - from;
    actors.request("k1", &Bump).await.expect("bump");
    p.hosts[from]
        .relocate_object(actor.clone(), ObjectTarget::Node(p.rid(to)))
        .await
        .expect("the Actor moves");
    let there = actors.find("k1").await.expect("find").expect("ready");
    assert_eq!(there.node, p.rid(to));
    let back = p.hosts[to]
        .relocate_object(there, ObjectTarget::Node(p.rid(from)))
        .await
        .expect("the Actor moves back");
    assert_eq!(back.target, p.rid(from));
    let (n, ran_on) = actors.request("k1", &Bump).await.expect("served");
    assert_eq!((n, ran_on), (2, p.rid(from).to_hex()));
    p.shutdown().await;
}
