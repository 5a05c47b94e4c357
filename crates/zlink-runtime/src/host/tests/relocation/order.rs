//! A caller's own messages keep their order across a move (21 §1.3, §7.3; 28 §6, §12.6): a
//! caller that learns the object moved — a request of its answered by the new owner — goes
//! to the new owner directly only once nothing it sent on the old route can still arrive there
//! behind it.

use super::*;
use crate::relocation::MovesOf;

on_every_store!(
    a_one_way_still_on_the_old_route_is_not_overtaken_when_the_caller_learns_of_the_move,
    a_message_arriving_as_its_object_is_sealed_keeps_its_envelope_and_is_relayed,
);

/// The one-way step stream the test checks.
const STREAM: u32 = 9;

/// The source's own request ([`Parked`], not relayed: it follows after the cutover) and the
/// caller's request ([`Gated`], relayed) are held at the `Captured` record of `source`'s move
/// of `id`; the answers arrive on the returned receivers.
fn hold_two_requests_at_capture(
    source: &ZLinkHost,
    caller: &crate::objects::ActorManager,
    id: &str,
) -> [tokio::sync::oneshot::Receiver<Result<u64, crate::messaging::ZLinkError>>; 2] {
    let own = source.actors().expect("manager");
    let objects = Arc::clone(&own.client.objects);
    let key = (
        AuthorityKind::Actor,
        zlink_codec::ObjectId::new(id).expect("id"),
    );
    let (parked_tx, parked) = tokio::sync::oneshot::channel();
    let (gated_tx, gated) = tokio::sync::oneshot::channel();
    let senders = Arc::new(parking_lot::Mutex::new(Some((parked_tx, gated_tx))));
    let (caller, id) = (caller.clone(), id.to_owned());
    let hook: crate::relocation::StageHook = Arc::new(move |stage| {
        let (own, caller, objects, senders, key, id) = (
            own.clone(),
            caller.clone(),
            Arc::clone(&objects),
            Arc::clone(&senders),
            key.clone(),
            id.clone(),
        );
        Box::pin(async move {
            if stage != RecordedStage::Captured {
                return;
            }
            let Some((parked_tx, gated_tx)) = senders.lock().take() else {
                return;
            };
            let own_id = id.clone();
            tokio::spawn(async move {
                let _ = parked_tx.send(own.request(&own_id, &Parked).await);
            });
            wait_until("the source holds its own request", || {
                objects.relocations().held_len(&key) >= 1
            })
            .await;
            tokio::spawn(async move {
                let _ = gated_tx.send(caller.request(&id, &Gated).await);
            });
            wait_until("the source holds the caller's request", || {
                objects.relocations().held_len(&key) >= 2
            })
            .await;
        })
    });
    source
        .object_host(0)
        .relocations()
        .probe
        .on_stage(Some(hook));
    [parked, gated]
}

async fn a_one_way_still_on_the_old_route_is_not_overtaken_when_the_caller_learns_of_the_move(
    h: &Harness,
) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (caller, r) = m.counter_at_one("o1").await;
    let (source, target) = m.owner_and_other(&r);
    let key = (
        AuthorityKind::Actor,
        zlink_codec::ObjectId::new("o1").expect("id"),
    );
    let [parked, gated] = hold_two_requests_at_capture(source, &caller, "o1");
    let moving = {
        let (source, r) = (source.clone(), r.clone());
        tokio::spawn(async move { relocate(&source, &r).await })
    };
    // The move completed: the caller's request was relayed and waits on the target (Gated);
    // the source follows, its own request first — forwarded, it waits behind the caller's.
    let source_objects = Arc::clone(&source.actors().expect("manager").client.objects);
    wait_until("the source follows", || {
        source_objects.relocations().follow_record(&key).is_some()
    })
    .await;
    // Still cached at the source: this one-way waits in the follow behind the source's request.
    caller
        .send(
            "o1",
            &StepSend {
                stream: STREAM,
                seq: 1,
            },
        )
        .await
        .expect("admitted");
    m.seen.release.store(true, Ordering::SeqCst);
    assert_eq!(
        gated.await.expect("answered").expect("the relayed request"),
        2,
        "answered by the new owner"
    );
    // The caller heard of the move; its next one-way must still run after the first.
    caller
        .send(
            "o1",
            &StepSend {
                stream: STREAM,
                seq: 2,
            },
        )
        .await
        .expect("admitted");
    let at_target = Arc::clone(&target.actors().expect("manager").client.objects);
    let client_objects = Arc::clone(&caller.client.objects);
    wait_until("the second one-way is on its way behind the first", || {
        // Through the old owner it is behind the first by construction; sent directly, it is
        // queued on the new owner behind the source's running request.
        client_objects.routes.get(&key).as_deref() == Some(&r.node)
            || at_target.live_object(&key).is_some_and(|l| l.jobs() >= 2)
    })
    .await;
    m.seen.unpark.store(true, Ordering::SeqCst);
    assert_eq!(
        parked
            .await
            .expect("answered")
            .expect("the source's request"),
        3
    );
    let moved = moving.await.expect("task").expect("moved");
    assert_eq!(moved.node, rid_of(target));
    let totals = totals_once_applied(&caller, "o1", 2).await;
    assert_eq!(totals, (6, 2, 0), "both one-ways applied once, in order");
    m.shutdown().await;
}

/// The client's one-way reaches the source's gate just as a move seals the Actor (the arrival
/// hook seals it there): it is held with the envelope it came in, so the relay after
/// relay-ready takes it to the target ahead of every later message — not kept back as if sent
/// on the source (which follows only after the cutover, behind later relayed ones).
async fn a_message_arriving_as_its_object_is_sealed_keeps_its_envelope_and_is_relayed(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (caller, r) = m.counter_at_one("e1").await;
    let (source, _) = m.owner_and_other(&r);
    let key = (
        AuthorityKind::Actor,
        zlink_codec::ObjectId::new("e1").expect("id"),
    );
    let objects = Arc::clone(&source.actors().expect("manager").client.objects);
    let sealed_key = key.clone();
    let hook: crate::relocation::ArrivalHook = Arc::new(move |relocations, k| {
        if k == &sealed_key {
            relocations.seal_for_tests(k);
        }
    });
    objects.relocations().probe.on_arrival(Some(hook));
    for seq in 1..=2 {
        caller
            .send(
                "e1",
                &StepSend {
                    stream: STREAM,
                    seq,
                },
            )
            .await
            .expect("admitted");
    }
    wait_until("the source holds both one-ways", || {
        objects.relocations().held_len(&key) >= 2
    })
    .await;
    objects.relocations().probe.on_arrival(None);
    let relayable = objects.relocations().take_relayable_for_tests(&key);
    let client = rid_of(&m.client.0);
    let sources: Vec<_> = relayable
        .iter()
        .map(|h| h.origin.as_ref().map(|e| e.source_rid().clone()))
        .collect();
    assert_eq!(
        sources,
        vec![Some(client.clone()), Some(client)],
        "both relayed, in order, each with the client's envelope"
    );
    assert_eq!(objects.relocations().held_len(&key), 0, "none kept back");
    m.shutdown().await;
}
