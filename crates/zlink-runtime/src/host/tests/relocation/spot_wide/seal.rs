//! A `SpotWide` move around its seal and its owner change (spec 21 §8.2, §10; 28 §5): a member
//! created after the seal is refused, a lost aggregate NewOwner reply is settled by reading,
//! and a member request held at the seal is relayed and completed on the target.

use super::*;

on_every_store!(
    a_member_created_into_a_spot_wide_spot_during_its_relocation_is_refused,
    a_lost_spot_wide_owner_change_reply_is_settled_by_reading_and_the_spot_moves,
    a_member_request_held_at_the_seal_is_relayed_and_completed_on_the_target,
);

async fn a_member_created_into_a_spot_wide_spot_during_its_relocation_is_refused(h: &Harness) {
    let (r, hall, _ids) = roots(h, 3, &[], (None, false)).await;
    let refused = Arc::new(parking_lot::Mutex::new(None));
    let (actors, spot, seen) = (
        r[0].0.actors().expect("actors"),
        hall.clone(),
        Arc::clone(&refused),
    );
    // Once the Spot and its members are sealed and captured, a new member is refused.
    let hook: crate::relocation::StageHook = Arc::new(move |stage| {
        let (actors, spot, seen) = (actors.clone(), spot.clone(), Arc::clone(&seen));
        Box::pin(async move {
            if stage == zlink_relocation::unit::RecordedStage::Captured {
                let made = actors.get_or_create("member", "late").in_spot(&spot).await;
                *seen.lock() = Some(made.map(|_| ()).map_err(|e| e.kind()));
            }
        })
    });
    r[0].0
        .object_host(0)
        .relocations()
        .probe
        .on_stage(Some(hook));
    relocate(&r[0].0, &hall).await.expect("moved");
    assert_eq!(
        *refused.lock(),
        Some(Err(ErrorKind::Unavailable)),
        "a Spot sealed for a move takes no new member"
    );
    assert!(!live_here(&r[0].0, AuthorityKind::Actor, "late"));
    assert!(!live_here(&r[1].0, AuthorityKind::Actor, "late"));
    assert_eq!(
        r[1].0.object_host(0).live_list().len(),
        4,
        "the Spot and its 3 members"
    );
    for (host, _) in r {
        host.shutdown().await;
    }
}

/// Spec 21 §10 / §12 "Store Failure": the target's aggregate NewOwner applies but its reply is
/// lost, and the engine cannot settle it (its re-read of the Spot's record fails too). The
/// target settles it by reading the record (it names this reservation's target for the same
/// incarnation) instead of dropping the prepared group: the Spot and every member serve from
/// the target with their state.
async fn a_lost_spot_wide_owner_change_reply_is_settled_by_reading_and_the_spot_moves(h: &Harness) {
    use crate::host::tests::support::authority_key;
    use zlink_store_conformance::FaultyLocationStore;
    let source = root(h, ObjectRole::Server, None, false).await;
    let lossy = Arc::new(FaultyLocationStore::new(Arc::clone(&h.store)));
    let target = root_over(
        lossy.clone(),
        ObjectRole::Server,
        None,
        false,
        fast_options(),
    );
    let (r, hall, ids) = hall_moving_to(h, source, 3, target).await;
    let actors = r[2].0.actors().expect("actors");
    let key = authority_key(ObjectKind::UserSpot, &hall.id);
    let hook = super::super::stages::lose_the_next_owner_change_reply(&lossy, &key);
    r[0].0
        .object_host(0)
        .relocations()
        .probe
        .on_stage(Some(hook));
    relocate(&r[0].0, &hall).await.expect("moved");
    lossy.set_write_hook(None);
    let (node, _) = spot_record(&r[2].0, &hall).await;
    assert_eq!(
        &node,
        r[1].1.routing_id(),
        "the Spot's record names the target"
    );
    assert!(live_here(&r[1].0, AuthorityKind::Spot, hall.id.as_str()));
    for id in &ids {
        assert!(
            live_here(&r[1].0, AuthorityKind::Actor, id),
            "{id} lives on the target"
        );
        let (total, applied, disorder) = actors.request(id, &Totals).await.expect("totals");
        assert_eq!((total, applied, disorder), (1, 1, 0), "{id}'s state moved");
    }
    for (host, _) in r {
        host.shutdown().await;
    }
}

/// Spec 21 §1.3 step 5, §9.3: a request to a member that the source held at the aggregate's
/// seal is relayed to the member's temporary queue on the target before the cutover, runs
/// there once after the owner change, and is a completion record of the move: the member's
/// record says `completed` and the requester got its result once.
async fn a_member_request_held_at_the_seal_is_relayed_and_completed_on_the_target(h: &Harness) {
    use zlink_relocation::unit::RecordedStage;
    let (r, hall, ids) = roots(h, 2, &[], (None, false)).await;
    let actors = r[2].0.actors().expect("actors");
    let id = ids[0].clone();
    assert_eq!(
        actors
            .request(&id, &Step { stream: 0, seq: 1 })
            .await
            .expect("step"),
        1
    );
    let (tx, rx) = tokio::sync::oneshot::channel();
    let tx = Arc::new(parking_lot::Mutex::new(Some(tx)));
    let source = r[0].0.object_host(0);
    let key = (
        AuthorityKind::Actor,
        ObjectId::new(id.as_str()).expect("id"),
    );
    let hook: crate::relocation::StageHook = {
        let (actors, id, source, key) =
            (actors.clone(), id.clone(), Arc::clone(&source), key.clone());
        Arc::new(move |stage| {
            let (actors, id, source, key, tx) = (
                actors.clone(),
                id.clone(),
                Arc::clone(&source),
                key.clone(),
                Arc::clone(&tx),
            );
            Box::pin(async move {
                if stage != RecordedStage::Captured {
                    return;
                }
                let Some(tx) = tx.lock().take() else { return };
                tokio::spawn(async move {
                    let _ = tx.send(actors.request(&id, &Step { stream: 0, seq: 2 }).await);
                });
                wait_until("the source holds the member request", || {
                    source.relocations().held_len(&key) >= 1
                })
                .await;
            })
        })
    };
    source.relocations().probe.on_stage(Some(hook));
    relocate(&r[0].0, &hall).await.expect("moved");
    let answered = rx.await.expect("answered");
    assert_eq!(answered.expect("the relayed step"), 2);
    let target = r[1].0.object_host(0);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let read = target
            .location
            .authority()
            .read(ObjectKind::Actor, &key.1)
            .await
            .expect("read");
        let AuthorityRead::Found { handle, .. } = read else {
            panic!("the member's record is missing");
        };
        let mark = crate::relocation::relocation_mark(handle.payload()).unwrap_or_default();
        if mark["stage"] == "completed" {
            assert_eq!(mark["completed"], 1, "{mark}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never completed: {mark}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let c = r[1].0.status().completions;
    assert_eq!((c.recorded, c.terminal_received), (1, 1), "{c:?}");
    let (total, applied, disorder) = actors.request(&id, &Totals).await.expect("totals");
    assert_eq!((total, applied, disorder), (3, 2, 0), "ran once, in order");
    for (host, _) in r {
        host.shutdown().await;
    }
}
