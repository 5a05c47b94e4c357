//! Snapshot scans: pages of one snapshot, key byte order, cursors and page bounds (spec 22 §10).

use std::time::Duration;

use bytes::Bytes;
use zlink_store_spi::{
    DynLocationStore, LocationStore, MAX_PAGE_ENCODED_LEN, MAX_VALUE_LEN, Mutation, PageLimit,
    ScanCursor, ScanPrefix, ScanRequest, ScanResult, StoreKey,
};

use super::ms;
use crate::util::{apply, ensure, fail, io, key, pass_time, read_found, request};
use crate::{CheckResult, LocationCapabilities};

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
