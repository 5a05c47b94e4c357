//! Object-layer internals for benchmarks outside this crate, behind the non-default `testing`
//! cargo feature. Applications never enable it: nothing here is part of the public API.

use std::sync::Arc;
use std::time::Duration;

use zlink_codec::{ObjectId, RoutingId};

use zlink_codec::keys::AuthorityKind;
use zlink_store_spi::StoreVersion;

use super::routes::{RouteCache, Seen};
use zlink_location::{HostRun, OwnerLeaseGeneration};

/// A node's route cache on its own (`cargo xtask bench objects` measures its hit resolve):
/// every entry belongs to one made-up host run whose admission window never closes, so entries
/// leave only by age (the resolve still checks the window, as a node's does).
#[derive(Debug)]
pub struct RouteCacheBench {
    cache: RouteCache,
    run: HostRun,
    version: StoreVersion,
}

impl RouteCacheBench {
    /// An empty cache whose entries live `max_age` (0 disables it, as `routeCacheMaxAge`).
    pub fn new(max_age: Duration) -> Self {
        let cache = RouteCache::new(max_age);
        let run = HostRun {
            owner_id: zlink_location::new_owner_id(),
            lease_generation: OwnerLeaseGeneration::MIN,
        };
        let year = Duration::from_secs(365 * 24 * 60 * 60);
        cache.owner_admits_until(&run, tokio::time::Instant::now() + year);
        Self {
            cache,
            run,
            version: StoreVersion::new("1").unwrap_or_else(|_| unreachable!("a valid version")),
        }
    }

    /// Remembers `node` as the owner of the Actor `id` (what a Ready read does).
    pub fn insert(&self, id: &ObjectId, node: &RoutingId) {
        let seen = Seen {
            node: node.clone(),
            run: self.run.clone(),
            object_generation: 1,
            owner_generation: 1,
            version: self.version.clone(),
        };
        self.cache.insert(&(AuthorityKind::Actor, id.clone()), seen);
    }

    /// The cached owner of the Actor `id`, if its entry is younger than the maximum age (what a
    /// manager call resolves before it reads the Store).
    pub fn get(&self, id: &ObjectId) -> Option<Arc<RoutingId>> {
        self.cache.get_by(AuthorityKind::Actor, id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bench_cache_resolves_what_it_was_given_until_it_is_disabled() {
        let id = ObjectId::new("a").unwrap();
        let node = RoutingId::new(vec![7]).unwrap();
        let cache = RouteCacheBench::new(Duration::from_secs(60));
        assert_eq!(cache.get(&id), None);
        cache.insert(&id, &node);
        assert_eq!(cache.get(&id).as_deref(), Some(&node));
        let disabled = RouteCacheBench::new(Duration::ZERO);
        disabled.insert(&id, &node);
        assert_eq!(disabled.get(&id), None);
    }
}
