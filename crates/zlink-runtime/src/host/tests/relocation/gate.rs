//! The unit gate (spec 28 §5, §12 item 4), the chunk in-flight budgets (06 §3) and the
//! interruption summary (28 §5) of live moves.

use std::sync::atomic::AtomicBool;

use zlink_relocation::transfer::{
    ChunkLimit, MAX_ADAPTER_STATE_LEN, MIN_CHUNK_LIMIT, PayloadClaim, PayloadUnit,
};

use super::*;
use crate::objects::RelocationOptions;
use crate::relocation::MovesOf;
use crate::relocation::gate::{GateError, GateUsage, SourcePermits, UnitGate, encoded_len};

on_every_store!(
    at_the_outbound_cap_every_unit_moves_at_once,
    past_the_outbound_cap_a_further_unit_waits_until_one_ends,
    a_preserved_unit_needing_exactly_the_payload_cap_moves,
    a_preserved_unit_over_the_payload_cap_is_refused_before_capture_and_keeps_serving,
    past_the_inbound_cap_a_further_unit_waits_before_its_seal_until_one_ends,
    chunk_sends_respect_small_in_flight_budgets_and_the_move_completes,
    the_interruption_summary_counts_one_entry_per_completed_move,
    a_payload_within_the_budgets_is_acknowledged_by_the_prepare_without_a_ping,
);

pub(super) fn gate_with(options: RelocationOptions) -> UnitGate {
    UnitGate::new(&options).expect("valid options")
}

/// The up-front claim of a `PreserveStateWith` unit under the default chunk limit.
pub(super) fn preserve_claim() -> u64 {
    encoded_len(MAX_ADAPTER_STATE_LEN, ChunkLimit::default())
}

#[test]
fn a_unit_over_the_payload_cap_is_refused_and_one_at_the_cap_is_admitted() {
    let at = gate_with(RelocationOptions::default().max_payload_in_flight_bytes(1000));
    let held = at
        .try_source_now(PayloadClaim::exact(PayloadUnit::Single, 1000))
        .expect("fits")
        .expect("free");
    assert_eq!(held.memory(), 1000);
    drop(held);
    // Refused at its admission, before it secures a target or holds anything.
    let err = at
        .try_outbound_now(PayloadClaim::exact(PayloadUnit::Single, 1001))
        .expect_err("never fits");
    assert_eq!(
        err,
        GateError::TooLarge {
            need: 1001,
            cap: 1000
        }
    );
    assert_eq!(err.kind(), ErrorKind::CapacityExceeded);
    assert_eq!(at.usage(), GateUsage::default(), "nothing held");
    let target = at.try_inbound(1001).expect_err("never fits");
    assert!(matches!(target, GateError::TooLarge { .. }));
    assert_eq!(at.usage(), GateUsage::default(), "nothing held");
}

#[test]
fn the_default_cap_lets_three_preserved_units_capture_at_once_and_a_shrink_makes_room() {
    // 256 MiB holds four 64 MiB units only without their framing: three capture at once, the
    // fourth waits. The claim is reserved when the capture starts, shrinks after Capture and
    // never grows.
    let gate = gate_with(RelocationOptions::default());
    let claim = || gate.source_claim(1).expect("claim");
    assert_eq!(claim().bytes(), preserve_claim());
    let mut held: Vec<SourcePermits> = (0..3)
        .map(|_| gate.try_source_now(claim()).expect("fits").expect("free"))
        .collect();
    assert!(gate.try_source_now(claim()).expect("fits").is_none());
    assert_eq!(
        gate.usage().outbound,
        3,
        "the refused attempt holds nothing"
    );
    held[0].shrink_to(100);
    held[0].shrink_to(200);
    assert_eq!(held[0].memory(), 100, "never grows");
    let fourth = gate.try_source_now(claim()).expect("fits");
    assert!(fourth.is_some(), "the shrink made room");
}

#[test]
fn a_budget_below_one_chunk_sends_one_chunk_at_a_time() {
    let gate = gate_with(
        RelocationOptions::default()
            .in_flight_payload_budget(1)
            .node_in_flight_payload_budget(0),
    );
    let first = gate.try_chunk(7, 100).expect("alone").expect("applied");
    assert!(gate.try_chunk(7, 100).is_err(), "a second waits");
    assert!(
        gate.try_chunk(8, 100)
            .expect("another connection")
            .is_some(),
        "the budget is per connection"
    );
    drop(first);
    assert!(gate.try_chunk(7, 100).expect("alone again").is_some());
}

#[test]
fn budgets_of_zero_are_not_applied() {
    let gate = gate_with(
        RelocationOptions::default()
            .in_flight_payload_budget(0)
            .node_in_flight_payload_budget(0),
    );
    assert!(gate.try_chunk(1, u64::MAX / 2).expect("off").is_none());
}

#[tokio::test]
async fn a_waiting_unit_is_admitted_once_a_holder_ends() {
    let gate = gate_with(RelocationOptions::default().max_active_outbound(1));
    let claim = PayloadClaim::exact(PayloadUnit::Single, 1);
    let first = gate.admit_outbound(claim).await.expect("admitted");
    let g = gate.clone();
    let waiting = tokio::spawn(async move { g.admit_outbound(claim).await.map(|_| ()) });
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    assert!(!waiting.is_finished(), "the second unit waits");
    assert_eq!(gate.usage().outbound, 1);
    drop(first);
    waiting
        .await
        .expect("task")
        .expect("admitted after the release");
}

#[tokio::test]
async fn at_the_capture_cap_a_further_unit_waits_until_a_capture_ends() {
    let gate = gate_with(RelocationOptions::default().max_concurrent_captures(2));
    let claim = PayloadClaim::exact(PayloadUnit::Single, 1);
    let until = || tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut first = gate.admit_outbound(claim).await.expect("admitted");
    first.take_capture(until()).await.expect("captures");
    let mut second = gate.admit_outbound(claim).await.expect("admitted");
    second
        .take_capture(until())
        .await
        .expect("captures at the cap");
    let mut third = gate.admit_outbound(claim).await.expect("admitted");
    let waiting = tokio::spawn(async move { third.take_capture(until()).await.map(|_| third) });
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    assert!(!waiting.is_finished(), "the third unit waits");
    assert_eq!(
        (gate.usage().captures, gate.usage().memory),
        (2, 2),
        "it holds no memory while waiting"
    );
    first.end_capture();
    let third = waiting
        .await
        .expect("task")
        .expect("captures once a capture ended");
    assert_eq!(third.memory(), 1);
}

/// One step of the gate property test.
#[derive(Debug, Clone)]
enum Op {
    /// A source unit is admitted with a claim of this many bytes.
    Source(u64),
    /// The n-th held source unit's capture starts: its `Capture` permit and claim.
    Capture(usize),
    /// A target unit declares this many bytes.
    Target(u64),
    /// The n-th held source unit's capture ends.
    EndCapture(usize),
    /// The n-th held source unit shrinks to this many bytes.
    Shrink(usize, u64),
    /// The n-th held target unit's Restore ends.
    EndRestore(usize),
    /// The n-th held source (true) or target unit ends.
    End(bool, usize),
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        (0u64..1200).prop_map(Op::Source),
        (0usize..8).prop_map(Op::Capture),
        (0u64..1200).prop_map(Op::Target),
        (0usize..8).prop_map(Op::EndCapture),
        ((0usize..8), (0u64..1200)).prop_map(|(i, b)| Op::Shrink(i, b)),
        (0usize..8).prop_map(Op::EndRestore),
        (proptest::bool::ANY, 0usize..8).prop_map(|(s, i)| Op::End(s, i)),
    ]
}

/// A model of one held unit: its memory and whether its Capture/Restore permit is held.
struct Model<P> {
    permits: P,
    memory: u64,
    callback: bool,
    /// A source unit: its claim, and whether its capture started (claim and permit taken).
    claim: u64,
    started: bool,
}

proptest::proptest! {
    /// Whatever sequence of admissions, capture starts and releases runs, no cap is ever
    /// exceeded, a capture start takes its `Capture` permit and memory together or nothing, a
    /// target takes all its permits or none, and a refused attempt changes nothing.
    #[test]
    fn permits_are_taken_all_at_once_and_no_cap_is_ever_exceeded(
        caps in (1u32..4, 1u32..4, 1u32..4, 1u32..4),
        ops in proptest::collection::vec(op(), 1..60),
    ) {
        const MEMORY: u64 = 1000;
        let gate = gate_with(
            RelocationOptions::default()
                .max_active_outbound(caps.0)
                .max_active_inbound(caps.1)
                .max_concurrent_captures(caps.2)
                .max_concurrent_restores(caps.3)
                .max_payload_in_flight_bytes(MEMORY),
        );
        let mut sources: Vec<Model<SourcePermits>> = Vec::new();
        let mut targets = Vec::new();
        for op in ops {
            let before = gate.usage();
            match op {
                Op::Source(bytes) => {
                    match gate.try_outbound_now(PayloadClaim::exact(PayloadUnit::Single, bytes)) {
                        Ok(Some(permits)) => sources.push(Model {
                            permits,
                            memory: 0,
                            callback: false,
                            claim: bytes,
                            started: false,
                        }),
                        Ok(None) => proptest::prop_assert_eq!(gate.usage(), before),
                        Err(e) => {
                            proptest::prop_assert!(bytes > MEMORY, "{}", e);
                            proptest::prop_assert_eq!(gate.usage(), before);
                        }
                    }
                }
                Op::Capture(i) => {
                    if let Some(m) = sources.get_mut(i) {
                        let taken = m.permits.try_capture_now().expect("admitted claims fit");
                        if m.started {
                            proptest::prop_assert!(taken, "taken once, then kept");
                            proptest::prop_assert_eq!(gate.usage(), before);
                        } else if taken {
                            m.started = true;
                            m.callback = true;
                            m.memory = m.claim;
                        } else {
                            proptest::prop_assert_eq!(gate.usage(), before);
                        }
                    }
                }
                Op::Target(bytes) => match gate.try_inbound(bytes) {
                    Ok(permits) => targets.push(Model {
                        permits,
                        memory: bytes,
                        callback: true,
                        claim: bytes,
                        started: true,
                    }),
                    Err(_) => proptest::prop_assert_eq!(gate.usage(), before),
                },
                Op::EndCapture(i) => {
                    if let Some(m) = sources.get_mut(i) {
                        m.permits.end_capture();
                        m.callback = false;
                    }
                }
                Op::Shrink(i, bytes) => {
                    if let Some(m) = sources.get_mut(i) {
                        m.permits.shrink_to(bytes);
                        m.memory = m.memory.min(bytes);
                    }
                }
                Op::EndRestore(i) => {
                    if let Some(m) = targets.get_mut(i) {
                        m.permits.end_restore();
                        m.callback = false;
                        m.memory = 0;
                    }
                }
                Op::End(true, i) => {
                    if i < sources.len() {
                        sources.remove(i);
                    }
                }
                Op::End(false, i) => {
                    if i < targets.len() {
                        targets.remove(i);
                    }
                }
            }
            let now = gate.usage();
            let want = GateUsage {
                outbound: sources.len(),
                inbound: targets.len(),
                captures: sources.iter().filter(|m| m.callback).count(),
                restores: targets.iter().filter(|m| m.callback).count(),
                memory: sources.iter().map(|m| m.memory).sum::<u64>()
                    + targets.iter().map(|m| m.memory).sum::<u64>(),
            };
            proptest::prop_assert_eq!(now, want);
            proptest::prop_assert!(now.outbound <= caps.0 as usize);
            proptest::prop_assert!(now.inbound <= caps.1 as usize);
            proptest::prop_assert!(now.captures <= caps.2 as usize);
            proptest::prop_assert!(now.restores <= caps.3 as usize);
            proptest::prop_assert!(now.memory <= MEMORY);
        }
    }
}

/// Blocks the first move of `source` that records `stage`, after the record, until `release`
/// gets a permit; counts each move that reached `stage` in `entered`.
pub(super) fn block_first_at(
    source: &ZLinkHost,
    stage: RecordedStage,
) -> (Arc<AtomicUsize>, Arc<tokio::sync::Semaphore>) {
    let entered = Arc::new(AtomicUsize::new(0));
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let armed = Arc::new(AtomicBool::new(true));
    let (e, r) = (Arc::clone(&entered), Arc::clone(&release));
    let hook: crate::relocation::StageHook = Arc::new(move |s| {
        let (e, r, armed) = (Arc::clone(&e), Arc::clone(&r), Arc::clone(&armed));
        Box::pin(async move {
            if s != stage {
                return;
            }
            e.fetch_add(1, Ordering::SeqCst);
            if armed.swap(false, Ordering::SeqCst) {
                let _ = r.acquire().await.map(|p| p.forget());
            }
        })
    });
    let objects = &source.actors().expect("manager").client.objects;
    objects.relocations().probe.on_stage(Some(hook));
    (entered, release)
}

/// Two counters owned by the same server (created until two share one), each at 1.
pub(super) async fn two_on_one_server(m: &Mesh) -> (ActorRef, ActorRef) {
    let mut refs: Vec<ActorRef> = Vec::new();
    for i in 0..3 {
        let (_, r) = m.counter_at_one(&format!("g{i}")).await;
        if let Some(other) = refs.iter().find(|o| o.node == r.node) {
            return (other.clone(), r);
        }
        refs.push(r);
    }
    panic!("three counters on two servers: two share one");
}

pub(super) fn relocation_options(r: RelocationOptions) -> WithRelocation {
    WithRelocation(fast_options(), r)
}

/// Starts a move of `r` from `source` in a task of its own.
pub(super) fn spawn_move(
    source: &ZLinkHost,
    r: &ActorRef,
) -> tokio::task::JoinHandle<Result<ActorRef, crate::messaging::ZLinkError>> {
    let client = source.actors().expect("manager").client;
    let r = r.clone();
    tokio::spawn(async move { crate::relocation::relocate_actor(&client, &r, None).await })
}

/// Asserts `host`'s gate holds nothing any more.
pub(super) fn all_returned(host: &ZLinkHost) {
    assert_eq!(gate_of(host).usage(), GateUsage::default(), "all returned");
}

pub(super) fn gate_of(host: &ZLinkHost) -> UnitGate {
    let objects = &host.actors().expect("manager").client.objects;
    objects
        .relocations()
        .gate(&objects.relocation_options)
        .expect("gate")
        .clone()
}

async fn at_the_outbound_cap_every_unit_moves_at_once(h: &Harness) {
    let options = relocation_options(RelocationOptions::default().max_active_outbound(2));
    let m = mesh_with(h, Policy::Preserve, options).await;
    let (a, b) = two_on_one_server(&m).await;
    let (source, target) = m.owner_and_other(&a);
    let (entered, release) = block_first_at(source, RecordedStage::Preparing);
    let first = spawn_move(source, &a);
    wait_until("the first move is held", || {
        entered.load(Ordering::SeqCst) == 1
    })
    .await;
    // The second unit is admitted while the first holds its permits: both at the cap.
    let second = relocate(source, &b).await.expect("moved at the cap");
    assert_eq!(second.node, rid_of(target));
    assert_eq!(gate_of(source).usage().outbound, 1, "the first still holds");
    release.add_permits(1);
    let first = first.await.expect("task").expect("moved");
    assert_eq!(first.node, rid_of(target));
    all_returned(source);
    m.shutdown().await;
}

async fn past_the_outbound_cap_a_further_unit_waits_until_one_ends(h: &Harness) {
    let options = relocation_options(RelocationOptions::default().max_active_outbound(1));
    let m = mesh_with(h, Policy::Preserve, options).await;
    let (a, b) = two_on_one_server(&m).await;
    let (source, target) = m.owner_and_other(&a);
    let (entered, release) = block_first_at(source, RecordedStage::Preparing);
    let first = spawn_move(source, &a);
    wait_until("the first move is held", || {
        entered.load(Ordering::SeqCst) == 1
    })
    .await;
    let second = spawn_move(source, &b);
    // The second waits at the gate: it records nothing and seals nothing.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(entered.load(Ordering::SeqCst), 1, "the second unit waits");
    assert!(!second.is_finished());
    assert_eq!(gate_of(source).usage().outbound, 1);
    let caller = m.client.0.actors().expect("manager");
    assert_eq!(
        caller.request(b.id.as_str(), &Incr).await.expect("served"),
        2,
        "the waiting unit keeps serving"
    );
    release.add_permits(1);
    let first = first.await.expect("task").expect("moved");
    let second = second.await.expect("task").expect("moved after the first");
    assert_eq!(
        (first.node, second.node.clone()),
        (rid_of(target), rid_of(target))
    );
    assert_eq!(entered.load(Ordering::SeqCst), 2);
    assert_eq!(
        caller.request(b.id.as_str(), &Incr).await.expect("incr"),
        3,
        "its state moved"
    );
    m.shutdown().await;
}

async fn a_preserved_unit_needing_exactly_the_payload_cap_moves(h: &Harness) {
    let cap = RelocationOptions::default().max_payload_in_flight_bytes(preserve_claim());
    let m = mesh_with(h, Policy::Preserve, relocation_options(cap)).await;
    let (caller, r) = m.counter_at_one("m1").await;
    let (source, target) = m.owner_and_other(&r);
    let moved = relocate(source, &r).await.expect("moved at the cap");
    assert_eq!(moved.node, rid_of(target));
    assert_eq!(caller.request("m1", &Incr).await.expect("incr"), 2);
    all_returned(source);
    all_returned(target);
    m.shutdown().await;
}

async fn a_preserved_unit_over_the_payload_cap_is_refused_before_capture_and_keeps_serving(
    h: &Harness,
) {
    let cap = RelocationOptions::default().max_payload_in_flight_bytes(preserve_claim() - 1);
    let m = mesh_with(h, Policy::Preserve, relocation_options(cap)).await;
    let (caller, r) = m.counter_at_one("m2").await;
    let (source, _) = m.owner_and_other(&r);
    let before = record(source, "m2").await;
    let err = relocate(source, &r).await.expect_err("never fits");
    assert_eq!(err.kind(), ErrorKind::CapacityExceeded, "{err}");
    assert_eq!(
        m.seen.captures.load(Ordering::SeqCst),
        0,
        "nothing captured"
    );
    assert_eq!(
        record(source, "m2").await,
        before,
        "the record is untouched"
    );
    assert_eq!(gate_of(source).usage(), GateUsage::default());
    assert_eq!(caller.request("m2", &Incr).await.expect("served"), 2);
    m.shutdown().await;
}

async fn past_the_inbound_cap_a_further_unit_waits_before_its_seal_until_one_ends(h: &Harness) {
    let options = relocation_options(RelocationOptions::default().max_active_inbound(1));
    let m = mesh_with(h, Policy::Preserve, options).await;
    let (a, b) = two_on_one_server(&m).await;
    let (source, target) = m.owner_and_other(&a);
    // The first move holds the target's inbound permit from its admission until NewOwner.
    let (entered, release) = block_first_at(source, RecordedStage::Prepared);
    let first = spawn_move(source, &a);
    wait_until("the first move is prepared", || {
        entered.load(Ordering::SeqCst) == 1
    })
    .await;
    assert_eq!(gate_of(target).usage().inbound, 1, "at the cap");
    let second = spawn_move(source, &b);
    // The second waits for the target's admission, before its seal: it keeps serving here.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(!second.is_finished(), "the second unit waits");
    let caller = m.client.0.actors().expect("manager");
    assert_eq!(
        caller.request(b.id.as_str(), &Incr).await.expect("served"),
        2,
        "not sealed while it waits"
    );
    assert_eq!(gate_of(target).usage().inbound, 1, "never past the cap");
    // The first holds its small encoded payload; the waiting one no claim of its own.
    let at_source = gate_of(source).usage();
    assert_eq!(
        at_source.captures, 0,
        "no Capture permit across the admission"
    );
    assert!(
        at_source.memory < preserve_claim(),
        "no payload memory claim across the admission: {}",
        at_source.memory
    );
    release.add_permits(1);
    let first = first.await.expect("task").expect("moved");
    let second = second.await.expect("task").expect("moved after the first");
    assert_eq!((first.node, second.node), (rid_of(target), rid_of(target)));
    assert_eq!(
        caller.request(b.id.as_str(), &Incr).await.expect("incr"),
        3,
        "its state moved"
    );
    all_returned(target);
    m.shutdown().await;
}

async fn chunk_sends_respect_small_in_flight_budgets_and_the_move_completes(h: &Harness) {
    // Chunks of 18 data bytes; a peer budget of two chunk frames and a node budget of three,
    // both far below the payload.
    let chunk = MIN_CHUNK_LIMIT + 17;
    let options = relocation_options(
        RelocationOptions::default()
            .payload_chunk_limit(chunk)
            .in_flight_payload_budget(300)
            .node_in_flight_payload_budget(450),
    );
    let m = mesh_with(h, Policy::Preserve, options).await;
    let (caller, r) = m.counter_at_one("b1").await;
    for stream in 0..40 {
        let seq = caller
            .request("b1", &Step { stream, seq: 1 })
            .await
            .expect("step");
        assert_eq!(seq, 1);
    }
    let (source, target) = m.owner_and_other(&r);
    let moved = relocate(source, &r).await.expect("moved");
    assert_eq!(moved.node, rid_of(target));
    let totals = caller.request("b1", &Totals).await.expect("totals");
    assert_eq!(totals, (41, 40, 0), "the state moved whole");
    let (peer, node) = gate_of(source).peak();
    assert!(peer > 0 && peer <= 300, "peer peak {peer}");
    assert!(node >= peer && node <= 450, "node peak {node}");
    assert!(
        gate_of(source).acknowledgements() > 0,
        "short of budget the sender asked for acknowledgements"
    );
    m.shutdown().await;
}

async fn the_interruption_summary_counts_one_entry_per_completed_move(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (a, b) = two_on_one_server(&m).await;
    let (source, target) = m.owner_and_other(&a);
    let summary = |host: &ZLinkHost| {
        host.actors()
            .expect("manager")
            .client
            .objects
            .relocations()
            .interruptions()
    };
    assert_eq!(summary(source).count, 0);
    relocate(source, &a).await.expect("moved");
    let s = summary(source);
    assert_eq!(s.count, 1);
    assert!(s.max > std::time::Duration::ZERO && s.p50 <= s.max && s.p99 <= s.max);
    // A move that fails records nothing; the next completed one counts once more.
    m.seen.fail_restore.store(true, Ordering::SeqCst);
    relocate(source, &b).await.expect_err("cancelled");
    assert_eq!(summary(source).count, 1, "a failed move is not counted");
    m.seen.fail_restore.store(false, Ordering::SeqCst);
    relocate(source, &b).await.expect("moved");
    assert_eq!(summary(source).count, 2, "one entry per completed move");
    assert_eq!(summary(target).count, 0, "counted on the source only");
    m.shutdown().await;
}

/// A payload within the in-flight budgets is sent without an acknowledgement request of its
/// own: the prepare that follows on the connection acknowledges its chunks, and their charges
/// are back once the move completed.
async fn a_payload_within_the_budgets_is_acknowledged_by_the_prepare_without_a_ping(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (caller, r) = m.counter_at_one("p1").await;
    let (source, target) = m.owner_and_other(&r);
    let moved = relocate(source, &r).await.expect("moved");
    assert_eq!(moved.node, rid_of(target));
    let gate = gate_of(source);
    assert_eq!(gate.acknowledgements(), 0, "no ping of its own");
    let (peer, _) = gate.peak();
    assert!(peer > 0, "its chunks were charged");
    assert_eq!(gate.usage(), GateUsage::default(), "all returned");
    assert_eq!(
        caller.request("p1", &Incr).await.expect("incr"),
        2,
        "its state moved"
    );
    m.shutdown().await;
}
