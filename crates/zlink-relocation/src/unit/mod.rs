//! The relocation unit state machine (spec 21 §8–§10, 28 §5–§6, 06 §17; architecture
//! convention 12).
//!
//! One [`Unit`] per relocation unit owns the move's stages and failure handling. It is pure
//! and synchronous: the runtime feeds it what it observed ([`Event`]) and performs what it
//! returns ([`Effect`], in order, each naming the process that performs it), so the whole
//! move is testable without a network or a store. A refused event is a typed
//! [`TransitionError`] and changes nothing. The design note is
//! `docs/relocation-unit-machine.md`.

mod effect;
mod error;
mod event;
mod ids;
mod kind;
mod machine;
mod plan;
mod stage;
mod target;

pub use effect::{
    Binding, CaptureMode, Effect, NewOwnerCas, RestoreMode, RestoreRequest, StageRecord,
    StoreWrite, TargetListChecksum,
};
pub use error::{TransitionError, TransitionErrorKind};
pub use event::{CompletionTally, Event, EventKind, PayloadSummary, StageOutcome};
pub use ids::{IdError, IdKind, RelocationId, ReservationId, TargetAttemptGeneration};
pub use kind::{
    AggregateRejection, AggregateRejectionKind, MAX_SINGLE_PAYLOAD_LEN, MAX_STATE_LEN, Participant,
    Policy, UnitKind, check_spot_wide,
};
pub use machine::Unit;
pub use plan::MovePlan;
pub use stage::{Awaiting, FailureReason, RecordedStage, RestoreFailure, Side, Stage};
pub use target::{
    TargetAwaiting, TargetEffect, TargetError, TargetErrorKind, TargetEvent, TargetEventKind,
    TargetPlan, TargetStage, TargetUnit,
};
