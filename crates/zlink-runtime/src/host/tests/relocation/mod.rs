//! Live relocation of one Entry Spot member Actor between two Object Servers of one mesh, with
//! a third (client) node messaging it by id.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::{ObjectKind, ObjectRole};
use zlink_relocation::unit::RecordedStage;
use zlink_store_spi::{DynRelocationStore, MemoryRelocationStore};

use super::support::*;
use crate::host::ZLinkHost;
use crate::host::config::ZLink;
use crate::mesh::node::MeshNode;
use crate::messaging::{BoxError, ErrorKind, Message, Request};
use crate::objects::{Actor, ActorRef, ActorStateAdapter, ActorType};
use zlink_location::AuthorityRead;
use zlink_testkit::Harness;

mod aggregate_gate;
mod answer_faults;
mod attempts;
mod callbacks;
mod completion;
mod completion_lost;
mod completion_stale;
mod drops;
mod follow;
mod follow_reply;
mod gate;
mod gate_memory;
mod host;
mod instance;
mod lost_owner_change;
mod member;
mod order;
mod owner_change_faults;
mod past_ready;
mod per_actor;
mod ready_deadline;
mod rollback;
mod settle;
mod source_order;
mod spot_wide;
mod stages;
mod store_outage;
mod target_faults;
mod target_order;
mod targets;

/// Which relocation policy the counter type chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    Disable,
    Recreate,
    Preserve,
}

/// What the tests observe of every node's counters.
#[derive(Default)]
struct Seen {
    factories: AtomicUsize,
    drops: AtomicUsize,
    captures: AtomicUsize,
    /// Counters the adapter restored (each a new instance, like a factory run).
    restores: AtomicUsize,
    /// Restores fail while set.
    fail_restore: AtomicBool,
    /// So many of the next restores fail (each failure counts one down).
    failing_restores: AtomicUsize,
    /// So many of the next captures fail (each failure counts one down).
    failing_captures: AtomicUsize,
    /// Captures produce 64 MiB + 1 bytes while set.
    oversize_capture: AtomicBool,
    /// A [`Gated`] request finishes only once this is set.
    release: AtomicBool,
    /// A [`Parked`] request finishes only once this is set.
    unpark: AtomicBool,
}

/// Counts `n` down by one unless it is zero; whether it was not.
fn take_one(n: &AtomicUsize) -> bool {
    n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| v.checked_sub(1))
        .is_ok()
}

/// A counter keeping, per stream, the last sequence number it applied.
#[derive(Default)]
struct Counter {
    total: u64,
    applied: u64,
    last: BTreeMap<u32, u64>,
    out_of_order: u64,
    seen: Option<Arc<Seen>>,
}
impl Actor for Counter {}

impl Counter {
    /// Applies step `seq` of `stream`, counting a step that does not follow the last one.
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
impl Drop for Counter {
    fn drop(&mut self) {
        if let Some(s) = &self.seen {
            s.drops.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Incr;
impl Message for Incr {
    const PACKET: &'static str = "Incr";
}
impl Request for Incr {
    type Reply = u64;
}

/// One step of stream `stream` with sequence number `seq` adding `seq` to the total.
#[derive(Debug, Serialize, Deserialize)]
struct Step {
    stream: u32,
    seq: u64,
}
impl Message for Step {
    const PACKET: &'static str = "Step";
}
impl Request for Step {
    type Reply = u64;
}

/// The one-way form of [`Step`].
#[derive(Debug, Serialize, Deserialize)]
struct StepSend {
    stream: u32,
    seq: u64,
}
impl Message for StepSend {
    const PACKET: &'static str = "StepSend";
}

/// Adds one once [`Seen::release`] is set (a request that is still running when a test wants
/// it to), and answers the total.
#[derive(Debug, Serialize, Deserialize)]
struct Gated;
impl Message for Gated {
    const PACKET: &'static str = "Gated";
}
impl Request for Gated {
    type Reply = u64;
}

/// [`Gated`] waiting for [`Seen::unpark`] instead (a second request a test holds apart).
#[derive(Debug, Serialize, Deserialize)]
struct Parked;
impl Message for Parked {
    const PACKET: &'static str = "Parked";
}
impl Request for Parked {
    type Reply = u64;
}

/// (total, applied, out-of-order) of the counter.
#[derive(Debug, Serialize, Deserialize)]
struct Totals;
impl Message for Totals {
    const PACKET: &'static str = "Totals";
}
impl Request for Totals {
    type Reply = (u64, u64, u64);
}

/// Reads the counter Actor `id`'s [`Totals`] through `caller` until at least `applied` steps
/// are applied (the last one-ways may still be on their way) or [`WAIT`] passes; returns the
/// last read.
async fn totals_once_applied(
    caller: &crate::objects::ActorManager,
    id: &str,
    applied: u64,
) -> (u64, u64, u64) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let t = caller.request(id, &Totals).await.expect("totals");
        if t.1 >= applied || tokio::time::Instant::now() > deadline {
            return t;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[derive(Serialize, Deserialize)]
struct Snapshot {
    total: u64,
    applied: u64,
    last: BTreeMap<u32, u64>,
    out_of_order: u64,
}

struct Adapter(Arc<Seen>);
impl ActorStateAdapter<Counter> for Adapter {
    fn capture(&self, c: &Counter) -> Result<Vec<u8>, BoxError> {
        self.0.captures.fetch_add(1, Ordering::SeqCst);
        if take_one(&self.0.failing_captures) {
            return Err("capture refused by the test".into());
        }
        if self.0.oversize_capture.load(Ordering::SeqCst) {
            return Ok(vec![0; zlink_relocation::unit::MAX_STATE_LEN as usize + 1]);
        }
        Ok(serde_json::to_vec(&Snapshot {
            total: c.total,
            applied: c.applied,
            last: c.last.clone(),
            out_of_order: c.out_of_order,
        })?)
    }
    fn restore(&self, bytes: &[u8]) -> Result<Counter, BoxError> {
        if self.0.fail_restore.load(Ordering::SeqCst) || take_one(&self.0.failing_restores) {
            return Err("restore refused by the test".into());
        }
        let s: Snapshot = serde_json::from_slice(bytes)?;
        self.0.restores.fetch_add(1, Ordering::SeqCst);
        Ok(Counter {
            total: s.total,
            applied: s.applied,
            last: s.last,
            out_of_order: s.out_of_order,
            seen: Some(Arc::clone(&self.0)),
        })
    }
}

fn counter_type(
    policy: Policy,
    seen: Arc<Seen>,
) -> impl FnOnce(ActorType<Counter>) -> ActorType<Counter> {
    move |t| {
        let for_factory = Arc::clone(&seen);
        let t = t
            .factory(move |_ctx| {
                let seen = Arc::clone(&for_factory);
                async move {
                    seen.factories.fetch_add(1, Ordering::SeqCst);
                    let mut c = Counter::default();
                    c.seen = Some(seen);
                    Ok(c)
                }
            })
            .on_request::<Incr, _>(|c, _req, _ctx| {
                Box::pin(async move {
                    c.total += 1;
                    Ok(c.total)
                })
            })
            .on_request::<Step, _>(|c, step, _ctx| {
                Box::pin(async move {
                    c.apply(step.stream, step.seq);
                    Ok(step.seq)
                })
            })
            .on_send::<StepSend, _>(|c, step, _ctx| {
                Box::pin(async move {
                    c.apply(step.stream, step.seq);
                    Ok(())
                })
            })
            .on_request::<Gated, _>(|c, _req, _ctx| {
                Box::pin(async move {
                    let seen = c.seen.clone();
                    for _ in 0..2000 {
                        if seen
                            .as_ref()
                            .is_none_or(|s| s.release.load(Ordering::SeqCst))
                        {
                            break;
                        }
                        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    }
                    c.total += 1;
                    Ok(c.total)
                })
            })
            .on_request::<Parked, _>(|c, _req, _ctx| {
                Box::pin(async move {
                    let seen = c.seen.clone();
                    for _ in 0..2000 {
                        if seen
                            .as_ref()
                            .is_none_or(|s| s.unpark.load(Ordering::SeqCst))
                        {
                            break;
                        }
                        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    }
                    c.total += 1;
                    Ok(c.total)
                })
            })
            .on_request::<Totals, _>(|c, _req, _ctx| {
                Box::pin(async move { Ok((c.total, c.applied, c.out_of_order)) })
            });
        match policy {
            Policy::Disable => t.disable_relocation(),
            Policy::Recreate => t.recreate_on_relocation(),
            Policy::Preserve => t.preserve_state_with(Adapter(seen)),
        }
    }
}

/// Two counter Object Servers and one client node over the harness's store, all Ready peers.
type Mesh = TestMesh<Arc<Seen>>;

async fn root(
    h: &Harness,
    role: ObjectRole,
    policy: Policy,
    seen: &Arc<Seen>,
    options: &impl RootOptions,
) -> (ZLinkHost, MeshNode) {
    let spec = host::Spec {
        role,
        policy,
        version: 0,
        wave: None,
    };
    host::start_root(h, spec, seen, options).await
}

async fn mesh_of(h: &Harness, policy: Policy) -> Mesh {
    mesh_with(h, policy, fast_options()).await
}

async fn mesh_with(h: &Harness, policy: Policy, options: impl RootOptions) -> Mesh {
    let seen = Arc::new(Seen::default());
    let roots = Arc::clone(&seen);
    let options = &options;
    TestMesh::start(seen, |role| root(h, role, policy, &roots, options)).await
}

impl Mesh {
    /// The client's Actor manager and the counter `id`, created and incremented once (to 1).
    async fn counter_at_one(&self, id: &str) -> (crate::objects::ActorManager, ActorRef) {
        let caller = self.client.0.actors().expect("manager");
        let r = caller.get_or_create("counter", id).await.expect("created");
        assert_eq!(caller.request(id, &Incr).await.expect("incr"), 1);
        (caller, r)
    }
}

fn rid_of(host: &ZLinkHost) -> zlink_codec::RoutingId {
    host.node(&mesh()).expect("node").routing_id().clone()
}

async fn relocate(
    from: &ZLinkHost,
    r: &ActorRef,
) -> Result<ActorRef, crate::messaging::ZLinkError> {
    let client = from.actors().expect("manager").client;
    crate::relocation::relocate_actor(&client, r, None).await
}

/// The Actor's record as stored: (node, AuthorityOwnerGeneration, StoreVersion).
async fn record(host: &ZLinkHost, id: &str) -> (zlink_codec::RoutingId, u64, String) {
    let client = host.actors().expect("manager").client;
    let id = zlink_codec::ObjectId::new(id).expect("id");
    match client.read(ObjectKind::Actor, &id).await.expect("read") {
        AuthorityRead::Found { handle, .. } => (
            handle.node().routing_id,
            handle.authority_owner_generation().get(),
            handle.version().as_str().to_owned(),
        ),
        AuthorityRead::Missing { .. } => panic!("the record is missing"),
    }
}

on_every_store!(
    preserved_actor_moves_with_its_state_and_keeps_serving,
    recreated_actor_moves_and_restarts_from_its_factory,
    disabled_actor_is_rejected_before_capture_and_keeps_serving,
    messages_sent_during_a_move_run_once_in_order,
    a_stale_caller_is_followed_to_the_new_owner,
    a_failed_restore_cancels_and_the_source_serves_again,
    without_message_follow_a_stale_caller_rereads_and_reaches_the_new_owner,
    a_target_that_does_not_offer_the_type_is_refused_and_the_actor_stays,
);

async fn preserved_actor_moves_with_its_state_and_keeps_serving(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let caller = m.client.0.actors().expect("manager");
    let r = caller
        .get_or_create("counter", "p1")
        .await
        .expect("created");
    for want in 1..=3 {
        assert_eq!(caller.request("p1", &Incr).await.expect("incr"), want);
    }
    let (source, target) = m.owner_and_other(&r);
    let before = record(source, "p1").await;
    let moved = relocate(source, &r).await.expect("moved");
    assert_eq!(moved.node, rid_of(target));
    assert_eq!(
        moved.generation, r.generation,
        "the incarnation moves, it is not recreated"
    );
    let after = record(source, "p1").await;
    assert_eq!(after.0, rid_of(target));
    assert!(after.1 > before.1, "a new AuthorityOwnerGeneration");
    assert_ne!(after.2, before.2, "a new StoreVersion");
    // The state came along; the source's state was dropped exactly once (with the target
    // factory's state the restored one replaced).
    assert_eq!(m.seen.captures.load(Ordering::SeqCst), 1);
    assert_eq!(m.seen.drops.load(Ordering::SeqCst), 2);
    assert_eq!(caller.request("p1", &Incr).await.expect("incr"), 4);
    let fresh = target.actors().expect("manager");
    assert_eq!(fresh.request("p1", &Incr).await.expect("incr"), 5);
    assert_eq!(caller.find("p1").await.expect("find"), Some(moved));
    m.shutdown().await;
}

async fn recreated_actor_moves_and_restarts_from_its_factory(h: &Harness) {
    let m = mesh_of(h, Policy::Recreate).await;
    let caller = m.client.0.actors().expect("manager");
    let r = caller
        .get_or_create("counter", "r1")
        .await
        .expect("created");
    for want in 1..=3 {
        assert_eq!(caller.request("r1", &Incr).await.expect("incr"), want);
    }
    let (source, target) = m.owner_and_other(&r);
    let moved = relocate(source, &r).await.expect("moved");
    assert_eq!(moved.node, rid_of(target));
    assert_eq!(
        m.seen.factories.load(Ordering::SeqCst),
        2,
        "the target ran the factory"
    );
    assert_eq!(
        m.seen.drops.load(Ordering::SeqCst),
        1,
        "the source state dropped once"
    );
    assert_eq!(
        caller.request("r1", &Incr).await.expect("incr"),
        1,
        "a fresh state"
    );
    m.shutdown().await;
}

async fn disabled_actor_is_rejected_before_capture_and_keeps_serving(h: &Harness) {
    let m = mesh_of(h, Policy::Disable).await;
    let (caller, r) = m.counter_at_one("d1").await;
    let (source, _) = m.owner_and_other(&r);
    let before = record(source, "d1").await;
    let err = relocate(source, &r).await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidOperation);
    assert_eq!(
        record(source, "d1").await,
        before,
        "the record is untouched"
    );
    assert_eq!(m.seen.drops.load(Ordering::SeqCst), 0);
    assert_eq!(caller.request("d1", &Incr).await.expect("incr"), 2);
    m.shutdown().await;
}

async fn messages_sent_during_a_move_run_once_in_order(h: &Harness) {
    // Three request streams, each waiting for every answer, and one pipelined one-way stream,
    // all from the client node while the Actor moves.
    const STREAMS: u32 = 3;
    const STEPS: u64 = 150;
    let m = mesh_of(h, Policy::Preserve).await;
    let caller = m.client.0.actors().expect("manager");
    let r = caller
        .get_or_create("counter", "s1")
        .await
        .expect("created");
    let started = Arc::new(AtomicUsize::new(0));
    let mut streams = Vec::new();
    for stream in 0..STREAMS {
        let caller = m.client.0.actors().expect("manager");
        let started = Arc::clone(&started);
        streams.push(tokio::spawn(async move {
            for seq in 1..=STEPS {
                let got = caller.request("s1", &Step { stream, seq }).await;
                assert_eq!(got.expect("every accepted request is answered"), seq);
                started.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    let sender = m.client.0.actors().expect("manager");
    streams.push(tokio::spawn(async move {
        for seq in 1..=STEPS {
            let step = StepSend {
                stream: STREAMS,
                seq,
            };
            sender
                .send("s1", &step)
                .await
                .expect("every one-way is admitted");
            tokio::task::yield_now().await;
        }
    }));
    wait_until("the streams are running", || {
        started.load(Ordering::SeqCst) >= 20
    })
    .await;
    let (source, target) = m.owner_and_other(&r);
    let moved = relocate(source, &r).await.expect("moved");
    assert_eq!(moved.node, rid_of(target));
    for s in streams {
        s.await.expect("stream");
    }
    let per_stream: u64 = STEPS * (STEPS + 1) / 2;
    let all = u64::from(STREAMS + 1);
    let totals = totals_once_applied(&caller, "s1", STEPS * all).await;
    assert_eq!(
        totals,
        (per_stream * all, STEPS * all, 0),
        "every step applied once, in order"
    );
    assert_eq!(record(source, "s1").await.0, rid_of(target));
    m.shutdown().await;
}

async fn a_stale_caller_is_followed_to_the_new_owner(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (caller, r) = m.counter_at_one("f1").await;
    let key = (
        AuthorityKind::Actor,
        zlink_codec::ObjectId::new("f1").expect("id"),
    );
    let cached = caller.client.objects.routes.get(&key);
    assert_eq!(
        cached.as_deref(),
        Some(&r.node),
        "the caller caches the old owner"
    );
    let (source, target) = m.owner_and_other(&r);
    relocate(source, &r).await.expect("moved");
    let source_objects = &source.actors().expect("manager").client.objects;
    assert!(
        source_objects.routes.get(&key).is_none(),
        "the source dropped its entry"
    );
    // The stale caller still sends to the old owner: followed to the new one.
    assert_eq!(
        caller.client.objects.routes.get(&key).as_deref(),
        Some(&r.node)
    );
    assert_eq!(caller.request("f1", &Incr).await.expect("followed"), 2);
    // The new owner answered that request itself: the caller dropped its stale entry, so the
    // next request reads the record once and goes to the new owner directly.
    assert!(
        caller.client.objects.routes.get(&key).is_none(),
        "a reply from another node than the cached owner drops the entry"
    );
    assert_eq!(caller.request("f1", &Incr).await.expect("direct"), 3);
    assert_eq!(
        caller.client.objects.routes.get(&key).as_deref(),
        Some(&rid_of(target))
    );
    m.shutdown().await;
}

async fn a_failed_restore_cancels_and_the_source_serves_again(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (caller, r) = m.counter_at_one("c1").await;
    let (source, target) = m.owner_and_other(&r);
    let before = record(source, "c1").await;
    m.seen.fail_restore.store(true, Ordering::SeqCst);
    let err = relocate(source, &r).await.expect_err("cancelled");
    // Every restore attempt on a new instance failed: the state is incompatible (21 §9.2).
    assert_eq!(err.kind(), ErrorKind::TypeMismatch, "{err}");
    // The stage records Preparing and Captured were written (the version moved on); the owner
    // and AuthorityOwnerGeneration are untouched.
    let after = record(source, "c1").await;
    assert_eq!(
        (&after.0, after.1),
        (&before.0, before.1),
        "the owner is untouched"
    );
    assert_eq!(caller.request("c1", &Incr).await.expect("served here"), 2);
    // Nothing was left behind on either side: the next move succeeds.
    m.seen.fail_restore.store(false, Ordering::SeqCst);
    let moved = relocate(source, &r).await.expect("moved");
    assert_eq!(moved.node, rid_of(target));
    assert_eq!(caller.request("c1", &Incr).await.expect("incr"), 3);
    m.shutdown().await;
}

async fn without_message_follow_a_stale_caller_rereads_and_reaches_the_new_owner(h: &Harness) {
    let options = fast_options().message_follow_duration(std::time::Duration::ZERO);
    let m = mesh_with(h, Policy::Preserve, options).await;
    let (caller, r) = m.counter_at_one("n1").await;
    let (source, target) = m.owner_and_other(&r);
    relocate(source, &r).await.expect("moved");
    // The old owner no longer takes it: the stale caller hears Unavailable and drops its
    // entry; its next call reads the record and reaches the new owner, state intact.
    let err = caller.request("n1", &Incr).await.expect_err("stale");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert_eq!(caller.request("n1", &Incr).await.expect("re-read"), 2);
    let key = (
        AuthorityKind::Actor,
        zlink_codec::ObjectId::new("n1").expect("id"),
    );
    assert_eq!(
        caller.client.objects.routes.get(&key).as_deref(),
        Some(&rid_of(target))
    );
    m.shutdown().await;
}

async fn a_target_that_does_not_offer_the_type_is_refused_and_the_actor_stays(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (caller, r) = m.counter_at_one("t1").await;
    let (source, _) = m.owner_and_other(&r);
    let before = record(source, "t1").await;
    let client_rid = m.client.1.routing_id().clone();
    let manager = source.actors().expect("manager").client;
    let err = crate::relocation::relocate_actor(&manager, &r, Some(&client_rid))
        .await
        .expect_err("no such target");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert_eq!(
        record(source, "t1").await,
        before,
        "the record is untouched"
    );
    assert_eq!(
        m.seen.captures.load(Ordering::SeqCst),
        0,
        "nothing captured"
    );
    assert_eq!(caller.request("t1", &Incr).await.expect("incr"), 2);
    m.shutdown().await;
}
