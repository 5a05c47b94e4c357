//! What a caller sees when the Location Store cannot be reached while it looks for an
//! object's owner (spec 21 §10 "the Store connection drops", §12 "Store Failure"; 06 §20:
//! a route that cannot be found is `Unavailable`): the request ends `Unavailable`, never
//! `InternalFailure`, nothing is applied, and the next request after the Store answers again
//! is served.

use std::sync::Arc;

use zlink_location::ObjectKind;
use zlink_store_conformance::{Fault, FaultyLocationStore};
use zlink_testkit::Harness;

use super::support::*;
use crate::messaging::{ErrorKind, UnavailableReason, ZLinkError};

on_every_store!(
    a_request_while_the_store_is_unreachable_ends_unavailable,
    a_location_query_that_meets_a_store_failure_is_unavailable
);

/// The caller root reads its Store through a faulty wrapper; the owner's record cannot be
/// read (the Store is down for that read and its retries): the request ends `Unavailable`
/// (the Store could not be reached), the counter did not move, and once the Store answers
/// the same request is served.
async fn a_request_while_the_store_is_unreachable_ends_unavailable(h: &Harness) {
    let (ha, a) = counter_server(h.store.clone(), fast_options(), &Arc::default()).await;
    let faulty = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let (hb, b) = counter_server(faulty.clone(), fast_options(), &Arc::default()).await;
    wait_peers(&a, 1).await;
    wait_peers(&b, 1).await;
    let owner = ha.actors().expect("manager");
    // An Actor on a: an activation live on the caller would take the call without a read.
    let mut id = String::new();
    for i in 0..64 {
        let candidate = format!("c{i}");
        let r = owner
            .get_or_create("counter", &candidate)
            .await
            .expect("created");
        if r.node == *a.routing_id() {
            id = candidate;
            break;
        }
    }
    assert!(!id.is_empty(), "one of 64 Actors landed on a");
    let id = id.as_str();
    assert_eq!(owner.request(id, &Incr).await.expect("served"), 1);
    // The caller has never reached the Actor: it must read the record, and the Store is down.
    let key = authority_key(
        ObjectKind::Actor,
        &zlink_location::ObjectId::new(id).expect("id"),
    );
    for _ in 0..8 {
        faulty.fail_next_read_of(key.clone(), Fault::UNAVAILABLE);
    }
    let caller = hb.actors().expect("manager");
    let err = caller
        .request(id, &Incr)
        .await
        .expect_err("the owner cannot be found");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(
        matches!(
            err,
            ZLinkError::Unavailable {
                reason: UnavailableReason::StoreUnreachable,
                ..
            }
        ),
        "{err:?}"
    );
    faulty.heal();
    assert_eq!(
        caller.request(id, &Incr).await.expect("served again"),
        2,
        "the failed request applied nothing"
    );
    stop_all(&[&hb, &ha]).await;
}

/// Spec 21 §7.4 (its table, row "Store query failure"): a lookup by id that cannot read the
/// Store is an `Unavailable` framework error (never `InternalFailure`, never an empty
/// answer), and a paged list that cannot scan ends the whole page as that error. Once the
/// Store answers, both answer again.
async fn a_location_query_that_meets_a_store_failure_is_unavailable(h: &Harness) {
    use zlink_location::{ListFilter, LookupKind};
    use zlink_store_conformance::LocationOp;
    let faulty = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let (ha, a) = counter_server(faulty.clone(), fast_options(), &Arc::default()).await;
    let (hb, b) = counter_server(h.store.clone(), fast_options(), &Arc::default()).await;
    wait_peers(&a, 1).await;
    wait_peers(&b, 1).await;
    ha.actors()
        .expect("manager")
        .get_or_create("counter", "q1")
        .await
        .expect("created");
    let id = zlink_location::ObjectId::new("q1").expect("id");

    faulty.set_fault([LocationOp::Read], Fault::UNAVAILABLE);
    let err = ha
        .locate(LookupKind::Actor, &id)
        .await
        .expect_err("the record cannot be read");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err:?}");
    assert!(
        matches!(err, ZLinkError::LocationQueryFailed { .. }),
        "the typed Store error is kept: {err:?}"
    );
    faulty.heal();

    faulty.set_fault([LocationOp::Scan], Fault::UNAVAILABLE);
    let err = ha
        .list_locations(ListFilter::new(ObjectKind::Actor), 10, None)
        .await
        .expect_err("the page cannot be scanned");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err:?}");
    faulty.heal();

    let entry = ha
        .locate(LookupKind::Actor, &id)
        .await
        .expect("answers again")
        .expect("the record exists");
    assert_eq!(entry.id, id);
    let page = ha
        .list_locations(ListFilter::new(ObjectKind::Actor), 10, None)
        .await
        .expect("answers again");
    assert_eq!(page.entries.len(), 1);
    stop_all(&[&hb, &ha]).await;
}
