//! The target's owner change under a Store outage (spec 21 §5, §10; issue 20): a NewOwner the
//! admission gate refused because the target's lease could not be renewed for a while is a
//! transient refusal, tried again within the move's Store failure grace once the lease renews.

use std::time::Duration;

use super::stages::faulty_mesh;
use super::*;
use crate::relocation::MovesOf;
use zlink_location::AdmissionOp;
use zlink_store_conformance::{Fault, LocationOp};

on_every_store!(a_new_owner_refused_while_the_store_was_down_is_tried_again_and_the_move_commits);

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
    let started = target_objects
        .relocations()
        .owner_changes_started
        .load(Ordering::SeqCst);
    gate.open();
    wait_until("the target starts its owner change", || {
        target_objects
            .relocations()
            .owner_changes_started
            .load(Ordering::SeqCst)
            > started
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
    *objects_of(source).relocations().stage_hook.lock() = None;
    stop_all(&[&m.client.0, &m.servers[0].0, &m.servers[1].0]).await;
}
