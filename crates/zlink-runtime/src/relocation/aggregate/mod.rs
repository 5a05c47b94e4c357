//! The `SpotWide` User Spot aggregate move (spec 21 §8, §8.2, §9.1; 28 §5, §6; 06 §17): the
//! Spot and every member Actor at the seal move as one operation, driven by one
//! `zlink_relocation::unit::Unit` of kind `SpotWideAggregate` (the one move performer,
//! `drive/`, over the participants below), with one
//! aggregate Restore whose payload carries the relocation target inventory pages and every
//! participant's state, and one NewOwner CAS on the Spot's record on the target
//! (the one target receiver, `target/`). The wire here is internal to this runtime.
//!
//! The participants are the Spot and every member Actor live under its turn at the
//! preflight (a Spot sealed for a move takes no new member). One participant with
//! `DisableRelocation`, or a target that does not offer every type, refuses the whole move
//! before anything is stored. The participants' relocation target inventory is built with
//! `zlink_relocation::inventory` (pages ≤ 1,024 entries and ≤ 1 MiB, a root with the total
//! count and content checksum); its checksum is the unit's target-list checksum, recorded by
//! the stage records on the Spot's record. Target capacity for the Spot and every member is
//! secured in one reservation (`secure_spot_wide`; short → `CapacityExceeded`, nothing
//! stored), every participant is sealed (one hold group), captured (the Spot's
//! SpotStateAdapter, each member's ActorStateAdapter) and sent in one aggregate Restore —
//! the inventory pages and every state, chunked through the same budgeted send path under
//! its own command names. The target verifies the pages against the root and the root
//! against the recorded checksum, builds every participant hidden under one new shared turn
//! with one temporary-queue group, and on the cutover runs one aggregate NewOwner
//! (`new_owner_spot_wide`: one CAS over the Spot's record, the reservation row, the inventory
//! root row and the capacity rows); members resolve through the Spot's record, so that CAS
//! alone moves them. A lost reply of that CAS is settled by reading the Spot's record and the
//! same CAS tried again until `storeFailureGrace` (21 §10, `owner_change.rs`). Committed: every participant joins the live set and its queue opens,
//! and the cutover is answered; then, in a task of its own, each member's record follows the
//! Spot's owner (`follow_spot_owner`, no capacity moved; 64 at once), so the allocation rows
//! count the records again and the source's sweeps find none of them (a member not rewritten
//! yet still resolves through the Spot, and the sweeps keep it; the target's Shutdown waits for
//! the follows before its own sweep); the source follows every participant. A conflict, an abort
//! before relay-ready or no ready discards the whole group unrun, and the source runs each
//! held queue here again in order. After relay-ready each participant's held messages from other nodes are relayed, in
//! hold order, into its temporary queue on the target before the cutover (they are completion
//! records there, `completion/`); those sent on this node follow right after the cutover.
//! A stage record whose reply is lost is settled by reading, and a release
//! retried, exactly as for a single object (the same performer). A member whose follow write
//! never applied (a crash, or Store failures past `storeFailureGrace`) keeps a record naming
//! the source: it resolves through the Spot's record and the source's sweeps leave it alone
//! (`target/members.rs`).
//!
//! **Lifecycle callbacks (28 §5, §6 steps 7 and 10; `objects::lifecycle`):** after the
//! participants followed, the Spot's old activation gets `OnClosing(RelocationOut)` before it
//! closes (members get nothing). A Spot whose readiness is `ApplicationSignaled` seals only at
//! a boundary a handler signalled (`ctx.relocation_ready().defer()`): with the preflight, the
//! target reservation, the stage records and both sides' permits done, the seal waits for the
//! next such turn end (until the host deadline, else the move is cancelled before anything
//! moved, `DeadlineExceeded`) and seals while that turn is still held; a move that consumed a
//! boundary and is cancelled before its commit runs `Continued` on the source after the held
//! queues ran again. On the target, after the aggregate NewOwner,
//! `OnRelocationReadyCompleted(Relocated)` runs on the Spot before any queue of the group
//! opens. Gap: a `Continued` for a boundary no move was ready for runs in the signalling job
//! right after its handler (the next turn of the Spot — no other turn runs in between),
//! not as a separately queued job.
//!
//! **Unit gate (28 §5, §12 item 4):** before anything is written the source takes one
//! outbound-unit permit; when the capture starts (after the target reservation and the
//! `Preparing` record, before the target's admission and the seal) it takes, at once, one
//! `Capture` permit (the participants are captured one after another under it, so one bounds
//! the pass; it goes back when the pass ends) and the aggregate claim: 64 MiB per `PreserveStateWith` participant plus the bytes the payload
//! carries beside the states (inventory pages, counts, per-state flags and lengths, known at
//! the preflight) plus the Restore and chunk headers (`UnitGate::aggregate_claim`). A claim
//! over `MaxRelocationPayloadInFlightBytes` is not refused: it waits until no other payload
//! memory is held on the node, then holds it alone — no other unit takes payload memory
//! until it frees its memory, even after it shrank (`PayloadUnit::SpotWideAggregate` in
//! `zlink_relocation::transfer`). After the capture the memory shrinks to the encoded
//! aggregate payload; it is returned when the payload is dropped, the rest when the move
//! ends. Before the seal the target admits the aggregate ([`ADMIT`]): an inbound-unit
//! permit, a `Restore` permit and the same claim, at once (waiting at most `ADMIT_WAIT`, an
//! oversized claim running alone there too); the Restore header shrinks it to the declared
//! length, the `Restore` permit and the memory go back once the group is built (or refused),
//! the inbound permit when the move ends there. A Restore without an admission tries the
//! same at once and is refused (its prepare fails) when one is short. Gaps: a waiting
//! oversized aggregate has no priority — single units that keep arriving can keep it
//! waiting (no starvation bound); the claim does not count queue, journal or timer bytes
//! (held work is not part of the aggregate payload here).

mod start;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};

use super::wire::broken;
use crate::messaging::ZLinkError;
use zlink_location::ReservationWire;

/// What the aggregate payload's errors name.
const AGGREGATE: &str = "aggregate payload";

pub(crate) use start::relocate_spot_wide;

/// Request: the target admits the aggregate before its seal (28 §5): an inbound-unit
/// permit, a `Restore` permit and the source's aggregate claim (body: `gate::AdmitCommand`),
/// taken at once; an oversized claim waits there until no other payload memory is held.
pub(crate) const ADMIT: &str = "zlink.relocation.spotwide.admit";
/// The aggregate Restore header (one-way, before its chunks).
pub(crate) const RESTORE: &str = "zlink.relocation.spotwide.restore";
/// One chunk of an aggregate Restore payload (one-way, in order).
pub(crate) const CHUNK: &str = "zlink.relocation.spotwide.chunk";
/// Request: assemble, verify the inventory, build every participant hidden and register the
/// temporary-queue group.
pub(crate) const PREPARE: &str = "zlink.relocation.spotwide.prepare";
/// Request: the `Prepared` record's reservation; the reply is relay-ready.
pub(crate) const READY: &str = "zlink.relocation.spotwide.ready";
/// Request: run the aggregate NewOwner; the reply carries its outcome.
pub(crate) const CUTOVER: &str = "zlink.relocation.spotwide.cutover";
/// One-way: the source cancelled; the group is discarded unrun.
pub(crate) const ABORT: &str = "zlink.relocation.spotwide.abort";

/// The aggregate Restore header.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RestoreCommand {
    /// The encoded transfer header of the payload.
    pub(crate) header: Vec<u8>,
    /// The Spot's id.
    pub(crate) spot: String,
    /// The encoded inventory root.
    pub(crate) root: Vec<u8>,
    /// The target-list checksum the `Preparing` record carries (32 bytes).
    pub(crate) checksum: Vec<u8>,
    /// The reservation as the source secured it.
    pub(crate) reservation: ReservationWire,
    /// Each participant's timers, in inventory order (docs/formats.md, *Timers in the
    /// Restore*; absent: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) timers: Vec<Vec<crate::objects::timer::wire::TimerWire>>,
    /// The move's deadline, in milliseconds after the source sent this command (as the
    /// single-object command's `deadlineMs`; absent: none given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) deadline_ms: Option<u64>,
}

/// The aggregate payload: the inventory pages, then every participant's state in inventory
/// order (the Spot, then the member Actors by id). Each state is `None` for
/// RecreateOnRelocation and the adapter's bytes for PreserveStateWith.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Payload {
    pub(crate) pages: Vec<Bytes>,
    pub(crate) states: Vec<Option<Bytes>>,
}

impl Payload {
    /// The bytes an encoded payload of `pages` and `participants` takes beside the states:
    /// the counts, each page with its length, each state's flag and length.
    pub(crate) fn listed_len(pages: &[Bytes], participants: usize) -> u64 {
        let pages_len: u64 = pages.iter().map(|p| 4 + p.len() as u64).sum();
        8 + pages_len + 5 * participants as u64
    }

    /// `u32 pages`, each `u32 len ‖ bytes`; `u32 states`, each `u8 preserve ‖ u32 len ‖ bytes`
    /// (all big-endian).
    pub(crate) fn encode(&self) -> Result<Bytes, ZLinkError> {
        let len = |n: usize| u32::try_from(n).map_err(|_| broken(AGGREGATE, "a length over 4 GiB"));
        let mut out = BytesMut::new();
        out.put_u32(len(self.pages.len())?);
        for p in &self.pages {
            out.put_u32(len(p.len())?);
            out.put_slice(p);
        }
        out.put_u32(len(self.states.len())?);
        for s in &self.states {
            out.put_u8(u8::from(s.is_some()));
            let bytes = s.as_deref().unwrap_or_default();
            out.put_u32(len(bytes.len())?);
            out.put_slice(bytes);
        }
        Ok(out.freeze())
    }

    /// The payload `encode` wrote; anything else is a protocol error.
    pub(crate) fn decode(mut b: Bytes) -> Result<Self, ZLinkError> {
        fn take(b: &mut Bytes, n: usize) -> Result<Bytes, ZLinkError> {
            if b.remaining() < n {
                return Err(broken(AGGREGATE, "truncated"));
            }
            Ok(b.split_to(n))
        }
        fn u32_of(b: &mut Bytes) -> Result<usize, ZLinkError> {
            Ok(take(b, 4)?.get_u32() as usize)
        }
        let pages_n = u32_of(&mut b)?;
        let mut pages = Vec::with_capacity(pages_n.min(1 << 16));
        for _ in 0..pages_n {
            let n = u32_of(&mut b)?;
            pages.push(take(&mut b, n)?);
        }
        let states_n = u32_of(&mut b)?;
        let mut states = Vec::with_capacity(states_n.min(1 << 20));
        for _ in 0..states_n {
            let preserve = take(&mut b, 1)?.get_u8();
            let n = u32_of(&mut b)?;
            let bytes = take(&mut b, n)?;
            states.push(match preserve {
                0 => None,
                1 => Some(bytes),
                _ => return Err(broken(AGGREGATE, "a state flag other than 0 or 1")),
            });
        }
        if b.has_remaining() {
            return Err(broken(AGGREGATE, "trailing bytes"));
        }
        Ok(Self { pages, states })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_aggregate_payload_round_trips_and_a_truncated_one_is_refused() {
        let p = Payload {
            pages: vec![Bytes::from_static(b"page-1"), Bytes::from_static(b"page-2")],
            states: vec![None, Some(Bytes::from_static(b"state")), Some(Bytes::new())],
        };
        let bytes = p.encode().expect("encode");
        assert_eq!(Payload::decode(bytes.clone()).expect("decode"), p);
        let cut = bytes.slice(..bytes.len() - 1);
        assert!(Payload::decode(cut).is_err());
        let mut longer = BytesMut::from(&bytes[..]);
        longer.put_u8(0);
        assert!(Payload::decode(longer.freeze()).is_err());
    }
}
