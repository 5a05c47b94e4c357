//! The target's owner change under a Store outage (spec 21 §5, §10; issue 20): a NewOwner the
//! admission gate refused because the target's lease could not be renewed for a while is a
//! transient refusal, tried again once the lease renews; the owner change is retried until the
//! Restore operation's absolute deadline (not the Store failure grace), and one still not
//! confirmed then is recorded as `location_update_failed`.

use std::time::Duration;

use super::stages::faulty_mesh;
use super::*;
use crate::relocation::MovesOf;
use zlink_location::AdmissionOp;
use zlink_store_conformance::{Fault, FaultyLocationStore, LocationOp};

on_every_store!(
    a_new_owner_refused_while_the_store_was_down_is_tried_again_and_the_move_commits,
    the_owner_change_is_retried_until_the_restore_deadline_not_the_store_failure_grace,
    an_owner_change_unconfirmed_at_the_restore_deadline_is_recorded_as_location_update_failed
);

/// The object host of `host`'s node.
fn objects_of(host: &ZLinkHost) -> Arc<crate::objects::host::ObjectHost> {
    Arc::clone(&host.actors().expect("manager").client.objects)
}

/// Every Store write of the target fails (its lease renewals too) until its admission gate
/// closes; only then does the source send its ready and cutover, so the target's NewOwner
/// meets a closed gate (`LocationError::Admission`). Then the Store answers again, the lease
/// renews (it never expired: the outage is shorter than the TTL) and the gate reopens. The
/// NewOwner is tried again within the grace and commits: the Actor moves with its state and
/// is served by the target alone (before, the refusal was final: the target dropped its
/// prepared instance and the move failed).
async fn a_new_owner_refused_while_the_store_was_down_is_tried_again_and_the_move_commits(
    h: &Harness,
) {
    // Admission closes 2 s after the last renew, the lease would expire 1 s later.
    let options = zlink_location::LocationOptions::default()
        .polling_interval(Duration::from_millis(100))
        .owner_lease_renew_interval(Duration::from_millis(100))
        .owner_lease_renew_timeout(Duration::from_millis(100))
        .owner_lease_ttl(Duration::from_millis(3_000))
        .owner_lease_fencing_margin(Duration::from_millis(1_000))
        .store_failure_grace(Duration::from_secs(8));
    let (m, faulty) = faulty_mesh(h, options).await;
    let (caller, r) = m.counter_at_one("n1").await;
    let (source, target) = m.owner_and_other(&r);
    let target_store = if rid_of(target) == rid_of(&m.servers[0].0) {
        Arc::clone(&faulty[0])
    } else {
        Arc::clone(&faulty[1])
    };
    // The source stops right after its `Prepared` record until the gate opens.
    let (gate, reached) = (Gate::new(), Arc::new(AtomicBool::new(false)));
    super::target_faults::stall_after_prepared(source, &gate, &reached);
    let moving = {
        let client = source.actors().expect("manager").client;
        let r = r.clone();
        tokio::spawn(async move { crate::relocation::relocate_actor(&client, &r, None).await })
    };
    wait_until("the source recorded Prepared", || {
        reached.load(Ordering::SeqCst)
    })
    .await;

    // The target's Store writes fail: its lease is not renewed, its admission gate closes.
    target_store.set_fault([LocationOp::Write], Fault::UNAVAILABLE);
    let location = Arc::clone(&target.object_host(0).location);
    wait_until("the target's admission gate closes", || {
        location.admit(AdmissionOp::RelocationChange).is_err()
    })
    .await;
    let target_objects = objects_of(target);
    let started = target_objects.relocations().probe.owner_changes_started();
    gate.open();
    wait_until("the target starts its owner change", || {
        target_objects.relocations().probe.owner_changes_started() > started
    })
    .await;
    // The Store answers again: the lease renews and the gate reopens.
    target_store.heal();

    let moved = tokio::time::timeout(Duration::from_secs(20), moving)
        .await
        .expect("the move ends")
        .expect("task")
        .expect("the move commits");
    assert_eq!(moved.node, rid_of(target), "the target owns it");
    let key = (
        AuthorityKind::Actor,
        zlink_codec::ObjectId::new("n1").expect("id"),
    );
    assert!(target_objects.is_live(&key), "the target serves it");
    assert!(!objects_of(source).is_live(&key), "the source does not");
    assert_eq!(
        caller.request("n1", &Incr).await.expect("served"),
        2,
        "state moved with it"
    );
    objects_of(source).relocations().probe.on_stage(None);
    stop_all(&[&m.client.0, &m.servers[0].0, &m.servers[1].0]).await;
}

/// Options with a short Store failure grace (500 ms) beside the lease of the test above.
fn short_grace() -> zlink_location::LocationOptions {
    zlink_location::LocationOptions::default()
        .polling_interval(Duration::from_millis(100))
        .owner_lease_renew_interval(Duration::from_millis(100))
        .owner_lease_renew_timeout(Duration::from_millis(100))
        .owner_lease_ttl(Duration::from_millis(3_000))
        .owner_lease_fencing_margin(Duration::from_millis(1_000))
        .store_failure_grace(Duration::from_millis(500))
}

/// Starts a move of a new counter `id` with the Restore deadline `within`, stalls the source
/// at `Prepared`, makes every Store write of the target fail, and lets the source go on once
/// the target starts its owner change. Returns the mesh parts, the target's faulty store, and
/// the move's task.
async fn move_into_a_failing_target(
    h: &Harness,
    id: &str,
    within: Duration,
) -> (
    Mesh,
    Arc<FaultyLocationStore>,
    usize,
    tokio::task::JoinHandle<Result<ActorRef, crate::messaging::ZLinkError>>,
) {
    let (m, faulty) = faulty_mesh(h, short_grace()).await;
    let (_, r) = m.counter_at_one(id).await;
    let (source, target) = m.owner_and_other(&r);
    let target_at = usize::from(rid_of(target) != rid_of(&m.servers[0].0));
    let target_store = Arc::clone(&faulty[target_at]);
    let (gate, reached) = (Gate::new(), Arc::new(AtomicBool::new(false)));
    super::target_faults::stall_after_prepared(source, &gate, &reached);
    let moving = {
        let client = source.actors().expect("manager").client;
        let r = r.clone();
        let until = tokio::time::Instant::now() + within;
        tokio::spawn(async move {
            crate::relocation::relocate_actor_within(&client, &r, None, Some(until)).await
        })
    };
    wait_until("the source recorded Prepared", || {
        reached.load(Ordering::SeqCst)
    })
    .await;
    target_store.set_fault([LocationOp::Write], Fault::UNAVAILABLE);
    let target_objects = objects_of(target);
    let started = target_objects.relocations().probe.owner_changes_started();
    gate.open();
    wait_until("the target starts its owner change", || {
        target_objects.relocations().probe.owner_changes_started() > started
    })
    .await;
    objects_of(source).relocations().probe.on_stage(None);
    (m, target_store, target_at, moving)
}

/// Spec 21 §10: "The retry deadline for relocation CAS is the Restore operation's absolute
/// deadline." The target's Store writes fail for three times the Store failure grace after
/// its owner change started, then heal well before the Restore deadline (20 s): the owner
/// change is still being retried and commits; the Actor moved with its state (before, the
/// target gave up at `now + storeFailureGrace` and dropped its prepared object).
async fn the_owner_change_is_retried_until_the_restore_deadline_not_the_store_failure_grace(
    h: &Harness,
) {
    let (m, target_store, target_at, moving) =
        move_into_a_failing_target(h, "g1", Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    target_store.heal();
    let moved = tokio::time::timeout(Duration::from_secs(20), moving)
        .await
        .expect("the move ends")
        .expect("task")
        .expect("the move commits after the grace, before the Restore deadline");
    let target = &m.servers[target_at].0;
    assert_eq!(moved.node, rid_of(target), "the target owns it");
    assert_eq!(target.status().location_update_failed, 0);
    assert_eq!(
        m.client
            .0
            .actors()
            .expect("manager")
            .request("g1", &Incr)
            .await
            .expect("served"),
        2,
        "state moved with it"
    );
    stop_all(&[&m.client.0, &m.servers[0].0, &m.servers[1].0]).await;
}

/// Spec 21 §10: target ownership not confirmed before the Restore validity expires → the
/// target records a `location_update_failed` error (`HostStatus::location_update_failed`),
/// removes the prepared object and never serves it.
async fn an_owner_change_unconfirmed_at_the_restore_deadline_is_recorded_as_location_update_failed(
    h: &Harness,
) {
    let (m, target_store, target_at, moving) =
        move_into_a_failing_target(h, "g2", Duration::from_millis(1_500)).await;
    let target = m.servers[target_at].0.clone();
    wait_until("location_update_failed is recorded", || {
        target.status().location_update_failed == 1
    })
    .await;
    let key = (
        AuthorityKind::Actor,
        zlink_codec::ObjectId::new("g2").expect("id"),
    );
    assert!(
        !objects_of(&target).is_live(&key),
        "the prepared object was removed"
    );
    target_store.heal();
    let _ = tokio::time::timeout(Duration::from_secs(20), moving).await;
    assert_eq!(target.status().location_update_failed, 1, "recorded once");
    stop_all(&[&m.client.0, &m.servers[0].0, &m.servers[1].0]).await;
}
