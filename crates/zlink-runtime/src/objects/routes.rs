//! The route cache of one object node (spec 21 §7.3): where the Ready incarnation of an object
//! was found, kept at most `routeCacheMaxAge` (0 disables it). Each entry keeps what the read
//! showed — the owner node and host run, the ObjectGeneration, the AuthorityOwnerGeneration
//! and the StoreVersion. Missing and Creating records and Store errors are never cached. An
//! entry is dropped when a later read of the record shows another StoreVersion (versions are
//! opaque and compared only for equality, spec 22 §3) or another generation, when a call
//! through it ends `NotFound` or `Unavailable`, and with every entry of a host run whose
//! owner lease is gone (discovery no longer lists it). Shared by every manager of the node.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use zlink_codec::RoutingId;
use zlink_store_spi::StoreVersion;

use super::host::ObjectKey;
use crate::location::{AuthorityHandle, HostRun};

#[derive(Debug, Clone)]
struct Route {
    node: RoutingId,
    run: HostRun,
    object_generation: u64,
    owner_generation: u64,
    version: StoreVersion,
    at: Instant,
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
    by_id: Mutex<HashMap<ObjectKey, Route>>,
}

impl RouteCache {
    pub(crate) fn new(max_age: Duration) -> Self {
        Self {
            max_age,
            by_id: Mutex::new(HashMap::new()),
        }
    }

    /// The cached owner node of `key`, if the entry is younger than the maximum age.
    pub(crate) fn get(&self, key: &ObjectKey) -> Option<RoutingId> {
        let mut map = self.by_id.lock();
        match map.get(key) {
            Some(r) if r.at.elapsed() < self.max_age => Some(r.node.clone()),
            Some(_) => {
                map.remove(key);
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
        self.by_id.lock().insert(
            key.clone(),
            Route {
                node: seen.node,
                run: seen.run,
                object_generation: seen.object_generation,
                owner_generation: seen.owner_generation,
                version: seen.version,
                at: Instant::now(),
            },
        );
    }

    /// A read of `key` returned `handle` (or nothing): an entry that does not match what the
    /// read shows — another StoreVersion, ObjectGeneration or AuthorityOwnerGeneration, or a
    /// missing record — is dropped.
    pub(crate) fn observe(&self, key: &ObjectKey, handle: Option<&AuthorityHandle>) {
        let mut map = self.by_id.lock();
        let stale = match (map.get(key), handle) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(r), Some(h)) => {
                r.version != *h.version()
                    || r.object_generation != h.object_generation().get()
                    || r.owner_generation != h.authority_owner_generation().get()
            }
        };
        if stale {
            map.remove(key);
        }
    }

    /// Drops the entry of `key`.
    pub(crate) fn forget(&self, key: &ObjectKey) {
        self.by_id.lock().remove(key);
    }

    /// Drops every entry owned by `run` (its owner lease is gone). Returns how many.
    pub(crate) fn forget_run(&self, run: &HostRun) -> usize {
        let mut map = self.by_id.lock();
        let before = map.len();
        map.retain(|_, r| &r.run != run);
        before - map.len()
    }
}
