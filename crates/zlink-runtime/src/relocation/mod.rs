//! Live relocation of one Entry Spot member Actor (spec 21 §1.3, §7.3, §8, §9; 06 §11, §17).
//!
//! One Instance Spot moves the same way (28 §5, §6; `instance.rs`,
//! `relocate_instance_spot`): the steps below, keyed by the Spot (`AuthorityKind::Spot`),
//! with the Spot's record, type and capacity bundle, no membership, and no Actor location or
//! Session change. A cross-node Actor JoinSpot / JoinEntrySpot moves the Actor the same way
//! (21 §1.3, §8.2; `join.rs`), its Restore naming the joined Spot and the target's NewOwner
//! writing the new membership in the same CAS.
//!
//! The move follows the normal order of spec 21 §1.3. The source owner drives it through the
//! `zlink-relocation` unit state machine (`zlink_relocation::unit::Unit`, architecture
//! convention 12; `drive/`): it feeds the unit what it observed — its store replies and
//! capture, and the target's replies on the command plane — and performs the effects the unit
//! returns, in order. Effects the unit assigns to the target are asked of it over the command
//! plane or were performed inside a request whose reply reports them:
//!
//! 1. read the record, refuse a `DisableRelocation` type before anything is captured (the
//!    unit's `Reject`), choose an eligible Server target through the node's Discovery
//!    candidates and secure target capacity under the unit's ReservationId (`SecureTarget`);
//! 2. record **Preparing** (`stage.rs`): every stage record is a Preserve of the Actor's record
//!    that carries the reservation (`preserve_carrying`), conditioned on the version the
//!    previous write of this move returned (the first on the version read in step 1); the
//!    record payload keeps its membership and names the stage. A single Entry Spot member has
//!    no relocation target list (a `SpotWide` User Spot's member set; the inventory checksum
//!    refuses a list without its User Spot), so the all-zero checksum is recorded;
//! 3. **seal** the Actor: new messages for it arriving here are held, in arrival order, in a
//!    bounded hold ([`HOLD_MAX_RECORDS`](hold::HOLD_MAX_RECORDS) records, [`HOLD_MAX_BYTES`](hold::HOLD_MAX_BYTES) bytes; past it a request
//!    gets `Unavailable`, a one-way send is dropped and counted — see *Dropped one-way
//!    messages* below). Jobs the mailbox had already
//!    accepted run to completion here first: the capture is a job of its own queued after
//!    them, so their work is part of the captured state — nothing is lost or duplicated, it
//!    simply runs before the move;
//! 4. **capture** (RecreateOnRelocation: no payload; PreserveStateWith: the adapter's bytes,
//!    at most 64 MiB — the unit checks the bound), record **Captured**, then send the Restore
//!    header and its chunks over the command plane, in order on the one peer connection, and
//!    ask the target to prepare. The participants' timers stopped ticking at the seal; after
//!    the capture their names, kinds, periods and next due times go in the Restore command
//!    (docs/formats.md §13), and the target arms them on the hidden instance and starts them
//!    as its dispatch opens (a cancelled move resumes them on the source);
//! 5. the **target** registers a temporary queue when the Restore arrives, assembles
//!    (binding-checked, CRC-32C verified), builds the instance (the factory; then the
//!    adapter's restore for PreserveStateWith) without exposing it, and answers (the unit's
//!    `RestoreAccepted`);
//! 6. the source records **Prepared** (target attempt, target owner and node) and sends
//!    *ready* with the reservation that record carried: the target takes it — so its NewOwner
//!    is conditioned on the Prepared record's version — starts its cutover wait and answers
//!    relay-ready;
//! 7. the source **relays** its held messages that came from other nodes, in hold order, on
//!    the command plane the cutover follows (each keeps its OperationId, payload, original
//!    source and reply route, and enters the temporary queue; a request the target sent
//!    itself completes there; a request from any other node is a **completion result** of
//!    the move, stored, recorded and delivered to its requester as `completion/` describes,
//!    spec 21 §9.3), then sends the **cutover** — and while it waits for the cutover's answer
//!    it relays, every 20 ms, what it held since, so a message another node sent
//!    during a long NewOwner (a Store outage retries it) enters the temporary queue too and
//!    is never overtaken by what that node sends the new owner once it committed (one that
//!    reaches the target after the commit runs on the live object, in order);
//! 8. on the cutover — or, when none came, once `RelocationCutoverWaitTimeout` has passed
//!    after ready — the target runs NewOwner (the CAS conditioned on the reservation and the
//!    Prepared record's version). Committed: the activation joins the live set, the temporary
//!    queue runs in order and dispatch opens, and the cutover reply carries the new record
//!    version (the unit's `CasApplied`). A conflict (`CasConflict`): the prepared instance and
//!    its queue are removed (queued requests get `Unavailable`) and nothing ran on it;
//! 9. the source closes its old activation (the handler state is dropped exactly once) and
//!    **follows** (spec 21 §7.3, the unit's `StartMessageFollow`; `follow.rs`): every message
//!    held since the relay, then every message arriving for the Actor within
//!    `messageFollowDuration`, is forwarded in order to the new owner — one from a node other
//!    than the new owner as received, so the new owner answers its original source; one from
//!    this node or the new owner as a request of this node, which answers it — and its
//!    route-cache entry is dropped. After the window this node answers by the record
//!    (`Unavailable`; a stale-location result the caller's runtime never resends), so callers
//!    drop their entry, re-read and reach the new owner;
//! 10. a failure before relay-ready (a stage record that conflicts, a failed capture or
//!     Restore, no ready) **cancels** as the unit's abort cleanup says: the target is told to
//!     drop the Restore, its prepared instance and queue (*abort*, one-way), the target
//!     capacity is released (`release_target`), so no later NewOwner can succeed, and the
//!     messages still held run here in their original order. A release that is refused (the
//!     row is gone: a NewOwner may have consumed it) is decided by reading the record: it
//!     names the target (the move completes) or it was read and does not (served here); a
//!     release or read that keeps failing **fails closed** at `storeFailureGrace` (see
//!     *Unsettled moves* below). The owner is untouched; the stage records already written
//!     stay (the unit discards its progress without a store write).
//!
//! **Message Follow** (21 §7.3, §12; 28 §7, §13). When the move completed the source keeps a
//! *follow record* — the new owner's node, the AuthorityOwnerGeneration its NewOwner issued
//! (the cutover reply carries it; when the move is completed by reading the record after a
//! refused release, the record read then), this node's own AuthorityOwnerGeneration and the
//! ObjectGeneration that moved — and forwards by it alone: it never re-reads the store. A
//! message from another node is forwarded as received (OperationId, ObjectGeneration — in
//! the chain —, payload, original source and reply route unchanged), so the new owner
//! answers the original source itself when it is connected to it, and otherwise back to the
//! node that forwarded it, which keeps the request's route and relays the reply to its caller
//! (`mesh::node::forward`; each hop of a chain the same). It travels as the internal command
//! `zlink.relocation.follow` (`wire::FOLLOW`; the spec fixes the rules, not a wire, so this is
//! internal to this runtime): the envelope plus its *follow chain* — the incarnation's
//! ObjectGeneration and the path of owners, the previous owner it first reached with that
//! owner's AuthorityOwnerGeneration, then each owner it was forwarded to with the generation
//! the forwarding node's record named. A node receiving it that has itself moved the Actor on
//! checks the next hop ([`follow::next_hop`], pure) in this order: another ObjectGeneration
//! (a previous incarnation) is `InvalidOperation`, not forwarded; a 9th forward is
//! `Unavailable` ([`follow::MAX_FOLLOW_HOPS`] is 8); a forward to itself or back to a node
//! already on the path without a newer AuthorityOwnerGeneration is a cycle, `Unavailable`;
//! any other generation not greater than the last one carried is `InvalidOperation`. A
//! refused request hears that typed error at its original source; a refused one-way is
//! dropped and counted. A node that passed the Actor on twice is no cycle when the generation
//! advanced (moved A→B→A→C). No cap on what one move retains: the forward waits for room on
//! the command lane (28 §13's 1,024/16 MiB follow cap is a point 28 §14 leaves to reconcile;
//! 21 is followed). A caller whose request is answered by another node than the one it sent
//! it to (the new owner answering a followed or relayed request) drops its route-cache entry
//! (`Pending::complete_inbound`), so its next message reads the record and goes to the new
//! owner directly instead of being followed for the whole window — unless it sent a one-way
//! through that entry after the request, which may still be on its way here and would be
//! overtaken (`objects::routes`); a caller that only sends
//! one-way messages gets no reply and is followed until the window ends. Not checked: the
//! incarnation at the final owner (the live set keeps no
//! ObjectGeneration), and a followed message reaching a node that is itself sealed for a move
//! is held and relayed like any message from another node, its chain ending there. A message
//! sent on the source node itself is forwarded as a new request of that node.
//!
//! Deviations, kept small and explicit: the cutover is a request whose answer reports the
//! target's NewOwner outcome (the spec sends it one-way and lets the source follow at once;
//! the unit's `CutoverSent` is fed after that answer). The machine names the target as the
//! writer of `Prepared`; `preserve_carrying` is the owner's write and the source is the owner
//! until NewOwner (spec 21 §8.2), so the source writes it and *ready* hands the target the
//! result. Past relay-ready the unit never reopens the source (21 §9.4 last paragraph; 28
//! §14 item 3: 21 wins), and neither does the runtime: once the relay-ready reply was
//! accepted, a move that fails is *abandoned* after `release_target` fenced the target or a
//! read of the record showed the target does not own it — every participant closes unserved
//! (held requests hear `Unavailable` once each, held one-ways are dropped and counted) and a
//! single Actor's record, still naming this run and incarnation, is deleted by its owner so
//! the next GetOrCreate makes a new incarnation (higher ObjectGeneration). **Consequence**
//! (the spec keeps the captured payload for the handoff only): the Actor's state at the seal
//! is lost, and so is the held work; a `SpotWide` group, a `PerActor` part or a Spot alone
//! keeps its record as read and stays unreachable here until this run ends (no spec-given
//! way to end that incarnation; not built). The move completes if the release conflicts and
//! the record names the target. Before the relay-ready reply was accepted (a *ready* refused
//! or its reply lost included) the source serves again on the same confirmations, its held
//! work restored together with the reopen, after the release (the unit lists
//! `RestoreHeldWorkInOrder` before `ReleaseTarget`). A relay that fails after relay-ready is
//! fed to the unit as a deadline. A stage record whose store reply is lost
//! is settled first by the location engine (an exact re-read of its witness key); when that
//! read fails too, the move settles it itself (spec 21 §10, never guessing): it re-reads the
//! record — applied if it holds exactly the record this move wrote (its stage mark: stage and
//! RelocationId) at a newer version and the reservation row carried it once more; then the
//! unit is fed the applied outcome with the versions read — or, if the record is still at the
//! version the write was conditioned on, retries the same write (same condition and
//! reservation), until `storeFailureGrace` has passed; only then is the unit fed `ReplyLost`
//! and its `RereadAndRetry` becomes a deadline (cancelled). A record changed otherwise is a
//! conflict. The release of a cancelled move is conditioned on the reservation row's version
//! as it reads it then (a store failure is re-read and retried until the same deadline), so
//! a lost reply never leaks the target capacity. An ordinary Preserve that rewrote the record
//! with the very same bytes after a lost stage write cannot be told apart from it by reading
//! and is taken as that write. The `Completed` record is not
//! written (the unit is left at `Committed`: the target is the owner then and
//! `preserve_carrying` needs the reservation NewOwner consumed), so the Prepared stage mark
//! stays in the record payload until its next Preserve. A message sent on the source node
//! itself is not relayed before the cutover: it follows right after it, in its order. The unit
//! gate, the chunk in-flight budgets and the interruption record are in `gate.rs` and
//! `interruption.rs`. A failing adapter is tried again before the move gives up: the capture
//! up to [`CAPTURE_ATTEMPTS`](drive::CAPTURE_ATTEMPTS) times on the sealed activation, the
//! target's restore up to `objects::live::RESTORE_ATTEMPTS` times, each on a new instance from
//! the factory (the failed one discarded, 21 §9.2); every attempt failing is
//! `ZLinkError::StateIncompatible` (a target reports it as its refusal's kind), which the host
//! Relocate reports as `StateIncompatible` (28 §8). Not built: Sessions.
//!
//! **Unsettled moves** (21 §9.4, §10: never guess). A sealed unit serves here again only
//! before the relay-ready reply was accepted and only on a confirmed answer — the target
//! never got *ready* (only then can it run the NewOwner), the release applied, or a read of
//! the record does not name the target (past relay-ready those answers abandon it instead). A release or record
//! read that keeps failing (each tried again after a 20 ms pause) past a target that got
//! *ready* fails closed at `storeFailureGrace`: every participant leaves the live
//! set and its route-cache entry goes, its activation closes without a location change and
//! without a closing callback, its held requests hear `Unavailable` (their callers re-read the
//! record) and its held one-ways are dropped and counted; the move reports the store failure.
//! The record decides what serves next: the target, if its NewOwner applied; if it did not,
//! the object stays unreachable on this node until this run ends — what the spec itself does
//! past relay-ready, where the source never reopens. A `secure_target` / `secure_spot_wide`
//! whose reply is lost and that the engine's witness read could not settle is fed to the unit
//! as a deadline; the abort's release finds the row by the move's ReservationId
//! (`AuthorityClient::reservation_by_id`) and releases it, so the target capacity does not
//! leak (unless the Store stays down past the grace: the owner sweep of this run then returns
//! it).
//!
//! **Dropped one-way messages** (21 §9.2, §9.4; 06 §11). A one-way has no reply, so a move
//! that cannot run one never drops it silently: it increments the node's count
//! (`HostStatus::dropped_one_way`, summed over the host) and logs `warn` with the object and
//! the reason. The drops are: past a full hold; queued on a target whose move did not commit
//! (its NewOwner conflicted or failed, the source aborted, the Restore was never prepared —
//! including one-ways the source relayed after relay-ready); held for a follow that ended
//! before they were handed to it; and refused when held work is handed over (the admission
//! door closed, no handler for the packet, the activation closing). Held work is never
//! refused for a **full mailbox**: the hold at a cancel (21 §9.4, restored to the source queue
//! in its original order) and the temporary queue at the commit (21 §9.2, entered into the
//! real execution queue in order before Ready — so every one-way the cutover accepted runs)
//! enter the activation's mailbox past its bound (`LiveObject::submit_held`). Waiting for room
//! instead would have to happen under the gate lock that keeps later messages from overtaking
//! them; the hold itself is bounded (1,024 records, 16 MiB, the per-object mailbox's own
//! defaults), so the overshoot is at most one hold and returns as the jobs run. A request
//! refused at any of these points is answered with its error and not counted.
//!
//! **`SpotWide` User Spots** (21 §8, §8.2, §9.1; 28 §6) move as one unit — the Spot and
//! every member at the seal, one reservation, one aggregate Restore, one NewOwner CAS on the
//! Spot's record — in `aggregate/` (its module doc has the steps and the deviations).
//! **`PerActor` User Spots** (21 §8.2; 28 §5, §6) move as a Spot authority transition (the
//! steps above keyed by the Spot, no state, an empty shell on the target, a NewOwner that also
//! writes the move record) and then one such Actor unit per member — in `per_actor.rs`.

mod aggregate;
mod completion;
mod drive;
mod follow;
pub(crate) mod gate;
mod hold;
mod instance;
mod interruption;
mod join;
mod owner_change;
mod participants;
pub(crate) mod per_actor;
pub(crate) mod probe;
#[cfg(test)]
pub(crate) use probe::{ArrivalHook, StageHook, TargetHook};
mod send;
mod source;
mod stage;
mod target;
mod wire;

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use zlink_store_spi::entropy::HashMap;

use crate::objects::host::ObjectKey;

#[cfg(test)]
pub(crate) use follow::{FollowChain as Chain, Hop};
#[cfg(test)]
pub(crate) use wire::{FOLLOW, encode_follow};

pub(crate) use aggregate::relocate_spot_wide;
#[cfg(test)]
pub(crate) use completion::{AcceptHook, Confirmation, LostHook, redeliver};
#[cfg(test)]
pub(crate) use drive::CAPTURE_ATTEMPTS;
#[cfg_attr(not(test), allow(unused_imports))]
pub(crate) use instance::relocate_instance_spot;
pub(crate) use instance::relocate_instance_spot_within;
pub(crate) use join::relocate_actor_joining;
#[cfg_attr(not(test), allow(unused_imports))]
pub(crate) use source::{relocate_actor, relocate_actor_within};
#[cfg(test)]
pub(crate) use stage::mark_of as relocation_mark;
#[cfg(test)]
pub(crate) use stage::recorded as recorded_stage;
#[cfg(test)]
pub(crate) use stage::with_mark as with_relocation_mark;
pub(crate) use wire::JoinPart;
/// The relocation commands every Object Server node registers.
pub(crate) fn commands() -> Vec<(&'static str, target::Command)> {
    let mut all = target::commands();
    all.push((wire::FOLLOW, |h, n, e| Box::pin(follow::followed(h, n, e))));
    all.push((completion::COMPLETION, |_, n, e| {
        Box::pin(completion::delivered(n, e))
    }));
    all
}
pub use completion::CompletionCounts;
pub(crate) use hold::Held;

/// The relocation step `what` failed on the typed error it is given (`InternalFailure`, the
/// error kept as the source).
pub(crate) fn failed<E: std::error::Error + Send + Sync + 'static>(
    what: &'static str,
) -> impl FnOnce(E) -> crate::messaging::ZLinkError {
    move |e| {
        crate::messaging::ZLinkError::Internal(crate::messaging::InternalError::Relocation {
            what,
            source: crate::messaging::SharedError::new(e),
        })
    }
}

/// A relocation invariant that did not hold (`InternalFailure`).
pub(crate) fn invariant(what: &'static str) -> crate::messaging::ZLinkError {
    crate::messaging::ZLinkError::Internal(crate::messaging::InternalError::Invariant { what })
}

/// A task of the relocation that ended abnormally (`InternalFailure`).
pub(crate) fn task_failed(
    what: &'static str,
) -> impl FnOnce(tokio::task::JoinError) -> crate::messaging::ZLinkError {
    move |e| {
        crate::messaging::ZLinkError::Internal(crate::messaging::InternalError::Task {
            what,
            source: std::sync::Arc::new(e).into(),
        })
    }
}
pub use interruption::InterruptionSummary;
pub(crate) use interruption::Interruptions;

/// The relocations of one object node: which objects are held, queued or followed.
#[derive(Default)]
pub(crate) struct Relocations {
    gates: Mutex<HashMap<ObjectKey, hold::Gate>>,
    /// Target side: Restores in progress and prepared units (of every shape), by
    /// RelocationId.
    incoming: Mutex<HashMap<u128, target::Incoming>>,
    /// One-way messages dropped: past a hold's bound, refused at a resubmit, or in a
    /// temporary queue of a move that did not commit (`HostStatus::dropped_one_way`).
    dropped: AtomicU64,
    /// Followed messages not forwarded (hop bound, cycle, generation; spec 21 §7.3).
    follow_refused: AtomicU64,
    /// Target side: owner changes not confirmed before the Restore operation's deadline
    /// (spec 21 §10 `location_update_failed`; `HostStatus::location_update_failed`).
    location_update_failed: AtomicU64,
    /// The unit gate and chunk budgets (28 §5, 06 §3), made from the root's options on first
    /// use.
    gate: std::sync::OnceLock<gate::UnitGate>,
    /// The interruption of each unit this node moved out (28 §5).
    pub(crate) interruptions: interruption::Interruptions,
    /// Target side: units admitted (permits held) whose Restore has not arrived yet.
    admitted: Mutex<HashMap<u128, gate::TargetPermits>>,
    /// Target side: the completion logs of requests relayed to moves committed here (21 §9.3).
    pub(crate) completions: completion::Completions,
    /// Target side: the member records of committed `SpotWide` moves still following their
    /// Spot's owner (shutdown waits for them before its sweep).
    pub(crate) following: target::Following,
    /// The fail points and observation points tests and the simulation install (disarmed:
    /// one relaxed load per point).
    pub(crate) probe: probe::Probe,
}

impl std::fmt::Debug for Relocations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relocations")
            .field("gates", &self.gates.lock().len())
            .field("dropped", &self.dropped.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// The relocations of an object host: the [`Interception`](crate::objects::interception::Interception)
/// the host layer installs on every object host is always a [`Relocations`].
pub(crate) trait MovesOf {
    /// This host's relocations.
    fn relocations(&self) -> &Relocations;
}

impl MovesOf for crate::objects::host::ObjectHost {
    fn relocations(&self) -> &Relocations {
        self.interception
            .as_any()
            .downcast_ref::<Relocations>()
            .expect("the host layer installs Relocations as every object host's interception")
    }
}

impl Relocations {
    /// One-way messages the relocations on this node dropped (`HostStatus::dropped_one_way`).
    pub(crate) fn dropped_one_way(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Records one `location_update_failed` (spec 21 §10): a prepared unit whose owner change
    /// was not confirmed before the Restore operation's deadline.
    pub(crate) fn location_update_failed(&self) {
        self.location_update_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// The `location_update_failed` errors recorded on this node
    /// (`HostStatus::location_update_failed`).
    pub(crate) fn location_updates_failed(&self) -> u64 {
        self.location_update_failed.load(Ordering::Relaxed)
    }

    /// The interruptions of the units this node moved out so far: one per completed move,
    /// from the source admission seal to the target's processing-start signal (28 §5).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn interruptions(&self) -> InterruptionSummary {
        self.interruptions.summary()
    }

    /// The unit gate, made from `options` (the root's, validated at startup) on first use.
    pub(crate) fn gate(
        &self,
        options: &crate::objects::RelocationOptions,
    ) -> Result<&gate::UnitGate, gate::GateError> {
        if let Some(g) = self.gate.get() {
            return Ok(g);
        }
        let made = gate::UnitGate::new(options)?;
        Ok(self.gate.get_or_init(|| made))
    }
}
