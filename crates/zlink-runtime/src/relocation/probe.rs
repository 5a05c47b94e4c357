//! Fail points and observation points of the relocation layer (issue 39): the steps of a move
//! a test or the simulation pauses, delays or breaks on purpose, installed from outside on a
//! running node instead of compiled into it for tests only.
//!
//! A node's [`Probe`] starts disarmed: every point then costs one relaxed atomic load and does
//! nothing. Installing a hook (or asking for a lost reply) arms it for the node's lifetime; a
//! hook runs inside the step it names and the step waits for it. The one count kept
//! unconditionally (owner changes started) is a relaxed increment.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use super::Relocations;
use crate::messaging::{BoxFuture, ZLinkError};
use crate::objects::host::ObjectKey;

/// A callback a target runs at a step of a move (the step waits for it).
pub(crate) type TargetHook = Arc<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>;

/// A callback run as a message for the live object `key` reaches the gate.
pub(crate) type ArrivalHook = Arc<dyn Fn(&Relocations, &ObjectKey) + Send + Sync>;

/// A callback run after a stage record applied (the move waits for it).
pub(crate) type StageHook =
    Arc<dyn Fn(zlink_relocation::unit::RecordedStage) -> BoxFuture<'static, ()> + Send + Sync>;

/// The fail points and observation points of one object node's relocations.
#[derive(Default)]
pub(crate) struct Probe {
    /// Whether anything was ever installed (the disarmed fast path).
    armed: AtomicBool,
    /// Runs after each stage record this node's moves wrote.
    stage: Mutex<Option<StageHook>>,
    /// The next cutover answer this node's moves get is lost on its way back (the target's
    /// NewOwner ran; the source sees no reply).
    lose_cutover_reply: AtomicBool,
    /// How long this node, as a target, waits for a unit's ready (`None`: the default).
    restore_wait: Mutex<Option<Duration>>,
    /// How many owner changes (NewOwner runs) this node, as a target, has started.
    owner_changes_started: AtomicU64,
    /// Runs when a message for a live object reaches the gate, before the gate lock is taken
    /// (a seal can fall right there).
    arrival: Mutex<Option<ArrivalHook>>,
    /// Runs on this node, as a target, once a unit's owner change applied and before its
    /// participants go live (the commit waits for it).
    owner_changed: Mutex<Option<TargetHook>>,
    /// Runs on this node, as a target, as a relayed message arrives, before it is taken (the
    /// command loop waits for it).
    relay: Mutex<Option<TargetHook>>,
}

/// What installs hooks (tests today; reachable to the simulation through the same calls).
#[cfg_attr(
    not(test),
    expect(dead_code, reason = "installed by the relocation tests only so far")
)]
impl Probe {
    fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    /// Installs (or, with `None`, removes) the hook run after each stage record.
    pub(crate) fn on_stage(&self, hook: Option<StageHook>) {
        *self.stage.lock() = hook;
        self.arm();
    }

    /// Makes the next cutover answer of this node's moves lost on its way back.
    pub(crate) fn lose_next_cutover_reply(&self) {
        self.lose_cutover_reply.store(true, Ordering::SeqCst);
        self.arm();
    }

    /// Sets how long this node, as a target, waits for a unit's ready.
    pub(crate) fn wait_for_ready(&self, wait: Option<Duration>) {
        *self.restore_wait.lock() = wait;
        self.arm();
    }

    /// Installs (or removes) the hook run as a message reaches the gate.
    pub(crate) fn on_arrival(&self, hook: Option<ArrivalHook>) {
        *self.arrival.lock() = hook;
        self.arm();
    }

    /// Installs (or removes) the hook run once a unit's owner change applied on this target.
    pub(crate) fn on_owner_changed(&self, hook: Option<TargetHook>) {
        *self.owner_changed.lock() = hook;
        self.arm();
    }

    /// Installs (or removes) the hook run as a relayed message arrives on this target.
    pub(crate) fn on_relay(&self, hook: Option<TargetHook>) {
        *self.relay.lock() = hook;
        self.arm();
    }

    /// The owner changes this node, as a target, has started.
    pub(crate) fn owner_changes_started(&self) -> u64 {
        self.owner_changes_started.load(Ordering::SeqCst)
    }
}

/// The points the relocation code runs through.
impl Probe {
    fn armed(&self) -> bool {
        self.armed.load(Ordering::Relaxed)
    }

    /// Point: a stage record applied.
    pub(crate) async fn after_stage(&self, stage: zlink_relocation::unit::RecordedStage) {
        if !self.armed() {
            return;
        }
        let hook = self.stage.lock().clone();
        if let Some(hook) = hook {
            hook(stage).await;
        }
    }

    /// Point: a cutover answer came back — `answer`, or no answer in time when a lost one
    /// was asked for.
    pub(crate) fn cutover_answer<T>(&self, answer: Result<T, ZLinkError>) -> Result<T, ZLinkError> {
        if self.armed() && self.lose_cutover_reply.swap(false, Ordering::SeqCst) {
            tracing::info!(
                applied = answer.is_ok(),
                "relocation probe: the cutover answer is lost"
            );
            return Err(ZLinkError::ReplyTimeout {
                timeout: Duration::ZERO,
            });
        }
        answer
    }

    /// Point: how long a target waits for a unit's ready, when set.
    pub(crate) fn restore_wait(&self) -> Option<Duration> {
        if !self.armed() {
            return None;
        }
        *self.restore_wait.lock()
    }

    /// Point: a target starts an owner change.
    pub(crate) fn owner_change_started(&self) {
        self.owner_changes_started.fetch_add(1, Ordering::Relaxed);
    }

    /// Point: a message for the live object `key` reaches the gate.
    pub(crate) fn arrival(&self, relocations: &Relocations, key: &ObjectKey) {
        if !self.armed() {
            return;
        }
        let hook = self.arrival.lock().clone();
        if let Some(hook) = hook {
            hook(relocations, key);
        }
    }

    /// Point: a unit's owner change applied on this target.
    pub(crate) async fn owner_changed(&self) {
        if !self.armed() {
            return;
        }
        let hook = self.owner_changed.lock().clone();
        if let Some(hook) = hook {
            hook().await;
        }
    }

    /// Point: a relayed message arrives on this target.
    pub(crate) async fn relay(&self) {
        if !self.armed() {
            return;
        }
        let hook = self.relay.lock().clone();
        if let Some(hook) = hook {
            hook().await;
        }
    }
}
