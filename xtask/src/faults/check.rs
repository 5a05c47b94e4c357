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
    /// How long past its node's admission deadline the handler started (the node's own lease
    /// state at the handler's first step; 0: before it).
    pub(crate) late_ms: u64,
}

/// The scheduling delay allowed between the admission gate's check and the handler's first
/// step reading the lease: an answer whose handler started more than this past its node's
/// admission deadline is late.
pub(crate) const LATE_SLACK_MS: u64 = 100;

/// How one request ended.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    Answered(Answer),
    /// `lost`: an `Unavailable` whose connection went down after the request was sent — it
    /// may have run on its owner (the caller cannot know), like a timed-out one.
    Failed {
        at: u128,
        kind: String,
        lost: bool,
    },
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
            ["P", id, sent, at, node, generation, nonce, count, late_ms] => {
                let (Ok(sent), Ok(at), Ok(generation), Ok(nonce), Ok(count), Ok(late_ms)) = (
                    sent.parse(),
                    at.parse(),
                    generation.parse(),
                    nonce.parse(),
                    count.parse(),
                    late_ms.parse(),
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
                        late_ms,
                    }));
            }
            ["E", id, _sent, at, kind, rest @ ..] if rest.len() <= 1 => {
                let Ok(at) = at.parse() else { continue };
                by_id
                    .entry((*id).to_owned())
                    .or_default()
                    .push(Outcome::Failed {
                        at,
                        kind: (*kind).to_owned(),
                        lost: rest == ["ConnectionLost"],
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
    /// request, or one whose connection went down after it was sent, may have added).
    pub(crate) count_breaks: u64,
    /// An activation starting below what an earlier one had acknowledged, without a higher
    /// ObjectGeneration.
    pub(crate) lost: u64,
    /// Answers past the answering node's admission deadline: received in a window in which
    /// the node could not have renewed (`Fenced`), or whose handler started more than
    /// [`LATE_SLACK_MS`] past the deadline by the node's own lease state.
    pub(crate) late: u64,
    /// The largest lateness a handler reported (ms past its node's admission deadline) among
    /// requests sent from the fault on, within the slack or not.
    pub(crate) late_max_ms: u64,
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
/// (driver clock, ms); `fenced` are the windows in which a node must not answer; `fault_at` is
/// when the fault began (a handler's own lateness counts for requests sent from then on).
pub(crate) fn check(
    by_id: &ById,
    done: Option<(u64, u64)>,
    healed: u128,
    fenced: &[Fenced],
    fault_at: u128,
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
                Outcome::Failed { at, kind, lost } => {
                    *v.errors.entry(kind.clone()).or_default() += 1;
                    if !KINDS.contains(&kind.as_str()) {
                        v.undefined += 1;
                    }
                    // Its outcome is unknown: it may have added one on its owner.
                    if kind == "DeadlineExceeded" || *lost {
                        timed_out_since_last = true;
                    }
                    let _ = at;
                }
                Outcome::Answered(a) => {
                    v.ok += 1;
                    if a.at >= healed && recovered.is_none() {
                        recovered = Some(a.at - healed);
                    }
                    // A handler's own lateness counts for requests sent from the fault on: one
                    // admitted before a node was stopped may take its first step after SIGCONT
                    // (admission is at the start, 21 §5), and one sent after the fault reaches
                    // a stopped node's gate only once its deadline has passed.
                    if a.sent >= fault_at {
                        v.late_max_ms = v.late_max_ms.max(a.late_ms);
                    }
                    if (a.late_ms > LATE_SLACK_MS && a.sent >= fault_at)
                        || fenced
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

/// One node's capacity row and the slots the records place on it, read once the fault healed
/// (`store::capacity_rows`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RowCount {
    /// The allocation row's Actor slots (in use + reserved).
    pub(crate) actors: u64,
    /// The allocation row's Spot slots.
    pub(crate) spots: u64,
    /// Actor slots of the Active authority rows placed on the node.
    pub(crate) active_actors: u64,
    /// Actor slots of Reserved rows and relocation reservations targeting it.
    pub(crate) reserved_actors: u64,
    /// Spot slots of the Active authority rows placed on the node.
    pub(crate) active_spots: u64,
    /// Spot slots reserved on it.
    pub(crate) reserved_spots: u64,
}

/// What one node says it has live (`LIVE`), with its capacity row; `live` is `None` for a
/// node that was killed (nothing of it is live).
#[derive(Debug, Clone)]
pub(crate) struct NodeCapacity {
    /// The node's routing id (hex).
    pub(crate) node: String,
    /// Live (Actors, Spots), from the node itself.
    pub(crate) live: Option<(u64, u64)>,
    /// Its row in the Store.
    pub(crate) row: RowCount,
}

/// Whether the capacity rows add up to the live activations, once the fault healed and the
/// load ended (nothing is being created or moved): per node, the allocation row holds exactly
/// the slots of the authority rows placed there (the records are the truth, the row their
/// sum), nothing is still reserved (a reservation left over leaks a slot), and the node has
/// exactly those activations live; over all nodes no more Actors are live than there are ids
/// (one id live twice). Returns one line per break (empty: it holds).
pub(crate) fn capacity_breaks(nodes: &[NodeCapacity], ids: u64) -> Vec<String> {
    let mut breaks = Vec::new();
    let mut live_total = 0;
    for n in nodes {
        let r = &n.row;
        let (actors, spots) = n.live.unwrap_or((0, 0));
        live_total += actors;
        if r.actors != r.active_actors + r.reserved_actors
            || r.spots != r.active_spots + r.reserved_spots
        {
            breaks.push(format!(
                "{}: the row holds {} actors / {} spots, the records {} + {} reserved / {} + {} reserved",
                n.node, r.actors, r.spots, r.active_actors, r.reserved_actors, r.active_spots, r.reserved_spots
            ));
        }
        if r.reserved_actors > 0 || r.reserved_spots > 0 {
            breaks.push(format!(
                "{}: {} actor / {} spot slots still reserved after the heal",
                n.node, r.reserved_actors, r.reserved_spots
            ));
        }
        if r.active_actors != actors || r.active_spots != spots {
            breaks.push(format!(
                "{}: {} actors / {} spots live, the Store places {} / {} there",
                n.node, actors, spots, r.active_actors, r.active_spots
            ));
        }
    }
    if live_total > ids {
        breaks.push(format!(
            "{live_total} actors live over the nodes for {ids} ids"
        ));
    }
    breaks
}

/// What one key left under the prefix is (`store::keys_left`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Left {
    /// A helper key of the provider's layout (`seq`, `index`, `snapshots`, `snapshot-seq`).
    Helper,
    /// A record whose newest member is a tombstone (it carries a Redis TTL and goes).
    Tombstone,
    /// A live record of `family` under logical key `key` (shown escaped); `expires_at_ms` is
    /// its expiry (Store-clock epoch ms), 0 when durable.
    Record {
        family: String,
        key: String,
        expires_at_ms: u64,
    },
    /// A Relocation Store key sharing the prefix (`expires`: it has a Redis TTL).
    Relocation { expires: bool },
    /// A key outside the provider's layout, or a record key whose value is no record.
    Foreign,
}

/// One key left under the prefix: its Redis name (shown escaped) and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeftKey {
    pub(crate) name: String,
    pub(crate) left: Left,
}

/// The record families a clean shutdown of every host keeps, durable (docs/formats.md §12):
/// the generation counters and the descriptor lists' change numbers.
const KEPT: [&str; 4] = [
    "counter",
    "mesh-change",
    "client-server-change",
    "fanout-publisher-change",
];

/// Whether what is left under the prefix after every node shut down (cleanly, or was killed
/// and its lease lapsed) is only what docs/formats.md §12 documents as staying: the
/// provider's helper keys, tombstones, the counters and change numbers, creation terminals
/// (each expiring 5 minutes past its creation's deadline), owner leases that lapsed by `now_ms`
/// (a killed node's: a clean shutdown releases its own), Relocation Store keys with an expiry,
/// and what the scenario itself left (`planted`, Redis names or logical keys: the foreign data
/// it wrote, the descriptor of the node it killed). Returns one line per key outside that
/// (empty: it holds).
pub(crate) fn unexpected_left(keys: &[LeftKey], planted: &[String], now_ms: u128) -> Vec<String> {
    let mut out = Vec::new();
    for k in keys {
        if planted.contains(&k.name) {
            continue;
        }
        let why = match &k.left {
            Left::Helper | Left::Tombstone | Left::Relocation { expires: true } => continue,
            Left::Relocation { expires: false } => {
                "a Relocation Store key without an expiry".to_owned()
            }
            Left::Foreign => "a key outside the provider's layout".to_owned(),
            Left::Record { key, .. } if planted.contains(key) => continue,
            Left::Record { family, .. } if KEPT.contains(&family.as_str()) => continue,
            Left::Record {
                family,
                expires_at_ms,
                ..
            } if family == "creation-terminal" && *expires_at_ms > 0 => continue,
            Left::Record {
                family,
                expires_at_ms,
                ..
            } if family == "owner-lease"
                && *expires_at_ms > 0
                && u128::from(*expires_at_ms) <= now_ms =>
            {
                continue;
            }
            Left::Record {
                family,
                key,
                expires_at_ms,
            } => {
                if *expires_at_ms == 0 {
                    format!("a durable {family} record `{key}`")
                } else {
                    format!("a {family} record `{key}` expiring at {expires_at_ms}")
                }
            }
        };
        out.push(format!("{}: {why}", k.name));
    }
    out
}

/// Whether the `RELOCATE` line of a node reports a defined end of its host Relocate (28 §3):
/// `Relocated` with reason `None` and nothing remaining, or `Blocked` with a reason other
/// than `None`.
pub(crate) fn defined_relocation(line: &str) -> bool {
    let w: Vec<&str> = line.split_whitespace().collect();
    match w.as_slice() {
        ["RELOCATED", "Relocated", "None", moved, "0"] => moved.parse::<u64>().is_ok(),
        ["RELOCATED", "Blocked", reason, moved, remaining] => {
            *reason != "None" && moved.parse::<u64>().is_ok() && remaining.parse::<u64>().is_ok()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(id: &str, t: u128, node: &str, generation: u64, nonce: u64, count: u64) -> String {
        late(id, t, node, generation, nonce, count, 0)
    }

    /// A `P` line whose handler started `late_ms` past its node's admission deadline.
    fn late(
        id: &str,
        t: u128,
        node: &str,
        generation: u64,
        nonce: u64,
        count: u64,
        late_ms: u64,
    ) -> String {
        format!(
            "P {id} {t} {} {node} {generation} {nonce} {count} {late_ms}",
            t + 1
        )
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
        let v = check(&by_id, done, 35, &[], 0);
        assert!(v.holds(1_000), "{v:?}");
        assert_eq!((v.ok, v.recovery_ms.clone()), (3, vec![6]));
    }

    #[test]
    fn a_request_whose_connection_was_lost_after_it_was_sent_may_have_counted() {
        let lines = |lost: &str| {
            vec![
                p("a", 10, "n1", 1, 7, 1),
                format!("E a 20 21 Unavailable{lost}"),
                p("a", 30, "n1", 1, 7, 3),
                "LOAD-DONE 2 1".to_owned(),
            ]
        };
        let (by_id, done) = parse(&lines(" ConnectionLost"));
        let v = check(&by_id, done, 0, &[], 0);
        assert!(v.holds(1_000), "{v:?}");
        assert_eq!(v.errors.get("Unavailable"), Some(&1));
        // Any other Unavailable said nothing was applied: the skip is a break.
        let (by_id, done) = parse(&lines(""));
        assert_eq!(check(&by_id, done, 0, &[], 0).count_breaks, 1);
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
        assert_eq!(check(&by_id, done, 0, &[], 0).doubles, 1);
    }

    #[test]
    fn a_restart_from_empty_without_a_higher_generation_loses_increments() {
        let lines = vec![
            p("a", 10, "n1", 5, 7, 3),
            p("a", 20, "n2", 5, 9, 1),
            "LOAD-DONE 2 0".to_owned(),
        ];
        let (by_id, done) = parse(&lines);
        assert_eq!(check(&by_id, done, 0, &[], 0).lost, 1);
        let lower = vec![p("a", 10, "n1", 5, 7, 3), p("a", 20, "n2", 4, 9, 1)];
        assert_eq!(check(&parse(&lower).0, Some((2, 0)), 0, &[], 0).lost, 1);
    }

    #[test]
    fn a_count_that_skips_without_a_timeout_breaks_and_with_one_holds() {
        let skip = vec![p("a", 10, "n1", 1, 7, 1), p("a", 20, "n1", 1, 7, 3)];
        assert_eq!(
            check(&parse(&skip).0, Some((2, 0)), 0, &[], 0).count_breaks,
            1
        );
        let timed = vec![
            p("a", 10, "n1", 1, 7, 1),
            "E a 15 16 DeadlineExceeded".to_owned(),
            p("a", 20, "n1", 1, 7, 3),
        ];
        assert_eq!(
            check(&parse(&timed).0, Some((2, 1)), 0, &[], 0).count_breaks,
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
        assert_eq!(check(&parse(&lines).0, Some((2, 0)), 0, &fenced, 0).late, 1);
    }

    #[test]
    fn a_handler_started_past_its_nodes_admission_deadline_beyond_the_slack_is_late() {
        let at_slack = vec![late("a", 100, "n1", 1, 7, 1, LATE_SLACK_MS)];
        assert_eq!(check(&parse(&at_slack).0, Some((1, 0)), 0, &[], 0).late, 0);
        let past = vec![late("a", 100, "n1", 1, 7, 1, LATE_SLACK_MS + 1)];
        let v = check(&parse(&past).0, Some((1, 0)), 0, &[], 0);
        assert_eq!((v.late, v.ok, v.unaccounted), (1, 1, 0));
        assert_eq!(v.late_max_ms, LATE_SLACK_MS + 1);
        // Sent before the fault began (admitted before a stop, first step after it): not late.
        let before = check(&parse(&past).0, Some((1, 0)), 0, &[], 101);
        assert_eq!((before.late, before.late_max_ms), (0, 0));
    }

    #[test]
    fn an_id_never_answered_after_the_heal_is_unreachable_and_a_missing_line_unaccounted() {
        let lines = vec![p("a", 10, "n1", 1, 7, 1), "LOAD-DONE 2 0".to_owned()];
        let v = check(&parse(&lines).0, parse(&lines).1, 50, &[], 0);
        assert_eq!((v.unreachable, v.unaccounted), (1, 1));
        assert!(!v.holds(1_000));
        let undefined = vec![p("a", 60, "n1", 1, 7, 1), "E a 70 71 Weird".to_owned()];
        assert_eq!(
            check(&parse(&undefined).0, Some((1, 1)), 0, &[], 0).undefined,
            1
        );
    }

    fn node(node: &str, live: Option<(u64, u64)>, row: RowCount) -> NodeCapacity {
        NodeCapacity {
            node: node.into(),
            live,
            row,
        }
    }

    fn row(actors: u64, active: u64, reserved: u64) -> RowCount {
        RowCount {
            actors,
            active_actors: active,
            reserved_actors: reserved,
            ..RowCount::default()
        }
    }

    #[test]
    fn capacity_rows_that_add_up_to_the_live_activations_hold() {
        let nodes = [
            node("n1", Some((3, 0)), row(3, 3, 0)),
            node("n2", Some((2, 0)), row(2, 2, 0)),
            node("dead", None, RowCount::default()),
        ];
        assert_eq!(capacity_breaks(&nodes, 5), Vec::<String>::new());
    }

    #[test]
    fn a_row_that_disagrees_with_its_records_or_the_live_set_breaks() {
        // The row counts a slot no record holds.
        let leaked = [node("n1", Some((3, 0)), row(4, 3, 0))];
        assert_eq!(capacity_breaks(&leaked, 3).len(), 1);
        // A reservation left after the heal (the row and records agree).
        let reserved = [node("n1", Some((3, 0)), row(4, 3, 1))];
        assert_eq!(capacity_breaks(&reserved, 3).len(), 1);
        // The Store places more here than is live (an activation gone, its record left).
        let gone = [node("n1", Some((2, 0)), row(3, 3, 0))];
        assert_eq!(capacity_breaks(&gone, 3).len(), 1);
        // A killed node the Store still places objects on.
        let dead = [node("dead", None, row(1, 1, 0))];
        assert_eq!(capacity_breaks(&dead, 1).len(), 1);
        // Spots count too.
        let spots = [node(
            "n1",
            Some((0, 1)),
            RowCount {
                spots: 1,
                ..RowCount::default()
            },
        )];
        assert_eq!(capacity_breaks(&spots, 0).len(), 2);
    }

    #[test]
    fn more_actors_live_than_ids_is_one_id_live_twice() {
        let nodes = [
            node("n1", Some((2, 0)), row(2, 2, 0)),
            node("n2", Some((2, 0)), row(2, 2, 0)),
        ];
        let breaks = capacity_breaks(&nodes, 3);
        assert_eq!(
            breaks,
            vec!["4 actors live over the nodes for 3 ids".to_owned()]
        );
    }

    fn left(name: &str, left: Left) -> LeftKey {
        LeftKey {
            name: name.into(),
            left,
        }
    }

    fn rec(family: &str, key: &str, expires_at_ms: u64) -> Left {
        Left::Record {
            family: family.into(),
            key: key.into(),
            expires_at_ms,
        }
    }

    #[test]
    fn what_a_clean_shutdown_leaves_is_only_what_is_documented() {
        let keys = [
            left("p:seq", Left::Helper),
            left("p:index", Left::Helper),
            left("p:a", Left::Tombstone),
            left("p:b", rec("counter", "zlink:v11:object-counter", 0)),
            left("p:c", rec("mesh-change", "mesh-change\\0demo", 0)),
            left(
                "p:d",
                rec("creation-terminal", "creation-terminal\\0…", 500),
            ),
            left("p:e", rec("owner-lease", "owner-lease\\0dead", 900)),
            left("p:f", Left::Relocation { expires: true }),
        ];
        assert_eq!(unexpected_left(&keys, &[], 1_000), Vec::<String>::new());
    }

    #[test]
    fn a_durable_record_a_held_lease_or_a_foreign_key_left_is_unexpected() {
        let keys = [
            left("p:a", rec("authority", "authority\\0actor\\0x", 0)),
            left("p:b", rec("mesh-node", "mesh-node\\0demo\\01", 0)),
            left("p:c", rec("node-capacity", "node-capacity\\0demo\\01", 0)),
            left("p:d", rec("owner-lease", "owner-lease\\0live", 2_000)),
            left("p:e", Left::Foreign),
            left("p:f", Left::Relocation { expires: false }),
            left("p:g", rec("creation-terminal", "creation-terminal\\0…", 0)),
        ];
        let out = unexpected_left(&keys, &[], 1_000);
        assert_eq!(out.len(), keys.len(), "{out:?}");
        // What the scenario planted itself is left alone, by Redis name or logical key.
        let planted = ["p:e".to_owned(), "authority\\0actor\\0x".to_owned()];
        assert_eq!(
            unexpected_left(&keys, &planted, 1_000).len(),
            keys.len() - 2
        );
    }

    #[test]
    fn a_relocate_ends_defined_only_as_relocated_or_blocked_with_a_reason() {
        assert!(defined_relocation("RELOCATED Relocated None 333 0"));
        assert!(defined_relocation(
            "RELOCATED Blocked StoreUnavailable 0 333"
        ));
        assert!(!defined_relocation("RELOCATED Relocated None 330 3"));
        assert!(!defined_relocation("RELOCATED Blocked None 1 2"));
        assert!(!defined_relocation("RELOCATE-ERR Unavailable"));
        assert!(!defined_relocation(
            "RELOCATE-ERR (no expected line within 30s)"
        ));
    }
}
