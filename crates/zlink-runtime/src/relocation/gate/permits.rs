//! What a unit holds at the gate (see `gate.rs`): a source unit's outbound permit and, from
//! its capture start, its `Capture` permit and payload memory; a target unit's inbound and
//! `Restore` permits and memory; one chunk's in-flight charge. Dropping one returns the rest.

use std::sync::Arc;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use zlink_relocation::transfer::{
    InFlightPermit, PayloadClaim, PayloadMemoryError, PayloadMemoryPermit,
};

use super::{GateError, Shared, UnitGate};

/// What a source unit holds (see [`UnitGate::admit_outbound`] and
/// [`SourcePermits::take_capture`]); dropping it returns the rest.
pub(crate) struct SourcePermits {
    pub(super) unit: Option<OwnedSemaphorePermit>,
    pub(super) capture: Option<OwnedSemaphorePermit>,
    pub(super) memory: Option<PayloadMemoryPermit>,
    /// The unit's up-front payload memory claim, taken with the `Capture` permit.
    pub(super) claim: PayloadClaim,
    /// Whether the `Capture` permit and the claim were taken (once per unit).
    pub(super) taken: bool,
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for SourcePermits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourcePermits")
            .field("claim", &self.claim.bytes())
            .field("capture", &self.capture.is_some())
            .field(
                "memory",
                &self.memory.as_ref().map(PayloadMemoryPermit::bytes),
            )
            .finish_non_exhaustive()
    }
}

impl SourcePermits {
    /// When the capture starts (before the target's admission and the seal): waits until a
    /// `Capture` permit and the unit's claim are both free and takes them at once (an
    /// aggregate's claim over the cap: once no other payload memory is held, then alone).
    /// The unit holds its target reservation meanwhile, so the wait ends at `until` at the
    /// latest ([`GateError::WaitedTooLong`], nothing more taken). Taken once per unit: a later
    /// call returns at once.
    pub(crate) async fn take_capture(&mut self, until: Instant) -> Result<(), GateError> {
        if self.taken {
            return Ok(());
        }
        let gate = UnitGate {
            shared: Arc::clone(&self.shared),
        };
        let claim = self.claim;
        let started = Instant::now();
        let wait = gate.wait_for(true, || gate.try_capture(claim));
        let (memory, capture) = match tokio::time::timeout_at(until, wait).await {
            Ok(taken) => taken?,
            Err(_) => {
                return Err(GateError::WaitedTooLong {
                    what: "Capture permit and payload memory",
                    waited: started.elapsed(),
                });
            }
        };
        self.memory = Some(memory);
        self.capture = Some(capture);
        self.taken = true;
        Ok(())
    }

    /// Tests: one attempt of [`take_capture`](Self::take_capture); `Ok(false)` (nothing
    /// taken) when a permit or the memory is short now.
    #[cfg(test)]
    pub(crate) fn try_capture_now(&mut self) -> Result<bool, GateError> {
        if self.taken {
            return Ok(true);
        }
        let gate = UnitGate {
            shared: Arc::clone(&self.shared),
        };
        match gate.try_capture(self.claim) {
            Ok((memory, capture)) => {
                self.memory = Some(memory);
                self.capture = Some(capture);
                self.taken = true;
                Ok(true)
            }
            Err(super::Short::Wait(_)) => Ok(false),
            Err(super::Short::Never(e)) => Err(e),
        }
    }

    /// The capture ran: its permit goes back.
    pub(crate) fn end_capture(&mut self) {
        if self.capture.take().is_some() {
            self.shared.changed.notify_waiters();
        }
    }

    /// The captured payload is known: the memory shrinks to its `encoded` bytes (never grows:
    /// a larger value keeps what is held).
    pub(crate) fn shrink_to(&mut self, encoded: u64) {
        if let Some(m) = &mut self.memory {
            match m.shrink_to(encoded) {
                Ok(()) => self.shared.changed.notify_waiters(),
                Err(e) => tracing::warn!(error = %e, "relocation payload memory not shrunk"),
            }
        }
    }

    /// The payload was dropped: its memory goes back.
    pub(crate) fn drop_payload(&mut self) {
        if self.memory.take().is_some() {
            self.shared.changed.notify_waiters();
        }
    }

    /// The unit's up-front payload memory claim, in bytes (what the target admits).
    pub(crate) fn claim(&self) -> u64 {
        self.claim.bytes()
    }

    /// Payload memory held now.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn memory(&self) -> u64 {
        self.memory.as_ref().map_or(0, PayloadMemoryPermit::bytes)
    }
}

impl Drop for SourcePermits {
    fn drop(&mut self) {
        self.capture.take();
        self.memory.take();
        self.unit.take();
        self.shared.changed.notify_waiters();
    }
}

/// What a target unit holds (see [`UnitGate::admit_inbound`]); dropping it returns the rest.
pub(crate) struct TargetPermits {
    pub(super) unit: Option<OwnedSemaphorePermit>,
    pub(super) restore: Option<OwnedSemaphorePermit>,
    pub(super) memory: Option<PayloadMemoryPermit>,
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for TargetPermits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TargetPermits")
            .field("restore", &self.restore.is_some())
            .field(
                "memory",
                &self.memory.as_ref().map(PayloadMemoryPermit::bytes),
            )
            .finish_non_exhaustive()
    }
}

impl TargetPermits {
    /// The Restore declared its length: the memory shrinks to it. More than was admitted is
    /// [`PayloadMemoryError::WouldGrow`] and changes nothing.
    pub(crate) fn shrink_to(&mut self, bytes: u64) -> Result<(), PayloadMemoryError> {
        if let Some(m) = &mut self.memory {
            m.shrink_to(bytes)?;
            self.shared.changed.notify_waiters();
        }
        Ok(())
    }

    /// The instance is built (or the build failed): the `Restore` permit and the payload
    /// memory go back; the inbound permit stays until the move ends here.
    pub(crate) fn end_restore(&mut self) {
        let had = self.restore.take().is_some() | self.memory.take().is_some();
        if had {
            self.shared.changed.notify_waiters();
        }
    }
}

impl Drop for TargetPermits {
    fn drop(&mut self) {
        self.restore.take();
        self.memory.take();
        self.unit.take();
        self.shared.changed.notify_waiters();
    }
}

/// One chunk's reserved charge; dropping it (on the acknowledgement) returns it.
pub(crate) struct ChunkPermit {
    pub(super) permit: Option<InFlightPermit>,
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for ChunkPermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkPermit")
            .field("charge", &self.permit.as_ref().map(InFlightPermit::charge))
            .finish()
    }
}

impl Drop for ChunkPermit {
    fn drop(&mut self) {
        self.permit.take();
        self.shared.changed.notify_waiters();
    }
}
