//! The invariant checker: every reply and every handled message of a run is recorded here,
//! with the virtual time it happened at, and checked.
//!
//! - **One activation at a time**: for an id, the windows between the first and the last
//!   message each activation handled never overlap (two activations answering at once is a
//!   double). One overlap is the Store's doing, not the runtime's, and is counted apart: a
//!   Store rollback (an asynchronous replica's failover losing acknowledged writes) can take
//!   away the record of a live activation, and until its host notices the loss another host
//!   may create the object again (`docs/store-epoch.md`, "What the runtime cannot do"). Such
//!   an overlap is allowed only if it began after a rollback and ended within
//!   [`ROLLBACK_BOUND_MS`] of it; one that lasts longer is a violation like any other.
//! - **Counts only rise**: within one activation, a caller sees the count grow from one reply
//!   to its next; the activation itself counts 1, 2, 3, ... with no repeat or gap.
//! - **Every request ends exactly once**: a request issued by a host run that is still alive
//!   at the end has ended, once, and no step of it (`get_or_create`, the request) took 30 s
//!   past its own deadlines.
//! - **Reachable after the faults heal**: every id that answered once answers the final probe.
//! - **A handled request hears its reply**: a request an activation handled whose caller still
//!   heard no reply by its reply timeout (`DeadlineExceeded`) is a lost reply, unless a
//!   partition or a crashed host was in effect at some time between the handling and the
//!   timeout (then the network may have lost it). A request Message Follow forwarded to a new
//!   owner its caller is not connected to (yet) is answered back through the old owner, which
//!   relays it (issue 36 item 2): the simulation's moves (`faults.rs`) make that happen.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use sha2::{Digest, Sha256};

/// How long after a Store rollback an activation whose record it took away may still answer:
/// one owner-lease TTL of the simulated hosts (`host.rs`). Its host stops admitting by then
/// whatever happens: within one renew interval and one renew timeout if it reaches the Store
/// (the renew conflicts on the rolled-back lease row, or succeeds and the acknowledged-write
/// verification finds the lost record), at its admission deadline if it does not.
pub const ROLLBACK_BOUND_MS: u64 = crate::host::LEASE_TTL_MS;

/// What one request ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Answered by activation `serial` with `count`.
    Answered { serial: u64, count: u64 },
    /// Failed with this error kind.
    Failed(String),
    /// This step of the call had not ended long past every deadline it has (the simulation
    /// stopped waiting): a violation.
    Hung(&'static str),
}

#[derive(Debug)]
struct Issued {
    run: (usize, u64),
    id: String,
    at_ms: u64,
    ended: u32,
    /// When an activation handled it (by activation serial).
    handled: Vec<(u64, u64)>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    host: usize,
    first_ms: u64,
    last_ms: u64,
    last_count: u64,
}

/// The record of one run and the invariants over it.
#[derive(Debug, Default)]
pub(crate) struct Checker {
    trace: Vec<String>,
    violations: Vec<String>,
    windows: BTreeMap<String, BTreeMap<u64, Window>>,
    requests: BTreeMap<u64, Issued>,
    /// The last count a caller (host, run, worker) saw of an activation of an id.
    seen: BTreeMap<(usize, u64, usize, String, u64), u64>,
    /// Host runs that ended (crashed): their open requests ended with them.
    dead_runs: Vec<(usize, u64)>,
    answered: u64,
    failed: BTreeMap<String, u64>,
    /// When the Store was rolled back.
    rollbacks: Vec<u64>,
    /// Overlaps the rollback window explains: (id, longest overlap in ms).
    rollback_doubles: Vec<(String, u64)>,
    /// Spans with a partition or a crashed host in effect: (from, to) in ms.
    disrupted: Vec<(u64, u64)>,
    /// Since when one is in effect now.
    disrupted_since: Option<u64>,
}

impl Checker {
    /// Adds a line to the trace.
    pub(crate) fn note(&mut self, at_ms: u64, line: impl AsRef<str>) {
        self.trace.push(format!("{at_ms:>7} {}", line.as_ref()));
    }

    fn violation(&mut self, at_ms: u64, what: String) {
        self.note(at_ms, format!("VIOLATION {what}"));
        self.violations.push(format!("t={at_ms}ms {what}"));
    }

    /// Activation `serial` of `id` on `host` handled request `req` (0: not a worker's), its
    /// count now `count`.
    pub(crate) fn handled(
        &mut self,
        id: &str,
        serial: u64,
        host: usize,
        count: u64,
        req: u64,
        at_ms: u64,
    ) {
        if let Some(r) = self.requests.get_mut(&req) {
            r.handled.push((serial, at_ms));
        }
        let w = self
            .windows
            .entry(id.to_owned())
            .or_default()
            .entry(serial)
            .or_insert(Window {
                host,
                first_ms: at_ms,
                last_ms: at_ms,
                last_count: 0,
            });
        w.last_ms = at_ms;
        let expected = w.last_count + 1;
        w.last_count = count;
        if count != expected {
            self.violation(
                at_ms,
                format!(
                    "{id} activation {serial} counted {count} after {}",
                    expected - 1
                ),
            );
        }
    }

    /// Request `req` of worker `worker` of host run `run` for `id` was issued.
    pub(crate) fn issued(
        &mut self,
        req: u64,
        run: (usize, u64),
        worker: usize,
        id: &str,
        at_ms: u64,
    ) {
        self.note(
            at_ms,
            format!("h{}#{} w{worker} req{req} {id}", run.0, run.1),
        );
        self.requests.insert(
            req,
            Issued {
                run,
                id: id.to_owned(),
                at_ms,
                ended: 0,
                handled: Vec::new(),
            },
        );
    }

    /// Request `req` ended.
    pub(crate) fn ended(&mut self, req: u64, worker: usize, ending: Ending, at_ms: u64) {
        let Some(issued) = self.requests.get_mut(&req) else {
            self.violation(at_ms, format!("req{req} ended but was never issued"));
            return;
        };
        issued.ended += 1;
        let (run, id, ended) = (issued.run, issued.id.clone(), issued.ended);
        let handled = issued.handled.first().copied();
        if ended > 1 {
            self.violation(at_ms, format!("req{req} ended {ended} times"));
        }
        match ending {
            Ending::Answered { serial, count } => {
                self.answered += 1;
                self.note(
                    at_ms,
                    format!("req{req} {id} = activation {serial} count {count}"),
                );
                let key = (run.0, run.1, worker, id.clone(), serial);
                if let Some(prev) = self.seen.insert(key, count) {
                    if count <= prev {
                        self.violation(
                            at_ms,
                            format!(
                                "req{req} {id} activation {serial}: count {count} after {prev}"
                            ),
                        );
                    }
                }
            }
            Ending::Hung(step) => {
                let at = self.requests.get(&req).map_or(0, |r| r.at_ms);
                self.violation(
                    at_ms,
                    format!("req{req} {id} issued at {at}ms: {step} never ended (hung)"),
                );
            }
            Ending::Failed(kind) => {
                self.note(at_ms, format!("req{req} {id} failed {kind}"));
                if let Some((serial, t)) = handled.filter(|_| kind == "DeadlineExceeded") {
                    if !self.disrupted_between(t, at_ms) {
                        self.violation(
                            at_ms,
                            format!(
                                "req{req} {id}: activation {serial} handled it at {t}ms, but its caller heard no reply (DeadlineExceeded) with no partition or crash in between (a lost reply)"
                            ),
                        );
                    }
                }
                *self.failed.entry(kind).or_default() += 1;
            }
        }
    }

    /// Whether a partition or a crashed host is in effect from `at_ms` on (the driver says so
    /// after each fault action).
    pub(crate) fn network_faults(&mut self, at_ms: u64, on: bool) {
        match (self.disrupted_since, on) {
            (None, true) => self.disrupted_since = Some(at_ms),
            (Some(from), false) => {
                self.disrupted.push((from, at_ms));
                self.disrupted_since = None;
            }
            _ => {}
        }
    }

    /// Whether a partition or a crashed host was in effect at some time in `from..=to`.
    fn disrupted_between(&self, from: u64, to: u64) -> bool {
        self.disrupted_since.is_some_and(|s| s <= to)
            || self.disrupted.iter().any(|(a, b)| *a <= to && from <= *b)
    }

    /// A move for host `to` (the `pick`-th, modulo, of the counters whose latest activation
    /// is live on another host not in `down`): (the host to ask, the id).
    pub(crate) fn move_order(
        &self,
        to: usize,
        pick: u64,
        down: &[usize],
    ) -> Option<(usize, String)> {
        let movable: Vec<(usize, &String)> = self
            .windows
            .iter()
            .filter_map(|(id, w)| {
                let latest = w.values().max_by_key(|w| w.first_ms)?;
                (latest.host != to && !down.contains(&latest.host)).then_some((latest.host, id))
            })
            .collect();
        let n = movable.len() as u64;
        let (host, id) = movable.get(usize::try_from(pick % n.max(1)).ok()?)?;
        Some((*host, (*id).clone()))
    }

    /// The Store was rolled back to an earlier checkpoint.
    pub(crate) fn rolled_back(&mut self, at_ms: u64) {
        self.rollbacks.push(at_ms);
    }

    /// Host run `run` ended (crashed): its open requests end with it.
    pub(crate) fn run_ended(&mut self, run: (usize, u64), at_ms: u64) {
        self.note(at_ms, format!("h{}#{} crashed", run.0, run.1));
        self.dead_runs.push(run);
    }

    /// The ids that answered at least once.
    pub(crate) fn answered_ids(&self) -> Vec<String> {
        self.windows.keys().cloned().collect()
    }

    /// The final checks, at `end_ms`: requests issued before `settled_ms` that never ended
    /// (later ones may still be within their deadlines) and overlapping activations.
    pub(crate) fn finish(&mut self, end_ms: u64, settled_ms: u64) {
        let open: Vec<(u64, String, u64)> = self
            .requests
            .iter()
            .filter(|(_, r)| {
                r.ended == 0 && r.at_ms < settled_ms && !self.dead_runs.contains(&r.run)
            })
            .map(|(req, r)| (*req, r.id.clone(), r.at_ms))
            .collect();
        for (req, id, at) in open {
            self.violation(
                end_ms,
                format!("req{req} {id} issued at {at}ms never ended"),
            );
        }
        let mut doubles = Vec::new();
        let mut explained = Vec::new();
        for (id, windows) in &self.windows {
            let all: Vec<(&u64, &Window)> = windows.iter().collect();
            for (i, (sa, a)) in all.iter().enumerate() {
                for (sb, b) in &all[i + 1..] {
                    if a.first_ms < b.last_ms && b.first_ms < a.last_ms {
                        let overlap = (a.first_ms.max(b.first_ms), a.last_ms.min(b.last_ms));
                        let what = format!(
                            "{id}: activation {sa} on h{} ({}..{}ms) and activation {sb} on h{} ({}..{}ms) answered in overlapping windows",
                            a.host, a.first_ms, a.last_ms, b.host, b.first_ms, b.last_ms
                        );
                        match self.rollback_before(overlap) {
                            Some(at) => explained.push((id.clone(), overlap, at, what)),
                            None => doubles.push(what),
                        }
                    }
                }
            }
        }
        for (id, (from, to), at, what) in explained {
            self.note(
                end_ms,
                format!(
                    "rollback window: {what}, {} ms after the rollback at {at}ms",
                    to - at
                ),
            );
            self.rollback_doubles.push((id, to - from));
        }
        for d in doubles {
            self.violation(end_ms, d);
        }
    }

    /// The rollback that explains an overlap `(from, to)`: one at or before `from` with `to`
    /// within [`ROLLBACK_BOUND_MS`] of it.
    fn rollback_before(&self, (from, to): (u64, u64)) -> Option<u64> {
        self.rollbacks
            .iter()
            .copied()
            .filter(|at| *at <= from && to <= at + ROLLBACK_BOUND_MS)
            .max()
    }

    /// Overlaps a Store rollback explains (see the module doc): (id, overlap in ms).
    pub(crate) fn rollback_doubles(&self) -> &[(String, u64)] {
        &self.rollback_doubles
    }

    /// Records that `id` did not answer the final probe.
    pub(crate) fn unreachable(&mut self, id: &str, why: &str, at_ms: u64) {
        self.violation(
            at_ms,
            format!("{id} unreachable after the faults healed: {why}"),
        );
    }

    /// The violations found.
    pub(crate) fn violations(&self) -> &[String] {
        &self.violations
    }

    /// The whole trace.
    pub(crate) fn trace(&self) -> &[String] {
        &self.trace
    }

    /// A hash of the whole trace (equal for equal runs).
    pub(crate) fn trace_hash(&self) -> String {
        let mut h = Sha256::new();
        for line in &self.trace {
            h.update(line.as_bytes());
            h.update(b"\n");
        }
        let mut out = String::new();
        for b in &h.finalize()[..8] {
            let _ = write!(out, "{b:02x}");
        }
        out
    }

    /// Replies answered and failures by kind.
    pub(crate) fn tally(&self) -> (u64, BTreeMap<String, u64>) {
        (self.answered, self.failed.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::{Checker, Ending};

    #[test]
    fn two_activations_answering_in_overlapping_windows_are_a_violation() {
        let mut c = Checker::default();
        c.handled("c1", 1, 0, 1, 0, 10);
        c.handled("c1", 2, 1, 1, 0, 20);
        c.handled("c1", 1, 0, 2, 0, 30);
        c.finish(40, 40);
        assert_eq!(c.violations().len(), 1, "{:?}", c.violations());
    }

    #[test]
    fn an_overlap_after_a_store_rollback_is_allowed_only_within_the_bound() {
        let mut c = Checker::default();
        c.handled("c1", 1, 0, 1, 0, 10);
        c.rolled_back(50);
        c.handled("c1", 2, 1, 1, 0, 60);
        c.handled("c1", 1, 0, 2, 0, 70);
        c.handled("c1", 2, 1, 2, 0, 80);
        c.finish(100, 100);
        assert!(c.violations().is_empty(), "{:?}", c.violations());
        assert_eq!(c.rollback_doubles(), &[("c1".to_owned(), 10)]);

        let mut late = Checker::default();
        late.handled("c1", 1, 0, 1, 0, 10);
        late.rolled_back(50);
        late.handled("c1", 2, 1, 1, 0, 60);
        late.handled("c1", 1, 0, 2, 0, 50 + super::ROLLBACK_BOUND_MS + 1);
        late.handled("c1", 2, 1, 2, 0, 50 + super::ROLLBACK_BOUND_MS + 2);
        late.finish(20_000, 20_000);
        assert_eq!(
            late.violations().len(),
            1,
            "past the bound: {:?}",
            late.violations()
        );

        let mut before = Checker::default();
        before.handled("c1", 1, 0, 1, 0, 10);
        before.handled("c1", 2, 1, 1, 0, 20);
        before.rolled_back(25);
        before.handled("c1", 1, 0, 2, 0, 30);
        before.finish(100, 100);
        assert_eq!(
            before.violations().len(),
            1,
            "began before it: {:?}",
            before.violations()
        );
    }

    #[test]
    fn activations_one_after_another_are_clean() {
        let mut c = Checker::default();
        c.handled("c1", 1, 0, 1, 0, 10);
        c.handled("c1", 1, 0, 2, 0, 15);
        c.handled("c1", 2, 1, 1, 0, 20);
        c.finish(40, 40);
        assert!(c.violations().is_empty(), "{:?}", c.violations());
    }

    #[test]
    fn a_count_that_does_not_rise_for_a_caller_is_a_violation() {
        let mut c = Checker::default();
        c.issued(1, (0, 0), 0, "c1", 1);
        c.ended(
            1,
            0,
            Ending::Answered {
                serial: 1,
                count: 2,
            },
            2,
        );
        c.issued(2, (0, 0), 0, "c1", 3);
        c.ended(
            2,
            0,
            Ending::Answered {
                serial: 1,
                count: 2,
            },
            4,
        );
        c.finish(5, 5);
        assert_eq!(c.violations().len(), 1, "{:?}", c.violations());
    }

    #[test]
    fn a_request_that_never_ends_is_a_violation_unless_its_host_crashed() {
        let mut c = Checker::default();
        c.issued(1, (0, 0), 0, "c1", 1);
        c.issued(2, (1, 0), 0, "c2", 1);
        c.run_ended((1, 0), 2);
        c.finish(5, 5);
        assert_eq!(c.violations().len(), 1, "{:?}", c.violations());
        assert!(c.violations()[0].contains("req1"));
    }

    #[test]
    fn a_handled_request_that_times_out_is_a_lost_reply_unless_the_network_was_faulted() {
        let timed_out = Ending::Failed("DeadlineExceeded".to_owned());
        let mut c = Checker::default();
        c.issued(1, (0, 0), 0, "c1", 10);
        c.handled("c1", 1, 1, 1, 1, 20);
        c.ended(1, 0, timed_out.clone(), 8_010);
        assert_eq!(c.violations().len(), 1, "{:?}", c.violations());

        // A partition in effect while the reply was on its way: it may have lost it.
        let mut cut = Checker::default();
        cut.issued(1, (0, 0), 0, "c1", 10);
        cut.handled("c1", 1, 1, 1, 1, 20);
        cut.network_faults(500, true);
        cut.network_faults(900, false);
        cut.ended(1, 0, timed_out.clone(), 8_010);
        // One healed before the handling does not excuse it; one not healed yet does.
        cut.issued(2, (0, 0), 0, "c1", 9_000);
        cut.handled("c1", 1, 1, 2, 2, 9_010);
        cut.ended(2, 0, timed_out.clone(), 17_000);
        cut.network_faults(18_000, true);
        cut.issued(3, (0, 0), 0, "c1", 18_100);
        cut.handled("c1", 1, 1, 3, 3, 18_110);
        cut.ended(3, 0, timed_out.clone(), 26_000);
        assert_eq!(cut.violations().len(), 1, "{:?}", cut.violations());
        assert!(cut.violations()[0].contains("req2"));

        // Never handled (lost on its way there), or another failure: not a lost reply.
        let mut other = Checker::default();
        other.issued(1, (0, 0), 0, "c1", 10);
        other.ended(1, 0, timed_out, 8_010);
        other.issued(2, (0, 0), 0, "c1", 10);
        other.handled("c1", 1, 1, 1, 2, 20);
        other.ended(2, 0, Ending::Failed("Unavailable".to_owned()), 30);
        assert!(other.violations().is_empty(), "{:?}", other.violations());
    }

    #[test]
    fn a_move_goes_to_the_host_of_a_counter_live_elsewhere() {
        let mut c = Checker::default();
        c.handled("c1", 1, 0, 1, 0, 10);
        c.handled("c2", 2, 1, 1, 0, 20);
        c.handled("c2", 3, 2, 1, 0, 30);
        // c1 is live on h0, c2's latest activation on h2.
        assert_eq!(c.move_order(1, 0, &[]), Some((0, "c1".to_owned())));
        assert_eq!(c.move_order(1, 1, &[]), Some((2, "c2".to_owned())));
        assert_eq!(c.move_order(2, 7, &[]), Some((0, "c1".to_owned())));
        assert_eq!(c.move_order(1, 1, &[2]), Some((0, "c1".to_owned())));
        assert_eq!(c.move_order(0, 0, &[2]), None);
    }

    #[test]
    fn an_activation_that_skips_a_count_is_a_violation() {
        let mut c = Checker::default();
        c.handled("c1", 1, 0, 1, 0, 10);
        c.handled("c1", 1, 0, 3, 0, 11);
        assert_eq!(c.violations().len(), 1);
    }
}
