//! The participants of one relocation unit (28 §5 table) and what differs between the unit
//! shapes the one move performer (`drive/`) drives: a single object — an Entry Spot member
//! Actor, an Instance Spot, a `PerActor` Spot authority transition or one of its members — or a
//! `SpotWide` aggregate (the Spot and every member at the seal). Every effect the performer
//! applies to "the unit" it applies to each participant; only the gate claim, the target
//! reservation, the Restore header, the capture payload and the command names differ.

use std::sync::Arc;

use bytes::Bytes;
use tokio::time::Instant;
use zlink_codec::RoutingId;
use zlink_relocation::unit::PayloadSummary;

use super::aggregate::{self, Payload};
use super::gate::{self, UnitGate};
use super::wire::{self, PerActorPart, Rebuild};
use crate::messaging::ZLinkError;
use crate::objects::host::ObjectKey;
use crate::objects::live::LiveObject;
use zlink_location::{AuthorityHandle, TargetNode};
use zlink_relocation::transfer::PayloadClaim;

/// One participant on the source: the object itself, or the Spot or a member Actor of a
/// `SpotWide` aggregate.
pub(super) struct Part {
    pub(super) key: ObjectKey,
    pub(super) live: Arc<dyn LiveObject>,
    pub(super) stable_type: zlink_codec::StableType,
    /// The ObjectGeneration that moves.
    pub(super) generation: u64,
    /// Whether its type preserves state (`PreserveStateWith`).
    pub(super) preserve: bool,
}

/// The shape of a unit: what the performer does differently for it.
pub(super) enum Shape {
    /// One object.
    Single {
        rebuild: Rebuild,
        /// The target the caller named, if any.
        wanted: Option<RoutingId>,
        /// The `PerActor` User Spot move this unit belongs to (its NewOwner writes the move
        /// record).
        per_actor: Option<PerActorPart>,
        /// The cross-node join this move is (its NewOwner writes the new membership).
        join: Option<wire::JoinPart>,
        /// A `PerActor` Spot authority transition: no state is captured (no adapter call),
        /// and after the cutover the source activation leaves the live set without being
        /// closed (the whole move closes it after its last member).
        shell: bool,
    },
    /// A `SpotWide` aggregate: the Spot first, then every member by id.
    SpotWide(Box<SpotWide>),
}

/// What a `SpotWide` aggregate carries beside its participants.
pub(super) struct SpotWide {
    /// The target chosen at the preflight (it offers every participant's type).
    pub(super) chosen: TargetNode,
    /// The encoded relocation target inventory root and its pages.
    pub(super) root: Vec<u8>,
    pub(super) pages: Vec<Bytes>,
    /// Until when the seal of an `ApplicationSignaled` Spot waits for its boundary (28 §5).
    pub(super) until: Instant,
    /// Whether this move consumed a boundary the application signalled (a cancel before the
    /// commit then runs `Continued` on the source after the queues reopened).
    pub(super) consumed: bool,
}

/// The command-plane names one unit shape is moved with.
pub(super) struct Commands {
    pub(super) admit: &'static str,
    pub(super) restore: &'static str,
    pub(super) chunk: &'static str,
    pub(super) prepare: &'static str,
    pub(super) ready: &'static str,
    pub(super) cutover: &'static str,
    pub(super) abort: &'static str,
}

const SINGLE: Commands = Commands {
    admit: gate::ADMIT,
    restore: wire::RESTORE,
    chunk: wire::CHUNK,
    prepare: wire::PREPARE,
    ready: wire::READY,
    cutover: wire::CUTOVER,
    abort: wire::ABORT,
};

const SPOT_WIDE: Commands = Commands {
    admit: aggregate::ADMIT,
    restore: aggregate::RESTORE,
    chunk: aggregate::CHUNK,
    prepare: aggregate::PREPARE,
    ready: aggregate::READY,
    cutover: aggregate::CUTOVER,
    abort: aggregate::ABORT,
};

impl Shape {
    pub(super) fn commands(&self) -> &'static Commands {
        match self {
            Self::Single { .. } => &SINGLE,
            Self::SpotWide(_) => &SPOT_WIDE,
        }
    }

    pub(super) fn shell(&self) -> bool {
        matches!(self, Self::Single { shell: true, .. })
    }

    /// The payload memory the unit claims at the unit gate (28 §5).
    pub(super) fn claim(
        &self,
        gate: &UnitGate,
        parts: &[Part],
    ) -> Result<PayloadClaim, ZLinkError> {
        let preserved = parts.iter().filter(|p| p.preserve).count();
        let preserved = u32::try_from(preserved).unwrap_or(u32::MAX);
        Ok(match self {
            Self::Single { .. } => gate.source_claim(preserved)?,
            Self::SpotWide(s) => {
                gate.aggregate_claim(preserved, Payload::listed_len(&s.pages, parts.len()))?
            }
        })
    }

    /// The payload the captured `states` (one per participant, in order) travel in, and the
    /// largest state (checked against the 64 MiB bound by the unit).
    pub(super) fn payload(
        &self,
        states: Vec<Option<Bytes>>,
    ) -> Result<(Bytes, Option<u64>), ZLinkError> {
        let largest = states.iter().flatten().map(|s| s.len() as u64).max();
        match self {
            Self::Single { .. } => Ok((
                states.into_iter().flatten().next().unwrap_or_default(),
                largest,
            )),
            Self::SpotWide(s) => {
                let payload = Payload {
                    pages: s.pages.clone(),
                    states,
                };
                Ok((payload.encode()?, largest))
            }
        }
    }

    /// The Restore header command of the unit (its body); `deadline_ms`: the move's deadline,
    /// in milliseconds from now, if it has one.
    pub(super) fn restore_command(
        &self,
        handle: &AuthorityHandle,
        header: &Bytes,
        reservation: zlink_location::ReservationWire,
        checksum: &[u8],
        timers: &[Vec<crate::objects::timer::wire::TimerWire>],
        deadline_ms: Option<u64>,
    ) -> Result<Bytes, ZLinkError> {
        match self {
            Self::Single {
                rebuild,
                per_actor,
                join,
                ..
            } => wire::encode(&wire::RestoreCommand {
                header: header.to_vec(),
                id: handle.id().as_str().to_owned(),
                stable_type: handle.stable_type().as_str().to_owned(),
                generation: handle.object_generation().get().to_string(),
                rebuild: *rebuild,
                reservation,
                kind: wire::MovedKind::of(handle.kind()).ok_or_else(|| {
                    crate::relocation::invariant("a unit of a kind that does not move")
                })?,
                per_actor: per_actor.clone(),
                join: join.clone(),
                timers: timers.first().cloned().unwrap_or_default(),
                deadline_ms,
            }),
            Self::SpotWide(s) => wire::encode(&aggregate::RestoreCommand {
                header: header.to_vec(),
                spot: handle.id().as_str().to_owned(),
                root: s.root.clone(),
                checksum: checksum.to_vec(),
                reservation,
                timers: timers.to_vec(),
                deadline_ms,
            }),
        }
    }
}

/// The summary a capture whose largest state `len` is over the 64 MiB state bound reports
/// (nothing is chunked; the unit fails the move).
pub(super) fn oversized(len: u64) -> PayloadSummary {
    PayloadSummary {
        total_len: len,
        chunk_count: 0,
        crc32c: 0,
    }
}
