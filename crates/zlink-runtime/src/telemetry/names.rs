//! Every instrument the runtime records, by name (dots; a Prometheus exporter shows them with
//! underscores). `docs/metrics.md` lists each with its type, unit and labels; the xtask tidy
//! test `every_instrument_is_documented` reads this file and fails on a name the document
//! does not carry.

/// Gauge: how many hosts of this process are in each host state (label `state`).
pub(crate) const HOST_STATE: &str = "zlink.host.state";
/// Counter: host Relocate terminal results (labels `mode`, `outcome`, `reason`).
pub(crate) const HOST_RELOCATION: &str = "zlink.host.relocation";
/// Counter: host shutdown terminal results (labels `outcome`, `reason`).
pub(crate) const HOST_SHUTDOWN: &str = "zlink.host.shutdown";
/// Histogram (seconds): one unit's interruption, from its seal on the source to the target's
/// processing-start signal (spec 28 §5, §12 item 7).
pub(crate) const RELOCATION_INTERRUPTION: &str = "zlink.relocation.interruption";
/// Counter: object relocation units (one object, a `PerActor` step or a `SpotWide`
/// aggregate) that ended on their source (labels `outcome`, `error`).
pub(crate) const RELOCATION_UNITS: &str = "zlink.relocation.units";
/// Counter: application messages this process sent (labels `kind`, `path`).
pub(crate) const MESSAGES_SENT: &str = "zlink.messages.sent";
/// Counter: application messages that arrived from peers (label `kind`).
pub(crate) const MESSAGES_RECEIVED: &str = "zlink.messages.received";
/// Counter: inbound application messages not run, or one-ways whose handler failed (label
/// `reason`).
pub(crate) const MESSAGES_DROPPED: &str = "zlink.messages.dropped";
/// Histogram (seconds): a request's time from send to its one terminal, as its caller saw
/// it (label `outcome`).
pub(crate) const REQUEST_DURATION: &str = "zlink.request.duration";
/// Gauge: jobs held by the MeshNodes' application mailboxes (pending and running).
pub(crate) const MAILBOX_JOBS: &str = "zlink.mailbox.jobs";
/// Gauge: permits of the host-wide Application Job Queue in use (06 §3).
pub(crate) const JOB_QUEUE_JOBS: &str = "zlink.job_queue.jobs";
/// Gauge: jobs queued or running in the live activations' mailboxes (summed, no per-object
/// label).
pub(crate) const OBJECT_MAILBOX_JOBS: &str = "zlink.objects.mailbox.jobs";
/// Gauge (bytes): the byte axis of the same mailboxes.
pub(crate) const MAILBOX_BYTES: &str = "zlink.mailbox.bytes";
/// Counter: how object calls found their owner (label `source`).
pub(crate) const OBJECT_ROUTES: &str = "zlink.objects.route";
/// Counter: `get_or_create` / create calls by their end (labels `kind`, `outcome`).
pub(crate) const OBJECT_CREATIONS: &str = "zlink.objects.creations";
/// Gauge: activations live on this process's nodes (label `kind`).
pub(crate) const OBJECTS_LIVE: &str = "zlink.objects.live";
/// Counter: object timer ticks by their end (label `outcome`: ran, refused, skipped).
pub(crate) const TIMER_TICKS: &str = "zlink.objects.timer.ticks";
/// Histogram (seconds): Location Store calls (labels `op`, `outcome`).
pub(crate) const STORE_DURATION: &str = "zlink.store.duration";
/// Counter: Location Store calls that failed (label `op`).
pub(crate) const STORE_FAILURES: &str = "zlink.store.failures";
/// Counter: owner-lease renew attempts by their end (label `outcome`).
pub(crate) const LEASE_RENEWALS: &str = "zlink.lease.renewals";
