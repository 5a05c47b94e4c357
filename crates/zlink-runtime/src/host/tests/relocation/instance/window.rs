//! Instance Spot messages at the edges of a move's target (issue 20; spec 21 §8, §9.2; 28
//! §7): one that reaches the target after its owner change applied and before its activation
//! opened waits in the move's temporary queue; a one-way the source relays answers its caller
//! only once the target took it, so that caller's next one-way cannot overtake it.

use super::*;
use crate::host::tests::support::Gate;
use zlink_relocation::unit::RecordedStage;

on_every_store!(
    a_message_reaching_the_target_before_its_activation_opened_waits_in_its_queue,
    a_relayed_one_way_answers_its_caller_only_once_the_target_took_it,
);

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
    let hook: crate::relocation::TargetHook = {
        let (gate, reached) = (gate.clone(), Arc::clone(&reached));
        Arc::new(move || {
            let (gate, reached) = (gate.clone(), Arc::clone(&reached));
            Box::pin(async move {
                reached.store(true, Ordering::SeqCst);
                gate.pass().await;
            })
        })
    };
    objects.relocations().probe.on_owner_changed(Some(hook));
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
    objects.relocations().probe.on_owner_changed(None);
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

/// A one-way the source held and relays answers its caller only once the target took it (into
/// its temporary queue, or its live object). Before, the caller was answered as soon as the
/// relay was sent; its next one-way — to the new owner, once its record read named it — could
/// reach the target first and run before it (seen under load: one caller's one-ways swapped
/// across the move). Here the target holds back the relay until the caller was answered (or
/// a second passed): the caller must not have been answered before the target took it.
async fn a_relayed_one_way_answers_its_caller_only_once_the_target_took_it(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (source, target) = m.tally_at_one("room-o").await;
    let key = (AuthorityKind::Spot, ObjectId::new("room-o").expect("id"));
    let order = Arc::new(parking_lot::Mutex::new(Vec::<&'static str>::new()));
    let answered = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sending = Arc::new(parking_lot::Mutex::new(None));
    let source_objects = Arc::clone(&source.spots().expect("manager").client.objects);
    let stage: crate::relocation::StageHook = {
        let spots = m.client.0.spots().expect("manager");
        let (objects, key, order, answered, sending) = (
            Arc::clone(&source_objects),
            key.clone(),
            Arc::clone(&order),
            Arc::clone(&answered),
            Arc::clone(&sending),
        );
        Arc::new(move |stage| {
            let (spots, objects, key) = (spots.clone(), Arc::clone(&objects), key.clone());
            let (order, answered, sending) = (
                Arc::clone(&order),
                Arc::clone(&answered),
                Arc::clone(&sending),
            );
            Box::pin(async move {
                if stage != RecordedStage::Captured || sending.lock().is_some() {
                    return;
                }
                let task = tokio::spawn(async move {
                    let step = StepSend { stream: 0, seq: 1 };
                    let out = spots
                        .instance("room-o")
                        .stable_type("tally")
                        .send(&step)
                        .await;
                    order.lock().push("answered");
                    answered.store(true, Ordering::SeqCst);
                    out
                });
                *sending.lock() = Some(task);
                wait_until("the source holds the one-way", || {
                    objects.relocations().held_len(&key) >= 1
                })
                .await;
            })
        })
    };
    source_objects.relocations().probe.on_stage(Some(stage));
    let target_objects = Arc::clone(&target.spots().expect("manager").client.objects);
    let relay: crate::relocation::TargetHook = {
        let (order, answered) = (Arc::clone(&order), Arc::clone(&answered));
        Arc::new(move || {
            let (order, answered) = (Arc::clone(&order), Arc::clone(&answered));
            Box::pin(async move {
                let until = tokio::time::Instant::now() + std::time::Duration::from_secs(1);
                while !answered.load(Ordering::SeqCst) && tokio::time::Instant::now() < until {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                order.lock().push("taken");
            })
        })
    };
    target_objects.relocations().probe.on_relay(Some(relay));
    let moved = relocate(source, "room-o").await.expect("moved");
    assert_eq!(moved.node, rid_of(target));
    source_objects.relocations().probe.on_stage(None);
    target_objects.relocations().probe.on_relay(None);
    let task = sending.lock().take().expect("the one-way was sent");
    task.await.expect("task").expect("admitted");
    let order = order.lock().clone();
    assert_eq!(
        order,
        ["taken", "answered"],
        "the target took the relayed one-way before its caller was answered"
    );
    let totals = m
        .client
        .0
        .spots()
        .expect("manager")
        .instance("room-o")
        .stable_type("tally")
        .request(&Totals)
        .await
        .expect("totals");
    assert_eq!(totals, (2, 1, 0), "it ran once, on the target");
    m.shutdown().await;
}
