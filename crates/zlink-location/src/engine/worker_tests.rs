//! Unit tests of the worker loop over a Store: one job's bad row costs that job only.

use std::time::Duration;

use zlink_store_conformance::FaultyLocationStore;
use zlink_store_spi::{Bytes, MemoryLocationStore, Mutation, StoreError, StoreKey, UnreadableKind};

use super::super::clock::SystemMonotonic;
use super::*;

struct TestOp {
    plan: Plan,
    mutations: Vec<Mutation>,
}

impl EngineOp for TestOp {
    fn plan(&self) -> &Plan {
        &self.plan
    }

    fn build(&self, _: &plan::Issued) -> Result<Built, LocationError> {
        Ok(Built {
            mutations: self.mutations.clone(),
            record: None,
        })
    }
}

fn key(s: &str) -> StoreKey {
    StoreKey::new(s).expect("key")
}

/// A job creating `own` (`Missing` expected), guarded by `guard` if given.
fn create(own: &str, guard: Option<&str>) -> Box<dyn EngineOp> {
    Box::new(TestOp {
        plan: Plan {
            own: vec![(key(own), Some(Expect::Missing))],
            guards: guard
                .map(|g| (key(g), Expect::Missing))
                .into_iter()
                .collect(),
            size_hint: 100,
            ..Plan::default()
        },
        mutations: vec![Mutation::put(key(own), Bytes::from_static(b"v"))],
    })
}

fn engine_over(store: Arc<dyn DynLocationStore>) -> Engine {
    let gate = Arc::new(AdmissionGate::new(
        Arc::new(SystemMonotonic::new()),
        Duration::from_secs(1),
    ));
    Engine::start(
        store,
        gate,
        Arc::new(LeaseBook::default()),
        Arc::new(StoreEpoch::default()),
        EngineConfig::default(),
    )
    .expect("engine starts")
}

/// Queues every op before the worker first runs (the test runtime has one thread and the test
/// does not yield meanwhile), so they are all taken into one batch.
fn submit_at_once(
    engine: &Engine,
    ops: Vec<Box<dyn EngineOp>>,
) -> Vec<oneshot::Receiver<Result<JobResult, LocationError>>> {
    ops.into_iter()
        .map(|op| {
            let (reply, rx) = oneshot::channel();
            engine.tx.send(Job::new(op, reply)).expect("engine runs");
            rx
        })
        .collect()
}

fn unreadable_key(result: &Result<JobResult, LocationError>) -> Option<&StoreKey> {
    match result {
        Err(LocationError::Store(StoreError::Unreadable(u))) => Some(&u.key),
        _ => None,
    }
}

/// A batch whose write finds one job's own row unreadable (the Store reports it before
/// anything changes): that job fails alone with the typed error naming its row; the other jobs
/// of the batch go out again without it and are applied.
#[tokio::test(flavor = "current_thread")]
async fn a_job_on_an_unreadable_row_fails_alone_and_its_batch_mates_apply() {
    let memory: Arc<dyn DynLocationStore> = Arc::new(MemoryLocationStore::new());
    let faulty = Arc::new(FaultyLocationStore::new(memory.clone()));
    faulty.set_unreadable(key("k3"), UnreadableKind::Corrupt);
    let engine = engine_over(faulty.clone());
    let names: Vec<String> = (0..8).map(|i| format!("k{i}")).collect();
    let replies = submit_at_once(&engine, names.iter().map(|n| create(n, None)).collect());
    for (name, rx) in names.iter().zip(replies) {
        let result = rx.await.expect("answered");
        if name == "k3" {
            assert_eq!(unreadable_key(&result), Some(&key("k3")), "{result:?}");
        } else {
            assert!(
                matches!(result, Ok(JobResult::Applied { .. })),
                "{name}: {result:?}"
            );
            assert!(
                memory
                    .read(&key(name))
                    .await
                    .expect("read")
                    .bytes()
                    .is_some()
            );
        }
    }
    assert_eq!(
        faulty.writes(),
        2,
        "one batch found the bad row, one batch applied the rest"
    );
}

/// The same for a guard: jobs whose guard names the unreadable key fail with it; the jobs of
/// the batch without that guard are applied.
#[tokio::test(flavor = "current_thread")]
async fn jobs_guarded_by_an_unreadable_row_fail_alone() {
    let memory: Arc<dyn DynLocationStore> = Arc::new(MemoryLocationStore::new());
    let faulty = Arc::new(FaultyLocationStore::new(memory.clone()));
    faulty.set_unreadable(key("g"), UnreadableKind::ForeignType);
    let engine = engine_over(faulty.clone());
    let ops = vec![
        create("a", Some("g")),
        create("b", None),
        create("c", Some("g")),
        create("d", None),
    ];
    let results: Vec<_> = {
        let mut out = Vec::new();
        for rx in submit_at_once(&engine, ops) {
            out.push(rx.await.expect("answered"));
        }
        out
    };
    assert_eq!(unreadable_key(&results[0]), Some(&key("g")));
    assert_eq!(unreadable_key(&results[2]), Some(&key("g")));
    assert!(matches!(results[1], Ok(JobResult::Applied { .. })));
    assert!(matches!(results[3], Ok(JobResult::Applied { .. })));
}

fn test_node() -> NodeKey {
    NodeKey {
        mesh: zlink_codec::MeshName::new("main").expect("mesh"),
        routing_id: zlink_codec::RoutingId::new(vec![7]).expect("rid"),
    }
}

/// A job that moves `actors` slots on [`test_node`]'s allocation row and writes its own `own`.
fn move_slots(own: &str, kind: CapMoveKind, actors: u32) -> Box<dyn EngineOp> {
    Box::new(TestOp {
        plan: Plan {
            own: vec![(key(own), None)],
            capacity: vec![CapMove {
                node: test_node(),
                kind,
                bundle: crate::capacity::CapacityBundle::new(actors, 0, None).expect("bundle"),
            }],
            size_hint: 100,
            ..Plan::default()
        },
        mutations: vec![Mutation::put(key(own), Bytes::from_static(b"v"))],
    })
}

async fn run_one(engine: &Engine, op: Box<dyn EngineOp>) {
    let rx = submit_at_once(engine, vec![op]).pop().expect("one");
    let result = rx.await.expect("answered");
    assert!(
        matches!(result, Ok(JobResult::Applied { .. })),
        "{result:?}"
    );
}

async fn row_actors(store: &dyn DynLocationStore) -> (u64, Option<StoreVersion>) {
    let row_key = keys::node_capacity(&test_node()).expect("key");
    let (row, version) = read_counts(store, &row_key).await.expect("row");
    (row.actors, version)
}

/// A Store rolled back to a prefix of its writes reissues the versions the lost writes had
/// (`docs/store-epoch.md`, "Version reuse"): the allocation row this engine cached from a lost
/// write can be back under that very version with other counts. Once the host has noticed the
/// loss, the engine forgets what it cached before it and computes the next move from the row
/// as stored. (The simulation's seed 12588: a takeover's sweep released slots from such a copy
/// and dropped a row that still counted slots, so every later sweep of that node underflowed.)
#[tokio::test(flavor = "current_thread")]
async fn a_row_cached_before_a_noticed_loss_is_not_moved_from_its_copy() {
    let memory = Arc::new(MemoryLocationStore::new());
    let store: Arc<dyn DynLocationStore> = memory.clone();
    let epoch = Arc::new(StoreEpoch::default());
    let engine = Engine::start(
        store.clone(),
        Arc::new(AdmissionGate::new(
            Arc::new(SystemMonotonic::new()),
            Duration::from_secs(1),
        )),
        Arc::new(LeaseBook::default()),
        epoch.clone(),
        EngineConfig::default(),
    )
    .expect("engine starts");
    let reserve = || CapMoveKind::Reserve(crate::capacity::CapacityLimits::unlimited());
    run_one(&engine, move_slots("a", reserve(), 3)).await;
    let checkpoint = memory.checkpoint();
    // Lost with the rollback: this engine releases one slot and caches the row at 2.
    run_one(&engine, move_slots("b", CapMoveKind::Release, 1)).await;
    let (_, cached) = row_actors(store.as_ref()).await;
    memory.roll_back_to(&checkpoint).expect("rolled back");
    // Another host's first write after the rollback puts the row at 5 under the same version.
    let row_key = keys::node_capacity(&test_node()).expect("key");
    let (mut row, at) = read_counts(store.as_ref(), &row_key).await.expect("row");
    row.add_within(
        &crate::capacity::CapacityBundle::new(2, 0, None).expect("bundle"),
        &crate::capacity::CapacityLimits::unlimited(),
    )
    .expect("fits");
    let put = zlink_store_spi::WriteRequest::new(
        vec![zlink_store_spi::Condition::Version(
            row_key.clone(),
            at.expect("row present"),
        )],
        vec![Mutation::put(
            row_key.clone(),
            Bytes::from(row.encode().expect("encode")),
        )],
    )
    .expect("request");
    assert!(matches!(
        store.write(&put).await.expect("write"),
        WriteResult::Applied { .. }
    ));
    assert_eq!(
        row_actors(store.as_ref()).await,
        (5, cached),
        "the row is back under the version the engine cached, with other counts"
    );
    epoch.notice_loss();
    run_one(&engine, move_slots("c", CapMoveKind::Release, 1)).await;
    assert_eq!(
        row_actors(store.as_ref()).await.0,
        4,
        "released from the row as stored (5), not from the copy (2)"
    );
}
