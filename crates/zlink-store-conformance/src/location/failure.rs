//! Lost results, cancellation and out-of-bound batches (spec 22 §10).

use std::time::Duration;

use bytes::Bytes;
use zlink_store_spi::{
    Condition, DynLocationStore, LocationStore, MAX_VALUE_LEN, Mutation, StoreErrorKind, StoreKey,
    WriteRequest,
};

use crate::util::{apply, ensure, fail, io, key, read_found, request};
use crate::{CheckResult, LocationCapabilities};

/// Spec 22 §10: "After cancellation or result loss, whether it committed can be reconstructed
/// via an exact read and version."
pub async fn lost_write_result_is_reconstructed_by_exact_read(
    store: &dyn DynLocationStore,
    caps: &LocationCapabilities,
) -> CheckResult {
    let k = key(&caps.prefix, "k");
    let v1 = apply(
        store,
        &request(vec![], vec![Mutation::put(k.clone(), "before")])?,
        "seed",
    )
    .await?;
    let req = request(
        vec![Condition::Version(k.clone(), v1[0].clone())],
        vec![Mutation::put(k.clone(), "after")],
    )?;
    let outcome = match &caps.lossy_writer {
        Some(lossy) => lossy.write(&req).await,
        None => {
            // No way to lose a reply on this provider: apply the write and drop its result,
            // which is what a lost reply looks like to the caller.
            let _ = store.write(&req).await;
            Err(zlink_store_spi::StoreError::TimedOut)
        }
    };
    match outcome {
        Err(e) if e.outcome_unknown() => {}
        Err(e) => return fail(format!("lossy write failed with a non-loss error: {e}")),
        Ok(r) => return fail(format!("the lossy writer did not lose the reply: {r:?}")),
    }
    // Reconstruct: the key either still holds v1 (not committed) or our bytes under a new
    // version (committed). Wait briefly for a delayed command to land.
    let mut committed = None;
    for _ in 0..100 {
        let (b, v) = read_found(store, &k, "reconstruct").await?;
        if b.as_ref() == b"after" && v != v1[0] {
            committed = Some(true);
            break;
        }
        ensure(b.as_ref() == b"before" && v == v1[0], || {
            "key is in neither the old nor the new state".into()
        })?;
        committed = Some(false);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ensure(committed == Some(true), || {
        "the lost write never became visible".into()
    })?;
    // Retrying the same conditional write now conflicts: the reconstruction was right.
    ensure(!io(store.write(&req).await, "retry")?.is_applied(), || {
        "a retry of a committed CAS applied twice".into()
    })
}

/// Spec 22 §6: "Cancellation before an operation starts blocks I/O and commit from starting."
pub async fn dropped_before_poll_commits_nothing(
    store: &dyn DynLocationStore,
    caps: &LocationCapabilities,
) -> CheckResult {
    let k = key(&caps.prefix, "k");
    let req = request(vec![], vec![Mutation::put(k.clone(), "never")])?;
    let fut = store.write(&req);
    drop(fut);
    tokio::time::sleep(Duration::from_millis(50)).await;
    ensure(io(store.read(&k).await, "read")?.is_missing(), || {
        "a write dropped before its first poll committed".into()
    })
}

/// Bounds: past-the-bound batches are typed argument errors and change nothing.
pub async fn out_of_bound_batch_is_rejected_and_changes_nothing(
    store: &dyn DynLocationStore,
    caps: &LocationCapabilities,
) -> CheckResult {
    let keys: Vec<StoreKey> = (0..=WriteRequest::MAX_UNIQUE_KEYS)
        .map(|i| key(&caps.prefix, &format!("k{i:05}")))
        .collect();
    let too_many = WriteRequest::new(
        vec![],
        keys.iter().map(|k| Mutation::put(k.clone(), "v")).collect(),
    );
    ensure(too_many.is_err(), || "2,049 keys accepted".into())?;
    let k0 = key(&caps.prefix, "big");
    let too_big = WriteRequest::new(
        vec![],
        vec![Mutation::put(
            k0.clone(),
            Bytes::from(vec![0u8; MAX_VALUE_LEN + 1]),
        )],
    );
    ensure(too_big.is_err(), || "a 1 MiB + 1 value accepted".into())?;
    let err = zlink_store_spi::StoreError::from(too_big.err().ok_or("no error")?);
    ensure(err.kind() == StoreErrorKind::InvalidArgument, || {
        "not an argument error".into()
    })?;
    ensure(io(store.read(&keys[0]).await, "read")?.is_missing(), || {
        "store changed".into()
    })?;
    ensure(io(store.read(&k0).await, "read")?.is_missing(), || {
        "store changed".into()
    })
}
