//! Readiness you can await: [`MeshNode::ready`] resolves once the node has read a discovery
//! list after the call began and holds a Ready connection to every peer that list says it must
//! connect to (spec 06 §4), so an application's first call does not race its node's discovery.

use std::time::Duration;

use tokio::time::Instant;
use zlink_codec::{MeshName, RoutingId};

use super::core::NodeInner;
use super::handle::MeshNode;
use crate::messaging::{ErrorKind, ZLinkError};
use zlink_transport::PeerHandle;

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

impl NodeInner {
    /// The Ready connection to `target` for a message to an object `target` owns, waiting
    /// until `deadline` while the connection is about to exist rather than failing at once
    /// (issue 40: a fresh node's first request):
    /// - `target` is not listed yet (a record may name a node that joined after this node's
    ///   last discovery read): discovery is asked for a fresh read at once, and the answer is
    ///   the [`route_to`](Self::route_to) error only if that read does not list it either;
    /// - `target` is listed, this node must connect to it and has not been connected to it
    ///   since the list named it: its first connection is awaited.
    ///
    /// A peer that was connected and went down fails at once, as before (`Unavailable`): its
    /// caller re-reads the record.
    pub(crate) async fn route_to_within(
        &self,
        target: &RoutingId,
        deadline: Instant,
    ) -> Result<PeerHandle, ZLinkError> {
        let discovery = self.descriptor.is_some();
        let mut changes = self.peers.read().subscribe();
        let mut asked: Option<u64> = None;
        loop {
            let error = match self.route_to(target) {
                Ok(peer) => return Ok(peer),
                Err(e) => e,
            };
            let wait = {
                let peers = self.peers.read();
                if peers.first_connection_pending(target) {
                    true
                } else if discovery && !peers.is_known(target) {
                    match asked {
                        None => {
                            asked = Some(peers.reads_started());
                            self.discovery_wake.notify_one();
                            true
                        }
                        Some(after) => !peers.fresh_list_since(after),
                    }
                } else {
                    false
                }
            };
            if !wait {
                return Err(error);
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return self.route_to(target),
            }
        }
    }
}
