//! Runtime internals for benchmarks and tests outside this crate, behind the non-default
//! `testing` cargo feature. Applications never enable it: nothing here is part of the public
//! API, and everything here can break the runtime's invariants (release its lease, write
//! authority records directly).

use std::sync::Arc;

pub use super::admission::AdmissionGate;
pub use super::authority::{
    AuthorityClient, AuthorityHandle, AuthorityRead, Conflict, Outcome, ReserveRequest,
    TargetReservation,
};
pub use super::capacity::{CapacityBundle, CapacityRow, NodeUsage, SpotTypeSlots, Usage};
pub use super::descriptor::{DescriptorPublisher, PublishOutcome, PublishableDescriptor};
pub use super::discovery::{
    DiscoveredNode, Discovery, DiscoveryStatus, DiscoveryView, PageStats, target_of,
};
pub use super::identity::new_owner_id;
pub use super::lease::{OwnerLease, RenewOutcome};
pub use super::placement::{Candidate, PlacementRng, TargetNode, check_weight, choose};
use super::runtime::LocationRuntime;

/// The runtime's authority operations.
pub fn authority(rt: &LocationRuntime) -> &AuthorityClient {
    rt.authority()
}

/// The runtime's owner lease.
pub fn lease(rt: &LocationRuntime) -> &Arc<OwnerLease> {
    rt.lease()
}

/// The runtime's admission gate.
pub fn gate(rt: &LocationRuntime) -> &Arc<AdmissionGate> {
    rt.gate()
}

/// A descriptor publisher of this host (see [`DescriptorPublisher`]).
pub fn descriptor_publisher<D: PublishableDescriptor>(
    rt: &LocationRuntime,
    descriptor: D,
) -> Result<DescriptorPublisher<D>, super::LocationError> {
    rt.descriptor_publisher(descriptor)
}

/// A discovery reader of one mesh.
pub fn discovery(
    rt: &LocationRuntime,
    mesh: &super::MeshName,
) -> Result<Discovery, super::LocationError> {
    rt.discovery(mesh)
}

/// Starts a runtime after checking every descriptor it will publish (startup fails before any
/// Store request if one is out of bounds).
pub async fn start_checking<D: PublishableDescriptor>(
    builder: super::LocationRuntimeBuilder,
    descriptors: &[D],
) -> Result<LocationRuntime, super::LocationError> {
    builder.start_checking(descriptors).await
}
