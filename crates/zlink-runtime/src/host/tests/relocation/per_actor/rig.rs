//! The fixture of the `PerActor` User Spot move tests: a `PerActor` room type, its member
//! type (state moved by its adapter), a type that never moves, and a source / target / client
//! mesh with a room and its members on the source.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::{ObjectKind, ObjectRole};
use zlink_codec::{ObjectId, RoutingId};
use zlink_store_spi::{DynRelocationStore, MemoryRelocationStore};

use super::super::Step;
use super::super::member::{Member, member_type};
use crate::host::ZLinkHost;
use crate::host::config::ZLink;
use crate::host::tests::support::*;
use crate::mesh::node::MeshNode;
use crate::messaging::{BoxError, ErrorKind, Message, Request};
use crate::objects::{Actor, ActorRef, Spot, SpotExecution, SpotRef};
use crate::objects::{SpotStateAdapter, client::ObjectClient};
use zlink_location::{AuthorityRead, PerActorMoveRecord};
use zlink_testkit::Harness;

/// A `PerActor` room counting the messages it handled.
#[derive(Default)]
struct Room {
    n: u64,
}
impl Spot for Room {}

/// Which server answers (its label) and how many messages this object handled.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Where;
impl Message for Where {
    const PACKET: &'static str = "Where";
}
impl Request for Where {
    type Reply = (u64, u64);
}

/// The room adapter: counts its captures (the authority transition never calls it).
struct RoomAdapter(Arc<AtomicUsize>);
impl SpotStateAdapter<Room> for RoomAdapter {
    fn capture(&self, r: &Room) -> Result<Vec<u8>, BoxError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(r.n.to_be_bytes().to_vec())
    }
    fn restore(&self, bytes: &[u8]) -> Result<Room, BoxError> {
        Ok(Room {
            n: u64::from_be_bytes(bytes.try_into()?),
        })
    }
}

/// A member type that never moves.
#[derive(Default)]
struct Pinned;
impl Actor for Pinned {}

/// One root of the tests.
pub(super) struct Root {
    pub(super) host: ZLinkHost,
    pub(super) node: MeshNode,
    /// Room adapter captures on this root.
    pub(super) room_captures: Arc<AtomicUsize>,
    /// Room factory runs on this root.
    pub(super) rooms_built: Arc<AtomicUsize>,
}

/// What a server serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Serves {
    /// `room`, `member` and `pinned`.
    All,
    /// The same, the `room` factory failing.
    RefusingRooms,
    /// `room` and `pinned`, no `member` type.
    NoMembers,
}

/// A root with one MeshNode labelled `label`: a server of what `serves` says, or a client.
async fn root(h: &Harness, role: ObjectRole, label: u64, serves: Serves) -> Root {
    let refuse_room = serves == Serves::RefusingRooms;
    let relocation: Arc<dyn DynRelocationStore> = Arc::new(MemoryRelocationStore::new());
    let room_captures = Arc::new(AtomicUsize::new(0));
    let captures = Arc::clone(&room_captures);
    let rooms_built = Arc::new(AtomicUsize::new(0));
    let built = Arc::clone(&rooms_built);
    let host = ZLink::builder()
        .location_store(Arc::clone(&h.store))
        .relocation_store(relocation)
        .location_options(fast_options())
        .route_mesh(mesh(), move |n| {
            let n = n.object_role(role);
            if role != ObjectRole::Server {
                return n;
            }
            let n = n.user_spot_type::<Room>("room", |t| {
                t.factory(move |_ctx| {
                    built.fetch_add(1, Ordering::SeqCst);
                    async move {
                        if refuse_room {
                            return Err(crate::messaging::ZLinkError::application(
                                ErrorKind::InternalFailure,
                                "this node refuses rooms",
                            ));
                        }
                        Ok(Room::default())
                    }
                })
                .execution(SpotExecution::PerActor)
                .preserve_state_with(RoomAdapter(captures))
                .on_request::<Where, _>(move |r, _w, _ctx| {
                    r.n += 1;
                    let n = r.n;
                    Box::pin(async move { Ok((label, n)) })
                })
            });
            let n = if serves == Serves::NoMembers {
                n
            } else {
                n.actor_type::<Member>("member", |t| {
                    member_type(t, false).on_request::<Where, _>(move |m, _w, _ctx| {
                        let n = m.applied;
                        Box::pin(async move { Ok((label, n)) })
                    })
                })
            };
            n.actor_type::<Pinned>("pinned", |t| {
                t.factory(|_ctx| async { Ok(Pinned) }).disable_relocation()
            })
        })
        .build()
        .start()
        .await
        .expect("the host starts");
    let node = host.node(&mesh()).expect("the node");
    Root {
        host,
        node,
        room_captures,
        rooms_built,
    }
}

/// Source server (label 1, index 0), target server (label 2, index 1), client (index 2).
pub(super) struct Rig {
    pub(super) roots: Vec<Root>,
    pub(super) room: SpotRef,
    pub(super) members: Vec<String>,
}

impl Rig {
    pub(super) fn source(&self) -> &Root {
        &self.roots[0]
    }

    pub(super) fn target(&self) -> &Root {
        &self.roots[1]
    }

    pub(super) fn client(&self) -> &Root {
        &self.roots[2]
    }

    /// The source's object client (the relocation runs there).
    pub(super) fn source_client(&self) -> ObjectClient {
        self.source().host.actors().expect("actors").client
    }

    /// The node the record of `id` (`kind`) names now.
    pub(super) async fn node_of(&self, kind: ObjectKind, id: &str) -> RoutingId {
        let read = self
            .client()
            .host
            .object_host(0)
            .location
            .authority()
            .read(kind, &ObjectId::new(id).expect("id"))
            .await
            .expect("read");
        let AuthorityRead::Found { handle, .. } = read else {
            panic!("{id} has no record");
        };
        handle.node().routing_id
    }

    /// The move record of the room, decoded from its stored bytes.
    pub(super) async fn move_record(&self) -> Option<PerActorMoveRecord> {
        let bytes = self
            .client()
            .host
            .object_host(0)
            .location
            .authority()
            .per_actor_move_bytes(&self.room.id)
            .await
            .expect("read");
        bytes.map(|b| PerActorMoveRecord::decode(&b).expect("a valid move record"))
    }

    /// How many member records name the room as their `PerActor` Spot.
    pub(super) async fn membership(&self) -> u32 {
        let objects = self.client().host.object_host(0);
        let authority = objects.location.authority();
        let mut n = 0;
        for id in &self.members {
            let read = authority
                .read(ObjectKind::Actor, &ObjectId::new(id.as_str()).expect("id"))
                .await
                .expect("read");
            if let AuthorityRead::Found { handle, .. } = read {
                let m = crate::objects::membership::Membership::decode(handle.payload());
                if m.is_some_and(|m| m.spot == self.room.id.as_str() && !m.entry) {
                    n += 1;
                }
            }
        }
        n
    }

    pub(super) async fn shutdown(self) {
        for r in self.roots {
            r.host.shutdown().await;
        }
    }
}

/// A source holding a room with `members` members (each stepped `steps` times; `pinned` ones
/// of the `pinned` type), then a target serving what `serves` says and a
/// client, all Ready peers. The room is created before the target starts: it is on the
/// source.
pub(super) async fn rig(
    h: &Harness,
    members: usize,
    steps: u64,
    pinned: &[usize],
    serves: Serves,
) -> Rig {
    let source = root(h, ObjectRole::Server, 1, Serves::All).await;
    let client = root(h, ObjectRole::Client, 3, Serves::All).await;
    wait_peers(&source.node, 1).await;
    wait_peers(&client.node, 1).await;
    wait_discovered(&[&source.host, &client.host]).await;
    let room = source
        .host
        .spots()
        .expect("spots")
        .create("room")
        .await
        .expect("room");
    assert_eq!(&room.node, source.node.routing_id());
    let actors = source.host.actors().expect("actors");
    let mut ids = Vec::with_capacity(members);
    for i in 0..members {
        let id = format!("pa-{i:03}");
        let ty = if pinned.contains(&i) {
            "pinned"
        } else {
            "member"
        };
        let made = actors
            .get_or_create(ty, &id)
            .in_spot(&room)
            .await
            .expect("member");
        assert_eq!(&made.node, source.node.routing_id());
        if ty == "member" {
            for seq in 1..=steps {
                actors
                    .request(&id, &Step { stream: 0, seq })
                    .await
                    .expect("step");
            }
        }
        ids.push(id);
    }
    let roots = vec![source, root(h, ObjectRole::Server, 2, serves).await, client];
    for r in &roots {
        wait_peers(&r.node, 2).await;
    }
    wait_discovered(&roots.iter().map(|r| &r.host).collect::<Vec<_>>()).await;
    Rig {
        roots,
        room,
        members: ids,
    }
}

pub(super) fn live_here(root: &Root, kind: AuthorityKind, id: &str) -> bool {
    let key = (kind, ObjectId::new(id).expect("id"));
    root.host.object_host(0).live_object(&key).is_some()
}

/// The ref of the member `id` as its record names it now, on `node`.
pub(super) async fn member_ref(rig: &Rig, id: &str, node: &RoutingId) -> ActorRef {
    let read = rig
        .client()
        .host
        .object_host(0)
        .location
        .authority()
        .read(ObjectKind::Actor, &ObjectId::new(id).expect("id"))
        .await
        .expect("read");
    let AuthorityRead::Found { handle, .. } = read else {
        panic!("{id} has no record");
    };
    assert_eq!(&handle.node().routing_id, node);
    ActorRef::of(&handle)
}
