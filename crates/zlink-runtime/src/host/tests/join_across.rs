//! Cross-node Actor JoinSpot / JoinEntrySpot (spec 21 §1.3, §8.2; 06 §11): the Actor moves to
//! the joined Spot's node under its own relocation policy, and the target's one owner change
//! writes its owner, capacity and membership together; `DisableRelocation` is refused before
//! anything changes; `join_entry_spot` / `join_entry_spot_on` put it back in an Entry Spot.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use zlink_codec::records::{ObjectKind, ObjectRole};
use zlink_codec::{ObjectId, RoutingId};
use zlink_location::{AuthorityHandle, AuthorityRead};
use zlink_store_spi::{DynRelocationStore, MemoryRelocationStore};

use super::support::*;
use crate::host::ZLinkHost;
use crate::host::config::ZLink;
use crate::messaging::{
    BoxError, ErrorKind, InvalidCall, Message, MoveRefusal, Request, ZLinkError,
};
use crate::objects::membership::Membership;
use crate::objects::{Actor, ActorRef, ActorStateAdapter, Spot, SpotExecution, SpotRef};
use zlink_testkit::Harness;

on_every_store!(
    a_cross_node_join_moves_a_preserve_actor_to_the_spots_node_with_its_state_membership_and_capacity,
    a_cross_node_join_of_a_recreate_actor_builds_a_fresh_instance_on_the_spots_node,
    a_cross_node_join_to_a_spot_wide_spot_runs_the_moved_actor_under_the_spots_turn,
    a_disabled_actor_cross_node_join_is_refused_before_capture_with_the_store_unchanged,
    join_entry_spot_puts_a_member_back_in_its_nodes_entry_spot_and_keeps_the_activation,
    join_entry_spot_on_another_node_moves_the_actor_into_that_nodes_entry_spot,
    a_spot_wide_member_does_not_join_across_nodes_alone_and_nothing_changes,
);

/// Each server's Message Follow window.
const FOLLOW: Duration = Duration::from_millis(300);

/// A Spot whose `Hold` stays inside its turn until the gate opens.
struct Room {
    busy: Arc<AtomicBool>,
    gate: Gate,
}
impl Spot for Room {}

/// An Actor counting its `Peek`s.
struct Walker {
    busy: Arc<AtomicBool>,
    n: u64,
}
impl Actor for Walker {}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Hold;
impl Message for Hold {
    const PACKET: &'static str = "Hold";
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Peek;
impl Message for Peek {
    const PACKET: &'static str = "Peek";
}
impl Request for Peek {
    /// Whether a Spot was inside its turn when the Actor ran, its count, and its node (hex).
    type Reply = (bool, u64, String);
}

/// Captures and restores a Walker's count (its busy flag comes from the adapter).
struct WalkerAdapter(Arc<AtomicBool>);
impl ActorStateAdapter<Walker> for WalkerAdapter {
    fn capture(&self, w: &Walker) -> Result<Vec<u8>, BoxError> {
        Ok(w.n.to_be_bytes().to_vec())
    }
    fn restore(&self, bytes: &[u8]) -> Result<Walker, BoxError> {
        Ok(Walker {
            busy: Arc::clone(&self.0),
            n: u64::from_be_bytes(bytes.try_into()?),
        })
    }
}

/// What every server of a test shares.
#[derive(Clone)]
pub(super) struct Shared {
    pub(super) busy: Arc<AtomicBool>,
    pub(super) gate: Gate,
    factories: Arc<AtomicUsize>,
}

/// An Object Server of `hall` (SpotWide), `lobby` (PerActor) and `parlor` (PerActor,
/// RecreateOnRelocation) User Spots, and `kept`
/// (PreserveStateWith), `fresh` (RecreateOnRelocation) and `pinned` (DisableRelocation) Actors.
async fn server(h: &Harness, s: &Shared) -> ZLinkHost {
    let relocation: Arc<dyn DynRelocationStore> = Arc::new(MemoryRelocationStore::new());
    let s = s.clone();
    ZLink::builder()
        .location_store(Arc::clone(&h.store))
        .relocation_store(relocation)
        // A short follow window: a move back to a previous owner waits for its follow to end.
        .location_options(
            fast_options()
                .route_cache_max_age(Duration::ZERO)
                .message_follow_duration(FOLLOW),
        )
        .route_mesh(mesh(), move |mut n| {
            n = n.object_role(ObjectRole::Server);
            for (ty, mode, movable) in [
                ("hall", SpotExecution::SpotWide, false),
                ("lobby", SpotExecution::PerActor, false),
                ("parlor", SpotExecution::PerActor, true),
            ] {
                let (busy, gate) = (Arc::clone(&s.busy), s.gate.clone());
                n = n.user_spot_type::<Room>(ty, move |t| {
                    let t = t
                        .factory(move |_ctx| {
                            let (busy, gate) = (Arc::clone(&busy), gate.clone());
                            async move { Ok(Room { busy, gate }) }
                        })
                        .execution(mode);
                    let t = if movable {
                        t.recreate_on_relocation()
                    } else {
                        t.disable_relocation()
                    };
                    t.on_send::<Hold, _>(|r, _hold, _ctx| {
                        Box::pin(async move {
                            r.busy.store(true, Ordering::SeqCst);
                            r.gate.pass().await;
                            r.busy.store(false, Ordering::SeqCst);
                            Ok(())
                        })
                    })
                });
            }
            for ty in ["kept", "fresh", "pinned"] {
                let (busy, factories) = (Arc::clone(&s.busy), Arc::clone(&s.factories));
                let adapter = WalkerAdapter(Arc::clone(&s.busy));
                n = n.actor_type::<Walker>(ty, move |t| {
                    let t = t.factory(move |_ctx| {
                        factories.fetch_add(1, Ordering::SeqCst);
                        let busy = Arc::clone(&busy);
                        async move { Ok(Walker { busy, n: 0 }) }
                    });
                    let t = match ty {
                        "kept" => t.preserve_state_with(adapter),
                        "fresh" => t.recreate_on_relocation(),
                        _ => t.disable_relocation(),
                    };
                    t.on_request::<Peek, _>(|w, _peek, ctx| {
                        w.n += 1;
                        let node = ctx.routing_id().map(RoutingId::to_hex).unwrap_or_default();
                        let out = (w.busy.load(Ordering::SeqCst), w.n, node);
                        Box::pin(async move { Ok(out) })
                    })
                });
            }
            n
        })
        .build()
        .start()
        .await
        .expect("the host starts")
}

/// Two such servers that see each other as Ready peers and listed relocation targets.
pub(super) struct Pair {
    pub(super) hosts: [ZLinkHost; 2],
    pub(super) shared: Shared,
}

impl Pair {
    pub(super) async fn start(h: &Harness) -> Self {
        let shared = Shared {
            busy: Arc::new(AtomicBool::new(false)),
            gate: Gate::new(),
            factories: Arc::new(AtomicUsize::new(0)),
        };
        let a = server(h, &shared).await;
        let b = server(h, &shared).await;
        super::relocate_object::wait_pair_serving([&a, &b]).await;
        Self {
            hosts: [a, b],
            shared,
        }
    }

    pub(super) fn rid(&self, i: usize) -> RoutingId {
        self.hosts[i].nodes()[0].routing_id().clone()
    }

    /// The host whose node is `rid`.
    pub(super) fn on(&self, rid: &RoutingId) -> &ZLinkHost {
        &self.hosts[usize::from(self.rid(1) == *rid)]
    }

    /// A new Actor of `ty` and a new Spot of `spot_type` on the other node.
    pub(super) async fn actor_and_spot_elsewhere(
        &self,
        ty: &str,
        id: &str,
        spot_type: &str,
    ) -> (ActorRef, SpotRef) {
        let actor = self.hosts[0]
            .actors()
            .expect("actors")
            .get_or_create(ty, id)
            .await
            .expect("actor");
        let spots = self.hosts[0].spots().expect("spots");
        for _ in 0..40 {
            let s = spots.create(spot_type).await.expect("spot");
            if s.node != actor.node {
                return (actor, s);
            }
        }
        panic!("no {spot_type} Spot was placed on the other node");
    }

    /// The (active, reserved) Actor slots of node `rid`.
    pub(super) async fn actor_slots(&self, rid: &RoutingId) -> (u64, u64) {
        let rows = self.on(rid).object_capacity().await.expect("capacity");
        let (_, _, usage) = rows.into_iter().next().expect("one object node");
        (usage.actors.active, usage.actors.reserved)
    }

    pub(super) async fn shutdown(self) {
        let [a, b] = &self.hosts;
        self.shared.gate.open();
        stop_all(&[a, b]).await;
    }
}

/// The Actor `id`'s record.
pub(super) async fn record(host: &ZLinkHost, id: &str) -> AuthorityHandle {
    let read = host
        .object_host(0)
        .location
        .authority()
        .read(ObjectKind::Actor, &ObjectId::new(id).expect("id"))
        .await
        .expect("read");
    let AuthorityRead::Found { handle, .. } = read else {
        panic!("no record for {id}");
    };
    handle
}

async fn a_cross_node_join_moves_a_preserve_actor_to_the_spots_node_with_its_state_membership_and_capacity(
    h: &Harness,
) {
    let p = Pair::start(h).await;
    let (actor, lobby) = p.actor_and_spot_elsewhere("kept", "k1", "lobby").await;
    let actors = p.hosts[0].actors().expect("actors");
    for _ in 0..3 {
        actors.request("k1", &Peek).await.expect("peek");
    }
    let (from, to) = (actor.node.clone(), lobby.node.clone());
    let before = record(&p.hosts[0], "k1").await;
    let (src, dst) = (p.actor_slots(&from).await, p.actor_slots(&to).await);
    actors.join(&actor, &lobby).await.expect("cross-node join");

    let after = record(&p.hosts[0], "k1").await;
    assert_eq!(after.node().routing_id, to, "owned by the Spot's node");
    assert_eq!(after.object_generation(), before.object_generation());
    assert!(after.authority_owner_generation() > before.authority_owner_generation());
    assert_eq!(
        Membership::decode(after.payload()),
        Some(Membership {
            spot: lobby.id.as_str().to_owned(),
            entry: false,
            spot_wide: false,
        }),
        "the record names the Spot"
    );
    assert_eq!(
        p.actor_slots(&from).await,
        (src.0 - 1, 0),
        "source slot returned"
    );
    assert_eq!(
        p.actor_slots(&to).await,
        (dst.0 + 1, 0),
        "target slot in use"
    );
    assert_eq!(
        actors.spot_of("k1").await.expect("spot_of"),
        Some(lobby.clone())
    );
    let (_, n, node) = actors.request("k1", &Peek).await.expect("served there");
    assert_eq!(n, 4, "PreserveStateWith kept the state");
    assert_eq!(
        node,
        to.to_hex(),
        "the request reached it on the Spot's node"
    );
    assert!(
        !p.on(&from)
            .object_host(0)
            .is_live(&(zlink_codec::keys::AuthorityKind::Actor, actor.id.clone()))
    );
    p.shutdown().await;
}

async fn a_cross_node_join_of_a_recreate_actor_builds_a_fresh_instance_on_the_spots_node(
    h: &Harness,
) {
    let p = Pair::start(h).await;
    let (actor, lobby) = p.actor_and_spot_elsewhere("fresh", "f1", "lobby").await;
    let actors = p.hosts[1].actors().expect("actors");
    actors.request("f1", &Peek).await.expect("peek");
    let built = p.shared.factories.load(Ordering::SeqCst);
    actors.join(&actor, &lobby).await.expect("cross-node join");
    assert_eq!(
        p.shared.factories.load(Ordering::SeqCst),
        built + 1,
        "RecreateOnRelocation builds a new instance on the target"
    );
    let (_, n, node) = actors.request("f1", &Peek).await.expect("served there");
    assert_eq!(
        (n, node),
        (1, lobby.node.to_hex()),
        "a fresh instance there"
    );
    let m = Membership::decode(record(&p.hosts[1], "f1").await.payload());
    assert_eq!(
        m.map(|m| (m.spot, m.entry)),
        Some((lobby.id.as_str().to_owned(), false))
    );
    p.shutdown().await;
}

async fn a_cross_node_join_to_a_spot_wide_spot_runs_the_moved_actor_under_the_spots_turn(
    h: &Harness,
) {
    let p = Pair::start(h).await;
    let (actor, hall) = p.actor_and_spot_elsewhere("kept", "k2", "hall").await;
    let actors = p.hosts[0].actors().expect("actors");
    actors.join(&actor, &hall).await.expect("cross-node join");
    let m = Membership::decode(record(&p.hosts[0], "k2").await.payload()).expect("membership");
    assert_eq!(
        (m.spot.as_str(), m.entry, m.spot_wide),
        (hall.id.as_str(), false, true)
    );
    // The Spot holds its turn: the moved Actor's request waits for it.
    let spots = p.hosts[0].spots().expect("spots");
    spots.send(hall.id.as_str(), &Hold).await.expect("hold");
    wait_until("the Spot is inside its turn", || {
        p.shared.busy.load(Ordering::SeqCst)
    })
    .await;
    let peeking = actors.clone();
    let peek = tokio::spawn(async move { peeking.request("k2", &Peek).await });
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(!peek.is_finished(), "the member waits for the Spot's turn");
    p.shared.gate.open();
    let (seen_busy, n, node) = peek.await.expect("task").expect("peek");
    assert!(
        !seen_busy,
        "the moved member never ran inside the Spot's turn"
    );
    assert_eq!((n, node), (1, hall.node.to_hex()));
    p.shutdown().await;
}

async fn a_disabled_actor_cross_node_join_is_refused_before_capture_with_the_store_unchanged(
    h: &Harness,
) {
    let p = Pair::start(h).await;
    let (actor, lobby) = p.actor_and_spot_elsewhere("pinned", "p1", "lobby").await;
    // From the owner's own manager the refusal is the typed one (across the command plane
    // it keeps its kind and text).
    let actors = p.on(&actor.node).actors().expect("actors");
    actors.request("p1", &Peek).await.expect("peek");
    let before = record(&p.hosts[0], "p1").await;
    let slots = (
        p.actor_slots(&actor.node).await,
        p.actor_slots(&lobby.node).await,
    );
    let built = p.shared.factories.load(Ordering::SeqCst);
    let err = actors.join(&actor, &lobby).await.expect_err("refused");
    assert!(
        matches!(
            &err,
            ZLinkError::InvalidCall(InvalidCall::Move(MoveRefusal::RelocationDisabled { id, .. }))
                if id == &actor.id
        ),
        "{err:?}"
    );
    assert_eq!(err.kind(), ErrorKind::InvalidOperation);
    let after = record(&p.hosts[0], "p1").await;
    assert_eq!(after.version(), before.version(), "the record is unchanged");
    assert_eq!(after.payload(), before.payload());
    assert_eq!(
        (
            p.actor_slots(&actor.node).await,
            p.actor_slots(&lobby.node).await
        ),
        slots,
        "no capacity moved or was reserved"
    );
    assert_eq!(
        p.shared.factories.load(Ordering::SeqCst),
        built,
        "nothing was built"
    );
    assert_eq!(actors.spot_of("p1").await.expect("spot_of"), None);
    let (_, n, node) = actors.request("p1", &Peek).await.expect("still served");
    assert_eq!(
        (n, node),
        (2, actor.node.to_hex()),
        "served where it was, state kept"
    );
    p.shutdown().await;
}

async fn join_entry_spot_puts_a_member_back_in_its_nodes_entry_spot_and_keeps_the_activation(
    h: &Harness,
) {
    let p = Pair::start(h).await;
    let (actor, hall) = p.actor_and_spot_elsewhere("kept", "k3", "hall").await;
    let actors = p.hosts[0].actors().expect("actors");
    actors.join(&actor, &hall).await.expect("cross-node join");
    actors.request("k3", &Peek).await.expect("peek");
    let moved = actors.find("k3").await.expect("find").expect("ready");
    let built = p.shared.factories.load(Ordering::SeqCst);
    actors
        .join_entry_spot(&moved)
        .await
        .expect("join the Entry Spot");
    let here = p.on(&hall.node);
    let entry = here
        .object_host(0)
        .entry_spot
        .clone()
        .expect("an Entry Spot");
    let after = record(&p.hosts[0], "k3").await;
    assert_eq!(
        Membership::decode(after.payload()),
        Some(Membership::entry(&entry)),
        "a member of its node's Entry Spot again"
    );
    assert_eq!(after.node().routing_id, hall.node, "it did not move");
    assert_eq!(actors.spot_of("k3").await.expect("spot_of"), None);
    assert_eq!(
        p.shared.factories.load(Ordering::SeqCst),
        built,
        "activation kept"
    );
    // Its turns are its own again: it runs while the Spot holds its turn.
    let spots = p.hosts[0].spots().expect("spots");
    spots.send(hall.id.as_str(), &Hold).await.expect("hold");
    wait_until("the Spot is inside its turn", || {
        p.shared.busy.load(Ordering::SeqCst)
    })
    .await;
    let (seen_busy, n, _) = actors.request("k3", &Peek).await.expect("peek");
    assert!(seen_busy, "it ran while the Spot was inside its turn");
    assert_eq!(n, 2, "the same activation");
    // Already there: nothing changes.
    actors.join_entry_spot(&moved).await.expect("again");
    assert_eq!(record(&p.hosts[0], "k3").await.version(), after.version());
    p.shutdown().await;
}

async fn join_entry_spot_on_another_node_moves_the_actor_into_that_nodes_entry_spot(h: &Harness) {
    let p = Pair::start(h).await;
    let (actor, lobby) = p.actor_and_spot_elsewhere("kept", "k4", "lobby").await;
    let actors = p.hosts[0].actors().expect("actors");
    actors.join(&actor, &lobby).await.expect("cross-node join");
    actors.request("k4", &Peek).await.expect("peek");
    let moved = actors.find("k4").await.expect("find").expect("ready");
    let back = actor.node.clone();
    let slots = p.actor_slots(&back).await;
    // The node it left follows it for the window (and refuses to take it back meanwhile).
    tokio::time::sleep(FOLLOW * 2).await;
    actors
        .join_entry_spot_on(&moved, &back)
        .await
        .expect("join that node's Entry Spot");
    let entry = p
        .on(&back)
        .object_host(0)
        .entry_spot
        .clone()
        .expect("entry");
    let after = record(&p.hosts[0], "k4").await;
    assert_eq!(after.node().routing_id, back, "moved to that node");
    assert_eq!(
        Membership::decode(after.payload()),
        Some(Membership::entry(&entry))
    );
    assert_eq!(p.actor_slots(&back).await, (slots.0 + 1, 0));
    assert_eq!(actors.spot_of("k4").await.expect("spot_of"), None);
    let (_, n, node) = actors.request("k4", &Peek).await.expect("served there");
    assert_eq!((n, node), (2, back.to_hex()), "its state moved with it");
    p.shutdown().await;
}

async fn a_spot_wide_member_does_not_join_across_nodes_alone_and_nothing_changes(h: &Harness) {
    let p = Pair::start(h).await;
    let (actor, hall) = p.actor_and_spot_elsewhere("kept", "k5", "hall").await;
    p.hosts[0]
        .actors()
        .expect("actors")
        .join(&actor, &hall)
        .await
        .expect("cross-node join");
    let member = p.hosts[0]
        .actors()
        .expect("actors")
        .find("k5")
        .await
        .expect("find")
        .expect("ready");
    // A Spot on the node it left.
    let spots = p.hosts[0].spots().expect("spots");
    let mut lobby = None;
    for _ in 0..40 {
        let s = spots.create("lobby").await.expect("lobby");
        if s.node != member.node {
            lobby = Some(s);
            break;
        }
    }
    let lobby = lobby.expect("a lobby on the other node");
    let before = record(&p.hosts[0], "k5").await;
    let actors = p.on(&member.node).actors().expect("actors");
    let err = actors.join(&member, &lobby).await.expect_err("refused");
    assert!(
        matches!(
            &err,
            ZLinkError::InvalidCall(InvalidCall::Move(MoveRefusal::MovesWithSpot))
        ),
        "{err:?}"
    );
    let after = record(&p.hosts[0], "k5").await;
    assert_eq!(
        (after.version(), after.payload()),
        (before.version(), before.payload())
    );
    assert_eq!(actors.spot_of("k5").await.expect("spot_of"), Some(hall));
    p.shutdown().await;
}
