//! The route cache of one object node (spec 21 §7.3): where the Ready incarnation of an object
//! was found, kept at most `routeCacheMaxAge` (0 disables it). Missing and Creating records and
//! Store errors are never cached. An entry is dropped when a call through it ends `NotFound` or
//! `Unavailable`, and every entry of a host run is dropped when that run's owner lease is gone
//! (discovery no longer lists it). Shared by every manager of the node.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use zlink_codec::{ObjectId, RoutingId};

use crate::location::HostRun;

#[derive(Debug, Clone)]
struct Route {
    node: RoutingId,
    run: HostRun,
    at: Instant,
}

/// Cached routes by global id.
#[derive(Debug)]
pub(crate) struct RouteCache {
    max_age: Duration,
    by_id: Mutex<HashMap<ObjectId, Route>>,
}

impl RouteCache {
    pub(crate) fn new(max_age: Duration) -> Self {
        Self {
            max_age,
            by_id: Mutex::new(HashMap::new()),
        }
    }

    /// The cached owner node of `id`, if the entry is younger than the maximum age.
    pub(crate) fn get(&self, id: &ObjectId) -> Option<RoutingId> {
        let mut map = self.by_id.lock();
        match map.get(id) {
            Some(r) if r.at.elapsed() < self.max_age => Some(r.node.clone()),
            Some(_) => {
                map.remove(id);
                None
            }
            None => None,
        }
    }

    /// Remembers the owner of a Ready record (nothing when the cache is disabled).
    pub(crate) fn remember(&self, id: &ObjectId, node: &RoutingId, run: &HostRun) {
        if self.max_age.is_zero() {
            return;
        }
        self.by_id.lock().insert(
            id.clone(),
            Route {
                node: node.clone(),
                run: run.clone(),
                at: Instant::now(),
            },
        );
    }

    /// Drops the entry of `id`.
    pub(crate) fn forget(&self, id: &ObjectId) {
        self.by_id.lock().remove(id);
    }

    /// Drops every entry owned by `run` (its owner lease is gone). Returns how many.
    pub(crate) fn forget_run(&self, run: &HostRun) -> usize {
        let mut map = self.by_id.lock();
        let before = map.len();
        map.retain(|_, r| &r.run != run);
        before - map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::location::{OwnerId, OwnerLeaseGeneration};

    fn run(n: u8) -> HostRun {
        HostRun {
            owner_id: OwnerId::new(format!("owner-{n}")).unwrap(),
            lease_generation: OwnerLeaseGeneration::MIN,
        }
    }

    #[tokio::test]
    async fn entries_expire_at_the_maximum_age_and_with_their_run() {
        let cache = RouteCache::new(Duration::from_millis(50));
        let (a, b) = (ObjectId::new("a").unwrap(), ObjectId::new("b").unwrap());
        let node = RoutingId::new(vec![1]).unwrap();
        cache.remember(&a, &node, &run(1));
        cache.remember(&b, &node, &run(2));
        assert_eq!(cache.get(&a), Some(node.clone()));
        assert_eq!(cache.forget_run(&run(1)), 1, "the dead run's entries go");
        assert_eq!(cache.get(&a), None);
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert_eq!(cache.get(&b), None, "no entry outlives routeCacheMaxAge");
    }

    #[test]
    fn a_zero_maximum_age_disables_the_cache() {
        let cache = RouteCache::new(Duration::ZERO);
        let a = ObjectId::new("a").unwrap();
        cache.remember(&a, &RoutingId::new(vec![1]).unwrap(), &run(1));
        assert_eq!(cache.get(&a), None);
    }
}
