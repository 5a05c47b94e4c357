//! The jobs waiting for a batch, kept so that forming one touches only the jobs it takes (and
//! O(1) per queue it passes over), never the whole waiting set.
//!
//! - Every job gets a sequence number when it first arrives; a job sent back (a retry) keeps
//!   it, so it goes back to its place.
//! - **Per own key**, the waiting jobs on that key in order. Only the first of them can go;
//!   a job is *ready* once it is first on every key it owns, so jobs on one key keep their
//!   order and never share a batch.
//! - **Per lane** — the set of shared rows a job writes (counters, allocation rows) — the ready
//!   jobs in order. A lane one of whose rows is locked by a batch in flight is passed over as
//!   a whole: its jobs are not looked at.
//! - A ready job one of whose own keys is locked by a batch in flight is *parked* (out of its
//!   lane) the first time a batch finds it, and back in its lane when the worker releases that
//!   key ([`Pending::unpark`]).
//!
//! [`take_batch`] merges the ready jobs of the lanes whose rows are free, in sequence order,
//! skipping a job that clashes with the ones taken (contradicting guards, an own key another
//! job guards or leases), would pass the byte limit, or must go alone (at most a batch's worth
//! of such skips per batch), up to the job limit.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use zlink_store_spi::StoreKey;
use zlink_store_spi::entropy::{HashMap, HashSet};

use super::batch::{EngineConfig, Job, Locks};
use super::plan::{Expect, Shared};

type Seq = u64;
type LaneId = u64;

/// One waiting job and where it stands.
struct Entry {
    job: Job,
    /// Its own keys, each once.
    own: Vec<StoreKey>,
    lane: LaneId,
    /// How many of its own keys an earlier waiting job is on (0: ready).
    behind: usize,
    /// Ready, but held out of its lane until a locked own key is released.
    parked: bool,
}

impl Entry {
    /// Whether it is in its lane's ready set.
    fn listed(&self) -> bool {
        self.behind == 0 && !self.parked
    }
}

/// The jobs writing one set of shared rows.
struct Lane {
    shared: Vec<Shared>,
    /// Its ready jobs (first on every own key, not parked), in order.
    ready: BTreeSet<Seq>,
    /// How many waiting jobs it has (ready or not).
    members: usize,
}

/// The waiting jobs (see the module docs).
#[derive(Default)]
pub(super) struct Pending {
    next_seq: Seq,
    next_lane: LaneId,
    jobs: HashMap<Seq, Entry>,
    keys: HashMap<StoreKey, BTreeSet<Seq>>,
    lanes: HashMap<LaneId, Lane>,
    lane_of: HashMap<Vec<Shared>, LaneId>,
}

impl Pending {
    /// How many jobs wait.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.jobs.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Adds a job: a new one after every other, a job sent back at its first place.
    pub(super) fn push(&mut self, mut job: Job) {
        let seq = match job.seq {
            Some(s) => s,
            None => {
                let s = self.next_seq;
                self.next_seq += 1;
                job.seq = Some(s);
                s
            }
        };
        let mut own: Vec<StoreKey> = job.op.plan().own.iter().map(|(k, _)| k.clone()).collect();
        own.sort();
        own.dedup();
        let mut shared = job.shared.clone();
        shared.sort();
        shared.dedup();
        let lane = match self.lane_of.get(&shared) {
            Some(id) => *id,
            None => {
                let id = self.next_lane;
                self.next_lane += 1;
                self.lane_of.insert(shared.clone(), id);
                self.lanes.insert(
                    id,
                    Lane {
                        shared,
                        ready: BTreeSet::new(),
                        members: 0,
                    },
                );
                id
            }
        };
        let mut behind = 0;
        let mut overtaken = Vec::new();
        for k in &own {
            let queue = self.keys.entry(k.clone()).or_default();
            match queue.first() {
                Some(&first) if first < seq => behind += 1,
                Some(&first) => overtaken.push(first),
                None => {}
            }
            queue.insert(seq);
        }
        for first in overtaken {
            self.demote(first);
        }
        if let Some(l) = self.lanes.get_mut(&lane) {
            l.members += 1;
            if behind == 0 {
                l.ready.insert(seq);
            }
        }
        self.jobs.insert(
            seq,
            Entry {
                job,
                own,
                lane,
                behind,
                parked: false,
            },
        );
    }

    /// `seq` is no longer first on one of its keys (a job sent back went before it).
    fn demote(&mut self, seq: Seq) {
        let Some(e) = self.jobs.get_mut(&seq) else {
            return;
        };
        if e.listed() {
            if let Some(l) = self.lanes.get_mut(&e.lane) {
                l.ready.remove(&seq);
            }
        }
        e.parked = false;
        e.behind += 1;
    }

    /// `seq` is now first on one more of its keys.
    fn promote(&mut self, seq: Seq) {
        let Some(e) = self.jobs.get_mut(&seq) else {
            return;
        };
        e.behind = e.behind.saturating_sub(1);
        if e.listed() {
            if let Some(l) = self.lanes.get_mut(&e.lane) {
                l.ready.insert(seq);
            }
        }
    }

    /// Holds a ready job out of its lane until its locked key is released.
    fn park(&mut self, seq: Seq) {
        let Some(e) = self.jobs.get_mut(&seq) else {
            return;
        };
        if e.listed() {
            if let Some(l) = self.lanes.get_mut(&e.lane) {
                l.ready.remove(&seq);
            }
            e.parked = true;
        }
    }

    /// Takes one job out; the next job on each of its keys moves up.
    fn remove(&mut self, seq: Seq) -> Option<Job> {
        let e = self.jobs.remove(&seq)?;
        if let Some(l) = self.lanes.get_mut(&e.lane) {
            if e.listed() {
                l.ready.remove(&seq);
            }
            l.members -= 1;
            if l.members == 0 {
                if let Some(l) = self.lanes.remove(&e.lane) {
                    self.lane_of.remove(&l.shared);
                }
            }
        }
        for k in &e.own {
            let Some(queue) = self.keys.get_mut(k) else {
                continue;
            };
            let was_first = queue.first() == Some(&seq);
            queue.remove(&seq);
            match queue.first() {
                None => {
                    self.keys.remove(k);
                }
                Some(&next) if was_first => self.promote(next),
                Some(_) => {}
            }
        }
        Some(e.job)
    }

    /// The batches in flight released `keys` (`locks` is what they still hold): a job parked
    /// on one of them goes back to its lane once none of its keys is locked.
    pub(super) fn unpark(&mut self, keys: &[StoreKey], locks: &Locks) {
        for k in keys {
            let Some(&first) = self.keys.get(k).and_then(|q| q.first()) else {
                continue;
            };
            let Some(e) = self.jobs.get_mut(&first) else {
                continue;
            };
            if e.parked && !e.own.iter().any(|k| locks.keys.contains(k)) {
                e.parked = false;
                if let Some(l) = self.lanes.get_mut(&e.lane) {
                    l.ready.insert(first);
                }
            }
        }
    }

    /// Every waiting job, in order.
    #[cfg(test)]
    pub(super) fn iter(&self) -> impl Iterator<Item = &Job> + '_ {
        let mut seqs: Vec<&Seq> = self.jobs.keys().collect();
        seqs.sort();
        seqs.into_iter()
            .filter_map(|s| self.jobs.get(s).map(|e| &e.job))
    }
}

#[cfg(test)]
impl<const N: usize> From<[Job; N]> for Pending {
    fn from(jobs: [Job; N]) -> Self {
        let mut p = Pending::default();
        for j in jobs {
            p.push(j);
        }
        p
    }
}

/// The condition keys of the jobs taken so far, to keep one batch free of contradictions.
#[derive(Default)]
struct Taken {
    own: HashSet<StoreKey>,
    guards: HashMap<StoreKey, Expect>,
    leases: HashSet<StoreKey>,
}

impl Taken {
    fn clashes(&self, job: &Job) -> bool {
        let plan = job.op.plan();
        plan.own.iter().any(|(k, _)| {
            self.own.contains(k) || self.guards.contains_key(k) || self.leases.contains(k)
        }) || plan.guards.iter().any(|(k, e)| {
            self.own.contains(k)
                || self.leases.contains(k)
                || self.guards.get(k).is_some_and(|seen| seen != e)
        }) || plan
            .leases
            .iter()
            .any(|n| self.own.contains(&n.key) || self.guards.contains_key(&n.key))
    }

    fn add(&mut self, job: &Job) {
        let plan = job.op.plan();
        self.own.extend(plan.own.iter().map(|(k, _)| k.clone()));
        self.guards.extend(plan.guards.iter().cloned());
        self.leases
            .extend(plan.leases.iter().map(|n| n.key.clone()));
    }
}

/// Takes waiting jobs, in order, whose rows are not locked by a batch in flight, that are first
/// on each of their own keys, whose keys do not clash with the jobs already taken, and whose
/// size fits one batch; the rest stay waiting, in order. Fewer than `min` jobs: nothing is
/// taken. A job that must go alone (`Job::solo`) goes only into an empty batch, which it
/// closes.
pub(super) fn take_batch(
    pending: &mut Pending,
    locks: &Locks,
    config: &EngineConfig,
    min: usize,
) -> Vec<Job> {
    let mut heads = BinaryHeap::new();
    for (id, lane) in &pending.lanes {
        if lane.shared.iter().any(|s| locks.shared.contains(s)) {
            continue;
        }
        if let Some(&first) = lane.ready.first() {
            heads.push(Reverse((first, *id)));
        }
    }
    let mut picked: Vec<Seq> = Vec::new();
    let mut park = Vec::new();
    let mut taken = Taken::default();
    let mut bytes = 0usize;
    let mut skipped = 0usize;
    while let Some(Reverse((seq, id))) = heads.pop() {
        if picked.len() >= config.max_jobs {
            break;
        }
        if let Some(&next) = pending
            .lanes
            .get(&id)
            .and_then(|l| l.ready.range(seq + 1..).next())
        {
            heads.push(Reverse((next, id)));
        }
        let Some(e) = pending.jobs.get(&seq) else {
            continue;
        };
        if e.own.iter().any(|k| locks.keys.contains(k)) {
            park.push(seq);
            continue;
        }
        let size = e.job.op.plan().size_hint;
        let too_big = !picked.is_empty() && bytes + size > config.max_bytes;
        let alone = e.job.solo && !picked.is_empty();
        if too_big || alone || taken.clashes(&e.job) {
            skipped += 1;
            if skipped >= config.max_jobs.max(1) {
                break;
            }
            continue;
        }
        taken.add(&e.job);
        bytes += size;
        picked.push(seq);
        if e.job.solo {
            break;
        }
    }
    for seq in park {
        pending.park(seq);
    }
    if picked.len() < min.max(1) {
        return Vec::new();
    }
    picked
        .into_iter()
        .filter_map(|seq| pending.remove(seq))
        .collect()
}

#[cfg(test)]
#[path = "pending_tests.rs"]
mod tests;
