//! The stage records a live move writes (spec 21 §6.1, §9.1) and what a concurrent rewrite of
//! the record does to the move.

use super::*;

on_every_store!(
    stage_records_are_written_in_order_and_the_owner_change_follows_the_last,
    a_preserve_after_captured_fails_the_prepared_record_and_the_source_serves_again,
    a_preserve_after_prepared_fails_the_owner_change_and_the_source_serves_again,
);

/// Each stage record a move wrote, with the stage mark (stage, RelocationId) the record held.
type StageLog = Arc<parking_lot::Mutex<Vec<(RecordedStage, Option<(String, String)>)>>>;

/// Sets a hook on `source`'s moves, run after each stage record applied: it records the stage
/// and the stage mark the record then holds, and at `preserve_at` makes an ordinary Preserve of
/// the Actor's record (as a concurrent same-node rewrite would).
fn hook_stages(source: &ZLinkHost, id: &str, preserve_at: Option<RecordedStage>) -> StageLog {
    let client = source.actors().expect("manager").client;
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let id = zlink_codec::ObjectId::new(id).expect("id");
    let hook: crate::relocation::StageHook = Arc::new(move |stage| {
        let (client, log, id) = (client.clone(), Arc::clone(&log), id.clone());
        Box::pin(async move {
            let authority = client.objects.location.authority();
            let AuthorityRead::Found { handle, .. } =
                authority.read(ObjectKind::Actor, &id).await.expect("read")
            else {
                panic!("the record is missing");
            };
            log.lock()
                .push((stage, crate::relocation::recorded_stage(handle.payload())));
            if preserve_at == Some(stage) {
                let payload = handle.payload().to_vec();
                let done = authority
                    .preserve(&handle, payload)
                    .await
                    .expect("preserve");
                assert!(matches!(done, crate::location::Outcome::Applied(_)));
            }
        })
    });
    let objects = &source.actors().expect("manager").client.objects;
    *objects.relocations.stage_hook.lock() = Some(hook);
    seen
}

async fn stage_records_are_written_in_order_and_the_owner_change_follows_the_last(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let caller = m.client.0.actors().expect("manager");
    let r = caller
        .get_or_create("counter", "s1")
        .await
        .expect("created");
    assert_eq!(caller.request("s1", &Incr).await.expect("incr"), 1);
    let (source, target) = m.owner_and_other(&r);
    let stages = hook_stages(source, "s1", None);
    let moved = relocate(source, &r).await.expect("moved");
    assert_eq!(moved.node, rid_of(target));
    let stages = stages.lock().clone();
    let order: Vec<RecordedStage> = stages.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        order,
        vec![
            RecordedStage::Preparing,
            RecordedStage::Captured,
            RecordedStage::Prepared
        ]
    );
    let marks: Vec<&str> = stages
        .iter()
        .filter_map(|(_, m)| m.as_ref().map(|(stage, _)| stage.as_str()))
        .collect();
    assert_eq!(
        marks,
        vec!["preparing", "captured", "prepared"],
        "each record names its stage"
    );
    let ids: std::collections::BTreeSet<_> = stages
        .iter()
        .filter_map(|(_, m)| m.as_ref().map(|(_, id)| id.clone()))
        .collect();
    assert_eq!(ids.len(), 1, "one RelocationId throughout");
    assert_eq!(caller.request("s1", &Incr).await.expect("moved state"), 2);
    m.shutdown().await;
}

async fn a_preserve_after_captured_fails_the_prepared_record_and_the_source_serves_again(
    h: &Harness,
) {
    preserve_during_a_move_cancels_it(h, "s2", RecordedStage::Captured).await;
}

async fn a_preserve_after_prepared_fails_the_owner_change_and_the_source_serves_again(h: &Harness) {
    preserve_during_a_move_cancels_it(h, "s3", RecordedStage::Prepared).await;
}

/// An ordinary Preserve of the Actor's record after the stage record `at`: the next
/// reservation-conditioned write (the `Prepared` record, or NewOwner conditioned on it)
/// conflicts, the move is cancelled, the record is not moved and the source serves again, its
/// state intact; a later move succeeds.
async fn preserve_during_a_move_cancels_it(h: &Harness, id: &str, at: RecordedStage) {
    let m = mesh_of(h, Policy::Preserve).await;
    let caller = m.client.0.actors().expect("manager");
    let r = caller.get_or_create("counter", id).await.expect("created");
    assert_eq!(caller.request(id, &Incr).await.expect("incr"), 1);
    let (source, target) = m.owner_and_other(&r);
    let before = record(source, id).await;
    let stages = hook_stages(source, id, Some(at));
    let err = relocate(source, &r).await.expect_err("cancelled");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    let last = stages.lock().last().map(|(s, _)| *s);
    assert_eq!(last, Some(at), "no stage record after the conflict");
    let after = record(source, id).await;
    assert_eq!(
        (&after.0, after.1),
        (&before.0, before.1),
        "the record is not moved"
    );
    assert_eq!(caller.request(id, &Incr).await.expect("served here"), 2);
    let objects = &source.actors().expect("manager").client.objects;
    *objects.relocations.stage_hook.lock() = None;
    let moved = relocate(source, &r).await.expect("moved");
    assert_eq!(moved.node, rid_of(target));
    assert_eq!(caller.request(id, &Incr).await.expect("moved state"), 3);
    m.shutdown().await;
}
