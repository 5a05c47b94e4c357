//! The target side of a relocation unit as a pure machine (spec 21 §1.3 steps 5–7, §8.2,
//! §9.1, §9.2, §9.4, §10), beside the source's one-history [`Unit`](super::Unit).
//!
//! One [`TargetUnit`] per Restore that arrives on a target process: it owns what that process
//! does with it — the temporary queue, the assembly check, the hidden build, the relay-ready
//! reply, the cutover wait, the owner-change CAS and its retry up to the Restore's absolute
//! deadline, opening dispatch only after a confirmed owner change, and every way the Restore
//! ends here. No I/O and no clock: deadlines, timers and the source going away are
//! [`TargetEvent`]s. The design note is `docs/relocation-unit-machine.md`.

mod machine;
mod types;

pub use machine::TargetUnit;
pub use types::{
    TargetAwaiting, TargetEffect, TargetError, TargetErrorKind, TargetEvent, TargetEventKind,
    TargetPlan, TargetStage,
};
