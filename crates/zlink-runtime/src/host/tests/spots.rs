//! User Spots (spec 21 §7, §7.2; 06 §15, §17, §18): created under a framework-issued or a
//! caller-named SpotId, decided by their own creation callback, found, messaged by SpotId
//! (existing-only), and closed by the exact incarnation; creation call options.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::ObjectRole;

use super::support::*;
use crate::host::config::MeshNodeBuilder;
use crate::messaging::{ErrorKind, Message, NodeHandler, Request};
use crate::objects::{Actor, CreationDecision, Spot, SpotType};
use zlink_testkit::Harness;

struct Room {
    said: Vec<String>,
}
impl Spot for Room {}

struct Unit;
impl Actor for Unit {}

#[derive(Debug, Serialize, Deserialize)]
struct Say(String);
impl Message for Say {
    const PACKET: &'static str = "Say";
}

#[derive(Debug, Serialize, Deserialize)]
struct Log;
impl Message for Log {
    const PACKET: &'static str = "Log";
}
impl Request for Log {
    type Reply = Vec<String>;
}

fn room(factories: &Arc<AtomicUsize>) -> impl FnOnce(SpotType<Room>) -> SpotType<Room> {
    let factories = Arc::clone(factories);
    move |t| {
        t.factory(move |_ctx| {
            let factories = Arc::clone(&factories);
            async move {
                factories.fetch_add(1, Ordering::SeqCst);
                Ok(Room { said: Vec::new() })
            }
        })
        .disable_relocation()
        .on_create(|room, ctx| {
            Box::pin(async move {
                if ctx.id.starts_with("closed-") {
                    return Ok(CreationDecision::reject("closed for the night"));
                }
                room.said.push(format!("opened {}", ctx.generation));
                Ok(CreationDecision::approve())
            })
        })
        .on_send::<Say, _>(|room, say, _ctx| {
            Box::pin(async move {
                room.said.push(say.0);
                Ok(())
            })
        })
        .on_request::<Log, _>(|room, _log, _ctx| {
            let said = room.said.clone();
            Box::pin(async move { Ok(said) })
        })
    }
}

fn server(
    factories: &Arc<AtomicUsize>,
) -> impl FnOnce(MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler> {
    let f = Arc::clone(factories);
    move |b| {
        b.object_role(ObjectRole::Server)
            .user_spot_type::<Room>("room", room(&f))
            .actor_type::<Unit>("unit", |t| {
                t.factory(|_ctx| async { Ok(Unit) }).disable_relocation()
            })
    }
}

on_every_store!(
    user_spots_are_created_found_messaged_and_closed,
    concurrent_get_or_create_of_one_user_spot_runs_one_factory,
    a_read_showing_another_incarnation_drops_the_cached_route,
    operators_locate_and_list_objects_through_the_host,
);

async fn operators_locate_and_list_objects_through_the_host(h: &Harness) {
    use zlink_codec::records::ObjectKind;
    use zlink_location::{EntryState, ListFilter, LookupKind};
    let factories = Arc::new(AtomicUsize::new(0));
    let (ha, _a) = start(h, server(&factories)).await;
    wait_discovered(&[&ha]).await;
    let actors = ha.actors().expect("actors");
    for i in 0..3 {
        actors
            .get_or_create("unit", &format!("u{i}"))
            .await
            .expect("unit");
    }
    let spot = ha
        .spots()
        .expect("spots")
        .get_or_create("room", "u0")
        .await
        .expect("room");
    let id = zlink_codec::ObjectId::new("u0").expect("id");
    let actor = ha
        .locate(LookupKind::Actor, &id)
        .await
        .expect("lookup")
        .expect("an entry");
    assert_eq!(
        (actor.kind, actor.state),
        (ObjectKind::Actor, EntryState::Ready)
    );
    let s = ha
        .locate(LookupKind::Spot, &id)
        .await
        .expect("lookup")
        .expect("an entry");
    assert_eq!(s.object_generation.get(), spot.generation);
    assert_eq!(s.routing_id, spot.node);
    let none = zlink_codec::ObjectId::new("nobody").expect("id");
    assert_eq!(
        ha.locate(LookupKind::Actor, &none).await.expect("lookup"),
        None
    );
    // Two pages of at most two Actors, every id once.
    let first = ha
        .list_locations(ListFilter::new(ObjectKind::Actor), 2, None)
        .await
        .expect("page 1");
    assert_eq!(first.entries.len(), 2);
    let token = first.next.clone().expect("more");
    let second = ha
        .list_locations(ListFilter::new(ObjectKind::Actor), 2, Some(&token))
        .await
        .expect("page 2");
    let mut ids: Vec<_> = first
        .entries
        .iter()
        .chain(&second.entries)
        .map(|e| e.id.as_str().to_owned())
        .collect();
    ids.sort();
    assert_eq!(ids, ["u0", "u1", "u2"]);
    let err = ha
        .list_locations(ListFilter::new(ObjectKind::Actor), 0, None)
        .await
        .expect_err("page size 0");
    assert_eq!(err.kind(), ErrorKind::InvalidOperation);
    ha.shutdown().await;
}

async fn user_spots_are_created_found_messaged_and_closed(h: &Harness) {
    let factories = Arc::new(AtomicUsize::new(0));
    let (ha, a) = start(h, server(&factories)).await;
    let (hb, b) = start(h, server(&factories)).await;
    wait_peers(&a, 1).await;
    wait_peers(&b, 1).await;
    wait_discovered(&[&ha, &hb]).await;
    let (sa, sb) = (ha.spots().expect("spots"), hb.spots().expect("spots"));
    // Create: the framework issues a lowercase canonical UUID v4.
    let fresh = sa.create("room").await.expect("created");
    let u = uuid::Uuid::parse_str(fresh.id.as_str()).expect("a uuid id");
    assert_eq!(u.get_version_num(), 4);
    assert_eq!(fresh.id.as_str(), u.to_string());
    // GetOrCreate by a caller-named id, then messages from either node.
    let lobby = sa.get_or_create("room", "lobby").await.expect("lobby");
    assert_eq!(
        sb.get_or_create("room", "lobby").await.expect("same"),
        lobby
    );
    assert_eq!(sb.find("lobby").await.expect("find"), Some(lobby.clone()));
    sb.send("lobby", &Say("hi".into())).await.expect("say");
    let log = sb.request("lobby", &Log).await.expect("log");
    assert_eq!(
        log,
        vec![format!("opened {}", lobby.generation), "hi".to_owned()]
    );
    // Results: AlreadyExists, TypeMismatch, Rejected by the Spot's own callback, the reserved
    // Entry Spot form.
    let err = sa.create("room").await.map(|_| ()).and(Ok(()));
    assert!(err.is_ok(), "create always issues a fresh id");
    let err = sa.get_or_create("hall", "lobby").await.expect_err("type");
    assert_eq!(err.kind(), ErrorKind::TypeMismatch);
    let err = sa
        .get_or_create("room", "closed-1")
        .await
        .expect_err("declined");
    assert_eq!(err.kind(), ErrorKind::Rejected);
    assert_eq!(sa.find("closed-1").await.expect("find"), None);
    let entry = format!("lobby-entry-{}", uuid::Uuid::new_v4());
    let err = sa
        .get_or_create("room", &entry)
        .await
        .expect_err("reserved");
    assert_eq!(err.kind(), ErrorKind::InvalidOperation);
    // An Actor id and a Spot id live in separate namespaces.
    ha.actors()
        .expect("actors")
        .get_or_create("unit", "lobby")
        .await
        .expect("an Actor named lobby");
    // Close ends exactly the named incarnation.
    let mut other = lobby.clone();
    other.generation += 1000;
    let err = sb.close(&other).await.expect_err("another incarnation");
    assert_eq!(err.kind(), ErrorKind::InvalidOperation);
    assert!(sb.close(&lobby).await.expect("closed"));
    assert!(!sa.close(&lobby).await.expect("already gone"));
    assert_eq!(sa.find("lobby").await.expect("find"), None);
    let err = sa.request("lobby", &Log).await.expect_err("gone");
    assert_eq!(err.kind(), ErrorKind::NotFound);
    stop_all(&[&ha, &hb]).await;
}

async fn concurrent_get_or_create_of_one_user_spot_runs_one_factory(h: &Harness) {
    let factories = Arc::new(AtomicUsize::new(0));
    let mut hosts = Vec::new();
    for _ in 0..3 {
        hosts.push(start(h, server(&factories)).await);
    }
    wait_connected(&hosts).await;
    let mut calls = Vec::new();
    for i in 0..64 {
        let s = hosts[i % 3].0.spots().expect("spots");
        calls.push(tokio::spawn(async move {
            s.get_or_create("room", "arena").await
        }));
    }
    let mut refs = Vec::new();
    for c in calls {
        refs.push(c.await.expect("task").expect("created or existing"));
    }
    assert!(refs.windows(2).all(|w| w[0] == w[1]), "one ref for all");
    assert_eq!(
        factories.load(Ordering::SeqCst),
        1,
        "exactly one factory ran"
    );
    let hs: Vec<_> = hosts.iter().map(|(h, _)| h).collect();
    stop_all(&hs).await;
}

async fn a_read_showing_another_incarnation_drops_the_cached_route(h: &Harness) {
    let factories = Arc::new(AtomicUsize::new(0));
    let (ha, a) = start(h, server(&factories)).await;
    let (hb, b) = start(h, server(&factories)).await;
    wait_peers(&a, 1).await;
    wait_peers(&b, 1).await;
    wait_discovered(&[&ha, &hb]).await;
    let (sa, sb) = (ha.spots().expect("spots"), hb.spots().expect("spots"));
    // A Spot on a: b caches routes to other nodes' objects only.
    let mut found = None;
    for i in 0..64 {
        let name = format!("cellar{i}");
        let r = sa.get_or_create("room", &name).await.expect("created");
        if r.node == *a.routing_id() {
            found = Some((name, r));
            break;
        }
    }
    let (name, first) = found.expect("one of 64 Spots landed on a");
    let name = name.as_str();
    sb.request(name, &Log).await.expect("warms b's cache");
    let key = (AuthorityKind::Spot, first.id.clone());
    let objects = hb.object_host(0);
    let routes = &objects.routes;
    assert!(routes.get(&key).is_some(), "b cached the route");
    // A new incarnation replaces the first; b's next read of the record sees another
    // StoreVersion and generation and drops its entry.
    assert!(sa.close(&first).await.expect("closed"));
    let second = sa.get_or_create("room", name).await.expect("again");
    assert!(second.generation > first.generation);
    assert!(routes.get(&key).is_some(), "b has not read the record yet");
    assert_eq!(sb.find(name).await.expect("find"), Some(second));
    assert!(
        routes.get(&key).is_none(),
        "the read dropped the stale entry"
    );
    stop_all(&[&ha, &hb]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_option_set_twice_is_invalid_and_writes_nothing() {
    let h = Harness::memory();
    let factories = Arc::new(AtomicUsize::new(0));
    let (ha, _a) = start(&h, server(&factories)).await;
    wait_discovered(&[&ha]).await;
    let before = h.snapshot().await;
    let spots = ha.spots().expect("spots");
    let err = spots
        .get_or_create("room", "twice")
        .deadline(Duration::from_secs(1))
        .deadline(Duration::from_secs(2))
        .await
        .expect_err("deadline twice");
    assert_eq!(err.kind(), ErrorKind::InvalidOperation);
    let err = spots
        .get_or_create("room", "twice")
        .request(vec![1])
        .request(vec![2])
        .await
        .expect_err("request twice");
    assert_eq!(err.kind(), ErrorKind::InvalidOperation);
    let err = spots
        .get_or_create("room", "twice")
        .deadline(Duration::ZERO)
        .await
        .expect_err("zero deadline");
    assert_eq!(err.kind(), ErrorKind::InvalidOperation);
    assert_eq!(h.snapshot().await, before, "nothing was written");
    assert_eq!(factories.load(Ordering::SeqCst), 0);
    ha.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_whose_fence_no_longer_holds_changes_nothing() {
    use crate::objects::host::EndFence;
    let h = Harness::memory();
    let factories = Arc::new(AtomicUsize::new(0));
    let (ha, _a) = start(&h, server(&factories)).await;
    wait_discovered(&[&ha]).await;
    let spots = ha.spots().expect("spots");
    let hall = spots.get_or_create("room", "gallery").await.expect("room");
    let host = ha.object_host(0);
    let key = (AuthorityKind::Spot, hall.id.clone());
    let before = h.snapshot().await;
    let fence = EndFence {
        owner_generation: 1,
        version: "not-the-version".into(),
        target_run: 1,
    };
    let err = host
        .end(&key, hall.generation, Some(&fence))
        .await
        .expect_err("stale fence");
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert_eq!(h.snapshot().await, before, "nothing changed");
    assert!(
        spots.request("gallery", &Log).await.is_ok(),
        "still serving"
    );
    assert!(spots.close(&hall).await.expect("the right fence closes it"));
    ha.shutdown().await;
}
