//! Property tests of the waiting jobs ([`Pending`], [`take_batch`]): random mixes of jobs,
//! batches, locks held by batches in flight and jobs sent back keep every rule of batch
//! formation, and each batch is the one a plain scan of every waiting job in order forms.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;
use tokio::sync::oneshot;
use zlink_store_spi::{StoreKey, StoreVersion};

use super::super::super::error::LocationError;
use super::super::super::generation::GenerationKind;
use super::super::super::identity::{MeshName, NodeKey, RoutingId};
use super::super::batch::{EngineConfig, Job, Locks};
use super::super::plan::{Built, EngineOp, Expect, Issued, Plan, Shared};
use super::*;

/// A job as generated: own keys, an optional guard, the shared rows it writes, its size.
#[derive(Debug, Clone)]
struct Spec {
    own: Vec<u8>,
    guard: Option<(u8, u8)>,
    shared: Vec<u8>,
    size: usize,
    solo: bool,
}

struct TestOp(Plan);

impl EngineOp for TestOp {
    fn plan(&self) -> &Plan {
        &self.0
    }

    fn build(&self, _: &Issued) -> Result<Built, LocationError> {
        Ok(Built {
            mutations: Vec::new(),
            record: None,
        })
    }
}

fn key(name: String) -> StoreKey {
    StoreKey::new(name).expect("key")
}

fn shared_row(i: u8) -> Shared {
    match i {
        0 => Shared::Counter(GenerationKind::Object),
        n => Shared::Row(NodeKey {
            mesh: MeshName::new("main").expect("mesh"),
            routing_id: RoutingId::new(vec![n]).expect("rid"),
        }),
    }
}

fn own_key(i: u8) -> StoreKey {
    key(format!("k{i}"))
}

/// Guards name keys 3..=6: the first two are also own keys of some jobs.
fn guard_key(i: u8) -> StoreKey {
    key(format!("k{}", 3 + i))
}

fn build(spec: &Spec) -> Job {
    let plan = Plan {
        own: spec
            .own
            .iter()
            .map(|k| (own_key(*k), Some(Expect::Missing)))
            .collect(),
        guards: spec
            .guard
            .map(|(k, v)| {
                let expect = match v {
                    0 => Expect::Missing,
                    v => Expect::Version(StoreVersion::new(v.to_string()).expect("version")),
                };
                (guard_key(k), expect)
            })
            .into_iter()
            .collect(),
        size_hint: spec.size,
        ..Plan::default()
    };
    let (reply, _rx) = oneshot::channel();
    let mut job = Job::new(Box::new(TestOp(plan)), reply);
    job.shared = spec.shared.iter().map(|i| shared_row(*i)).collect();
    job.solo = spec.solo;
    job
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop::collection::vec(0u8..5, 0..3),
        prop::option::weighted(0.3, (0u8..4, 0u8..3)),
        prop::collection::vec(0u8..4, 0..3),
        50usize..400,
        prop::bool::weighted(0.05),
    )
        .prop_map(|(own, guard, shared, size, solo)| Spec {
            own,
            guard,
            shared,
            size,
            solo,
        })
}

#[derive(Debug, Clone)]
enum Step {
    /// New jobs arrive.
    Push(Vec<Spec>),
    /// A batch is taken with this minimum, and held in flight (its keys and rows locked).
    Take(usize),
    /// The oldest (or newest) batch in flight settles; some of its jobs are sent back.
    Settle { newest: bool, retry_mask: u8 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => prop::collection::vec(spec(), 1..6).prop_map(Step::Push),
        4 => (1usize..4).prop_map(Step::Take),
        2 => (any::<bool>(), any::<u8>()).prop_map(|(newest, retry_mask)| Step::Settle { newest, retry_mask }),
    ]
}

/// What the model knows of a waiting job.
#[derive(Debug, Clone)]
struct Model {
    seq: u64,
    spec: Spec,
}

fn clash(a: &Spec, b: &Spec) -> bool {
    let own = |s: &Spec| -> HashSet<StoreKey> { s.own.iter().map(|k| own_key(*k)).collect() };
    let (ao, bo) = (own(a), own(b));
    if !ao.is_disjoint(&bo) {
        return true;
    }
    let guard = |s: &Spec| s.guard.map(|(k, v)| (guard_key(k), v));
    match (guard(a), guard(b)) {
        (Some((ka, va)), Some((kb, vb))) if ka == kb && va != vb => return true,
        _ => {}
    }
    guard(a).is_some_and(|(k, _)| bo.contains(&k)) || guard(b).is_some_and(|(k, _)| ao.contains(&k))
}

/// The batch a plain scan of every waiting job in order forms: a job goes if it is the first
/// waiting job on each of its own keys, none of its keys or rows is locked, it does not clash
/// with the jobs taken, fits the byte limit and is not a solo job after others; at most
/// `max_jobs`, and the scan stops after a batch's worth of jobs skipped for clashing, size or
/// solo. Fewer than `min`: nothing.
fn reference(waiting: &[Model], locks: &Locks, config: &EngineConfig, min: usize) -> Vec<u64> {
    let mut seen_keys: HashSet<StoreKey> = HashSet::new();
    let mut picked: Vec<&Model> = Vec::new();
    let mut bytes = 0;
    let mut skipped = 0;
    for m in waiting {
        let own: Vec<StoreKey> = m.spec.own.iter().map(|k| own_key(*k)).collect();
        let first = own.iter().all(|k| !seen_keys.contains(k));
        seen_keys.extend(own.iter().cloned());
        if picked.len() >= config.max_jobs {
            break;
        }
        let rows_locked = m
            .spec
            .shared
            .iter()
            .any(|i| locks.shared.contains(&shared_row(*i)));
        let key_locked = own.iter().any(|k| locks.keys.contains(k));
        if !first || rows_locked || key_locked {
            continue;
        }
        let too_big = !picked.is_empty() && bytes + m.spec.size > config.max_bytes;
        let alone = m.spec.solo && !picked.is_empty();
        if too_big || alone || picked.iter().any(|p| clash(&p.spec, &m.spec)) {
            skipped += 1;
            if skipped >= config.max_jobs {
                break;
            }
            continue;
        }
        bytes += m.spec.size;
        picked.push(m);
        if m.spec.solo {
            break;
        }
    }
    if picked.len() < min {
        return Vec::new();
    }
    picked.iter().map(|m| m.seq).collect()
}

struct Flight {
    jobs: Vec<(Job, Spec)>,
    locks: Vec<Shared>,
    keys: Vec<StoreKey>,
}

fn run(config: EngineConfig, steps: Vec<Step>) -> Result<(), TestCaseError> {
    let mut pending = Pending::default();
    let mut waiting: Vec<Model> = Vec::new();
    let mut locks = Locks::default();
    let mut flights: Vec<Flight> = Vec::new();
    let mut next_seq = 0u64;
    for step in steps {
        match step {
            Step::Push(specs) => {
                for spec in specs {
                    pending.push(build(&spec));
                    waiting.push(Model {
                        seq: next_seq,
                        spec,
                    });
                    next_seq += 1;
                }
            }
            Step::Take(min) => {
                let expected = reference(&waiting, &locks, &config, min);
                let batch = take_batch(&mut pending, &locks, &config, min);
                let got: Vec<u64> = batch.iter().filter_map(|j| j.seq).collect();
                prop_assert_eq!(&got, &expected);
                // The rules, checked on the batch itself.
                prop_assert!(batch.len() <= config.max_jobs);
                prop_assert!(batch.is_empty() || batch.len() >= min);
                let by_seq: HashMap<u64, Spec> =
                    waiting.iter().map(|m| (m.seq, m.spec.clone())).collect();
                let specs: Vec<Spec> = got.iter().map(|s| by_seq[s].clone()).collect();
                if specs.len() > 1 {
                    prop_assert!(specs.iter().map(|s| s.size).sum::<usize>() <= config.max_bytes);
                    prop_assert!(specs.iter().all(|s| !s.solo));
                }
                for (i, a) in specs.iter().enumerate() {
                    for b in &specs[i + 1..] {
                        prop_assert!(!clash(a, b), "{a:?} and {b:?} share a batch");
                    }
                    prop_assert!(a.own.iter().all(|k| !locks.keys.contains(&own_key(*k))));
                    prop_assert!(
                        a.shared
                            .iter()
                            .all(|r| !locks.shared.contains(&shared_row(*r)))
                    );
                }
                prop_assert!(got.windows(2).all(|w| w[0] < w[1]), "in order");
                waiting.retain(|m| !got.contains(&m.seq));
                for (s, spec) in got.iter().zip(&specs) {
                    // No job left waiting on one of its keys came before it.
                    prop_assert!(waiting.iter().all(|m| m.seq > *s
                        || m.spec.own.iter().all(|k| !spec.own.contains(k))));
                }
                prop_assert_eq!(pending.len(), waiting.len());
                if batch.is_empty() {
                    continue;
                }
                let mut flight = Flight {
                    jobs: Vec::new(),
                    locks: Vec::new(),
                    keys: Vec::new(),
                };
                for (job, spec) in batch.into_iter().zip(specs) {
                    flight.keys.extend(spec.own.iter().map(|k| own_key(*k)));
                    flight
                        .locks
                        .extend(spec.shared.iter().map(|r| shared_row(*r)));
                    flight.jobs.push((job, spec));
                }
                locks.shared.extend(flight.locks.iter().cloned());
                locks.keys.extend(flight.keys.iter().cloned());
                flights.push(flight);
            }
            Step::Settle { newest, retry_mask } => {
                if flights.is_empty() {
                    continue;
                }
                let flight = if newest {
                    flights.pop()
                } else {
                    Some(flights.remove(0))
                };
                let Some(flight) = flight else { continue };
                locks.release(&flight.locks, &flight.keys);
                pending.unpark(&flight.keys, &locks);
                for (i, (job, spec)) in flight.jobs.into_iter().enumerate() {
                    if retry_mask & (1 << (i % 8)) != 0 {
                        let seq = job.seq.expect("numbered");
                        pending.push(job);
                        let at = waiting.partition_point(|m| m.seq < seq);
                        waiting.insert(at, Model { seq, spec });
                    }
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every batch taken from random mixes of waiting jobs, batches in flight and jobs sent
    /// back is the plain scan's batch and keeps every rule: jobs on one key in order and never
    /// together, no clash, no locked key or row, the job, byte and minimum limits, a solo job
    /// alone.
    #[test]
    fn batches_keep_key_order_no_clash_and_the_limits(
        max_jobs in 1usize..6,
        max_bytes in 100usize..1200,
        steps in prop::collection::vec(step(), 1..40),
    ) {
        let config = EngineConfig {
            max_jobs,
            max_bytes,
            ..EngineConfig::default()
        };
        run(config, steps)?;
    }
}
