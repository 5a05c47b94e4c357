//! `cargo xtask bench store --memory`: in-memory Location Store read / conditional write /
//! scan-page throughput, each beside a baseline measured in the same run: the same operation on
//! a bare `Mutex<BTreeMap>` (the floor any in-process map pays), as a ratio.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use zlink_store_spi::{
    Condition, LocationStore, MemoryLocationStore, Mutation, PageLimit, ReadResult, ScanPrefix,
    ScanRequest, ScanResult, StoreKey, WriteRequest, WriteResult,
};

const KEYS: usize = 10_000;
const VALUE_LEN: usize = 256;
const PAGE: usize = 100;
const RUN_FOR: Duration = Duration::from_secs(2);

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("--memory") | None => {}
        Some(other) => {
            return Err(format!(
                "bench store: unknown option `{other}` (known: --memory)"
            ));
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(bench())
}

fn key(i: usize) -> Result<StoreKey, String> {
    StoreKey::new(format!("bench/{i:08}")).map_err(|e| e.to_string())
}

/// Runs `op` repeatedly for `RUN_FOR` and returns operations per second.
async fn measure<F, Fut>(mut op: F) -> Result<f64, String>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let start = Instant::now();
    let mut n = 0usize;
    while start.elapsed() < RUN_FOR {
        for _ in 0..256 {
            op(n).await?;
            n += 1;
        }
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

fn line(name: &str, ours: f64, base: f64) {
    println!(
        "{name:<28} {:>12.0} ops/s   baseline Mutex<BTreeMap> {:>12.0} ops/s   ratio {:.2}x",
        ours,
        base,
        ours / base
    );
}

async fn bench() -> Result<(), String> {
    let store = MemoryLocationStore::new();
    let value = Bytes::from(vec![b'v'; VALUE_LEN]);
    let keys: Vec<StoreKey> = (0..KEYS).map(key).collect::<Result<_, _>>()?;
    let mut versions = Vec::with_capacity(KEYS);
    for k in &keys {
        let req = WriteRequest::new(vec![], vec![Mutation::put(k.clone(), value.clone())])
            .map_err(|e| e.to_string())?;
        match store.write(&req).await.map_err(|e| e.to_string())? {
            WriteResult::Applied { put_versions, .. } => versions.extend(put_versions),
            WriteResult::Conflict { .. } => return Err("seed conflicted".into()),
        }
    }
    let baseline: Arc<Mutex<BTreeMap<String, (Bytes, u64)>>> = Arc::new(Mutex::new(
        keys.iter()
            .map(|k| (k.to_string(), (value.clone(), 1)))
            .collect(),
    ));

    println!("in-memory Location Store, {KEYS} keys, {VALUE_LEN}-byte values, single task");
    // Exact read.
    let ours = measure(|i| {
        let k = &keys[i % KEYS];
        let store = &store;
        async move {
            match store.read(k).await.map_err(|e| e.to_string())? {
                ReadResult::Found { .. } => Ok(()),
                ReadResult::Missing { .. } => Err("missing".into()),
            }
        }
    })
    .await?;
    let base = measure(|i| {
        let k = keys[i % KEYS].as_str();
        let b = &baseline;
        async move {
            b.lock()
                .get(k)
                .map(|(v, _)| v.clone())
                .map(|_| ())
                .ok_or_else(|| "missing".to_string())
        }
    })
    .await?;
    line("exact read", ours, base);

    // Single-key conditional write (Version condition + Put).
    let current: Vec<Mutex<zlink_store_spi::StoreVersion>> =
        versions.into_iter().map(Mutex::new).collect();
    let ours = measure(|i| {
        let idx = i % KEYS;
        let k = keys[idx].clone();
        let (store, current, value) = (&store, &current, value.clone());
        async move {
            let expected = current[idx].lock().clone();
            let req = WriteRequest::new(
                vec![Condition::Version(k.clone(), expected)],
                vec![Mutation::put(k, value)],
            )
            .map_err(|e| e.to_string())?;
            match store.write(&req).await.map_err(|e| e.to_string())? {
                WriteResult::Applied {
                    mut put_versions, ..
                } => {
                    *current[idx].lock() = put_versions.pop().ok_or("no version")?;
                    Ok(())
                }
                WriteResult::Conflict { .. } => Err("conflict".into()),
            }
        }
    })
    .await?;
    let base = measure(|i| {
        let k = keys[i % KEYS].as_str();
        let (b, value) = (&baseline, value.clone());
        async move {
            let mut m = b.lock();
            let entry = m.get_mut(k).ok_or("missing")?;
            let v = entry.1;
            if entry.1 == v {
                *entry = (Bytes::copy_from_slice(&value), v + 1);
            }
            Ok(())
        }
    })
    .await?;
    line("conditional write (1 key)", ours, base);

    // Scan page of 100 items (first page of a fresh snapshot each time).
    let prefix = ScanPrefix::new("bench/").map_err(|e| e.to_string())?;
    let limit = PageLimit::new(PAGE).map_err(|e| e.to_string())?;
    let ours = measure(|_| {
        let (store, prefix) = (&store, prefix.clone());
        async move {
            match store
                .scan(&ScanRequest::first(prefix, limit))
                .await
                .map_err(|e| e.to_string())?
            {
                ScanResult::Page(p) if p.items.len() == PAGE => Ok(()),
                _ => Err("short page".into()),
            }
        }
    })
    .await?;
    let base = measure(|_| {
        let b = &baseline;
        async move {
            let m = b.lock();
            let page: Vec<(String, Bytes)> = m
                .range::<str, _>((
                    std::ops::Bound::Included("bench/"),
                    std::ops::Bound::Unbounded,
                ))
                .take(PAGE)
                .map(|(k, (v, _))| (k.clone(), v.clone()))
                .collect();
            if page.len() == PAGE {
                Ok(())
            } else {
                Err("short page".into())
            }
        }
    })
    .await?;
    line(&format!("scan page ({PAGE} items)"), ours, base);
    Ok(())
}
