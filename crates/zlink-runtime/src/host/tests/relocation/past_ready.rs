//! A move that fails after the relay-ready reply was accepted (spec 21 §9.4 last paragraph;
//! 28 §14 item 3: 21 wins): the source is never restored, its held work ends once with a
//! typed error, and the Actor comes back as a new incarnation at its next access.

use super::*;
use crate::relocation::MovesOf;

on_every_store!(
    a_move_failing_after_relay_ready_never_restores_the_source_and_the_actor_comes_back_new
);

/// Issue 37, contradiction 3: at `Captured` a request is held at the source; after `Prepared`
/// an ordinary Preserve changes the record, so the target's NewOwner (conditioned on the
/// Prepared record) conflicts after the relay-ready reply was accepted, and the record read
/// afterwards still names the source. The source does not serve the Actor again (before: it
/// reopened with its held work); the held request ends with one typed error; no node serves
/// the old incarnation, the record is gone, and the next GetOrCreate makes a new incarnation
/// under a higher ObjectGeneration, served by exactly one node.
async fn a_move_failing_after_relay_ready_never_restores_the_source_and_the_actor_comes_back_new(
    h: &Harness,
) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (caller, r) = m.counter_at_one("pr1").await;
    let (source, target) = m.owner_and_other(&r);
    let id = zlink_codec::ObjectId::new("pr1").expect("id");
    let key = (AuthorityKind::Actor, id.clone());
    let source_objects = Arc::clone(&source.actors().expect("manager").client.objects);
    let target_objects = Arc::clone(&target.actors().expect("manager").client.objects);
    let (tx, held) = tokio::sync::oneshot::channel();
    let tx = Arc::new(parking_lot::Mutex::new(Some(tx)));
    let hook: crate::relocation::StageHook = {
        let (caller, objects, key, id) = (
            caller.clone(),
            Arc::clone(&source_objects),
            key.clone(),
            id.clone(),
        );
        Arc::new(move |stage| {
            let (caller, objects, key, id, tx) = (
                caller.clone(),
                Arc::clone(&objects),
                key.clone(),
                id.clone(),
                Arc::clone(&tx),
            );
            Box::pin(async move {
                match stage {
                    RecordedStage::Captured => {
                        let Some(tx) = tx.lock().take() else { return };
                        tokio::spawn(async move {
                            let _ = tx.send(caller.request("pr1", &Incr).await);
                        });
                        wait_until("the source holds the request", || {
                            objects.relocations().held_len(&key) >= 1
                        })
                        .await;
                    }
                    RecordedStage::Prepared => {
                        let authority = objects.location.authority();
                        let AuthorityRead::Found { handle, .. } =
                            authority.read(ObjectKind::Actor, &id).await.expect("read")
                        else {
                            panic!("the record is missing");
                        };
                        let payload = handle.payload().to_vec();
                        let done = authority.preserve(&handle, payload).await;
                        assert!(matches!(done, Ok(zlink_location::Outcome::Applied(_))));
                    }
                    _ => {}
                }
            })
        })
    };
    source_objects.relocations().probe.on_stage(Some(hook));
    let err = relocate(source, &r)
        .await
        .expect_err("the owner change failed");
    source_objects.relocations().probe.on_stage(None);
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    // The held request ends once, with a typed error (it never ran: the old incarnation's
    // count stays unobserved).
    let ended = tokio::time::timeout(WAIT, held)
        .await
        .expect("the held request ends")
        .expect("answered once");
    let e = ended.expect_err("the source is not restored: the held request does not run");
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    // Neither node serves the old incarnation; its record is gone.
    assert!(!source_objects.is_live(&key), "the source is not restored");
    assert!(
        !target_objects.is_live(&key),
        "the target removed its object"
    );
    let client = source.actors().expect("manager").client;
    assert!(
        matches!(
            client.read(ObjectKind::Actor, &id).await.expect("read"),
            AuthorityRead::Missing { .. }
        ),
        "the abandoned incarnation's record is removed"
    );
    // The next access makes a new incarnation, served by one node.
    let again = caller
        .get_or_create("counter", "pr1")
        .await
        .expect("created");
    assert!(
        again.generation > r.generation,
        "a higher ObjectGeneration: {} after {}",
        again.generation,
        r.generation
    );
    assert_eq!(caller.request("pr1", &Incr).await.expect("served"), 1);
    let serving = [source_objects.is_live(&key), target_objects.is_live(&key)];
    assert_eq!(serving.iter().filter(|l| **l).count(), 1, "{serving:?}");
    m.shutdown().await;
}
