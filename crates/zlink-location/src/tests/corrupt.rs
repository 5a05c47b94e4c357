//! Corrupt or foreign data under the store's namespace costs only its key: a key the Store
//! cannot read (another data type, a corrupt stored record; `ScanPage::unreadable`) and a row
//! whose bytes are no record of the runtime (a garbage record) are skipped, logged and counted
//! by the sweeps, the capacity read, discovery and the location list, which go on with every
//! other row.

use super::prelude::*;
use crate::{ListFilter, NodeKey};

fn node(rid: u8) -> NodeKey {
    let d = descriptor("main", &[rid]);
    NodeKey {
        mesh: d.mesh_name,
        routing_id: d.routing_id,
    }
}

/// Garbage authority and reservation rows (readable, but no record of the runtime) are
/// skipped and counted as undecodable; the self-sweep removes this run's rows all the same and
/// leaves the garbage untouched. (The garbage authority row is named by this run's index, the
/// only authority rows the sweep reads.)
pub(super) async fn sweeps_skip_and_count_undecodable_records(h: &Harness) {
    let a = host(h, "main", 1).await;
    active_actor(&a, "x").await;
    let garbage = [
        keys::authority(ObjectKind::Actor, &id("g")).expect("key"),
        keys::capacity_reservation(7).expect("key"),
        keys::run_object(&a.run(), ObjectKind::Actor, &id("g")).expect("key"),
    ];
    for k in &garbage {
        h.plant_garbage(k).await;
    }
    let report = a.rt.shutdown().await.expect("shutdown");
    assert_eq!(
        (
            report.matched,
            report.removed,
            report.undecodable,
            report.unreadable
        ),
        (1, 1, 2, 0),
        "{report:?}"
    );
    for k in &garbage[..2] {
        assert!(h.store.read(k).await.expect("read").bytes().is_some());
    }
}

/// A key the Store cannot read under each swept family (authority, reservation, descriptor)
/// costs only that key: the self-sweep removes this run's rows and counts the three. (The
/// authority key is named by this run's index, the only authority rows the sweep reads.)
pub(super) async fn a_wrong_typed_key_costs_only_that_key_in_a_sweep(h: &Harness) {
    let store = h
        .plant_foreign(&[
            keys::authority(ObjectKind::Actor, &id("f")).expect("key"),
            keys::capacity_reservation(7).expect("key"),
            keys::mesh_node(&node(9)).expect("key"),
        ])
        .await;
    let a = h
        .host_with(store.clone(), LocationOptions::default(), None, 1)
        .await;
    let entry = keys::run_object(&a.run(), ObjectKind::Actor, &id("f")).expect("key");
    let put = zlink_store_spi::WriteRequest::new(
        vec![],
        vec![zlink_store_spi::Mutation::put(
            entry,
            r#"{"recordVersion":1}"#,
        )],
    )
    .expect("put");
    store.write(&put).await.expect("put");
    publish(&a).await;
    active_actor(&a, "x").await;
    let report = a.rt.shutdown().await.expect("shutdown");
    assert_eq!(
        (report.matched, report.removed, report.unreadable),
        (1, 1, 3),
        "{report:?}"
    );
    assert!(matches!(
        h.host_with(store, LocationOptions::default(), None, 2)
            .await
            .rt
            .authority()
            .read(ObjectKind::Actor, &id("x"))
            .await
            .expect("read"),
        AuthorityRead::Missing { .. }
    ));
}

/// A node's usage is counted from the rows that read and decode; a foreign key and a garbage
/// row under the scanned families are left out and counted in `skipped`.
pub(super) async fn object_capacity_survives_a_foreign_key(h: &Harness) {
    let store = h
        .plant_foreign(&[keys::authority(ObjectKind::Actor, &id("f")).expect("key")])
        .await;
    h.plant_garbage(&keys::capacity_reservation(7).expect("key"))
        .await;
    let a = h
        .host_with(store, LocationOptions::default(), None, 1)
        .await;
    active_actor(&a, "x").await;
    reserve(&a, ObjectKind::Actor, "y", "chat", &a).await;
    let usage = a.rt.authority().node_usage(&a.node()).await.expect("usage");
    assert_eq!(
        (usage.actors.active, usage.actors.reserved, usage.skipped),
        (1, 1, 2),
        "{usage:?}"
    );
}

/// Discovery lists the live node past a foreign and a garbage descriptor key (both counted as
/// excluded); the location list leaves out an index row the Store cannot read, one whose
/// authority row it cannot read and one whose authority row is garbage.
pub(super) async fn discovery_and_lists_leave_out_only_the_unreadable_rows(h: &Harness) {
    let chat = ty("chat");
    let store = h
        .plant_foreign(&[
            keys::mesh_node(&node(9)).expect("key"),
            keys::location_index(ObjectKind::Actor, &chat, &id("i")).expect("key"),
            keys::authority(ObjectKind::Actor, &id("f")).expect("key"),
        ])
        .await;
    for k in [
        keys::mesh_node(&node(8)).expect("key"),
        keys::location_index(ObjectKind::Actor, &chat, &id("f")).expect("key"),
        keys::location_index(ObjectKind::Actor, &chat, &id("g")).expect("key"),
        keys::authority(ObjectKind::Actor, &id("g")).expect("key"),
    ] {
        h.plant_garbage(&k).await;
    }
    let a = h
        .host_with(store, LocationOptions::default(), None, 1)
        .await;
    publish(&a).await;
    active_actor(&a, "x").await;
    let view =
        a.rt.discovery(&a.desc.mesh_name)
            .expect("discovery")
            .refresh()
            .await
            .expect("refresh");
    assert_eq!(view.nodes.len(), 1);
    assert_eq!(view.nodes[0].node(), a.node());
    assert_eq!(view.excluded, 2);
    let page =
        a.rt.list(ListFilter::new(ObjectKind::Actor), 1000, None)
            .await
            .expect("list");
    let ids: Vec<_> = page.entries.iter().map(|e| e.id.clone()).collect();
    assert_eq!(ids, vec![id("x")]);
    assert!(page.next.is_none());
}
