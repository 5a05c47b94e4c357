//! Host Relocate (spec 06 §2, 21 §8–§9, 28 §2–§8): moves every stateful object of this host
//! to other nodes, keeping the host, its descriptors, listeners and connections up.
//!
//! [`ZLinkHost::relocate`](super::ZLinkHost::relocate) checks the options (an invalid
//! mode/version/deadline is a [`RelocateError`] before anything changes), then joins the
//! running operation when the mode and effective version are the same (its deadline wins),
//! answers `Blocked/OperationInProgress` at once when they differ, returns the first
//! `Relocated` result again once the host is `Relocated`, and `Blocked/RuntimeNotReady`
//! (`ShutdownRequested` while a shutdown drains: spec 28 §2) outside `Serving`. The operation
//! itself runs in its own task, so a caller that stops waiting ends only its wait.
//!
//! The operation (`run.rs`; its units in `units.rs`, target selection in `targets.rs`, the
//! moves in `moves.rs`), in the order of spec 28 §4:
//! 1. **preflight** from `Serving`, nothing changed yet: a manual topology component
//!    (a manual MeshNode or a manual peer intent) → `ManualTopologyUnsupported`; each live
//!    object becomes a unit after its record is read: an Entry Spot member Actor, an Instance
//!    Spot, a `SpotWide` User Spot together with every member under its turn (one
//!    aggregate unit; its members are no units of their own), or a `PerActor` User Spot (its
//!    Spot authority transition, then one Actor unit per member live here, spec 28 §5; the
//!    members are not listed again), whose types are `RecreateOnRelocation` or
//!    `PreserveStateWith`. A `DisableRelocation` type (the Spot's or any member's) →
//!    `RelocationDisabled`. A `PerActor` member whose Spot is not live here →
//!    `StateIncompatible` (logged with the object). A failed read → `StoreUnavailable`. No
//!    unit at all → `Relocated` without a target search;
//! 2. **targets**, per object node and stable type, filtered in the spec's order: exactly the
//!    effective version (`PlannedMaintenance`: this host's; `RollingUpdate`: the requested
//!    one); another Object Server of the MeshName, `Serving`, lease valid; the type
//!    registered (its kind and type offered; for a `PerActor` User Spot also every member's
//!    Actor type, since its members move to the Spot's target); a positive weight and room
//!    for one object of the kind; another maintenance wave when this host has one; an
//!    admitted Ready peer whose lifecycle generation is the descriptor's.
//!    Missing targets are waited for (the descriptor list re-read every 100 ms) until the
//!    deadline → `TargetUnavailable`, the host still `Serving`;
//! 3. **`Relocating`**: the state, zero Channel weights told to the peers, and `relocating`
//!    descriptors (out of new placement and selection). A descriptor write that is not
//!    confirmed (28 §8) → every descriptor attempted so far is written back to `Serving`:
//!    all confirmed → back to `Serving`, `StoreUnavailable`; one not confirmed → no new work
//!    (`Draining`), cleanup bounded by a fixed 10 s, and the host's termination result
//!    `ForceStopped/TeardownFailed` (host state `Stopped`). The Relocate result stays
//!    `Blocked/StoreUnavailable` then: 28 §3 allows a Relocate result only `Relocated/None`
//!    or `Blocked/<reason>`, so the `ForceStopped` 28 §14 item 5 names for this case is
//!    reported where [`RelocationOutcome`](super::RelocationOutcome) cannot carry it — as the
//!    host's [`ShutdownReport`](super::ShutdownReport) (`HostStatus::shutdown`, the
//!    `Termination` event), which a later `shutdown` returns again. While `Relocating`, objects keep running their
//!    messages until each one's seal; creations, joins and Instance Spot claims here are
//!    refused (`Unavailable`, spec 28 §10), and from `Relocating` on this host places no new
//!    object on itself, even while its own discovery list still shows it `serving`;
//! 4. **units** move through the live relocation of one Actor, one Instance Spot, one
//!    `SpotWide` aggregate or one `PerActor` User Spot (`crate::relocation`), at most
//!    `MaxActiveOutboundRelocations` at once, each to the eligible target with the fewest
//!    units per weight so far among those with room left for the unit's bundle (one Actor,
//!    one Instance Spot, or a User Spot plus one Actor slot per member live here), counting
//!    what this Relocate's earlier units took (28 §4 filter step 4): a target without room
//!    left is never chosen. A unit no target has room for is not started; once every other
//!    unit ended, the targets and their capacity rows are re-read every 100 ms until one has
//!    room (it then moves) or the deadline passes (28 §4 "No target yet"), the host staying
//!    `Relocating`. A `PerActor` User Spot's members move to the node its authority moved to
//!    (concurrently, as units of their own under the unit gate), and count as moved units
//!    each. After the deadline no unit starts; a started one ends safely
//!    (it cancels before the owner change or completes after it). A `SpotWide` Spot with
//!    `ApplicationSignaled` readiness seals only at a boundary a handler signals (28 §5,
//!    `objects::lifecycle`), waiting for it at most until the deadline: a Spot that never
//!    signals is cancelled before anything moved and the host ends `DeadlineExceeded`. The
//!    source User and Instance Spots get `OnClosing(RelocationOut)` after the location change.
//!    Objects that became live before the seal are moved in a further round. So are, up to
//!    three times, the objects still live here after a round in which a unit failed with
//!    `Unavailable` or `InternalFailure` (a Store outage, an owner change the target could
//!    not make; spec 21 §10: the unit cancelled before its owner change and the object serves
//!    here again): the next round starts once the Store answers and every object node admits
//!    again, never past the deadline. A unit whose object left this host and whose record
//!    names another owner counts as moved even when it reported an error (one that came after
//!    its owner change, a failed re-read of the record);
//! 5. **terminal**: nothing left → `Relocated` (state and descriptors); otherwise `Blocked`
//!    with `TargetUnavailable` (units no target had room for by the deadline, every other
//!    unit done, 28 §4 and §8; or the Store refused a target's capacity, `CapacityExceeded`),
//!    `DeadlineExceeded` (the deadline passed with units not started or not done),
//!    `StoreUnavailable` (nothing moved and the Location Store does not answer),
//!    `StateIncompatible` (the adapter's capture failed on each of its 3 attempts, the
//!    target's restore failed on each of its 3 attempts — every one on a new instance from
//!    the factory — or the state is over 64 MiB; the unit did not move) or
//!    `RelocationFailed`, and the host serves again (`Serving`, its weights and descriptors),
//!    its moved objects staying on their targets (spec 28 §3). A shutdown that sealed
//!    admission meanwhile → `ShutdownRequested`, the host left to the shutdown.
//!
//! Each terminal result is stored ([`HostStatus`](super::HostStatus)`::last_relocation`) and
//! announced once to the observers ([`HostEvent::Relocation`](super::HostEvent)). Where
//! spec 21 §9.3 names `ForceStopped` for a Relocate whose deadline passes, this runtime
//! reports `Blocked/DeadlineExceeded` (28 §14 item 5); completion results of requests the
//! target finishes for a moved object are kept in the Relocation Store for their retention
//! (24 h) while they are delivered (`relocation::completion`), whatever the host result.

mod join;
mod moves;
mod object;
mod run;
mod slot;
mod targets;
mod types;
mod units;

pub(crate) use join::install as install_join_moves;
pub(crate) use object::relocate_object;
pub use object::{ObjectRelocation, ObjectTarget, ObjectToMove};
pub(crate) use slot::{SlotCell, relocate};
pub use types::{
    DEFAULT_RELOCATE_DEADLINE, RelocateError, RelocateErrorKind, RelocateOptions, RelocationMode,
    RelocationOutcome, RelocationReason, RelocationResult,
};
