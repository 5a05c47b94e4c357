//! The route cache of one object node (spec 21 §7.3): where the Ready incarnation of an object
//! was found, kept at most `routeCacheMaxAge` (0 disables it). Each entry keeps what the read
//! showed — the owner node and host run, the ObjectGeneration, the AuthorityOwnerGeneration
//! and the StoreVersion. Missing and Creating records and Store errors are never cached. An
//! entry is dropped when a later read of the record shows another StoreVersion (versions are
//! opaque and compared only for equality, spec 22 §3) or another generation, when a call
//! through it ends `NotFound` or `Unavailable`, and with every entry of a host run whose
//! owner lease is gone (discovery no longer lists it). Shared by every manager of the node.
//! It holds only objects owned by other nodes: a call to an activation live on this node finds
//! it in the live set first, and a read naming this node is not cached (an idle Actor here
//! costs no entry).
//!
//! An entry never outlives the last time its owner accepts new work (spec 21 §7.3): each
//! owner run has a window, moved forward by every discovery read of its lease
//! (`t0 + (ExpiresAt − StoreNow) − fencingMargin` on this host's clock, `t0` before the read,
//! so never later than the owner's own admission deadline for the mesh's fencing margin); a
//! hit needs both the entry younger than `routeCacheMaxAge` and the window open. An owner
//! whose lease no read has shown yet has a closed window: its routes are read, not cached.
//!
//! A request answered by another node than the one its entry named (the object moved and its
//! new owner answered a followed or relayed request) drops the entry, so the next message reads
//! the record and goes to the new owner directly — unless a one-way was sent through the entry
//! after that request. Such a one-way may still be on its way through the old owner (held, then
//! followed), and a message sent directly could overtake it; everything sent through the entry
//! before the request is ahead of it on that one ordered path, so the reply proves it arrived.
//! The entry then stays (its messages keep being followed, in order) until a request with no
//! one-way after it is answered by the new owner, or the entry ages out. Each entry counts the
//! one-ways sent through it for this ([`RouteCache::one_way_sent`], [`RouteCache::mark`],
//! [`RouteCache::moved`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use zlink_codec::keys::AuthorityKind;
use zlink_codec::{ObjectId, RoutingId};
use zlink_store_spi::StoreVersion;
use zlink_store_spi::entropy::HashMap;

use super::host::ObjectKey;
use zlink_location::{AuthorityHandle, HostRun};

/// One entry: what a hit needs inline (the node, shared; when it was seen), the fence a later
/// read is compared with boxed, so the map stays compact.
#[derive(Debug, Clone)]
struct Route {
    node: Arc<RoutingId>,
    at: Instant,
    /// The owner run's admission window (shared by every entry of that run).
    owner: Arc<Window>,
    fence: Box<Fence>,
    /// One-way messages queued to `node` through this entry (kept when a read renews it).
    one_ways: u64,
}

/// What the entry of an object showed when a request to its owner was queued: the node and
/// how many one-ways had been sent through it ([`RouteCache::mark`]).
#[derive(Debug, Clone)]
pub(crate) struct RouteMark {
    node: Arc<RoutingId>,
    one_ways: u64,
}

/// The last time one owner run accepts new work, in nanoseconds after the cache's epoch
/// (0: not known, closed). It only moves forward.
#[derive(Debug, Default)]
struct Window(AtomicU64);

impl Window {
    fn open_at(&self, now: u64) -> bool {
        now < self.0.load(Ordering::Acquire)
    }

    fn extend(&self, until: u64) {
        self.0.fetch_max(until, Ordering::AcqRel);
    }
}

#[derive(Debug, Clone)]
struct Fence {
    run: HostRun,
    object_generation: u64,
    owner_generation: u64,
    version: StoreVersion,
}

/// What a Ready read showed of an object's owner.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) node: RoutingId,
    pub(crate) run: HostRun,
    pub(crate) object_generation: u64,
    pub(crate) owner_generation: u64,
    pub(crate) version: StoreVersion,
}

/// Cached routes by authority kind and global id.
#[derive(Debug)]
pub(crate) struct RouteCache {
    max_age: Duration,
    /// Actors, then Spots: a lookup borrows the id (no key is built per hit).
    by_id: [Mutex<HashMap<ObjectId, Route>>; 2],
    /// The admission window of every owner run an entry or a lease read named.
    owners: Mutex<HashMap<HostRun, Arc<Window>>>,
    /// The origin of the windows' times.
    epoch: Instant,
}

fn slot(kind: AuthorityKind) -> usize {
    match kind {
        AuthorityKind::Actor => 0,
        AuthorityKind::Spot => 1,
    }
}

impl RouteCache {
    pub(crate) fn new(max_age: Duration) -> Self {
        Self {
            max_age,
            by_id: [
                Mutex::new(HashMap::default()),
                Mutex::new(HashMap::default()),
            ],
            owners: Mutex::new(HashMap::default()),
            epoch: Instant::now(),
        }
    }

    /// Nanoseconds from the epoch to `at` (0 before it, saturating far ahead).
    fn since_epoch(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// The window of `run`, created closed when unknown.
    fn window(&self, run: &HostRun) -> Arc<Window> {
        self.owner(run).1
    }

    /// `run` as the owners' table keeps it (its owner id shared by every entry of the run, not
    /// a copy decoded from each record) and its window, created closed when unknown.
    fn owner(&self, run: &HostRun) -> (HostRun, Arc<Window>) {
        let mut owners = self.owners.lock();
        if let Some((kept, window)) = owners.get_key_value(run) {
            return (kept.clone(), Arc::clone(window));
        }
        let window = Arc::<Window>::default();
        owners.insert(run.clone(), Arc::clone(&window));
        (run.clone(), window)
    }

    /// A read of `run`'s owner lease shows it accepts new work until `until` (later reads
    /// only move this forward): its routes may be served until then.
    pub(crate) fn owner_admits_until(&self, run: &HostRun, until: Instant) {
        self.window(run).extend(self.since_epoch(until));
    }

    /// Whether a discovery read showed `run`'s owner lease admitting new work until later
    /// than now (its window is open).
    pub(crate) fn owner_admits(&self, run: &HostRun) -> bool {
        let now = self.since_epoch(Instant::now());
        self.owners.lock().get(run).is_some_and(|w| w.open_at(now))
    }

    /// The cached owner node of `key`, if the entry is younger than the maximum age and its
    /// owner still accepts new work (its window is open).
    pub(crate) fn get(&self, key: &ObjectKey) -> Option<Arc<RoutingId>> {
        self.get_by(key.0, &key.1)
    }

    /// [`get`](Self::get) by kind and borrowed id.
    pub(crate) fn get_by(&self, kind: AuthorityKind, id: &ObjectId) -> Option<Arc<RoutingId>> {
        let now = Instant::now();
        let mut map = self.by_id[slot(kind)].lock();
        match map.get(id) {
            Some(r)
                if now.saturating_duration_since(r.at) < self.max_age
                    && r.owner.open_at(self.since_epoch(now)) =>
            {
                Some(Arc::clone(&r.node))
            }
            Some(_) => {
                map.remove(id);
                None
            }
            None => None,
        }
    }

    /// Remembers the owner of the Ready record `handle` (nothing when the cache is disabled).
    pub(crate) fn remember(&self, key: &ObjectKey, handle: &AuthorityHandle) {
        self.insert(
            key,
            Seen {
                node: handle.node().routing_id,
                run: handle.owner().clone(),
                object_generation: handle.object_generation().get(),
                owner_generation: handle.authority_owner_generation().get(),
                version: handle.version().clone(),
            },
        );
    }

    /// Remembers what a read of `key` showed (nothing when the cache is disabled).
    pub(crate) fn insert(&self, key: &ObjectKey, seen: Seen) {
        if self.max_age.is_zero() {
            return;
        }
        let (run, owner) = self.owner(&seen.run);
        let mut map = self.by_id[slot(key.0)].lock();
        let one_ways = map
            .get(&key.1)
            .filter(|r| *r.node == seen.node)
            .map_or(0, |r| r.one_ways);
        map.insert(
            key.1.clone(),
            Route {
                node: Arc::new(seen.node),
                at: Instant::now(),
                owner,
                fence: Box::new(Fence {
                    run,
                    object_generation: seen.object_generation,
                    owner_generation: seen.owner_generation,
                    version: seen.version,
                }),
                one_ways,
            },
        );
    }

    /// A one-way for `key` was queued to `node`: counted on the entry when it names `node`.
    /// Called once the send is queued on the connection, so a [`mark`](Self::mark) taken
    /// before a request is queued never counts a one-way queued after that request.
    pub(crate) fn one_way_sent(&self, key: &ObjectKey, node: &RoutingId) {
        if let Some(r) = self.by_id[slot(key.0)].lock().get_mut(&key.1) {
            if *r.node == *node {
                r.one_ways += 1;
            }
        }
    }

    /// What the entry of `key` shows now, taken before a request to `node` is queued (`None`
    /// when no entry names `node`).
    pub(crate) fn mark(&self, key: &ObjectKey, node: &RoutingId) -> Option<RouteMark> {
        self.by_id[slot(key.0)]
            .lock()
            .get(&key.1)
            .filter(|r| *r.node == *node)
            .map(|r| RouteMark {
                node: Arc::clone(&r.node),
                one_ways: r.one_ways,
            })
    }

    /// A request sent with `mark` was answered by another node (the object moved there): the
    /// entry is dropped unless it names the node the request went to and a one-way was sent
    /// through it after the request (see the module doc).
    pub(crate) fn moved(&self, key: &ObjectKey, mark: Option<&RouteMark>) {
        let mut map = self.by_id[slot(key.0)].lock();
        let still_on_its_way = match (map.get(&key.1), mark) {
            (Some(r), Some(m)) => r.node == m.node && r.one_ways != m.one_ways,
            _ => false,
        };
        if !still_on_its_way {
            map.remove(&key.1);
        }
    }

    /// A read of `key` returned `handle` (or nothing): an entry that does not match what the
    /// read shows — another StoreVersion, ObjectGeneration or AuthorityOwnerGeneration, or a
    /// missing record — is dropped.
    pub(crate) fn observe(&self, key: &ObjectKey, handle: Option<&AuthorityHandle>) {
        let mut map = self.by_id[slot(key.0)].lock();
        let stale = match (map.get(&key.1), handle) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(r), Some(h)) => {
                r.fence.version != *h.version()
                    || r.fence.object_generation != h.object_generation().get()
                    || r.fence.owner_generation != h.authority_owner_generation().get()
            }
        };
        if stale {
            map.remove(&key.1);
        }
    }

    /// Drops the entry of `key`.
    pub(crate) fn forget(&self, key: &ObjectKey) {
        self.by_id[slot(key.0)].lock().remove(&key.1);
    }

    /// Drops every entry owned by `run` (its owner lease is gone), and its window. Returns
    /// how many entries.
    pub(crate) fn forget_run(&self, run: &HostRun) -> usize {
        self.owners.lock().remove(run);
        let mut dropped = 0;
        for m in &self.by_id {
            let mut map = m.lock();
            let before = map.len();
            map.retain(|_, r| &r.fence.run != run);
            dropped += before - map.len();
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zlink_location::{OwnerId, OwnerLeaseGeneration};

    fn run(g: u64) -> HostRun {
        HostRun {
            owner_id: OwnerId::new("owner-a").expect("owner id"),
            lease_generation: OwnerLeaseGeneration::new(g).expect("generation"),
        }
    }

    fn key(id: &str) -> ObjectKey {
        (AuthorityKind::Actor, ObjectId::new(id).expect("id"))
    }

    fn seen(run: &HostRun) -> Seen {
        Seen {
            node: RoutingId::new("owner-node").expect("rid"),
            run: run.clone(),
            object_generation: 1,
            owner_generation: 1,
            version: StoreVersion::new("1").expect("version"),
        }
    }

    #[tokio::test]
    async fn a_cached_route_ends_at_its_owners_admission_deadline_before_its_max_age() {
        let cache = RouteCache::new(Duration::from_secs(15));
        let owner = run(1);
        let until = Instant::now() + Duration::from_millis(50);
        cache.owner_admits_until(&owner, until);
        cache.insert(&key("a"), seen(&owner));
        assert!(
            cache.get(&key("a")).is_some(),
            "served while the owner admits"
        );
        tokio::time::sleep_until(until).await;
        assert!(
            cache.get(&key("a")).is_none(),
            "served past the owner's last admission, well inside routeCacheMaxAge"
        );
        // The entry is gone: a window moved forward later does not bring it back.
        cache.owner_admits_until(&owner, Instant::now() + Duration::from_secs(60));
        assert!(cache.get(&key("a")).is_none());
    }

    #[tokio::test]
    async fn a_later_lease_read_moves_the_window_forward_and_an_earlier_one_never_back() {
        let cache = RouteCache::new(Duration::from_secs(15));
        let owner = run(1);
        let first = Instant::now() + Duration::from_millis(50);
        cache.owner_admits_until(&owner, first);
        cache.insert(&key("a"), seen(&owner));
        cache.owner_admits_until(&owner, Instant::now() + Duration::from_secs(60));
        // An older, shorter bound arriving late does not shorten it.
        cache.owner_admits_until(&owner, first);
        tokio::time::sleep_until(first).await;
        assert!(
            cache.get(&key("a")).is_some(),
            "the renewed owner still admits"
        );
    }

    #[tokio::test]
    async fn an_owner_whose_lease_no_read_has_shown_is_not_served_from_the_cache() {
        let cache = RouteCache::new(Duration::from_secs(15));
        let (known, unknown) = (run(1), run(2));
        cache.owner_admits_until(&known, Instant::now() + Duration::from_secs(60));
        cache.insert(&key("a"), seen(&known));
        cache.insert(&key("b"), seen(&unknown));
        assert!(cache.get(&key("a")).is_some());
        assert!(cache.get(&key("b")).is_none());
    }

    #[tokio::test]
    async fn an_answer_from_a_new_owner_keeps_the_route_while_a_later_one_way_may_be_overtaken() {
        let cache = RouteCache::new(Duration::from_secs(15));
        let owner = run(1);
        cache.owner_admits_until(&owner, Instant::now() + Duration::from_secs(60));
        let node = seen(&owner).node;
        cache.insert(&key("a"), seen(&owner));
        // A one-way before the request is ahead of it on the old route.
        cache.one_way_sent(&key("a"), &node);
        let first = cache.mark(&key("a"), &node);
        assert!(first.is_some());
        // One after it may still be on its way through the old owner: the route stays.
        cache.one_way_sent(&key("a"), &node);
        cache.moved(&key("a"), first.as_ref());
        assert!(
            cache.get(&key("a")).is_some(),
            "kept: a one-way followed it"
        );
        // A renewing read keeps the count; a request with no one-way after it drops the entry.
        cache.insert(&key("a"), seen(&owner));
        let second = cache.mark(&key("a"), &node);
        cache.moved(&key("a"), second.as_ref());
        assert!(
            cache.get(&key("a")).is_none(),
            "dropped: nothing followed it"
        );
        // No mark (nothing was cached for that node): dropped as before.
        cache.insert(&key("a"), seen(&owner));
        cache.one_way_sent(&key("a"), &node);
        cache.moved(&key("a"), None);
        assert!(cache.get(&key("a")).is_none());
    }

    #[tokio::test]
    async fn forgetting_a_run_drops_its_entries_and_its_window() {
        let cache = RouteCache::new(Duration::from_secs(15));
        let owner = run(1);
        cache.owner_admits_until(&owner, Instant::now() + Duration::from_secs(60));
        cache.insert(&key("a"), seen(&owner));
        assert_eq!(cache.forget_run(&owner), 1);
        cache.insert(&key("a"), seen(&owner));
        assert!(
            cache.get(&key("a")).is_none(),
            "the window went with the run"
        );
    }
}
