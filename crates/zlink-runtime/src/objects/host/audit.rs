//! Held activations checked against the Store (issue 36: "held activations are verified"): a
//! bounded, paged pass that closes an activation whose record the Store no longer holds.
//!
//! The host's own write verification (`zlink-location`, `written.rs`) catches a lost write of
//! this host; this pass catches the rest — a record deleted or replaced by something else (an
//! operator, another host's lost or stray write, a bug) while the activation here keeps
//! answering. Every tick (the owner lease renew interval) it reads the records of the next
//! page of the pass:
//!
//! - an activation is **wrong** when its record is missing, holds another incarnation (an
//!   ObjectGeneration other than the one this activation runs), or names another owner run
//!   than the one it named when the activation went live. None of these ever turns back into
//!   this activation's record (an activation enters the live set only after its creation or
//!   owner change committed; generations only grow; a record that moved away from this run
//!   does not come back to it), so one read decides. After a Store rollback a re-creation
//!   elsewhere can carry the *same* ObjectGeneration: the owner comparison catches it. The
//!   owner is not compared for a `SpotWide` member Actor: its own record follows its Spot's
//!   owner only after the move, in the background;
//! - an activation a relocation covers is never judged (the move decides: a source keeps its
//!   sealed activation while the record already names the target);
//! - a wrong activation that is still exactly the one read (the same `Arc`, the same
//!   generation) is **closed**: it leaves the live set and its route-cache entry, and closes
//!   without a location change (its timers stop with it). Later messages are answered by the
//!   record;
//! - a read the Store does not answer judges nothing (the pass goes on next tick).
//!
//! Every other read of a record on this node judges the same way
//! ([`ObjectHost::close_if_orphaned`]): a `find`, a `get_or_create` or a message's owner read
//! that shows the activation here wrong closes it at once, so a caller here that has seen the
//! new incarnation never runs a message on the old one (a call to an object live here goes to
//! the live activation without reading the record). The activation is taken before the read
//! starts, so a read older than the activation never judges it.
//!
//! Cost: one batched Store read per [`PAGE`] activations, at most [`PAGES_PER_TICK`] pages
//! per renew interval. A pass over `N` activations takes `ceil(N / (PAGE × PAGES_PER_TICK))`
//! ticks, so an activation whose record went away is closed within that many renew intervals
//! plus one. The pass snapshots the keys of the live set once per pass (key, kind,
//! generation), not per tick.

use std::sync::{Arc, Weak};
use std::time::Duration;

use zlink_codec::ObjectId;
use zlink_location::{AuthorityRead, HostRun, ObjectKind};

use super::{LiveObject, ObjectHost, ObjectKey};

/// Activations read per batched Store read.
pub(crate) const PAGE: usize = 1_000;
/// Pages read per tick.
pub(crate) const PAGES_PER_TICK: usize = 4;

/// One activation as a pass sees it: its key, its kind, the incarnation it runs and which
/// activation it is (the address of its `Arc`, so a closed and rebuilt one is not confused
/// with it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Held {
    key: ObjectKey,
    kind: ObjectKind,
    generation: u64,
    /// The run the record named when the activation went live (`None` for a `SpotWide`
    /// member, whose own record follows its Spot's owner only later).
    run: Option<HostRun>,
    activation: usize,
}

impl Held {
    /// The live entry `entry` of `key` as a pass or a read judges it.
    fn of(key: &ObjectKey, entry: &super::LiveEntry) -> Self {
        Self {
            key: key.clone(),
            kind: entry.kind,
            generation: entry.generation,
            run: (!entry.member).then(|| entry.run.clone()),
            activation: address(&entry.object),
        }
    }

    /// Whether `entry` is exactly this activation (the same `Arc`, the same generation).
    fn is(&self, entry: &super::LiveEntry) -> bool {
        entry.generation == self.generation && address(&entry.object) == self.activation
    }
}

/// The pass's state between ticks.
#[derive(Debug, Default)]
pub(crate) struct Audit {
    /// What is left of the current pass.
    pass: Vec<Held>,
}

/// What a read says of one held activation.
fn wrong(held: &Held, read: &AuthorityRead) -> bool {
    match read {
        AuthorityRead::Missing { .. } => true,
        AuthorityRead::Found { handle, .. } => {
            handle.object_generation().get() != held.generation
                || held.run.as_ref().is_some_and(|run| handle.owner() != run)
        }
    }
}

fn address(live: &Arc<dyn LiveObject>) -> usize {
    Arc::as_ptr(live).cast::<()>() as usize
}

impl ObjectHost {
    /// Every live activation as a pass sees it.
    fn held_now(&self) -> Vec<Held> {
        self.live
            .lock()
            .iter()
            .map(|(key, e)| Held::of(key, e))
            .collect()
    }

    /// Whether `held` is still exactly the live activation of its key.
    fn still_held(&self, held: &Held) -> bool {
        self.live.lock().get(&held.key).is_some_and(|e| held.is(e))
    }

    /// Reads the records of `batch`; `None` when the Store did not answer (nothing judged).
    async fn judge(&self, batch: &[Held]) -> Option<Vec<bool>> {
        let objects: Vec<(ObjectKind, ObjectId)> =
            batch.iter().map(|h| (h.kind, h.key.1.clone())).collect();
        match self.location.authority().read_many(&objects).await {
            // A row that cannot be read or decoded judges only itself: not wrong.
            Ok(reads) => Some(
                batch
                    .iter()
                    .zip(&reads)
                    .map(|(h, r)| r.as_ref().is_ok_and(|r| wrong(h, r)))
                    .collect(),
            ),
            Err(e) => {
                tracing::debug!(error = %e, "held-activation audit: the Store did not answer; nothing judged");
                None
            }
        }
    }

    /// The activation of `key` held here now, for a read of its record that starts after
    /// this call ([`Self::close_if_orphaned`]); `None` if none is live.
    pub(crate) fn held_of(&self, key: &ObjectKey) -> Option<Held> {
        self.live.lock().get(key).map(|e| Held::of(key, e))
    }

    /// Judges `held` by `read`, a read of its record that started after `held` was taken
    /// ([`Self::held_of`]): an activation the read shows wrong (its record missing, another
    /// incarnation or another owner run) leaves the live set at once and closes in the
    /// background (the reader may be one of its own jobs). So any read of a record, not only
    /// the audit's pass, ends an orphan it sees: a caller on this node never runs a message on
    /// an instance of a previous incarnation after it has read the new one (spec 21 §7.1).
    /// `true` if it closed.
    pub(crate) fn close_if_orphaned(&self, held: &Held, read: &AuthorityRead) -> bool {
        if !wrong(held, read) {
            return false;
        }
        let Some(live) = self.take_orphan(held) else {
            return false;
        };
        tokio::spawn(live.close());
        true
    }

    /// Closes `held` if it is still the live activation of its key and no relocation covers
    /// it; `true` if it closed.
    async fn close_orphan(&self, held: &Held) -> bool {
        let Some(live) = self.take_orphan(held) else {
            return false;
        };
        live.close().await;
        true
    }

    /// Removes `held` from the live set and its route-cache entry if it is still the live
    /// activation of its key and no relocation covers it; the activation to close.
    fn take_orphan(&self, held: &Held) -> Option<Arc<dyn LiveObject>> {
        if self.interception.covers(&held.key) {
            return None;
        }
        let live = {
            let mut set = self.live.lock();
            if !set.get(&held.key).is_some_and(|e| held.is(e)) {
                return None;
            }
            set.remove(&held.key).map(|e| e.object)
        }?;
        self.routes.forget(&held.key);
        tracing::warn!(
            object = %super::what(held.key.0, &held.key.1),
            generation = held.generation,
            "a held activation whose record the Store no longer holds (missing, or another incarnation) is closed"
        );
        Some(live)
    }

    /// One tick of the audit: the next page(s) of the pass; every activation found wrong is
    /// closed. Returns how many it closed.
    pub(crate) async fn audit_tick(&self, audit: &mut Audit) -> usize {
        let mut closed = 0;
        if audit.pass.is_empty() {
            audit.pass = self.held_now();
        }
        for _ in 0..PAGES_PER_TICK {
            if audit.pass.is_empty() {
                break;
            }
            let at = audit.pass.len().saturating_sub(PAGE);
            let page: Vec<Held> = audit
                .pass
                .split_off(at)
                .into_iter()
                .filter(|h| self.still_held(h) && !self.interception.covers(&h.key))
                .collect();
            let Some(verdicts) = self.judge(&page).await else {
                break;
            };
            for (h, wrong) in page.iter().zip(verdicts) {
                if wrong && self.close_orphan(h).await {
                    closed += 1;
                }
            }
        }
        closed
    }
}

/// The audit of one node's activations, one tick every `period` (the owner lease renew
/// interval), while the host lives.
pub(crate) async fn run(host: Weak<ObjectHost>, period: Duration) {
    let mut audit = Audit::default();
    loop {
        tokio::time::sleep(period).await;
        let Some(host) = host.upgrade() else {
            return;
        };
        host.audit_tick(&mut audit).await;
    }
}
