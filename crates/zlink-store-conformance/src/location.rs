//! Location Store checks: one per SPI verification item of spec 22 §10, plus the contract
//! details those items rest on.

use std::time::Duration;

use bytes::Bytes;
use zlink_store_spi::{
    BoxFuture, Condition, DynLocationStore, LocationStore, MAX_PAGE_ENCODED_LEN, MAX_VALUE_LEN,
    Mutation, PageLimit, ReadResult, Retention, ScanCursor, ScanPrefix, ScanRequest, ScanResult,
    StoreErrorKind, StoreKey, WriteRequest, WriteResult,
};

use crate::util::{apply, ensure, fail, io, join_all, key, pass_time, read_found, request};
use crate::{CheckResult, LocationCapabilities};

type Check =
    for<'a> fn(&'a dyn DynLocationStore, &'a LocationCapabilities) -> BoxFuture<'a, CheckResult>;

macro_rules! checks {
    ($($name:ident),* $(,)?) => {
        /// Every Location Store check by name, in the order the harness runs them.
        pub(crate) fn all_checks() -> Vec<(&'static str, Check)> {
            vec![$((stringify!($name), (|s, c| Box::pin($name(s, c))) as Check)),*]
        }
    };
}

checks!(
    exact_read_returns_one_observation,
    expired_value_is_missing_and_durable_value_stays,
    conflict_applies_no_mutation,
    version_condition_requires_current_version,
    largest_batch_applies_as_one_commit,
    readers_never_observe_half_a_batch,
    concurrent_cas_increments_are_exact,
    keys_compare_byte_for_byte,
    scan_pages_read_one_snapshot,
    scan_lists_prefix_in_key_byte_order,
    invalid_or_foreign_cursor_is_expired,
    cursor_is_opaque_and_pages_are_bounded,
    lost_write_result_is_reconstructed_by_exact_read,
    dropped_before_poll_commits_nothing,
    out_of_bound_batch_is_rejected_and_changes_nothing,
);

fn ms(n: u64) -> Retention {
    Retention::from_millis(n).unwrap_or(Retention::MAX)
}

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

async fn first_page(
    store: &dyn DynLocationStore,
    prefix: &ScanPrefix,
    limit: usize,
) -> CheckResult<zlink_store_spi::ScanPage> {
    let limit = PageLimit::new(limit).map_err(|e| e.to_string())?;
    match io(
        store.scan(&ScanRequest::first(prefix.clone(), limit)).await,
        "first page",
    )? {
        ScanResult::Page(p) => Ok(p),
        ScanResult::Expired => fail("first page answered Expired"),
    }
}

/// Spec 22 §10: "Scan pages use the same snapshot" — later pages ignore writes made after the
/// first page (new, changed and deleted keys alike).
pub async fn scan_pages_read_one_snapshot(
    store: &dyn DynLocationStore,
    caps: &LocationCapabilities,
) -> CheckResult {
    let keys: Vec<StoreKey> = (0..10)
        .map(|i| key(&caps.prefix, &format!("k{i:02}")))
        .collect();
    apply(
        store,
        &request(
            vec![],
            keys.iter()
                .map(|k| Mutation::put(k.clone(), "old"))
                .collect(),
        )?,
        "seed",
    )
    .await?;
    let prefix = ScanPrefix::new(caps.prefix.clone()).map_err(|e| e.to_string())?;
    let limit = PageLimit::new(3).map_err(|e| e.to_string())?;
    let mut page = first_page(store, &prefix, 3).await?;
    let mut seen = page.items.clone();
    // After the first page: change a later key, delete one, add one.
    let req = request(
        vec![],
        vec![
            Mutation::put(keys[7].clone(), "new"),
            Mutation::Delete(keys[8].clone()),
            Mutation::put(key(&caps.prefix, "k05a"), "added"),
        ],
    )?;
    apply(store, &req, "concurrent writes").await?;
    while let Some(cursor) = page.next_cursor.clone() {
        page = match io(
            store
                .scan(&ScanRequest::next(prefix.clone(), limit, cursor))
                .await,
            "next page",
        )? {
            ScanResult::Page(p) => p,
            ScanResult::Expired => return fail("live snapshot answered Expired"),
        };
        ensure(page.items.len() <= 3, || "page over its limit".into())?;
        seen.extend(page.items.clone());
    }
    let got: Vec<(String, Bytes)> = seen
        .iter()
        .map(|i| (i.key.to_string(), i.bytes.clone()))
        .collect();
    let want: Vec<(String, Bytes)> = keys
        .iter()
        .map(|k| (k.to_string(), Bytes::from_static(b"old")))
        .collect();
    ensure(got == want, || format!("snapshot not stable: got {got:?}"))?;
    // And the present shows the writes.
    let now = first_page(store, &prefix, 1000).await?;
    ensure(now.items.len() == 10, || {
        format!("present has {} keys, expected 10", now.items.len())
    })
}

/// Scans list only keys under the prefix, in key byte order, skipping deleted and expired
/// values.
pub async fn scan_lists_prefix_in_key_byte_order(
    store: &dyn DynLocationStore,
    caps: &LocationCapabilities,
) -> CheckResult {
    let inside = ["b", "a", "\u{e9}", "Z", "a\u{0}", "ab", "gone", "short"];
    let mut muts: Vec<Mutation> = inside
        .iter()
        .map(|n| Mutation::put(key(&caps.prefix, &format!("in/{n}")), *n))
        .collect();
    muts.push(Mutation::put(key(&caps.prefix, "out/x"), "x"));
    muts.push(Mutation::put(
        key(&caps.prefix, "in"),
        "exact-prefix-without-slash",
    ));
    apply(store, &request(vec![], muts)?, "seed").await?;
    apply(
        store,
        &request(vec![], vec![Mutation::Delete(key(&caps.prefix, "in/gone"))])?,
        "delete",
    )
    .await?;
    apply(
        store,
        &request(
            vec![],
            vec![Mutation::put_expiring(
                key(&caps.prefix, "in/short"),
                "s",
                ms(200),
            )],
        )?,
        "expiring",
    )
    .await?;
    pass_time(caps.advance_clock.as_ref(), Duration::from_millis(300)).await;
    let prefix = ScanPrefix::new(format!("{}in/", caps.prefix)).map_err(|e| e.to_string())?;
    let page = first_page(store, &prefix, 1000).await?;
    ensure(page.next_cursor.is_none(), || {
        "one page should hold everything".into()
    })?;
    let got: Vec<String> = page
        .items
        .iter()
        .map(|i| {
            i.key
                .as_str()
                .trim_start_matches(prefix.as_str())
                .to_string()
        })
        .collect();
    let mut want: Vec<String> = ["b", "a", "\u{e9}", "Z", "a\u{0}", "ab"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    want.sort_by(|x, y| x.as_bytes().cmp(y.as_bytes()));
    ensure(got == want, || {
        format!("scan order/content {got:?}, expected {want:?}")
    })?;
    for item in &page.items {
        let (b, v) = read_found(store, &item.key, "scanned key").await?;
        ensure(b == item.bytes && v == item.version, || {
            "scan item differs from exact read".into()
        })?;
    }
    Ok(())
}

/// Spec 22 §10: "Expired is returned if the snapshot or cursor is invalid" — garbage cursors,
/// a cursor reused with another prefix, and (with a controllable clock or a short real wait) a
/// snapshot that has expired.
pub async fn invalid_or_foreign_cursor_is_expired(
    store: &dyn DynLocationStore,
    caps: &LocationCapabilities,
) -> CheckResult {
    let keys: Vec<StoreKey> = (0..4)
        .map(|i| key(&caps.prefix, &format!("k{i}")))
        .collect();
    apply(
        store,
        &request(
            vec![],
            keys.iter().map(|k| Mutation::put(k.clone(), "v")).collect(),
        )?,
        "seed",
    )
    .await?;
    let prefix = ScanPrefix::new(caps.prefix.clone()).map_err(|e| e.to_string())?;
    let limit = PageLimit::new(1).map_err(|e| e.to_string())?;
    let page = first_page(store, &prefix, 1).await?;
    let cursor = page
        .next_cursor
        .ok_or("no cursor after the first of four pages")?;
    for garbage in ["x", "not-a-cursor", &"z".repeat(4096), "0", "\u{1F600}"] {
        let c = ScanCursor::new(garbage).map_err(|e| e.to_string())?;
        let r = io(
            store
                .scan(&ScanRequest::next(prefix.clone(), limit, c))
                .await,
            "garbage cursor",
        )?;
        ensure(r == ScanResult::Expired, || {
            format!("garbage cursor {:.20?} did not answer Expired", garbage)
        })?;
    }
    let other = ScanPrefix::new(format!("{}k", caps.prefix)).map_err(|e| e.to_string())?;
    let r = io(
        store
            .scan(&ScanRequest::next(other, limit, cursor.clone()))
            .await,
        "foreign prefix",
    )?;
    ensure(r == ScanResult::Expired, || {
        "a cursor reused under another prefix did not answer Expired".into()
    })?;
    // The real cursor still works afterwards.
    let r = io(
        store
            .scan(&ScanRequest::next(prefix.clone(), limit, cursor))
            .await,
        "real cursor",
    )?;
    ensure(matches!(r, ScanResult::Page(_)), || {
        "the genuine cursor stopped working".into()
    })
}

/// Spec 22 §10: "The cursor round-trips opaquely up to 4,096 bytes, and pages respect the
/// 1,000-item/4 MiB bound."
pub async fn cursor_is_opaque_and_pages_are_bounded(
    store: &dyn DynLocationStore,
    caps: &LocationCapabilities,
) -> CheckResult {
    // 1,001 small keys: a full page holds exactly 1,000.
    let small: Vec<StoreKey> = (0..1001)
        .map(|i| key(&caps.prefix, &format!("s/{i:05}")))
        .collect();
    apply(
        store,
        &request(
            vec![],
            small
                .iter()
                .map(|k| Mutation::put(k.clone(), "v"))
                .collect(),
        )?,
        "seed small",
    )
    .await?;
    let prefix = ScanPrefix::new(format!("{}s/", caps.prefix)).map_err(|e| e.to_string())?;
    let page = first_page(store, &prefix, 1000).await?;
    ensure(page.items.len() == 1000, || {
        format!("full page held {} items", page.items.len())
    })?;
    let cursor = page.next_cursor.ok_or("no cursor with one item left")?;
    ensure(cursor.len() <= ScanCursor::MAX_LEN, || {
        "cursor over 4,096 bytes".into()
    })?;
    // Round-trip the cursor through its text form, as a caller holding it opaquely would.
    let cursor = ScanCursor::new(cursor.as_str().to_string()).map_err(|e| e.to_string())?;
    let rest = match io(
        store
            .scan(&ScanRequest::next(
                prefix.clone(),
                PageLimit::LARGEST,
                cursor,
            ))
            .await,
        "page 2",
    )? {
        ScanResult::Page(p) => p,
        ScanResult::Expired => return fail("cursor did not round-trip"),
    };
    ensure(rest.items.len() == 1 && rest.next_cursor.is_none(), || {
        "second page wrong".into()
    })?;
    // Six 1 MiB values: the 4 MiB bound splits them over at least two pages.
    let big: Vec<StoreKey> = (0..6)
        .map(|i| key(&caps.prefix, &format!("b/{i}")))
        .collect();
    for k in &big {
        apply(
            store,
            &request(
                vec![],
                vec![Mutation::put(
                    k.clone(),
                    Bytes::from(vec![b'x'; MAX_VALUE_LEN]),
                )],
            )?,
            "big",
        )
        .await?;
    }
    let prefix = ScanPrefix::new(format!("{}b/", caps.prefix)).map_err(|e| e.to_string())?;
    let mut page = first_page(store, &prefix, 1000).await?;
    let mut total = 0;
    let mut pages = 0;
    loop {
        pages += 1;
        let size: usize = page.items.iter().map(|i| i.encoded_len()).sum();
        ensure(size <= MAX_PAGE_ENCODED_LEN, || {
            format!("page of {size} bytes is over 4 MiB")
        })?;
        ensure(!page.items.is_empty(), || {
            "an empty page with more to come".into()
        })?;
        total += page.items.len();
        let Some(c) = page.next_cursor.clone() else {
            break;
        };
        page = match io(
            store
                .scan(&ScanRequest::next(prefix.clone(), PageLimit::LARGEST, c))
                .await,
            "big page",
        )? {
            ScanResult::Page(p) => p,
            ScanResult::Expired => return fail("big scan Expired"),
        };
    }
    ensure(total == 6 && pages >= 2, || {
        format!("{total} items over {pages} pages")
    })
}

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
