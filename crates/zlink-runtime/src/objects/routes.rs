//! The route cache of one object node (spec 21 §7.3): where the Ready incarnation of an object
//! was found, kept at most `routeCacheMaxAge` (0 disables it). Each entry keeps what the read
//! showed — the owner node and host run, the ObjectGeneration, the AuthorityOwnerGeneration
//! and the StoreVersion. Missing and Creating records and Store errors are never cached. An
//! entry is dropped when a later read of the record shows another StoreVersion (versions are
//! opaque and compared only for equality, spec 22 §3) or another generation, when a call
//! through it ends `NotFound` or `Unavailable`, and with every entry of a host run whose
//! owner lease is gone (discovery no longer lists it). Shared by every manager of the node.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use zlink_codec::keys::AuthorityKind;
use zlink_codec::{ObjectId, RoutingId};
use zlink_store_spi::StoreVersion;

use super::host::ObjectKey;
use zlink_location::{AuthorityHandle, HostRun};

/// One entry: what a hit needs inline (the node, shared; when it was seen), the fence a later
/// read is compared with boxed, so the map stays compact.
#[derive(Debug, Clone)]
struct Route {
    node: Arc<RoutingId>,
    at: Instant,
    fence: Box<Fence>,
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
            by_id: [Mutex::new(HashMap::new()), Mutex::new(HashMap::new())],
        }
    }

    /// The cached owner node of `key`, if the entry is younger than the maximum age.
    pub(crate) fn get(&self, key: &ObjectKey) -> Option<Arc<RoutingId>> {
        self.get_by(key.0, &key.1)
    }

    /// [`get`](Self::get) by kind and borrowed id.
    pub(crate) fn get_by(&self, kind: AuthorityKind, id: &ObjectId) -> Option<Arc<RoutingId>> {
        let mut map = self.by_id[slot(kind)].lock();
        match map.get(id) {
            Some(r) if r.at.elapsed() < self.max_age => Some(Arc::clone(&r.node)),
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
        self.by_id[slot(key.0)].lock().insert(
            key.1.clone(),
            Route {
                node: Arc::new(seen.node),
                at: Instant::now(),
                fence: Box::new(Fence {
                    run: seen.run,
                    object_generation: seen.object_generation,
                    owner_generation: seen.owner_generation,
                    version: seen.version,
                }),
            },
        );
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

    /// Drops every entry owned by `run` (its owner lease is gone). Returns how many.
    pub(crate) fn forget_run(&self, run: &HostRun) -> usize {
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
