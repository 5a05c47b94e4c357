//! One-way messages a move drops are never dropped silently (spec 21 §9.2, §9.4): every one
//! the relocation could not run is counted in `HostStatus::dropped_one_way` (and logged), and
//! every one the cutover accepted runs.

use super::*;

on_every_store!(a_one_way_message_relayed_to_a_move_that_did_not_commit_is_counted,);

/// How many one-way steps the client sends while the source holds.
const SENDS: u64 = 3;

/// The one-way messages the relocations of the servers dropped.
fn dropped(m: &Mesh) -> u64 {
    m.servers
        .iter()
        .map(|(h, _)| h.status().dropped_one_way)
        .sum()
}

/// At the `Prepared` record the client sends [`SENDS`] one-way steps, the source holds them
/// (they came from another node, so they are relayed after relay-ready), and an ordinary
/// Preserve rewrites the record: the target's NewOwner conflicts and its temporary queue, with
/// the relayed one-ways, is abandoned. Whatever did not run is counted; the source serves again.
async fn a_one_way_message_relayed_to_a_move_that_did_not_commit_is_counted(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (caller, r) = m.counter_at_one("d1").await;
    let (source, _) = m.owner_and_other(&r);
    let before = dropped(&m);
    let client = source.actors().expect("manager").client;
    let objects = Arc::clone(&client.objects);
    let sender = caller.clone();
    let key = (
        AuthorityKind::Actor,
        zlink_codec::ObjectId::new("d1").expect("id"),
    );
    let hook: crate::relocation::StageHook = Arc::new(move |stage| {
        let (client, objects, sender, key) = (
            client.clone(),
            Arc::clone(&objects),
            sender.clone(),
            key.clone(),
        );
        Box::pin(async move {
            if stage != RecordedStage::Prepared {
                return;
            }
            for seq in 1..=SENDS {
                sender
                    .send("d1", &StepSend { stream: 1, seq })
                    .await
                    .expect("the one-way is admitted");
            }
            wait_until("the source holds every one-way", || {
                objects.relocations.held_len(&key) as u64 >= SENDS
            })
            .await;
            let authority = client.objects.location.authority();
            let AuthorityRead::Found { handle, .. } = authority
                .read(ObjectKind::Actor, &key.1)
                .await
                .expect("read")
            else {
                panic!("the record is missing");
            };
            let payload = handle.payload().to_vec();
            let done = authority
                .preserve(&handle, payload)
                .await
                .expect("preserve");
            assert!(matches!(done, zlink_location::Outcome::Applied(_)));
        })
    });
    *source
        .actors()
        .expect("manager")
        .client
        .objects
        .relocations
        .stage_hook
        .lock() = Some(hook);
    let err = relocate(source, &r)
        .await
        .expect_err("the owner change conflicts");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    // The source serves again; the steps that ran are in its state.
    let (_, applied, out_of_order) = caller.request("d1", &Totals).await.expect("served");
    assert_eq!(out_of_order, 0, "the steps that ran ran in order");
    assert_eq!(
        dropped(&m) - before,
        SENDS - applied,
        "every one-way that did not run is counted ({applied} ran)"
    );
    m.shutdown().await;
}
