//! Readiness you can await: [`MeshNode::ready`] resolves once the node has read a discovery
//! list after the call began and holds a Ready connection to every peer that list says it must
//! connect to (spec 06 §4), so an application's first call does not race its node's discovery.

use std::time::Duration;

use tokio::time::Instant;
use zlink_codec::{MeshName, RoutingId};

use super::handle::MeshNode;
use crate::messaging::ErrorKind;

/// What a node still waits for before it is ready.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Waiting {
    /// A discovery list freshly read after the wait began (the owner leases and descriptors
    /// of the mesh, read from the Location Store; a list kept through `storeFailureGrace`
    /// while the Store does not answer does not count).
    DiscoveryList,
    /// A Ready connection to each of these peers, which the last discovery list names and this
    /// node must connect to.
    Peers(Vec<RoutingId>),
}

impl std::fmt::Display for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Waiting::DiscoveryList => f.write_str("a discovery list read after the wait began"),
            Waiting::Peers(rids) => {
                f.write_str("a connection to ")?;
                for (i, rid) in rids.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{rid}")?;
                }
                Ok(())
            }
        }
    }
}

/// A node was not ready within the time given: `DeadlineExceeded`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MeshNode on {mesh} not ready within {within:?}: still waiting for {waiting}")]
#[non_exhaustive]
pub struct NotReady {
    /// The node's MeshName.
    pub mesh: MeshName,
    /// How long the wait lasted.
    pub within: Duration,
    /// What the node still waited for when the time ran out.
    pub waiting: Waiting,
}

impl NotReady {
    /// Always [`ErrorKind::DeadlineExceeded`].
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::DeadlineExceeded
    }
}

impl MeshNode {
    /// Waits, at most `within`, until this node is ready to call the mesh: it has read a
    /// discovery list after this call began (it asks its discovery loop to read one at once,
    /// not at the next polling interval) and holds a Ready connection to every peer that list
    /// says it must connect to (an Object Client or Server connects to every Object Server;
    /// spec 06 §4). So every node that was Serving when `ready` was called is a call target
    /// once it resolves; nodes that join later are connected by discovery as they appear. A
    /// node with manual topology is ready at once (its manual peers have their own status:
    /// [`MeshNode::manual_peers`]).
    pub async fn ready(&self, within: Duration) -> Result<(), NotReady> {
        let deadline = Instant::now() + within;
        let discovery = self.inner.descriptor.is_some();
        // Subscribed before the check, so no change between the check and the wait is missed.
        let (mut changes, after) = {
            let peers = self.inner.peers.read();
            (peers.subscribe(), peers.reads_started())
        };
        if discovery {
            self.inner.discovery_wake.notify_one();
        }
        loop {
            let Some(waiting) = self.inner.peers.read().waiting_for(discovery, after) else {
                return Ok(());
            };
            let not_ready = || NotReady {
                mesh: self.inner.mesh.clone(),
                within,
                waiting,
            };
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return Err(not_ready()),
            }
        }
    }
}
