//! The unit gate applied to `SpotWide` aggregates (spec 28 §5, §12 item 4): one outbound
//! permit, one `Capture` permit and the aggregate claim (64 MiB per preserved participant
//! plus framing) taken at once; an aggregate whose claim is over the payload memory cap runs
//! alone. The claims are accounting: nothing here allocates them.

use std::future::Future;
use std::pin::Pin;

use zlink_relocation::transfer::{PayloadClaim, PayloadUnit};

use super::spot_wide::{relocate, roots, spot_record};
use crate::host::ZLinkHost;
use crate::host::tests::support::*;
use crate::objects::RelocationOptions;
use crate::relocation::MovesOf;
use crate::relocation::gate::{GateUsage, SourcePermits, UnitGate};
use zlink_testkit::Harness;

const MIB: u64 = 1024 * 1024;

fn gate_with(options: RelocationOptions) -> UnitGate {
    UnitGate::new(&options).expect("valid options")
}

fn gate_of(host: &ZLinkHost) -> UnitGate {
    let objects = host.object_host(0);
    objects
        .relocations()
        .gate(&objects.relocation_options)
        .expect("gate")
        .clone()
}

#[test]
fn an_aggregate_claim_counts_64_mib_per_preserved_participant_plus_its_framing() {
    let gate = gate_with(RelocationOptions::default());
    let six = gate.aggregate_claim(6, 100).expect("claim");
    assert_eq!(six.unit(), PayloadUnit::SpotWideAggregate);
    assert!(
        six.bytes() > 384 * MIB,
        "state plus the listed bytes plus framing"
    );
    assert!(six.bytes() < 385 * MIB);
    let none = gate.aggregate_claim(0, 100).expect("claim");
    assert!(
        none.bytes() >= 100 && none.bytes() < MIB,
        "only the listed bytes and framing"
    );
}

#[test]
fn an_aggregate_over_the_cap_runs_alone_and_blocks_single_units_even_after_it_shrank() {
    let gate = gate_with(RelocationOptions::default());
    let single = gate.source_claim(1).expect("claim");
    let held = gate.try_source_now(single).expect("fits").expect("free");
    let six = gate.aggregate_claim(6, 100).expect("claim");
    assert!(
        gate.try_source_now(six).expect("may run alone").is_none(),
        "an oversized aggregate waits while other payload memory is held"
    );
    assert_eq!(
        gate.usage().memory,
        single.bytes(),
        "nothing more was taken"
    );
    drop(held);
    let mut alone = gate
        .try_source_now(six)
        .expect("may run alone")
        .expect("nothing else holds memory");
    assert!(gate.held_alone());
    assert_eq!(gate.usage().memory, six.bytes());
    assert!(gate.try_source_now(single).expect("fits").is_none());
    alone.end_capture();
    alone.shrink_to(1000);
    assert_eq!(gate.usage().memory, 1000);
    assert!(
        gate.try_source_now(single).expect("fits").is_none(),
        "a shrunk alone run still blocks every other payload move"
    );
    assert!(gate.try_inbound(10).is_err(), "the target side too");
    drop(alone);
    assert!(!gate.held_alone());
    assert_eq!(gate.usage(), GateUsage::default());
    let after = gate.try_source_now(single).expect("fits").expect("free");
    assert_eq!(after.memory(), single.bytes());
}

#[test]
fn an_aggregate_at_the_cap_shares_the_memory_and_one_byte_over_runs_alone() {
    let gate = gate_with(RelocationOptions::default().max_payload_in_flight_bytes(1000));
    let at = PayloadClaim::exact(PayloadUnit::SpotWideAggregate, 1000);
    let held = gate.try_source_now(at).expect("fits").expect("free");
    assert!(
        !gate.held_alone(),
        "a claim at the cap is an ordinary claim"
    );
    drop(held);
    let over = PayloadClaim::exact(PayloadUnit::SpotWideAggregate, 1001);
    let small = gate
        .try_source_now(PayloadClaim::exact(PayloadUnit::Single, 1))
        .expect("fits")
        .expect("free");
    assert!(
        gate.try_source_now(over).expect("may run alone").is_none(),
        "one byte over waits while anything is held"
    );
    assert_eq!(gate.usage().memory, 1, "and takes nothing");
    drop(small);
    let alone = gate
        .try_source_now(over)
        .expect("may run alone")
        .expect("free");
    assert!(gate.held_alone());
    assert_eq!(alone.memory(), 1001);
}

#[test]
fn a_small_aggregate_and_single_units_hold_memory_together_within_the_cap() {
    let gate = gate_with(RelocationOptions::default());
    let two = gate.aggregate_claim(2, 100).expect("claim");
    let single = gate.source_claim(1).expect("claim");
    let aggregate = gate.try_source_now(two).expect("fits").expect("free");
    let a = gate.try_source_now(single).expect("fits").expect("free");
    assert!(!gate.held_alone());
    assert_eq!(gate.usage().outbound, 2);
    assert_eq!(gate.usage().memory, two.bytes() + single.bytes());
    assert!(
        gate.try_source_now(single).expect("fits").is_none(),
        "a third 64 MiB claim would pass 256 MiB"
    );
    drop((aggregate, a));
    assert_eq!(gate.usage(), GateUsage::default());
}

#[tokio::test]
async fn a_single_unit_waiting_behind_an_alone_aggregate_is_admitted_once_it_ends() {
    let gate = gate_with(RelocationOptions::default());
    let alone = gate
        .try_source_now(gate.aggregate_claim(6, 0).expect("claim"))
        .expect("may run alone")
        .expect("free");
    let single = gate.source_claim(1).expect("claim");
    let mut admitted = gate.admit_outbound(single).await.expect("admitted");
    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    {
        let waiter = admitted.take_capture(until);
        tokio::pin!(waiter);
        while gate.waiting() == 0 {
            tokio::select! {
                biased;
                _ = &mut waiter => panic!("captured beside an alone aggregate"),
                () = tokio::task::yield_now() => {}
            }
        }
        drop(alone);
        waiter.await.expect("captures once the aggregate ended");
    }
    assert_eq!(admitted.memory(), single.bytes());
}

#[derive(Debug, Clone)]
enum Op {
    Single(u64),
    Aggregate(u64),
    Shrink(usize, u64),
    Drop(usize),
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        (1u64..1200).prop_map(Op::Single),
        (1u64..2500).prop_map(Op::Aggregate),
        (0usize..8, 0u64..1200).prop_map(|(i, b)| Op::Shrink(i, b)),
        (0usize..8).prop_map(Op::Drop),
    ]
}

proptest::proptest! {
    /// Whatever single units and aggregates try, shrink and end, the memory held never
    /// passes the cap, except by one oversized aggregate holding it alone.
    #[test]
    fn payload_claims_never_exceed_the_cap_except_one_aggregate_alone(
        ops in proptest::collection::vec(op(), 1..60),
    ) {
        const MEMORY: u64 = 1000;
        let gate = gate_with(
            RelocationOptions::default()
                .max_active_outbound(64)
                .max_concurrent_captures(64)
                .max_payload_in_flight_bytes(MEMORY),
        );
        let mut held: Vec<SourcePermits> = Vec::new();
        for op in ops {
            match op {
                Op::Single(b) => {
                    if let Ok(Some(p)) = gate.try_source_now(PayloadClaim::exact(PayloadUnit::Single, b)) {
                        held.push(p);
                    }
                }
                Op::Aggregate(b) => {
                    if let Ok(Some(p)) = gate.try_source_now(PayloadClaim::exact(PayloadUnit::SpotWideAggregate, b)) {
                        held.push(p);
                    }
                }
                Op::Shrink(i, b) => {
                    if let Some(p) = held.get_mut(i) {
                        p.shrink_to(b);
                    }
                }
                Op::Drop(i) => {
                    if i < held.len() {
                        held.remove(i);
                    }
                }
            }
            let usage = gate.usage();
            let sum: u64 = held.iter().map(SourcePermits::memory).sum();
            proptest::prop_assert_eq!(usage.memory, sum);
            if gate.held_alone() {
                proptest::prop_assert_eq!(held.len(), 1, "an alone aggregate holds the memory by itself");
            } else {
                proptest::prop_assert!(usage.memory <= MEMORY);
            }
        }
    }
}

on_every_store!(
    a_spot_wide_aggregate_over_the_payload_cap_waits_for_held_memory_then_moves_alone,
    a_small_spot_wide_aggregate_moves_while_a_single_unit_holds_memory,
);

/// Polls `fut` until `done` holds (checked between polls); panics if `fut` ends first.
async fn drive_until<T>(
    fut: &mut Pin<&mut (impl Future<Output = T> + ?Sized)>,
    done: impl Fn() -> bool,
) {
    while !done() {
        tokio::select! {
            biased;
            _ = fut.as_mut() => panic!("the move ended before the expected point"),
            () = tokio::time::sleep(std::time::Duration::from_millis(5)) => {}
        }
    }
}

async fn a_spot_wide_aggregate_over_the_payload_cap_waits_for_held_memory_then_moves_alone(
    h: &Harness,
) {
    // The hall and 5 members all PreserveStateWith: 6 × 64 MiB > the default 256 MiB cap.
    let (r, hall, _ids) = roots(h, 5, &[], (None, false)).await;
    let (source, target) = (&r[0].0, &r[1].0);
    let gate = gate_of(source);
    let held = gate
        .try_source_now(gate.source_claim(1).expect("claim"))
        .expect("fits")
        .expect("free");
    let mv = relocate(source, &hall);
    tokio::pin!(mv);
    drive_until(&mut mv, || gate.waiting() == 1).await;
    assert_eq!(
        gate.usage().memory,
        held.memory(),
        "the aggregate took nothing"
    );
    assert_eq!(
        gate.usage().outbound,
        2,
        "only its outbound permit: it waits at its capture start"
    );
    assert_eq!(&spot_record(source, &hall).await.0, r[0].1.routing_id());
    drop(held);
    mv.await
        .expect("the aggregate moves once the memory is free");
    assert_eq!(&spot_record(source, &hall).await.0, r[1].1.routing_id());
    assert_eq!(
        gate.usage(),
        GateUsage::default(),
        "the source returned all"
    );
    assert!(!gate.held_alone());
    let at_target = gate_of(target);
    assert_eq!(
        at_target.usage().memory,
        0,
        "the target returned its memory"
    );
    assert_eq!(at_target.usage().restores, 0);
}

async fn a_small_spot_wide_aggregate_moves_while_a_single_unit_holds_memory(h: &Harness) {
    // The hall and 1 member: 2 × 64 MiB beside one held 64 MiB claim fits 256 MiB.
    let (r, hall, _ids) = roots(h, 1, &[], (None, false)).await;
    let source = &r[0].0;
    let gate = gate_of(source);
    let held = gate
        .try_source_now(gate.source_claim(1).expect("claim"))
        .expect("fits")
        .expect("free");
    relocate(source, &hall)
        .await
        .expect("the small aggregate moves beside the held unit");
    assert_eq!(&spot_record(source, &hall).await.0, r[1].1.routing_id());
    assert_eq!(
        gate.usage().memory,
        held.memory(),
        "only the held unit remains"
    );
    drop(held);
    assert_eq!(gate.usage(), GateUsage::default());
}
