//! Restoring the Ready Instance Spots of a dead host run whose first message had not completed
//! (spec 21 §7.1, row "after Ready, before restoring the first message"; see the module docs
//! of `instance`).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zlink_codec::records::ObjectKind;
use zlink_store_spi::{BlobReadResult, RelocationStore};

use super::envelope::{ActivationEnvelope, RecoveryRoot};
use super::renewal::{Renewal, time_left};
use super::target::{build, end_of_use, open_with_first};
use crate::objects::host::ObjectHost;
use zlink_location::{AuthorityHandle, Conflict, HostRun, Outcome};

/// How many times a stored envelope that reads as missing is read again before it is
/// declared lost (spec 21 §10: a limited number of re-reads).
const READS: usize = 3;

/// How long a restore may take to rebuild the Spot (its factory's permit wait included).
const RESTORE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// What happened to one candidate.
enum Restore {
    /// Restored here, or handled (taken over elsewhere, lost data reported).
    Done,
    /// This node cannot restore it (the type is not served here, or the attempt failed): the
    /// record must not be swept from here.
    Blocked,
    /// The dead run's lease is held again: nothing of it may be touched.
    RunAlive,
}

/// Runs before this node's recovery-sweep of the dead run `dead` (the sweep deletes every row
/// of the run, a Ready Instance Spot's recovery root included): restores every such Spot this
/// node can (see [`restore_dead_run`]). When some remain that it cannot restore, it gives the
/// nodes that can one owner-lease TTL to take them over, tries once more, then sweeps anyway —
/// a node that joins later never sees the run leave its list, so nobody else would restore
/// them; their first messages are then lost, and reported. `false`: the run's lease is held
/// again, no sweep.
pub(crate) async fn before_sweep(host: &Arc<ObjectHost>, dead: &HostRun) -> bool {
    match restore_dead_run(host, dead).await {
        None => return false,
        Some(0) => return true,
        Some(blocked) => {
            tracing::info!(owner = %dead.owner_id, blocked, "Ready Instance Spots of a dead run this node cannot restore: waiting for a node that can");
        }
    }
    tokio::time::sleep(host.location.options().owner_lease_ttl).await;
    match restore_dead_run(host, dead).await {
        None => false,
        Some(0) => true,
        Some(lost) => {
            tracing::error!(owner = %dead.owner_id, lost, "no live node restored these Ready Instance Spots of a dead run: the recovery-sweep removes them and their first messages are lost");
            true
        }
    }
}

/// Restores every Ready Instance Spot of the dead run `dead` that still points at its stored
/// first message and whose type this node serves: takes the record over (conditioned on the
/// dead run's lease row read directly), rebuilds the Spot, runs the stored first message
/// first, then removes the recovery root and deletes the envelope. Returns how many such
/// records remain that this node could not restore, or `None` when the run's lease turned out
/// held (nothing of it may be touched).
pub(crate) async fn restore_dead_run(host: &Arc<ObjectHost>, dead: &HostRun) -> Option<usize> {
    let rows = match host.location.authority().instance_rows_of(dead).await {
        Ok(rows) => rows,
        Err(e) => {
            tracing::warn!(owner = %dead.owner_id, error = %e, "Instance Spot restore could not list the dead run's records");
            return Some(1);
        }
    };
    let mut blocked = 0;
    for handle in rows {
        let Some(root) = RecoveryRoot::decode(handle.payload()) else {
            continue;
        };
        match restore_one(host, &handle, &root).await {
            Restore::Done => {}
            Restore::Blocked => blocked += 1,
            Restore::RunAlive => return None,
        }
    }
    Some(blocked)
}

async fn restore_one(
    host: &Arc<ObjectHost>,
    handle: &AuthorityHandle,
    root: &RecoveryRoot,
) -> Restore {
    let id = handle.id().clone();
    let Some(hosted) = host
        .types
        .get(handle.stable_type())
        .filter(|t| t.kind == ObjectKind::InstanceSpot)
        .cloned()
    else {
        return Restore::Blocked;
    };
    // The stored first message, verified before anything changes.
    let (envelope, left) = match read_envelope(host, root).await {
        Ok(Some(found)) => found,
        Ok(None) => {
            tracing::error!(%id, "DataLost: the stored first message of a Ready Instance Spot is missing or does not verify; it cannot be restored");
            return Restore::Done;
        }
        Err(e) => {
            tracing::warn!(%id, error = %e, "the stored first message could not be read; restore left to a later attempt");
            return Restore::Blocked;
        }
    };
    let Some(mark) = host.instances.begin(&id) else {
        return Restore::Done;
    };
    let target = match host.instances.own_target(host) {
        Ok(t) => t,
        Err(e) => {
            tracing::info!(%id, error = %e, "this node cannot take over the Instance Spot yet");
            return Restore::Blocked;
        }
    };
    let taken = match host
        .location
        .authority()
        .take_over_instance(handle, &target)
        .await
    {
        Ok(Outcome::Applied(h)) => h,
        Ok(Outcome::Conflict(Conflict::RunStillLive)) => return Restore::RunAlive,
        Ok(Outcome::Conflict(c)) => {
            tracing::debug!(%id, ?c, "another node took the Instance Spot over first");
            return Restore::Done;
        }
        Err(e) => {
            tracing::warn!(%id, error = %e, "the Instance Spot takeover failed");
            return Restore::Blocked;
        }
    };
    let live = match build(host, &hosted, &taken, Instant::now() + RESTORE_DEADLINE).await {
        Ok(live) => live,
        Err(e) => {
            // Taken over but not rebuilt: the record is deleted (its capacity returned), then
            // the envelope, like any end of use.
            tracing::error!(%id, error = %e, "the restored Instance Spot's factory failed; its record is removed");
            drop(mark);
            match host.location.authority().delete(&taken).await {
                Ok(Outcome::Applied(())) => end_of_use(host, &taken, root).await,
                other => tracing::warn!(%id, ?other, "the failed restore's record was not removed"),
            }
            return Restore::Done;
        }
    };
    tracing::info!(%id, generation = taken.object_generation().get(), "Instance Spot restored from its stored first message");
    // The envelope stays in use until the restored first message's end of use.
    let renewal = match (host.instances.store(), root.blob()) {
        (Ok((store, retention)), Ok(blob)) => {
            Some(Renewal::start(Arc::clone(store), blob, retention, left))
        }
        _ => None,
    };
    let host = Arc::clone(host);
    let root = root.clone();
    tokio::spawn(async move {
        let _renewal = renewal;
        match open_with_first(
            &host,
            live,
            &envelope,
            mark,
            &taken,
            crate::mesh::JobPermit::none(),
        )
        .await
        {
            Ok(out) => {
                if let Err(e) = out {
                    tracing::info!(id = %envelope.id, error = %e, "the restored first message ended with an error");
                }
                end_of_use(&host, &taken, &root).await;
            }
            Err(_) => {
                tracing::info!(id = %envelope.id, "the restored Instance Spot closed before its first message ran")
            }
        }
    });
    Restore::Done
}

/// The stored envelope `root` names, verified, with the time it has left by the provider
/// clock; `None` when it stays missing or does not verify (DataLost).
async fn read_envelope(
    host: &ObjectHost,
    root: &RecoveryRoot,
) -> Result<Option<(ActivationEnvelope, Duration)>, crate::messaging::ZLinkError> {
    let (store, _) = host.instances.store()?;
    let blob = root.blob()?;
    for attempt in 0..READS {
        match store.read(&blob).await {
            Ok(BlobReadResult::Found {
                bytes,
                expires_at,
                store_now,
            }) if root.verifies(&bytes) => {
                let left = time_left(expires_at, store_now);
                return Ok(ActivationEnvelope::decode(&bytes).ok().map(|e| (e, left)));
            }
            Ok(BlobReadResult::Found { .. }) => return Ok(None),
            Ok(BlobReadResult::Missing { .. }) if attempt + 1 < READS => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(BlobReadResult::Missing { .. }) => return Ok(None),
            Err(e) => {
                return Err(crate::messaging::ZLinkError::RelocationStore(
                    crate::messaging::RelocationStoreError::operation(e),
                ));
            }
        }
    }
    Ok(None)
}
