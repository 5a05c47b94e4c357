//! The host-wide local admission deadline and the gate every state-changing operation passes
//! (spec 21 §5).
//!
//! The deadline is computed from one successful register/read/renew of the owner lease: with
//! `t0` the local monotonic time taken *before* the request was sent, and the Store's
//! `StoreNow` and `ExpiresAt` of the result,
//!
//! ```text
//! deadline = t0 + (ExpiresAt - StoreNow) - fencingMargin
//! ```
//!
//! The Store observed `StoreNow` no earlier than `t0`, so network delay can only make the
//! deadline earlier than the lease's real end, never later. A Store failure, a grace period or
//! a per-object deadline never extends it; only a later successful observation of the *same*
//! host run can move it (and only forward).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use zlink_store_spi::StoreTime;

use super::clock::SharedClock;
use super::identity::HostRun;

/// The new work the gate guards (the spec 21 §5 table, plus authority changes in general).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AdmissionOp {
    /// Publishing a MeshNode / ClientServer / fanout descriptor.
    DescriptorPublish,
    /// An automatic routing-id owner change.
    AutomaticRidOwnerChange,
    /// Starting an Actor/Spot/Instance message.
    ObjectMessageStart,
    /// Starting a timer callback.
    TimerStart,
    /// Confirming a factory result in the Store (commit / abort of a creation).
    FactoryResult,
    /// Confirming a restore result in the Store.
    RestoreResult,
    /// A relocation source/target state change (NewOwner included).
    RelocationChange,
    /// Reserving capacity (Reserve, securing relocation target capacity).
    CapacityReservation,
    /// Any other authority change (Preserve, Delete).
    AuthorityChange,
}

impl AdmissionOp {
    /// Every guarded operation.
    pub const ALL: [AdmissionOp; 9] = [
        AdmissionOp::DescriptorPublish,
        AdmissionOp::AutomaticRidOwnerChange,
        AdmissionOp::ObjectMessageStart,
        AdmissionOp::TimerStart,
        AdmissionOp::FactoryResult,
        AdmissionOp::RestoreResult,
        AdmissionOp::RelocationChange,
        AdmissionOp::CapacityReservation,
        AdmissionOp::AuthorityChange,
    ];
}

impl fmt::Display for AdmissionOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Why the gate refused new work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AdmissionRefused {
    /// No owner lease has been acquired yet, or it was released.
    #[error("{op} refused: no owner lease")]
    NoLease {
        /// The refused operation.
        op: AdmissionOp,
    },
    /// The local admission deadline has passed.
    #[error("{op} refused: admission deadline passed {late_by:?} ago")]
    DeadlinePassed {
        /// The refused operation.
        op: AdmissionOp,
        /// How long ago the deadline passed.
        late_by: Duration,
    },
    /// The Store's host-run combination differs from the one this work was admitted under.
    #[error("{op} refused: host run changed")]
    HostRunChanged {
        /// The refused operation.
        op: AdmissionOp,
    },
}

/// Permission for one piece of new work, under one host run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// The operation admitted.
    pub op: AdmissionOp,
    /// The host run it was admitted under.
    pub run: HostRun,
    /// The local monotonic deadline at admission.
    pub deadline: Duration,
}

#[derive(Debug, Default)]
struct GateState {
    run: Option<HostRun>,
    deadline: Option<Duration>,
    /// The run the gate was closed on: its observations no longer open the gate (a renew in
    /// flight when a loss was noticed must not reopen it); a different run's do.
    fenced: Option<HostRun>,
}

/// The host-wide admission gate (one per host; every location component shares it).
///
/// [`admit`](Self::admit) hands out an [`Admission`] naming the host run (for Store work);
/// [`is_open`](Self::is_open) is the lock-free check the object runtime makes at the start of
/// every message job: one atomic load and one monotonic clock read.
pub struct AdmissionGate {
    clock: SharedClock,
    fencing_margin: Duration,
    state: Mutex<GateState>,
    /// The deadline in nanoseconds of the monotonic clock, mirrored from `state` (0: closed,
    /// which no clock reading is before).
    open_until: AtomicU64,
}

impl fmt::Debug for AdmissionGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.state.lock();
        f.debug_struct("AdmissionGate")
            .field("run", &s.run)
            .field("deadline", &s.deadline)
            .field("fencing_margin", &self.fencing_margin)
            .finish()
    }
}

impl AdmissionGate {
    /// A closed gate (no lease yet).
    pub fn new(clock: SharedClock, fencing_margin: Duration) -> Self {
        AdmissionGate {
            clock,
            fencing_margin,
            state: Mutex::new(GateState::default()),
            open_until: AtomicU64::new(0),
        }
    }

    /// Whether new work is admitted now: a lease is held and its deadline has not passed
    /// (the same answer [`admit`](Self::admit) gives, without the host run). Lock-free.
    pub fn is_open(&self) -> bool {
        let until = self.open_until.load(Ordering::Acquire);
        u64::try_from(self.clock.now().as_nanos()).is_ok_and(|now| now < until)
    }

    /// The local monotonic time now (the `t0` to take before a lease request).
    pub fn now(&self) -> Duration {
        self.clock.now()
    }

    /// Admits `op` if the deadline has not passed, else refuses.
    pub fn admit(&self, op: AdmissionOp) -> Result<Admission, AdmissionRefused> {
        let s = self.state.lock();
        let (Some(run), Some(deadline)) = (s.run.clone(), s.deadline) else {
            return Err(AdmissionRefused::NoLease { op });
        };
        let now = self.clock.now();
        if now >= deadline {
            return Err(AdmissionRefused::DeadlinePassed {
                op,
                late_by: now - deadline,
            });
        }
        Ok(Admission { op, run, deadline })
    }

    /// Admits `op` only under the given host run.
    pub fn admit_for(&self, op: AdmissionOp, run: &HostRun) -> Result<Admission, AdmissionRefused> {
        let a = self.admit(op)?;
        if &a.run != run {
            return Err(AdmissionRefused::HostRunChanged { op });
        }
        Ok(a)
    }

    /// The current deadline, if any.
    pub fn deadline(&self) -> Option<Duration> {
        self.state.lock().deadline
    }

    /// The current host run, if any.
    pub fn host_run(&self) -> Option<HostRun> {
        self.state.lock().run.clone()
    }

    /// Records a successful lease observation. `t0` is the local monotonic time taken before the
    /// request; `store_now` and `expires_at` come from its result. A different host run replaces
    /// the state; the same run only ever moves the deadline forward (every observation is a safe
    /// bound on its own). An observation of the run the gate was [closed](Self::close) on is
    /// ignored: the gate stays closed and `t0` (a deadline already reached) is returned.
    pub fn observe(
        &self,
        run: &HostRun,
        t0: Duration,
        store_now: StoreTime,
        expires_at: StoreTime,
    ) -> Duration {
        let remaining = Duration::from_millis(store_now.millis_until(expires_at));
        let deadline = t0 + remaining.saturating_sub(self.fencing_margin);
        let mut s = self.state.lock();
        if s.fenced.as_ref() == Some(run) {
            return t0;
        }
        s.fenced = None;
        if s.run.as_ref() == Some(run) {
            let d = s.deadline.map_or(deadline, |cur| cur.max(deadline));
            s.deadline = Some(d);
            self.mirror(Some(d));
            d
        } else {
            s.run = Some(run.clone());
            s.deadline = Some(deadline);
            self.mirror(Some(deadline));
            deadline
        }
    }

    /// Mirrors the deadline for [`is_open`](Self::is_open) (called under the state lock).
    fn mirror(&self, deadline: Option<Duration>) {
        let nanos = deadline.map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        self.open_until.store(nanos, Ordering::Release);
    }

    /// Closes the gate (lease released or lost, or Store data loss noticed): every later
    /// admission is refused until a lease of *another* run is observed — an observation of the
    /// run it was closed on (a renew that was in flight) never reopens it.
    pub fn close(&self) {
        let mut s = self.state.lock();
        s.deadline = None;
        if let Some(run) = s.run.take() {
            s.fenced = Some(run);
        }
        self.mirror(None);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clock::{ManualMonotonic, MonotonicClock};
    use crate::generation::OwnerLeaseGeneration;
    use crate::identity::OwnerId;

    fn run(g: u64) -> HostRun {
        HostRun {
            owner_id: OwnerId::new("owner-a").expect("id"),
            lease_generation: OwnerLeaseGeneration::new(g).expect("gen"),
        }
    }

    #[test]
    fn deadline_is_t0_plus_remaining_minus_margin_and_admits_strictly_before_it() {
        let clock = ManualMonotonic::new();
        let gate = AdmissionGate::new(Arc::new(clock.clone()), Duration::from_secs(5));
        assert!(matches!(
            gate.admit(AdmissionOp::TimerStart),
            Err(AdmissionRefused::NoLease { .. })
        ));
        assert!(!gate.is_open());
        let t0 = clock.now();
        // The response arrives 2 s later: the deadline does not move with it.
        clock.advance(Duration::from_secs(2));
        let d = gate.observe(
            &run(1),
            t0,
            StoreTime::from_millis(1_000_000),
            StoreTime::from_millis(1_015_000),
        );
        assert_eq!(d, Duration::from_secs(10));
        clock.advance(Duration::from_millis(7_999));
        assert!(gate.admit(AdmissionOp::TimerStart).is_ok());
        assert!(gate.is_open());
        clock.advance(Duration::from_millis(1));
        assert!(matches!(
            gate.admit(AdmissionOp::TimerStart),
            Err(AdmissionRefused::DeadlinePassed { .. })
        ));
        assert!(!gate.is_open(), "the lock-free check agrees with admit");
    }

    #[test]
    fn a_remaining_time_below_the_margin_admits_nothing() {
        let clock = ManualMonotonic::new();
        let gate = AdmissionGate::new(Arc::new(clock.clone()), Duration::from_secs(5));
        gate.observe(
            &run(1),
            clock.now(),
            StoreTime::from_millis(0),
            StoreTime::from_millis(4_000),
        );
        assert!(gate.admit(AdmissionOp::CapacityReservation).is_err());
    }

    #[test]
    fn an_older_observation_never_pulls_the_deadline_back_and_a_new_run_replaces_it() {
        let clock = ManualMonotonic::new();
        let gate = AdmissionGate::new(Arc::new(clock.clone()), Duration::from_secs(5));
        let t_old = clock.now();
        clock.advance(Duration::from_secs(3));
        let t_new = clock.now();
        let now = StoreTime::from_millis(0);
        let exp = StoreTime::from_millis(15_000);
        assert_eq!(
            gate.observe(&run(1), t_new, now, exp),
            Duration::from_secs(13)
        );
        assert_eq!(
            gate.observe(&run(1), t_old, now, exp),
            Duration::from_secs(13)
        );
        // A different host run (a takeover) is a fresh start.
        assert_eq!(
            gate.observe(&run(2), t_old, now, exp),
            Duration::from_secs(10)
        );
        assert!(matches!(
            gate.admit_for(AdmissionOp::FactoryResult, &run(1)),
            Err(AdmissionRefused::HostRunChanged { .. })
        ));
        assert!(gate.is_open());
        gate.close();
        assert!(gate.admit(AdmissionOp::FactoryResult).is_err());
        assert!(!gate.is_open());
    }

    #[test]
    fn a_closed_gate_reopens_only_for_another_run() {
        let clock = ManualMonotonic::new();
        let gate = AdmissionGate::new(Arc::new(clock.clone()), Duration::from_secs(5));
        let now = StoreTime::from_millis(0);
        let exp = StoreTime::from_millis(15_000);
        gate.observe(&run(1), clock.now(), now, exp);
        gate.close();
        // A renew of the closed run that was in flight answers now: ignored.
        assert_eq!(gate.observe(&run(1), clock.now(), now, exp), clock.now());
        assert!(!gate.is_open());
        assert!(matches!(
            gate.admit(AdmissionOp::TimerStart),
            Err(AdmissionRefused::NoLease { .. })
        ));
        // The takeover's new run opens it.
        assert_eq!(
            gate.observe(&run(2), clock.now(), now, exp),
            Duration::from_secs(10)
        );
        assert!(gate.is_open());
        gate.close();
        assert!(!gate.is_open());
        gate.observe(&run(3), clock.now(), now, exp);
        assert!(gate.is_open());
    }
}
