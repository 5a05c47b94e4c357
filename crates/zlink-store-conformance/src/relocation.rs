//! Relocation Store checks: one per provider contract test of spec 23.

use std::time::Duration;

use bytes::Bytes;
use zlink_store_spi::{
    BlobReadResult, BlobRef, BoxFuture, DynRelocationStore, MAX_BLOB_LEN, PutResult,
    RelocationStore, RenewResult, Retention, StoreErrorKind,
};

use crate::util::{ensure, fail, io, pass_time};
use crate::{CheckResult, RelocationCapabilities};

type Check = for<'a> fn(
    &'a dyn DynRelocationStore,
    &'a RelocationCapabilities,
) -> BoxFuture<'a, CheckResult>;

macro_rules! checks {
    ($($name:ident),* $(,)?) => {
        /// Every Relocation Store check by name, in the order the harness runs them.
        pub(crate) fn all_checks() -> Vec<(&'static str, Check)> {
            vec![$((stringify!($name), (|s, c| Box::pin($name(s, c))) as Check)),*]
        }
    };
}

checks!(
    same_bytes_already_stored_different_bytes_conflict,
    largest_blob_round_trips_and_one_byte_more_is_rejected,
    lost_put_is_confirmed_by_retry_or_read,
    read_bytes_are_stable_while_held,
    renew_and_delete_never_change_the_payload,
    expiry_follows_the_provider_clock,
    references_compare_exactly,
);

fn reference(caps: &RelocationCapabilities, name: &str) -> CheckResult<BlobRef> {
    BlobRef::new(format!("{}{name}", caps.prefix)).map_err(|e| e.to_string())
}

fn hours(n: u64) -> Retention {
    Retention::new(Duration::from_secs(n * 3600)).unwrap_or(Retention::MAX)
}

async fn delete(store: &dyn DynRelocationStore, r: &BlobRef) -> CheckResult {
    io(store.delete(r).await, "cleanup delete").map(|_| ())
}

async fn found(store: &dyn DynRelocationStore, r: &BlobRef) -> CheckResult<Bytes> {
    match io(store.read(r).await, "read")? {
        BlobReadResult::Found { bytes, .. } => Ok(bytes),
        BlobReadResult::Missing { .. } => fail(format!("{r} unexpectedly Missing")),
    }
}

/// Spec 23: "`put` with same reference + same bytes -> `AlreadyStored`; different bytes ->
/// `Conflict`."
pub async fn same_bytes_already_stored_different_bytes_conflict(
    store: &dyn DynRelocationStore,
    caps: &RelocationCapabilities,
) -> CheckResult {
    let r = reference(caps, "blob")?;
    let payload = Bytes::from_static(b"\x00payload\xff");
    let result = async {
        let first = io(store.put(&r, &payload, hours(1)).await, "first put")?;
        let PutResult::Stored {
            expires_at,
            store_now,
        } = first
        else {
            return fail(format!("first put answered {first:?}"));
        };
        ensure(expires_at > store_now, || {
            "expiry not after StoreNow".into()
        })?;
        let again = io(store.put(&r, &payload.clone(), hours(2)).await, "same put")?;
        ensure(matches!(again, PutResult::AlreadyStored { .. }), || {
            format!("same bytes answered {again:?}")
        })?;
        let other = Bytes::from_static(b"\x00payload\xfe");
        let conflict = io(store.put(&r, &other, hours(1)).await, "different put")?;
        ensure(matches!(conflict, PutResult::Conflict { .. }), || {
            format!("different bytes answered {conflict:?}")
        })?;
        // A prefix of the stored bytes is different bytes too.
        let shorter = payload.slice(..payload.len() - 1);
        let conflict = io(store.put(&r, &shorter, hours(1)).await, "prefix put")?;
        ensure(matches!(conflict, PutResult::Conflict { .. }), || {
            "a byte prefix counted as the same bytes".into()
        })?;
        ensure(found(store, &r).await? == payload, || {
            "payload changed by a refused put".into()
        })
    }
    .await;
    delete(store, &r).await?;
    result
}

/// Spec 23: "64 MiB + 23-byte blobs ... are supported"; one byte more is an argument error that
/// stores nothing.
pub async fn largest_blob_round_trips_and_one_byte_more_is_rejected(
    store: &dyn DynRelocationStore,
    caps: &RelocationCapabilities,
) -> CheckResult {
    let over = reference(caps, "over")?;
    let too_big = Bytes::from(vec![7u8; MAX_BLOB_LEN + 1]);
    match store.put(&over, &too_big, hours(1)).await {
        Err(e) if e.kind() == StoreErrorKind::InvalidArgument => {}
        other => return fail(format!("a 64 MiB + 24 byte put answered {other:?}")),
    }
    drop(too_big);
    ensure(
        matches!(
            io(store.read(&over).await, "read over")?,
            BlobReadResult::Missing { .. }
        ),
        || "the rejected blob was stored".into(),
    )?;
    if !caps.largest_blob {
        return Ok(());
    }
    let r = reference(caps, "largest")?;
    let mut bytes = vec![0u8; MAX_BLOB_LEN];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    let payload = Bytes::from(bytes);
    let result = async {
        let put = io(store.put(&r, &payload, hours(1)).await, "largest put")?;
        ensure(matches!(put, PutResult::Stored { .. }), || {
            format!("largest put answered {put:?}")
        })?;
        let got = found(store, &r).await?;
        ensure(got == payload, || "largest blob came back different".into())
    }
    .await;
    delete(store, &r).await?;
    result
}

/// Spec 23: "After a lost `put` result, state is reconstructed by exact `read` or by `put` with
/// the same input" / "a write that completes after the timeout is confirmed as `AlreadyStored`
/// by retrying with the same reference and bytes."
pub async fn lost_put_is_confirmed_by_retry_or_read(
    store: &dyn DynRelocationStore,
    caps: &RelocationCapabilities,
) -> CheckResult {
    let r = reference(caps, "lost")?;
    let payload = Bytes::from(vec![42u8; 100_000]);
    let result = async {
        let outcome = match &caps.lossy_putter {
            Some(lossy) => lossy.put(&r, &payload, hours(1)).await,
            None => {
                // No natural way to lose a reply here: put and drop the result.
                let _ = store.put(&r, &payload, hours(1)).await;
                Err(zlink_store_spi::StoreError::TimedOut)
            }
        };
        match outcome {
            Err(e) if e.outcome_unknown() => {}
            other => return fail(format!("the lossy put did not lose its reply: {other:?}")),
        }
        // Retry with the same input: a put that landed after its reply was lost answers
        // AlreadyStored (a delayed command is ordered before the retry on the same server).
        match io(store.put(&r, &payload, hours(1)).await, "retry")? {
            PutResult::AlreadyStored { .. } => ensure(found(store, &r).await? == payload, || {
                "read disagrees".into()
            }),
            PutResult::Stored { .. } => {
                fail("the lost put had not landed: the capability did not lose a committed reply")
            }
            PutResult::Conflict { .. } => fail("retry with identical bytes conflicted"),
        }
    }
    .await;
    delete(store, &r).await?;
    result
}

/// Spec 23: "`read` bytes do not change while held."
pub async fn read_bytes_are_stable_while_held(
    store: &dyn DynRelocationStore,
    caps: &RelocationCapabilities,
) -> CheckResult {
    let r = reference(caps, "stable")?;
    let payload = Bytes::from_static(b"first");
    let result = async {
        io(store.put(&r, &payload, hours(1)).await, "put")?;
        let held = found(store, &r).await?;
        io(store.delete(&r).await, "delete")?;
        io(
            store.put(&r, &Bytes::from_static(b"other"), hours(1)).await,
            "re-put",
        )?;
        ensure(held.as_ref() == b"first", || "held bytes changed".into())
    }
    .await;
    delete(store, &r).await?;
    result
}

/// Spec 23: "Repeated `renew` and `delete` do not change the payload."
pub async fn renew_and_delete_never_change_the_payload(
    store: &dyn DynRelocationStore,
    caps: &RelocationCapabilities,
) -> CheckResult {
    let r = reference(caps, "renew")?;
    let payload = Bytes::from_static(b"renewable");
    let result = async {
        let PutResult::Stored {
            expires_at: first, ..
        } = io(store.put(&r, &payload, hours(1)).await, "put")?
        else {
            return fail("put did not store");
        };
        let mut last = first;
        for _ in 0..3 {
            match io(store.renew(&r, hours(5)).await, "renew")? {
                RenewResult::Renewed {
                    expires_at,
                    store_now,
                } => {
                    ensure(expires_at >= last, || {
                        "renew moved the expiry backwards".into()
                    })?;
                    ensure(
                        expires_at
                            .as_millis()
                            .abs_diff(store_now.plus(hours(5)).as_millis())
                            <= 1_000,
                        || "renewed expiry is not StoreNow + retention".into(),
                    )?;
                    last = expires_at;
                }
                RenewResult::Missing { .. } => {
                    return fail("renew of a live blob answered Missing");
                }
            }
            ensure(found(store, &r).await? == payload, || {
                "renew changed the payload".into()
            })?;
        }
        for _ in 0..3 {
            io(store.delete(&r).await, "delete")?;
        }
        ensure(
            matches!(
                io(store.read(&r).await, "read")?,
                BlobReadResult::Missing { .. }
            ),
            || "deleted blob readable".into(),
        )?;
        ensure(
            matches!(
                io(store.renew(&r, hours(1)).await, "renew deleted")?,
                RenewResult::Missing { .. }
            ),
            || "renew revived a deleted blob".into(),
        )
    }
    .await;
    delete(store, &r).await?;
    result
}

/// Spec 23: "expiry uses the provider clock" — an expired blob reads Missing, cannot be
/// renewed, and its reference accepts a new put.
pub async fn expiry_follows_the_provider_clock(
    store: &dyn DynRelocationStore,
    caps: &RelocationCapabilities,
) -> CheckResult {
    let r = reference(caps, "short")?;
    let payload = Bytes::from_static(b"short-lived");
    let result = async {
        let retention = Retention::from_millis(300).map_err(|e| e.to_string())?;
        io(store.put(&r, &payload, retention).await, "put")?;
        found(store, &r).await?;
        pass_time(caps.advance_clock.as_ref(), Duration::from_millis(400)).await;
        ensure(
            matches!(
                io(store.read(&r).await, "read")?,
                BlobReadResult::Missing { .. }
            ),
            || "expired blob readable".into(),
        )?;
        ensure(
            matches!(
                io(store.renew(&r, hours(1)).await, "renew")?,
                RenewResult::Missing { .. }
            ),
            || "expired blob renewed".into(),
        )?;
        let again = io(store.put(&r, &payload, hours(1)).await, "put after expiry")?;
        ensure(matches!(again, PutResult::Stored { .. }), || {
            format!("put after expiry answered {again:?}")
        })
    }
    .await;
    delete(store, &r).await?;
    result
}

/// Spec 23: references are opaque UTF-8 compared exactly (case-sensitive, no normalisation).
pub async fn references_compare_exactly(
    store: &dyn DynRelocationStore,
    caps: &RelocationCapabilities,
) -> CheckResult {
    let names = ["Ref", "ref", "caf\u{e9}", "cafe\u{301}"];
    let refs: Vec<BlobRef> = names
        .iter()
        .map(|n| reference(caps, n))
        .collect::<CheckResult<_>>()?;
    let result = async {
        for (i, r) in refs.iter().enumerate() {
            let put = io(
                store.put(r, &Bytes::from(i.to_string()), hours(1)).await,
                "put",
            )?;
            ensure(matches!(put, PutResult::Stored { .. }), || {
                format!("{r:?} aliased another reference")
            })?;
        }
        for (i, r) in refs.iter().enumerate() {
            ensure(found(store, r).await? == i.to_string(), || {
                format!("{r:?} read another blob")
            })?;
        }
        Ok(())
    }
    .await;
    for r in &refs {
        delete(store, r).await?;
    }
    result
}
