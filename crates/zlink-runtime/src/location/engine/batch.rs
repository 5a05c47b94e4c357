//! Forming one conditional batch, with no I/O: which pending jobs go together
//! ([`take_batch`]), applying each job to working copies of the shared rows ([`apply`]) and
//! assembling the Store request with an explicit index for every put ([`assemble`]), so the
//! versions of an applied batch are handed back by index, never by position in a queue.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ops::Range;

use tokio::sync::oneshot;
use zlink_store_spi::{ArgumentError, Condition, Mutation, StoreKey, StoreVersion, WriteRequest};

use super::super::capacity::CapacityRow;
use super::super::counters::CounterRow;
use super::super::error::LocationError;
use super::super::generation::GenerationKind;
use super::super::identity::NodeKey;
use super::super::keys;
use super::super::lease::LeaseBook;
use super::plan::{Built, CapMoveKind, EngineOp, Expect, Issued, JobResult, Shared};

/// Tuning of the engine.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EngineConfig {
    /// The most jobs in one batch.
    pub(crate) max_jobs: usize,
    /// The most (approximate) bytes in one batch.
    pub(crate) max_bytes: usize,
    /// How many conflicting rounds a job may go through before `Contended`.
    pub(crate) max_rounds: u32,
    /// The most batches in flight (written or being recovered) at once.
    pub(crate) max_in_flight: usize,
    /// The fewest jobs a batch needs to go out while another batch is in flight: extra
    /// batches only pay off when they are large (each batch has a fixed cost in the Store).
    pub(crate) min_extra_jobs: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_jobs: 128,
            max_bytes: 3 * 1024 * 1024,
            max_rounds: 2_000,
            max_in_flight: 4,
            min_extra_jobs: 16,
        }
    }
}

pub(crate) type Reply = oneshot::Sender<Result<JobResult, LocationError>>;

/// One submitted operation and where its result goes.
pub(crate) struct Job {
    pub(crate) op: Box<dyn EngineOp>,
    /// The shared rows the job writes (from its plan, computed once).
    pub(crate) shared: Vec<Shared>,
    pub(crate) reply: Reply,
    pub(crate) rounds: u32,
    /// Whether the shared rows this job depends on were re-read after a failure derived from
    /// them: such a failure is final only once it holds on freshly read rows.
    pub(crate) refreshed: bool,
}

impl Job {
    pub(crate) fn new(op: Box<dyn EngineOp>, reply: Reply) -> Self {
        let shared = op.plan().shared();
        Job {
            op,
            shared,
            reply,
            rounds: 0,
            refreshed: false,
        }
    }

    pub(crate) fn finish(self, result: Result<JobResult, LocationError>) {
        // The caller may have gone away; the job's outcome is in the Store either way.
        let _ = self.reply.send(result);
    }
}

/// A node's allocation row as last read, with its version (`None`: absent).
#[derive(Debug, Clone)]
pub(crate) struct RowSeen {
    pub(crate) counts: CapacityRow,
    pub(crate) version: Option<StoreVersion>,
}

/// The shared rows the engine keeps cached with their versions.
#[derive(Debug, Default)]
pub(crate) struct Cache {
    pub(crate) counters: HashMap<GenerationKind, CounterRow>,
    pub(crate) rows: HashMap<NodeKey, RowSeen>,
}

/// What the batches in flight hold.
#[derive(Debug, Default)]
pub(crate) struct Locks {
    /// Shared rows written by batches in flight.
    pub(crate) shared: HashSet<Shared>,
    /// Own keys of the jobs in flight.
    pub(crate) keys: HashSet<StoreKey>,
}

impl Locks {
    pub(crate) fn hold(&mut self, flight: &Flight) {
        self.shared.extend(flight.locks.iter().cloned());
        self.keys.extend(flight.lock_keys.iter().cloned());
    }

    pub(crate) fn release(&mut self, locks: &[Shared], keys: &[StoreKey]) {
        for s in locks {
            self.shared.remove(s);
        }
        for k in keys {
            self.keys.remove(k);
        }
    }
}

/// The condition keys of the jobs taken so far, to keep one batch free of contradictions.
#[derive(Default)]
struct Taken {
    own: HashSet<StoreKey>,
    guards: HashMap<StoreKey, Expect>,
    leases: HashSet<StoreKey>,
}

impl Taken {
    fn clashes(&self, job: &Job) -> bool {
        let plan = job.op.plan();
        plan.own.iter().any(|(k, _)| {
            self.own.contains(k) || self.guards.contains_key(k) || self.leases.contains(k)
        }) || plan.guards.iter().any(|(k, e)| {
            self.own.contains(k)
                || self.leases.contains(k)
                || self.guards.get(k).is_some_and(|seen| seen != e)
        }) || plan
            .leases
            .iter()
            .any(|n| self.own.contains(&n.key) || self.guards.contains_key(&n.key))
    }

    fn add(&mut self, job: &Job) {
        let plan = job.op.plan();
        self.own.extend(plan.own.iter().map(|(k, _)| k.clone()));
        self.guards.extend(plan.guards.iter().cloned());
        self.leases
            .extend(plan.leases.iter().map(|n| n.key.clone()));
    }
}

/// Takes pending jobs, in order, whose rows are not locked by a batch in flight, whose keys do
/// not clash with the jobs already taken, and whose size fits one batch; the rest stay
/// pending, in order. A job left behind blocks later jobs on the same own keys, so jobs on one
/// key keep their order. Fewer than `min` jobs: nothing is taken.
pub(crate) fn take_batch(
    pending: &mut VecDeque<Job>,
    locks: &Locks,
    config: &EngineConfig,
    min: usize,
) -> Vec<Job> {
    let mut batch = Vec::new();
    let mut taken = Taken::default();
    let mut blocked: HashSet<StoreKey> = HashSet::new();
    let mut bytes = 0usize;
    let mut rest = VecDeque::with_capacity(pending.len());
    while let Some(job) = pending.pop_front() {
        let plan = job.op.plan();
        let own_busy = plan
            .own
            .iter()
            .any(|(k, _)| blocked.contains(k) || locks.keys.contains(k));
        let shared_busy = job.shared.iter().any(|s| locks.shared.contains(s));
        let too_big = !batch.is_empty() && bytes + plan.size_hint > config.max_bytes;
        if own_busy
            || shared_busy
            || too_big
            || batch.len() >= config.max_jobs
            || taken.clashes(&job)
        {
            blocked.extend(plan.own.iter().map(|(k, _)| k.clone()));
            rest.push_back(job);
            continue;
        }
        taken.add(&job);
        bytes += plan.size_hint;
        batch.push(job);
    }
    if batch.len() < min {
        // Too small to be worth a batch of its own while another one is in flight: put it
        // back in front. A job left in `rest` blocked every later job on its keys, so no job
        // on one key overtakes another.
        let mut merged: VecDeque<Job> = batch.into();
        merged.extend(rest);
        *pending = merged;
        return Vec::new();
    }
    *pending = rest;
    batch
}

/// Why a job could not be applied to the working rows.
pub(crate) enum ApplyFail {
    /// Final, whatever the shared rows hold.
    Final(LocationError),
    /// Derived from the shared rows (possibly stale in the cache).
    Shared(Box<Result<JobResult, LocationError>>),
}

/// The working copies of the shared rows while a batch is formed. Each carries the version it
/// was read with, so [`assemble`] writes every move it holds under its own condition and never
/// looks a row up again (no move can be dropped for want of a cached row).
#[derive(Debug, Default)]
pub(crate) struct Working {
    /// Each counter the batch moves: the row as read and its new stored value.
    pub(crate) next: HashMap<GenerationKind, (CounterRow, u64)>,
    /// Each allocation row the batch moves: the version it was read with and its new counts.
    pub(crate) rows: HashMap<NodeKey, (Option<StoreVersion>, CapacityRow)>,
}

/// Applies one job to the working copies (which change only if the job fits).
pub(crate) fn apply(
    job: &Job,
    cache: &Cache,
    book: &LeaseBook,
    working: &mut Working,
) -> Result<Built, ApplyFail> {
    let plan = job.op.plan();
    for need in &plan.leases {
        if !book.held_by(&need.key, &need.run) {
            return Err(ApplyFail::Shared(Box::new(Ok(JobResult::LeaseStale {
                role: need.role,
                run: need.run.clone(),
            }))));
        }
    }
    let mut issued = Issued::default();
    let mut my_next = HashMap::new();
    for kind in plan.counters() {
        let cached = cache
            .counters
            .get(&kind)
            .ok_or(ApplyFail::Final(LocationError::Contended))?;
        let row = CounterRow {
            kind,
            next: working.next.get(&kind).map_or(cached.next, |(_, n)| *n),
            version: cached.version.clone(),
        };
        let (value, after) = row
            .issue(1)
            .map_err(|e| ApplyFail::Shared(Box::new(Err(e))))?;
        my_next.insert(kind, (cached.clone(), after));
        match kind {
            GenerationKind::Object => issued.object = Some(value),
            GenerationKind::AuthorityOwner => issued.authority_owner = Some(value),
            // Plans issue only the two authority generations (see `Plan::counters`).
            _ => return Err(ApplyFail::Final(LocationError::Contended)),
        }
    }
    let mut my_rows: HashMap<NodeKey, (Option<StoreVersion>, CapacityRow)> = HashMap::new();
    for mv in &plan.capacity {
        let (_, row) = match my_rows.entry(mv.node.clone()) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let base = working
                    .rows
                    .get(&mv.node)
                    .cloned()
                    .or_else(|| {
                        cache
                            .rows
                            .get(&mv.node)
                            .map(|r| (r.version.clone(), r.counts.clone()))
                    })
                    .ok_or(ApplyFail::Final(LocationError::Contended))?;
                v.insert(base)
            }
        };
        let moved = match &mv.kind {
            CapMoveKind::Reserve(limits) => row.add_within(&mv.bundle, limits),
            CapMoveKind::Release => row.remove(&mv.bundle),
        };
        moved.map_err(|e| ApplyFail::Shared(Box::new(Err(e))))?;
    }
    let built = job.op.build(&issued).map_err(ApplyFail::Final)?;
    working.next.extend(my_next);
    working.rows.extend(my_rows);
    Ok(built)
}

/// A job accepted into a batch, with its mutations.
pub(crate) struct Accepted {
    pub(crate) job: Job,
    pub(crate) built: Built,
}

/// A counter a batch moves: its new stored value and the index of its put.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CounterMove {
    pub(crate) kind: GenerationKind,
    pub(crate) next: u64,
    pub(crate) put: usize,
}

/// An allocation row a batch moves: its new counts and the index of its put.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RowMove {
    pub(crate) node: NodeKey,
    pub(crate) counts: CapacityRow,
    pub(crate) put: usize,
}

/// One batch as sent: what is needed to handle its result.
pub(crate) struct Flight {
    pub(crate) accepted: Vec<Accepted>,
    /// For each accepted job (same order), the put indexes of its own puts.
    pub(crate) job_puts: Vec<Range<usize>>,
    pub(crate) counters: Vec<CounterMove>,
    pub(crate) rows: Vec<RowMove>,
    /// Everything it locked.
    pub(crate) locks: Vec<Shared>,
    pub(crate) lock_keys: Vec<StoreKey>,
}

/// Counts puts as mutations are appended, so every put's index is recorded where it is made.
#[derive(Default)]
struct Mutations {
    list: Vec<Mutation>,
    puts: usize,
}

impl Mutations {
    fn push(&mut self, m: Mutation) {
        if matches!(m, Mutation::Put { .. }) {
            self.puts += 1;
        }
        self.list.push(m);
    }

    /// Appends one put and returns its index.
    fn put(&mut self, m: Mutation) -> usize {
        let at = self.puts;
        self.push(m);
        at
    }
}

/// Assembles one conditional batch: every job's own conditions and mutations and guards, one
/// version condition per lease, and each moved counter and allocation row under its expected
/// version. Returns the accepted jobs back if the batch passes the Store's bounds.
pub(crate) fn assemble(
    accepted: Vec<Accepted>,
    working: Working,
    book: &LeaseBook,
) -> Result<(WriteRequest, Flight), (ArgumentError, Vec<Accepted>)> {
    let mut conditions = Vec::new();
    let mut mutations = Mutations::default();
    let mut condition_keys: HashSet<StoreKey> = HashSet::new();
    let mut lock_keys = Vec::new();
    let mut job_puts = Vec::with_capacity(accepted.len());
    for a in &accepted {
        let plan = a.job.op.plan();
        for (key, expect) in &plan.own {
            if let Some(e) = expect {
                conditions.push(e.condition(key));
            }
            lock_keys.push(key.clone());
        }
        for (key, expect) in &plan.guards {
            if condition_keys.insert(key.clone()) {
                conditions.push(expect.condition(key));
            }
        }
        for need in &plan.leases {
            if condition_keys.insert(need.key.clone()) {
                if let Some(v) = book.version(&need.key) {
                    conditions.push(Condition::Version(need.key.clone(), v));
                }
            }
        }
        let start = mutations.puts;
        for m in &a.built.mutations {
            mutations.push(m.clone());
        }
        job_puts.push(start..mutations.puts);
    }
    let mut next: Vec<(GenerationKind, (CounterRow, u64))> = working.next.into_iter().collect();
    next.sort_by_key(|(kind, _)| *kind);
    let mut counters = Vec::with_capacity(next.len());
    for (kind, (row, n)) in next {
        conditions.push(row.condition());
        let put = mutations.put(row.put(n));
        counters.push(CounterMove { kind, next: n, put });
    }
    let mut moved: Vec<(NodeKey, (Option<StoreVersion>, CapacityRow))> =
        working.rows.into_iter().collect();
    moved.sort_by(|a, b| a.0.cmp(&b.0));
    let mut rows = Vec::with_capacity(moved.len());
    for (node, (version, counts)) in moved {
        let key = match keys::node_capacity(&node) {
            Ok(k) => k,
            Err(e) => return Err((e, accepted)),
        };
        conditions.push(match version {
            Some(v) => Condition::Version(key.clone(), v),
            None => Condition::Missing(key.clone()),
        });
        let put = mutations.put(Mutation::put(key, counts.encode()));
        rows.push(RowMove { node, counts, put });
    }
    let request = match WriteRequest::new(conditions, mutations.list) {
        Ok(r) => r,
        Err(e) => return Err((e, accepted)),
    };
    let mut locks: Vec<Shared> = counters.iter().map(|c| Shared::Counter(c.kind)).collect();
    locks.extend(rows.iter().map(|r| Shared::Row(r.node.clone())));
    Ok((
        request,
        Flight {
            accepted,
            job_puts,
            counters,
            rows,
            locks,
            lock_keys,
        },
    ))
}

#[cfg(test)]
mod tests {
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
            Err((e, _)) => panic!("assemble: {e}"),
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
}
