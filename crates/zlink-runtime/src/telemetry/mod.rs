//! The runtime's metrics (issue 23; spec 28 §11, 06 §24), through the `metrics` facade: the
//! library records, the application (or a binary: the `mesh_node` example, `cargo xtask
//! demo --metrics`) installs a recorder. With none installed every handle is a no-op.
//!
//! - **Names and labels.** Every instrument name is a constant in [`names`]; every label
//!   value comes from a closed enum in [`labels`] (or a closed wire set such as a host
//!   state or an error kind's name). No label ever carries a version, an Actor or Spot id, a
//!   RID, an endpoint, a session or a relocation id (28 §11).
//! - **Handles resolved once.** `metrics::counter!(name, labels)` looks the series up in the
//!   recorder on each call. The per-message instruments are therefore resolved when a
//!   MeshNode, an object host or a host is built ([`NodeMetrics`], [`ObjectMetrics`],
//!   [`MeteredStore`], [`HostStateMetrics`], [`HostSamples`]) and the hot path only
//!   increments a held handle. Only rare events (a host Relocate or shutdown result, a
//!   relocation unit's end) look their series up when they happen. A recorder installed
//!   after a host was built is therefore not seen by that host's per-message instruments.
//! - **Sampled.** Mailbox depth, live activations, lease renewals and timer ticks are read by the
//!   host's sampler (`host/sampler.rs`) once per period and published as deltas, so no
//!   message pays for them and several hosts in one process add up.
//! - **Never blocking.** A recorder call returns nothing the runtime waits on or checks:
//!   telemetry cannot fail a call or hold work back (28 §11).
//!
//! This module is the lowest layer (`docs/architecture.md`): it names no other runtime
//! module, so every layer can record.

mod host;
pub(crate) mod labels;
pub(crate) mod names;
mod node;
mod objects;
pub(crate) mod relocation;
mod store;

#[cfg(test)]
mod tests;

pub(crate) use host::{HostSamples, HostStateMetrics, Sample, host_relocation, host_shutdown};
pub(crate) use node::NodeMetrics;
pub(crate) use objects::ObjectMetrics;
pub(crate) use store::MeteredStore;

use metrics::Unit;

/// Describes every instrument (type, unit, text) to the recorder installed now; a recorder
/// without descriptions ignores it.
pub(crate) fn describe() {
    use names::*;
    metrics::describe_gauge!(
        HOST_STATE,
        "Hosts of this process in each host state (28 §3)."
    );
    metrics::describe_counter!(HOST_RELOCATION, "Host Relocate terminal results.");
    metrics::describe_counter!(HOST_SHUTDOWN, "Host shutdown terminal results.");
    metrics::describe_histogram!(
        RELOCATION_INTERRUPTION,
        Unit::Seconds,
        "Per unit: source seal to the target's processing-start signal."
    );
    metrics::describe_counter!(RELOCATION_UNITS, "Relocation units ended on their source.");
    metrics::describe_counter!(MESSAGES_SENT, "Application messages sent.");
    metrics::describe_counter!(
        MESSAGES_RECEIVED,
        "Application messages received from peers."
    );
    metrics::describe_counter!(MESSAGES_DROPPED, "Inbound application messages dropped.");
    metrics::describe_histogram!(
        REQUEST_DURATION,
        Unit::Seconds,
        "Request send to its terminal, as the caller saw it."
    );
    metrics::describe_gauge!(MAILBOX_JOBS, "Jobs in the MeshNode application mailboxes.");
    metrics::describe_gauge!(
        OBJECT_MAILBOX_JOBS,
        "Jobs queued or running in the live activations' mailboxes."
    );
    metrics::describe_gauge!(
        JOB_QUEUE_JOBS,
        "Permits of the host-wide Application Job Queue in use."
    );
    metrics::describe_gauge!(
        MAILBOX_BYTES,
        Unit::Bytes,
        "Bytes in the MeshNode application mailboxes."
    );
    metrics::describe_counter!(OBJECT_ROUTES, "How object calls found their owner.");
    metrics::describe_counter!(OBJECT_CREATIONS, "Object creation calls by their end.");
    metrics::describe_gauge!(OBJECTS_LIVE, "Live activations on this process's nodes.");
    metrics::describe_counter!(TIMER_TICKS, "Object timer ticks by their end.");
    metrics::describe_histogram!(STORE_DURATION, Unit::Seconds, "Location Store calls.");
    metrics::describe_counter!(STORE_FAILURES, "Location Store calls that failed.");
    metrics::describe_counter!(LEASE_RENEWALS, "Owner-lease renew attempts by their end.");
}
