//! Held activations checked against the Store (issue 36; `objects/host/audit.rs`): an
//! activation whose record went away behind its back is closed within a few renew
//! intervals, and nothing else is.

use std::time::Duration;

use zlink_location::ObjectKind;
use zlink_testkit::Harness;

use super::support::*;

on_every_store!(an_activation_whose_record_was_deleted_behind_its_back_is_closed_and_nothing_else);

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
