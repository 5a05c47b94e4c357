//! The batched exact read (`LocationStore::read_many`, additive to spec 22 §3): every key
//! answered as its own exact read would answer it, within the key-count bound.

use std::time::Duration;

use bytes::Bytes;
use zlink_store_spi::{
    Argument, ArgumentError, DynLocationStore, LocationStore, MAX_READ_MANY_KEYS, Mutation,
    ReadResult, Retention, StoreError, StoreErrorKind, StoreKey,
};

use super::ms;
use crate::util::{apply, ensure, fail, io, key, pass_time, request};
use crate::{CheckResult, LocationCapabilities};

/// `read_many` answers each key as an exact read of it does — bytes, version and expiry of a
/// live value; `Missing` for a key never written, deleted or expired — in the order given (a
/// key named twice answered twice), each with a StoreNow within the call; no keys answers
/// nothing; 1,000 keys are answered and 1,001 are an argument error before any read.
pub async fn read_many_answers_as_exact_reads(
    store: &dyn DynLocationStore,
    caps: &LocationCapabilities,
) -> CheckResult {
    let durable = key(&caps.prefix, "durable");
    let expiring = key(&caps.prefix, "expiring");
    let short = key(&caps.prefix, "short");
    let deleted = key(&caps.prefix, "deleted");
    let absent = key(&caps.prefix, "absent");
    let hour = Retention::new(Duration::from_secs(3600)).map_err(|e| e.to_string())?;
    apply(
        store,
        &request(
            vec![],
            vec![
                Mutation::put(durable.clone(), Bytes::from_static(b"\x00d\xff")),
                Mutation::put_expiring(expiring.clone(), "e", hour),
                Mutation::put_expiring(short.clone(), "s", ms(300)),
                Mutation::put(deleted.clone(), "x"),
            ],
        )?,
        "seed",
    )
    .await?;
    apply(
        store,
        &request(vec![], vec![Mutation::Delete(deleted.clone())])?,
        "delete",
    )
    .await?;
    pass_time(caps.advance_clock.as_ref(), Duration::from_millis(400)).await;

    let keys = vec![
        durable.clone(),
        absent.clone(),
        expiring.clone(),
        short.clone(),
        deleted.clone(),
        durable.clone(),
    ];
    let before = io(store.read(&absent).await, "read before")?.store_now();
    let many = io(store.read_many(&keys).await, "read_many")?;
    let after = io(store.read(&absent).await, "read after")?.store_now();
    ensure(many.len() == keys.len(), || {
        format!("{} answers for {} keys", many.len(), keys.len())
    })?;
    for (k, got) in keys.iter().zip(&many) {
        ensure(
            got.store_now() >= before && got.store_now() <= after,
            || format!("{k}: StoreNow {} outside the call", got.store_now()),
        )?;
        let single = io(store.read(k).await, "exact read")?;
        ensure(same_observation(got, &single), || {
            format!("{k}: read_many answered {got:?}, an exact read {single:?}")
        })?;
    }
    for (i, what) in [(1, "never written"), (3, "expired"), (4, "deleted")] {
        ensure(many[i].is_missing(), || {
            format!("a key {what} is not Missing: {:?}", many[i])
        })?;
    }
    match &many[0] {
        ReadResult::Found {
            bytes, expires_at, ..
        } => ensure(
            bytes.as_ref() == b"\x00d\xff" && expires_at.is_none(),
            || "durable value read wrong".into(),
        )?,
        ReadResult::Missing { .. } => return fail("durable value Missing"),
    }
    ensure(
        matches!(
            &many[2],
            ReadResult::Found {
                expires_at: Some(_),
                ..
            }
        ),
        || "expiring value read without its expiry".into(),
    )?;
    ensure(
        io(store.read_many(&[]).await, "read_many of no keys")?.is_empty(),
        || "no keys answered something".into(),
    )?;

    // The bound: 1,000 keys answered, 1,001 refused before any read.
    let at: Vec<StoreKey> = (0..MAX_READ_MANY_KEYS)
        .map(|i| key(&caps.prefix, &format!("b{i:04}")))
        .collect();
    let answers = io(store.read_many(&at).await, "read_many at the bound")?;
    ensure(
        answers.len() == MAX_READ_MANY_KEYS && answers.iter().all(ReadResult::is_missing),
        || "1,000 absent keys not answered Missing each".into(),
    )?;
    let mut past = at;
    past.push(durable.clone());
    match store.read_many(&past).await {
        Err(StoreError::InvalidArgument(ArgumentError::Length {
            what: Argument::ReadMany,
            actual,
            ..
        })) if actual == MAX_READ_MANY_KEYS + 1 => Ok(()),
        Err(e) if e.kind() == StoreErrorKind::InvalidArgument => fail(format!(
            "1,001 keys refused with the wrong argument error: {e}"
        )),
        other => fail(format!("1,001 keys not refused: {other:?}")),
    }
}

/// Whether two reads of one key observed the same value (StoreNow aside).
fn same_observation(a: &ReadResult, b: &ReadResult) -> bool {
    match (a, b) {
        (ReadResult::Missing { .. }, ReadResult::Missing { .. }) => true,
        (
            ReadResult::Found {
                bytes: ab,
                version: av,
                expires_at: ae,
                ..
            },
            ReadResult::Found {
                bytes: bb,
                version: bv,
                expires_at: be,
                ..
            },
        ) => ab == bb && av == bv && ae == be,
        _ => false,
    }
}
