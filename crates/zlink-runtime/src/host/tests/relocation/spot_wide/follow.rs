//! The member records of a moved `SpotWide` User Spot follow its new owner (spec 21 §8.2;
//! issue 20 item 5): a follow write that fails is tried again, and the source's sweep at
//! Shutdown never deletes a member that moved with its Spot. The follows run after the
//! cutover is answered (issue 22): the Relocate does not wait for them.

use std::time::Duration;

use super::*;
use crate::host::tests::support::launch;
use crate::host::tests::support::{actors_counted, authority_key};
use crate::relocation::MovesOf;
use zlink_store_conformance::{Fault, FaultyLocationStore};

on_every_store!(
    a_spot_wide_relocate_returns_before_its_member_records_follow,
    a_failed_member_follow_is_retried_and_shutdown_keeps_the_moved_member,
    a_member_whose_follow_never_applied_is_kept_by_the_sweeps_and_serves_from_the_target,
);

/// A member's record as read through `via`: (node, ObjectGeneration).
pub(super) async fn member_record(
    via: &ZLinkHost,
    id: &str,
) -> Option<(zlink_codec::RoutingId, u64)> {
    let read = via
        .object_host(0)
        .location
        .authority()
        .read(ObjectKind::Actor, &ObjectId::new(id).expect("id"))
        .await
        .expect("read");
    match read {
        AuthorityRead::Found { handle, .. } => {
            Some((handle.node().routing_id, handle.object_generation().get()))
        }
        AuthorityRead::Missing { .. } => None,
    }
}

/// A server of `hall` and `member` over `store`, as `root_over` makes one, with `options`.
async fn server_with(
    store: Arc<dyn zlink_store_spi::DynLocationStore>,
    options: zlink_location::LocationOptions,
) -> (ZLinkHost, MeshNode) {
    let relocation: Arc<dyn DynRelocationStore> = Arc::new(MemoryRelocationStore::new());
    launch(
        ZLink::builder()
            .location_store(store)
            .relocation_store(relocation)
            .location_options(options)
            .route_mesh(mesh(), move |n| {
                n.object_role(ObjectRole::Server)
                    .user_spot_type::<Hall>("hall", |t| {
                        t.factory(|_ctx| async { Ok(Hall::default()) })
                            .execution(SpotExecution::SpotWide)
                            .preserve_state_with(HallAdapter)
                    })
                    .actor_type::<Member>("member", |t| member_type(t, false))
            }),
    )
    .await
}

/// A source (0) holding a hall with `members` members, each stepped once, a target (1) over
/// a fault-injecting wrapper of the harness's store (`grace`: its `storeFailureGrace`, else
/// the default test options), and a client (2), all Ready peers.
pub(super) async fn over_a_faulty_target(
    h: &Harness,
    members: usize,
    grace: Option<Duration>,
) -> (
    [(ZLinkHost, MeshNode); 3],
    SpotRef,
    Vec<String>,
    Arc<FaultyLocationStore>,
) {
    let source = root(h, ObjectRole::Server, None, false).await;
    let faulty = Arc::new(FaultyLocationStore::new(Arc::clone(&h.store)));
    let over = faulty.clone();
    let target = async move {
        match grace {
            Some(g) => server_with(over, fast_options().store_failure_grace(g)).await,
            None => root_over(over, ObjectRole::Server, None, false, fast_options()).await,
        }
    };
    let (r, hall, ids) = hall_moving_to(h, source, members, target).await;
    (r, hall, ids, faulty)
}

/// A hall of one member moving to a target whose `storeFailureGrace` is `grace`
/// ([`over_a_faulty_target`]), with every follow write of the member (and its settle read)
/// failing until the test heals the Store — far more failing attempts than `grace` leaves time
/// for: (the roots, the hall, the member's id and ObjectGeneration, the faulty Store).
pub(super) async fn one_member_whose_follows_fail(
    h: &Harness,
    grace: Duration,
) -> (
    [(ZLinkHost, MeshNode); 3],
    SpotRef,
    String,
    u64,
    Arc<FaultyLocationStore>,
) {
    let (r, hall, mut ids, faulty) = over_a_faulty_target(h, 1, Some(grace)).await;
    let id = ids.remove(0);
    let (_, generation) = member_record(&r[2].0, &id).await.expect("a record");
    let key = authority_key(ObjectKind::Actor, &ObjectId::new(id.as_str()).expect("id"));
    for _ in 0..1_000 {
        faulty.fail_next_write_touching_and_its_read(
            key.clone(),
            Fault::UNAVAILABLE,
            Fault::UNAVAILABLE,
        );
    }
    (r, hall, id, generation, faulty)
}

/// The hall moved from `r[0]` to `r[1]` and its member `id` lives on the target, while the
/// member's record still names the source (`why`).
async fn moved_with_its_record_on_the_source(
    r: &[(ZLinkHost, MeshNode); 3],
    hall: &SpotRef,
    id: &str,
    why: &str,
) {
    let (node, _) = spot_record(&r[2].0, hall).await;
    assert_eq!(&node, r[1].1.routing_id(), "the Spot moved");
    let (node, _) = member_record(&r[2].0, id).await.expect("a record");
    assert_eq!(&node, r[0].1.routing_id(), "the member's record {why}");
    assert!(
        live_here(&r[1].0, AuthorityKind::Actor, id),
        "it lives on the target"
    );
}

/// Waits (bounded) until the member records of every `SpotWide` move committed on `target`
/// followed their Spot or gave up.
pub(super) async fn follows_done(target: &ZLinkHost) {
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    assert!(
        target
            .object_host(0)
            .relocations()
            .following
            .finish(until)
            .await,
        "the member follows ended by themselves"
    );
}

/// Issue 22: the member records follow after the cutover is answered. Every follow write of
/// the one member fails until the test heals the Store (the target's `storeFailureGrace`, 20
/// s, is far longer): the Relocate returns all the same, with the Spot moved, the member's
/// record still naming the source and the member serving from the target with its state
/// (it resolves through the Spot's record). Once the Store heals the follow applies. Before,
/// the cutover waited for the follows: the Relocate returned only once the grace had passed,
/// the follow given up, and the record never followed.
async fn a_spot_wide_relocate_returns_before_its_member_records_follow(h: &Harness) {
    let (r, hall, id, generation, faulty) =
        one_member_whose_follows_fail(h, Duration::from_secs(20)).await;
    let id = id.as_str();
    relocate(&r[0].0, &hall).await.expect("moved");
    moved_with_its_record_on_the_source(&r, &hall, id, "did not follow yet").await;
    let actors = r[2].0.actors().expect("actors");
    assert_eq!(
        actors.request(id, &Totals).await.expect("totals"),
        (1, 1, 0),
        "it serves from the target with its state"
    );

    faulty.heal();
    follows_done(&r[1].0).await;
    let (node, now) = member_record(&r[2].0, id).await.expect("a record");
    assert_eq!(&node, r[1].1.routing_id(), "the member's record followed");
    assert_eq!(now, generation, "one incarnation");
    let [(source, _), target, client] = r;
    shutdown_leaves_nothing_to_sweep(&source, "no member record was left to the source's sweep")
        .await;
    target.0.shutdown().await;
    client.0.shutdown().await;
}

/// Issue 20 item 5: after the aggregate NewOwner, the member's follow write fails twice (the
/// Store is unavailable for it and for the engine's re-read of the member's record, so the
/// failure reaches the runtime). The target tries it again until it applies: every member's
/// record names the target. The source then shuts down cleanly: its self-sweep finds no
/// member row (before, it deleted the moved member's record and took its capacity off the
/// source a second time), every member keeps its one incarnation and its state, and the
/// allocation rows count exactly the members.
async fn a_failed_member_follow_is_retried_and_shutdown_keeps_the_moved_member(h: &Harness) {
    // One member: its follow write is the only one in its batch.
    let (r, hall, ids, faulty) = over_a_faulty_target(h, 1, None).await;
    let mut before = Vec::new();
    for id in &ids {
        before.push(member_record(&r[2].0, id).await.expect("a record").1);
    }
    let key = authority_key(
        ObjectKind::Actor,
        &ObjectId::new(ids[0].as_str()).expect("id"),
    );
    for _ in 0..2 {
        faulty.fail_next_write_touching_and_its_read(
            key.clone(),
            Fault::UNAVAILABLE,
            Fault::UNAVAILABLE,
        );
    }
    relocate(&r[0].0, &hall).await.expect("moved");
    follows_done(&r[1].0).await;
    let (node, _) = spot_record(&r[2].0, &hall).await;
    assert_eq!(&node, r[1].1.routing_id(), "the Spot moved");
    for id in &ids {
        let (node, _) = member_record(&r[2].0, id).await.expect("a record");
        assert_eq!(&node, r[1].1.routing_id(), "{id}'s record follows the Spot");
    }

    let [(source, _), target, client] = r;
    shutdown_leaves_nothing_to_sweep(&source, "no member record was left to the source's sweep")
        .await;
    let actors = client.0.actors().expect("actors");
    for (id, generation) in ids.iter().zip(&before) {
        let (node, now) = member_record(&client.0, id).await.expect("kept");
        assert_eq!(&node, target.1.routing_id());
        assert_eq!(now, *generation, "{id}: one incarnation");
        let again = actors.get_or_create("member", id).await.expect("existing");
        assert_eq!(again.generation, *generation, "{id}: no second incarnation");
        assert_eq!(
            actors.request(id, &Totals).await.expect("totals"),
            (1, 1, 0),
            "{id} serves with its state"
        );
    }
    assert_eq!(
        actors_counted(h).await,
        ids.len() as u64,
        "the allocation rows count the members"
    );
    target.0.shutdown().await;
    client.0.shutdown().await;
}

/// Issue 20 item 5, the sweeps' side: the member's follow write keeps failing until the
/// target's `storeFailureGrace` has passed, so its record still names the source run while it
/// lives on the target (it resolves through the Spot's record). The source's Shutdown keeps
/// it (its self-sweep counts it as moved with its Spot, never deletes it nor takes its
/// capacity off twice) and completes `Stopped`; a recovery-sweep of the source's dead run keeps
/// it too; a caller reaches it on the target with its state, and its one incarnation stays.
async fn a_member_whose_follow_never_applied_is_kept_by_the_sweeps_and_serves_from_the_target(
    h: &Harness,
) {
    let (r, hall, id, generation, faulty) =
        one_member_whose_follows_fail(h, Duration::from_millis(300)).await;
    let id = id.as_str();
    relocate(&r[0].0, &hall).await.expect("moved");
    // The follow gives up once the target's grace has passed; only then does the Store heal.
    follows_done(&r[1].0).await;
    faulty.heal();
    moved_with_its_record_on_the_source(&r, &hall, id, "never followed").await;

    let [(source, _), target, client] = r;
    let run = source.object_host(0).location.host_run().expect("a run");
    let report = source.shutdown().await;
    assert_eq!(
        report.outcome,
        crate::host::ShutdownOutcome::Stopped,
        "{report:?}"
    );
    let sweep = report.sweep.expect("a sweep");
    assert_eq!(
        (sweep.matched, sweep.moved_members, sweep.removed),
        (1, 1, 0),
        "{sweep:?}"
    );
    let recovery = target
        .0
        .object_host(0)
        .location
        .authority()
        .recovery_sweep(&run)
        .await
        .expect("recovery sweep");
    let recovered = recovery.applied().expect("the run is dead");
    // The Spot's owner sweeping: the member's record follows it (`repair.rs`), never deleted.
    // The target's own background sweep may have made it follow already (then this one finds
    // nothing left to do); either way the record now names the target.
    assert_eq!(recovered.removed, 0, "{recovered:?}");
    assert!(
        recovered.moved_members + recovered.members_followed <= 1,
        "{recovered:?}"
    );
    let (node, _) = member_record(&target.0, id).await.expect("kept");
    assert_eq!(
        &node,
        target.1.routing_id(),
        "the member's record follows the Spot"
    );
    let actors = client.0.actors().expect("actors");
    assert_eq!(
        actors.request(id, &Totals).await.expect("totals"),
        (1, 1, 0),
        "it serves from the target with its state"
    );
    let (_, now) = member_record(&client.0, id).await.expect("kept");
    assert_eq!(now, generation, "one incarnation");
    assert_eq!(
        actors_counted(h).await,
        1,
        "the allocation rows count the member once"
    );
    target.0.shutdown().await;
    client.0.shutdown().await;
}
