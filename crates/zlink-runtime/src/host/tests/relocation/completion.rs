//! Completion records (spec 21 §9.3; §12 "Location Cache And Completion Results"): a request
//! another node sent, held by the source at the seal and relayed, finishes on the target after
//! the owner changed; its result is stored in the Relocation Store, the record points at it,
//! it is delivered to the requester until confirmed, and `completed` is recorded.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::{ObjectKind, ObjectRole};
use zlink_relocation::unit::RecordedStage;
use zlink_store_spi::DynRelocationStore;

use super::super::instances::{Recorded, relocation_store};
use super::*;
use crate::relocation::Confirmation;
use crate::relocation::MovesOf;

/// Two counter servers and a client over the harness's store, every root on `relocation`.
pub(super) async fn mesh_on(h: &Harness, relocation: &Arc<Recorded>) -> Mesh {
    mesh_with(h, relocation, fast_options()).await
}

/// [`mesh_on`] with the Location options `options`.
async fn mesh_with(
    h: &Harness,
    relocation: &Arc<Recorded>,
    options: zlink_location::LocationOptions,
) -> Mesh {
    relocation.pointers_under("authority\0actor\0");
    let seen = Arc::new(Seen::default());
    let mut roots = Vec::new();
    for role in [ObjectRole::Server, ObjectRole::Server, ObjectRole::Client] {
        let spec = host::Spec {
            role,
            policy: Policy::Preserve,
            version: 0,
            wave: None,
        };
        let store: Arc<dyn DynRelocationStore> = relocation.clone();
        roots.push(host::start_root_with(Arc::clone(&h.store), spec, &seen, &options, store).await);
    }
    wait_connected(&roots).await;
    for (root, _) in &roots {
        // The tests read how each log ended.
        if let Ok(actors) = root.actors() {
            actors
                .client
                .objects
                .relocations()
                .completions
                .probe
                .keep_ended();
        }
    }
    let mut roots = roots.into_iter();
    let (a, b, c) = (
        roots.next().expect("a"),
        roots.next().expect("b"),
        roots.next().expect("c"),
    );
    Mesh {
        servers: [a, b],
        client: c,
        seen,
    }
}

/// At the `Captured` record of `source`'s move, the client sends `send` to `id` and the hook
/// waits until the source holds it (so it is relayed to the target); the request's answer
/// arrives on the returned receiver.
pub(super) fn request_at_capture<M>(
    m: &Mesh,
    source: &ZLinkHost,
    id: &str,
    send: fn() -> M,
) -> tokio::sync::oneshot::Receiver<Result<u64, crate::messaging::ZLinkError>>
where
    M: Request<Reply = u64> + Send + Sync + 'static,
{
    let caller = m.client.0.actors().expect("manager");
    let objects = Arc::clone(&source.actors().expect("manager").client.objects);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let tx = Arc::new(parking_lot::Mutex::new(Some(tx)));
    let key = (
        AuthorityKind::Actor,
        zlink_codec::ObjectId::new(id).expect("id"),
    );
    let id = id.to_owned();
    let hook: crate::relocation::StageHook = Arc::new(move |stage| {
        let (caller, objects, tx, key, id) = (
            caller.clone(),
            Arc::clone(&objects),
            Arc::clone(&tx),
            key.clone(),
            id.clone(),
        );
        Box::pin(async move {
            if stage != RecordedStage::Captured {
                return;
            }
            let Some(tx) = tx.lock().take() else { return };
            tokio::spawn(async move {
                let _ = tx.send(caller.request(&id, &send()).await);
            });
            wait_until("the source holds the request", || {
                objects.relocations().held_len(&key) >= 1
            })
            .await;
        })
    });
    let objects = &source.actors().expect("manager").client.objects;
    objects.relocations().probe.on_stage(Some(hook));
    rx
}

/// The `relocation` field of the Actor's record, as read through `host`.
pub(super) async fn mark(host: &ZLinkHost, id: &str) -> serde_json::Value {
    let client = host.actors().expect("manager").client;
    let id = zlink_codec::ObjectId::new(id).expect("id");
    match client.read(ObjectKind::Actor, &id).await.expect("read") {
        AuthorityRead::Found { handle, .. } => {
            crate::relocation::relocation_mark(handle.payload()).unwrap_or_default()
        }
        AuthorityRead::Missing { .. } => panic!("the record is missing"),
    }
}

/// Waits until the Actor's record names the completion stage `stage`, and returns the mark.
pub(super) async fn wait_for_mark(host: &ZLinkHost, id: &str, stage: &str) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let m = mark(host, id).await;
        if m.get("stage").and_then(|s| s.as_str()) == Some(stage) {
            return m;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the record never named {stage}: {m}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Whether `reference` is a completion payload the runtime stored (`zlink-completion/` +
/// RelocationId + `/` + sequence: the unit's index, not one of its chunks).
pub(super) fn is_completion_payload(reference: &str) -> bool {
    reference
        .strip_prefix("zlink-completion/")
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(id, seq)| {
            id.chars().all(|c| c.is_ascii_hexdigit()) && seq.chars().all(|c| c.is_ascii_digit())
        })
}

/// The completion payloads `recorded` saw stored.
fn completion_payloads(recorded: &Recorded) -> Vec<zlink_store_spi::BlobRef> {
    recorded
        .puts()
        .into_iter()
        .filter(|r| is_completion_payload(r.as_str()))
        .collect()
}

async fn a_request_finishing_after_the_owner_changed_is_stored_recorded_delivered_once_and_completed(
    h: &Harness,
) {
    let recorded = relocation_store(h).await;
    let m = mesh_on(h, &recorded).await;
    let (caller, r) = m.counter_at_one("q1").await;
    let (source, target) = m.owner_and_other(&r);
    let answer = request_at_capture(&m, source, "q1", || Incr);
    let moved = relocate(source, &r).await.expect("moved");
    assert_eq!(moved.node, rid_of(target));
    let got = answer.await.expect("answered");
    assert_eq!(got.expect("the relayed request's result"), 2, "run once");
    let done = wait_for_mark(target, "q1", "completed").await;
    assert_eq!(done["accepted"], 1, "{done}");
    assert_eq!(done["completed"], 1, "{done}");
    let objects = &target.actors().expect("manager").client.objects;
    wait_until("the log ended", || {
        objects.relocations().completions.probe.any_ended()
    })
    .await;
    let c = target.status().completions;
    assert_eq!(
        (
            c.recorded,
            c.terminal_received,
            c.already_terminal,
            c.source_lease_expired,
            c.data_lost,
            c.deadline_exceeded
        ),
        (1, 1, 0, 0, 0, 0),
        "{c:?}"
    );
    // Stored and read back before the record pointed at it; deleted only after the record
    // stopped pointing at it; nothing of it is left.
    let payloads = completion_payloads(&recorded);
    assert_eq!(payloads.len(), 1, "{payloads:?}");
    assert!(recorded.all_stored_and_read_back());
    assert!(recorded.deletes().contains(&payloads[0]));
    assert_eq!(recorded.deleted_while_pointed(), 0);
    assert!(!recorded.is_stored(&payloads[0]).await);
    assert_eq!(caller.request("q1", &Incr).await.expect("served"), 3);
    m.shutdown().await;
    recorded.purge().await;
}

async fn a_completion_delivered_again_is_already_terminal_and_answers_once(h: &Harness) {
    let recorded = relocation_store(h).await;
    let m = mesh_on(h, &recorded).await;
    let (caller, r) = m.counter_at_one("q2").await;
    let (source, target) = m.owner_and_other(&r);
    let answer = request_at_capture(&m, source, "q2", || Incr);
    relocate(source, &r).await.expect("moved");
    assert_eq!(answer.await.expect("answered").expect("result"), 2);
    wait_for_mark(target, "q2", "completed").await;
    let client = target.actors().expect("manager").client;
    let relocation: u128 = mark(target, "q2").await["id"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("relocation id");
    wait_until("the log ended", || {
        !client
            .objects
            .relocations()
            .completions
            .probe
            .ended(relocation)
            .is_empty()
    })
    .await;
    let again = crate::relocation::redeliver(&client.objects, &client.node.inner, relocation).await;
    assert_eq!(again, vec![Confirmation::AlreadyTerminal]);
    // The requester's state is unchanged by the second delivery: the request ran once.
    assert_eq!(caller.request("q2", &Incr).await.expect("served"), 3);
    m.shutdown().await;
    recorded.purge().await;
}

async fn a_lost_completion_payload_is_data_lost_and_the_owner_stays_the_target(h: &Harness) {
    let recorded = relocation_store(h).await;
    // The payload's index vanishes once stored (its chunks were read back when written).
    recorded.lose(is_completion_payload);
    let m = mesh_on(h, &recorded).await;
    let (caller, r) = m.counter_at_one("q3").await;
    let (source, target) = m.owner_and_other(&r);
    let answer = request_at_capture(&m, source, "q3", || Incr);
    relocate(source, &r).await.expect("moved");
    let err = answer
        .await
        .expect("answered")
        .expect_err("the stored result was lost");
    assert_eq!(err.kind(), ErrorKind::DataLost, "{err}");
    let lost = wait_for_mark(target, "q3", "dataLost").await;
    assert_eq!(lost["accepted"], 1, "{lost}");
    let objects = &target.actors().expect("manager").client.objects;
    wait_until("the lost result is answered DataLost", || {
        objects.relocations().completions.confirmations()[3] == 1
    })
    .await;
    // The owner never reverts to the source.
    assert_eq!(record(target, "q3").await.0, rid_of(target));
    assert_eq!(caller.request("q3", &Incr).await.expect("served"), 3);
    m.shutdown().await;
    recorded.purge().await;
}

/// Bounded (it hung, rarely, with every thread parked: 1 in about 15 full runs, cause not found
/// yet): a hang fails here naming the step it stopped at, instead of holding the test run.
async fn a_requester_whose_lease_ended_is_confirmed_source_lease_expired(h: &Harness) {
    let step = Arc::new(parking_lot::Mutex::new("start"));
    let bounded = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        requester_lease_ended(h, Arc::clone(&step)),
    )
    .await;
    assert!(bounded.is_ok(), "hung at the step: {}", step.lock());
}

async fn requester_lease_ended(h: &Harness, step: Arc<parking_lot::Mutex<&'static str>>) {
    let at = |s: &'static str| *step.lock() = s;
    at("mesh");
    let recorded = relocation_store(h).await;
    let m = mesh_on(h, &recorded).await;
    let (_, r) = m.counter_at_one("q4").await;
    let (source, target) = m.owner_and_other(&r);
    let answer = request_at_capture(&m, source, "q4", || Gated);
    at("relocate");
    relocate(source, &r).await.expect("moved");
    let target_rid = rid_of(target);
    // The relayed request runs on the target; its requester stops (its lease released) before
    // the result exists.
    let Mesh {
        servers: [(ha, _), (hb, _)],
        client,
        seen,
    } = m;
    at("the requester's shutdown");
    client.0.shutdown().await;
    at("the requester's request ends");
    let ended = answer.await.expect("ended");
    assert!(
        ended.is_err(),
        "the stopped requester's request ended: {ended:?}"
    );
    seen.release.store(true, Ordering::SeqCst);
    let target = if rid_of(&ha) == target_rid { &ha } else { &hb };
    at("the completed mark");
    let done = wait_for_mark(target, "q4", "completed").await;
    assert_eq!(done["completed"], 1, "{done}");
    let objects = &target.actors().expect("manager").client.objects;
    wait_until("the delivery is confirmed SourceLeaseExpired", || {
        objects.relocations().completions.confirmations()[2] == 1
    })
    .await;
    at("the servers' shutdown");
    ha.shutdown().await;
    hb.shutdown().await;
    at("the purge");
    recorded.purge().await;
}

on_every_store!(
    a_request_finishing_after_the_owner_changed_is_stored_recorded_delivered_once_and_completed,
    a_completion_delivered_again_is_already_terminal_and_answers_once,
    a_lost_completion_payload_is_data_lost_and_the_owner_stays_the_target,
    a_requester_whose_lease_ended_is_confirmed_source_lease_expired,
    a_request_relayed_as_the_owner_change_commits_stays_in_its_moves_log,
    a_completion_result_is_delivered_only_once_stored_verified_and_recorded,
    a_completion_result_not_stored_by_the_bound_ends_deadline_exceeded_once,
);

/// Issue 37 (21 §9.3, §10: completion payloads are "stored first and re-verified. Only
/// afterward does the Location Store CAS to point at that reference"): while the Relocation
/// Store cannot take the payload, and then while it cannot give it back, the result waits —
/// no delivery, no record pointing at it; once the Store answers (within the bound) it is
/// delivered once, from the stored and recorded payload. Before, a payload that could not be
/// read back was delivered from memory at once.
async fn a_completion_result_is_delivered_only_once_stored_verified_and_recorded(h: &Harness) {
    let recorded = relocation_store(h).await;
    let m = mesh_on(h, &recorded).await;
    let (caller, r) = m.counter_at_one("q5").await;
    let (source, target) = m.owner_and_other(&r);
    recorded.stall(Some(is_completion_payload), Some(is_completion_payload));
    let mut answer = request_at_capture(&m, source, "q5", || Incr);
    relocate(source, &r).await.expect("moved");
    let objects = &target.actors().expect("manager").client.objects;
    let quiet = std::time::Duration::from_millis(1500);
    // The Store takes nothing: nothing delivered, nothing recorded.
    tokio::time::sleep(quiet).await;
    assert!(answer.try_recv().is_err(), "delivered before it was stored");
    assert!(completion_payloads(&recorded).is_empty());
    // The Store takes it but cannot give it back: still nothing delivered, nothing recorded.
    recorded.stall(None, Some(is_completion_payload));
    wait_until("the payload is stored", || {
        !completion_payloads(&recorded).is_empty()
    })
    .await;
    tokio::time::sleep(quiet).await;
    assert!(
        answer.try_recv().is_err(),
        "delivered before it was verified"
    );
    let m5 = mark(target, "q5").await;
    assert!(
        m5.get("payload").is_none(),
        "recorded before it was verified: {m5}"
    );
    assert_eq!(target.status().completions.recorded, 0);
    // The Store answers again: delivered once, with its record.
    recorded.stall(None, None);
    let got = answer.await.expect("answered");
    assert_eq!(got.expect("the relayed request's result"), 2, "run once");
    let done = wait_for_mark(target, "q5", "completed").await;
    assert_eq!(done["completed"], 1, "{done}");
    wait_until("the log ended", || {
        objects.relocations().completions.probe.any_ended()
    })
    .await;
    let c = target.status().completions;
    assert_eq!(
        (c.recorded, c.terminal_received, c.deadline_exceeded),
        (1, 1, 0),
        "{c:?}"
    );
    assert_eq!(recorded.deleted_while_pointed(), 0);
    assert_eq!(caller.request("q5", &Incr).await.expect("served"), 3);
    m.shutdown().await;
    recorded.purge().await;
}

/// Issue 37: a completion result the Relocation Store does not take before the move's bound
/// (here `storeFailureGrace`: the Restore carried no deadline) is never delivered without its
/// record: the requester's request ends `DeadlineExceeded`, once; nothing points at a
/// payload, `completed` is not recorded. Before, it was delivered from memory at the bound.
async fn a_completion_result_not_stored_by_the_bound_ends_deadline_exceeded_once(h: &Harness) {
    let recorded = relocation_store(h).await;
    let grace = std::time::Duration::from_secs(2);
    let m = mesh_with(h, &recorded, fast_options().store_failure_grace(grace)).await;
    let (caller, r) = m.counter_at_one("q6").await;
    let (source, target) = m.owner_and_other(&r);
    recorded.stall(Some(is_completion_payload), Some(is_completion_payload));
    let answer = request_at_capture(&m, source, "q6", || Incr);
    relocate(source, &r).await.expect("moved");
    let err = answer
        .await
        .expect("answered")
        .expect_err("not stored by the bound: never delivered");
    assert_eq!(err.kind(), ErrorKind::DeadlineExceeded, "{err}");
    let objects = &target.actors().expect("manager").client.objects;
    wait_until("the log ended", || {
        objects.relocations().completions.probe.any_ended()
    })
    .await;
    // The Store answers again: nothing more is delivered or recorded.
    recorded.stall(None, None);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let c = target.status().completions;
    assert_eq!(
        (
            c.recorded,
            c.terminal_received,
            c.already_terminal,
            c.data_lost,
            c.deadline_exceeded
        ),
        (0, 0, 0, 0, 1),
        "{c:?}"
    );
    assert!(completion_payloads(&recorded).is_empty());
    let m6 = mark(target, "q6").await;
    assert!(m6.get("payload").is_none(), "{m6}");
    assert_ne!(m6.get("stage").and_then(|s| s.as_str()), Some("completed"));
    // The owner is the target, and the request ran once.
    assert_eq!(record(target, "q6").await.0, rid_of(target));
    assert_eq!(caller.request("q6", &Incr).await.expect("served"), 3);
    m.shutdown().await;
    recorded.purge().await;
}

/// Issue 20: a relayed request accepted on the target just as its move's owner change is
/// concluded there (`committed` lands right after the request entered its log) stays in the
/// move's log, counted. Before, the log could be dropped from the map between being made and
/// counting the request — yet marked committed: the request's result was then never settled
/// and was recorded and delivered only once `storeFailureGrace` had passed, after most
/// callers' timeouts.
async fn a_request_relayed_as_the_owner_change_commits_stays_in_its_moves_log(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let target = &m.servers[0].0;
    let objects = Arc::clone(&target.actors().expect("manager").client.objects);
    let node = Arc::clone(&target.node(&mesh()).expect("node").inner);
    let relocation = 0x5eed_u128;
    let key = (
        AuthorityKind::Actor,
        zlink_codec::ObjectId::new("c-race").expect("id"),
    );
    let committing = Arc::clone(&objects);
    let hook: crate::relocation::AcceptHook = Arc::new(move |r| {
        committing.relocations().completions.committed(r);
    });
    objects
        .relocations()
        .completions
        .probe
        .on_accept(Some(hook));
    let requester = rid_of(&m.client.0);
    let request = zlink_transport::Envelope::request(
        zlink_transport::OperationId::new(1).expect("op"),
        zlink_transport::ReplyRouteId::new(1).expect("route"),
        &requester,
        zlink_codec::Generation::new(1).expect("generation"),
        bytes::Bytes::new(),
    );
    let from = rid_of(&m.servers[1].0);
    let done = objects.relocations().completions.accept(
        &objects,
        &node,
        (relocation, &key, ObjectKind::Actor),
        None,
        from,
        request,
    );
    objects.relocations().completions.probe.on_accept(None);
    assert_eq!(
        objects.relocations().completions.accepted(relocation, &key),
        Some(1),
        "the committed move's log keeps the request"
    );
    // Not a real move: its requests are answered directly.
    objects.relocations().completions.abandoned(relocation);
    drop(done);
    m.shutdown().await;
}
