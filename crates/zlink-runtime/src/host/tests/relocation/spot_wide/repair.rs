//! A `SpotWide` member record whose follow write never applied is repaired by the sweep of
//! the Spot's owner (spec 21 §8.2, §11; issue 20): the record follows the Spot's new owner
//! instead of naming the dead source run forever.

use std::time::Duration;

use super::follow::{follows_done, member_record, one_member_whose_follows_fail};
use super::*;
use crate::host::tests::support::actors_counted;

on_every_store!(a_member_whose_follow_never_applied_follows_the_spot_at_its_owners_sweep);

/// The member's follow write keeps failing until the target's `storeFailureGrace` has passed,
/// so its record names the source run while it lives on the target. The source shuts down
/// (its self-sweep keeps the member). The recovery-sweep of the source's dead run on the
/// Spot's new owner — the target — then rewrites the member's record to follow the Spot
/// (before, it only kept it: the record named the dead run for good): the record names the
/// target, under the same ObjectGeneration, and its allocation is counted once. (The target's
/// own periodic sweep may repair it first; the test's sweep then finds nothing to do.) The member
/// serves from the target with its state, and the target's own shutdown then sweeps its
/// record like any other (nothing is left).
async fn a_member_whose_follow_never_applied_follows_the_spot_at_its_owners_sweep(h: &Harness) {
    let (r, hall, id, generation, faulty) =
        one_member_whose_follows_fail(h, Duration::from_millis(300)).await;
    let id = id.as_str();
    relocate(&r[0].0, &hall).await.expect("moved");
    follows_done(&r[1].0).await;
    faulty.heal();
    let (node, _) = member_record(&r[2].0, id).await.expect("a record");
    assert_eq!(&node, r[0].1.routing_id(), "the follow never applied");

    let [(source, _), target, client] = r;
    let run = source.object_host(0).location.host_run().expect("a run");
    let report = source.shutdown().await;
    assert_eq!(
        report.outcome,
        crate::host::ShutdownOutcome::Stopped,
        "{report:?}"
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
    // The target's own periodic sweep of dead runs (or the Spot owner's sweep) may have made
    // the record follow before this one ran; then this sweep finds nothing of the run. Either
    // way one sweep repaired it, none removed it, and the record names the target (below:
    // without the repair no sweep ever rewrites it).
    assert!(
        recovered.members_followed + recovered.moved_members <= 1 && recovered.removed == 0,
        "{recovered:?}"
    );
    let (node, now) = member_record(&client.0, id).await.expect("kept");
    assert_eq!(&node, target.1.routing_id(), "the record follows the Spot");
    assert_eq!(now, generation, "one incarnation");
    assert_eq!(actors_counted(h).await, 1, "counted once");
    let actors = client.0.actors().expect("actors");
    assert_eq!(
        actors.request(id, &Totals).await.expect("totals"),
        (1, 1, 0),
        "it serves from the target with its state"
    );

    let report = target.0.shutdown().await;
    assert_eq!(
        report.outcome,
        crate::host::ShutdownOutcome::Stopped,
        "{report:?}"
    );
    assert_eq!(
        member_record(&client.0, id).await,
        None,
        "the target's shutdown removed the member's record"
    );
    client.0.shutdown().await;
}
