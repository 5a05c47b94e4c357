//! A cold Instance Spot's first message is an application job like any other (spec 06 §3): the
//! activation takes its Application Job Queue permit before anything is created, waiting
//! within the call's deadline while every permit is in use, and returns it just before the
//! first handler starts.

use super::*;

on_every_store!(a_cold_instance_spots_first_message_waits_for_an_application_job_queue_permit);

async fn a_cold_instance_spots_first_message_waits_for_an_application_job_queue_permit(
    h: &Harness,
) {
    let relocation = relocation_store(h).await;
    let factories = Arc::new(AtomicUsize::new(0));
    let log: Log = Arc::default();
    let [(host, _node)] = rooms::<1>(h, &relocation, &factories, &log).await;
    let spots = host.spots().expect("manager");
    let rt = location_runtime(h).await;

    // Every free permit taken: the host's queue is at its cap.
    let queue = host.job_queue();
    let mut held = Vec::new();
    while let Some(p) = queue.try_acquire() {
        held.push(p);
    }
    let first = tokio::spawn({
        let spots = spots.clone();
        async move {
            spots
                .instance("room-q")
                .stable_type("room")
                .request(&Say("first".into()))
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!first.is_finished(), "the first message waits for a permit");
    assert_eq!(factories.load(Ordering::SeqCst), 0, "no factory ran");
    assert!(log.lock().is_empty(), "no handler ran");
    assert!(
        record(&rt, "room-q").await.is_none(),
        "nothing was reserved while the queue was full"
    );
    assert!(relocation.puts().is_empty(), "no envelope was stored");

    // A permit returns: the Spot is created and its first message answered, once.
    drop(held);
    let said = tokio::time::timeout(Duration::from_secs(10), first)
        .await
        .expect("answered once a permit is free")
        .expect("task")
        .expect("created and answered");
    assert_eq!((said.count, said.node.as_str()), (1, "n0"));
    assert_eq!(factories.load(Ordering::SeqCst), 1);
    // The permit went back when the handler started.
    wait_until("the permit is returned", || queue.in_use() == 0).await;

    host.shutdown().await;
    relocation.purge().await;
}
