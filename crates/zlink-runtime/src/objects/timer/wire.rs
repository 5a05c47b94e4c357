//! A timer as a move carries it in the Restore command (docs/formats.md, *Timers in the
//! Restore*): runtime-private JSON on the command plane, never written to a Store.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::context::TimerKind;

/// One carried timer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TimerWire {
    /// The application's name.
    pub(crate) name: String,
    /// `"once"` or `"every"`.
    pub(crate) kind: String,
    /// The period in milliseconds (`every` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) period_ms: Option<u64>,
    /// The next due time, in milliseconds after the source took the snapshot (0: overdue).
    pub(crate) due_in_ms: u64,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl TimerWire {
    pub(crate) fn of(name: &str, kind: TimerKind, due_in: Duration) -> Self {
        let (kind, period_ms) = match kind {
            TimerKind::Once => ("once", None),
            TimerKind::Every(p) => ("every", Some(millis(p).max(1))),
        };
        Self {
            name: name.to_owned(),
            kind: kind.to_owned(),
            period_ms,
            due_in_ms: millis(due_in),
        }
    }

    /// The kind, `None` when the wire names one this runtime does not know.
    pub(crate) fn kind(&self) -> Option<TimerKind> {
        match (self.kind.as_str(), self.period_ms) {
            ("once", _) => Some(TimerKind::Once),
            ("every", Some(ms)) if ms > 0 => Some(TimerKind::Every(Duration::from_millis(ms))),
            _ => None,
        }
    }
}
