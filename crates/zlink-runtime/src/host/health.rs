//! Health and readiness of a running host for operational endpoints (guide-10 §4:
//! `storeHealthy()`, `ownerLeaseHealthy()`, `isPeerReady(mesh, role, ..)`).
//!
//! Every call here is cheap (a few atomics, one read lock of a peer table) and makes no Store
//! request. What it returns is health only — no Store key, version, owner token or
//! relocation record (guide-10 §4, spec 21 §7.4). Without a Location Store (manual topology)
//! there is no Store and no owner lease to be unhealthy: the detailed reports are `None` and
//! the boolean calls answer `true`.

use zlink_codec::{MeshName, RoutingId};
use zlink_location::{LeaseHealthStatus, StoreHealthStatus};

use super::running::ZLinkHost;
use crate::mesh::node::PeerRole;

/// The Location Store's and the owner lease's health as this host sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LocationHealth {
    /// When the last Store call was answered, since when calls keep failing.
    pub store: StoreHealthStatus,
    /// Held, renewing, expired or released; the time left to the admission deadline.
    pub owner_lease: LeaseHealthStatus,
}

impl ZLinkHost {
    /// The Location Store's and the owner lease's health (`None` without a Location Store).
    pub fn location_health(&self) -> Option<LocationHealth> {
        self.inner().health.as_ref().map(|p| LocationHealth {
            store: p.store(),
            owner_lease: p.lease(),
        })
    }

    /// Whether the last Location Store call this host made was answered (`true` without a
    /// Location Store).
    pub fn store_healthy(&self) -> bool {
        self.inner()
            .health
            .as_ref()
            .is_none_or(|p| p.store().is_healthy())
    }

    /// Whether the owner lease is held and its last renew succeeded (`true` without a Location
    /// Store). A lease whose renew failed but whose admission deadline has not passed is
    /// `Renewing`: work is still admitted, but this answers `false`.
    pub fn owner_lease_healthy(&self) -> bool {
        self.inner()
            .health
            .as_ref()
            .is_none_or(|p| p.lease().is_healthy())
    }

    /// Whether the MeshNode of `mesh` has a Ready, admitted peer of `role` (`routing_id`: that
    /// peer; `None`: any). An unknown MeshName answers `false`. See
    /// [`MeshNode::is_peer_ready`](crate::MeshNode::is_peer_ready).
    pub fn is_peer_ready(
        &self,
        mesh: &MeshName,
        role: &PeerRole,
        routing_id: Option<&RoutingId>,
    ) -> bool {
        self.node(mesh)
            .is_some_and(|n| n.is_peer_ready(role, routing_id))
    }
}
