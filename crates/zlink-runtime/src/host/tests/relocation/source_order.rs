//! A caller on the SOURCE node keeps its own order across a move (21 §1.3, §7.3; 28 §6): the
//! messages it sent while the object was sealed follow to the new owner after the cutover, in
//! the source's forward queue; what it sends after the cutover goes through the same queue
//! while that queue still holds anything, so it never reaches the new owner ahead of them.

use super::*;
use crate::relocation::MovesOf;

on_every_store!(a_caller_on_the_source_node_is_not_overtaken_by_its_own_later_messages);

/// The step stream the test checks.
const STREAM: u32 = 11;

/// Tests: the source node's own request ([`Parked`]) and then its one-way step 1 are held at
/// the `Captured` record of the move (sent on the source, they follow after the cutover, in
/// that order); the request's answer arrives on the returned receiver.
fn hold_own_request_and_step_at_capture(
    source: &ZLinkHost,
    key: &crate::objects::host::ObjectKey,
) -> tokio::sync::oneshot::Receiver<Result<u64, crate::messaging::ZLinkError>> {
    let own = source.actors().expect("manager");
    let objects = Arc::clone(&own.client.objects);
    let hooked = Arc::clone(&objects);
    let (parked_tx, parked) = tokio::sync::oneshot::channel();
    let sender = Arc::new(parking_lot::Mutex::new(Some(parked_tx)));
    let key = key.clone();
    let hook: crate::relocation::StageHook = Arc::new(move |stage| {
        let (own, objects, sender, key) = (
            own.clone(),
            Arc::clone(&objects),
            Arc::clone(&sender),
            key.clone(),
        );
        Box::pin(async move {
            if stage != RecordedStage::Captured {
                return;
            }
            let Some(parked_tx) = sender.lock().take() else {
                return;
            };
            let id = key.1.as_str().to_owned();
            let asking = own.clone();
            let parked_id = id.clone();
            tokio::spawn(async move {
                let _ = parked_tx.send(asking.request(&parked_id, &Parked).await);
            });
            wait_until("the source holds its own request", || {
                objects.relocations().held_len(&key) >= 1
            })
            .await;
            own.send(
                &id,
                &StepSend {
                    stream: STREAM,
                    seq: 1,
                },
            )
            .await
            .expect("held");
            assert_eq!(objects.relocations().held_len(&key), 2, "step 1 is held");
        })
    });
    hooked.relocations().probe.on_stage(Some(hook));
    parked
}

/// The source node's own [`Parked`] request and one-way step 1 are held during the move and
/// follow after the cutover: the request is forwarded first and keeps the forward queue
/// busy until it is answered, step 1 waits behind it. Step 2, sent on the source after the
/// cutover, must not go to the new owner directly ahead of step 1: every step is applied
/// once, in order (before, step 2 read the record, went straight to the target and ran
/// first).
async fn a_caller_on_the_source_node_is_not_overtaken_by_its_own_later_messages(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (caller, r) = m.counter_at_one("s1").await;
    let (source, target) = m.owner_and_other(&r);
    let key = (
        AuthorityKind::Actor,
        zlink_codec::ObjectId::new("s1").expect("id"),
    );
    let parked = hold_own_request_and_step_at_capture(source, &key);
    let moving = {
        let (source, r) = (source.clone(), r.clone());
        tokio::spawn(async move { relocate(&source, &r).await })
    };
    let source_objects = Arc::clone(&source.actors().expect("manager").client.objects);
    wait_until("the source follows", || {
        source_objects.relocations().follow_record(&key).is_some()
    })
    .await;
    let own = source.actors().expect("manager");
    own.send(
        "s1",
        &StepSend {
            stream: STREAM,
            seq: 2,
        },
    )
    .await
    .expect("admitted");
    m.seen.unpark.store(true, Ordering::SeqCst);
    assert_eq!(
        parked
            .await
            .expect("answered")
            .expect("the source's request"),
        2,
        "the source's request ran on the new owner"
    );
    let moved = moving.await.expect("task").expect("moved");
    assert_eq!(moved.node, rid_of(target));
    let totals = totals_once_applied(&caller, "s1", 2).await;
    assert_eq!(totals, (5, 2, 0), "both steps applied once, in order");
    source_objects.relocations().probe.on_stage(None);
    m.shutdown().await;
}
