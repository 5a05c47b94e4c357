//! Small helpers shared by the checks.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use zlink_store_spi::{
    DynLocationStore, LocationStore, LocationStoreExt, Mutation, PageLimit, ReadResult, ScanPrefix,
    StoreKey, WriteRequest, WriteResult,
};

use crate::CheckResult;

/// Polls every future concurrently on the current task and returns their outputs in order.
/// (Lets checks run concurrent operations over a borrowed `&dyn` store without spawning.)
pub(crate) async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut pending: Vec<Option<Pin<Box<F>>>> =
        futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut outputs: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut all_done = true;
        for (slot, out) in pending.iter_mut().zip(outputs.iter_mut()) {
            if let Some(fut) = slot {
                match fut.as_mut().poll(cx) {
                    Poll::Ready(v) => {
                        *out = Some(v);
                        *slot = None;
                    }
                    Poll::Pending => all_done = false,
                }
            }
        }
        if all_done {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

/// Fails the check with a message.
pub(crate) fn fail<T>(msg: impl Into<String>) -> CheckResult<T> {
    Err(msg.into())
}

/// Turns a condition into a check failure.
pub(crate) fn ensure(cond: bool, msg: impl FnOnce() -> String) -> CheckResult {
    if cond { Ok(()) } else { Err(msg()) }
}

/// Maps a store error to a check failure.
pub(crate) fn io<T>(r: zlink_store_spi::StoreResult<T>, what: &str) -> CheckResult<T> {
    r.map_err(|e| format!("{what}: unexpected store error: {e} ({:?})", e.kind()))
}

pub(crate) fn key(prefix: &str, name: &str) -> StoreKey {
    // Prefixes and names used by the suite are short ASCII; an invalid one is a suite bug that
    // the very first check would reveal.
    StoreKey::new(format!("{prefix}{name}")).unwrap_or_else(|e| panic!("suite key invalid: {e}"))
}

pub(crate) fn request(
    conditions: Vec<zlink_store_spi::Condition>,
    mutations: Vec<Mutation>,
) -> CheckResult<WriteRequest> {
    WriteRequest::new(conditions, mutations)
        .map_err(|e| format!("suite built an invalid batch: {e}"))
}

/// Applies a batch that must succeed and returns its versions.
pub(crate) async fn apply(
    store: &dyn DynLocationStore,
    req: &WriteRequest,
    what: &str,
) -> CheckResult<Vec<zlink_store_spi::StoreVersion>> {
    match io(store.write(req).await, what)? {
        WriteResult::Applied { put_versions, .. } => {
            ensure(put_versions.len() == req.put_count(), || {
                format!(
                    "{what}: {} versions for {} puts",
                    put_versions.len(),
                    req.put_count()
                )
            })?;
            Ok(put_versions)
        }
        WriteResult::Conflict { .. } => fail(format!("{what}: unexpected Conflict")),
    }
}

/// Reads a key that must be found; returns (bytes, version).
pub(crate) async fn read_found(
    store: &dyn DynLocationStore,
    k: &StoreKey,
    what: &str,
) -> CheckResult<(bytes::Bytes, zlink_store_spi::StoreVersion)> {
    match io(store.read(k).await, what)? {
        ReadResult::Found { bytes, version, .. } => Ok((bytes, version)),
        ReadResult::Missing { .. } => fail(format!("{what}: key {k} unexpectedly Missing")),
    }
}

/// Deletes every key under `prefix` (best effort, in batches), so runs leave nothing behind.
pub(crate) async fn cleanup(store: &dyn DynLocationStore, prefix: &str) -> CheckResult {
    let scan_prefix = ScanPrefix::new(prefix).map_err(|e| e.to_string())?;
    for _ in 0..8 {
        let items = io(
            store.scan_all(&scan_prefix, PageLimit::LARGEST, 4).await,
            "cleanup scan",
        )?;
        // Only readable keys can be deleted through the SPI.
        let Some(items) = items.map(|l| l.items) else {
            continue;
        };
        if items.is_empty() {
            return Ok(());
        }
        for chunk in items.chunks(WriteRequest::MAX_UNIQUE_KEYS) {
            let req = request(
                vec![],
                chunk
                    .iter()
                    .map(|i| Mutation::Delete(i.key.clone()))
                    .collect(),
            )?;
            io(store.write(&req).await, "cleanup delete")?;
        }
    }
    fail("cleanup: keys kept reappearing under the prefix")
}

/// Waits for a provider clock to move by `by`: through the capability when the harness has
/// one, otherwise by sleeping (plus a margin for clock granularity).
pub(crate) async fn pass_time(advance: Option<&crate::AdvanceClock>, by: Duration) {
    match advance {
        Some(f) => f(by),
        None => tokio::time::sleep(by + Duration::from_millis(50)).await,
    }
}
