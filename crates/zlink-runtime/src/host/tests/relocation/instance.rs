//! Live relocation of one Instance Spot (spec 28 §5 table, §6 "Instance Spot", §7 last
//! bullet; 21 §8, §9) between two Object Servers of one mesh, with a third (client) node
//! calling it, and the host Relocate of a host holding Actors and Instance Spots.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::{HostState, ObjectKind, ObjectRole};
use zlink_codec::{ObjectId, RoutingId};

use super::{Incr, Policy, Seen, Snapshot, Step, StepSend, Totals, counter_type};
use crate::host::tests::support::*;
use crate::host::{RelocateOptions, RelocationOutcome, ZLinkHost};
use crate::mesh::node::MeshNode;
use crate::messaging::{BoxError, ErrorKind, ZLinkError};
use crate::objects::instance::Ending;
use crate::objects::{Spot, SpotRef, SpotStateAdapter, SpotType};
use crate::relocation::MovesOf;
use zlink_location::AuthorityRead;
use zlink_testkit::Harness;

mod window;

/// Handlers of [`Block`] for a Spot id registered here wait until it is notified.
static BLOCKS: std::sync::LazyLock<
    parking_lot::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Notify>>>,
> = std::sync::LazyLock::new(Default::default);

/// A request that waits while [`BLOCKS`] holds a gate for the Spot's id.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Block;
impl crate::messaging::Message for Block {
    const PACKET: &'static str = "Block";
}
impl crate::messaging::Request for Block {
    type Reply = u64;
}

/// An Instance Spot keeping, per stream, the last sequence number it applied.
#[derive(Default)]
pub(super) struct Tally {
    total: u64,
    applied: u64,
    last: BTreeMap<u32, u64>,
    out_of_order: u64,
}
impl Spot for Tally {}

impl Tally {
    fn apply(&mut self, stream: u32, seq: u64) {
        let last = self.last.entry(stream).or_insert(0);
        if seq != *last + 1 {
            self.out_of_order += 1;
        }
        *last = seq;
        self.total += seq;
        self.applied += 1;
    }
}

struct TallyAdapter(Arc<Seen>);
impl SpotStateAdapter<Tally> for TallyAdapter {
    fn capture(&self, t: &Tally) -> Result<Vec<u8>, BoxError> {
        self.0.captures.fetch_add(1, Ordering::SeqCst);
        Ok(serde_json::to_vec(&Snapshot {
            total: t.total,
            applied: t.applied,
            last: t.last.clone(),
            out_of_order: t.out_of_order,
        })?)
    }
    fn restore(&self, bytes: &[u8]) -> Result<Tally, BoxError> {
        let s: Snapshot = serde_json::from_slice(bytes)?;
        Ok(Tally {
            total: s.total,
            applied: s.applied,
            last: s.last,
            out_of_order: s.out_of_order,
        })
    }
}

pub(super) fn tally_type(
    policy: Policy,
    seen: Arc<Seen>,
) -> impl FnOnce(SpotType<Tally>) -> SpotType<Tally> {
    move |t| {
        let for_factory = Arc::clone(&seen);
        let t = t
            .factory(move |_ctx| {
                let seen = Arc::clone(&for_factory);
                async move {
                    seen.factories.fetch_add(1, Ordering::SeqCst);
                    Ok(Tally::default())
                }
            })
            .on_request::<Incr, _>(|t, _req, _ctx| {
                Box::pin(async move {
                    t.total += 1;
                    Ok(t.total)
                })
            })
            .on_request::<Step, _>(|t, step, _ctx| {
                Box::pin(async move {
                    t.apply(step.stream, step.seq);
                    Ok(step.seq)
                })
            })
            .on_send::<StepSend, _>(|t, step, _ctx| {
                Box::pin(async move {
                    t.apply(step.stream, step.seq);
                    Ok(())
                })
            })
            .on_request::<Block, _>(|t, _req, ctx| {
                let gate = BLOCKS.lock().get(&ctx.id).cloned();
                Box::pin(async move {
                    if let Some(g) = gate {
                        g.notified().await;
                    }
                    t.total += 1;
                    Ok(t.total)
                })
            })
            .on_request::<Totals, _>(|t, _req, _ctx| {
                Box::pin(async move { Ok((t.total, t.applied, t.out_of_order)) })
            });
        match policy {
            Policy::Disable => t.disable_relocation(),
            Policy::Recreate => t.recreate_on_relocation(),
            Policy::Preserve => t.preserve_state_with(TallyAdapter(seen)),
        }
    }
}

async fn root(
    h: &Harness,
    role: ObjectRole,
    policy: Policy,
    seen: &Arc<Seen>,
) -> (ZLinkHost, MeshNode) {
    let seen = Arc::clone(seen);
    object_root(Arc::clone(&h.store), role, &fast_options(), move |n| {
        n.instance_spot_type::<Tally>("tally", tally_type(policy, Arc::clone(&seen)))
            .actor_type::<super::Counter>("counter", counter_type(policy, seen))
    })
    .await
}

/// Two Object Servers serving `tally` (and `counter`) and one client, all Ready peers.
type Mesh = TestMesh<Arc<Seen>>;

async fn mesh_of(h: &Harness, policy: Policy) -> Mesh {
    let seen = Arc::new(Seen::default());
    let roots = Arc::clone(&seen);
    TestMesh::start(seen, |role| root(h, role, policy, &roots)).await
}

/// The Instance Spot's record: (node, ObjectGeneration, AuthorityOwnerGeneration, version).
async fn record(host: &ZLinkHost, id: &str) -> Option<(RoutingId, u64, u64, String)> {
    let client = host.spots().expect("manager").client;
    let id = ObjectId::new(id).expect("id");
    match client
        .read(ObjectKind::InstanceSpot, &id)
        .await
        .expect("read")
    {
        AuthorityRead::Found { handle, .. } => Some((
            handle.node().routing_id,
            handle.object_generation().get(),
            handle.authority_owner_generation().get(),
            handle.version().as_str().to_owned(),
        )),
        AuthorityRead::Missing { .. } => None,
    }
}

impl Mesh {
    /// The Instance Spot `id`, cold-activated by the client with one Incr (to 1); its owner
    /// and the other server.
    async fn tally_at_one(&self, id: &str) -> (&ZLinkHost, &ZLinkHost) {
        assert_eq!(self.incr(id).await.expect("created"), 1);
        let owner = record(&self.client.0, id).await.expect("record").0;
        self.owner_and_other(&owner)
    }

    async fn incr(&self, id: &str) -> Result<u64, ZLinkError> {
        let spots = self.client.0.spots().expect("manager");
        spots.instance(id).stable_type("tally").request(&Incr).await
    }
}

fn rid_of(host: &ZLinkHost) -> RoutingId {
    host.node(&mesh()).expect("node").routing_id().clone()
}

async fn relocate(from: &ZLinkHost, id: &str) -> Result<SpotRef, ZLinkError> {
    let client = from.spots().expect("manager").client;
    let id = ObjectId::new(id).expect("id");
    crate::relocation::relocate_instance_spot(&client, &id, None).await
}

fn live_on(host: &ZLinkHost, id: &str) -> bool {
    let objects = &host.spots().expect("manager").client.objects;
    objects.is_live(&(AuthorityKind::Spot, ObjectId::new(id).expect("id")))
}

on_every_store!(
    a_preserved_instance_spot_moves_with_its_state_and_generation,
    a_recreated_instance_spot_restarts_from_its_factory,
    a_disabled_instance_spot_is_refused_before_capture_and_keeps_serving,
    messages_sent_to_a_moving_instance_spot_run_once_in_order,
    a_stale_caller_of_a_moved_instance_spot_is_followed,
    a_close_claimed_first_keeps_the_instance_spot_from_moving,
    a_close_after_the_move_began_gets_a_moving_result,
    host_relocate_moves_actors_and_instance_spots,
    a_disabled_instance_spot_blocks_the_host_relocate_before_anything_changes,
    an_instance_spot_whose_first_message_still_runs_does_not_move_until_it_completed,
    a_one_way_arriving_as_its_instance_spot_is_sealed_is_held_for_the_move,
);

async fn a_preserved_instance_spot_moves_with_its_state_and_generation(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (source, target) = m.tally_at_one("room-p").await;
    assert_eq!(m.incr("room-p").await.expect("incr"), 2);
    let before = record(source, "room-p").await.expect("record");
    let factories = m.seen.factories.load(Ordering::SeqCst);
    let moved = relocate(source, "room-p").await.expect("moved");
    assert_eq!(moved.node, rid_of(target));
    assert_eq!(moved.id.as_str(), "room-p", "the same SpotId");
    assert_eq!(moved.generation, before.1, "the same ObjectGeneration");
    let after = record(source, "room-p").await.expect("record");
    assert_eq!(after.0, rid_of(target));
    assert_eq!(after.1, before.1);
    assert!(after.2 > before.2, "a higher AuthorityOwnerGeneration");
    assert_eq!(m.seen.captures.load(Ordering::SeqCst), 1);
    assert_eq!(
        m.seen.factories.load(Ordering::SeqCst),
        factories + 1,
        "the target factory built the instance the adapter restored"
    );
    assert!(!live_on(source, "room-p") && live_on(target, "room-p"));
    assert_eq!(m.incr("room-p").await.expect("incr on the target"), 3);
    // Only the owner moves it: the old owner neither moves nor re-creates it.
    let factories = m.seen.factories.load(Ordering::SeqCst);
    let err = relocate(source, "room-p").await.expect_err("not the owner");
    assert_eq!(err.kind(), ErrorKind::InvalidOperation, "{err}");
    assert_eq!(m.seen.factories.load(Ordering::SeqCst), factories);
    m.shutdown().await;
}

async fn a_recreated_instance_spot_restarts_from_its_factory(h: &Harness) {
    let m = mesh_of(h, Policy::Recreate).await;
    let (source, target) = m.tally_at_one("room-r").await;
    assert_eq!(m.incr("room-r").await.expect("incr"), 2);
    let moved = relocate(source, "room-r").await.expect("moved");
    assert_eq!(moved.node, rid_of(target));
    assert_eq!(
        m.seen.captures.load(Ordering::SeqCst),
        0,
        "nothing captured"
    );
    assert_eq!(m.seen.factories.load(Ordering::SeqCst), 2);
    assert_eq!(
        m.incr("room-r").await.expect("incr"),
        1,
        "the factory's fresh state"
    );
    // An Instance Spot that does not exist is not cold-activated by a move.
    let err = relocate(target, "room-none")
        .await
        .expect_err("nothing to move");
    assert!(matches!(err, ZLinkError::NoRoute { .. }), "{err}");
    assert!(
        record(target, "room-none").await.is_none(),
        "nothing created"
    );
    assert_eq!(m.seen.factories.load(Ordering::SeqCst), 2);
    m.shutdown().await;
}

async fn a_disabled_instance_spot_is_refused_before_capture_and_keeps_serving(h: &Harness) {
    let m = mesh_of(h, Policy::Disable).await;
    let (source, _) = m.tally_at_one("room-d").await;
    let before = record(source, "room-d").await.expect("record");
    let err = relocate(source, "room-d").await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidOperation, "{err}");
    assert_eq!(m.seen.captures.load(Ordering::SeqCst), 0);
    assert_eq!(
        record(source, "room-d").await.expect("record"),
        before,
        "nothing written"
    );
    assert!(live_on(source, "room-d"));
    assert_eq!(m.incr("room-d").await.expect("still serving"), 2);
    m.shutdown().await;
}

async fn messages_sent_to_a_moving_instance_spot_run_once_in_order(h: &Harness) {
    const STREAMS: u32 = 3;
    const STEPS: u64 = 100;
    let m = mesh_of(h, Policy::Preserve).await;
    let (source, target) = m.tally_at_one("room-s").await;
    let started = Arc::new(AtomicUsize::new(0));
    let mut streams = Vec::new();
    for stream in 0..STREAMS {
        let spots = m.client.0.spots().expect("manager");
        let started = Arc::clone(&started);
        streams.push(tokio::spawn(async move {
            for seq in 1..=STEPS {
                let got = spots
                    .instance("room-s")
                    .stable_type("tally")
                    .request(&Step { stream, seq })
                    .await;
                assert_eq!(got.expect("every accepted request is answered"), seq);
                started.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    let sender = m.client.0.spots().expect("manager");
    streams.push(tokio::spawn(async move {
        for seq in 1..=STEPS {
            let step = StepSend {
                stream: STREAMS,
                seq,
            };
            sender
                .instance("room-s")
                .stable_type("tally")
                .send(&step)
                .await
                .expect("every one-way is admitted");
        }
    }));
    wait_until("the streams are running", || {
        started.load(Ordering::SeqCst) >= 15
    })
    .await;
    let moved = relocate(source, "room-s").await.expect("moved");
    assert_eq!(moved.node, rid_of(target));
    for s in streams {
        s.await.expect("stream");
    }
    let per_stream: u64 = STEPS * (STEPS + 1) / 2;
    let all = u64::from(STREAMS + 1);
    let spots = m.client.0.spots().expect("manager");
    let deadline = tokio::time::Instant::now() + WAIT;
    let totals = loop {
        let t = spots
            .instance("room-s")
            .stable_type("tally")
            .request(&Totals)
            .await
            .expect("totals");
        if t.1 >= STEPS * all || tokio::time::Instant::now() > deadline {
            break t;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    assert_eq!(
        totals,
        (per_stream * all + 1, STEPS * all, 0),
        "every step applied once, in order (the first Incr added 1)"
    );
    m.shutdown().await;
}

async fn a_stale_caller_of_a_moved_instance_spot_is_followed(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (source, target) = m.tally_at_one("room-f").await;
    // A direct Spot request caches the owner's route.
    let caller = m.client.0.spots().expect("manager");
    assert_eq!(caller.request("room-f", &Incr).await.expect("direct"), 2);
    let key = (AuthorityKind::Spot, ObjectId::new("room-f").expect("id"));
    assert_eq!(
        caller.client.objects.routes.get(&key).as_deref(),
        Some(&rid_of(source)),
        "the caller caches the old owner"
    );
    relocate(source, "room-f").await.expect("moved");
    // Still sent to the old owner: followed to the new one.
    assert_eq!(caller.request("room-f", &Incr).await.expect("followed"), 3);
    caller.client.objects.routes.forget(&key);
    assert_eq!(caller.request("room-f", &Incr).await.expect("direct"), 4);
    assert_eq!(
        caller.client.objects.routes.get(&key).as_deref(),
        Some(&rid_of(target))
    );
    m.shutdown().await;
}

async fn a_close_claimed_first_keeps_the_instance_spot_from_moving(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (source, _) = m.tally_at_one("room-c").await;
    let before = record(source, "room-c").await.expect("record");
    let id = ObjectId::new("room-c").expect("id");
    let objects = source.spots().expect("manager").client.objects;
    // A Close holds the Spot (between its read and its delete): the move does not start.
    let closing = objects
        .instances
        .endings
        .claim(&id, Ending::Closing)
        .expect("claimed");
    let err = relocate(source, "room-c").await.expect_err("closing first");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert_eq!(m.seen.captures.load(Ordering::SeqCst), 0);
    assert_eq!(record(source, "room-c").await.expect("record"), before);
    drop(closing);
    // The Close completes: the record is gone, and there is nothing left to move.
    let spots = m.client.0.spots().expect("manager");
    let r = spots.find("room-c").await.expect("find").expect("found");
    assert!(spots.close(&r).await.expect("closed"));
    assert!(record(source, "room-c").await.is_none());
    let err = relocate(source, "room-c")
        .await
        .expect_err("nothing to move");
    assert!(matches!(err, ZLinkError::NoRoute { .. }), "{err}");
    m.shutdown().await;
}

async fn a_close_after_the_move_began_gets_a_moving_result(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (source, target) = m.tally_at_one("room-m").await;
    let spots = m.client.0.spots().expect("manager");
    let stale_ref = spots.find("room-m").await.expect("find").expect("found");
    let id = ObjectId::new("room-m").expect("id");
    let objects = source.spots().expect("manager").client.objects;
    // A move holds the Spot: a Close gets the moving result and changes nothing.
    let moving = objects
        .instances
        .endings
        .claim(&id, Ending::Moving)
        .expect("claimed");
    let before = record(source, "room-m").await.expect("record");
    let err = spots.close(&stale_ref).await.expect_err("moving");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("moving"), "{err}");
    assert_eq!(record(source, "room-m").await.expect("record"), before);
    drop(moving);
    // A real move: a Close sent to the old owner in its follow window is not applied there.
    relocate(source, "room-m").await.expect("moved");
    let key = (AuthorityKind::Spot, id.clone());
    let err = objects
        .end(&key, stale_ref.generation, None)
        .await
        .expect_err("moved away");
    assert!(err.to_string().contains("moving"), "{err}");
    assert_eq!(
        record(source, "room-m").await.expect("record").0,
        rid_of(target)
    );
    // A Close that reads the record now reaches the new owner and completes.
    assert!(spots.close(&stale_ref).await.expect("closed"));
    assert!(record(source, "room-m").await.is_none());
    m.shutdown().await;
}

async fn host_relocate_moves_actors_and_instance_spots(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let source = &m.servers[0].0;
    let on = rid_of(source);
    // Two counters and two Instance Spots on server 0, each at 1.
    let actors = m.client.0.actors().expect("manager");
    let (mut counters, mut rooms) = (Vec::new(), Vec::new());
    for i in 0..60 {
        if counters.len() < 2 {
            let id = format!("hc-{i}");
            let r = actors.get_or_create("counter", &id).await.expect("created");
            assert_eq!(actors.request(&id, &Incr).await.expect("incr"), 1);
            if r.node == on {
                counters.push(id);
            }
        }
        if rooms.len() < 2 {
            let id = format!("hr-{i}");
            assert_eq!(m.incr(&id).await.expect("created"), 1);
            if record(source, &id).await.expect("record").0 == on {
                rooms.push(id);
            }
        }
    }
    assert_eq!(
        (counters.len(), rooms.len()),
        (2, 2),
        "placement chose server 0"
    );
    let result = source
        .relocate(RelocateOptions::planned_maintenance())
        .await
        .expect("valid options");
    assert_eq!(result.outcome, RelocationOutcome::Relocated, "{result:?}");
    assert_eq!(source.state(), HostState::Relocated);
    assert!(result.moved >= 4, "{result:?}");
    let other = rid_of(&m.servers[1].0);
    for id in &rooms {
        assert_eq!(record(source, id).await.expect("record").0, other);
        assert_eq!(m.incr(id).await.expect("incr"), 2, "{id} kept its state");
    }
    for id in &counters {
        assert_eq!(actors.request(id, &Incr).await.expect("incr"), 2);
    }
    m.shutdown().await;
}

/// Cold-activates Instance Spots through the client until one lives on `host`; its id.
async fn room_on(m: &Mesh, host: &ZLinkHost, prefix: &str) -> String {
    let on = rid_of(host);
    for i in 0..60 {
        let id = format!("{prefix}-{i}");
        assert_eq!(m.incr(&id).await.expect("created"), 1);
        if record(host, &id).await.expect("record").0 == on {
            return id;
        }
    }
    panic!("placement never chose the host");
}

async fn a_disabled_instance_spot_blocks_the_host_relocate_before_anything_changes(h: &Harness) {
    let m = mesh_of(h, Policy::Disable).await;
    let source = &m.servers[0].0;
    let id = room_on(&m, source, "hd").await;
    let before = record(source, &id).await.expect("record");
    let result = source
        .relocate(RelocateOptions::planned_maintenance())
        .await
        .expect("valid options");
    assert_eq!(result.outcome, RelocationOutcome::Blocked, "{result:?}");
    assert_eq!(
        result.reason,
        crate::host::RelocationReason::RelocationDisabled
    );
    assert_eq!(source.state(), HostState::Serving);
    assert_eq!(record(source, &id).await.expect("record"), before);
    assert_eq!(m.seen.captures.load(Ordering::SeqCst), 0);
    assert_eq!(m.incr(&id).await.expect("still serving"), 2);
    m.shutdown().await;
}

async fn an_instance_spot_whose_first_message_still_runs_does_not_move_until_it_completed(
    h: &Harness,
) {
    let m = mesh_of(h, Policy::Preserve).await;
    let id = format!("room-busy-{}", uuid::Uuid::new_v4().simple());
    let gate = Arc::new(tokio::sync::Notify::new());
    BLOCKS.lock().insert(id.clone(), Arc::clone(&gate));
    let spots = m.client.0.spots().expect("manager");
    let first = {
        let id = id.clone();
        tokio::spawn(async move {
            spots
                .instance(&id)
                .stable_type("tally")
                .request(&Block)
                .await
        })
    };
    // Ready, its first message running (the record still carries the recovery root).
    let mut owner = None;
    for _ in 0..500 {
        if let Some(r) = record(&m.client.0, &id).await {
            let host = m.servers.iter().find(|(_, n)| n.routing_id() == &r.0);
            if let Some((host, _)) = host.filter(|(host, _)| live_on(host, &id)) {
                owner = Some(host);
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let source = owner.expect("the Spot became live");
    let before = record(source, &id).await.expect("record");
    let err = relocate(source, &id)
        .await
        .expect_err("first message running");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert_eq!(
        record(source, &id).await.expect("record"),
        before,
        "nothing written"
    );
    assert_eq!(m.seen.captures.load(Ordering::SeqCst), 0);
    BLOCKS.lock().remove(&id);
    gate.notify_one();
    assert_eq!(first.await.expect("task").expect("answered"), 1);
    // Once the first message completed (the root removed), it moves.
    let mut moved = None;
    for _ in 0..500 {
        match relocate(source, &id).await {
            Ok(r) => {
                moved = Some(r);
                break;
            }
            Err(e) if e.kind() == ErrorKind::Unavailable => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_ne!(moved.expect("moved").node, rid_of(source));
    assert_eq!(m.incr(&id).await.expect("incr"), 2, "state kept");
    m.shutdown().await;
}

/// Issue 20: an activation one-way that reaches the live Instance Spot as a move seals it (the
/// seal falls between the gate check and the submit) is held for the move like any message
/// arriving at the seal, and its caller is answered once it was relayed. Before, it was
/// submitted to the sealed activation, where it could run after the capture: its effect was
/// lost with the old state, though its caller had been told it was admitted.
async fn a_one_way_arriving_as_its_instance_spot_is_sealed_is_held_for_the_move(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (source, _) = m.tally_at_one("room-a").await;
    let key = (AuthorityKind::Spot, ObjectId::new("room-a").expect("id"));
    let objects = Arc::clone(&source.spots().expect("manager").client.objects);
    let sealed_key = key.clone();
    let hook: crate::relocation::ArrivalHook = Arc::new(move |relocations, k| {
        if k == &sealed_key {
            relocations.seal_for_tests(k);
        }
    });
    objects.relocations().probe.on_arrival(Some(hook));
    let sender = m.client.0.spots().expect("manager");
    let sending = tokio::spawn(async move {
        let step = StepSend { stream: 0, seq: 1 };
        sender
            .instance("room-a")
            .stable_type("tally")
            .send(&step)
            .await
    });
    wait_until("the source holds the one-way", || {
        objects.relocations().held_len(&key) >= 1
    })
    .await;
    objects.relocations().probe.on_arrival(None);
    assert!(!sending.is_finished(), "its caller waits for the relay");
    let relayable = objects.relocations().take_relayable_for_tests(&key);
    assert_eq!(relayable.len(), 1, "relayed with the envelope it got here");
    for mut held in relayable {
        if let Some(done) = held.reply.take() {
            done.handed_over();
        }
    }
    sending.await.expect("task").expect("admitted once relayed");
    m.shutdown().await;
}
