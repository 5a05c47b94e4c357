//! Object-relocation instruments: the unit interruption histogram
//! (`zlink.relocation.interruption`, spec 28 §5, §11) and the units that ended on their
//! source, named apart from the host-level Relocate results.

use std::time::Duration;

use metrics::Histogram;

use super::names;

/// The interruption histogram handle (one per object host's relocation registry).
pub(crate) fn interruption() -> Histogram {
    super::describe();
    metrics::histogram!(names::RELOCATION_INTERRUPTION)
}

/// Records one unit's interruption on `histogram`.
pub(crate) fn record_interruption(histogram: &Histogram, took: Duration) {
    histogram.record(took.as_secs_f64());
}

/// A unit ended on its source: moved (`error` `None`) or not, with the error kind's name
/// (a closed set). A unit is rare next to messages: the lookup per call is fine.
pub(crate) fn unit_ended(error: Option<&'static str>) {
    let (outcome, error) = match error {
        None => ("moved", "none"),
        Some(kind) => ("failed", kind),
    };
    metrics::counter!(names::RELOCATION_UNITS, "outcome" => outcome, "error" => error).increment(1);
}

/// A relocation dropped a held one-way message (rare: a lookup per call is fine).
pub(crate) fn one_way_dropped() {
    metrics::counter!(
        names::MESSAGES_DROPPED,
        "reason" => super::labels::DropReason::Relocation.as_str()
    )
    .increment(1);
}
