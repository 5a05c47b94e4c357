//! The unit gate (spec 28 §5, §12 item 4) and the chunk in-flight budgets (06 §3) of one
//! object node.
//!
//! The caps are the root Location options' ([`RelocationOptions`]); every node of a root
//! shares those values, and each object node keeps its own gate (its own counts), so a root
//! with several object nodes admits the caps per node, not per process.
//!
//! **Source:** before anything of the move is written (before it secures its target) a unit
//! takes an outbound-unit permit (`MaxActiveOutboundRelocations`); a single unit whose
//! up-front payload claim exceeds the whole memory cap can never move and is refused there
//! ([`GateError::TooLarge`]) before anything is written or captured. Its payload memory and
//! its `Capture` permit are taken later, when its capture starts: after the target
//! reservation, the `Preparing` record and the target's admission (below), just before the
//! seal — a wait for them is still before the seal, outside the interruption (28 §5), and a
//! unit that holds them has nothing external left to wait for before its capture. It waits
//! until a `Capture` permit (`MaxConcurrentRelocationCaptures`) and its up-front payload memory
//! (`MaxRelocationPayloadInFlightBytes`: 64 MiB per `PreserveStateWith` object plus the
//! framing of the Restore header and of the chunks such a payload takes; a
//! `RecreateOnRelocation` unit carries no state: only the Restore header) are both free and
//! takes them at once; when one is short, the other is returned under the same lock — no
//! other attempt ever sees a partial hold. The wait holds the unit's target reservation, so
//! it is bounded: past [`CAPTURE_WAIT`] (or the move's deadline) the move is cancelled before
//! its seal ([`GateError::WaitedTooLong`], `Unavailable`), the reservation released and the
//! object keeps serving here. Taking the memory at capture rather than at admission is what
//! lets many units secure their targets and record `Preparing` while only the few the cap
//! allows hold 64 MiB each, for the short span from the capture start to the shrink. A
//! `SpotWide` aggregate takes the same gate with one `Capture` permit (its participants are
//! captured one after another) and [`UnitGate::aggregate_claim`] (64 MiB per preserved
//! participant plus the inventory and framing); a claim over the cap waits until no other
//! payload memory is held and then holds it alone until it frees it, even after it shrank
//! (`aggregate/mod.rs`). The `Capture` permit is returned once the capture ran; the memory
//! shrinks to the encoded payload after it (never grows) and is returned when the payload is
//! dropped; the outbound permit when the unit ends.
//!
//! **Target:** before its seal the source asks the target to admit the unit ([`ADMIT`], a
//! command-plane request): the target waits until an inbound-unit permit
//! (`MaxActiveInboundRelocations`), a `Restore` permit (`MaxConcurrentRelocationRestores`) and
//! payload memory for the source's up-front claim are all free, takes them at once and
//! answers; a wait past [`ADMIT_WAIT`] is refused and the source cancels the move (the Actor
//! keeps serving there). Right after its capture the source declares the encoded length
//! ([`DECLARE`], one-way) and the target's memory shrinks to it then; the Restore header
//! shrinks it to the declared length again (and refuses more than was admitted).
//! A Restore that arrives without an admission tries the same permits at once and is
//! refused when one is short ([`GateError::Busy`]). The `Restore` permit and the memory are
//! returned once the instance is built, the inbound permit when the move ends here (or the
//! admission is forgotten, like an abandoned Restore). The payload memory is one account
//! for both sides of the node: units moving out of two nodes towards each other at once can
//! hold all of it while waiting for the other's admission; [`ADMIT_WAIT`] bounds that wait
//! (those units are cancelled and serve on), it is not resolved otherwise.
//!
//! **Chunk budgets:** every chunk the source sends reserves its accounted charge — the
//! encoded length of the control frame carrying it — against the budget of its peer
//! connection (`RelocationInFlightPayloadBudget`) and the node budget
//! (`RelocationNodeInFlightPayloadBudget`), both or neither (`0` = not applied; both `0`:
//! nothing is reserved). The transport does not report when one frame was written, so the
//! charge is returned on the target's **acknowledgement**: a command-plane ping sent on the
//! same connection after the chunks — for the last chunks of a payload, the Restore's prepare
//! request that follows them on that connection (no ping of their own). The target runs one-way commands in arrival order and
//! only then the request after them, so its answer proves every earlier chunk was received
//! and assembled. A sender short of budget acknowledges its own chunks first (it never waits
//! on itself); with none in flight it waits for another unit's release. A chunk larger than a
//! budget is sent alone (the budget then slows the transfer but never stalls it), so a budget
//! below the chunk limit is valid configuration (06 §3 declares no relation between them).
//! A chunk send waits for room on the connection's control lane rather than failing on a
//! full one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use zlink_relocation::transfer::{
    BudgetError, BudgetScope, CHUNK_HEADER_LEN, ChunkLimit, InFlightBudget, MAX_ADAPTER_STATE_LEN,
    PayloadClaim, PayloadMemory, PayloadMemoryError, PayloadMemoryPermit, PayloadUnit,
    RESTORE_HEADER_LEN, SettingsError,
};
use zlink_store_spi::entropy::HashMap;

use crate::messaging::{ErrorKind, ZLinkError};

mod permits;
use crate::objects::{RelocationConfigError, RelocationOptions};
pub(crate) use permits::{ChunkPermit, SourcePermits, TargetPermits};

/// The target admission request (a command-plane request, answered once the target holds
/// its permits): sent by the source before its seal, so the waits for the target's permits
/// are not part of the interruption (28 §5).
pub(crate) const ADMIT: &str = "zlink.relocation.admit";

/// The source's declaration of its encoded payload length right after its capture (a
/// one-way command-plane command, body [`AdmitCommand`] with the encoded length): the target
/// shrinks the memory it admitted for that unit to it (never grows; the Restore header
/// checks the length again). Without it the target's memory shrinks only at the Restore.
pub(crate) const DECLARE: &str = "zlink.relocation.declare";

/// How long a target waits for its permits for one admission before refusing it.
pub(crate) const ADMIT_WAIT: Duration = Duration::from_secs(10);

/// How long a source unit, holding its target reservation, waits for its `Capture` permit
/// and payload memory before its move is cancelled (it keeps serving where it is).
pub(crate) const CAPTURE_WAIT: Duration = ADMIT_WAIT;

/// The body of [`ADMIT`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct AdmitCommand {
    /// The RelocationId, decimal.
    pub(crate) relocation: String,
    /// The source's up-front payload memory claim, in bytes.
    pub(crate) bytes: u64,
}

/// Why the gate did not admit a unit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum GateError {
    /// The unit needs more payload memory than the whole cap: it can never move
    /// (`Blocked/StateIncompatible`-like; only a `SpotWide` aggregate may exceed the cap).
    #[error("the relocation unit needs {need} bytes of payload memory; the cap is {cap}")]
    TooLarge {
        /// Bytes the unit needs.
        need: u64,
        /// `MaxRelocationPayloadInFlightBytes`.
        cap: u64,
    },
    /// A permit the target needs is taken now (it cannot wait for it).
    #[error("the relocation target has no {what} free now")]
    Busy {
        /// Which permit was short.
        what: &'static str,
    },
    /// The relocation options do not give a usable transfer (they are validated at startup).
    #[error("invalid relocation transfer options")]
    Transfer(#[source] RelocationConfigError),
    /// The payload memory cap is not usable (it is validated at startup).
    #[error("invalid payload memory cap")]
    MemoryCap(#[source] SettingsError),
    /// A unit's up-front payload memory claim does not fit in 64 bits.
    #[error("the payload memory claim does not fit")]
    Claim(#[source] PayloadMemoryError),
    /// A unit waited for its permits as long as it may (the target's admission wait, or the
    /// source's wait for its `Capture` permit and payload memory while it holds its target
    /// reservation): the move is cancelled before its seal.
    #[error("waited {waited:?} for the {what}; the move is cancelled")]
    WaitedTooLong {
        /// What was short.
        what: &'static str,
        /// How long the unit waited.
        waited: Duration,
    },
}

impl GateError {
    /// The broad class of the error.
    pub(crate) fn kind(&self) -> ErrorKind {
        match self {
            GateError::TooLarge { .. } => ErrorKind::CapacityExceeded,
            GateError::Busy { .. } | GateError::WaitedTooLong { .. } => ErrorKind::Unavailable,
            GateError::Transfer(_) | GateError::MemoryCap(_) | GateError::Claim(_) => {
                ErrorKind::InvalidOperation
            }
        }
    }
}

impl From<GateError> for ZLinkError {
    fn from(e: GateError) -> Self {
        ZLinkError::RelocationRefused {
            kind: e.kind(),
            what: "the unit gate",
            source: Some(crate::messaging::SharedError::new(e)),
        }
    }
}

/// Why one all-at-once attempt did not admit.
#[derive(Debug)]
enum Short {
    /// Something is taken now: wait for a release.
    Wait(&'static str),
    /// It can never be admitted.
    Never(GateError),
}

/// The caps and counts of one gate.
struct Shared {
    outbound: Arc<Semaphore>,
    inbound: Arc<Semaphore>,
    captures: Arc<Semaphore>,
    restores: Arc<Semaphore>,
    memory: PayloadMemory,
    /// Every all-at-once attempt runs under it, so no attempt sees another's partial hold.
    attempt: Mutex<()>,
    /// Signalled on every release (permits, memory, chunk budget).
    changed: Notify,
    peer_budget: u64,
    node_budget: InFlightBudget,
    peers: Mutex<HashMap<u64, InFlightBudget>>,
    chunk_limit: ChunkLimit,
    /// The outbound, inbound, `Capture` and `Restore` caps (the semaphores never gain permits).
    caps: [usize; 4],
    /// Observation: the most charge seen in flight on one connection and on the node (two
    /// relaxed `fetch_max` per chunk permit).
    peak: (AtomicU64, AtomicU64),
    /// Observation: source units waiting at the gate now.
    waiting: std::sync::atomic::AtomicUsize,
    /// Observation: acknowledgement requests the chunk senders of this node sent.
    acknowledgements: std::sync::atomic::AtomicUsize,
}

/// The unit gate and chunk budgets of one object node (see the module docs).
#[derive(Clone)]
pub(crate) struct UnitGate {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for UnitGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnitGate")
            .field("usage", &self.usage())
            .finish_non_exhaustive()
    }
}

/// What a gate holds now (tests and diagnostics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct GateUsage {
    pub(crate) outbound: usize,
    pub(crate) inbound: usize,
    pub(crate) captures: usize,
    pub(crate) restores: usize,
    pub(crate) memory: u64,
}

fn cap(n: u32) -> usize {
    n as usize
}

/// The bytes a payload of `state_len` state bytes takes encoded: the Restore header and each
/// chunk's header beside the state.
pub(crate) fn encoded_len(state_len: u64, limit: ChunkLimit) -> u64 {
    let per_chunk = limit.data_len() as u64;
    let chunks = state_len.div_ceil(per_chunk.max(1));
    RESTORE_HEADER_LEN as u64 + state_len + chunks * CHUNK_HEADER_LEN as u64
}

impl UnitGate {
    /// A gate with the caps and budgets of `options`.
    pub(crate) fn new(options: &RelocationOptions) -> Result<Self, GateError> {
        let transfer = options.transfer().map_err(GateError::Transfer)?;
        let memory = PayloadMemory::new(options.max_payload_in_flight_bytes)
            .map_err(GateError::MemoryCap)?;
        Ok(UnitGate {
            shared: Arc::new(Shared {
                outbound: Arc::new(Semaphore::new(cap(options.max_active_outbound))),
                inbound: Arc::new(Semaphore::new(cap(options.max_active_inbound))),
                captures: Arc::new(Semaphore::new(cap(options.max_concurrent_captures))),
                restores: Arc::new(Semaphore::new(cap(options.max_concurrent_restores))),
                memory,
                attempt: Mutex::new(()),
                changed: Notify::new(),
                peer_budget: transfer.peer_in_flight_budget(),
                node_budget: transfer.new_node_budget(),
                peers: Mutex::new(HashMap::default()),
                chunk_limit: transfer.chunk_limit(),
                caps: [
                    cap(options.max_active_outbound),
                    cap(options.max_active_inbound),
                    cap(options.max_concurrent_captures),
                    cap(options.max_concurrent_restores),
                ],
                peak: (AtomicU64::new(0), AtomicU64::new(0)),
                waiting: std::sync::atomic::AtomicUsize::new(0),
                acknowledgements: std::sync::atomic::AtomicUsize::new(0),
            }),
        })
    }

    /// What the gate holds now.
    pub(crate) fn usage(&self) -> GateUsage {
        let s = &self.shared;
        let used = |sem: &Semaphore, cap: usize| cap.saturating_sub(sem.available_permits());
        let [outbound, inbound, captures, restores] = s.caps;
        GateUsage {
            outbound: used(&s.outbound, outbound),
            inbound: used(&s.inbound, inbound),
            captures: used(&s.captures, captures),
            restores: used(&s.restores, restores),
            memory: s.memory.used(),
        }
    }

    /// The up-front payload memory claim of a source unit (28 §5): 64 MiB of state per
    /// `PreserveStateWith` object (`RecreateOnRelocation` objects carry none), plus the
    /// Restore header and the chunk headers that state takes under the chunk limit.
    pub(crate) fn source_claim(&self, preserved_objects: u32) -> Result<PayloadClaim, GateError> {
        let objects = preserved_objects;
        let state = u64::from(objects).saturating_mul(MAX_ADAPTER_STATE_LEN);
        let framing = encoded_len(state, self.shared.chunk_limit) - state;
        PayloadClaim::before_capture(PayloadUnit::Single, objects, framing)
            .map_err(GateError::Claim)
    }

    /// The up-front payload memory claim of a `SpotWide` aggregate (28 §5, §12 item 4): 64 MiB
    /// of state per `PreserveStateWith` participant, plus `listed` bytes the payload carries
    /// beside the states (the inventory pages and the per-participant framing, known at the
    /// preflight), plus the Restore header and the chunk headers of that whole payload. It
    /// may exceed the memory cap: such an aggregate runs alone (see
    /// [`admit_outbound`](Self::admit_outbound)).
    pub(crate) fn aggregate_claim(
        &self,
        preserved: u32,
        listed: u64,
    ) -> Result<PayloadClaim, GateError> {
        let state = u64::from(preserved)
            .checked_mul(MAX_ADAPTER_STATE_LEN)
            .and_then(|b| b.checked_add(listed))
            .ok_or(GateError::Claim(PayloadMemoryError::ClaimOverflow))?;
        let framing = encoded_len(state, self.shared.chunk_limit) - state;
        PayloadClaim::before_capture(
            PayloadUnit::SpotWideAggregate,
            preserved,
            listed.saturating_add(framing),
        )
        .map_err(GateError::Claim)
    }

    /// Source, before anything of the move is written: refuses a single unit whose `claim`
    /// exceeds the whole memory cap ([`GateError::TooLarge`]), then waits until an
    /// outbound-unit permit is free and takes it. The `Capture` permit and the claim are taken
    /// when the capture starts ([`SourcePermits::take_capture`]).
    pub(crate) async fn admit_outbound(
        &self,
        claim: PayloadClaim,
    ) -> Result<SourcePermits, GateError> {
        self.wait_for(true, || self.try_outbound(claim)).await
    }

    /// Tries `attempt` until it takes its permits (or can never fit), waiting for a release
    /// between tries. `source`: a source unit (tests count those waiting).
    async fn wait_for<T>(
        &self,
        source: bool,
        attempt: impl Fn() -> Result<T, Short>,
    ) -> Result<T, GateError> {
        loop {
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            match attempt() {
                Ok(p) => return Ok(p),
                Err(Short::Never(e)) => return Err(e),
                Err(Short::Wait(what)) => {
                    tracing::debug!(what, source, "relocation unit waits for the gate");
                    let _waiting = source.then(|| Waiting::new(&self.shared.waiting));
                    changed.await;
                }
            }
        }
    }

    /// Takes, under the attempt lock and all at once, `claim` of payload memory, a unit permit
    /// (when `unit` names one) and a callback permit (`Capture` or `Restore`), each with the
    /// name a wait reports; a refusal drops what was taken, still under the lock.
    fn take_all(
        &self,
        claim: PayloadClaim,
        unit: Option<(&Arc<Semaphore>, &'static str)>,
        callback: (&Arc<Semaphore>, &'static str),
    ) -> Result<
        (
            PayloadMemoryPermit,
            Option<OwnedSemaphorePermit>,
            OwnedSemaphorePermit,
        ),
        Short,
    > {
        let s = &self.shared;
        let _attempt = s.attempt.lock();
        let memory = match s.memory.try_reserve(claim) {
            Ok(m) => m,
            Err(PayloadMemoryError::SingleUnitTooLarge { need, cap }) => {
                return Err(Short::Never(GateError::TooLarge { need, cap }));
            }
            Err(_) => return Err(Short::Wait("payload memory")),
        };
        let unit_permit = match unit {
            Some((sem, what)) => Some(
                Arc::clone(sem)
                    .try_acquire_owned()
                    .map_err(|_| Short::Wait(what))?,
            ),
            None => None,
        };
        let callback_permit = Arc::clone(callback.0)
            .try_acquire_owned()
            .map_err(|_| Short::Wait(callback.1))?;
        Ok((memory, unit_permit, callback_permit))
    }

    /// One attempt of [`admit_outbound`](Self::admit_outbound).
    fn try_outbound(&self, claim: PayloadClaim) -> Result<SourcePermits, Short> {
        let s = &self.shared;
        let cap = s.memory.cap();
        if claim.unit() == PayloadUnit::Single && claim.bytes() > cap {
            return Err(Short::Never(GateError::TooLarge {
                need: claim.bytes(),
                cap,
            }));
        }
        let unit = Arc::clone(&s.outbound)
            .try_acquire_owned()
            .map_err(|_| Short::Wait("outbound unit permit"))?;
        Ok(SourcePermits {
            unit: Some(unit),
            capture: None,
            memory: None,
            claim,
            taken: false,
            shared: Arc::clone(s),
        })
    }

    /// One all-at-once attempt of [`SourcePermits::take_capture`]: a `Capture` permit and
    /// `claim` of payload memory.
    fn try_capture(
        &self,
        claim: PayloadClaim,
    ) -> Result<(PayloadMemoryPermit, OwnedSemaphorePermit), Short> {
        let s = &self.shared;
        let (memory, _, capture) = self.take_all(claim, None, (&s.captures, "Capture permit"))?;
        Ok((memory, capture))
    }

    /// Target: waits until an inbound-unit permit, a `Restore` permit and the payload memory
    /// of `claim` (the source's up-front claim) are all free, and takes them at once; a
    /// `SpotWide` aggregate's claim over the cap waits until no other payload memory is held
    /// here and then holds it alone. A single unit's claim over the whole cap is
    /// [`GateError::TooLarge`].
    pub(crate) async fn admit_inbound_claim(
        &self,
        claim: PayloadClaim,
    ) -> Result<TargetPermits, GateError> {
        self.wait_for(false, || self.try_inbound_at(claim)).await
    }

    /// Target: takes, at once, an inbound-unit permit, a `Restore` permit and `bytes` of
    /// payload memory, or refuses ([`GateError::Busy`]) without holding anything.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn try_inbound(&self, bytes: u64) -> Result<TargetPermits, GateError> {
        self.try_inbound_claim(PayloadClaim::exact(PayloadUnit::Single, bytes))
    }

    /// Target: [`try_inbound`](Self::try_inbound) for any claim (an aggregate's may run
    /// alone).
    pub(crate) fn try_inbound_claim(
        &self,
        claim: PayloadClaim,
    ) -> Result<TargetPermits, GateError> {
        self.try_inbound_at(claim).map_err(|short| match short {
            Short::Wait(what) => GateError::Busy { what },
            Short::Never(e) => e,
        })
    }

    /// One all-at-once attempt of the target side.
    fn try_inbound_at(&self, claim: PayloadClaim) -> Result<TargetPermits, Short> {
        let s = &self.shared;
        let (memory, unit, restore) = self.take_all(
            claim,
            Some((&s.inbound, "inbound unit permit")),
            (&s.restores, "Restore permit"),
        )?;
        Ok(TargetPermits {
            unit,
            restore: Some(restore),
            memory: Some(memory),
            shared: Arc::clone(s),
        })
    }

    /// A future resolving at the next release; enable it before trying, then await it.
    pub(crate) fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.shared.changed.notified()
    }

    /// Reserves `charge` for one chunk on `connection` (the transport's connection id) against the budgets that apply (both or
    /// neither); `Ok(None)` when none applies. `Err` when it does not fit now.
    pub(crate) fn try_chunk(
        &self,
        connection: u64,
        charge: u64,
    ) -> Result<Option<ChunkPermit>, BudgetError> {
        let s = &self.shared;
        let node_applied = s.node_budget.limit().is_some();
        if s.peer_budget == 0 && !node_applied {
            return Ok(None);
        }
        // Reserved under the map lock: a budget is pruned only while nothing is in flight
        // on it, and nobody can reserve on a pruned one.
        let mut peers = s.peers.lock();
        let permit = if s.peer_budget == 0 {
            s.node_budget.try_reserve(charge)?
        } else {
            if !peers.contains_key(&connection) {
                peers.retain(|_, b| b.in_flight() > 0);
                peers.insert(
                    connection,
                    InFlightBudget::new(BudgetScope::PeerConnection, s.peer_budget),
                );
            }
            let Some(peer) = peers.get(&connection) else {
                return Ok(None);
            };
            let permit = if node_applied {
                InFlightBudget::try_reserve_pair(peer, &s.node_budget, charge)?
            } else {
                peer.try_reserve(charge)?
            };
            s.peak.0.fetch_max(peer.in_flight(), Ordering::Relaxed);
            permit
        };
        s.peak
            .1
            .fetch_max(s.node_budget.in_flight(), Ordering::Relaxed);
        Ok(Some(ChunkPermit {
            permit: Some(permit),
            shared: Arc::clone(s),
        }))
    }

    /// Tests: the most charge seen in flight on one connection and on the node.
    #[cfg(test)]
    pub(crate) fn peak(&self) -> (u64, u64) {
        let (connection, node) = &self.shared.peak;
        (
            connection.load(Ordering::Relaxed),
            node.load(Ordering::Relaxed),
        )
    }

    /// Tests: source units waiting at the gate now.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.shared
            .waiting
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A chunk sender asks the target to acknowledge its chunks (counted).
    pub(crate) fn note_acknowledgement(&self) {
        self.shared
            .acknowledgements
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Tests: acknowledgement requests this node's chunk senders sent.
    #[cfg(test)]
    pub(crate) fn acknowledgements(&self) -> usize {
        self.shared
            .acknowledgements
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Tests: whether an oversized aggregate holds the payload memory alone.
    #[cfg(test)]
    pub(crate) fn held_alone(&self) -> bool {
        self.shared.memory.is_held_alone()
    }

    /// Tests: one attempt at the outbound-unit permit; `Ok(None)` when it is short now.
    #[cfg(test)]
    pub(crate) fn try_outbound_now(
        &self,
        claim: PayloadClaim,
    ) -> Result<Option<SourcePermits>, GateError> {
        match self.try_outbound(claim) {
            Ok(p) => Ok(Some(p)),
            Err(Short::Wait(_)) => Ok(None),
            Err(Short::Never(e)) => Err(e),
        }
    }

    /// Tests: the outbound-unit permit and then, at once, the `Capture` permit and the claim;
    /// `Ok(None)` (holding nothing) when one is short now.
    #[cfg(test)]
    pub(crate) fn try_source_now(
        &self,
        claim: PayloadClaim,
    ) -> Result<Option<SourcePermits>, GateError> {
        let Some(mut permits) = self.try_outbound_now(claim)? else {
            return Ok(None);
        };
        Ok(permits.try_capture_now()?.then_some(permits))
    }
}

/// Counts one waiting source unit while it lives.
struct Waiting<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(n: &'a std::sync::atomic::AtomicUsize) -> Self {
        n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Waiting(n)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}
