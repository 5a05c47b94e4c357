//! Everything the behaviour tests share: imports and the helpers that build hosts, objects and
//! capacity views.
#![allow(unused_imports)]

pub(super) use std::collections::BTreeSet;
pub(super) use std::sync::Arc;
pub(super) use std::sync::atomic::{AtomicBool, Ordering};
pub(super) use std::time::Duration;

pub(super) use zlink_codec::Generation;
pub(super) use zlink_codec::records::{AllocationState, HostState, MeshNodeRecord, ObjectKind};
pub(super) use zlink_store_spi::{
    DynLocationStore, LocationStore, PageLimit, ReadResult, ScanCursor, StoreErrorKind, StoreKey,
};

pub(super) use super::support::{
    Harness, HarnessExt, Host, capability, descriptor, force_delete, force_put, host, short_lease,
    snapshot_of, ty,
};
pub(super) use crate::{
    AdmissionOp, AdmissionRefused, ConfigError, GenerationKind, HostRun, LocationError,
    LocationOptions, LocationRuntime, ManualMonotonic, MonotonicClock, ObjectId, SweepReport, keys,
    lease,
};
pub(super) use crate::{
    AuthorityHandle, AuthorityRead, Conflict, DiscoveryStatus, NodeUsage, Outcome, PublishOutcome,
    RenewOutcome, ReserveRequest, TargetNode, TargetReservation,
};
pub(super) use zlink_codec::counter::{EXHAUSTED as COUNTER_EXHAUSTED, MAX_ISSUED};
pub(super) use zlink_store_conformance::{Fault, FaultyLocationStore, LocationOp};

pub(super) fn id(s: &str) -> ObjectId {
    ObjectId::new(s).expect("object id")
}

pub(super) fn request(
    kind: ObjectKind,
    object: &str,
    stable_type: &str,
    target: TargetNode,
) -> ReserveRequest {
    ReserveRequest {
        kind,
        id: id(object),
        stable_type: ty(stable_type),
        target,
        payload: b"internal".to_vec(),
        pending_creation: None,
        creation: None,
    }
}

/// Reserve on `target` by `by`, expecting it applied.
pub(super) async fn reserve(
    by: &Host,
    kind: ObjectKind,
    object: &str,
    stable_type: &str,
    target: &Host,
) -> AuthorityHandle {
    by.rt
        .authority()
        .reserve(request(kind, object, stable_type, target.target()))
        .await
        .expect("reserve")
        .applied()
        .expect("reserve applied")
}

/// An active actor `object` owned by `host`.
pub(super) async fn active_actor(host: &Host, object: &str) -> AuthorityHandle {
    active(host, ObjectKind::Actor, object, "chat").await
}

/// An Active User Spot `object` of type `game` owned by `host`.
pub(super) async fn active_spot(host: &Host, object: &str) -> AuthorityHandle {
    active(host, ObjectKind::UserSpot, object, "game").await
}

/// An Active `kind` `object` of `stable_type` owned by `host`.
async fn active(host: &Host, kind: ObjectKind, object: &str, stable_type: &str) -> AuthorityHandle {
    let h = reserve(host, kind, object, stable_type, host).await;
    host.rt
        .authority()
        .commit(&h, None)
        .await
        .expect("commit")
        .applied()
        .expect("commit applied")
}

pub(super) async fn counter(store: &dyn DynLocationStore, kind: GenerationKind) -> Option<String> {
    store
        .read(&kind.counter_key())
        .await
        .expect("read counter")
        .bytes()
        .map(|b| String::from_utf8(b.to_vec()).expect("utf8"))
}

/// The active/reserved split of `node_of`'s slots, derived from the records; also checks that
/// the node's allocation row equals their sum.
pub(super) async fn capacity(host: &Host, node_of: &Host) -> NodeUsage {
    let auth = host.rt.authority();
    let usage = auth.node_usage(&node_of.node()).await.expect("usage");
    let row = auth
        .node_capacity(&node_of.node())
        .await
        .expect("allocation row");
    assert_eq!(
        row,
        usage.allocated(),
        "the allocation row is the sum of the records"
    );
    usage
}

pub(super) fn is_admission(e: &LocationError) -> bool {
    matches!(
        e,
        LocationError::Admission(AdmissionRefused::DeadlinePassed { .. })
    )
}

pub(super) async fn publish(host: &Host) {
    host.rt
        .descriptor_publisher(host.desc.clone())
        .expect("publisher")
        .publish(host.desc.clone())
        .await
        .expect("publish");
}

/// Secures target capacity on `target` for `handle`, by its owner `by`.
pub(super) async fn secure(
    by: &Host,
    handle: &AuthorityHandle,
    target: &Host,
) -> TargetReservation {
    by.rt
        .authority()
        .secure_target(handle, target.target(), None)
        .await
        .expect("secure")
        .applied()
        .expect("secured")
}

/// The recovery-sweep of `dead` by `by`, expecting it applied.
pub(super) async fn recover(by: &Host, dead: &HostRun) -> SweepReport {
    by.rt
        .authority()
        .recovery_sweep(dead)
        .await
        .expect("sweep")
        .applied()
        .expect("swept")
}
