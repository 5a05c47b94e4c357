//! `cargo xtask bench relocation-store [--redis URL] [--rounds N]`: store + restore of 1 MiB,
//! 16 MiB and 256 MiB payloads through the blob layer (`zlink-relocation`) on the Redis
//! Relocation Store, each beside raw `SET` / `GET` of the same bytes with a plain fred client,
//! measured in the same run, as a ratio (target: at least 0.7x).
//!
//! Store is the whole publish path: every chunk written and read back and verified, then the
//! index written. Restore reads the index and every chunk and verifies each and the whole
//! (CRC-32C and SHA-256); it returns the verified chunks in order (joining them into one buffer
//! is the caller's choice and not timed). The baseline is one `SET` and one `GET` of the whole
//! payload on one connection.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use fred::prelude::*;
use zlink_redis_relocation::{RedisRelocationOptions, RedisRelocationStore};
use zlink_relocation::{BlobLayer, BlobLayerConfig};
use zlink_store_spi::BlobRef;

const MIB: usize = 1024 * 1024;
const SIZES: [usize; 3] = [MIB, 16 * MIB, 256 * MIB];

struct Args {
    url: String,
    rounds: usize,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        url: "redis://127.0.0.1:6379".to_string(),
        rounds: 5,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--redis" => {
                parsed.url = it
                    .next()
                    .ok_or("bench relocation-store: --redis needs a URL")?
                    .clone();
            }
            "--rounds" => {
                parsed.rounds = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| *n > 0)
                    .ok_or("bench relocation-store: --rounds needs a positive number")?;
            }
            other => {
                return Err(format!(
                    "bench relocation-store: unknown option `{other}` (known: --redis URL, --rounds N)"
                ));
            }
        }
    }
    Ok(parsed)
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let args = parse(args)?;
    if cfg!(debug_assertions) {
        println!(
            "warning: this is a debug build; for meaningful figures run \
             `cargo run --release -p xtask -- bench relocation-store`"
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(bench(args))
}

/// Deterministic, incompressible-looking bytes (xorshift64*).
fn payload(len: usize) -> Bytes {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let word = x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
        let take = (len - v.len()).min(8);
        v.extend_from_slice(&word[..take]);
    }
    Bytes::from(v)
}

fn mb_per_s(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / MIB as f64 / d.as_secs_f64()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

struct Timings {
    store: Vec<Duration>,
    restore: Vec<Duration>,
    set: Vec<Duration>,
    get: Vec<Duration>,
}

async fn bench(args: Args) -> Result<(), String> {
    let prefix = format!("zlink-bench-reloc-{}", uuid::Uuid::new_v4().simple());
    let options = RedisRelocationOptions::from_url(&args.url)
        .and_then(|o| o.with_key_prefix(prefix.clone()))
        .and_then(|o| o.with_operation_timeout(Duration::from_secs(120)))
        .map_err(|e| e.to_string())?;
    let store = RedisRelocationStore::connect(options)
        .await
        .map_err(|e| format!("connect to {}: {e}", args.url))?;
    let blobs = BlobLayer::with_config(Arc::new(store.clone()), BlobLayerConfig::default());

    let config = Config::from_url(&args.url).map_err(|e| e.to_string())?;
    let raw = Builder::from_config(config)
        .build()
        .map_err(|e| e.to_string())?;
    raw.init().await.map_err(|e| e.to_string())?;

    println!(
        "relocation-store: blob layer (production defaults: 64 MiB chunk limit, 4 MiB stripe \
         target, <= 64 stripes, 256 MiB budget) on {} vs raw SET/GET, median of {} rounds",
        args.url, args.rounds
    );
    println!(
        "{:>8}  {:>10} {:>10} {:>7}   {:>10} {:>10} {:>7}   {:>9}",
        "size", "store MB/s", "SET MB/s", "ratio", "restore", "GET MB/s", "ratio", "total"
    );
    let mut result = Ok(());
    for size in SIZES {
        let data = payload(size);
        match measure(&blobs, &raw, &prefix, &data, args.rounds).await {
            Ok(t) => {
                let (store_t, restore_t) = (median(t.store), median(t.restore));
                let (set_t, get_t) = (median(t.set), median(t.get));
                let total = (set_t + get_t).as_secs_f64() / (store_t + restore_t).as_secs_f64();
                println!(
                    "{:>5} MiB  {:>10.0} {:>10.0} {:>6.2}x   {:>10.0} {:>10.0} {:>6.2}x   {:>8.2}x",
                    size / MIB,
                    mb_per_s(size, store_t),
                    mb_per_s(size, set_t),
                    set_t.as_secs_f64() / store_t.as_secs_f64(),
                    mb_per_s(size, restore_t),
                    mb_per_s(size, get_t),
                    get_t.as_secs_f64() / restore_t.as_secs_f64(),
                    total,
                );
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    println!("(total = (SET + GET time) / (store + restore time); target >= 0.70x)");
    store.close().await;
    let _ = raw.quit().await;
    result
}

async fn measure(
    blobs: &BlobLayer<RedisRelocationStore>,
    raw: &Client,
    prefix: &str,
    data: &Bytes,
    rounds: usize,
) -> Result<Timings, String> {
    let mut t = Timings {
        store: Vec::new(),
        restore: Vec::new(),
        set: Vec::new(),
        get: Vec::new(),
    };
    // One warm-up round, not counted.
    for round in 0..=rounds {
        let unit =
            BlobRef::new(format!("bench-{}-{round}", data.len())).map_err(|e| e.to_string())?;
        let start = Instant::now();
        let stored = blobs.store(&unit, data).await.map_err(|e| e.to_string())?;
        let store_t = start.elapsed();
        let start = Instant::now();
        let restored = blobs.restore(&unit).await.map_err(|e| e.to_string())?;
        let restore_t = start.elapsed();
        if restored.len() != data.len() as u64 || restored.sha256 != stored.sha256 {
            return Err("restored payload differs".into());
        }
        drop(restored);
        blobs.delete(&unit).await.map_err(|e| e.to_string())?;

        let key = format!("{prefix}:raw:{}-{round}", data.len());
        let start = Instant::now();
        let _: () = raw
            .set(&key, data.clone(), None, None, false)
            .await
            .map_err(|e| e.to_string())?;
        let set_t = start.elapsed();
        let start = Instant::now();
        let got: Bytes = raw.get(&key).await.map_err(|e| e.to_string())?;
        let get_t = start.elapsed();
        if got.len() != data.len() {
            return Err("raw GET returned other bytes".into());
        }
        drop(got);
        let _: i64 = raw.del(&key).await.map_err(|e| e.to_string())?;
        if round > 0 {
            t.store.push(store_t);
            t.restore.push(restore_t);
            t.set.push(set_t);
            t.get.push(get_t);
        }
    }
    Ok(t)
}
