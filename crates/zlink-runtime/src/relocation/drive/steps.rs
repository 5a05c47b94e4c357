//! The effects of one unit that talk to the target or capture on the source: the admission
//! and seal (with an `ApplicationSignaled` Spot's boundary), the capture pass, the Restore,
//! ready, the cutover and the abort — each applied to every participant of the unit.

use bytes::Bytes;
use zlink_codec::RoutingId;
use zlink_relocation::unit::Event;

use super::{ADMIT_ANSWER, Move};
use crate::messaging::{ErrorKind, ErrorMessage, MoveRefusal, ZLinkError};
use crate::objects::RelocationReadyOutcome;
use crate::objects::host::{ObjectKey, store_failure};
use crate::objects::lifecycle::LifecycleCall;
use crate::objects::live::LiveObject;
use crate::relocation::MovesOf;
use crate::relocation::gate::{self, AdmitCommand, SourcePermits};
use crate::relocation::invariant;
use crate::relocation::participants::{Shape, oversized};
use crate::relocation::send;
use crate::relocation::source::{
    ANSWER_TIMEOUT, answered, cutover_applied, cutover_failed, relay_each, request, request_within,
    send_cutover,
};
use crate::relocation::wire::{self, MoveRef, ReadyCommand};
use tokio::time::Instant;
use zlink_location::TargetReservation;

impl Move<'_> {
    /// The capture starts: the target admits the unit (its inbound-unit and `Restore` permits
    /// and this unit's payload memory claim), then the unit takes its own `Capture` permit and
    /// payload memory (28 §5; `gate.rs`) — in that order, so a source holds neither across the
    /// admission's round trip, and once it holds them nothing external delays its capture —
    /// then — for an `ApplicationSignaled` Spot — the seal waits for the application's
    /// boundary, then every participant is sealed (one hold group), while that signalling turn
    /// is still held; any participant already covered cancels.
    pub(super) async fn seal(&mut self) -> Result<(), ZLinkError> {
        self.admit_target().await?;
        self.take_capture().await?;
        let boundary = self.boundary().await?;
        let relocations = &self.client.objects.relocations();
        for (i, p) in self.parts.iter().enumerate() {
            if !relocations.seal(&p.key) {
                for q in &self.parts[..i] {
                    relocations.reopen(&q.key, q.live.as_ref());
                }
                return Err(MoveRefusal::AlreadyMoving {
                    kind: p.key.0,
                    id: p.key.1.clone(),
                }
                .into());
            }
        }
        // No tick starts on a sealed participant: its timers keep their due times until the
        // capture takes them (or a cancel resumes them).
        for p in &self.parts {
            p.live.timers().suspend();
        }
        self.sealed = true;
        self.sealed_at = Some(Instant::now());
        drop(boundary);
        Ok(())
    }

    /// Before the seal: waits for this unit's `Capture` permit and payload memory at the gate,
    /// no longer than [`gate::CAPTURE_WAIT`] or the move's deadline — the unit holds its
    /// target reservation meanwhile — and is cancelled past that.
    pub(super) async fn take_capture(&mut self) -> Result<(), ZLinkError> {
        let Some(permits) = &mut self.permits else {
            return Err(invariant("the unit was not admitted at the gate"));
        };
        let bound = Instant::now() + gate::CAPTURE_WAIT;
        let until = self.until.map_or(bound, |u| u.min(bound));
        Ok(permits.take_capture(until).await?)
    }

    /// Before the seal: the target admits the unit, waiting there until its permits are free.
    pub(super) async fn admit_target(&self) -> Result<(), ZLinkError> {
        let (to, _) = self.target()?;
        let cmd = AdmitCommand {
            relocation: self.relocation().to_string(),
            bytes: self.permits.as_ref().map_or(0, SourcePermits::claim),
        };
        let body = wire::encode(&cmd)?;
        let admit = (self.shape.commands().admit, body);
        answered(request_within(self.client, &to, admit, ADMIT_ANSWER).await).map(|_| ())
    }

    /// For an `ApplicationSignaled` Spot of an aggregate (28 §5): waits for the next boundary
    /// a handler signals, until the deadline (then the move is cancelled before anything
    /// moved, `DeadlineExceeded`). The returned release keeps the signalling turn held until it
    /// is dropped. `None` for any other unit (the seal falls at any turn boundary).
    pub(super) async fn boundary(
        &mut self,
    ) -> Result<Option<tokio::sync::oneshot::Sender<()>>, ZLinkError> {
        let Shape::SpotWide(s) = &mut self.shape else {
            return Ok(None);
        };
        let Some(readiness) = self.parts.first().and_then(|p| p.live.readiness()) else {
            return Ok(None);
        };
        tracing::debug!(relocation = %self.unit.plan().binding().relocation.get(), "relocation waits for the application's boundary");
        match tokio::time::timeout_at(s.until, readiness.wait()).await {
            Ok(Ok(release)) => {
                s.consumed = true;
                Ok(Some(release))
            }
            Ok(Err(_)) => Err(invariant(
                "the boundary wait ended: the Spot closed or another move waits for it",
            )),
            Err(_) => Err(ZLinkError::DeadlinePassed {
                operation: "relocation boundary of the ApplicationSignaled Spot",
            }),
        }
    }

    /// After a cancel that reopened the held queues: `Continued` on the source Spot when this
    /// move had consumed the application's boundary (28 §5).
    pub(super) async fn continued(&mut self) {
        let Shape::SpotWide(s) = &mut self.shape else {
            return;
        };
        if !std::mem::take(&mut s.consumed) {
            return;
        }
        let Some(spot) = self.parts.first() else {
            return;
        };
        let call = LifecycleCall::Ready(RelocationReadyOutcome::Continued);
        if let Err(e) = spot.live.lifecycle(call).await {
            tracing::warn!(error = %e, "relocation-ready callback (Continued) failed");
        }
    }

    /// Captures every participant after its accepted jobs, one after another under the one
    /// `Capture` permit (returned once the pass ends), and chunks the payload (kept until it
    /// is dropped); the payload memory then shrinks to the encoded payload.
    pub(super) async fn capture(&mut self) -> Vec<Event> {
        let captured = self.capture_states().await;
        // Every accepted job (every queued tick) has run: the timers as they stand now move.
        self.timers = self
            .parts
            .iter()
            .map(|p| p.live.timers().snapshot())
            .collect();
        if let Some(p) = &mut self.permits {
            p.end_capture();
        }
        let payload = captured.and_then(|states| self.shape.payload(states));
        let (payload, largest) = match payload {
            Ok(p) => p,
            Err(e) => return self.failed_capture(e),
        };
        if let Some(len) = largest.filter(|l| *l > zlink_relocation::unit::MAX_STATE_LEN) {
            // Over the bound: the machine fails the move; nothing is chunked.
            return vec![Event::Captured {
                state_len: largest,
                payload: oversized(len),
            }];
        }
        let limit = self.client.objects.relocation_options.payload_chunk_limit;
        let attempt = self.binding().attempt.get();
        match send::split(&self.handle, (self.relocation(), attempt), limit, payload) {
            Ok((header, chunks, summary, encoded)) => {
                if let Some(p) = &mut self.permits {
                    p.shrink_to(encoded);
                }
                self.declare_to_target(encoded);
                self.restore = Some((header, chunks));
                vec![Event::Captured {
                    state_len: largest,
                    payload: summary,
                }]
            }
            Err(e) => self.failed_capture(e),
        }
    }

    /// Each participant's state: `None` for RecreateOnRelocation (and a `PerActor` shell,
    /// whose "capture" only lets every accepted job run), the adapter's bytes otherwise.
    pub(super) async fn capture_states(&self) -> Result<Vec<Option<Bytes>>, ZLinkError> {
        let mut states = Vec::with_capacity(self.parts.len());
        for p in &self.parts {
            if self.shape.shell() {
                p.live.settle().await?;
                states.push(None);
                continue;
            }
            match (capture_retried(p.live.as_ref(), &p.key).await?, p.preserve) {
                (_, false) => states.push(None),
                (Some(bytes), true) => states.push(Some(bytes)),
                (None, true) => {
                    return Err(MoveRefusal::NoStateAdapter {
                        kind: p.key.0,
                        id: p.key.1.clone(),
                    }
                    .into());
                }
            }
        }
        Ok(states)
    }

    pub(super) fn failed_capture(&mut self, e: ZLinkError) -> Vec<Event> {
        self.fail(e);
        vec![Event::CaptureFailed]
    }

    /// Sends the Restore and its chunks, in order on the one peer connection, then asks the
    /// target to prepare on the same connection; its answer is the Restore accepted
    /// (assembled, verified, built) and acknowledges the last chunks. Each chunk first
    /// reserves its charge against the in-flight budgets (06 §3; see `gate.rs`): short of
    /// budget, the unit has the target acknowledge its chunks in flight, or, with none, waits
    /// for another unit's release.
    pub(super) async fn send_restore(&mut self) -> Result<(), ZLinkError> {
        let (to, reservation) = self.target()?;
        let Some((header, chunks)) = self.restore.clone() else {
            return Err(invariant("the captured payload was dropped"));
        };
        let commands = self.shape.commands();
        let inner = &self.client.node.inner;
        let peer = inner.route_to(&to)?;
        let checksum = self.unit.plan().target_list();
        let reservation = reservation.to_wire().map_err(store_failure)?;
        let body = self.shape.restore_command(
            &self.handle,
            &header,
            reservation,
            checksum.as_bytes(),
            &self.timers,
            self.until.map(|u| {
                let left = u.saturating_duration_since(Instant::now()).as_millis();
                u64::try_from(left).unwrap_or(u64::MAX)
            }),
        )?;
        inner.send_control(&peer, commands.restore, body)?;
        let relocations = &self.client.objects.relocations();
        let gate = relocations.gate(&self.client.objects.relocation_options)?;
        let unacknowledged = send::chunks_as(inner, &peer, gate, chunks, commands.chunk).await?;
        let body = wire::encode(&MoveRef::of(self.relocation()))?;
        // On the chunks' connection: its answer acknowledges the last chunks, whose charges
        // go back with it.
        let prepared = answered(
            inner
                .control_request(&peer, commands.prepare, body, ANSWER_TIMEOUT)
                .await,
        );
        drop(unacknowledged);
        prepared.map(|_| ())
    }

    /// `Prepared` is recorded: the target takes the reservation it carried and answers
    /// relay-ready.
    pub(super) async fn ready(&mut self) -> Result<(), ZLinkError> {
        let (to, reservation) = self.target()?;
        let cmd = ReadyCommand {
            relocation: self.relocation().to_string(),
            reservation: reservation.to_wire().map_err(store_failure)?,
        };
        let ready = self.shape.commands().ready;
        answered(request(self.client, &to, ready, wire::encode(&cmd)?).await).map(|_| ())
    }

    /// Sends the cutover and reports what the target's NewOwner did: applied (at a version),
    /// a conflict, or not known (a deadline: the record settles it).
    pub(super) async fn cutover(&mut self) -> Vec<Event> {
        let attempt = self.binding().attempt;
        if let Some(e) = self.relay_failed.take() {
            self.fail(e);
            self.interrupt = true;
            return vec![Event::Deadline];
        }
        let cutover = self.shape.commands().cutover;
        let applied = match self.target() {
            Ok((to, _)) => self.cutover_relaying(&to, cutover).await,
            Err(e) => Err(e),
        };
        let applied = self
            .client
            .objects
            .relocations()
            .probe
            .cutover_answer(applied);
        match applied {
            Ok((version, owner)) => {
                self.owner_generation = Some(owner);
                // The processing-start signal: NewOwner applied and dispatch opened there.
                let interruptions = &self.client.objects.relocations().interruptions;
                interruptions.record_since(self.relocation(), self.sealed_at);
                cutover_applied(attempt, version)
            }
            Err(e) => {
                let events = cutover_failed(attempt, &e);
                self.fail(e);
                events
            }
        }
    }

    /// Sends the cutover to `to` and waits for its answer, relaying (every
    /// [`RELAY_DURING_CUTOVER`], 20 ms) what every participant holds from other nodes meanwhile: the
    /// target takes it into the temporary queue while its NewOwner runs, so it runs before the
    /// target's dispatch opens. Held until the follow instead, a message another node sent
    /// during a long cutover (a Store outage retries the NewOwner for seconds) ran after
    /// whatever that node sent the new owner directly once it committed — a caller on the
    /// target node overtaken by its own later messages. A relay that fails answers its
    /// request with the error (never run); the cutover goes on.
    async fn cutover_relaying(
        &self,
        to: &RoutingId,
        command: &'static str,
    ) -> Result<(zlink_store_spi::StoreVersion, u64), ZLinkError> {
        let answer = send_cutover(self.client, to, command, self.relocation());
        tokio::pin!(answer);
        let mut tick = tokio::time::interval(RELAY_DURING_CUTOVER);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                answered = &mut answer => return answered,
                _ = tick.tick() => {
                    let keys = self.parts.iter().map(|p| &p.key);
                    if let Err(e) = relay_each(self.client, keys, to, self.relocation()) {
                        tracing::debug!(error = %e, "relocation: a message held during the cutover was not relayed");
                    }
                }
            }
        }
    }

    pub(super) fn target(&self) -> Result<(RoutingId, TargetReservation), ZLinkError> {
        match (&self.to, &self.reservation) {
            (Some(to), Some(r)) => Ok((to.clone(), r.clone())),
            _ => Err(invariant("no target secured")),
        }
    }

    /// Tells the target the encoded payload's length right after the capture ([`DECLARE`],
    /// one-way, best effort), so its admitted memory shrinks now rather than when the Restore
    /// header arrives after the `Captured` record (the header checks the length again).
    ///
    /// [`DECLARE`]: gate::DECLARE
    pub(super) fn declare_to_target(&self, encoded: u64) {
        let Some(to) = &self.to else { return };
        let inner = &self.client.node.inner;
        let cmd = AdmitCommand {
            relocation: self.relocation().to_string(),
            bytes: encoded,
        };
        let sent = wire::encode(&cmd).and_then(|body| {
            let peer = inner.route_to(to)?;
            inner.send_control(&peer, gate::DECLARE, body)
        });
        if let Err(e) = sent {
            tracing::debug!(error = %e, "relocation payload length not declared to the target");
        }
    }

    /// Asks the target to drop the Restore, its prepared objects and queues (one-way, best
    /// effort: the released reservation fences any NewOwner anyway).
    pub(super) fn abort_target(&self) {
        let Some(to) = &self.to else { return };
        let inner = &self.client.node.inner;
        let sent = wire::encode(&MoveRef::of(self.relocation())).and_then(|body| {
            let peer = inner.route_to(to)?;
            inner.send_control(&peer, self.shape.commands().abort, body)
        });
        if let Err(e) = sent {
            tracing::debug!(error = %e, "relocation abort not sent to the target");
        }
    }
}

/// How often the source relays what it held since its last relay while it waits for the
/// cutover's answer.
const RELAY_DURING_CUTOVER: std::time::Duration = std::time::Duration::from_millis(20);

/// How many times the adapter's capture is tried (each a job of its own on the sealed
/// activation) before the unit's state is incompatible (28 §8 `StateIncompatible`).
pub(crate) const CAPTURE_ATTEMPTS: u32 = 3;

/// The adapter's capture of `live`, tried up to [`CAPTURE_ATTEMPTS`] times while the adapter
/// fails (an activation that refuses the job, or a shutdown, ends it at once): every attempt
/// failing is `StateIncompatible`.
pub(in crate::relocation) async fn capture_retried(
    live: &dyn LiveObject,
    key: &ObjectKey,
) -> Result<Option<Bytes>, ZLinkError> {
    let mut attempt = 1;
    loop {
        match live.capture().await {
            Err(e) if e.kind() == ErrorKind::InternalFailure => {
                if attempt >= CAPTURE_ATTEMPTS {
                    return Err(ZLinkError::StateIncompatible {
                        target: crate::objects::host::what(key.0, &key.1),
                        reason: ErrorMessage::sanitise(&format!(
                            "the capture failed {attempt} times, last: {e}"
                        )),
                    });
                }
                tracing::warn!(attempt, error = %e, "relocation capture failed: trying again");
                attempt += 1;
            }
            other => return other,
        }
    }
}
