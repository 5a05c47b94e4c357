//! The model test: random sequences of reads, batches, scans (and clock moves, where the
//! harness controls the clock) against the store and against a plain reference model; any
//! divergence fails with a minimised sequence.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::Bytes;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use zlink_store_spi::{
    Condition, DynLocationStore, LocationStore, LocationStoreExt, Mutation, PageLimit, ReadResult,
    Retention, ScanPrefix, StoreKey, StoreVersion, WriteResult,
};

use crate::util::{ensure, fail, io, request};
use crate::{CheckResult, LocationCapabilities};

/// Settings of the model test.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ModelConfig {
    /// How many random sequences to run.
    pub cases: u32,
    /// The most operations in one sequence.
    pub max_ops: usize,
}

impl ModelConfig {
    /// From the suite capabilities (cases) with 24 operations per sequence at most.
    pub fn from_caps(caps: &LocationCapabilities) -> Self {
        ModelConfig {
            cases: caps.model_cases,
            max_ops: 24,
        }
    }
}

/// Key names of the model's universe: byte-order edge cases included (a key that is a prefix of
/// another, an embedded NUL, a non-ASCII key).
const KEYS: [&str; 6] = ["a", "ab", "b", "b\u{0}", "c", "\u{e9}"];
/// Scan prefixes relative to the case namespace.
const PREFIXES: [&str; 4] = ["", "a", "b", "z"];

#[derive(Debug, Clone)]
enum CondKind {
    Missing,
    Current,
    Stale,
}

#[derive(Debug, Clone)]
enum MutKind {
    Put {
        value: Vec<u8>,
        expire_ms: Option<u16>,
    },
    Delete,
}

#[derive(Debug, Clone)]
enum Op {
    Read(usize),
    Write {
        conditions: BTreeMap<usize, CondKind>,
        mutations: BTreeMap<usize, MutKind>,
    },
    Scan {
        prefix: usize,
        limit: usize,
    },
    Advance(u16),
}

fn op_strategy(clock: bool) -> BoxedStrategy<Op> {
    let key = 0..KEYS.len();
    let cond = prop_oneof![
        Just(CondKind::Missing),
        Just(CondKind::Current),
        Just(CondKind::Stale)
    ];
    let expire = if clock {
        proptest::option::weighted(0.3, 1u16..2000).boxed()
    } else {
        Just(None).boxed()
    };
    let value = proptest::collection::vec(any::<u8>(), 0..8);
    let mutation = prop_oneof![
        3 => (value, expire).prop_map(|(value, expire_ms)| MutKind::Put { value, expire_ms }),
        1 => Just(MutKind::Delete),
    ];
    let write = (
        proptest::collection::btree_map(key.clone(), cond, 0..3),
        proptest::collection::btree_map(key.clone(), mutation, 0..4),
    )
        .prop_filter("a batch needs something", |(c, m)| {
            !c.is_empty() || !m.is_empty()
        })
        .prop_map(|(conditions, mutations)| Op::Write {
            conditions,
            mutations,
        });
    let scan =
        (0..PREFIXES.len(), 1usize..4).prop_map(|(prefix, limit)| Op::Scan { prefix, limit });
    let advance = if clock {
        (1u16..1500).prop_map(Op::Advance).boxed()
    } else {
        key.clone().prop_map(Op::Read).boxed()
    };
    prop_oneof![
        2 => key.prop_map(Op::Read),
        5 => write,
        2 => scan,
        1 => advance,
    ]
    .boxed()
}

#[derive(Debug, Clone)]
struct ModelValue {
    bytes: Vec<u8>,
    version: StoreVersion,
    expires_at: Option<u64>,
}

#[derive(Default)]
struct Model {
    values: BTreeMap<usize, ModelValue>,
    seen_versions: BTreeMap<usize, Vec<StoreVersion>>,
}

impl Model {
    fn live(&self, k: usize, now: u64) -> Option<&ModelValue> {
        self.values
            .get(&k)
            .filter(|v| v.expires_at.is_none_or(|e| e > now))
    }
}

fn full_key(ns: &str, k: usize) -> CheckResult<StoreKey> {
    StoreKey::new(format!("{ns}{}", KEYS[k])).map_err(|e| e.to_string())
}

async fn run_ops(
    store: &dyn DynLocationStore,
    caps: &LocationCapabilities,
    ns: &str,
    ops: &[Op],
) -> CheckResult {
    let mut model = Model::default();
    for (step, op) in ops.iter().enumerate() {
        let at = |msg: String| format!("step {step} ({op:?}): {msg}");
        match op {
            Op::Read(k) => {
                let r = io(store.read(&full_key(ns, *k)?).await, "read")?;
                let now = r.store_now().as_millis();
                match (model.live(*k, now), &r) {
                    (None, ReadResult::Missing { .. }) => {}
                    (
                        Some(m),
                        ReadResult::Found {
                            bytes,
                            version,
                            expires_at,
                            ..
                        },
                    ) => {
                        ensure(
                            bytes.as_ref() == m.bytes.as_slice()
                                && *version == m.version
                                && expires_at.map(|e| e.as_millis()) == m.expires_at,
                            || at(format!("read {r:?}, model {m:?}")),
                        )?;
                    }
                    (m, r) => return fail(at(format!("read {r:?}, model {m:?}"))),
                }
            }
            Op::Write {
                conditions,
                mutations,
            } => {
                let mut conds = Vec::new();
                for (k, kind) in conditions {
                    let key = full_key(ns, *k)?;
                    conds.push(match kind {
                        CondKind::Missing => Condition::Missing(key),
                        CondKind::Current => match model.values.get(k) {
                            Some(v) => Condition::Version(key, v.version.clone()),
                            None => Condition::Missing(key),
                        },
                        CondKind::Stale => {
                            let current = model.values.get(k).map(|v| v.version.clone());
                            let stale = model.seen_versions.get(k).and_then(|vs| {
                                vs.iter()
                                    .rev()
                                    .find(|v| Some(*v) != current.as_ref())
                                    .cloned()
                            });
                            let v = stale.unwrap_or(
                                StoreVersion::new("never-issued-version")
                                    .map_err(|e| e.to_string())?,
                            );
                            Condition::Version(key, v)
                        }
                    });
                }
                let mut muts = Vec::new();
                for (k, kind) in mutations {
                    let key = full_key(ns, *k)?;
                    muts.push(match kind {
                        MutKind::Put {
                            value,
                            expire_ms: None,
                        } => Mutation::put(key, Bytes::from(value.clone())),
                        MutKind::Put {
                            value,
                            expire_ms: Some(ms),
                        } => {
                            let r = Retention::from_millis(u64::from(*ms))
                                .map_err(|e| e.to_string())?;
                            Mutation::put_expiring(key, Bytes::from(value.clone()), r)
                        }
                        MutKind::Delete => Mutation::Delete(key),
                    });
                }
                let req = request(conds.clone(), muts)?;
                let result = io(store.write(&req).await, "write")?;
                let now = result.store_now().as_millis();
                let holds = conds.iter().zip(conditions.keys()).all(|(c, k)| match c {
                    Condition::Missing(_) => model.live(*k, now).is_none(),
                    Condition::Version(_, v) => {
                        model.live(*k, now).is_some_and(|m| m.version == *v)
                    }
                });
                match (holds, result) {
                    (false, WriteResult::Conflict { .. }) => {}
                    (true, WriteResult::Applied { put_versions, .. }) => {
                        let mut versions = put_versions.into_iter();
                        for (k, kind) in mutations {
                            match kind {
                                MutKind::Put { value, expire_ms } => {
                                    let version = versions
                                        .next()
                                        .ok_or_else(|| at("too few versions".into()))?;
                                    let seen = model.seen_versions.entry(*k).or_default();
                                    ensure(!seen.contains(&version), || {
                                        at(format!("version {version} reissued for one key"))
                                    })?;
                                    seen.push(version.clone());
                                    model.values.insert(
                                        *k,
                                        ModelValue {
                                            bytes: value.clone(),
                                            version,
                                            expires_at: expire_ms.map(|ms| now + u64::from(ms)),
                                        },
                                    );
                                }
                                MutKind::Delete => {
                                    model.values.remove(k);
                                }
                            }
                        }
                        ensure(versions.next().is_none(), || at("too many versions".into()))?;
                    }
                    (h, r) => {
                        return fail(at(format!(
                            "model says conditions hold = {h}, store answered {r:?}"
                        )));
                    }
                }
            }
            Op::Scan { prefix, limit } => {
                let p = ScanPrefix::new(format!("{ns}{}", PREFIXES[*prefix]))
                    .map_err(|e| e.to_string())?;
                let limit = PageLimit::new(*limit).map_err(|e| e.to_string())?;
                // The snapshot's time: judge expiry at the first page's StoreNow.
                let first = io(
                    store
                        .scan(&zlink_store_spi::ScanRequest::first(
                            p.clone(),
                            PageLimit::LARGEST,
                        ))
                        .await,
                    "probe",
                )?;
                let zlink_store_spi::ScanResult::Page(probe) = first else {
                    return fail(at("first page Expired".into()));
                };
                let now = probe.store_now.as_millis();
                let listing = io(store.scan_all(&p, limit, 3).await, "scan")?
                    .ok_or_else(|| at("scan kept expiring".into()))?;
                // Everything under the prefix was written through the SPI: all readable.
                if !listing.unreadable.is_empty() {
                    return fail(at(format!(
                        "scan reported keys written through the SPI as unreadable: {:?}",
                        listing.unreadable
                    )));
                }
                let got: Vec<(String, Vec<u8>, StoreVersion)> = listing
                    .items
                    .into_iter()
                    .map(|i| (i.key.to_string(), i.bytes.to_vec(), i.version))
                    .collect();
                let mut want: Vec<(String, Vec<u8>, StoreVersion)> = Vec::new();
                let mut ordered: BTreeSet<(Vec<u8>, usize)> = BTreeSet::new();
                for (k, _) in model.values.iter() {
                    ordered.insert((format!("{ns}{}", KEYS[*k]).into_bytes(), *k));
                }
                for (full, k) in ordered {
                    if !full.starts_with(p.as_bytes()) {
                        continue;
                    }
                    if let Some(m) = model.live(k, now) {
                        want.push((
                            String::from_utf8_lossy(&full).into_owned(),
                            m.bytes.clone(),
                            m.version.clone(),
                        ));
                    }
                }
                // With a controlled clock nothing moves between the probe and the scan; with a
                // real clock no expiring values are generated.
                ensure(got == want, || at(format!("scan {got:?}, model {want:?}")))?;
            }
            Op::Advance(ms) => match &caps.advance_clock {
                Some(f) => f(Duration::from_millis(u64::from(*ms))),
                None => return fail("advance without a clock capability".to_string()),
            },
        }
    }
    Ok(())
}

/// Runs the model test: `config.cases` random operation sequences, each in a fresh key
/// namespace under `caps.prefix`; a divergence is shrunk to a minimal sequence and reported.
pub async fn location_model_matches_reference(
    store: &dyn DynLocationStore,
    caps: &LocationCapabilities,
    config: ModelConfig,
) -> CheckResult {
    let strategy = proptest::collection::vec(
        op_strategy(caps.advance_clock.is_some()),
        1..=config.max_ops.max(1),
    );
    let mut runner = TestRunner::new(Config {
        cases: config.cases,
        ..Config::default()
    });
    let mut run = 0u64;
    for _ in 0..config.cases {
        let mut tree = strategy.new_tree(&mut runner).map_err(|e| e.to_string())?;
        run += 1;
        let Err(first) = run_ops(
            store,
            caps,
            &format!("{}r{run}/", caps.prefix),
            &tree.current(),
        )
        .await
        else {
            continue;
        };
        let mut best = (tree.current(), first);
        let mut failing = true;
        for _ in 0..1000 {
            let moved = if failing {
                tree.simplify()
            } else {
                tree.complicate()
            };
            if !moved {
                break;
            }
            run += 1;
            match run_ops(
                store,
                caps,
                &format!("{}r{run}/", caps.prefix),
                &tree.current(),
            )
            .await
            {
                Err(e) => {
                    best = (tree.current(), e);
                    failing = true;
                }
                Ok(()) => failing = false,
            }
        }
        return fail(format!(
            "store diverged from the model: {}\nminimal sequence ({} ops): {:#?}",
            best.1,
            best.0.len(),
            best.0
        ));
    }
    Ok(())
}
