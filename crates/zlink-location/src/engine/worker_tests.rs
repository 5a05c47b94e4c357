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
