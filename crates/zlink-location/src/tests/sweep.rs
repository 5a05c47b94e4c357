//! The self-sweep and the recovery-sweep (spec 21 §3.1, §5, §8.1, §11).

use super::prelude::*;

/// The recovery-sweep reclaims only the dead run's authority rows (Active and Reserved, with
/// their lookup index and capacity) and never a descriptor; while the run's lease is held it
/// changes nothing.
pub(super) async fn recovery_sweep_reclaims_only_a_dead_run_and_never_descriptors(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    publish(&a).await;
    publish(&b).await;
    active_actor(&a, "x").await;
    reserve(&a, ObjectKind::UserSpot, "s", "game", &a).await;
    // A row of A's node owned by B's run stays.
    let z = active_actor(&b, "z").await;
    let before = h.snapshot().await;
    assert_eq!(
        b.rt.authority()
            .recovery_sweep(&a.run())
            .await
            .expect("sweep"),
        Outcome::Conflict(Conflict::RunStillLive)
    );
    assert_eq!(h.snapshot().await, before, "a live run is never swept");
    assert!(matches!(
        b.rt.authority().recovery_sweep(&b.run()).await,
        Err(LocationError::InvalidOperation(_))
    ));
    let dead = a.run();
    a.rt.lease().release().await.expect("A stops renewing");
    let report = recover(&b, &dead).await;
    assert_eq!((report.matched, report.removed, report.changed), (2, 2, 0));
    for (kind, object) in [(ObjectKind::Actor, "x"), (ObjectKind::UserSpot, "s")] {
        assert!(matches!(
            b.rt.authority()
                .read(kind, &id(object))
                .await
                .expect("read"),
            AuthorityRead::Missing { .. }
        ));
    }
    assert!(matches!(
        b.rt.authority().read(ObjectKind::Actor, &id("z")).await.expect("read"),
        AuthorityRead::Found { handle, .. } if handle == z
    ));
    assert_eq!(capacity(&b, &a).await, NodeUsage::default());
    assert_eq!(capacity(&b, &b).await.actors.active, 1);
    let descriptors = snapshot_of(h.store.as_ref(), "mesh-node\0").await;
    assert_eq!(descriptors.len(), 2, "the sweep never touches descriptors");
}

/// The dead run's lease row is read directly: held by the same OwnerId at another
/// LeaseGeneration (a takeover after a restart) counts as dead for the old run, and the new
/// run's rows stay.
pub(super) async fn recovery_sweep_judges_the_lease_row_read_directly(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    active_actor(&a, "old").await;
    let old_run = a.run();
    a.rt.lease().release().await.expect("release");
    let new_run = a.rt.lease().acquire().await.expect("takeover");
    assert_ne!(new_run, old_run);
    active_actor(&a, "new").await;
    let report = recover(&b, &old_run).await;
    assert_eq!((report.matched, report.removed), (1, 1));
    assert!(matches!(
        b.rt.authority()
            .read(ObjectKind::Actor, &id("new"))
            .await
            .expect("read"),
        AuthorityRead::Found { .. }
    ));
    assert_eq!(
        b.rt.authority()
            .recovery_sweep(&new_run)
            .await
            .expect("sweep"),
        Outcome::Conflict(Conflict::RunStillLive)
    );
}

/// A host whose lease was taken over under a new generation sweeps its own earlier run: the
/// earlier run's rows go with their capacity, the new run's stay; the current run itself is
/// refused.
pub(super) async fn recovery_sweep_of_this_hosts_earlier_run_keeps_the_current_one(h: &Harness) {
    let a = host(h, "main", 1).await;
    active_actor(&a, "old").await;
    let old_run = a.run();
    a.rt.lease().release().await.expect("release");
    let new_run = a.rt.lease().acquire().await.expect("takeover");
    active_actor(&a, "new").await;
    let report = recover(&a, &old_run).await;
    assert_eq!((report.matched, report.removed), (1, 1));
    assert!(matches!(
        a.rt.authority()
            .read(ObjectKind::Actor, &id("old"))
            .await
            .expect("read"),
        AuthorityRead::Missing { .. }
    ));
    assert!(matches!(
        a.rt.authority()
            .read(ObjectKind::Actor, &id("new"))
            .await
            .expect("read"),
        AuthorityRead::Found { .. }
    ));
    assert_eq!(capacity(&a, &a).await.actors.active, 1);
    let before = h.snapshot().await;
    assert!(matches!(
        a.rt.authority().recovery_sweep(&new_run).await,
        Err(LocationError::InvalidOperation(
            crate::InvalidOperation::RecoveryOfOwnRun
        ))
    ));
    assert_eq!(
        h.snapshot().await,
        before,
        "a refused sweep changes nothing"
    );
}

/// Reservations: the sweep of a dead *target* releases the capacity secured on it; the sweep
/// of a dead *source* keeps a reservation whose target is alive (the target may still finish
/// the move with NewOwner) and skips the object as relocating.
pub(super) async fn recovery_sweep_releases_reservations_of_the_dead_run(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    let c = host(h, "main", 3).await;
    let x = active_actor(&a, "x").await;
    let y = active_actor(&a, "y").await;
    let to_b = secure(&a, &x, &b).await;
    secure(&a, &y, &c).await;
    assert_eq!(capacity(&a, &c).await.actors.reserved, 1);
    // C dies: the capacity secured on C comes back; A's rows are untouched.
    let dead_c = c.run();
    c.rt.lease().release().await.expect("C stops");
    let report = recover(&b, &dead_c).await;
    assert_eq!((report.reservations_released, report.matched), (1, 0));
    assert_eq!(capacity(&a, &c).await, NodeUsage::default());
    // A dies while moving x to the live B: x is relocating, its reservation stays, and B can
    // still finish the move; y (no move) is reclaimed.
    let dead_a = a.run();
    a.rt.lease().release().await.expect("A stops");
    let report = recover(&b, &dead_a).await;
    assert_eq!(
        (
            report.matched,
            report.removed,
            report.relocating,
            report.reservations_released
        ),
        (2, 1, 1, 0)
    );
    let moved =
        b.rt.authority()
            .new_owner(&x, &to_b)
            .await
            .expect("new owner")
            .applied()
            .expect("B finishes the move");
    assert_eq!(moved.owner(), &b.run());
    assert_eq!(capacity(&b, &a).await, NodeUsage::default());
    assert_eq!(capacity(&b, &b).await.actors.active, 1);
}

/// The self-sweep at shutdown removes this run's rows and releases the reservations it made,
/// under its lease; past the admission deadline it changes nothing at all.
pub(super) async fn self_sweep_runs_under_this_runs_lease_and_admission(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    let x = active_actor(&a, "x").await;
    active_actor(&b, "z").await;
    secure(&a, &x, &b).await;
    let a_node = a.node();
    let report = a.rt.shutdown().await.expect("shutdown");
    assert_eq!(
        (report.matched, report.removed, report.reservations_released),
        (1, 1, 1)
    );
    assert_eq!(capacity(&b, &b).await.actors.active, 1);
    assert_eq!(capacity(&b, &b).await.actors.reserved, 0);
    assert_eq!(
        b.rt.authority().node_usage(&a_node).await.expect("usage"),
        NodeUsage::default()
    );

    // Past the admission deadline: nothing is swept.
    let clock = ManualMonotonic::new();
    let late = h
        .host_with(
            h.store.clone(),
            LocationOptions::default(),
            Some(clock.clone()),
            3,
        )
        .await;
    active_actor(&late, "w").await;
    clock.advance(Duration::from_secs(60));
    let before = h.snapshot().await;
    let refused = late.rt.shutdown().await.expect_err("past the deadline");
    assert!(is_admission(&refused), "{refused}");
    assert_eq!(h.snapshot().await, before);
}

/// Whether `node`'s allocation row is stored at all (an absent row counts as zero).
async fn row_stored(h: &Harness, node: &crate::NodeKey) -> bool {
    let key = keys::node_capacity(node).expect("key");
    matches!(
        h.store.read(&key).await.expect("read"),
        ReadResult::Found { .. }
    )
}

/// The recovery-sweep removes the dead run's allocation row in the batch that empties it; the
/// rows of live runs stay, and so does nothing else of the dead run's node.
pub(super) async fn recovery_sweep_removes_the_dead_runs_emptied_allocation_row(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    publish(&a).await;
    publish(&b).await;
    for object in ["x", "y", "w"] {
        active_actor(&a, object).await;
    }
    reserve(&a, ObjectKind::UserSpot, "s", "game", &a).await;
    active_actor(&b, "z").await;
    assert!(row_stored(h, &a.node()).await);
    let dead = a.run();
    a.rt.lease().release().await.expect("A stops renewing");
    let report = recover(&b, &dead).await;
    assert_eq!(
        (report.matched, report.removed, report.idle_nodes_checked),
        (4, 4, 0)
    );
    assert!(
        !row_stored(h, &a.node()).await,
        "the dead run's emptied row is gone"
    );
    assert_eq!(capacity(&b, &a).await, NodeUsage::default());
    assert!(row_stored(h, &b.node()).await, "a live run's row stays");
    assert_eq!(capacity(&b, &b).await.actors.active, 1);
    // A second sweep finds nothing and the node is left as it is.
    let again = recover(&b, &dead).await;
    assert_eq!((again.matched, again.idle_nodes_checked), (0, 1));
    assert!(!row_stored(h, &a.node()).await);
    assert_eq!(
        snapshot_of(h.store.as_ref(), "mesh-node\0").await.len(),
        2,
        "descriptors are read, never changed"
    );
}

/// A row that still counts a slot stays: the dead source's row keeps the object skipped as
/// relocating, the live target keeps its reservation. Once the move ends and the dead node's
/// row is at zero, a later sweep removes it through the node the run's descriptor names, even
/// though it releases nothing there.
pub(super) async fn recovery_sweep_keeps_a_row_that_still_counts_a_slot(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    publish(&a).await;
    let x = active_actor(&a, "x").await;
    active_actor(&a, "y").await;
    let to_b = secure(&a, &x, &b).await;
    let dead = a.run();
    a.rt.lease().release().await.expect("A stops");
    let report = recover(&b, &dead).await;
    assert_eq!((report.removed, report.relocating), (1, 1));
    assert!(row_stored(h, &a.node()).await, "x is still counted on A");
    assert_eq!(capacity(&b, &a).await.actors.active, 1);
    assert!(
        row_stored(h, &b.node()).await,
        "the live target keeps its reservation"
    );
    assert_eq!(capacity(&b, &b).await.actors.reserved, 1);

    // B finishes the move: A's row is at zero (NewOwner stores it), and the next sweep of the
    // dead run removes it.
    b.rt.authority()
        .new_owner(&x, &to_b)
        .await
        .expect("new owner")
        .applied()
        .expect("B finishes the move");
    assert!(row_stored(h, &a.node()).await);
    assert_eq!(capacity(&b, &a).await, NodeUsage::default());
    let report = recover(&b, &dead).await;
    assert_eq!((report.matched, report.idle_nodes_checked), (0, 1));
    assert!(
        !row_stored(h, &a.node()).await,
        "the idle, empty row is gone"
    );
    assert!(row_stored(h, &b.node()).await);
    assert_eq!(capacity(&b, &b).await.actors.active, 1);
}

/// The self-sweep at shutdown removes this run's allocation rows once empty: one emptied by
/// the sweep itself, and one already at zero (its only actor was deleted before) found through
/// the run's descriptor. A row of another run it released capacity on stays while it counts
/// a slot.
pub(super) async fn self_sweep_removes_this_runs_empty_allocation_rows(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    let c = host(h, "main", 3).await;
    publish(&a).await;
    publish(&c).await;
    let x = active_actor(&a, "x").await;
    active_actor(&b, "z").await;
    secure(&a, &x, &b).await;
    let gone = active_actor(&c, "gone").await;
    c.rt.authority()
        .delete(&gone)
        .await
        .expect("delete")
        .applied()
        .expect("deleted");
    assert!(
        row_stored(h, &c.node()).await,
        "a delete stores the row at zero"
    );

    let (a_node, c_node) = (a.node(), c.node());
    let report = a.rt.shutdown().await.expect("shutdown");
    assert_eq!(
        (
            report.removed,
            report.reservations_released,
            report.idle_nodes_checked
        ),
        (1, 1, 0)
    );
    assert!(!row_stored(h, &a_node).await);
    assert!(row_stored(h, &b.node()).await, "B still counts z");
    assert_eq!(capacity(&b, &b).await.actors.active, 1);
    assert_eq!(capacity(&b, &b).await.actors.reserved, 0);

    let report = c.rt.shutdown().await.expect("shutdown");
    assert_eq!((report.matched, report.idle_nodes_checked), (0, 1));
    assert!(
        !row_stored(h, &c_node).await,
        "the row already at zero is gone too"
    );
}

/// A node's allocation row that counts fewer slots than the records holding them (here set
/// short by hand: a Store that lost writes can leave one so, `docs/store-epoch.md`, "Version
/// reuse") does not fail the recovery sweep for good: the release past it fails and changes
/// nothing, the row is rebuilt from the records, and one more pass removes what was left.
/// (Before, every sweep of the run failed with `CorruptRecord { NodeCapacity }` and the run's
/// objects stayed unreachable; the simulation's seed 12588.)
pub(super) async fn recovery_sweep_rebuilds_an_allocation_row_short_of_its_records(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    for object in ["x", "y", "w"] {
        active_actor(&a, object).await;
    }
    // The row says one actor; three records hold one each.
    let key = keys::node_capacity(&a.node()).expect("key");
    let short = crate::CapacityRow {
        actors: 1,
        ..crate::CapacityRow::default()
    };
    force_put(
        h.store.as_ref(),
        &key,
        &short.encode().expect("encode the row"),
    )
    .await;
    let dead = a.run();
    a.rt.lease().release().await.expect("A stops renewing");
    let report = recover(&b, &dead).await;
    assert_eq!(
        (report.matched, report.removed, report.rows_rebuilt),
        (3, 3, 1)
    );
    assert!(
        !row_stored(h, &a.node()).await,
        "every slot returned, the row is gone"
    );
    assert_eq!(capacity(&b, &a).await, NodeUsage::default());
}
