//! One row of the fault suite's result table.

use super::{Scenario, check};

/// The table's header and separator.
pub(super) const HEADER: &str = "| scenario | ok | errors by kind | lost | doubles | late | count breaks | unreachable | recovery p50 / max | reconnect | relocate | capacity breaks | keys left | live twice / creating | repl gap | shutdown | result |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|";

/// One line of the result table.
pub(super) struct Row {
    pub(super) scenario: Scenario,
    pub(super) verdict: check::Verdict,
    /// The host Relocate's result (`redis-restart-mid-relocate`), else `-`.
    pub(super) relocate: String,
    /// How long after a `redis-server` restart every client was connected again (ms), or how
    /// long a cluster failover took from the master's kill until every node saw the promoted
    /// replica serve the slot (ms), else `-`.
    pub(super) reconnect: String,
    /// Capacity rows that do not add up to the live activations.
    pub(super) capacity: usize,
    /// Keys left after the shutdown that are not documented as staying.
    pub(super) keys_left: usize,
    /// Ids live on two nodes / stuck in Creating once the bound after a failover passed
    /// ([`super::failover`]), else `-`.
    pub(super) twice_creating: String,
    /// The replication bytes the promoted replica never received ([`super::failover`]), else `-`.
    pub(super) gap: String,
    pub(super) shutdown: String,
    pub(super) passed: bool,
    pub(super) note: String,
}

impl Row {
    pub(super) fn failed_to_run(scenario: Scenario, why: String) -> Row {
        Row {
            scenario,
            verdict: check::Verdict::default(),
            relocate: "-".into(),
            reconnect: "-".into(),
            capacity: 0,
            keys_left: 0,
            twice_creating: "-".into(),
            gap: "-".into(),
            shutdown: "-".into(),
            passed: false,
            note: why,
        }
    }

    pub(super) fn line(&self) -> String {
        let v = &self.verdict;
        let errors: Vec<String> = v.errors.iter().map(|(k, n)| format!("{k} {n}")).collect();
        format!(
            "| {} | {} | {} | {} | {} | {} (max {} ms) | {} | {} | {} / {} ms | {} | {} | {} | {} | {} | {} | {} | {}{} |",
            self.scenario.name(),
            v.ok,
            if errors.is_empty() {
                "-".to_owned()
            } else {
                errors.join(", ")
            },
            v.lost,
            v.doubles,
            v.late,
            v.late_max_ms,
            v.count_breaks,
            v.unreachable,
            v.recovery_p50(),
            v.recovery_max(),
            self.reconnect,
            self.relocate,
            self.capacity,
            self.keys_left,
            self.twice_creating,
            self.gap,
            self.shutdown,
            if self.passed { "pass" } else { "FAIL" },
            if self.note.is_empty() {
                String::new()
            } else {
                format!(": {}", self.note)
            }
        )
    }
}
