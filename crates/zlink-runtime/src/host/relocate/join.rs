//! The single move entry a cross-node Actor join runs through (spec 21 §1.3, §8.2): the host
//! layer's [`JoinMover`], installed on every object host once the host is built, runs the
//! relocation layer's move of one Actor to the joined Spot's node as accepted work (a
//! shutdown waits for it, spec 28 §9), bounded by the host Relocate's default deadline.

use std::sync::{Arc, Weak};

use tokio::time::Instant;
use zlink_codec::records::HostState;

use super::moves::object_client;
use crate::host::running::HostInner;
use crate::messaging::{BoxFuture, Unconfigured, ZLinkError};
use crate::objects::join::{JoinMove, JoinMover};

/// The move entry of the object node `node` of a host.
struct JoinMoves {
    /// The host (weak: the object host it is installed on belongs to it).
    host: Weak<HostInner>,
    node: usize,
}

impl JoinMover for JoinMoves {
    fn join_across(&self, join: JoinMove) -> BoxFuture<'static, Result<(), ZLinkError>> {
        let (host, node) = (self.host.clone(), self.node);
        Box::pin(async move {
            let host = host.upgrade().ok_or(ZLinkError::ShuttingDown)?;
            if matches!(host.life.state(), HostState::Draining | HostState::Stopped) {
                return Err(ZLinkError::ShuttingDown);
            }
            let client = object_client(&host, node)
                .ok_or(ZLinkError::NotConfigured(Unconfigured::AutomaticTopology))?;
            // Accepted work: a shutdown that seals admission waits for it (spec 28 §9).
            let _work = host.life.admit()?;
            let until = Instant::now() + super::types::DEFAULT_RELOCATE_DEADLINE;
            let part = crate::relocation::JoinPart::of(&join.target);
            let moved = crate::relocation::relocate_actor_joining(
                &client,
                &join.actor,
                &join.to,
                part,
                Some(until),
            )
            .await;
            match moved {
                Ok(_) => Ok(()),
                // The owner change applied; only the record's read-back failed.
                Err(ZLinkError::MovedUnconfirmed { .. }) => Ok(()),
                Err(e) => Err(e),
            }
        })
    }
}

/// Installs the move entry on every object host of `host`.
pub(crate) fn install(host: &Arc<HostInner>) {
    for (node, objects) in host.objects.iter().enumerate() {
        if let Some(o) = objects {
            let mover = JoinMoves {
                host: Arc::downgrade(host),
                node,
            };
            if o.host.join_mover.set(Arc::new(mover)).is_err() {
                tracing::warn!(node, "a join move entry was already installed");
            }
        }
    }
}
