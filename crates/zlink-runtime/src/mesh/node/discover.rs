//! Automatic topology (spec 21 §4, §10; 06 §4): the node's MeshNode descriptor through its
//! states, and the discovery loop that turns the list of live descriptors into connection
//! intents.
//!
//! - A peer is connected unless both nodes are Object Clients without any Channel Server
//!   membership; a membership requires the connection even at weight 0.
//! - The smaller RID dials (the transport's rule for intents with an expected RID); the
//!   handshake must present the descriptor's RID, lifecycle generation and ChannelName set.
//! - A node whose lease expired drops out of the list: its intent is removed and its
//!   connection closed. During a Store outage discovery keeps the last full list
//!   (`storeFailureGrace`): kept nodes stay targets, no new one appears.
//! - One poll every `pollingInterval`: while the mesh's change number has not moved it costs
//!   one Store call (the leases are read again, in one batched read, only as a listed expiry
//!   nears: `zlink_location::Discovery`); a publish or withdrawal is seen by the next poll.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use zlink_codec::records::{
    ActivationConcurrency, DescriptorCapacity, HostState, MeshNodeDescriptor, ObjectCapability,
    ObjectRole, SlotUsage,
};
use zlink_codec::{ChannelName, Generation, ObjectId, RoutingId};
use zlink_store_spi::entropy::{HashMap, HashSet};
use zlink_transport::PeerIntent;

use super::core::NodeInner;
use zlink_location::{
    CapacityLimits, DescriptorPublisher, Discovery, DiscoveryView, HostRun, LocationError,
};

/// The endpoint scheme written in descriptors.
const SCHEME: &str = "tcp://";

/// What a descriptor says about the node before it is running.
#[derive(Debug, Clone)]
pub(crate) struct DescriptorFacts {
    pub(crate) role: ObjectRole,
    pub(crate) placement_weight: u16,
    pub(crate) limits: CapacityLimits,
    pub(crate) activation_concurrency: u32,
    pub(crate) application_version: u64,
    pub(crate) maintenance_wave: Option<String>,
    /// The registered object types as placement capabilities (spec 21 §4).
    pub(crate) capabilities: Vec<ObjectCapability>,
    /// This lifecycle's Entry Spot id (Object Servers only).
    pub(crate) entry_spot_id: Option<ObjectId>,
    /// How this node admits connections (`securityIdentity`).
    pub(crate) security_identity: zlink_transport::SecurityIdentity,
}

/// The descriptor of one MeshNode (`Preparing` at bind, `Serving`, `Draining`, withdrawn).
pub(crate) fn descriptor(
    node: (&zlink_codec::MeshName, &RoutingId, Generation, &str),
    weights: &BTreeMap<ChannelName, u16>,
    facts: &DescriptorFacts,
    state: HostState,
) -> MeshNodeDescriptor {
    let (mesh, rid, generation, endpoint) = node;
    let usage = |limit: u32| SlotUsage {
        active: 0,
        reserved: 0,
        limit,
    };
    MeshNodeDescriptor {
        mesh_name: mesh.clone(),
        routing_id: rid.clone(),
        lifecycle_generation: generation,
        endpoint: format!("{SCHEME}{endpoint}"),
        entry_spot_id: facts.entry_spot_id.clone(),
        channel_weights: weights.clone(),
        application_version: facts.application_version,
        object_capabilities: facts.capabilities.clone(),
        object_role: facts.role,
        placement_weight: facts.placement_weight,
        capacity: DescriptorCapacity {
            actors: usage(facts.limits.actors),
            spots: usage(facts.limits.spots),
            spot_types: Vec::new(),
        },
        activation_concurrency: ActivationConcurrency {
            active: 0,
            limit: facts.activation_concurrency,
        },
        maintenance_wave: facts.maintenance_wave.clone(),
        state,
        security_identity: facts.security_identity.published(rid),
        updated_at_epoch_ms: epoch_ms(),
    }
}

fn epoch_ms() -> u64 {
    zlink_store_spi::entropy::system_time()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(zlink_codec::MAX_U63))
        .unwrap_or(0)
        .min(zlink_codec::MAX_U63)
}

/// The published descriptor of a running node.
#[derive(Debug)]
pub(crate) struct NodeDescriptor {
    publisher: DescriptorPublisher<MeshNodeDescriptor>,
    current: Mutex<MeshNodeDescriptor>,
}

impl NodeDescriptor {
    pub(crate) fn new(
        publisher: DescriptorPublisher<MeshNodeDescriptor>,
        first: MeshNodeDescriptor,
    ) -> Self {
        Self {
            publisher,
            current: Mutex::new(first),
        }
    }

    /// Tests: the Store key of this descriptor.
    #[cfg(test)]
    pub(crate) fn store_key(&self) -> zlink_store_spi::StoreKey {
        self.publisher.store_key().clone()
    }

    /// Publishes the descriptor in `state` with the node's current weights.
    pub(crate) async fn publish_state(
        &self,
        weights: &BTreeMap<ChannelName, u16>,
        state: HostState,
    ) -> Result<(), LocationError> {
        let d = {
            let mut d = self.current.lock();
            d.state = state;
            d.channel_weights = weights.clone();
            d.updated_at_epoch_ms = epoch_ms();
            d.clone()
        };
        self.publisher.publish(d).await.map(|_| ())
    }

    /// Republishes with the node's current weights (a weight change); failures are logged:
    /// the command plane already told the connected peers.
    pub(crate) async fn republish(&self, node: &NodeInner) {
        let weights = node.weights.read().clone();
        let state = self.current.lock().state;
        if let Err(e) = self.publish_state(&weights, state).await {
            tracing::warn!(mesh = %node.mesh, error = %e, "descriptor republish failed");
        }
    }

    /// Sets the usage the descriptor projects; `true` if it changed (then republish).
    pub(crate) fn set_projection(
        &self,
        (capacity, activation): (DescriptorCapacity, ActivationConcurrency),
    ) -> bool {
        let mut d = self.current.lock();
        if d.capacity == capacity && d.activation_concurrency == activation {
            return false;
        }
        d.capacity = capacity;
        d.activation_concurrency = activation;
        true
    }

    /// Removes the descriptor (shutdown).
    pub(crate) async fn withdraw(&self, run: &HostRun) -> Result<bool, LocationError> {
        self.publisher.withdraw(run).await
    }
}

/// Whether two nodes must connect (spec 06 §4): always, unless both are Object Clients with no
/// Channel Server membership.
pub(crate) fn must_connect(
    a_role: ObjectRole,
    a_has_servers: bool,
    b_role: ObjectRole,
    b_has_servers: bool,
) -> bool {
    let bare_client =
        |role: ObjectRole, has_servers: bool| role == ObjectRole::Client && !has_servers;
    !(bare_client(a_role, a_has_servers) && bare_client(b_role, b_has_servers))
}

/// The discovery loop of one node: every `interval`, read the list and reconcile intents.
pub(crate) async fn run(node: Arc<NodeInner>, discovery: Arc<Discovery>, interval: Duration) {
    let mut current: HashMap<RoutingId, String> = HashMap::default();
    let mut runs: HashSet<HostRun> = HashSet::default();
    loop {
        let read = node.peers.write().read_started();
        match discovery.refresh().await {
            Ok(view) => {
                apply(&node, &view, read, &mut current);
                owners_gone(&node, &view, &mut runs);
                project_usage(&node).await;
            }
            Err(e) => tracing::warn!(mesh = %node.mesh, error = %e, "discovery read failed"),
        }
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            () = node.discovery_wake.notified() => {}
        }
    }
}

/// Republishes the descriptor when the usage it projects changed (at most once per polling
/// interval; a copy for operators, spec 21 §4). Only while `Serving`: shutdown publishes and
/// then withdraws the descriptors itself.
async fn project_usage(node: &NodeInner) {
    let (Some(objects), Some(d)) = (node.objects.get(), &node.descriptor) else {
        return;
    };
    if node.life.state() != HostState::Serving {
        return;
    }
    if let Some(p) = objects.projection().await {
        if d.set_projection(p) {
            d.republish(node).await;
        }
    }
}

/// A fresh list's lease ends are handed to the object layer (its route cache, spec 21 §7.3);
/// host runs that it no longer names (their owner lease is gone) are handed to the
/// object layer, which reclaims their authority rows with the recovery-sweep (an extension
/// beyond spec 21, which leaves object failover to a future contract; delete only).
fn owners_gone(node: &NodeInner, view: &DiscoveryView, runs: &mut HashSet<HostRun>) {
    if !matches!(view.status, zlink_location::DiscoveryStatus::Fresh) {
        return;
    }
    let now: HashSet<HostRun> = view.nodes.iter().map(|n| n.run.clone()).collect();
    if let Some(objects) = node.objects.get() {
        // The lease ends this read showed bound how long each run's routes are cached.
        objects.owners_listed(view);
        for gone in runs.difference(&now) {
            tracing::info!(mesh = %node.mesh, owner = %gone.owner_id, "an owner run left the list");
            objects.owner_gone(gone.clone());
        }
    }
    *runs = now;
}

fn apply(
    node: &NodeInner,
    view: &DiscoveryView,
    read: u64,
    current: &mut HashMap<RoutingId, String>,
) {
    let own_servers = !node.weights.read().is_empty();
    let mut desired: HashMap<RoutingId, PeerIntent> = HashMap::default();
    let mut known: HashMap<RoutingId, BTreeMap<ChannelName, u16>> = HashMap::default();
    let mut facts: HashMap<RoutingId, super::connections::PeerFacts> = HashMap::default();
    for n in &view.nodes {
        let d = &n.record.descriptor;
        if d.mesh_name != node.mesh || d.routing_id == node.rid {
            continue;
        }
        // A draining or stopped node is out of new selection (spec 28 §9).
        let selectable = matches!(d.state, HostState::Serving | HostState::Preparing);
        let weights = if selectable {
            d.channel_weights.clone()
        } else {
            d.channel_weights.keys().map(|c| (c.clone(), 0)).collect()
        };
        known.insert(d.routing_id.clone(), weights);
        let endpoint = d.endpoint.strip_prefix(SCHEME).unwrap_or(&d.endpoint);
        let required = must_connect(
            node.role,
            own_servers,
            d.object_role,
            !d.channel_weights.is_empty(),
        );
        facts.insert(
            d.routing_id.clone(),
            super::connections::PeerFacts {
                endpoint: endpoint.to_owned(),
                role: d.object_role,
                state: d.state,
                required,
            },
        );
        if !required {
            continue;
        }
        // The peer must prove the identity its descriptor publishes; one this runtime cannot
        // verify is no peer (never dialed unverified).
        let identity = match zlink_transport::SecurityIdentity::parse(&d.security_identity) {
            Ok(identity) => identity,
            Err(e) => {
                tracing::warn!(peer = %d.routing_id, error = %e, "descriptor security identity not understood; not dialed");
                continue;
            }
        };
        desired.insert(
            d.routing_id.clone(),
            PeerIntent::new(endpoint)
                .expect_rid(d.routing_id.clone())
                .expect_generation(d.lifecycle_generation)
                .expect_channels(d.channel_weights.keys().cloned())
                .expect_identity(identity),
        );
    }
    {
        let mut peers = node.peers.write();
        peers.set_discovered(known);
        peers.set_facts(facts);
        if matches!(view.status, zlink_location::DiscoveryStatus::Fresh) {
            peers.fresh_list_applied(read);
        }
    }
    // A Ready peer that a fresh full list does not name (its lease expired, or it dialed us
    // after leaving) and that no manual intent names is closed: only listed nodes are peers.
    if matches!(view.status, zlink_location::DiscoveryStatus::Fresh) {
        let strays: Vec<_> = {
            let peers = node.peers.read();
            peers
                .connected()
                .filter(|p| !desired.contains_key(&p.handle.info().rid))
                .filter(|p| !peers.is_manual(&p.handle.info().rid))
                .map(|p| p.handle.clone())
                .collect()
        };
        for p in strays {
            tracing::info!(mesh = %node.mesh, peer = %p.info().rid, "closing a peer discovery does not list");
            p.close();
        }
    }
    let gone: Vec<RoutingId> = current
        .keys()
        .filter(|rid| !desired.contains_key(*rid))
        .cloned()
        .collect();
    for rid in gone {
        if let Some(endpoint) = current.remove(&rid) {
            tracing::info!(mesh = %node.mesh, peer = %rid, "peer left discovery; dropping it");
            node.transport.remove_intent(&endpoint);
        }
    }
    for (rid, intent) in desired {
        if current.get(&rid) == Some(&intent.endpoint) {
            continue;
        }
        if let Some(old) = current.remove(&rid) {
            node.transport.remove_intent(&old);
        }
        let endpoint = intent.endpoint.clone();
        match node.transport.add_intent(intent) {
            Ok(()) => {
                current.insert(rid, endpoint);
            }
            Err(e) => tracing::warn!(mesh = %node.mesh, peer = %rid, %e, "connect intent refused"),
        }
    }
}

/// A new Entry Spot id, `<prefix>-entry-<lowercase uuid v4>` (spec 21 §1.2).
pub(crate) fn entry_spot_id(prefix: &str) -> Option<ObjectId> {
    #[cfg(test)]
    if let Some(fixed) = tests::FIXED_ENTRY_UUID.with(|f| f.borrow().clone()) {
        return ObjectId::new(format!("{prefix}-entry-{fixed}")).ok();
    }
    ObjectId::new(format!(
        "{prefix}-entry-{}",
        zlink_store_spi::entropy::uuid_v4()
    ))
    .ok()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    thread_local! {
        /// A test's fixed Entry Spot UUID (to provoke a collision), for roots started on this
        /// thread.
        pub(crate) static FIXED_ENTRY_UUID: std::cell::RefCell<Option<String>> =
            const { std::cell::RefCell::new(None) };
    }

    #[test]
    fn only_two_object_clients_without_server_membership_skip_the_connection() {
        use ObjectRole::{Client, None as NoRole, Server};
        assert!(!must_connect(Client, false, Client, false));
        assert!(
            must_connect(Client, true, Client, false),
            "membership at any weight connects"
        );
        assert!(must_connect(Client, false, Client, true));
        assert!(must_connect(Client, false, Server, false));
        assert!(must_connect(NoRole, false, Client, false));
        assert!(must_connect(NoRole, false, NoRole, false));
    }
}
