//! The stages of one unit (spec 21 §8.2, §9.1), why a unit failed, and what it waits for.

/// A stage the machine writes to the Location Store as a conditional record (21 §9.1). The
/// owner change itself is not a stage record: it is the target's NewOwner CAS (21 §8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RecordedStage {
    /// Source owner information and the target list's content checksum.
    Preparing,
    /// Capture completion and the list checksum; no payload location (the payload stays in
    /// source memory).
    Captured,
    /// Target attempt and target owner information, after Restore and the temporary queue.
    Prepared,
    /// The move's progress information is cleared; owner, generation, membership and space
    /// in use are kept.
    Completed,
}

impl RecordedStage {
    /// Every recorded stage, for tests and tables.
    pub const ALL: [RecordedStage; 4] = [
        RecordedStage::Preparing,
        RecordedStage::Captured,
        RecordedStage::Prepared,
        RecordedStage::Completed,
    ];
}

/// Where a unit is. `Preparing` through `Committed` are live; the other three are terminal and
/// never change again (21 §9.1, §9.4, §10).
///
/// A live stage is the last stage the Location Store has confirmed: the unit stays
/// `Preparing` until the `Captured` record is applied, `Captured` until the `Prepared` record
/// is applied, `Prepared` until the owner-change CAS is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Stage {
    /// The source is owner; target capacity is being secured, `Preparing` recorded, state
    /// captured.
    Preparing,
    /// Capture is recorded; the payload is in source memory and the Restore is under way.
    Captured,
    /// The target restored the payload and recorded its attempt; the source is still owner.
    Prepared,
    /// The target's owner change is applied: the recorded target is owner. No rollback.
    Committed,
    /// The move finished (terminal).
    Completed,
    /// The move was cancelled before the relay-ready point; the source stays owner
    /// (terminal).
    Cancelled,
    /// The move failed (terminal).
    Failed(FailureReason),
}

impl Stage {
    /// Whether the unit has ended.
    pub fn is_terminal(self) -> bool {
        matches!(self, Stage::Completed | Stage::Cancelled | Stage::Failed(_))
    }

    /// The stage's position in the forward order `Preparing < Captured < Prepared <
    /// Committed < terminal`; all terminal stages share the last position.
    pub fn rank(self) -> u8 {
        match self {
            Stage::Preparing => 0,
            Stage::Captured => 1,
            Stage::Prepared => 2,
            Stage::Committed => 3,
            Stage::Completed | Stage::Cancelled | Stage::Failed(_) => 4,
        }
    }
}

/// Why the target reported that Restore failed (21 §9.1). Each ends the move before the
/// relay-ready point; the source restores its queue from the payload it kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RestoreFailure {
    /// The assembled payload does not match the declared length or CRC-32C; nothing is
    /// restored from a partial payload and there is no retry.
    ChecksumMismatch,
    /// The target list's content checksum differs from the Location Store's.
    TargetListMismatch,
    /// A Restore with the same binding values declared another length or checksum; the
    /// existing assembly is neither reused nor overwritten.
    BindingConflict,
    /// The target factory or the adapter's Restore failed, or the target refused.
    TargetFailed,
}

/// Why a unit ended in [`Stage::Failed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureReason {
    /// The unit's policy is `DisableRelocation`: rejected before capture, nothing changed
    /// (21 §1.3, 28 §6).
    RelocationDisabled,
    /// The target capacity could not be secured (target expired, no space, other content
    /// under the same reservation id): nothing changed (21 §8.1).
    TargetUnavailable,
    /// A stage record's condition no longer held (required information disappeared right
    /// before `Captured` or `Prepared`): cancelled without an owner change (21 §9.1).
    StageConflict {
        /// The record that conflicted.
        stage: RecordedStage,
    },
    /// The adapter's captured state is larger than 64 MiB (`StateIncompatible`, 28 §5).
    StateTooLarge {
        /// The captured state length.
        len: u64,
        /// The bound, [`MAX_STATE_LEN`](super::MAX_STATE_LEN).
        max: u64,
    },
    /// A single Actor or Instance Spot payload is larger than 256 MiB (28 §5).
    PayloadTooLarge {
        /// The whole payload length.
        len: u64,
        /// The bound, [`MAX_SINGLE_PAYLOAD_LEN`](super::MAX_SINGLE_PAYLOAD_LEN).
        max: u64,
    },
    /// The adapter's Capture failed (`StateIncompatible`, 28 §8).
    CaptureFailed,
    /// The target reported that Restore failed before the relay-ready point.
    RestoreFailed(RestoreFailure),
    /// The deadline passed before the relay-ready point: aborted before the owner change
    /// (28 §5 "Host deadline").
    DeadlineExceeded,
    /// The target's owner-change CAS met another valid owner or generation, or its condition
    /// no longer held: the prepared target is removed, dispatch never opens (21 §9.4, §10).
    OwnerChangeConflict,
    /// Target ownership was not confirmed before the Restore deadline after the relay-ready
    /// point: `location_update_failed` is recorded and the prepared target removed (21 §10).
    LocationUpdateFailed,
    /// The `Completed` record's condition no longer held after the owner change. The owner
    /// stays the target (no rollback, 28 §6); only the completion record is missing.
    CompletionConflict,
}

/// What the unit waits for next: the event the runtime should expect (other events may be
/// valid too, e.g. a cancellation or the cutover-submit report).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Awaiting {
    /// The reply to `SecureTarget`.
    TargetSecured,
    /// The reply to a stage record.
    StageRecord(RecordedStage),
    /// The source's capture result.
    Capture,
    /// The target's Restore result.
    Restore,
    /// The source accepting the target's relay-ready reply.
    RelayReady,
    /// The target receiving cutover, or its 1,000 ms wait after relay-ready elapsing.
    Cutover,
    /// The result of the target's owner-change CAS.
    OwnerCas,
    /// The target opening application dispatch.
    Dispatch,
    /// The source reporting that its cutover submit finished.
    CutoverSubmit,
    /// Every member Actor unit of a `PerActor` Spot settling (shell only).
    Members,
    /// A completion tally with every accepted request stored and no pending delivery.
    CompletionTally,
    /// Nothing: the unit ended.
    Nothing,
}

/// Which process performs an effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Side {
    /// The current owner, sending the unit away.
    Source,
    /// The chosen target process.
    Target,
}
