//! The invariant checker of a fault run: it reads every `P` / `E` line the driver printed (one
//! per request) and counts what breaks the promises of spec 21 §1.1.

use std::collections::{BTreeMap, HashMap, HashSet};

/// One reply of the `LOAD` driver.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub(crate) sent: u128,
    pub(crate) at: u128,
    pub(crate) node: String,
    pub(crate) generation: u64,
    pub(crate) nonce: u64,
    pub(crate) count: u64,
}

/// How one request ended.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    Answered(Answer),
    Failed { at: u128, kind: String },
}

/// The error kinds a request may end in (the 13 common kinds, as the runtime prints them).
const KINDS: [&str; 13] = [
    "NotFound",
    "Unavailable",
    "Rejected",
    "ShuttingDown",
    "DeadlineExceeded",
    "CapacityExceeded",
    "InternalFailure",
    "TypeMismatch",
    "AlreadyExists",
    "InvalidOperation",
    "NotConfigured",
    "ProtocolError",
    "DataLost",
];

/// Every id's request outcomes, in the order the driver printed them.
pub(crate) type ById = BTreeMap<String, Vec<Outcome>>;

/// Parses the driver's lines into per-id request outcomes (in order) and the `LOAD-DONE`
/// totals (answered, failed); a line that is neither is ignored.
pub(crate) fn parse(lines: &[String]) -> (ById, Option<(u64, u64)>) {
    let mut by_id = ById::new();
    let mut done = None;
    for line in lines {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["P", id, sent, at, node, generation, nonce, count] => {
                let (Ok(sent), Ok(at), Ok(generation), Ok(nonce), Ok(count)) = (
                    sent.parse(),
                    at.parse(),
                    generation.parse(),
                    nonce.parse(),
                    count.parse(),
                ) else {
                    continue;
                };
                by_id
                    .entry((*id).to_owned())
                    .or_default()
                    .push(Outcome::Answered(Answer {
                        sent,
                        at,
                        node: (*node).to_owned(),
                        generation,
                        nonce,
                        count,
                    }));
            }
            ["E", id, _sent, at, kind] => {
                let Ok(at) = at.parse() else { continue };
                by_id
                    .entry((*id).to_owned())
                    .or_default()
                    .push(Outcome::Failed {
                        at,
                        kind: (*kind).to_owned(),
                    });
            }
            ["LOAD-DONE", ok, failed] => {
                if let (Ok(ok), Ok(failed)) = (ok.parse(), failed.parse()) {
                    done = Some((ok, failed));
                }
            }
            _ => {}
        }
    }
    (by_id, done)
}

/// A window in which a node must not answer: requests it received after `from` (on the
/// driver's clock) and answered before `until` are past its admission deadline.
#[derive(Debug, Clone)]
pub(crate) struct Fenced {
    /// The node's routing id (hex).
    pub(crate) node: String,
    /// The latest time its admission deadline can be (the fault start + TTL − fencing margin).
    pub(crate) from: u128,
    /// When the node may admit again (the fault healed and a renew went through), or `u128::MAX`.
    pub(crate) until: u128,
}

/// What a run's replies show.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    pub(crate) ok: u64,
    pub(crate) errors: BTreeMap<String, u64>,
    /// Error kinds outside the 13 common ones.
    pub(crate) undefined: u64,
    /// Requests the driver sent whose end it did not print (or the reverse).
    pub(crate) unaccounted: u64,
    /// An activation answering again after another one of the same id had answered.
    pub(crate) doubles: u64,
    /// A count that did not rise by exactly one within one activation (beyond what a timed-out
    /// request may have added).
    pub(crate) count_breaks: u64,
    /// An activation starting below what an earlier one had acknowledged, without a higher
    /// ObjectGeneration.
    pub(crate) lost: u64,
    /// Answers past the answering node's admission deadline.
    pub(crate) late: u64,
    /// Ids never answered after the fault healed.
    pub(crate) unreachable: u64,
    /// Per id, how long after the heal its first answer came (ms).
    pub(crate) recovery_ms: Vec<u128>,
}

impl Verdict {
    /// Whether every invariant held.
    pub(crate) fn holds(&self, reach_within_ms: u128) -> bool {
        self.undefined == 0
            && self.unaccounted == 0
            && self.doubles == 0
            && self.count_breaks == 0
            && self.lost == 0
            && self.late == 0
            && self.unreachable == 0
            && self.recovery_max() <= reach_within_ms
    }

    /// The median recovery (ms).
    pub(crate) fn recovery_p50(&self) -> u128 {
        let mut v = self.recovery_ms.clone();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or_default()
    }

    /// The longest recovery (ms).
    pub(crate) fn recovery_max(&self) -> u128 {
        self.recovery_ms.iter().copied().max().unwrap_or_default()
    }
}

/// Checks every invariant over the outcomes of one run. `healed` is when the fault was over
/// (driver clock, ms); `fenced` are the windows in which a node must not answer.
pub(crate) fn check(
    by_id: &ById,
    done: Option<(u64, u64)>,
    healed: u128,
    fenced: &[Fenced],
) -> Verdict {
    let mut v = Verdict::default();
    let mut printed = 0u64;
    for outcomes in by_id.values() {
        printed += outcomes.len() as u64;
        // The activations seen so far (nonce → last count), and the one answering now.
        let mut seen: HashSet<u64> = HashSet::new();
        let mut current: Option<(u64, u64, u64)> = None; // (nonce, generation, last count)
        let mut best: HashMap<u64, u64> = HashMap::new(); // generation → highest count acked
        let mut timed_out_since_last = false;
        let mut recovered = None;
        for o in outcomes {
            match o {
                Outcome::Failed { at, kind } => {
                    *v.errors.entry(kind.clone()).or_default() += 1;
                    if !KINDS.contains(&kind.as_str()) {
                        v.undefined += 1;
                    }
                    if kind == "DeadlineExceeded" {
                        timed_out_since_last = true;
                    }
                    let _ = at;
                }
                Outcome::Answered(a) => {
                    v.ok += 1;
                    if a.at >= healed && recovered.is_none() {
                        recovered = Some(a.at - healed);
                    }
                    if fenced
                        .iter()
                        .any(|f| f.node == a.node && a.sent >= f.from && a.at < f.until)
                    {
                        v.late += 1;
                    }
                    match current {
                        Some((nonce, _, last)) if nonce == a.nonce => {
                            let rose =
                                a.count > last && (a.count == last + 1 || timed_out_since_last);
                            if !rose {
                                v.count_breaks += 1;
                            }
                        }
                        _ => {
                            if !seen.insert(a.nonce) {
                                // An activation that had been superseded answers again.
                                v.doubles += 1;
                            }
                            let acked = best.values().copied().max().unwrap_or(0);
                            let higher = best.keys().all(|g| a.generation > *g) || best.is_empty();
                            if a.count <= acked && !higher {
                                v.lost += 1;
                            }
                        }
                    }
                    current = Some((a.nonce, a.generation, a.count));
                    let e = best.entry(a.generation).or_default();
                    *e = (*e).max(a.count);
                    timed_out_since_last = false;
                }
            }
        }
        match recovered {
            Some(ms) => v.recovery_ms.push(ms),
            None => v.unreachable += 1,
        }
    }
    if let Some((ok, failed)) = done {
        v.unaccounted = (ok + failed).abs_diff(printed);
    } else {
        v.unaccounted = printed.max(1);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(id: &str, t: u128, node: &str, generation: u64, nonce: u64, count: u64) -> String {
        format!("P {id} {t} {} {node} {generation} {nonce} {count}", t + 1)
    }

    #[test]
    fn a_clean_run_holds() {
        let lines = vec![
            p("a", 10, "n1", 1, 7, 1),
            p("a", 20, "n1", 1, 7, 2),
            "E a 30 31 Unavailable".to_owned(),
            p("a", 40, "n2", 2, 9, 1),
            "LOAD-DONE 3 1".to_owned(),
        ];
        let (by_id, done) = parse(&lines);
        let v = check(&by_id, done, 35, &[]);
        assert!(v.holds(1_000), "{v:?}");
        assert_eq!((v.ok, v.recovery_ms.clone()), (3, vec![6]));
    }

    #[test]
    fn an_old_activation_answering_again_is_a_double() {
        let lines = vec![
            p("a", 10, "n1", 1, 7, 1),
            p("a", 20, "n2", 2, 9, 1),
            p("a", 30, "n1", 1, 7, 2),
            "LOAD-DONE 3 0".to_owned(),
        ];
        let (by_id, done) = parse(&lines);
        assert_eq!(check(&by_id, done, 0, &[]).doubles, 1);
    }

    #[test]
    fn a_restart_from_empty_without_a_higher_generation_loses_increments() {
        let lines = vec![
            p("a", 10, "n1", 5, 7, 3),
            p("a", 20, "n2", 5, 9, 1),
            "LOAD-DONE 2 0".to_owned(),
        ];
        let (by_id, done) = parse(&lines);
        assert_eq!(check(&by_id, done, 0, &[]).lost, 1);
        let lower = vec![p("a", 10, "n1", 5, 7, 3), p("a", 20, "n2", 4, 9, 1)];
        assert_eq!(check(&parse(&lower).0, Some((2, 0)), 0, &[]).lost, 1);
    }

    #[test]
    fn a_count_that_skips_without_a_timeout_breaks_and_with_one_holds() {
        let skip = vec![p("a", 10, "n1", 1, 7, 1), p("a", 20, "n1", 1, 7, 3)];
        assert_eq!(check(&parse(&skip).0, Some((2, 0)), 0, &[]).count_breaks, 1);
        let timed = vec![
            p("a", 10, "n1", 1, 7, 1),
            "E a 15 16 DeadlineExceeded".to_owned(),
            p("a", 20, "n1", 1, 7, 3),
        ];
        assert_eq!(
            check(&parse(&timed).0, Some((2, 1)), 0, &[]).count_breaks,
            0
        );
    }

    #[test]
    fn an_answer_inside_a_fenced_window_is_late_and_one_outside_is_not() {
        let lines = vec![p("a", 100, "n1", 1, 7, 1), p("a", 300, "n1", 1, 7, 2)];
        let fenced = [Fenced {
            node: "n1".into(),
            from: 200,
            until: 400,
        }];
        assert_eq!(check(&parse(&lines).0, Some((2, 0)), 0, &fenced).late, 1);
    }

    #[test]
    fn an_id_never_answered_after_the_heal_is_unreachable_and_a_missing_line_unaccounted() {
        let lines = vec![p("a", 10, "n1", 1, 7, 1), "LOAD-DONE 2 0".to_owned()];
        let v = check(&parse(&lines).0, parse(&lines).1, 50, &[]);
        assert_eq!((v.unreachable, v.unaccounted), (1, 1));
        assert!(!v.holds(1_000));
        let undefined = vec![p("a", 60, "n1", 1, 7, 1), "E a 70 71 Weird".to_owned()];
        assert_eq!(
            check(&parse(&undefined).0, Some((1, 1)), 0, &[]).undefined,
            1
        );
    }
}
