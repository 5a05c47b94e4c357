//! An Instance Spot message that reaches the move's target after its owner change applied
//! and before its activation opened there (issue 20; spec 21 §8, §9.2): the record already
//! names the target, so a caller that read it sends there; the message waits in the move's
//! temporary queue and runs as the activation opens, in its order.

use super::*;
use crate::host::tests::support::Gate;

on_every_store!(a_message_reaching_the_target_before_its_activation_opened_waits_in_its_queue);

/// The target's commit stops between its applied owner change and its opening. The client
/// reads the record (it names the target) and sends a one-way, then a request: both wait in
/// the temporary queue (before, each was refused `Unavailable`), then run in order once the
/// activation opened.
async fn a_message_reaching_the_target_before_its_activation_opened_waits_in_its_queue(
    h: &Harness,
) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (source, target) = m.tally_at_one("room-w").await;
    let objects = Arc::clone(&target.spots().expect("manager").client.objects);
    let (gate, reached) = (
        Gate::new(),
        Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    let hook: crate::relocation::OwnerChangedHook = {
        let (gate, reached) = (gate.clone(), Arc::clone(&reached));
        Arc::new(move || {
            let (gate, reached) = (gate.clone(), Arc::clone(&reached));
            Box::pin(async move {
                reached.store(true, Ordering::SeqCst);
                gate.pass().await;
            })
        })
    };
    *objects.relocations().owner_changed_hook.lock() = Some(hook);
    let moving = {
        let source = source.clone();
        tokio::spawn(async move { relocate(&source, "room-w").await })
    };
    wait_until("the target's owner change applied", || {
        reached.load(Ordering::SeqCst)
    })
    .await;
    assert_eq!(
        record(target, "room-w").await.expect("record").0,
        rid_of(target)
    );
    assert!(!live_on(target, "room-w"), "not open yet");
    let key = (AuthorityKind::Spot, ObjectId::new("room-w").expect("id"));
    let spots = m.client.0.spots().expect("manager");
    let sending = {
        let spots = spots.clone();
        tokio::spawn(async move {
            let step = StepSend { stream: 0, seq: 1 };
            spots
                .instance("room-w")
                .stable_type("tally")
                .send(&step)
                .await
        })
    };
    wait_until("the one-way waits in the target's queue", || {
        objects.relocations().queued_len(&key) >= 1
    })
    .await;
    let asking = {
        let spots = spots.clone();
        tokio::spawn(async move {
            spots
                .instance("room-w")
                .stable_type("tally")
                .request(&Incr)
                .await
        })
    };
    wait_until("the request waits behind it", || {
        objects.relocations().queued_len(&key) >= 2
    })
    .await;
    *objects.relocations().owner_changed_hook.lock() = None;
    gate.open();
    let moved = moving.await.expect("task").expect("moved");
    assert_eq!(moved.node, rid_of(target));
    sending.await.expect("task").expect("admitted");
    assert_eq!(
        asking.await.expect("task").expect("answered"),
        3,
        "after the step"
    );
    let totals = spots
        .instance("room-w")
        .stable_type("tally")
        .request(&Totals)
        .await
        .expect("totals");
    assert_eq!(totals, (3, 1, 0), "each ran once, in order");
    m.shutdown().await;
}
