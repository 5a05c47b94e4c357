//! Exact reads, conditional batches and their atomicity (spec 22 §10).

use std::time::Duration;

use bytes::Bytes;
use zlink_store_spi::{
    Condition, DynLocationStore, LocationStore, MAX_VALUE_LEN, Mutation, PageLimit, ReadResult,
    Retention, ScanPrefix, ScanRequest, ScanResult, StoreKey, WriteRequest, WriteResult,
};

use super::ms;
use crate::util::{apply, ensure, fail, io, join_all, key, pass_time, read_found, request};
use crate::{CheckResult, LocationCapabilities};

/// Spec 22 §10: "An exact read returns bytes, version, optional expiry, and StoreNow as one
/// observation."
pub async fn exact_read_returns_one_observation(
    store: &dyn DynLocationStore,
    caps: &LocationCapabilities,
) -> CheckResult {
    let durable = key(&caps.prefix, "durable");
    let expiring = key(&caps.prefix, "expiring");
    let absent = key(&caps.prefix, "absent");
    match io(store.read(&absent).await, "read absent")? {
        ReadResult::Missing { store_now } => ensure(store_now.as_millis() > 0, || {
            "Missing carries no StoreNow".into()
        })?,
        other => return fail(format!("absent key read as {other:?}")),
    }
    let retention = Retention::new(Duration::from_secs(3600)).map_err(|e| e.to_string())?;
    let req = request(
        vec![
            Condition::Missing(durable.clone()),
            Condition::Missing(expiring.clone()),
        ],
        vec![
            Mutation::put(
                durable.clone(),
                Bytes::from_static(b"\x00\x01binary\xffvalue"),
            ),
            Mutation::put_expiring(expiring.clone(), Bytes::from_static(b"e"), retention),
        ],
    )?;
    let (versions, committed_at) = match io(store.write(&req).await, "put")? {
        WriteResult::Applied {
            put_versions,
            store_now,
        } => (put_versions, store_now),
        WriteResult::Conflict { .. } => return fail("put on fresh keys conflicted"),
    };
    ensure(versions.len() == 2, || {
        format!("{} versions for 2 puts", versions.len())
    })?;
    match io(store.read(&durable).await, "read durable")? {
        ReadResult::Found {
            bytes,
            version,
            expires_at,
            store_now,
        } => {
            ensure(bytes.as_ref() == b"\x00\x01binary\xffvalue", || {
                "bytes differ".into()
            })?;
            ensure(version == versions[0], || {
                format!("version {version} != issued {}", versions[0])
            })?;
            ensure(expires_at.is_none(), || {
                "durable value has an expiry".into()
            })?;
            ensure(store_now >= committed_at, || {
                "StoreNow went backwards".into()
            })?;
        }
        ReadResult::Missing { .. } => return fail("durable value missing"),
    }
    match io(store.read(&expiring).await, "read expiring")? {
        ReadResult::Found {
            version,
            expires_at,
            store_now,
            ..
        } => {
            ensure(version == versions[1], || {
                "expiring version differs from issued".into()
            })?;
            let exp = expires_at.ok_or("expiring value has no expiry")?;
            ensure(exp > store_now, || "expiry not after StoreNow".into())?;
            let expected = committed_at.plus(retention).as_millis();
            // The commit's StoreNow plus the retention, give or take clock granularity.
            ensure(exp.as_millis().abs_diff(expected) <= 1_000, || {
                format!("expiry {exp} is not commit time + retention ({expected}ms)")
            })?;
        }
        ReadResult::Missing { .. } => return fail("expiring value missing"),
    }
    Ok(())
}

/// Spec 22 §10: "An expired value is Missing by the provider clock, and a durable value is
/// kept until explicit delete."
pub async fn expired_value_is_missing_and_durable_value_stays(
    store: &dyn DynLocationStore,
    caps: &LocationCapabilities,
) -> CheckResult {
    let short = key(&caps.prefix, "short");
    let durable = key(&caps.prefix, "durable");
    let retention = ms(300);
    apply(
        store,
        &request(
            vec![],
            vec![
                Mutation::put_expiring(short.clone(), "s", retention),
                Mutation::put(durable.clone(), "d"),
            ],
        )?,
        "put",
    )
    .await?;
    read_found(store, &short, "before expiry").await?;
    pass_time(caps.advance_clock.as_ref(), Duration::from_millis(400)).await;
    ensure(
        io(store.read(&short).await, "read expired")?.is_missing(),
        || "expired value still readable".into(),
    )?;
    // An expired key satisfies Missing and fails Version.
    let req = request(
        vec![Condition::Missing(short.clone())],
        vec![Mutation::put(short.clone(), "again")],
    )?;
    ensure(
        io(store.write(&req).await, "missing-on-expired")?.is_applied(),
        || "Missing condition did not hold on an expired key".into(),
    )?;
    read_found(store, &durable, "durable after time passed").await?;
    apply(
        store,
        &request(vec![], vec![Mutation::Delete(durable.clone())])?,
        "delete",
    )
    .await?;
    ensure(
        io(store.read(&durable).await, "read deleted")?.is_missing(),
        || "deleted value still readable".into(),
    )
}

/// Spec 22 §10: "If one condition fails, every mutation and version increment is zero."
pub async fn conflict_applies_no_mutation(
    store: &dyn DynLocationStore,
    caps: &LocationCapabilities,
) -> CheckResult {
    let a = key(&caps.prefix, "a");
    let b = key(&caps.prefix, "b");
    let c = key(&caps.prefix, "c");
    let v = apply(
        store,
        &request(
            vec![],
            vec![
                Mutation::put(a.clone(), "a1"),
                Mutation::put(b.clone(), "b1"),
            ],
        )?,
        "seed",
    )
    .await?;
    // Two conditions hold, one (Missing on an existing key) does not.
    let req = request(
        vec![
            Condition::Version(a.clone(), v[0].clone()),
            Condition::Missing(c.clone()),
            Condition::Missing(b.clone()),
        ],
        vec![
            Mutation::put(a.clone(), "a2"),
            Mutation::Delete(b.clone()),
            Mutation::put(c.clone(), "c1"),
        ],
    )?;
    match io(store.write(&req).await, "conflicting batch")? {
        WriteResult::Conflict { store_now } => ensure(store_now.as_millis() > 0, || {
            "Conflict carries no StoreNow".into()
        })?,
        WriteResult::Applied { .. } => return fail("batch with a failing condition was applied"),
    }
    let (ab, av) = read_found(store, &a, "a after conflict").await?;
    ensure(ab.as_ref() == b"a1" && av == v[0], || {
        "a changed after Conflict".into()
    })?;
    let (bb, bv) = read_found(store, &b, "b after conflict").await?;
    ensure(bb.as_ref() == b"b1" && bv == v[1], || {
        "b changed after Conflict".into()
    })?;
    ensure(io(store.read(&c).await, "c")?.is_missing(), || {
        "c was created by a Conflict".into()
    })?;
    // The version issued after a Conflict is the same as it would have been without it: the
    // conflicting batch issued nothing. Observable through the SPI as: the old version still
    // satisfies the condition.
    let ok = request(
        vec![Condition::Version(a.clone(), v[0].clone())],
        vec![Mutation::put(a.clone(), "a3")],
    )?;
    ensure(
        io(store.write(&ok).await, "after conflict")?.is_applied(),
        || "the pre-conflict version no longer matched".into(),
    )
}

/// Version conditions hold only for the current version; Missing only for absent keys.
pub async fn version_condition_requires_current_version(
    store: &dyn DynLocationStore,
    caps: &LocationCapabilities,
) -> CheckResult {
    let k = key(&caps.prefix, "k");
    let v1 = apply(
        store,
        &request(
            vec![Condition::Missing(k.clone())],
            vec![Mutation::put(k.clone(), "1")],
        )?,
        "v1",
    )
    .await?;
    let v2 = apply(
        store,
        &request(
            vec![Condition::Version(k.clone(), v1[0].clone())],
            vec![Mutation::put(k.clone(), "2")],
        )?,
        "v2",
    )
    .await?;
    ensure(v1[0] != v2[0], || "a put reissued the same version".into())?;
    let stale = request(
        vec![Condition::Version(k.clone(), v1[0].clone())],
        vec![Mutation::put(k.clone(), "x")],
    )?;
    ensure(
        !io(store.write(&stale).await, "stale")?.is_applied(),
        || "stale version matched".into(),
    )?;
    let missing = request(
        vec![Condition::Missing(k.clone())],
        vec![Mutation::put(k.clone(), "x")],
    )?;
    ensure(
        !io(store.write(&missing).await, "missing")?.is_applied(),
        || "Missing held on an existing key".into(),
    )?;
    apply(
        store,
        &request(
            vec![Condition::Version(k.clone(), v2[0].clone())],
            vec![Mutation::Delete(k.clone())],
        )?,
        "delete",
    )
    .await?;
    let after_delete = request(
        vec![Condition::Version(k.clone(), v2[0].clone())],
        vec![Mutation::put(k.clone(), "x")],
    )?;
    ensure(
        !io(store.write(&after_delete).await, "deleted")?.is_applied(),
        || "Version held on a deleted key".into(),
    )?;
    let v3 = apply(
        store,
        &request(
            vec![Condition::Missing(k.clone())],
            vec![Mutation::put(k.clone(), "3")],
        )?,
        "recreate",
    )
    .await?;
    ensure(v3[0] != v1[0] && v3[0] != v2[0], || {
        "a recreated key reused an old version".into()
    })
}

/// Spec 22 §10: "Up to 2,048 unique keys and a 4 MiB encoded request apply as one atomic
/// commit."
pub async fn largest_batch_applies_as_one_commit(
    store: &dyn DynLocationStore,
    caps: &LocationCapabilities,
) -> CheckResult {
    // 2,048 unique keys: 1,024 conditions-only keys and 1,024 puts.
    let guards: Vec<StoreKey> = (0..1024)
        .map(|i| key(&caps.prefix, &format!("g{i:04}")))
        .collect();
    let puts: Vec<StoreKey> = (0..1024)
        .map(|i| key(&caps.prefix, &format!("p{i:04}")))
        .collect();
    let req = request(
        guards.iter().cloned().map(Condition::Missing).collect(),
        puts.iter()
            .map(|k| Mutation::put(k.clone(), Bytes::from(k.to_string())))
            .collect(),
    )?;
    ensure(req.unique_keys() == WriteRequest::MAX_UNIQUE_KEYS, || {
        "not 2,048 keys".into()
    })?;
    let versions = apply(store, &req, "2,048-key batch").await?;
    ensure(versions.len() == 1024, || "wrong version count".into())?;
    for (k, v) in puts.iter().zip(&versions).step_by(97) {
        let (b, got) = read_found(store, k, "2,048-key batch item").await?;
        ensure(b.as_ref() == k.as_bytes() && got == *v, || {
            format!("{k} not as committed")
        })?;
    }
    // 4 MiB encoded exactly: four values filling the budget left by their keys.
    let big: Vec<StoreKey> = (0..4)
        .map(|i| key(&caps.prefix, &format!("big{i}")))
        .collect();
    let key_bytes: usize = big.iter().map(StoreKey::len).sum();
    let total = WriteRequest::MAX_ENCODED_LEN - key_bytes;
    let sizes = [
        MAX_VALUE_LEN,
        MAX_VALUE_LEN,
        MAX_VALUE_LEN,
        total - 3 * MAX_VALUE_LEN,
    ];
    let mutations: Vec<Mutation> = big
        .iter()
        .zip(sizes)
        .enumerate()
        .map(|(i, (k, n))| Mutation::put(k.clone(), Bytes::from(vec![b'a' + i as u8; n])))
        .collect();
    let req = request(vec![], mutations)?;
    ensure(req.encoded_len() == WriteRequest::MAX_ENCODED_LEN, || {
        "not 4 MiB".into()
    })?;
    apply(store, &req, "4 MiB batch").await?;
    for (i, (k, n)) in big.iter().zip(sizes).enumerate() {
        let (b, _) = read_found(store, k, "4 MiB batch item").await?;
        ensure(
            b.len() == n && b.iter().all(|&x| x == b'a' + i as u8),
            || format!("{k} bytes differ"),
        )?;
    }
    Ok(())
}

/// Atomicity as other callers see it: concurrent readers of a two-key batch see both old or
/// both new, never one of each.
pub async fn readers_never_observe_half_a_batch(
    store: &dyn DynLocationStore,
    caps: &LocationCapabilities,
) -> CheckResult {
    let x = key(&caps.prefix, "x");
    let y = key(&caps.prefix, "y");
    apply(
        store,
        &request(
            vec![],
            vec![Mutation::put(x.clone(), "0"), Mutation::put(y.clone(), "0")],
        )?,
        "seed",
    )
    .await?;
    let writer = async {
        for i in 1..=50u32 {
            let v = Bytes::from(i.to_string());
            let req = request(
                vec![],
                vec![
                    Mutation::put(x.clone(), v.clone()),
                    Mutation::put(y.clone(), v),
                ],
            )?;
            apply(store, &req, "pair write").await?;
        }
        Ok::<_, String>(())
    };
    let reader = async {
        // A snapshot scan sees both keys at one point in time.
        let prefix = ScanPrefix::new(caps.prefix.clone()).map_err(|e| e.to_string())?;
        for _ in 0..50 {
            let page = match io(
                store
                    .scan(&ScanRequest::first(prefix.clone(), PageLimit::LARGEST))
                    .await,
                "scan",
            )? {
                ScanResult::Page(p) => p,
                ScanResult::Expired => return fail("first page Expired"),
            };
            let vals: Vec<&Bytes> = page.items.iter().map(|i| &i.bytes).collect();
            ensure(vals.len() == 2 && vals[0] == vals[1], || {
                format!("half a batch visible: {vals:?}")
            })?;
            tokio::task::yield_now().await;
        }
        Ok::<_, String>(())
    };
    let (w, r) = tokio::join!(writer, reader);
    w.and(r)
}

/// Spec 21 races: 64 concurrent compare-and-set increments of one key end with exactly 64.
pub async fn concurrent_cas_increments_are_exact(
    store: &dyn DynLocationStore,
    caps: &LocationCapabilities,
) -> CheckResult {
    let k = key(&caps.prefix, "counter");
    apply(
        store,
        &request(vec![], vec![Mutation::put(k.clone(), "0")])?,
        "seed",
    )
    .await?;
    let k = &k;
    let tasks = (0..64).map(|_| async move {
        for _attempt in 0..10_000 {
            let (b, v) = read_found(store, k, "read counter").await?;
            let n: u64 = std::str::from_utf8(&b)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or("counter bytes")?;
            let req = request(
                vec![Condition::Version(k.clone(), v)],
                vec![Mutation::put(k.clone(), Bytes::from((n + 1).to_string()))],
            )?;
            if io(store.write(&req).await, "cas")?.is_applied() {
                return Ok(());
            }
            tokio::task::yield_now().await;
        }
        fail("increment never won")
    });
    for r in join_all(tasks.collect()).await {
        r?;
    }
    let (b, _) = read_found(store, k, "final").await?;
    ensure(b.as_ref() == b"64", || {
        format!(
            "counter ended at {:?}, expected 64",
            String::from_utf8_lossy(&b)
        )
    })
}

/// Spec 22 §3: keys are compared byte-for-byte, case-sensitive, with no normalisation.
pub async fn keys_compare_byte_for_byte(
    store: &dyn DynLocationStore,
    caps: &LocationCapabilities,
) -> CheckResult {
    // "é" precomposed (NFC) and decomposed (NFD), and case variants, are four different keys.
    let names = ["caf\u{e9}", "cafe\u{301}", "Key", "key"];
    let keys: Vec<StoreKey> = names.iter().map(|n| key(&caps.prefix, n)).collect();
    let req = request(
        keys.iter().map(|k| Condition::Missing(k.clone())).collect(),
        keys.iter()
            .enumerate()
            .map(|(i, k)| Mutation::put(k.clone(), Bytes::from(i.to_string())))
            .collect(),
    )?;
    apply(store, &req, "four keys").await?;
    for (i, k) in keys.iter().enumerate() {
        let (b, _) = read_found(store, k, "variant").await?;
        ensure(b.as_ref() == i.to_string().as_bytes(), || {
            format!("{k:?} aliased another key")
        })?;
    }
    Ok(())
}
