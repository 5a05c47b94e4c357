//! Spot lifecycle callbacks around relocation and shutdown (spec 28 §5 `ApplicationSignaled`,
//! §6 steps 7 and 10 and "Callbacks not called", §9 step 4; §12 items 5 and 9).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::{ObjectKind, ObjectRole};
use zlink_codec::{ObjectId, RoutingId};
use zlink_store_spi::{DynRelocationStore, MemoryRelocationStore};

use super::{Step, Totals};
use crate::host::config::ZLink;
use crate::host::tests::support::*;
use crate::host::{RelocateOptions, RelocationOutcome, RelocationReason, ZLinkHost};
use crate::mesh::node::MeshNode;
use crate::messaging::{BoxError, Message, Request, RouteKind, ZLinkError};
use crate::objects::host::ObjectHost;
use crate::objects::{
    Actor, ClosingReason, ReadinessMode, RelocationReadyOutcome, Spot, SpotExecution, SpotRef,
    SpotStateAdapter, SpotType,
};
use crate::relocation::MovesOf;
use zlink_location::AuthorityRead;
use zlink_testkit::Harness;

/// What the callbacks and handlers of every node did, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    /// A handler ran on `node`.
    Handled { node: &'static str, what: String },
    /// A closing callback ran on `node` for `id`; `owner` is the node the Spot's record named
    /// while it ran.
    Closing {
        node: &'static str,
        id: String,
        reason: ClosingReason,
        owner: Option<RoutingId>,
    },
    /// A relocation-ready callback ran on `node`.
    Ready {
        node: &'static str,
        outcome: RelocationReadyOutcome,
    },
}

/// The log every node of one test writes, and the switches its callbacks read.
#[derive(Default)]
struct Log {
    events: Mutex<Vec<Ev>>,
    /// The client node's objects: closing callbacks read the Spot's record through it.
    reader: Mutex<Option<Arc<ObjectHost>>>,
    /// Closing callbacks fail while set.
    fail_closing: AtomicBool,
    /// Closing callbacks never return while set.
    hang_closing: AtomicBool,
}

impl Log {
    fn push(&self, e: Ev) {
        self.events.lock().push(e);
    }

    fn all(&self) -> Vec<Ev> {
        self.events.lock().clone()
    }

    fn closings(&self) -> Vec<Ev> {
        self.all()
            .into_iter()
            .filter(|e| matches!(e, Ev::Closing { .. }))
            .collect()
    }

    fn readies(&self) -> Vec<Ev> {
        self.all()
            .into_iter()
            .filter(|e| matches!(e, Ev::Ready { .. }))
            .collect()
    }

    /// The node the record of the Spot `id` of `kind` names now.
    async fn owner(&self, kind: ObjectKind, id: &str) -> Option<RoutingId> {
        let reader = self.reader.lock().clone()?;
        let id = ObjectId::new(id).ok()?;
        match reader.location.authority().read(kind, &id).await {
            Ok(AuthorityRead::Found { handle, .. }) => Some(handle.node().routing_id),
            _ => None,
        }
    }
}

/// A Spot: the `room` User Spot (`SpotWide`) or the `desk` Instance Spot.
struct Place {
    n: u64,
    node: &'static str,
    kind: ObjectKind,
    log: Arc<Log>,
}
impl Spot for Place {}

/// A member Actor of a room, or an Entry Spot member (RecreateOnRelocation).
struct Guest {
    node: &'static str,
    log: Arc<Log>,
    applied: u64,
}
impl Actor for Guest {}

#[derive(Debug, Serialize, Deserialize)]
struct Knock;
impl Message for Knock {
    const PACKET: &'static str = "Knock";
}
impl Request for Knock {
    type Reply = u64;
}

/// Signals the relocation boundary (`ctx.relocation_ready().defer()`); replies whether it
/// was registered.
#[derive(Debug, Serialize, Deserialize)]
struct Signal;
impl Message for Signal {
    const PACKET: &'static str = "Signal";
}
impl Request for Signal {
    type Reply = bool;
}

/// The Spot adapter; on a node that `refuses`, every restore fails.
struct PlaceAdapter {
    node: &'static str,
    kind: ObjectKind,
    log: Arc<Log>,
    refuses: bool,
}
impl SpotStateAdapter<Place> for PlaceAdapter {
    fn capture(&self, p: &Place) -> Result<Vec<u8>, BoxError> {
        Ok(p.n.to_be_bytes().to_vec())
    }
    fn restore(&self, bytes: &[u8]) -> Result<Place, BoxError> {
        if self.refuses {
            return Err("restore refused by the test".into());
        }
        Ok(Place {
            n: u64::from_be_bytes(bytes.try_into()?),
            node: self.node,
            kind: self.kind,
            log: Arc::clone(&self.log),
        })
    }
}

/// How one server node is set up.
#[derive(Clone, Copy)]
struct Node {
    label: &'static str,
    readiness: ReadinessMode,
    refuses: bool,
}

fn place_type(
    node: Node,
    kind: ObjectKind,
    log: &Arc<Log>,
) -> impl FnOnce(SpotType<Place>) -> SpotType<Place> {
    let log = Arc::clone(log);
    move |t| {
        let for_factory = Arc::clone(&log);
        let adapter = PlaceAdapter {
            node: node.label,
            kind,
            log,
            refuses: node.refuses,
        };
        t.factory(move |_ctx| {
            let log = Arc::clone(&for_factory);
            async move {
                Ok(Place {
                    n: 0,
                    node: node.label,
                    kind,
                    log,
                })
            }
        })
        .preserve_state_with(adapter)
        .on_request::<Knock, _>(|p, _k, _ctx| {
            p.n += 1;
            p.log.push(Ev::Handled {
                node: p.node,
                what: "knock".into(),
            });
            let n = p.n;
            Box::pin(async move { Ok(n) })
        })
        .on_request::<Signal, _>(|p, _s, ctx| {
            let registered = ctx.relocation_ready().defer();
            p.log.push(Ev::Handled {
                node: p.node,
                what: "signal".into(),
            });
            Box::pin(async move { Ok(registered) })
        })
        .on_closing(|p, ctx| {
            Box::pin(async move {
                let owner = p.log.owner(p.kind, &ctx.id).await;
                p.log.push(Ev::Closing {
                    node: p.node,
                    id: ctx.id.clone(),
                    reason: ctx.reason,
                    owner,
                });
                if p.log.hang_closing.load(Ordering::SeqCst) {
                    std::future::pending::<()>().await;
                }
                if p.log.fail_closing.load(Ordering::SeqCst) {
                    return Err("closing refused by the test".into());
                }
                Ok(())
            })
        })
        .on_relocation_ready_completed(|p, outcome| {
            p.log.push(Ev::Ready {
                node: p.node,
                outcome,
            });
            Box::pin(async move {
                if outcome == RelocationReadyOutcome::Relocated {
                    // Widens the window in which held or direct work could overtake it.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok(())
            })
        })
    }
}

/// A root with one MeshNode: a server of `room`, `desk` and `guest` (with an Entry Spot
/// closing callback), or a client.
async fn root(h: &Harness, role: ObjectRole, node: Node, log: &Arc<Log>) -> (ZLinkHost, MeshNode) {
    let relocation: Arc<dyn DynRelocationStore> = Arc::new(MemoryRelocationStore::new());
    let log = Arc::clone(log);
    let host = ZLink::builder()
        .location_store(Arc::clone(&h.store))
        .relocation_store(relocation)
        .location_options(fast_options())
        .route_mesh(mesh(), move |n| {
            let n = n.object_role(role);
            if role != ObjectRole::Server {
                return n;
            }
            let entry_log = Arc::clone(&log);
            let guest_log = Arc::clone(&log);
            n.user_spot_type::<Place>("room", {
                let room = place_type(node, ObjectKind::UserSpot, &log);
                move |t| {
                    room(t)
                        .execution(SpotExecution::SpotWide)
                        .readiness(node.readiness)
                }
            })
            .instance_spot_type::<Place>("desk", place_type(node, ObjectKind::InstanceSpot, &log))
            .actor_type::<Guest>("guest", move |t| {
                t.factory(move |_ctx| {
                    let log = Arc::clone(&guest_log);
                    async move {
                        Ok(Guest {
                            node: node.label,
                            log,
                            applied: 0,
                        })
                    }
                })
                .recreate_on_relocation()
                .on_request::<Step, _>(|g, step, _ctx| {
                    g.applied += 1;
                    g.log.push(Ev::Handled {
                        node: g.node,
                        what: "guest".into(),
                    });
                    Box::pin(async move { Ok(step.seq) })
                })
                .on_request::<Totals, _>(|g, _t, _ctx| {
                    let t = (0, g.applied, 0);
                    Box::pin(async move { Ok(t) })
                })
            })
            .on_entry_spot_closing(move |ctx| {
                entry_log.push(Ev::Closing {
                    node: node.label,
                    id: ctx.id.clone(),
                    reason: ctx.reason,
                    owner: None,
                });
                async { Ok(()) }
            })
        })
        .build()
        .start()
        .await
        .expect("the host starts");
    let mesh_node = host.node(&mesh()).expect("the node");
    (host, mesh_node)
}

/// The source server `a` (index 0) holding a room with one guest member and a desk, then
/// the target server `b` (1) and the client (2), all Ready peers.
struct Roots {
    r: Vec<(ZLinkHost, MeshNode)>,
    room: SpotRef,
    log: Arc<Log>,
}

const DESK: &str = "desk-1";
const MEMBER: &str = "guest-1";

async fn roots(h: &Harness, readiness: ReadinessMode, target_refuses: bool) -> Roots {
    let log = Arc::new(Log::default());
    let a = Node {
        label: "a",
        readiness,
        refuses: false,
    };
    let b = Node {
        label: "b",
        readiness,
        refuses: target_refuses,
    };
    let source = root(h, ObjectRole::Server, a, &log).await;
    let client = root(h, ObjectRole::Client, a, &log).await;
    *log.reader.lock() = Some(client.0.object_host(0));
    wait_connected([&source, &client]).await;
    let room = source
        .0
        .spots()
        .expect("spots")
        .create("room")
        .await
        .expect("room");
    source
        .0
        .actors()
        .expect("actors")
        .get_or_create("guest", MEMBER)
        .in_spot(&room)
        .await
        .expect("member");
    let spots = client.0.spots().expect("spots");
    assert_eq!(
        spots
            .instance(DESK)
            .stable_type("desk")
            .request(&Knock)
            .await
            .expect("desk"),
        1
    );
    let r = vec![source, root(h, ObjectRole::Server, b, &log).await, client];
    wait_connected(&r).await;
    Roots { r, room, log }
}

impl Roots {
    fn rid(&self, i: usize) -> RoutingId {
        self.r[i].1.routing_id().clone()
    }

    async fn knock(&self) -> u64 {
        let spots = self.r[2].0.spots().expect("spots");
        spots
            .request(self.room.id.as_str(), &Knock)
            .await
            .expect("knock")
    }

    async fn signal(&self) -> bool {
        let spots = self.r[2].0.spots().expect("spots");
        spots
            .request(self.room.id.as_str(), &Signal)
            .await
            .expect("signal")
    }

    /// The room's readiness on the source, once its activation is live there.
    fn source_readiness(&self) -> Arc<crate::objects::lifecycle::Readiness> {
        let key = (AuthorityKind::Spot, self.room.id.clone());
        self.r[0]
            .0
            .object_host(0)
            .live_object(&key)
            .and_then(|l| l.readiness())
            .expect("an ApplicationSignaled room")
    }

    /// Starts the SpotWide move of the room from the source.
    fn start_move(&self) -> tokio::task::JoinHandle<Result<(), ZLinkError>> {
        let client = self.r[0].0.actors().expect("actors").client;
        let id = self.room.id.clone();
        tokio::spawn(async move {
            crate::relocation::relocate_spot_wide(&client, &id, None, None).await
        })
    }

    async fn room_owner(&self) -> RoutingId {
        super::spot_wide::spot_record(&self.r[2].0, &self.room)
            .await
            .0
    }

    async fn shutdown(self) {
        *self.log.reader.lock() = None;
        for (host, _) in self.r {
            host.shutdown().await;
        }
    }
}

on_every_store!(
    on_closing_relocation_out_runs_on_the_source_after_the_location_change,
    entry_spot_never_gets_a_closing_callback,
    application_signaled_spot_moves_only_at_its_signal,
    ready_completed_is_the_first_turn_on_the_target,
    continued_runs_when_no_relocation_was_ready,
    a_spot_that_never_signals_blocks_the_relocate_with_deadline_exceeded,
);

async fn on_closing_relocation_out_runs_on_the_source_after_the_location_change(h: &Harness) {
    let r = roots(h, ReadinessMode::AnyTurnBoundary, false).await;
    assert_eq!(r.knock().await, 1);
    assert!(r.log.closings().is_empty(), "nothing closed yet");
    super::spot_wide::relocate(&r.r[0].0, &r.room)
        .await
        .expect("the room moved");
    let client = r.r[0].0.spots().expect("spots").client;
    let desk = ObjectId::new(DESK).expect("id");
    crate::relocation::relocate_instance_spot(&client, &desk, None)
        .await
        .expect("the desk moved");
    let closings = r.log.closings();
    let to = Some(r.rid(1));
    assert_eq!(
        closings,
        vec![
            Ev::Closing {
                node: "a",
                id: r.room.id.as_str().to_owned(),
                reason: ClosingReason::RelocationOut,
                owner: to.clone(),
            },
            Ev::Closing {
                node: "a",
                id: DESK.to_owned(),
                reason: ClosingReason::RelocationOut,
                owner: to,
            },
        ],
        "once per Spot, on the source, with the record already naming the target"
    );
    assert_eq!(r.knock().await, 2, "the room serves on the target");
    // A member Actor moved with the room and got no callback of its own; the room's
    // relocation-ready callback is ApplicationSignaled only.
    assert!(r.log.readies().is_empty());
    r.shutdown().await;
}

async fn entry_spot_never_gets_a_closing_callback(h: &Harness) {
    let r = roots(h, ReadinessMode::AnyTurnBoundary, false).await;
    let actors = r.r[2].0.actors().expect("actors");
    let entry_member = actors
        .get_or_create("guest", "entry-guest")
        .await
        .expect("an Entry Spot member");
    let source = if entry_member.node == r.rid(0) { 0 } else { 1 };
    let client = r.r[source].0.actors().expect("actors").client;
    crate::relocation::relocate_actor(&client, &entry_member, None)
        .await
        .expect("the Entry Spot member moved");
    assert!(
        r.log.closings().is_empty(),
        "an Entry Spot member move closes no Spot: {:?}",
        r.log.closings()
    );
    // The Entry Spot's callback is registered: it runs at shutdown (HostShutdown only).
    let log = Arc::clone(&r.log);
    let entry = r.r[source]
        .0
        .object_host(0)
        .entry_spot
        .as_ref()
        .map(|id| id.as_str().to_owned());
    r.shutdown().await;
    let entry_closings: Vec<_> = log
        .closings()
        .into_iter()
        .filter(|e| matches!(e, Ev::Closing { id, .. } if Some(id) == entry.as_ref()))
        .collect();
    assert_eq!(entry_closings.len(), 1, "{entry_closings:?}");
    assert!(matches!(
        entry_closings[0],
        Ev::Closing {
            reason: ClosingReason::HostShutdown,
            ..
        }
    ));
}

async fn application_signaled_spot_moves_only_at_its_signal(h: &Harness) {
    let r = roots(h, ReadinessMode::ApplicationSignaled, false).await;
    let readiness = r.source_readiness();
    let moving = r.start_move();
    wait_until("the move waits at its seal", || readiness.waiting()).await;
    // Turn boundaries without a signal: the room keeps serving here and does not move.
    for want in 1..=3 {
        assert_eq!(r.knock().await, want);
    }
    assert!(
        !moving.is_finished(),
        "no turn boundary but the signal moves it"
    );
    assert_eq!(r.room_owner().await, r.rid(0), "still on the source");
    assert!(r.signal().await, "the boundary was registered");
    moving.await.expect("task").expect("moved at the signal");
    assert_eq!(r.room_owner().await, r.rid(1));
    assert_eq!(r.knock().await, 4, "the state moved");
    assert_eq!(
        r.log.readies(),
        vec![Ev::Ready {
            node: "b",
            outcome: RelocationReadyOutcome::Relocated,
        }],
        "the boundary was consumed: no Continued"
    );
    r.shutdown().await;
}

async fn ready_completed_is_the_first_turn_on_the_target(h: &Harness) {
    let r = roots(h, ReadinessMode::ApplicationSignaled, false).await;
    let readiness = r.source_readiness();
    let moving = r.start_move();
    wait_until("the move waits at its seal", || readiness.waiting()).await;
    // Work for the room and its member arriving at the seal and after: held, relayed or
    // direct on the target, it must all run after the callback there.
    let spots = r.r[2].0.spots().expect("spots");
    let actors = r.r[2].0.actors().expect("actors");
    let room = r.room.id.as_str().to_owned();
    let mut work = tokio::task::JoinSet::new();
    // Once the target built the group (its temporary queues registered), a knock reaches the
    // target directly and waits in its temporary queue.
    let target = r.r[1].0.object_host(0);
    let key = (AuthorityKind::Spot, r.room.id.clone());
    let direct = Arc::new(Mutex::new(None));
    let seen = Arc::clone(&direct);
    let hook: crate::relocation::StageHook = Arc::new(move |stage| {
        let (target, key, seen) = (Arc::clone(&target), key.clone(), Arc::clone(&seen));
        Box::pin(async move {
            if stage == zlink_relocation::unit::RecordedStage::Prepared {
                let (tx, rx) = tokio::sync::oneshot::channel();
                let done = crate::objects::live::Completion::from(tx);
                let taken = target.deliver(&key, RouteKind::Request, knock(&key), 0, Some(done));
                *seen.lock() = Some((taken.is_ok(), rx));
            }
        })
    });
    r.r[0]
        .0
        .object_host(0)
        .relocations()
        .probe
        .on_stage(Some(hook));
    assert!(r.signal().await);
    for seq in 1..=5 {
        let (spots, actors, room) = (spots.clone(), actors.clone(), room.clone());
        work.spawn(async move {
            spots.request(&room, &Knock).await.expect("knock");
            actors
                .request(MEMBER, &Step { stream: 0, seq })
                .await
                .expect("step");
        });
    }
    moving.await.expect("task").expect("moved");
    while let Some(done) = work.join_next().await {
        done.expect("work");
    }
    let (taken, reply) = direct.lock().take().expect("the direct knock was sent");
    assert!(taken, "the target's temporary queue took the direct knock");
    reply
        .await
        .expect("answered")
        .expect("the direct knock ran");
    assert_eq!(r.knock().await, 7, "every knock ran once");
    let on_target: Vec<Ev> = r
        .log
        .all()
        .into_iter()
        .filter(|e| match e {
            Ev::Handled { node, .. } | Ev::Ready { node, .. } => *node == "b",
            Ev::Closing { .. } => false,
        })
        .collect();
    assert_eq!(
        on_target.first(),
        Some(&Ev::Ready {
            node: "b",
            outcome: RelocationReadyOutcome::Relocated,
        }),
        "the first application turn on the target: {on_target:?}"
    );
    assert!(on_target.len() > 1, "work ran on the target after it");
    r.shutdown().await;
}

/// A `Knock` request for the Spot `key`, as delivered in-process.
fn knock(key: &crate::objects::host::ObjectKey) -> crate::objects::registration::ObjectCall {
    crate::objects::registration::ObjectCall {
        content_type: bytes::Bytes::from_static(b"application/json"),
        payload: bytes::Bytes::from_static(b"null"),
        typed_reply: false,
        context: crate::objects::MessageContext {
            id: key.1.as_str().to_owned(),
            packet: crate::messaging::PacketName::new(Knock::PACKET).expect("packet"),
            metadata: crate::messaging::Metadata::empty(),
            relocation: Default::default(),
            node: Default::default(),
            timers: Default::default(),
        },
        job: crate::mesh::JobPermit::none(),
    }
}

async fn continued_runs_when_no_relocation_was_ready(h: &Harness) {
    // The target refuses the room's restore: a consumed boundary's move is cancelled.
    let r = roots(h, ReadinessMode::ApplicationSignaled, true).await;
    // No move waits: the signal's Continued runs as the next turn, before the next knock.
    let before = r.log.all().len();
    assert!(r.signal().await);
    assert_eq!(r.knock().await, 1);
    let continued = Ev::Ready {
        node: "a",
        outcome: RelocationReadyOutcome::Continued,
    };
    let signal = Ev::Handled {
        node: "a",
        what: "signal".into(),
    };
    let knock = Ev::Handled {
        node: "a",
        what: "knock".into(),
    };
    let tail: Vec<Ev> = r
        .log
        .all()
        .into_iter()
        .skip(before)
        .filter(|e| *e == signal || *e == continued || *e == knock)
        .collect();
    assert_eq!(tail, vec![signal, continued.clone(), knock.clone()]);
    // A move consumes the next boundary, then is cancelled before its commit: the held
    // queue is served here again, then Continued runs.
    let readiness = r.source_readiness();
    let moving = r.start_move();
    wait_until("the move waits at its seal", || readiness.waiting()).await;
    assert!(r.signal().await);
    let err = moving.await.expect("task").expect_err("cancelled");
    assert_eq!(r.room_owner().await, r.rid(0), "the room stays: {err}");
    assert_eq!(r.knock().await, 2, "served on the source");
    let readies = r.log.readies();
    assert_eq!(readies, vec![continued.clone(), continued], "{readies:?}");
    r.shutdown().await;
}

async fn a_spot_that_never_signals_blocks_the_relocate_with_deadline_exceeded(h: &Harness) {
    let r = roots(h, ReadinessMode::ApplicationSignaled, false).await;
    let result = r.r[0]
        .0
        .relocate(RelocateOptions::planned_maintenance().deadline(Duration::from_secs(2)))
        .await
        .expect("valid options");
    assert_eq!(result.outcome, RelocationOutcome::Blocked, "{result:?}");
    assert_eq!(
        result.reason,
        RelocationReason::DeadlineExceeded,
        "{result:?}"
    );
    assert_eq!(
        r.room_owner().await,
        r.rid(0),
        "the room's unit did not start"
    );
    assert_eq!(r.knock().await, 1, "and it serves on the source");
    assert!(r.log.readies().is_empty(), "no boundary, no callback");
    r.shutdown().await;
}
