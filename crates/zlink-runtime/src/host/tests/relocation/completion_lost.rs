//! A completion log that ended `DataLost` (spec 21 §9.3, §10): every request of it ends once
//! with `DataLost`, and no result is delivered without a stored record — also the results
//! that finish after the log ended, or while its lost batch is being answered.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use zlink_codec::keys::AuthorityKind;
use zlink_relocation::unit::RecordedStage;

use super::super::instances::relocation_store;
use super::completion::{is_completion_payload, mesh_on, wait_for_mark};
use super::*;
use crate::relocation::MovesOf;

on_every_store!(
    a_result_finishing_after_its_log_ended_data_lost_ends_data_lost_unrecorded_never_delivered,
    a_result_finishing_while_the_lost_batch_is_answered_ends_data_lost_once,
);

type Answer = tokio::sync::oneshot::Receiver<Result<u64, crate::messaging::ZLinkError>>;

/// At the `Captured` record of `source`'s move, the client sends `Incr` and then `Gated` to
/// `id`, each held by the source (so both are relayed to the target, in that order); their
/// answers arrive on the returned receivers.
fn two_requests_at_capture(m: &Mesh, source: &ZLinkHost, id: &str) -> (Answer, Answer) {
    let caller = m.client.0.actors().expect("manager");
    let objects = Arc::clone(&source.actors().expect("manager").client.objects);
    let (incr_tx, incr_rx) = tokio::sync::oneshot::channel();
    let (gated_tx, gated_rx) = tokio::sync::oneshot::channel();
    let senders = Arc::new(parking_lot::Mutex::new(Some((incr_tx, gated_tx))));
    let key = (
        AuthorityKind::Actor,
        zlink_codec::ObjectId::new(id).expect("id"),
    );
    let id = id.to_owned();
    let hook: crate::relocation::StageHook = Arc::new(move |stage| {
        let (caller, objects, senders, key, id) = (
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
            let Some((incr_tx, gated_tx)) = senders.lock().take() else {
                return;
            };
            let (c, i) = (caller.clone(), id.clone());
            tokio::spawn(async move {
                let _ = incr_tx.send(c.request(&i, &Incr).await);
            });
            wait_until("the source holds Incr", || {
                objects.relocations().held_len(&key) >= 1
            })
            .await;
            tokio::spawn(async move {
                let _ = gated_tx.send(caller.request(&id, &Gated).await);
            });
            wait_until("the source holds Gated", || {
                objects.relocations().held_len(&key) >= 2
            })
            .await;
        })
    });
    let objects = &source.actors().expect("manager").client.objects;
    objects.relocations().probe.on_stage(Some(hook));
    (incr_rx, gated_rx)
}

/// `Incr`'s stored payload is lost (its log ends `DataLost`); `Gated` finishes only once its
/// log ended: it has no stored record, so its request ends `DataLost` too — before, its
/// result was answered directly, delivered without any record.
async fn a_result_finishing_after_its_log_ended_data_lost_ends_data_lost_unrecorded_never_delivered(
    h: &Harness,
) {
    let recorded = relocation_store(h).await;
    recorded.lose(is_completion_payload);
    let m = mesh_on(h, &recorded).await;
    let (_, r) = m.counter_at_one("dl1").await;
    let (source, target) = m.owner_and_other(&r);
    let (incr, gated) = two_requests_at_capture(&m, source, "dl1");
    relocate(source, &r).await.expect("moved");
    let err = incr.await.expect("answered").expect_err("lost");
    assert_eq!(err.kind(), ErrorKind::DataLost, "{err}");
    let lost = wait_for_mark(target, "dl1", "dataLost").await;
    assert_eq!(
        (&lost["accepted"], &lost["completed"]),
        (&2.into(), &1.into())
    );
    let objects = &target.actors().expect("manager").client.objects;
    wait_until("the lost log ended", || {
        objects.relocations().completions.probe.any_ended()
    })
    .await;
    m.seen.release.store(true, Ordering::SeqCst);
    let got = tokio::time::timeout(WAIT, gated)
        .await
        .expect("Gated's request ends")
        .expect("answered");
    let err = got.expect_err("no stored record: never delivered");
    assert_eq!(err.kind(), ErrorKind::DataLost, "{err}");
    assert_both_ended_data_lost_unrecorded(target);
    m.shutdown().await;
    recorded.purge().await;
}

/// `Gated` finishes right after the lost log recorded `dataLost` and before it answered its
/// requests: it ends `DataLost`, once. Before, it entered the ended log and was never
/// answered.
async fn a_result_finishing_while_the_lost_batch_is_answered_ends_data_lost_once(h: &Harness) {
    let recorded = relocation_store(h).await;
    recorded.lose(is_completion_payload);
    let m = mesh_on(h, &recorded).await;
    let (_, r) = m.counter_at_one("dl2").await;
    let (source, target) = m.owner_and_other(&r);
    let objects = Arc::clone(&target.actors().expect("manager").client.objects);
    let seen = Arc::clone(&m.seen);
    let hook: crate::relocation::LostHook = Arc::new(move |_| {
        let seen = Arc::clone(&seen);
        Box::pin(async move {
            // `Gated` finishes now (it polls every 5 ms), while the lost batch is unanswered.
            seen.release.store(true, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(400)).await;
        })
    });
    objects
        .relocations()
        .completions
        .probe
        .on_data_lost(Some(hook));
    let (incr, gated) = two_requests_at_capture(&m, source, "dl2");
    relocate(source, &r).await.expect("moved");
    for (name, answer) in [("Incr", incr), ("Gated", gated)] {
        let got = tokio::time::timeout(WAIT, answer)
            .await
            .unwrap_or_else(|_| panic!("{name}'s request never ended"))
            .expect("answered");
        let err = got.expect_err("lost: never delivered");
        assert_eq!(err.kind(), ErrorKind::DataLost, "{name}: {err}");
    }
    wait_until("both ended DataLost, once each", || {
        objects.relocations().completions.confirmations()[3] == 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_both_ended_data_lost_unrecorded(target);
    objects.relocations().completions.probe.on_data_lost(None);
    m.shutdown().await;
    recorded.purge().await;
}

/// `target`'s completion counts after both requests of a lost log ended: nothing recorded or
/// delivered, two `DataLost`, no `DeadlineExceeded`.
fn assert_both_ended_data_lost_unrecorded(target: &ZLinkHost) {
    let c = target.status().completions;
    assert_eq!(
        (
            c.recorded,
            c.terminal_received,
            c.data_lost,
            c.deadline_exceeded
        ),
        (0, 0, 2, 0),
        "{c:?}"
    );
}
