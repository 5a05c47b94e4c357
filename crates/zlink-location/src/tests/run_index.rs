//! The per-run index (`authority/run_index.rs`, docs/formats.md §9): every owner change keeps
//! it in the record's own batch, the sweeps read a run's rows from it, a stale entry is
//! removed, a run without a marker is read from every authority row, and a swept run leaves no
//! key of its index behind.

use super::prelude::*;
use zlink_store_spi::{Mutation, WriteRequest};

/// The keys under `run`'s index prefix, as text past the prefix (`run` for the marker,
/// `{actor|spot}\0{Id}` for an entry).
async fn index_of(h: &Harness, run: &HostRun) -> BTreeSet<String> {
    let prefix = keys::run_objects_prefix(run).expect("prefix");
    snapshot_of(h.store.as_ref(), prefix.as_str())
        .await
        .into_keys()
        .map(|k| k.as_str()[prefix.as_str().len()..].to_owned())
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// Puts `key` with the index row value, unconditioned (a row this runtime did not write).
async fn plant(h: &Harness, key: StoreKey) {
    let put =
        WriteRequest::new(vec![], vec![Mutation::put(key, r#"{"recordVersion":1}"#)]).expect("put");
    h.store.write(&put).await.expect("put");
}

/// Reserve, NewOwner and Delete move a record's entry between runs in their own batch, the
/// lease acquisition writes the marker, and the self-sweep reads the run from its index and
/// leaves no key of it behind.
pub(super) async fn the_run_index_follows_every_owner_change_and_the_sweep_empties_it(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    assert_eq!(index_of(h, &a.run()).await, set(&["run"]));
    let x = active_actor(&a, "x").await;
    let y = active_actor(&a, "y").await;
    reserve(&a, ObjectKind::UserSpot, "s", "game", &a).await;
    assert_eq!(
        index_of(h, &a.run()).await,
        set(&["actor\0x", "actor\0y", "run", "spot\0s"])
    );
    let res = secure(&a, &x, &b).await;
    let moved = b.rt.authority().new_owner(&x, &res).await;
    assert!(moved.expect("new owner").is_applied());
    let deleted = a.rt.authority().delete(&y).await;
    assert!(deleted.expect("delete").is_applied());
    assert_eq!(index_of(h, &a.run()).await, set(&["run", "spot\0s"]));
    assert_eq!(index_of(h, &b.run()).await, set(&["actor\0x", "run"]));
    let run = a.run();
    let report = a.rt.shutdown().await.expect("shutdown");
    assert!(report.indexed, "{report:?}");
    assert_eq!((report.matched, report.removed), (1, 1), "{report:?}");
    assert_eq!(
        index_of(h, &run).await,
        set(&[]),
        "no key of a swept run stays"
    );
    let report = recover(&b, &run).await;
    assert!(
        !report.indexed,
        "a run whose marker is gone is read from every row"
    );
    assert_eq!((report.matched, report.removed), (0, 0), "{report:?}");
}

/// A recovery-sweep of a dead run reads it from its index: another run's rows and rows the
/// index does not name are never read (a garbage row outside the index is not even counted),
/// a stale entry (its record gone) is removed, and the marker goes last.
pub(super) async fn a_recovery_sweep_reads_only_the_dead_runs_index_and_removes_stale_entries(
    h: &Harness,
) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    for i in 0..5 {
        active_actor(&a, &format!("a{i}")).await;
    }
    for i in 0..7 {
        active_actor(&b, &format!("b{i}")).await;
    }
    h.plant_garbage(&keys::authority(ObjectKind::Actor, &id("g")).expect("key"))
        .await;
    let dead = a.run();
    plant(
        h,
        keys::run_object(&dead, ObjectKind::Actor, &id("gone")).expect("key"),
    )
    .await;
    a.rt.lease().release().await.expect("A stops renewing");
    let report = recover(&b, &dead).await;
    assert!(report.indexed, "{report:?}");
    assert_eq!(
        (
            report.matched,
            report.removed,
            report.undecodable,
            report.stale_entries
        ),
        (5, 5, 0, 1),
        "{report:?}"
    );
    assert_eq!(index_of(h, &dead).await, set(&[]));
    assert_eq!(
        index_of(h, &b.run()).await.len(),
        8,
        "B's rows and marker stay"
    );
}

/// A run without a marker (its lease acquired before the index existed) is swept from every
/// authority row: nothing of it is missed, and its entries go with its rows.
pub(super) async fn a_run_without_an_index_marker_is_swept_from_every_authority_row(h: &Harness) {
    let a = host(h, "main", 1).await;
    for i in 0..3 {
        active_actor(&a, &format!("x{i}")).await;
    }
    let marker = keys::run_marker(&a.run()).expect("key");
    let delete = WriteRequest::new(vec![], vec![Mutation::Delete(marker)]).expect("delete");
    h.store.write(&delete).await.expect("delete");
    let run = a.run();
    let report = a.rt.shutdown().await.expect("shutdown");
    assert!(!report.indexed, "{report:?}");
    assert_eq!((report.matched, report.removed), (3, 3), "{report:?}");
    assert_eq!(index_of(h, &run).await, set(&[]));
}
