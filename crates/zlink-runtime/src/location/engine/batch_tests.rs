//! Unit tests of batch formation: no runtime, no Store.

use super::super::plan::{CapMove, Plan};
use super::*;
use crate::location::capacity::{CapacityBundle, CapacityLimits};
use crate::location::identity::{MeshName, RoutingId};
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
    let mut pending: VecDeque<Job> = [
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
    let mut pending: VecDeque<Job> = [writes(&["a"]), row_job, writes(&["b"])].into();
    let batch = take_batch(&mut pending, &locks, &EngineConfig::default(), 1);
    assert_eq!(own_keys(&batch), ["b"]);
    assert_eq!(pending.len(), 2);
}

#[test]
fn equal_guards_share_a_batch_and_contradicting_ones_wait() {
    let mut pending: VecDeque<Job> = [
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
    let mut pending: VecDeque<Job> = [writes(&["a"]), writes(&["b"])].into();
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
    let mut pending: VecDeque<Job> = [writes(&["a"]), writes(&["b"]), writes(&["c"])].into();
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
        .into(),
        rows: [(
            node(1),
            RowSeen {
                counts: CapacityRow::default(),
                version: None,
            },
        )]
        .into(),
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
    let book = LeaseBook::default();
    let (request, flight) = match assemble(accepted, working, &book) {
        Ok(r) => r,
        Err((e, _)) => panic!("assemble: {e:?}"),
    };
    assert_eq!(flight.job_puts, vec![0..2, 2..2, 2..3]);
    assert_eq!(flight.counters[0].put, 3);
    assert_eq!(flight.rows[0].put, 4);
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
        .into(),
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
