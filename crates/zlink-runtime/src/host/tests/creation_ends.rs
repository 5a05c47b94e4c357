//! Every creation ends (spec 21 §7, §10; 06 §17): a Store error after the Reserve aborts the
//! creation and records its terminal, an abort the Store does not confirm is retried, and a
//! `Reserved` row nobody will finish — its creating run dead, or its creation deadline plus
//! the cleanup window passed — is cancelled by the next node that meets it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use zlink_codec::records::{ObjectKind, ObjectRole};
use zlink_codec::terminal::{CreationOutcome, CreationTerminal};
use zlink_codec::{ObjectId, OperationId, RoutingId, StableType};
use zlink_location::{
    AuthorityHandle, AuthorityRead, CreationMark, LocationOptions, OperationKey, Outcome,
};
use zlink_store_conformance::{Fault, FaultyLocationStore, LocationOp};
use zlink_store_spi::DynLocationStore;
use zlink_testkit::Harness;

use super::support::*;
use crate::host::ZLinkHost;
use crate::host::config::MeshNodeBuilder;
use crate::host::config::ZLink;
use crate::host::tests::support::launch;
use crate::mesh::node::MeshNode;
use crate::messaging::{ErrorKind, NodeHandler};
use crate::objects::{Actor, CreationDecision};

struct Plain;
impl Actor for Plain {}

/// An Object Server of the `plain` type (room for `limit` Actors) whose factory counts
/// `entered` and then waits at `gate`; its Entry Spot approves ids starting `ok` and rejects
/// the rest.
fn gated_server(
    entered: &Arc<AtomicUsize>,
    gate: &Gate,
    limit: i64,
) -> impl FnOnce(MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler> {
    let (entered, gate) = (Arc::clone(entered), gate.clone());
    move |b| {
        b.object_role(ObjectRole::Server)
            .actor_limit(limit)
            .actor_type::<Plain>("plain", move |t| {
                t.factory(move |_ctx| {
                    let (entered, gate) = (Arc::clone(&entered), gate.clone());
                    async move {
                        entered.fetch_add(1, Ordering::SeqCst);
                        gate.pass().await;
                        Ok(Plain)
                    }
                })
                .disable_relocation()
            })
            .on_actor_create(|ctx| async move {
                if ctx.id.starts_with("ok") {
                    Ok(CreationDecision::Approve { reply: None })
                } else {
                    Ok(CreationDecision::reject("not on the list"))
                }
            })
    }
}

/// Starts one root over `store` with `options`.
async fn start_with(
    store: Arc<dyn DynLocationStore>,
    options: LocationOptions,
    configure: impl FnOnce(MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler>,
) -> (ZLinkHost, MeshNode) {
    launch(
        ZLink::builder()
            .location_store(store)
            .location_options(options)
            .route_mesh(mesh(), configure),
    )
    .await
}

fn id(s: &str) -> ObjectId {
    ObjectId::new(s).expect("id")
}

async fn record(host: &ZLinkHost, name: &str) -> Option<AuthorityHandle> {
    match host
        .object_host(0)
        .location
        .authority()
        .read(ObjectKind::Actor, &id(name))
        .await
        .expect("read")
    {
        AuthorityRead::Found { handle, .. } => Some(handle),
        AuthorityRead::Missing { .. } => None,
    }
}

/// Every creation terminal row in the Store, decoded.
async fn terminals(h: &Harness) -> Vec<CreationTerminal> {
    h.snapshot()
        .await
        .into_iter()
        .filter(|(k, _)| k.as_str().starts_with("creation-terminal"))
        .map(|(_, (bytes, _))| CreationTerminal::decode(&bytes).expect("a terminal"))
        .collect()
}

/// The Actor slots allocated on `host`'s node (in use or reserved).
async fn allocated(host: &ZLinkHost) -> u64 {
    let objects = host.object_host(0);
    let node = zlink_location::NodeKey {
        mesh: mesh(),
        routing_id: objects.rid.clone(),
    };
    objects
        .location
        .authority()
        .node_capacity(&node)
        .await
        .expect("capacity")
        .actors
}

on_every_store!(
    a_store_error_after_reserve_aborts_the_creation_and_records_its_terminal,
    a_failing_abort_is_retried_until_the_creation_ends,
    a_reserved_row_of_a_dead_creating_run_is_cancelled_by_the_next_node_that_meets_it,
    a_reserved_row_past_its_deadline_and_cleanup_window_is_cancelled_by_the_next_node_that_meets_it,
);

/// Starts a one-slot [`gated_server`], creates the `plain` Actor `object` (approved for ids
/// starting `ok`, rejected otherwise), lets the next `failures` writes touching its record fail
/// unsettled once the factory runs, opens the gate and returns the host, its manager and the
/// creation's error.
async fn create_with_failing_writes(
    h: &Harness,
    object: &'static str,
    failures: usize,
) -> (
    ZLinkHost,
    crate::objects::ActorManager,
    crate::messaging::ZLinkError,
) {
    let faulty = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let (entered, gate) = (Arc::new(AtomicUsize::new(0)), Gate::new());
    let (ha, _a) = start_with(
        faulty.clone(),
        fast_options(),
        gated_server(&entered, &gate, 1),
    )
    .await;
    wait_discovered(&[&ha]).await;
    let m = ha.actors().expect("manager");
    let call = {
        let m = m.clone();
        tokio::spawn(async move { m.create("plain", object).await })
    };
    wait_until("the factory runs", || entered.load(Ordering::SeqCst) == 1).await;
    let key = authority_key(ObjectKind::Actor, &id(object));
    unsettled_failures(&faulty, &key, failures);
    gate.open();
    let err = tokio::time::timeout(WAIT, call)
        .await
        .expect("the call ends")
        .expect("task")
        .expect_err("the creation fails");
    (ha, m, err)
}

async fn a_store_error_after_reserve_aborts_the_creation_and_records_its_terminal(h: &Harness) {
    // The Ready commit is the next write touching the record: it fails and the read that
    // would settle it fails too, so the Store's error reaches the creation.
    let (ha, m, err) = create_with_failing_writes(h, "ok-1", 1).await;
    assert_eq!(err.kind(), ErrorKind::InternalFailure, "{err}");
    assert!(
        record(&ha, "ok-1").await.is_none(),
        "the reservation was aborted"
    );
    let t = terminals(h).await;
    assert!(
        matches!(&t[..], [one] if matches!(one.outcome, CreationOutcome::Failed { .. })),
        "the creation's Failed terminal is stored: {t:?}"
    );
    assert_eq!(allocated(&ha).await, 0, "the reserved slot was returned");
    // The one slot is free again.
    m.create("plain", "ok-2").await.expect("room again");
    assert_eq!(allocated(&ha).await, 1);
    ha.shutdown().await;
}

async fn a_failing_abort_is_retried_until_the_creation_ends(h: &Harness) {
    // The declined creation's abort fails three times (the Store never applies it).
    let (ha, m, err) = create_with_failing_writes(h, "no-1", 3).await;
    assert_eq!(err.kind(), ErrorKind::Rejected, "{err}");
    assert!(
        record(&ha, "no-1").await.is_none(),
        "the abort was retried until it applied"
    );
    let t = terminals(h).await;
    assert!(
        matches!(&t[..], [one] if one.outcome == CreationOutcome::Rejected),
        "{t:?}"
    );
    assert_eq!(allocated(&ha).await, 0, "the reserved slot was returned");
    m.create("plain", "ok-3").await.expect("room again");
    ha.shutdown().await;
}

/// The next `n` writes touching `key` fail without applying, and so does the read of `key`
/// after each that would settle its outcome: each such write ends in the Store's error.
fn unsettled_failures(faulty: &FaultyLocationStore, key: &zlink_store_spi::StoreKey, n: usize) {
    for _ in 0..n {
        faulty.fail_next_write_touching(key.clone(), Fault::UNAVAILABLE);
        faulty.fail_next_read_of(key.clone(), Fault::UNAVAILABLE);
    }
}

/// Reserves `name` on `host`'s node as a creating source would, optionally with `mark`, and
/// never asks for the creation (the source is gone).
async fn reserve_only(host: &ZLinkHost, name: &str, mark: Option<CreationMark>) -> AuthorityHandle {
    let objects = host.object_host(0);
    let authority = objects.location.authority();
    let candidates = host
        .object_discovery(0)
        .candidates(authority)
        .await
        .expect("candidates");
    match authority
        .place_and_reserve_creation(
            candidates,
            ObjectKind::Actor,
            id(name),
            StableType::new("plain").expect("type"),
            Vec::new(),
            None,
            mark,
        )
        .await
        .expect("reserve")
    {
        Outcome::Applied(h) => h,
        other => panic!("not reserved: {other:?}"),
    }
}

async fn a_reserved_row_of_a_dead_creating_run_is_cancelled_by_the_next_node_that_meets_it(
    h: &Harness,
) {
    let faulty = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let (entered, gate) = (Arc::new(AtomicUsize::new(0)), Gate::new());
    gate.open();
    let dying = short_lease().polling_interval(Duration::from_millis(100));
    let (hd, _d) = start_with(faulty.clone(), dying, gated_server(&entered, &gate, 1)).await;
    wait_discovered(&[&hd]).await;
    let reserved = reserve_only(&hd, "ok-d", None).await;
    // D stops writing: its lease runs out with the Reserved row still on it.
    faulty.set_fault([LocationOp::Write], Fault::UNAVAILABLE);
    if h.store_clock.is_some() {
        h.advance_store_time(Duration::from_secs(2)).await;
    }
    let rt = location_runtime(h).await;
    let dead = reserved.owner().clone();
    let until = tokio::time::Instant::now() + WAIT;
    while !rt.authority().lease_ended(&dead).await.unwrap_or(false) {
        assert!(tokio::time::Instant::now() < until, "D's lease never ended");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (ha, _a) = start_with(
        h.store.clone(),
        fast_options(),
        gated_server(&entered, &gate, 1),
    )
    .await;
    wait_discovered(&[&ha]).await;
    let created = ha
        .actors()
        .expect("manager")
        .get_or_create("plain", "ok-d")
        .deadline(Duration::from_secs(5))
        .submit()
        .await
        .expect("the abandoned reservation is cancelled and the Actor created");
    assert!(created.created);
    assert!(created.object.generation > reserved.object_generation().get());
    let now = record(&ha, "ok-d").await.expect("the new record");
    assert_eq!(now.node().routing_id, ha.object_host(0).rid);
    assert_eq!(allocated(&ha).await, 1, "A holds the one slot in use");
    let d_node = zlink_location::NodeKey {
        mesh: mesh(),
        routing_id: hd.object_host(0).rid.clone(),
    };
    let on_d = rt
        .authority()
        .node_capacity(&d_node)
        .await
        .expect("capacity");
    assert_eq!(on_d.actors, 0, "the dead run's reserved slot was returned");
    faulty.heal();
    let _ = rt.shutdown().await;
    stop_all(&[&ha, &hd]).await;
}

async fn a_reserved_row_past_its_deadline_and_cleanup_window_is_cancelled_by_the_next_node_that_meets_it(
    h: &Harness,
) {
    let (entered, gate) = (Arc::new(AtomicUsize::new(0)), Gate::new());
    gate.open();
    let options = fast_options().creation_cleanup_window(Duration::from_millis(200));
    let (ha, _a) = start_with(h.store.clone(), options, gated_server(&entered, &gate, 1)).await;
    wait_discovered(&[&ha]).await;
    // A source reserved on this live node and died before asking for the creation.
    let objects = ha.object_host(0);
    let store_now = match objects
        .location
        .authority()
        .read(ObjectKind::Actor, &id("ok-s"))
        .await
        .expect("read")
    {
        AuthorityRead::Missing { store_now } => store_now,
        AuthorityRead::Found { .. } => panic!("fresh id"),
    };
    let op = OperationKey {
        source: RoutingId::new(vec![7, 7]).expect("rid"),
        source_run: zlink_codec::Generation::new(3).expect("run"),
        operation: OperationId::new(0xdead).expect("op"),
    };
    let mark = CreationMark::new(
        op.clone(),
        store_now,
        Duration::from_millis(200),
        Duration::from_millis(200),
    );
    let reserved = reserve_only(&ha, "ok-s", Some(mark)).await;
    assert_eq!(
        objects
            .location
            .authority()
            .creation_mark(&reserved)
            .await
            .expect("mark")
            .map(|m| m.op),
        Some(op),
        "the record's creation deadline row names the operation"
    );
    // Within the deadline plus the window the creating run is live: nothing is cancelled.
    assert!(matches!(
        objects
            .location
            .authority()
            .cancel_abandoned(&reserved)
            .await,
        Ok(Outcome::Conflict(zlink_location::Conflict::RunStillLive))
    ));
    if h.store_clock.is_some() {
        h.advance_store_time(Duration::from_secs(1)).await;
    }
    let created = ha
        .actors()
        .expect("manager")
        .get_or_create("plain", "ok-s")
        .deadline(Duration::from_secs(5))
        .submit()
        .await
        .expect("the abandoned reservation is cancelled and the Actor created");
    assert!(created.created);
    assert!(created.object.generation > reserved.object_generation().get());
    assert_eq!(allocated(&ha).await, 1, "one slot: the new Actor's");
    assert!(
        h.snapshot()
            .await
            .keys()
            .all(|k| !k.as_str().starts_with("creation-deadline")),
        "no creation deadline row is left once the creations ended"
    );
    ha.shutdown().await;
}
