//! A timer tick is an application job (06 §3): it takes a permit of the host-wide Application
//! Job Queue until it starts, so while every permit is in use no tick is queued (each due tick
//! is skipped, like one that finds the mailbox full), and ticks resume once permits return.

use super::*;

on_every_store!(no_tick_is_queued_while_every_application_job_queue_permit_is_in_use);

async fn no_tick_is_queued_while_every_application_job_queue_permit_is_in_use(h: &Harness) {
    let log = Log::default();
    let host = one_server(h, &log, TimerLimits::default(), None).await;
    let actors = host.actors().expect("manager");
    actors.get_or_create("ticker", "q1").await.expect("created");
    actors
        .request("q1", &start_every("beat", Duration::from_millis(20)))
        .await
        .expect("started");
    wait_until("it ticks", || ticks(&log, "q1", "beat").len() >= 3).await;

    let queue = host.job_queue();
    let mut held = Vec::new();
    let skipped = |h: &ZLinkHost| {
        h.object_host(0)
            .timer_counters()
            .skipped
            .load(std::sync::atomic::Ordering::SeqCst)
    };
    // Take every free permit; a tick queued before then starts (returning its permit), so
    // take that one too.
    for _ in 0..3 {
        while let Some(p) = queue.try_acquire() {
            held.push(p);
        }
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    while let Some(p) = queue.try_acquire() {
        held.push(p);
    }
    let (before, skipped_before) = (ticks(&log, "q1", "beat").len(), skipped(&host));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        ticks(&log, "q1", "beat").len(),
        before,
        "no tick started while every permit was in use"
    );
    assert!(
        skipped(&host) >= skipped_before + 5,
        "the due ticks were skipped: {} -> {}",
        skipped_before,
        skipped(&host)
    );

    drop(held);
    wait_until("ticks resume", || {
        ticks(&log, "q1", "beat").len() >= before + 3
    })
    .await;
    host.shutdown().await;
}
