//! The restart rows of spec 21 §7.1: what happens to a cold activation whose process stops
//! after the envelope is stored (row 1), after `Creating` (row 2), or after `Ready` with the
//! first message unfinished (row 3). Helpers come from the parent module.

use super::*;

on_every_store!(
    envelope_no_record_points_to_is_gone_after_its_retention,
    creation_whose_owner_died_before_ready_is_cancelled,
    ready_spot_of_a_dead_owner_is_restored_from_its_stored_first_message,
    a_first_message_running_past_the_envelope_retention_keeps_its_envelope,
);

/// Spec 21 §7.1, row 1: the envelope stored and verified, and the process stopped before a
/// Creating record pointed at it (here: the call stops for good right after the read-back and
/// is dropped) — no record exists, and the envelope is gone once its retention ends.
async fn envelope_no_record_points_to_is_gone_after_its_retention(h: &Harness) {
    let relocation = relocation_store(h).await;
    let factories = Arc::new(AtomicUsize::new(0));
    let log: Log = Arc::default();
    let kit = RoomKit::new("d", &factories, &log);
    let retention = Duration::from_secs(1);
    let (hd, _d) = server(
        Arc::clone(&h.store),
        &relocation,
        fast_options().cold_activation_retention(retention),
        |n| n.instance_spot_type::<Room>("room", kit.room()),
    )
    .await;
    wait_discovered(&[&hd]).await;
    let spots = hd.spots().expect("m");
    *relocation.freeze.lock() = Some(Gate::new());
    let stopped = {
        let spots = spots.clone();
        tokio::spawn(async move {
            spots
                .instance("r")
                .stable_type("room")
                .request(&Say("lost".into()))
                .await
        })
    };
    let recorded = &relocation;
    eventually(h, "the envelope is read back", move || async move {
        (!recorded.reads.lock().is_empty()).then_some(())
    })
    .await;
    stopped.abort();
    assert!(stopped.await.is_err(), "the call stopped for good");
    *relocation.freeze.lock() = None;
    let puts = relocation.puts();
    assert_eq!(puts.len(), 1);
    assert!(relocation.all_stored_and_read_back(), "stored and verified");
    let rt = location_runtime(h).await;
    assert!(record(&rt, "r").await.is_none(), "no record points at it");
    assert_eq!(factories.load(Ordering::SeqCst), 0);
    h.advance_store_time(retention + Duration::from_millis(500))
        .await;
    assert!(
        !relocation.is_stored(&puts[0]).await,
        "gone after its retention"
    );
    assert!(relocation.deletes().is_empty(), "nobody deleted it");
    // A later first message creates the Spot.
    let said = spots
        .instance("r")
        .stable_type("room")
        .request(&Say("later".into()))
        .await
        .expect("created");
    assert_eq!(said.count, 1);
    relocation.purge().await;
    let _ = rt.shutdown().await;
    stop_all(&[&hd]).await;
}

/// Spec 21 §7.1, row 2: Creating recorded, the owner's process gone before Ready — the
/// survivors' recovery cancels the record (capacity returned); a later first message creates
/// a new incarnation; the dead owner's belated factory result changes nothing.
async fn creation_whose_owner_died_before_ready_is_cancelled(h: &Harness) {
    let relocation = relocation_store(h).await;
    let factories = Arc::new(AtomicUsize::new(0));
    let log: Log = Arc::default();
    let faulty = Arc::new(FaultyLocationStore::new(Arc::clone(&h.store)));
    let gate = Gate::new();
    let mut kit = RoomKit::new("d", &factories, &log);
    kit.factory_gate = Some(gate.clone());
    let (hd, d) = server(faulty.clone(), &relocation, dying_options(), |n| {
        n.instance_spot_type::<Room>("room", kit.room())
    })
    .await;
    wait_discovered(&[&hd]).await;
    let on_d = hd.spots().expect("m");
    let original = tokio::spawn(async move {
        on_d.instance("r")
            .stable_type("room")
            .request(&Say("first".into()))
            .await
    });
    let rt = location_runtime(h).await;
    let reader = &rt;
    let creating = eventually(h, "the record is Creating", move || async move {
        record(reader, "r")
            .await
            .filter(|r| r.state() == AllocationState::Reserved)
    })
    .await;
    assert_eq!(&creating.node().routing_id, d.routing_id());

    let kit = RoomKit::new("a", &factories, &log);
    let (ha, a) = server(Arc::clone(&h.store), &relocation, dying_options(), |n| {
        n.instance_spot_type::<Room>("room", kit.room())
    })
    .await;
    wait_peers(&a, 1).await;
    // D stops writing (its lease runs out): A's recovery reclaims the Creating record.
    faulty.set_fault([LocationOp::Write], Fault::UNAVAILABLE);
    eventually(h, "the Creating record is cancelled", move || async move {
        record(reader, "r").await.is_none().then_some(())
    })
    .await;
    let spots = ha.spots().expect("m");
    let on_a = &spots;
    let again = eventually(h, "A creates the Spot anew", move || async move {
        on_a.instance("r")
            .stable_type("room")
            .request(&Say("again".into()))
            .await
            .ok()
    })
    .await;
    assert_eq!((again.node.as_str(), again.count), ("a", 1));
    assert!(again.generation > creating.object_generation().get());
    // D's factory finishes late: its commit changes nothing, its caller gets an error.
    gate.open();
    let late = tokio::time::timeout(WAIT, original)
        .await
        .expect("the original call ends")
        .expect("task");
    assert!(late.is_err(), "{late:?}");
    let now = record(&rt, "r").await.expect("A's record");
    assert_eq!(&now.node().routing_id, a.routing_id());
    assert_eq!(now.object_generation().get(), again.generation);
    faulty.heal();
    relocation.purge().await;
    let _ = rt.shutdown().await;
    stop_all(&[&ha, &hd]).await;
}

/// Spec 21 §7.1, row 3: Ready, the first message not completed when the owner's process went
/// away — a survivor serving the type takes the record over (conditioned on the dead run's
/// lease), restores the Spot from the stored first message, runs it first, then removes the
/// root and deletes the envelope.
async fn ready_spot_of_a_dead_owner_is_restored_from_its_stored_first_message(h: &Harness) {
    let relocation = relocation_store(h).await;
    let factories = Arc::new(AtomicUsize::new(0));
    let log: Log = Arc::default();
    let faulty = Arc::new(FaultyLocationStore::new(Arc::clone(&h.store)));
    let held = first_message_held(
        h,
        faulty.clone(),
        &relocation,
        dying_options(),
        ("first", &factories, &log),
    )
    .await;
    let FirstMessageHeld {
        host: hd,
        call: original,
        gate,
        rt,
        ready,
    } = held;
    let reader = &rt;
    let puts = relocation.puts();
    assert_eq!(puts.len(), 1);

    let kit = RoomKit::new("a", &factories, &log);
    let (ha, a) = server(Arc::clone(&h.store), &relocation, dying_options(), |n| {
        n.instance_spot_type::<Room>("room", kit.room())
    })
    .await;
    wait_peers(&a, 1).await;
    wait_discovered(&[&ha]).await;
    faulty.set_fault([LocationOp::Write], Fault::UNAVAILABLE);
    let on_a = a.routing_id();
    let restored = eventually(
        h,
        "A restored the Spot and released its recovery root",
        move || async move {
            record(reader, "r")
                .await
                .filter(|r| &r.node().routing_id == on_a && r.payload().is_empty())
        },
    )
    .await;
    assert_eq!(
        restored.object_generation(),
        ready.object_generation(),
        "the same incarnation"
    );
    assert!(restored.authority_owner_generation() > ready.authority_owner_generation());
    assert_eq!(
        log.lock()
            .iter()
            .filter(|(n, _)| n == "a")
            .cloned()
            .collect::<Vec<_>>(),
        vec![("a".to_owned(), "first".to_owned())],
        "the stored first message ran once, first, on A"
    );
    // The envelope is deleted once the record no longer points at it (after the write the
    // test just observed).
    let deadline = tokio::time::Instant::now() + WAIT;
    while relocation.is_stored(&puts[0]).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the envelope is deleted"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(relocation.deleted_while_pointed.load(Ordering::SeqCst), 0);
    let next = ha
        .spots()
        .expect("m")
        .request("r", &Say("second".into()))
        .await
        .expect("the restored Spot");
    assert_eq!(
        next,
        Said {
            node: "a".into(),
            count: 2,
            generation: ready.object_generation().get()
        }
    );
    gate.open();
    let _ = tokio::time::timeout(WAIT, original).await;
    faulty.heal();
    relocation.purge().await;
    let _ = rt.shutdown().await;
    stop_all(&[&ha, &hd]).await;
}

/// Spec 23 (renew when 12 h of the retention remain; here half of a 1 s retention): a first
/// message that runs for several retentions keeps its stored envelope — the owner renews it
/// while it is in use — and the envelope is deleted at the end of use as usual.
async fn a_first_message_running_past_the_envelope_retention_keeps_its_envelope(h: &Harness) {
    let relocation = relocation_store(h).await;
    let factories = Arc::new(AtomicUsize::new(0));
    let log: Log = Arc::default();
    let retention = Duration::from_secs(1);
    let FirstMessageHeld {
        host: hd,
        call: first,
        gate,
        rt,
        ..
    } = first_message_held(
        h,
        Arc::clone(&h.store),
        &relocation,
        fast_options().cold_activation_retention(retention),
        ("slow", &factories, &log),
    )
    .await;
    let puts = relocation.puts();
    assert_eq!(puts.len(), 1);
    // Four rounds of 300 ms of Store time plus the wait for the next renewal (over two
    // retentions in all): the envelope never expires under its running first message.
    for round in 1..=4 {
        h.advance_store_time(Duration::from_millis(300)).await;
        let recorded = &relocation;
        eventually(h, "the envelope is renewed", move || async move {
            (recorded.renewed.load(Ordering::SeqCst) >= round).then_some(())
        })
        .await;
        assert!(
            relocation.is_stored(&puts[0]).await,
            "kept in round {round}"
        );
    }
    gate.open();
    let said = first
        .await
        .expect("joined")
        .expect("the first message is answered");
    assert_eq!(said.count, 1);
    let deadline = tokio::time::Instant::now() + WAIT;
    while relocation.is_stored(&puts[0]).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the envelope is deleted at its end of use"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    relocation.purge().await;
    let _ = rt.shutdown().await;
    stop_all(&[&hd]).await;
}

/// A Room server labelled `d` whose handlers wait at a gate, with a first message to Spot `r`
/// in flight on it, once its record is Ready with its recovery root.
struct FirstMessageHeld {
    host: ZLinkHost,
    call: tokio::task::JoinHandle<Result<Said, ZLinkError>>,
    gate: Gate,
    rt: LocationRuntime,
    ready: AuthorityHandle,
}

/// Starts the server of [`FirstMessageHeld`] over `store` with `options` and sends the first
/// message `text` (60 s deadline); the factories and handlers count into `factories` and `log`.
async fn first_message_held(
    h: &Harness,
    store: Arc<dyn DynLocationStore>,
    relocation: &Arc<Recorded>,
    options: LocationOptions,
    (text, factories, log): (&str, &Arc<AtomicUsize>, &Log),
) -> FirstMessageHeld {
    let gate = Gate::new();
    let mut kit = RoomKit::new("d", factories, log);
    kit.handler_gate = Some(gate.clone());
    let (host, _d) = server(store, relocation, options, |n| {
        n.instance_spot_type::<Room>("room", kit.room())
    })
    .await;
    wait_discovered(&[&host]).await;
    let spots = host.spots().expect("m");
    let text = text.to_owned();
    let call = tokio::spawn(async move {
        spots
            .instance("r")
            .stable_type("room")
            .deadline(Duration::from_secs(60))
            .request(&Say(text))
            .await
    });
    let rt = location_runtime(h).await;
    let reader = &rt;
    let ready = eventually(
        h,
        "the record is Ready with its recovery root",
        move || async move {
            record(reader, "r")
                .await
                .filter(|r| r.state() == AllocationState::Active && !r.payload().is_empty())
        },
    )
    .await;
    FirstMessageHeld {
        host,
        call,
        gate,
        rt,
        ready,
    }
}
