//! Actor membership (spec 21 §1.2, §7; 06 §11): the placing node's Entry Spot, creation into a
//! User Spot, a same-node join, and the one turn a `SpotWide` Spot shares with its members.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use zlink_codec::ObjectId;
use zlink_codec::records::{ObjectKind, ObjectRole};

use super::support::*;
use crate::host::ZLinkHost;
use crate::host::config::MeshNodeBuilder;
use crate::messaging::{ErrorKind, Message, NodeHandler, Request};
use crate::objects::{Actor, Spot, SpotExecution};
use zlink_location::AuthorityRead;
use zlink_testkit::Harness;

struct Hall {
    busy: Arc<AtomicBool>,
    gate: Gate,
}
impl Spot for Hall {}

struct Guest {
    busy: Arc<AtomicBool>,
    n: Arc<AtomicU64>,
}
impl Actor for Guest {}

#[derive(Debug, Serialize, Deserialize)]
struct Hold;
impl Message for Hold {
    const PACKET: &'static str = "Hold";
}

#[derive(Debug, Serialize, Deserialize)]
struct Peek;
impl Message for Peek {
    const PACKET: &'static str = "Peek";
}
impl Request for Peek {
    /// Whether the Spot was inside a turn when the Actor ran, and the Actor's count.
    type Reply = (bool, u64);
}

/// An Object Server of the `hall` Spot type (`mode`) and the `guest` Actor type, sharing one
/// busy flag and gate.
fn server(
    busy: &Arc<AtomicBool>,
    gate: &Gate,
    mode: SpotExecution,
    types: (bool, bool),
) -> impl FnOnce(MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler> {
    let (b1, b2, g) = (Arc::clone(busy), Arc::clone(busy), gate.clone());
    move |b| {
        let mut b = b.object_role(ObjectRole::Server);
        if types.0 {
            b = b.user_spot_type::<Hall>("hall", move |t| {
                t.factory(move |_ctx| {
                    let (busy, gate) = (Arc::clone(&b1), g.clone());
                    async move { Ok(Hall { busy, gate }) }
                })
                .execution(mode)
                .disable_relocation()
                .on_send::<Hold, _>(|h, _hold, _ctx| {
                    Box::pin(async move {
                        h.busy.store(true, Ordering::SeqCst);
                        h.gate.pass().await;
                        h.busy.store(false, Ordering::SeqCst);
                        Ok(())
                    })
                })
            });
        }
        if types.1 {
            b = b.actor_type::<Guest>("guest", move |t| {
                t.factory(move |_ctx| {
                    let busy = Arc::clone(&b2);
                    async move {
                        Ok(Guest {
                            busy,
                            n: Arc::new(AtomicU64::new(0)),
                        })
                    }
                })
                .disable_relocation()
                .on_request::<Peek, _>(|g, _peek, _ctx| {
                    let seen = g.busy.load(Ordering::SeqCst);
                    let n = g.n.fetch_add(1, Ordering::SeqCst) + 1;
                    Box::pin(async move { Ok((seen, n)) })
                })
            });
        }
        b
    }
}

/// The membership an Actor's record holds.
async fn membership_of(host: &ZLinkHost, id: &str) -> crate::objects::membership::Membership {
    crate::objects::membership::Membership::decode(record_of(host, id).await.payload())
        .expect("a membership")
}

/// An Actor's record.
async fn record_of(host: &ZLinkHost, id: &str) -> zlink_location::AuthorityHandle {
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

on_every_store!(
    an_actor_joins_the_entry_spot_of_the_node_that_placed_it,
    an_actor_created_into_a_spot_wide_spot_lands_on_its_node_and_shares_its_turn,
    a_same_node_join_keeps_the_activation_and_a_disabled_actor_does_not_join_across_nodes,
    the_spot_an_actor_belongs_to_is_its_current_user_spot_never_the_entry_spot,
);

async fn an_actor_joins_the_entry_spot_of_the_node_that_placed_it(h: &Harness) {
    let (busy, gate) = (Arc::new(AtomicBool::new(false)), Gate::new());
    let (ha, _a) = start(
        h,
        server(&busy, &gate, SpotExecution::SpotWide, (true, true)),
    )
    .await;
    wait_discovered(&[&ha]).await;
    ha.actors()
        .expect("actors")
        .get_or_create("guest", "g1")
        .await
        .expect("created");
    let m = membership_of(&ha, "g1").await;
    let entry = ha.object_host(0).entry_spot.clone().expect("an Entry Spot");
    assert!(m.entry && !m.spot_wide);
    assert_eq!(m.spot, entry.as_str());
    ha.shutdown().await;
}

async fn an_actor_created_into_a_spot_wide_spot_lands_on_its_node_and_shares_its_turn(h: &Harness) {
    let (busy, gate) = (Arc::new(AtomicBool::new(false)), Gate::new());
    let (ha, a) = start(
        h,
        server(&busy, &gate, SpotExecution::SpotWide, (true, true)),
    )
    .await;
    let (hb, b) = start(
        h,
        server(&busy, &gate, SpotExecution::SpotWide, (true, true)),
    )
    .await;
    wait_peers(&a, 1).await;
    wait_peers(&b, 1).await;
    wait_discovered(&[&ha, &hb]).await;
    let hall = ha
        .spots()
        .expect("spots")
        .create("hall")
        .await
        .expect("hall");
    // Created from either node, the member lands on the Spot's node.
    for (i, host) in [&ha, &hb].into_iter().enumerate() {
        let id = format!("member-{i}");
        let r = host
            .actors()
            .expect("actors")
            .get_or_create("guest", &id)
            .in_spot(&hall)
            .await
            .expect("member");
        assert_eq!(r.node, hall.node, "placed on the Spot's node");
        let m = membership_of(&ha, &id).await;
        assert_eq!(
            (m.spot.as_str(), m.entry, m.spot_wide),
            (hall.id.as_str(), false, true)
        );
    }
    // The Spot holds its turn: the member's request waits for it.
    let spots = hb.spots().expect("spots");
    spots.send(hall.id.as_str(), &Hold).await.expect("hold");
    wait_until("the Spot is inside its turn", || {
        busy.load(Ordering::SeqCst)
    })
    .await;
    let actors = hb.actors().expect("actors");
    let peek = tokio::spawn(async move { actors.request("member-0", &Peek).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    gate.open();
    let (seen_busy, n) = peek.await.expect("task").expect("peek");
    assert!(!seen_busy, "the member never ran inside the Spot's turn");
    assert_eq!(n, 1);
    // A Spot that is gone refuses new members.
    assert!(
        ha.spots()
            .expect("spots")
            .close(&hall)
            .await
            .expect("closed")
    );
    let err = ha
        .actors()
        .expect("actors")
        .get_or_create("guest", "member-late")
        .in_spot(&hall)
        .await
        .expect_err("no Spot");
    assert_eq!(err.kind(), ErrorKind::NotFound);
    stop_all(&[&ha, &hb]).await;
}

async fn a_same_node_join_keeps_the_activation_and_a_disabled_actor_does_not_join_across_nodes(
    h: &Harness,
) {
    let (busy, gate) = (Arc::new(AtomicBool::new(false)), Gate::new());
    gate.open();
    // a: Actors and Spots; b: Spots only (a Spot created from b's manager may land on either).
    let (ha, a) = start(
        h,
        server(&busy, &gate, SpotExecution::PerActor, (true, true)),
    )
    .await;
    let (hb, b) = start(
        h,
        server(&busy, &gate, SpotExecution::PerActor, (true, false)),
    )
    .await;
    wait_peers(&a, 1).await;
    wait_peers(&b, 1).await;
    wait_discovered(&[&ha, &hb]).await;
    let actors = ha.actors().expect("actors");
    let guest = actors
        .get_or_create("guest", "joiner")
        .await
        .expect("guest");
    assert_eq!(actors.request("joiner", &Peek).await.expect("peek").1, 1);
    let spots = ha.spots().expect("spots");
    let (mut here, mut there) = (None, None);
    for _ in 0..40 {
        let s = spots.create("hall").await.expect("hall");
        if s.node == guest.node {
            here.get_or_insert(s);
        } else {
            there.get_or_insert(s);
        }
        if here.is_some() && there.is_some() {
            break;
        }
    }
    let (here, there) = (here.expect("a hall on a"), there.expect("a hall on b"));
    actors.join(&guest, &here).await.expect("same-node join");
    let m = membership_of(&ha, "joiner").await;
    assert_eq!((m.spot.as_str(), m.entry), (here.id.as_str(), false));
    // The activation stayed: its state continues.
    assert_eq!(actors.request("joiner", &Peek).await.expect("peek").1, 2);
    // Across nodes the join moves the Actor: its type has DisableRelocation, so it is
    // refused before capture and nothing changes.
    let before = record_of(&ha, "joiner").await;
    let err = actors.join(&guest, &there).await.expect_err("cross-node");
    assert_eq!(err.kind(), ErrorKind::InvalidOperation);
    assert!(
        matches!(
            &err,
            crate::messaging::ZLinkError::InvalidCall(crate::messaging::InvalidCall::Move(
                crate::messaging::MoveRefusal::RelocationDisabled { .. }
            ))
        ),
        "{err:?}"
    );
    let after = record_of(&ha, "joiner").await;
    assert_eq!(
        (after.version(), after.payload()),
        (before.version(), before.payload()),
        "the record is unchanged"
    );
    assert_eq!(actors.request("joiner", &Peek).await.expect("peek").1, 3);
    let mut stale = guest.clone();
    stale.generation += 1000;
    let err = actors
        .join(&stale, &here)
        .await
        .expect_err("another incarnation");
    assert_eq!(err.kind(), ErrorKind::InvalidOperation);
    stop_all(&[&ha, &hb]).await;
}

/// `ActorManager::spot_of` (spec 06 §17): the current SpotRef of the User Spot an Actor
/// belongs to, from the Store; `None` for a member of an Entry Spot, for an unknown Actor and
/// once the Spot has no Ready incarnation.
async fn the_spot_an_actor_belongs_to_is_its_current_user_spot_never_the_entry_spot(h: &Harness) {
    let (busy, gate) = (Arc::new(AtomicBool::new(false)), Gate::new());
    gate.open();
    let (ha, _a) = start(
        h,
        server(&busy, &gate, SpotExecution::PerActor, (true, true)),
    )
    .await;
    wait_discovered(&[&ha]).await;
    let actors = ha.actors().expect("actors");
    let spots = ha.spots().expect("spots");
    let guest = actors.get_or_create("guest", "g-of").await.expect("guest");
    // A member of the Entry Spot belongs to no User Spot.
    assert!(membership_of(&ha, "g-of").await.entry);
    assert_eq!(actors.spot_of("g-of").await.expect("read"), None);
    assert_eq!(actors.spot_of("nobody").await.expect("read"), None);
    // Joined: the Spot's current ref, read from the Store (generation included).
    let hall = spots.create("hall").await.expect("hall");
    actors.join(&guest, &hall).await.expect("same-node join");
    let of = actors.spot_of("g-of").await.expect("read").expect("a Spot");
    assert_eq!((&of.id, of.generation), (&hall.id, hall.generation));
    assert_eq!(
        of,
        spots
            .find(hall.id.as_str())
            .await
            .expect("find")
            .expect("Ready")
    );
    // Created into a Spot: that Spot from the first read on.
    let member = actors
        .get_or_create("guest", "g-in")
        .in_spot(&hall)
        .await
        .expect("member");
    assert_eq!(member.node, hall.node);
    assert_eq!(
        actors.spot_of("g-in").await.expect("read"),
        Some(of.clone())
    );
    // The Spot closed: no current Spot to name.
    assert!(spots.close(&hall).await.expect("closed"));
    assert_eq!(actors.spot_of("g-of").await.expect("read"), None);
    // An invalid id is the caller's error, as for `find`.
    assert_eq!(
        actors.spot_of("").await.expect_err("invalid").kind(),
        ErrorKind::InvalidOperation
    );
    ha.shutdown().await;
}

#[tokio::test(flavor = "current_thread")]
async fn an_entry_spot_id_that_exists_ends_startup_with_already_exists() {
    use crate::mesh::node::discover::tests::FIXED_ENTRY_UUID;
    let h = Harness::memory();
    let (busy, gate) = (Arc::new(AtomicBool::new(false)), Gate::new());
    let (ha, _a) = start(
        &h,
        server(&busy, &gate, SpotExecution::PerActor, (true, true)),
    )
    .await;
    wait_discovered(&[&ha]).await;
    let fixed = uuid::Uuid::new_v4().to_string();
    // Some node of this mesh holds a Spot under the id the next node's Entry Spot will get.
    let taken = ObjectId::new(format!("node-entry-{fixed}")).expect("id");
    let objects = ha.object_host(0);
    let candidates = ha
        .object_discovery(0)
        .candidates(objects.location.authority())
        .await
        .expect("candidates");
    objects
        .location
        .authority()
        .place_and_reserve(
            candidates,
            ObjectKind::UserSpot,
            taken,
            zlink_codec::StableType::new("hall").expect("type"),
            Vec::new(),
            None,
        )
        .await
        .expect("reserved")
        .applied()
        .expect("applied");
    FIXED_ENTRY_UUID.with(|f| *f.borrow_mut() = Some(fixed));
    let err = crate::host::config::ZLink::builder()
        .location_store(Arc::clone(&h.store))
        .location_options(fast_options())
        .route_mesh(mesh(), |b| {
            b.routing_id_prefix("node")
                .object_role(ObjectRole::Server)
                .actor_type::<Guest>("guest", |t| {
                    t.factory(|_ctx| async {
                        Ok(Guest {
                            busy: Arc::new(AtomicBool::new(false)),
                            n: Arc::new(AtomicU64::new(0)),
                        })
                    })
                    .disable_relocation()
                })
        })
        .build()
        .start()
        .await
        .expect_err("the Entry Spot id exists");
    FIXED_ENTRY_UUID.with(|f| *f.borrow_mut() = None);
    assert_eq!(
        err.kind(),
        crate::host::config::StartupErrorKind::AlreadyExists,
        "{err}"
    );
    ha.shutdown().await;
}
