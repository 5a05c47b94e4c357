//! One-way messages a move drops are never dropped silently (spec 21 §9.2, §9.4): every one
//! the relocation could not run is counted in `HostStatus::dropped_one_way` (and logged), and
//! every one the cutover accepted runs.

use super::*;
use crate::relocation::MovesOf;

on_every_store!(
    a_one_way_message_relayed_to_a_move_that_did_not_commit_is_counted,
    every_one_way_the_cutover_accepted_runs_and_none_is_counted,
);

/// How many one-way steps the client sends while the source holds.
const SENDS: u64 = 3;

/// The one-way messages the relocations of the servers dropped.
fn dropped(m: &Mesh) -> u64 {
    m.servers
        .iter()
        .map(|(h, _)| h.status().dropped_one_way)
        .sum()
}

/// At the `Prepared` record of `source`'s move of `id`, `sender` sends [`SENDS`] one-way steps
/// and the hook waits until the source holds them (they came from another node, so they are
/// relayed after relay-ready); with `preserve`, an ordinary Preserve then rewrites the record,
/// so the target's NewOwner conflicts.
fn send_at_prepared(
    source: &ZLinkHost,
    sender: &crate::objects::ActorManager,
    id: &str,
    preserve: bool,
) {
    let client = source.actors().expect("manager").client;
    let objects = Arc::clone(&client.objects);
    let key = (
        AuthorityKind::Actor,
        zlink_codec::ObjectId::new(id).expect("id"),
    );
    let (sender, id) = (sender.clone(), id.to_owned());
    let hook: crate::relocation::StageHook = Arc::new(move |stage| {
        let (client, objects, sender, key, id) = (
            client.clone(),
            Arc::clone(&objects),
            sender.clone(),
            key.clone(),
            id.clone(),
        );
        Box::pin(async move {
            if stage != RecordedStage::Prepared {
                return;
            }
            for seq in 1..=SENDS {
                sender
                    .send(&id, &StepSend { stream: 1, seq })
                    .await
                    .expect("the one-way is admitted");
            }
            wait_until("the source holds every one-way", || {
                objects.relocations().held_len(&key) as u64 >= SENDS
            })
            .await;
            if !preserve {
                return;
            }
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
    source
        .object_host(0)
        .relocations()
        .probe
        .on_stage(Some(hook));
}

/// One-ways held at the source and relayed after relay-ready to a target whose NewOwner
/// conflicts (an ordinary Preserve rewrote the record): the target's temporary queue is
/// abandoned with them, and the source is not restored (21 §9.4 last paragraph): none runs,
/// each is counted once; the Actor comes back as a new incarnation.
async fn a_one_way_message_relayed_to_a_move_that_did_not_commit_is_counted(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (caller, r) = m.counter_at_one("d1").await;
    let (source, _) = m.owner_and_other(&r);
    let before = dropped(&m);
    send_at_prepared(source, &caller, "d1", true);
    let err = relocate(source, &r)
        .await
        .expect_err("the owner change conflicts");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert_eq!(dropped(&m) - before, SENDS, "every one-way is counted once");
    let again = caller
        .get_or_create("counter", "d1")
        .await
        .expect("created");
    assert!(again.generation > r.generation, "a new incarnation");
    let (_, applied, _) = caller.request("d1", &Totals).await.expect("served");
    assert_eq!(applied, 0, "no held one-way ran");
    m.shutdown().await;
}

/// One-ways held at the source and relayed after relay-ready to a target whose NewOwner
/// commits: the cutover accepted every one, so every one runs on the new owner, in order, and
/// none is counted as dropped.
async fn every_one_way_the_cutover_accepted_runs_and_none_is_counted(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (caller, r) = m.counter_at_one("d2").await;
    let (source, target) = m.owner_and_other(&r);
    let before = dropped(&m);
    send_at_prepared(source, &caller, "d2", false);
    let moved = relocate(source, &r).await.expect("moved");
    assert_eq!(moved.node, rid_of(target));
    let (_, applied, out_of_order) = caller.request("d2", &Totals).await.expect("served");
    assert_eq!(applied, SENDS, "every one-way the cutover accepted ran");
    assert_eq!(out_of_order, 0, "in order");
    assert_eq!(dropped(&m) - before, 0, "nothing dropped");
    m.shutdown().await;
}
