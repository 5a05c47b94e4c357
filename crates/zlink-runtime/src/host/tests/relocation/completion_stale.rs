//! A completion log whose record moved on (spec 21 §10 "A different valid owner or generation
//! ends the stale relocation immediately"): the results it could not record are not
//! delivered; each request ends once with a typed error.

use zlink_codec::records::ObjectKind;

use super::super::instances::relocation_store;
use super::completion::{is_completion_payload, mark, mesh_on, request_at_capture};
use super::*;
use crate::relocation::MovesOf;

on_every_store!(a_completion_result_whose_record_moved_on_ends_stale_once_never_delivered,);

/// While the Relocation Store holds the result's payload back, the record names another
/// move's progress: once stored, the result cannot be recorded — its request ends
/// `DataLost` (`CompletionLost`: it ran, its result is gone; not `Unavailable`, which would
/// invite running it again) once and the other move's progress stays. Before, the
/// log stopped recording and delivered the result without a record.
async fn a_completion_result_whose_record_moved_on_ends_stale_once_never_delivered(h: &Harness) {
    let recorded = relocation_store(h).await;
    let m = mesh_on(h, &recorded).await;
    let (_, r) = m.counter_at_one("st1").await;
    let (source, target) = m.owner_and_other(&r);
    recorded.stall(Some(is_completion_payload), None);
    let answer = request_at_capture(&m, source, "st1", || Incr);
    relocate(source, &r).await.expect("moved");
    // Another move's progress in the record (the target owns it now).
    let host0 = target.object_host(0);
    let authority = host0.location.authority();
    let id = zlink_codec::ObjectId::new("st1").expect("id");
    let other = serde_json::json!({"stage": "preparing", "id": "7"});
    loop {
        let AuthorityRead::Found { handle, .. } =
            authority.read(ObjectKind::Actor, &id).await.expect("read")
        else {
            panic!("the record is missing");
        };
        let payload = crate::relocation::with_relocation_mark(&handle, other.clone())
            .expect("a membership payload");
        match authority
            .preserve(&handle, payload)
            .await
            .expect("preserve")
        {
            zlink_location::Outcome::Applied(_) => break,
            zlink_location::Outcome::Conflict(_) => continue,
        }
    }
    recorded.stall(None, None);
    let got = tokio::time::timeout(WAIT, answer)
        .await
        .expect("the request ends")
        .expect("answered");
    let err = got.expect_err("not recorded: never delivered");
    assert_eq!(err.kind(), ErrorKind::DataLost, "{err:?}");
    assert!(
        err.to_string()
            .contains("completion result of this request was lost"),
        "{err}"
    );
    let objects = &target.actors().expect("manager").client.objects;
    wait_until("the stale log ended", || {
        objects.relocations().completions.probe.any_ended()
    })
    .await;
    let c = target.status().completions;
    assert_eq!(
        (
            c.recorded,
            c.terminal_received,
            c.data_lost,
            c.deadline_exceeded,
            c.stale
        ),
        (0, 0, 0, 0, 1),
        "{c:?}"
    );
    assert_eq!(
        mark(target, "st1").await,
        other,
        "the other move's progress stays"
    );
    m.shutdown().await;
    recorded.purge().await;
}
