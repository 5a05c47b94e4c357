//! A caller on the TARGET node keeps its own order across a move (21 §1.3 step 7, §9.2; 28
//! §6): what it sent to the source while the cutover's NewOwner was still running (a Store
//! outage retries it for seconds) is relayed into the target's temporary queue, so it runs
//! before the target's dispatch opens — never after what the same caller sends the new owner
//! directly once the move committed.

use std::time::Duration;

use super::stages::faulty_mesh;
use super::*;
use crate::relocation::MovesOf;
use zlink_store_conformance::LocationOp;

on_every_store!(
    a_caller_on_the_target_node_is_not_overtaken_by_its_messages_held_during_the_cutover
);

/// The step stream the test checks.
const STREAM: u32 = 12;

/// The target's Store writes take 600 ms from the source's `Prepared` record on, so its
/// NewOwner is slow. While it runs, a caller on the target node sends step 1 (one-way): the
/// record still names the source, which holds it. Once the target committed, the same caller
/// sends step 2, which goes to the now-local Actor at once. Both steps are applied once, in
/// order (before, step 1 stayed in the source's hold until the cutover's answer — here lost,
/// and the move settled by a slow read of the record — and was followed after it, so step 2
/// ran first).
async fn a_caller_on_the_target_node_is_not_overtaken_by_its_messages_held_during_the_cutover(
    h: &Harness,
) {
    let (m, faulty) = faulty_mesh(h, fast_options()).await;
    let (caller, r) = m.counter_at_one("o1").await;
    let (source, target) = m.owner_and_other(&r);
    let (slow, settling) = if rid_of(target) == rid_of(&m.servers[0].0) {
        (Arc::clone(&faulty[0]), Arc::clone(&faulty[1]))
    } else {
        (Arc::clone(&faulty[1]), Arc::clone(&faulty[0]))
    };
    let hook: crate::relocation::StageHook = {
        let slow = Arc::clone(&slow);
        Arc::new(move |stage| {
            if stage == RecordedStage::Prepared {
                slow.set_delay([LocationOp::Write], Some(Duration::from_millis(600)));
            }
            Box::pin(async {})
        })
    };
    let source_objects = Arc::clone(&source.actors().expect("manager").client.objects);
    source_objects.relocations().probe.on_stage(Some(hook));
    // The source loses the cutover's answer and settles the move by reading (slowly): it
    // follows only some 300 ms after the target committed.
    source_objects.relocations().probe.lose_next_cutover_reply();
    let target_objects = Arc::clone(&target.actors().expect("manager").client.objects);
    let key = (
        AuthorityKind::Actor,
        zlink_codec::ObjectId::new("o1").expect("id"),
    );
    let moving = {
        let (source, r) = (source.clone(), r.clone());
        tokio::spawn(async move { relocate(&source, &r).await })
    };
    wait_until("the target's NewOwner runs", || {
        target_objects.relocations().probe.owner_changes_started() >= 1
    })
    .await;
    settling.set_delay([LocationOp::Read], Some(Duration::from_millis(300)));
    let local = target.actors().expect("manager");
    local
        .send(
            "o1",
            &StepSend {
                stream: STREAM,
                seq: 1,
            },
        )
        .await
        .expect("admitted");
    assert!(
        !target_objects.is_live(&key),
        "step 1 was sent (to the source, which the record names) while the NewOwner ran"
    );
    wait_until("the target committed", || target_objects.is_live(&key)).await;
    slow.set_delay([LocationOp::Write], None);
    local
        .send(
            "o1",
            &StepSend {
                stream: STREAM,
                seq: 2,
            },
        )
        .await
        .expect("admitted");
    let moved = moving.await.expect("task").expect("moved");
    settling.set_delay([LocationOp::Read], None);
    assert_eq!(moved.node, rid_of(target));
    let deadline = tokio::time::Instant::now() + WAIT;
    let totals = loop {
        let t = caller.request("o1", &Totals).await.expect("totals");
        if t.1 >= 2 || tokio::time::Instant::now() > deadline {
            break t;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(totals, (4, 2, 0), "both steps applied once, in order");
    source_objects.relocations().probe.on_stage(None);
    m.shutdown().await;
}
