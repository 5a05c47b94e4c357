//! `zlink nodes`: every MeshNode descriptor of the store, from one snapshot scan of the
//! `mesh-node\0` prefix through the Location Store provider (the same snapshot scan discovery
//! reads), decoded by `zlink-codec`, each with its owner lease read directly, and the
//! ClientServer server and fanout publisher descriptors of its routing id (each list from its
//! own snapshot).

use serde::Serialize;
use zlink_codec::records::HostState;
use zlink_codec::{ClientServerRecord, FanoutPublisherRecord, MeshNodeRecord, OwnerLeaseRecord};
use zlink_location::target_of;
use zlink_store_spi::{
    DynLocationStore, LocationStore, PageLimit, ReadResult, ScanItem, ScanPrefix, ScanRequest,
    ScanResult, StoreKey,
};

use crate::error::CliError;
use crate::finding::show_bytes;

/// How many times the scan starts over when its snapshot expired.
const SCAN_ATTEMPTS: usize = 4;

/// The health of a node's owner lease, read directly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "state"
)]
pub enum LeaseHealth {
    /// The lease row holds the descriptor's run and has not expired.
    Held {
        /// Milliseconds left by the Store's clock (`None`: no expiry).
        expires_in_ms: Option<u64>,
    },
    /// No lease row (released, expired or lost).
    Missing,
    /// The row holds another LeaseGeneration (the host restarted or was taken over).
    OtherRun {
        /// The generation the row holds.
        lease_generation: u64,
    },
    /// The row is there but does not decode.
    Undecodable,
}

impl LeaseHealth {
    /// A short text for tables.
    pub fn text(&self) -> String {
        match self {
            LeaseHealth::Held {
                expires_in_ms: Some(ms),
            } => format!("held ({ms} ms left)"),
            LeaseHealth::Held {
                expires_in_ms: None,
            } => "held (no expiry)".into(),
            LeaseHealth::Missing => "missing".into(),
            LeaseHealth::OtherRun { lease_generation } => {
                format!("other run (generation {lease_generation})")
            }
            LeaseHealth::Undecodable => "undecodable".into(),
        }
    }
}

/// One node as `zlink nodes` shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    /// The mesh.
    pub mesh: String,
    /// The routing id, lowercase hex.
    pub rid: String,
    /// The MeshNode run.
    pub lifecycle_generation: u64,
    /// `preparing`, `serving`, `relocating`, `relocated`, `draining`, `stopped` or `error`.
    pub state: String,
    /// The advertised endpoint.
    pub endpoint: String,
    /// The node-wide placement weight.
    pub weight: u16,
    /// `none`, `client` or `server`.
    pub role: String,
    /// ClientServer channel memberships with their weights (the descriptor's
    /// `channelWeights`).
    pub channels: Vec<(String, u16)>,
    /// Channels with a published ClientServer server descriptor of this routing id.
    pub serves: Vec<String>,
    /// Channels with a published fanout publisher descriptor of this routing id.
    pub publishes: Vec<String>,
    /// Registered object capabilities: `kind:stableType` (with `/limit` when limited).
    pub capabilities: Vec<String>,
    /// The owning host run's OwnerId.
    pub owner_id: String,
    /// The owning host run's LeaseGeneration.
    pub lease_generation: u64,
    /// The owner lease, read directly.
    pub lease: LeaseHealth,
    /// Whether discovery lists it as a connection target (lease held, state serving or
    /// draining).
    pub live: bool,
}

/// What the scan found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NodesSnapshot {
    /// The decodable descriptors, in key order.
    pub nodes: Vec<NodeView>,
    /// Descriptor keys the provider could not read (another Redis type, a corrupt member).
    pub unreadable: Vec<String>,
    /// Descriptor keys whose record does not decode, with the codec's reason.
    pub undecodable: Vec<(String, String)>,
}

async fn lease_health(
    store: &dyn DynLocationStore,
    record: &MeshNodeRecord,
) -> Result<LeaseHealth, CliError> {
    let key = StoreKey::new(zlink_codec::LogicalKey::owner_lease(&record.owner_id).as_str())?;
    Ok(match store.read(&key).await? {
        ReadResult::Missing { .. } => LeaseHealth::Missing,
        ReadResult::Found {
            bytes,
            expires_at,
            store_now,
            ..
        } => match OwnerLeaseRecord::decode(&bytes) {
            Err(_) => LeaseHealth::Undecodable,
            Ok(l) if l.lease_generation != record.lease_generation => LeaseHealth::OtherRun {
                lease_generation: l.lease_generation.get(),
            },
            Ok(_) => LeaseHealth::Held {
                expires_in_ms: expires_at
                    .map(|e| e.as_millis().saturating_sub(store_now.as_millis())),
            },
        },
    })
}

fn view(record: &MeshNodeRecord, lease: LeaseHealth) -> NodeView {
    let d = &record.descriptor;
    let run = zlink_location::HostRun {
        owner_id: record.owner_id.clone(),
        lease_generation: zlink_location::OwnerLeaseGeneration::new(record.lease_generation.get())
            .unwrap_or(zlink_location::OwnerLeaseGeneration::MIN),
    };
    let target = target_of(&run, d);
    let capabilities = d
        .object_capabilities
        .iter()
        .map(|c| {
            let limit = target
                .limits
                .spot_types
                .get(&(c.object_kind, c.stable_type.clone()))
                .map(|l| format!("/{l}"))
                .unwrap_or_default();
            format!(
                "{}:{}{limit}",
                c.object_kind.as_str(),
                c.stable_type.as_str()
            )
        })
        .collect();
    let live = matches!(lease, LeaseHealth::Held { .. })
        && matches!(d.state, HostState::Serving | HostState::Draining);
    NodeView {
        mesh: d.mesh_name.as_str().to_owned(),
        rid: d.routing_id.to_hex(),
        lifecycle_generation: d.lifecycle_generation.get(),
        state: d.state.as_str().to_owned(),
        endpoint: d.endpoint.clone(),
        weight: d.placement_weight,
        role: d.object_role.as_str().to_owned(),
        channels: d
            .channel_weights
            .iter()
            .map(|(c, w)| (c.as_str().to_owned(), *w))
            .collect(),
        capabilities,
        serves: Vec::new(),
        publishes: Vec::new(),
        owner_id: record.owner_id.as_str().to_owned(),
        lease_generation: record.lease_generation.get(),
        lease,
        live,
    }
}

/// Every item under `prefix` from one snapshot scan (started again, up to
/// [`SCAN_ATTEMPTS`] times, when the snapshot expires), and the keys the provider could not
/// read.
async fn scan_all(
    store: &dyn DynLocationStore,
    prefix: String,
) -> Result<(Vec<ScanItem>, Vec<String>), CliError> {
    let prefix = ScanPrefix::new(prefix)?;
    let mut attempt = 0;
    'snapshot: loop {
        attempt += 1;
        let mut items = Vec::new();
        let mut unreadable = Vec::new();
        let mut request = ScanRequest::first(prefix.clone(), PageLimit::LARGEST);
        loop {
            match store.scan(&request).await? {
                ScanResult::Page(page) => {
                    items.extend(page.items);
                    unreadable.extend(page.unreadable.iter().map(|u| show_bytes(u.key.as_bytes())));
                    match page.next_cursor {
                        Some(c) => {
                            request = ScanRequest::next(prefix.clone(), PageLimit::LARGEST, c)
                        }
                        None => return Ok((items, unreadable)),
                    }
                }
                ScanResult::Expired if attempt < SCAN_ATTEMPTS => continue 'snapshot,
                ScanResult::Expired => {
                    return Err(CliError::input(
                        "scan",
                        "the snapshot expired on every attempt",
                    ));
                }
            }
        }
    }
}

/// Reads every MeshNode descriptor of the store from one snapshot, then each owner lease, then
/// the ClientServer server and fanout publisher descriptors (one snapshot each), attached to
/// the nodes by routing id.
pub async fn read_nodes(store: &dyn DynLocationStore) -> Result<NodesSnapshot, CliError> {
    let (items, unreadable) = scan_all(store, zlink_codec::keys::prefix::mesh_nodes()).await?;
    let mut out = NodesSnapshot {
        unreadable,
        ..NodesSnapshot::default()
    };
    for item in items {
        match MeshNodeRecord::decode(&item.bytes) {
            Ok(record) => {
                let lease = lease_health(store, &record).await?;
                out.nodes.push(view(&record, lease));
            }
            Err(e) => out
                .undecodable
                .push((show_bytes(item.key.as_bytes()), e.to_string())),
        }
    }
    let (servers, unreadable) =
        scan_all(store, zlink_codec::keys::prefix::client_servers()).await?;
    out.unreadable.extend(unreadable);
    for item in servers {
        match ClientServerRecord::decode(&item.bytes) {
            Ok(r) => {
                let rid = r.descriptor.server_routing_id.to_hex();
                let channel = r.descriptor.channel_name.as_str().to_owned();
                for n in out.nodes.iter_mut().filter(|n| n.rid == rid) {
                    n.serves.push(channel.clone());
                }
            }
            Err(e) => out
                .undecodable
                .push((show_bytes(item.key.as_bytes()), e.to_string())),
        }
    }
    let (publishers, unreadable) =
        scan_all(store, zlink_codec::keys::prefix::fanout_publishers()).await?;
    out.unreadable.extend(unreadable);
    for item in publishers {
        match FanoutPublisherRecord::decode(&item.bytes) {
            Ok(r) => {
                let rid = r.descriptor.publisher_routing_id.to_hex();
                let channel = r.descriptor.channel_name.as_str().to_owned();
                for n in out.nodes.iter_mut().filter(|n| n.rid == rid) {
                    n.publishes.push(channel.clone());
                }
            }
            Err(e) => out
                .undecodable
                .push((show_bytes(item.key.as_bytes()), e.to_string())),
        }
    }
    Ok(out)
}
