//! Held activations checked against the Store (issue 36; `objects/host/audit.rs`): an
//! activation whose record went away behind its back is closed within a few renew
//! intervals, and nothing else is; a read on its own node that shows it gone closes it at once.

use std::time::Duration;

use zlink_location::ObjectKind;
use zlink_testkit::Harness;

use super::support::*;

on_every_store!(
    an_activation_whose_record_was_deleted_behind_its_back_is_closed_and_nothing_else,
    a_read_on_the_owning_node_showing_the_record_gone_closes_its_activation_at_once
);

/// Three roots, eight counter Actors each asked once. One Actor's authority row is deleted
/// behind the runtime's back (an operator, a stray write): its activation is closed within a
/// few renew intervals (100 ms here), the seven others keep running with their state (no
/// activation closed by mistake over many more ticks), and the id is then created again as a
/// new incarnation.
async fn an_activation_whose_record_was_deleted_behind_its_back_is_closed_and_nothing_else(
    h: &Harness,
) {
    let ([ha, hb, hc], _) = three_counter_servers(&h.store).await;
    let hosts = [&ha, &hb, &hc];
    let m = ha.actors().expect("manager");
    let refs = counters_asked_once(&m, "c", 8).await;
    assert_eq!(live_per_id(&hosts).len(), 8);
    // Past the hosts' own verification of the rows they wrote (after the next renews): the
    // deletion below is no lost write of theirs, and no host takes its lease over for it.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let runs: Vec<_> = hosts
        .iter()
        .map(|x| x.object_host(0).location.host_run())
        .collect();

    let gone = &refs[0];
    let key = zlink_location::authority_key(ObjectKind::Actor, &gone.id).expect("key");
    zlink_testkit::force_delete(h.store.as_ref(), &key).await;
    wait_until("the activation of the deleted record is closed", || {
        !live_per_id(&hosts).contains_key(gone.id.as_str())
    })
    .await;

    // Many more ticks: no other activation is closed, each keeps its state.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let live = live_per_id(&hosts);
    assert_eq!(live.len(), 7, "{live:?}");
    assert!(live.values().all(|&n| n == 1), "{live:?}");
    for r in &refs[1..] {
        assert_eq!(
            m.request(r.id.as_str(), &Incr).await.expect("incr"),
            2,
            "{r:?} kept its state"
        );
    }

    let now: Vec<_> = hosts
        .iter()
        .map(|x| x.object_host(0).location.host_run())
        .collect();
    assert_eq!(now, runs, "closed by the audit, not by a takeover");

    // The id comes back as a new incarnation.
    let again = m
        .get_or_create("counter", gone.id.as_str())
        .await
        .expect("created again");
    assert!(
        again.generation > gone.generation,
        "{again:?} after {gone:?}"
    );
    assert_eq!(m.request(gone.id.as_str(), &Incr).await.expect("incr"), 1);
    stop_all(&hosts).await;
}

/// Two roots with the default leases (the audit's pass and the hosts' write verification tick
/// every 5 s, not within the test). An Actor live on root a has its record deleted behind the
/// runtime's back (as a Store rollback would): a's own `find` reads the record gone and closes
/// the activation at once, so the next `get_or_create` makes a new incarnation and a's
/// request runs there (count 1), never on the old activation (spec 21 §7.1). A call to an
/// object live on its node takes the live activation without reading the record, so only a
/// read can tell it is gone.
async fn a_read_on_the_owning_node_showing_the_record_gone_closes_its_activation_at_once(
    h: &Harness,
) {
    let options =
        zlink_location::LocationOptions::default().polling_interval(Duration::from_millis(100));
    let factories = std::sync::Arc::default();
    let (ha, a) = counter_server(h.store.clone(), options.clone(), &factories).await;
    let (hb, b) = counter_server(h.store.clone(), options, &factories).await;
    wait_peers(&a, 1).await;
    wait_peers(&b, 1).await;
    wait_discovered(&[&ha, &hb]).await;
    let m = ha.actors().expect("manager");
    let mut on_a = None;
    for i in 0..64 {
        let r = m
            .get_or_create("counter", &format!("c{i}"))
            .await
            .expect("created");
        if r.node == *a.routing_id() {
            on_a = Some(r);
            break;
        }
    }
    let first = on_a.expect("one of 64 Actors landed on a");
    let id = first.id.as_str();
    assert_eq!(m.request(id, &Incr).await.expect("incr"), 1);
    assert_eq!(m.request(id, &Incr).await.expect("incr"), 2);

    let key = authority_key(ObjectKind::Actor, &first.id);
    zlink_testkit::force_delete(h.store.as_ref(), &key).await;
    assert!(
        live_per_id(&[&ha]).contains_key(id),
        "nothing has read it yet"
    );
    assert_eq!(m.find(id).await.expect("find"), None);
    assert!(
        !live_per_id(&[&ha]).contains_key(id),
        "the read that showed the record gone closed the activation"
    );

    let again = m.get_or_create("counter", id).await.expect("created again");
    assert!(
        again.generation > first.generation,
        "{again:?} after {first:?}"
    );
    assert_eq!(
        m.request(id, &Incr).await.expect("incr"),
        1,
        "the call runs on the new incarnation"
    );
    stop_all(&[&ha, &hb]).await;
}
