//! Unit tests of batch formation: no runtime, no Store.

use super::super::pending::{Pending, take_batch};
use super::super::plan::{CapMove, Expect, Plan};
use super::*;
use crate::capacity::{CapacityBundle, CapacityLimits};
use crate::identity::{MeshName, RoutingId};
use zlink_store_spi::{Bytes, Condition, StoreVersion};

struct TestOp {
    plan: Plan,
    mutations: Vec<Mutation>,
}

impl EngineOp for TestOp {
    fn plan(&self) -> &Plan {
        &self.plan
    }

    fn build(&self, _: &Issued) -> Result<Built, LocationError> {
        Ok(Built {
            mutations: self.mutations.clone(),
            record: None,
        })
    }
}

fn key(s: &str) -> StoreKey {
    StoreKey::new(s).expect("key")
}

fn version(s: &str) -> StoreVersion {
    StoreVersion::new(s).expect("version")
}

fn node(rid: u8) -> NodeKey {
    NodeKey {
        mesh: MeshName::new("main").expect("mesh"),
        routing_id: RoutingId::new(vec![rid]).expect("rid"),
    }
}

fn job(plan: Plan, mutations: Vec<Mutation>) -> Job {
    let (reply, _rx) = oneshot::channel();
    Job::new(Box::new(TestOp { plan, mutations }), reply)
}

/// A job writing `own` under `Missing`, with one put per key.
fn writes(own: &[&str]) -> Job {
    let plan = Plan {
        own: own
            .iter()
            .map(|k| (key(k), Some(Expect::Missing)))
            .collect(),
        size_hint: 100,
        ..Plan::default()
    };
    let mutations = own
        .iter()
        .map(|k| Mutation::put(key(k), Bytes::from_static(b"v")))
        .collect();
    job(plan, mutations)
}

fn guarded(own: &str, guard: &str, expect: Expect) -> Job {
    let mut j = writes(&[own]);
    let plan = Plan {
        guards: vec![(key(guard), expect)],
        ..j.op.plan().clone()
    };
    j.op = Box::new(TestOp {
        plan,
        mutations: vec![Mutation::put(key(own), Bytes::from_static(b"v"))],
    });
    j
}

fn own_keys(batch: &[Job]) -> Vec<String> {
    batch
        .iter()
        .map(|j| j.op.plan().own[0].0.as_str().to_string())
        .collect()
}

#[test]
fn jobs_on_one_key_keep_their_order_and_never_share_a_batch() {
    let mut pending: Pending = [
        writes(&["a"]),
        writes(&["a", "b"]),
        writes(&["c"]),
        writes(&["b"]),
    ]
    .into();
    let batch = take_batch(&mut pending, &Locks::default(), &EngineConfig::default(), 1);
    // The second job clashes on `a`; the fourth is behind it on `b` and waits too.
    assert_eq!(own_keys(&batch), ["a", "c"]);
    assert_eq!(
        own_keys(&pending.iter().map(job_like).collect::<Vec<_>>()),
        ["a", "b"]
    );
}

fn job_like(j: &Job) -> Job {
    let plan = j.op.plan().clone();
    job(plan, Vec::new())
}

#[test]
fn rows_locked_by_a_batch_in_flight_hold_jobs_back() {
    let mut locks = Locks::default();
    locks.keys.insert(key("a"));
    let mut row_job = writes(&["r"]);
    row_job.shared = vec![Shared::Row(node(1))];
    locks.shared.insert(Shared::Row(node(1)));
    let mut pending: Pending = [writes(&["a"]), row_job, writes(&["b"])].into();
    let batch = take_batch(&mut pending, &locks, &EngineConfig::default(), 1);
    assert_eq!(own_keys(&batch), ["b"]);
    assert_eq!(pending.len(), 2);
}

#[test]
fn equal_guards_share_a_batch_and_contradicting_ones_wait() {
    let mut pending: Pending = [
        guarded("a", "g", Expect::Missing),
        guarded("b", "g", Expect::Missing),
        guarded("c", "g", Expect::Version(version("7"))),
        writes(&["g"]),
    ]
    .into();
    let batch = take_batch(&mut pending, &Locks::default(), &EngineConfig::default(), 1);
    assert_eq!(own_keys(&batch), ["a", "b"]);
    assert_eq!(
        pending.len(),
        2,
        "a contradicting guard and a write of a guarded key wait"
    );
}

#[test]
fn a_batch_below_the_minimum_is_left_pending_in_order() {
    let mut pending: Pending = [writes(&["a"]), writes(&["b"])].into();
    let batch = take_batch(
        &mut pending,
        &Locks::default(),
        &EngineConfig::default(),
        16,
    );
    assert!(batch.is_empty());
    let order: Vec<String> = pending
        .iter()
        .map(|j| j.op.plan().own[0].0.as_str().to_string())
        .collect();
    assert_eq!(order, ["a", "b"]);
}

#[test]
fn a_batch_never_passes_the_job_or_byte_limit() {
    let config = EngineConfig {
        max_jobs: 2,
        max_bytes: 250,
        ..EngineConfig::default()
    };
    let mut pending: Pending = [writes(&["a"]), writes(&["b"]), writes(&["c"])].into();
    assert_eq!(
        take_batch(&mut pending, &Locks::default(), &config, 1).len(),
        2
    );
    let config = EngineConfig {
        max_bytes: 150,
        ..EngineConfig::default()
    };
    assert_eq!(
        take_batch(&mut pending, &Locks::default(), &config, 1).len(),
        1
    );
}

#[test]
fn assemble_records_the_put_index_of_every_job_counter_and_row() {
    let cache = Cache {
        counters: [(
            GenerationKind::Object,
            CounterRow {
                kind: GenerationKind::Object,
                next: 5,
                version: Some(version("1")),
            },
        )]
        .into_iter()
        .collect(),
        rows: [(
            node(1),
            RowSeen {
                counts: CapacityRow::default(),
                version: None,
            },
        )]
        .into_iter()
        .collect(),
    };
    let delete_only = job(
        Plan {
            own: vec![(key("d"), Some(Expect::Version(version("3"))))],
            ..Plan::default()
        },
        vec![Mutation::Delete(key("d"))],
    );
    let accepted: Vec<Accepted> = [writes(&["a", "b"]), delete_only, writes(&["c"])]
        .into_iter()
        .map(|job| {
            let built = job.op.build(&Issued::default()).expect("build");
            Accepted { job, built }
        })
        .collect();
    let mut working = Working::default();
    working.next.insert(
        GenerationKind::Object,
        (cache.counters[&GenerationKind::Object].clone(), 6),
    );
    let mut row = CapacityRow::default();
    row.add_within(&CapacityBundle::actor(), &CapacityLimits::unlimited())
        .expect("fits");
    working.rows.insert(node(1), (None, row.clone()));
    working.moved.insert(node(1));
    let book = LeaseBook::default();
    let (request, flight) = match assemble(accepted, working, &book) {
        Ok(r) => r,
        Err((e, _)) => panic!("assemble: {e:?}"),
    };
    assert_eq!(flight.job_puts, vec![0..2, 2..2, 2..3]);
    assert_eq!(flight.counters[0].put, 3);
    assert_eq!(flight.rows[0].put, Some(4));
    assert_eq!(flight.rows[0].counts, row);
    let puts: Vec<&StoreKey> = request
        .mutations()
        .iter()
        .filter(|m| matches!(m, Mutation::Put { .. }))
        .map(|m| m.key())
        .collect();
    assert_eq!(puts[3], &GenerationKind::Object.counter_key());
    assert_eq!(puts[4], &keys::node_capacity(&node(1)).expect("key"));
    assert!(request.conditions().contains(&Condition::Version(
        GenerationKind::Object.counter_key(),
        version("1")
    )));
}

#[test]
fn apply_moves_the_working_rows_only_when_the_job_fits() {
    let cache = Cache {
        counters: Default::default(),
        rows: [(
            node(1),
            RowSeen {
                counts: CapacityRow::default(),
                version: None,
            },
        )]
        .into_iter()
        .collect(),
    };
    let limits = CapacityLimits {
        actors: 1,
        ..CapacityLimits::unlimited()
    };
    let reserve = |own: &str| {
        job(
            Plan {
                own: vec![(key(own), Some(Expect::Missing))],
                capacity: vec![CapMove {
                    node: node(1),
                    kind: CapMoveKind::Reserve(limits.clone()),
                    bundle: CapacityBundle::actor(),
                }],
                ..Plan::default()
            },
            vec![Mutation::put(key(own), Bytes::from_static(b"v"))],
        )
    };
    let book = LeaseBook::default();
    let mut working = Working::default();
    assert!(apply(&reserve("a"), &cache, &book, &mut working).is_ok());
    let after_first = working.rows.clone();
    assert!(matches!(
        apply(&reserve("b"), &cache, &book, &mut working),
        Err(ApplyFail::Shared(_))
    ));
    assert_eq!(
        working.rows, after_first,
        "a job that does not fit moves nothing"
    );
}

/// A Release of the last slot of a row some job asked to remove when empty.
fn release_last(own: &str, on: NodeKey, drop_empty: bool) -> Job {
    job(
        Plan {
            own: vec![(key(own), Some(Expect::Version(version("7"))))],
            capacity: vec![CapMove {
                node: on.clone(),
                kind: CapMoveKind::Release,
                bundle: CapacityBundle::actor(),
            }],
            drop_empty: if drop_empty { vec![on] } else { Vec::new() },
            ..Plan::default()
        },
        vec![Mutation::Delete(key(own))],
    )
}

/// A job that only asks for `on` to be removed when empty (moves nothing).
fn drop_only(on: NodeKey) -> Job {
    job(
        Plan {
            drop_empty: vec![on],
            ..Plan::default()
        },
        Vec::new(),
    )
}

fn one_actor() -> CapacityRow {
    let mut row = CapacityRow::default();
    row.add_within(&CapacityBundle::actor(), &CapacityLimits::unlimited())
        .expect("fits");
    row
}

fn seen(counts: CapacityRow, v: Option<&str>) -> RowSeen {
    RowSeen {
        counts,
        version: v.map(version),
    }
}

/// Applies every job to fresh working rows over `cache` and assembles their batch.
fn batch_of(jobs: Vec<Job>, cache: &Cache) -> (WriteRequest, Flight) {
    let book = LeaseBook::default();
    let mut working = Working::default();
    let accepted = jobs
        .into_iter()
        .map(|job| {
            let built = apply(&job, cache, &book, &mut working)
                .unwrap_or_else(|_| panic!("the job applies"));
            Accepted { job, built }
        })
        .collect();
    match assemble(accepted, working, &book) {
        Ok(r) => r,
        Err((e, _)) => panic!("assemble: {e:?}"),
    }
}

#[test]
fn a_row_emptied_by_a_batch_that_asks_for_it_is_deleted_under_its_version() {
    let cache = Cache {
        counters: Default::default(),
        rows: [(node(1), seen(one_actor(), Some("5")))]
            .into_iter()
            .collect(),
    };
    let row_key = keys::node_capacity(&node(1)).expect("key");
    let (request, flight) = batch_of(vec![release_last("a", node(1), true)], &cache);
    assert!(
        request
            .mutations()
            .contains(&Mutation::Delete(row_key.clone()))
    );
    assert!(
        !request
            .mutations()
            .iter()
            .any(|m| matches!(m, Mutation::Put { key, .. } if *key == row_key)),
        "an emptied row is not stored at zero"
    );
    assert!(
        request
            .conditions()
            .contains(&Condition::Version(row_key, version("5")))
    );
    assert_eq!(flight.rows.len(), 1);
    assert_eq!(flight.rows[0].put, None);
    assert!(flight.rows[0].counts.is_empty());

    // Without the request the emptied row is stored at zero, as before.
    let (request, flight) = batch_of(vec![release_last("a", node(1), false)], &cache);
    assert_eq!(flight.rows[0].put, Some(0));
    assert_eq!(request.mutations().len(), 2);
}

#[test]
fn a_removal_candidate_that_still_counts_slots_or_is_absent_is_not_written() {
    let cache = Cache {
        counters: Default::default(),
        rows: [
            (node(1), seen(one_actor(), Some("5"))),
            (node(2), seen(CapacityRow::default(), None)),
            (node(3), seen(CapacityRow::default(), Some("9"))),
        ]
        .into_iter()
        .collect(),
    };
    let (request, flight) = batch_of(
        vec![drop_only(node(1)), drop_only(node(2)), drop_only(node(3))],
        &cache,
    );
    // Only the row stored at zero is removed; the others get neither a condition nor a write.
    let row3 = keys::node_capacity(&node(3)).expect("key");
    assert_eq!(request.mutations(), &[Mutation::Delete(row3.clone())]);
    assert_eq!(
        request.conditions(),
        &[Condition::Version(row3, version("9"))]
    );
    assert_eq!(flight.rows.len(), 1);
    assert_eq!(flight.rows[0].node, node(3));

    // A Reserve in the same batch as a removal request keeps the row: it counts a slot.
    let reserve = job(
        Plan {
            own: vec![(key("b"), Some(Expect::Missing))],
            capacity: vec![CapMove {
                node: node(3),
                kind: CapMoveKind::Reserve(CapacityLimits::unlimited()),
                bundle: CapacityBundle::actor(),
            }],
            ..Plan::default()
        },
        vec![Mutation::put(key("b"), Bytes::from_static(b"v"))],
    );
    let (_, flight) = batch_of(vec![drop_only(node(3)), reserve], &cache);
    assert_eq!(flight.rows.len(), 1);
    assert!(flight.rows[0].put.is_some());
    assert_eq!(flight.rows[0].counts, one_actor());
}
