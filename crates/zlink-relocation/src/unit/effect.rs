//! What the runtime must do next: the outputs of [`Unit::step`](super::Unit::step).
//!
//! Effects come in the order they must be performed; each names the process that performs it
//! ([`Effect::performer`]). The runtime performs them and feeds what it observes back as
//! [`Event`](super::Event)s. The authority key and the source fence (owner id, lease
//! generation, authority owner generation) never change during a move, so the runtime adds
//! them to every write; the effects carry what does change.

use zlink_store_spi::StoreVersion;

use super::event::PayloadSummary;
use super::ids::{RelocationId, ReservationId, TargetAttemptGeneration};
use super::stage::{FailureReason, RecordedStage, Side};

/// The content checksum of the move's relocation target list (21 §1.2): the inventory's own
/// checksum type. Opaque to the machine: it is recorded with `Preparing` and `Captured` and
/// sent with the Restore request for the target to verify.
pub use crate::inventory::TargetListChecksum;

/// The values binding a Restore request, each chunk and the target's owner CAS to one move
/// and one target attempt (21 §8.1, §9.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Binding {
    /// The move.
    pub relocation: RelocationId,
    /// The target attempt.
    pub attempt: TargetAttemptGeneration,
}

/// How the source captures the unit (06 §17).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CaptureMode {
    /// The framework's unfinished work only (queue, timers): `RecreateOnRelocation`, and the
    /// `PerActor` Spot shell whatever its policy.
    FrameworkWork,
    /// The adapter's application state plus the framework's unfinished work:
    /// `PreserveStateWith`.
    StateAndFrameworkWork,
}

/// What the target does with the payload (06 §17).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RestoreMode {
    /// Run the target factory for the same id; no application state.
    Recreate,
    /// Run the target factory, then the adapter's Restore with the captured bytes.
    Preserve,
    /// Create the stateless `PerActor` Spot shell with the same SpotId and ObjectGeneration,
    /// hidden until the authority change; no adapter call.
    SpotShell,
}

/// The Restore request the source sends directly to the target, followed by the chunks on the
/// same ordered connection (21 §1.3 step 4, §9.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RestoreRequest {
    /// The move and target attempt every chunk carries.
    pub binding: Binding,
    /// What the target runs.
    pub mode: RestoreMode,
    /// Declared total length, chunk count and CRC-32C.
    pub payload: PayloadSummary,
    /// The list checksum the target verifies against the Location Store.
    pub target_list: TargetListChecksum,
}

/// A stage record: a Preserve CAS that carries the move's reservation (checked and advanced in
/// the same request, 21 §6.1) and is conditioned on the version the previous write of this
/// move returned. No relocation-specific reservation is *recorded* in the authority row
/// (21 §8.2); the reservation is a condition of the request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StageRecord {
    /// Source owner information and the target list's content checksum (source writes).
    Preparing {
        /// The list checksum.
        target_list: TargetListChecksum,
        /// The reservation the request carries.
        reservation: ReservationId,
        /// The version the write is conditioned on.
        condition: StoreVersion,
    },
    /// Capture completion and the list checksum; no payload location, no target (source
    /// writes).
    Captured {
        /// The list checksum.
        target_list: TargetListChecksum,
        /// The reservation the request carries.
        reservation: ReservationId,
        /// The version the write is conditioned on.
        condition: StoreVersion,
    },
    /// Target attempt, target owner lease and target node (target writes; the runtime adds
    /// its own lease and node).
    Prepared {
        /// The move and target attempt.
        binding: Binding,
        /// The reservation the request carries.
        reservation: ReservationId,
        /// The version the write is conditioned on.
        condition: StoreVersion,
    },
    /// Clears the move's progress information; owner, generation, membership and space in
    /// use are kept (target writes).
    Completed {
        /// The move.
        relocation: RelocationId,
        /// The version the write is conditioned on.
        condition: StoreVersion,
    },
}

impl StageRecord {
    /// Which stage this record writes.
    pub fn stage(&self) -> RecordedStage {
        match self {
            StageRecord::Preparing { .. } => RecordedStage::Preparing,
            StageRecord::Captured { .. } => RecordedStage::Captured,
            StageRecord::Prepared { .. } => RecordedStage::Prepared,
            StageRecord::Completed { .. } => RecordedStage::Completed,
        }
    }

    /// The version the write is conditioned on.
    pub fn condition(&self) -> &StoreVersion {
        match self {
            StageRecord::Preparing { condition, .. }
            | StageRecord::Captured { condition, .. }
            | StageRecord::Prepared { condition, .. }
            | StageRecord::Completed { condition, .. } => condition,
        }
    }

    /// Who writes it.
    pub fn performer(&self) -> Side {
        match self {
            StageRecord::Preparing { .. } | StageRecord::Captured { .. } => Side::Source,
            StageRecord::Prepared { .. } | StageRecord::Completed { .. } => Side::Target,
        }
    }
}

/// The target's owner-change CAS (NewOwner, 21 §6.1, §8): owner, membership and capacity to
/// the target in one request, conditioned on the version the `Prepared` record returned and
/// using the pre-secured reservation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NewOwnerCas {
    /// The move and target attempt.
    pub binding: Binding,
    /// The pre-secured target capacity.
    pub reservation: ReservationId,
    /// The version the CAS is conditioned on.
    pub condition: StoreVersion,
}

/// A conditional write the machine asked for. Not `#[non_exhaustive]`, like [`Effect`],
/// which carries it: its performers match it exhaustively.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StoreWrite {
    /// A stage record.
    Stage(StageRecord),
    /// The owner-change CAS.
    NewOwner(NewOwnerCas),
}

impl StoreWrite {
    /// Who performs it.
    pub fn performer(&self) -> Side {
        match self {
            StoreWrite::Stage(record) => record.performer(),
            StoreWrite::NewOwner(_) => Side::Target,
        }
    }
}

/// One thing the runtime must do. Deliberately not `#[non_exhaustive]`: every performer
/// matches it exhaustively (no `_` arm, checked by the `xtask` tidy test
/// `relocation_never_matches_an_effect_with_a_wildcard`), so a new effect is a compile error
/// wherever it is not yet performed (issue #39).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Effect {
    /// Reject the move before capture; the object stays where it is, nothing is written
    /// (`DisableRelocation`, 21 §1.3).
    Reject {
        /// Why.
        reason: FailureReason,
    },
    /// Secure target capacity in the Location Store under this reservation id (21 §8.1).
    SecureTarget {
        /// The reservation id, fixed before the request so a retry is idempotent.
        reservation: ReservationId,
    },
    /// Write a stage record.
    RecordStage(StageRecord),
    /// Let running handlers and timer callbacks finish; later messages and unstarted timers
    /// enter the ingress hold; accept no new work (28 §6 step 2).
    SealSource,
    /// Capture the unit after the current turn and keep the payload in memory.
    Capture {
        /// With or without application state.
        mode: CaptureMode,
    },
    /// Send the Restore request and then the chunks to the target.
    SendRestore(RestoreRequest),
    /// Reply relay-ready to the source, and start the 1,000 ms wait for cutover.
    SendRelayReady {
        /// The move and target attempt.
        binding: Binding,
    },
    /// Relay the ingress hold and late old-route arrivals into the target's temporary queue.
    RelayHeldWork,
    /// Send cutover one-way on the same ordered connection; no reply is awaited.
    SendCutover {
        /// The move and target attempt.
        binding: Binding,
    },
    /// Forward old-route arrivals to the target (Message Follow, 21 §7.3).
    StartMessageFollow,
    /// Drop the captured payload kept in source memory.
    DropCapturedPayload,
    /// Run the owner-change CAS.
    RunNewOwnerCas(NewOwnerCas),
    /// The reply to a write was lost: re-read the same key and, only if needed, retry the same
    /// write with the same condition, reservation and binding (21 §10). Repeated until the
    /// write is confirmed or the Restore deadline passes.
    RereadAndRetry(StoreWrite),
    /// Saved work, pre-cutover relay and remaining temporary work enter the real queue in
    /// order; the temporary registration is removed and the regular route installed with
    /// dispatch closed; required lifecycle callbacks run; then dispatch opens (21 §1.3 step 7).
    MergeQueuesAndOpenDispatch,
    /// Send the bound Session's route update (command 44), one-way and resent at a fixed
    /// interval; it never blocks processing.
    SendSessionRouteUpdate,
    /// Start the member Actor units of this `PerActor` Spot (28 §6 step 5).
    StartMemberMoves,
    /// Discard the target's temporary queue without running it (21 §9.4 step 2).
    DiscardTargetQueue,
    /// Return the ingress hold and saved work to the source queue in original order
    /// (21 §9.4 step 2).
    RestoreHeldWorkInOrder,
    /// Send command 44 abort to the bound Session, one-way; do not wait for a reply
    /// (21 §9.4 step 3).
    AbortSessionBinding,
    /// Release the secured target capacity (21 §9.4 step 4). Idempotent: a reservation that
    /// was never applied releases nothing.
    ReleaseTarget {
        /// The reservation.
        reservation: ReservationId,
    },
    /// Discard the target's chunk assembly and hidden instance (21 §9.4 step 4).
    DiscardAssembly,
    /// Forget the move's in-process progress; no Location Store read or write (21 §9.4
    /// step 5).
    DiscardProgress,
    /// Accept new work on the source again. Always last: only after every effect before it
    /// has finished (21 §9.4 step 6).
    ReopenSource,
    /// Record `location_update_failed` in the current location record (21 §10).
    RecordLocationUpdateFailed,
    /// Remove the prepared object, its temporary queue and the move's relocation state on the
    /// target; dispatch never opens, no Session update is sent (21 §9.4, §10).
    RemovePreparedTarget,
}

impl Effect {
    /// Which process performs it.
    pub fn performer(&self) -> Side {
        match self {
            Effect::RecordStage(record) => record.performer(),
            Effect::RereadAndRetry(write) => write.performer(),
            Effect::SendRelayReady { .. }
            | Effect::RunNewOwnerCas(_)
            | Effect::MergeQueuesAndOpenDispatch
            | Effect::SendSessionRouteUpdate
            | Effect::DiscardTargetQueue
            | Effect::DiscardAssembly
            | Effect::RecordLocationUpdateFailed
            | Effect::RemovePreparedTarget => Side::Target,
            Effect::Reject { .. }
            | Effect::SecureTarget { .. }
            | Effect::SealSource
            | Effect::Capture { .. }
            | Effect::SendRestore(_)
            | Effect::RelayHeldWork
            | Effect::SendCutover { .. }
            | Effect::StartMessageFollow
            | Effect::DropCapturedPayload
            | Effect::StartMemberMoves
            | Effect::RestoreHeldWorkInOrder
            | Effect::AbortSessionBinding
            | Effect::ReleaseTarget { .. }
            | Effect::DiscardProgress
            | Effect::ReopenSource => Side::Source,
        }
    }

    /// Whether the effect gives the source its work back (only before the relay-ready point).
    pub fn reopens_source(&self) -> bool {
        matches!(self, Effect::ReopenSource | Effect::RestoreHeldWorkInOrder)
    }
}
