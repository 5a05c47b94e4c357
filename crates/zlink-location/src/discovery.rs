//! Discovery (spec 21 §4, §10): reading every MeshNode descriptor of a mesh as one
//! same-point-in-time list, checking each host's owner lease directly, and keeping the last
//! full list through a Store outage (`storeFailureGrace`).
//!
//! A list is read by paged snapshot scan of `mesh-node\0{MeshName}\0` (every continuation page
//! reads the snapshot fixed by the first page). The mesh's change number (a runtime-private
//! row moved by every descriptor publish and withdrawal) is read before and after; the pages
//! are used only when both reads match, otherwise the whole list is read again. Each
//! descriptor's host is then checked by reading its owner lease row (every host's row once,
//! all in one batched read, `LocationStore::read_many`): only hosts whose lease row holds
//! exactly the descriptor's `(ownerId, leaseGeneration)` are listed.
//!
//! **A poll when nothing changed** (issue 38). Every poll starts with the change-number read.
//! If the number is the one the kept list was read under, no descriptor was published or
//! withdrawn since, so the descriptor pages are not read again: the poll costs that one read,
//! plus one batched lease read when a lease is due. Leases expire without moving the change
//! number, so the kept list carries each listed lease's expiry as its last read showed it, on
//! the Store clock (`ExpiresAt`). A renew only moves an expiry later, so a row still held by
//! the same run cannot end before the expiry last read. The rule: when any listed lease's
//! expiry last read is within the lease margin of the StoreNow the change-number read
//! returned (`ExpiresAt − margin <= StoreNow`), every listed lease is read again in one batch,
//! each node is kept only if its row still holds its run, and the expiries are updated. The
//! margin is the owner lease fencing margin plus the polling interval, so a live peer's lease
//! end handed on (`DiscoveredNode::lease_until`, which bounds its route cache) is refreshed at
//! least one poll before its owner stops admitting. A peer whose lease row expired is
//! therefore dropped by the first poll after the expiry, as before; with the default timings
//! (TTL 15 s, renew 5 s, fencing margin 5 s, polling 1 s) the leases are read once every four
//! to nine polls. A lease row deleted early (a release without the descriptor withdrawal that
//! normally comes first) is seen at the latest when the expiry last read is near — within one
//! lease TTL — where a full read saw it at the next poll. Descriptors left out because their
//! lease did not hold their run stay out until the change number moves: a lease generation is
//! never issued twice, and a new run republishes its descriptor. The first read, and the first
//! after a Store failure (spec 21 §10), is always a full list read.
//!
//! During a Store outage the last fully read list is kept: its nodes stay connection targets
//! and no node outside it becomes one. The kept list is replaced only by a new full read. The
//! grace period never touches the owner lease or the admission deadline.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use zlink_codec::records::{HostState, MeshNodeDescriptor, MeshNodeRecord, ObjectRole};
use zlink_store_spi::{
    DynLocationStore, LocationStore, PageLimit, ScanPrefix, ScanRequest, ScanResult, StoreKey,
    StoreTime, StoreVersion,
};

use super::authority::AuthorityClient;
use super::capacity::CapacityLimits;
use super::clock::SharedClock;
use super::error::LocationError;
use super::generation::OwnerLeaseGeneration;
use super::identity::{HostRun, MeshName, NodeKey};
use super::keys;
use super::options::LocationOptions;
use super::placement::{Candidate, TargetNode};

mod leases;

use leases::Unchecked;

/// How many times a list read starts over (a changed change number or an expired snapshot)
/// before it fails.
const READ_ATTEMPTS: u32 = 16;

/// One live node of the list.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscoveredNode {
    /// The descriptor record.
    pub record: MeshNodeRecord,
    /// Its provider version.
    pub version: StoreVersion,
    /// The node's host run (its lease row holds exactly this).
    pub run: HostRun,
    /// When the run's owner lease ends as this read bounds it, on this host's monotonic clock:
    /// `t0 + (ExpiresAt − StoreNow)` with `t0` taken before the lease read, so never later
    /// than the real end (`None` when the row carries no expiry). The owner accepts no new
    /// work past this minus its fencing margin (spec 21 §5, §7.3).
    pub lease_until: Option<Duration>,
    /// The lease row's `ExpiresAt` on the Store clock, as that read showed it (`None` when the
    /// row carries no expiry): a poll that finds the list unchanged reads the leases again
    /// once this is near (see the module docs).
    pub lease_expires_at: Option<StoreTime>,
}

impl DiscoveredNode {
    /// The node's descriptor identity.
    pub fn node(&self) -> NodeKey {
        NodeKey {
            mesh: self.record.descriptor.mesh_name.clone(),
            routing_id: self.record.descriptor.routing_id.clone(),
        }
    }

    /// The node as a placement target (its limits and offered types from the descriptor).
    pub fn target(&self) -> TargetNode {
        target_of(&self.run, &self.record.descriptor)
    }
}

/// A MeshNode descriptor's node as a placement target of host run `run`: its limits (0 =
/// unlimited; per-type limits from the Spot capabilities) and the (kind, stable type) pairs it
/// registered.
pub fn target_of(run: &HostRun, d: &MeshNodeDescriptor) -> TargetNode {
    let mut limits = CapacityLimits {
        actors: d.capacity.actors.limit,
        spots: d.capacity.spots.limit,
        ..CapacityLimits::default()
    };
    let mut offers = std::collections::BTreeSet::new();
    for c in &d.object_capabilities {
        offers.insert((c.object_kind, c.stable_type.clone()));
        if c.object_kind.is_spot() && c.limit > 0 {
            limits
                .spot_types
                .insert((c.object_kind, c.stable_type.clone()), c.limit);
        }
    }
    TargetNode {
        node: NodeKey {
            mesh: d.mesh_name.clone(),
            routing_id: d.routing_id.clone(),
        },
        run: run.clone(),
        lifecycle_generation: d.lifecycle_generation.get(),
        limits,
        offers,
    }
}

/// Sizes of one scanned page (for the page bounds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageStats {
    /// Items in the page.
    pub items: usize,
    /// Encoded size of the page (keys, values, versions).
    pub encoded_len: usize,
    /// Length of the continuation cursor, if the page had one.
    pub cursor_len: Option<usize>,
}

/// How fresh a view is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveryStatus {
    /// Read fully just now.
    Fresh,
    /// The Store is failing; the last full list is kept and still within `storeFailureGrace`.
    Grace {
        /// How long the Store has been failing.
        failing_for: Duration,
    },
    /// The Store has been failing for longer than `storeFailureGrace`; the last full list is
    /// still the only connection-target list until a full re-read.
    Stale {
        /// How long the Store has been failing.
        failing_for: Duration,
    },
}

/// One discovery result.
#[derive(Debug, Clone)]
pub struct DiscoveryView {
    /// The live nodes (from the last full read).
    pub nodes: Vec<DiscoveredNode>,
    /// How fresh the list is.
    pub status: DiscoveryStatus,
    /// The pages of the read (empty when the kept list was returned, or the list was
    /// unchanged).
    pub pages: Vec<PageStats>,
    /// How many full list reads it took (a changed change number starts over; 0 when no list
    /// was read).
    pub attempts: u32,
    /// Descriptors left out: unreadable by the Store (another data type, a corrupt stored
    /// record), undecodable (unknown `recordVersion` included) or whose lease is not valid.
    pub excluded: usize,
    /// The change number was the one the kept list was read under: no page was read, the
    /// kept list was confirmed (and its leases read again only if one was due).
    pub unchanged: bool,
}

/// A hook run between pages (tests use it to change the Store mid-read).
pub(crate) type PageHook<'a> =
    &'a (dyn Fn(usize) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync);

#[derive(Debug, Default)]
struct Kept {
    nodes: Option<Vec<DiscoveredNode>>,
    failing_since: Option<Duration>,
    /// What the last complete read settled, with `nodes`; `None` before the first read and
    /// after a Store failure (the next read is a full one).
    settled: Option<Settled>,
}

/// The change number a kept list was read under, and how many descriptors it left out.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Settled {
    /// `None`: the change-number row did not exist.
    change: Option<StoreVersion>,
    excluded: usize,
}

/// The discovery reader of one mesh.
#[derive(Debug)]
pub struct Discovery {
    store: Arc<dyn DynLocationStore>,
    clock: SharedClock,
    grace: Duration,
    prefix: ScanPrefix,
    change_key: StoreKey,
    page_limit: PageLimit,
    /// How long before a listed lease's expiry last read a poll reads the leases again.
    lease_margin: Duration,
    kept: Mutex<Kept>,
}

impl Discovery {
    /// A reader of `mesh`: `storeFailureGrace` from `options`, and the lease margin (the
    /// owner lease fencing margin plus the polling interval, see the module docs).
    pub(crate) fn new(
        store: Arc<dyn DynLocationStore>,
        clock: SharedClock,
        options: &LocationOptions,
        mesh: &MeshName,
    ) -> Result<Self, LocationError> {
        Ok(Discovery {
            store,
            clock,
            grace: options.store_failure_grace,
            prefix: keys::mesh_node_prefix(mesh)?,
            change_key: keys::PrivateKey::MeshChange(mesh).store_key()?,
            page_limit: PageLimit::LARGEST,
            lease_margin: options
                .owner_lease_fencing_margin
                .saturating_add(options.polling_interval),
            kept: Mutex::new(Kept::default()),
        })
    }

    /// Sets the page size of list reads (1..=1000; default 1000).
    pub fn with_page_limit(mut self, limit: PageLimit) -> Self {
        self.page_limit = limit;
        self
    }

    /// Reads the list again: the change number, then the pages and leases only if the number
    /// moved since the kept list was read, or the leases alone if one is due (see the module
    /// docs). On a Store failure with a kept list, that list is returned with a `Grace` or
    /// `Stale` status; with no list yet, the error. After a failure the next read is full.
    pub async fn refresh(&self) -> Result<DiscoveryView, LocationError> {
        self.refresh_with(None).await
    }

    pub(crate) async fn refresh_with(
        &self,
        hook: Option<PageHook<'_>>,
    ) -> Result<DiscoveryView, LocationError> {
        match self.read(hook).await {
            Ok((view, settled)) => {
                let mut kept = self.kept.lock();
                kept.nodes = Some(view.nodes.clone());
                kept.settled = Some(settled);
                kept.failing_since = None;
                Ok(view)
            }
            Err(LocationError::Store(e)) => {
                let now = self.clock.now();
                let mut kept = self.kept.lock();
                // Once the Store answers again, the whole list is read again (spec 21 §10).
                kept.settled = None;
                let since = *kept.failing_since.get_or_insert(now);
                let Some(nodes) = kept.nodes.clone() else {
                    return Err(LocationError::Store(e));
                };
                let failing_for = now.saturating_sub(since);
                let status = if failing_for <= self.grace {
                    DiscoveryStatus::Grace { failing_for }
                } else {
                    DiscoveryStatus::Stale { failing_for }
                };
                tracing::warn!(error = %e, ?status, "discovery keeps the last full list");
                Ok(DiscoveryView {
                    nodes,
                    status,
                    pages: Vec::new(),
                    attempts: 0,
                    excluded: 0,
                    unchanged: false,
                })
            }
            Err(e) => Err(e),
        }
    }

    /// Whether `node` may be (or stay) a connection target: only nodes of the last fully read
    /// list are, whatever the Store's health.
    pub fn is_connect_target(&self, node: &NodeKey) -> bool {
        self.kept
            .lock()
            .nodes
            .as_ref()
            .is_some_and(|n| n.iter().any(|d| &d.node() == node))
    }

    /// The last fully read list, if any.
    pub fn last_list(&self) -> Option<Vec<DiscoveredNode>> {
        self.kept.lock().nodes.clone()
    }

    /// Placement candidates from the last full list: Object Server nodes with their capacity
    /// rows read now.
    pub async fn candidates(
        &self,
        authority: &AuthorityClient,
    ) -> Result<Vec<Candidate>, LocationError> {
        let servers: Vec<_> = self
            .last_list()
            .unwrap_or_default()
            .into_iter()
            .filter(|n| n.record.descriptor.object_role == ObjectRole::Server)
            .collect();
        let targets: Vec<_> = servers.iter().map(|n| n.target()).collect();
        let keys: Vec<_> = targets.iter().map(|t| t.node.clone()).collect();
        let usages = authority.node_capacities(&keys).await?;
        Ok(servers
            .iter()
            .zip(targets)
            .zip(usages)
            .map(|((n, target), usage)| Candidate {
                lease_valid: true,
                serving: n.record.descriptor.state == HostState::Serving,
                weight: n.record.descriptor.placement_weight,
                usage,
                target,
            })
            .collect())
    }

    async fn change_number(&self) -> Result<Option<StoreVersion>, LocationError> {
        Ok(self.store.read(&self.change_key).await?.version().cloned())
    }

    /// One poll: the change number; the kept list confirmed (its leases read again if one is
    /// due) when the number has not moved since that list was read, otherwise a full read.
    async fn read(
        &self,
        hook: Option<PageHook<'_>>,
    ) -> Result<(DiscoveryView, Settled), LocationError> {
        let (nodes, settled) = {
            let kept = self.kept.lock();
            (kept.nodes.clone(), kept.settled.clone())
        };
        let first = self.store.read(&self.change_key).await?;
        let change = first.version().cloned();
        match (nodes, settled) {
            (Some(nodes), Some(settled)) if settled.change == change => {
                self.confirm(nodes, settled, first.store_now()).await
            }
            _ => self.read_full(hook, change).await,
        }
    }

    /// The kept list under an unchanged change number read at `store_now`: as it is, unless a
    /// listed lease's expiry last read is within the lease margin, then with every listed
    /// lease read again in one batch.
    async fn confirm(
        &self,
        nodes: Vec<DiscoveredNode>,
        settled: Settled,
        store_now: StoreTime,
    ) -> Result<(DiscoveryView, Settled), LocationError> {
        let margin = u64::try_from(self.lease_margin.as_millis()).unwrap_or(u64::MAX);
        let horizon = store_now.as_millis().saturating_add(margin);
        let due = nodes
            .iter()
            .any(|n| n.lease_expires_at.is_none_or(|e| e.as_millis() <= horizon));
        let (nodes, dropped) = if due {
            let unchecked = nodes.into_iter().map(Unchecked::from).collect();
            self.leased(unchecked).await?
        } else {
            (nodes, 0)
        };
        let settled = Settled {
            change: settled.change,
            excluded: settled.excluded + dropped,
        };
        let view = DiscoveryView {
            nodes,
            status: DiscoveryStatus::Fresh,
            pages: Vec::new(),
            attempts: 0,
            excluded: settled.excluded,
            unchanged: true,
        };
        Ok((view, settled))
    }

    /// A full list read; `before` is the change number read just now.
    async fn read_full(
        &self,
        hook: Option<PageHook<'_>>,
        mut before: Option<StoreVersion>,
    ) -> Result<(DiscoveryView, Settled), LocationError> {
        for attempt in 1..=READ_ATTEMPTS {
            // `before` was read before this scan's first page (on a later attempt it is the
            // previous attempt's closing read): any change during the scan moves `after`.
            let Some((items, unreadable, pages)) = self.scan(hook).await? else {
                continue;
            };
            let after = self.change_number().await?;
            if before != after {
                tracing::debug!(
                    attempt,
                    "descriptor list changed while reading; reading again"
                );
                before = after;
                continue;
            }
            let mut unchecked = Vec::with_capacity(items.len());
            // A descriptor key the Store cannot read costs only itself.
            let mut excluded = unreadable;
            for item in items {
                let record = match MeshNodeRecord::decode(&item.bytes) {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::warn!(key = %item.key, error = %e, "descriptor rejected");
                        excluded += 1;
                        continue;
                    }
                };
                let Some(generation) = OwnerLeaseGeneration::new(record.lease_generation.get())
                else {
                    excluded += 1;
                    continue;
                };
                let run = HostRun {
                    owner_id: record.owner_id.clone(),
                    lease_generation: generation,
                };
                unchecked.push(Unchecked {
                    record,
                    version: item.version,
                    run,
                });
            }
            let (nodes, dropped) = self.leased(unchecked).await?;
            let settled = Settled {
                change: after,
                excluded: excluded + dropped,
            };
            let view = DiscoveryView {
                nodes,
                status: DiscoveryStatus::Fresh,
                pages,
                attempts: attempt,
                excluded: settled.excluded,
                unchanged: false,
            };
            return Ok((view, settled));
        }
        Err(LocationError::Contended)
    }

    /// Reads every page of one snapshot: its items, how many keys the Store could not read
    /// (each logged) and the page sizes; `None` if the snapshot expired mid-way.
    #[allow(clippy::type_complexity)]
    async fn scan(
        &self,
        hook: Option<PageHook<'_>>,
    ) -> Result<Option<(Vec<zlink_store_spi::ScanItem>, usize, Vec<PageStats>)>, LocationError>
    {
        let mut request = ScanRequest::first(self.prefix.clone(), self.page_limit);
        let mut items = Vec::new();
        let mut unreadable = 0;
        let mut pages = Vec::new();
        loop {
            let page = match self.store.scan(&request).await? {
                ScanResult::Expired => return Ok(None),
                ScanResult::Page(p) => p,
            };
            pages.push(PageStats {
                items: page.items.len(),
                encoded_len: page.items.iter().map(|i| i.encoded_len()).sum(),
                cursor_len: page.next_cursor.as_ref().map(|c| c.len()),
            });
            items.extend(page.items);
            for u in &page.unreadable {
                tracing::warn!(key = %u.key, kind = %u.kind, "descriptor left out: the Store cannot read it");
            }
            unreadable += page.unreadable.len();
            match page.next_cursor {
                Some(cursor) => {
                    if let Some(h) = hook {
                        h(pages.len()).await;
                    }
                    request = ScanRequest::next(self.prefix.clone(), self.page_limit, cursor);
                }
                None => return Ok(Some((items, unreadable, pages))),
            }
        }
    }
}
