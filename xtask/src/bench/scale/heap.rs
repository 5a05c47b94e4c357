//! `cargo xtask bench scale --heap [--actors N] [--redis URL]`: the exact heap bytes one idle
//! Actor holds, at N (default 10,000) and at 8N, from a `dhat` heap profile.
//!
//! The bench re-runs itself from a release build of xtask with the `dhat` feature (dhat's
//! global allocator in place of mimalloc; every allocation is recorded with its call stack,
//! so the run is several times slower) once per size, in a process of its own (one profile per
//! process). Each run starts one root (as the scale bench's root A), creates n Actors and
//! requests each once, then reads the live heap: after the requests minus before the
//! creations, / n. The profile ends there, and its live blocks are split by call stack
//! between the in-memory Location Store (a frame of `zlink_store_spi::memory`) and the rest
//! (the runtime, with the bench's own few), then grouped by the first `zlink` frame of each
//! stack: the allocation sites an idle Actor holds. The root's owner lease is 10 minutes long
//! (dhat's lock and stack walks slow everything down past the default lease's renews).

#[cfg(feature = "dhat")]
use std::time::Duration;

/// N of a heap run.
pub(super) const DEFAULT_ACTORS: usize = 10_000;

/// Frames kept per allocation stack (enough to reach the zlink frame that asked).
#[cfg(feature = "dhat")]
const FRAMES: usize = 28;

/// Sites listed.
#[cfg(feature = "dhat")]
const TOP_SITES: usize = 24;

/// Runs the profile at `n` and at 8n, each in a process built with the `dhat` feature.
pub(super) fn rerun_with_dhat(n: usize, redis: Option<&str>) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    println!(
        "scale bench --heap: dhat heap profiles at N = {n} and 8N = {} (a build of xtask with \
         the `dhat` feature, one process per size)",
        8 * n
    );
    let mut per_actor = Vec::new();
    for size in [n, 8 * n] {
        let mut args = vec![
            "run".to_owned(),
            "--quiet".into(),
            "--release".into(),
            "--package".into(),
            "xtask".into(),
            "--features".into(),
            "dhat".into(),
            "--".into(),
            "bench".into(),
            "scale".into(),
            "--heap".into(),
            "--heap-child".into(),
            "--actors".into(),
            size.to_string(),
        ];
        if let Some(url) = redis {
            args.extend(["--redis".to_owned(), url.to_owned()]);
        }
        let out = std::process::Command::new(&cargo)
            .args(&args)
            .current_dir(crate::workspace_root())
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        print!("{text}");
        if !out.status.success() {
            return Err(format!("the heap run at {size} failed ({})", out.status));
        }
        let figure = text
            .lines()
            .find_map(|l| l.strip_prefix("runtime-bytes-per-actor "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .ok_or("the heap run printed no runtime-bytes-per-actor line")?;
        per_actor.push(figure);
    }
    if let [small, large] = per_actor[..] {
        println!();
        println!(
            "runtime heap per idle Actor: {small:.0} B at N = {n}, {large:.0} B at 8N = {}, \
             8N / N = {:.2}x",
            8 * n,
            large / small
        );
    }
    Ok(())
}

/// The profile of one size (inside the dhat build).
#[cfg(not(feature = "dhat"))]
pub(super) async fn profile(_n: usize, _redis: Option<&str>) -> Result<(), String> {
    Err("bench scale --heap: this xtask was built without the `dhat` feature".into())
}

/// The profile of one size (inside the dhat build).
#[cfg(feature = "dhat")]
pub(super) async fn profile(n: usize, redis: Option<&str>) -> Result<(), String> {
    let path = std::env::temp_dir().join(format!(
        "zlink-scale-dhat-{}.json",
        uuid::Uuid::new_v4().simple()
    ));
    let profiler = dhat::Profiler::builder()
        .file_name(&path)
        .trim_backtraces(Some(FRAMES))
        .build();
    let stores = super::Stores::new(redis, 1).await?;
    let mut hosts = Vec::new();
    let result = profiled(n, &stores, &mut hosts, profiler, &path).await;
    for h in &hosts {
        let _ = h.shutdown().await;
    }
    drop(hosts);
    stores.purge().await;
    let _ = std::fs::remove_file(&path);
    result
}

#[cfg(feature = "dhat")]
async fn profiled(
    n: usize,
    stores: &super::Stores,
    hosts: &mut Vec<zlink_runtime::ZLinkHost>,
    profiler: dhat::Profiler,
    path: &std::path::Path,
) -> Result<(), String> {
    // Every allocation waits for dhat's lock and walks its stack: the run is slow enough that
    // the default 15 s owner lease can lapse between renews, so this root's lease is long.
    let options = zlink_runtime::location::LocationOptions::default()
        .polling_interval(super::POLLING)
        .owner_lease_ttl(Duration::from_secs(600))
        .owner_lease_renew_timeout(Duration::from_secs(60));
    hosts.push(super::start_root_with(stores, 0, options).await?);
    let actors = hosts[0].actors().map_err(super::to_string)?;
    super::first_creation(&actors).await?;
    let ids = super::ids(n);
    settle().await;
    let before = dhat::HeapStats::get();
    let created = super::create_all(&actors, &ids).await?;
    let touched = super::touch_all(&actors, &ids).await?;
    settle().await;
    let idle = dhat::HeapStats::get();
    // The profile ends here: its "end" figures are this idle state.
    drop(profiler);
    let total = idle.curr_bytes as f64 - before.curr_bytes as f64;
    let blocks = idle.curr_blocks as f64 - before.curr_blocks as f64;
    let json = std::fs::read_to_string(path).map_err(|e| format!("reading {path:?}: {e}"))?;
    let sites = Sites::parse(&json)?;
    let nf = n as f64;
    println!();
    println!(
        "== heap at {n} idle Actors (created in {:.1} s, requested in {:.1} s under dhat) ==",
        created.as_secs_f64(),
        touched.as_secs_f64()
    );
    println!(
        "   live heap: {:.1} MiB before the creations, {:.1} MiB idle: {:.0} B and {:.1} blocks \
         per Actor",
        super::mib(before.curr_bytes as u64),
        super::mib(idle.curr_bytes as u64),
        total / nf,
        blocks / nf
    );
    let runtime = total - sites.store_bytes as f64;
    println!(
        "   of which the in-memory Location Store: {:.0} B ({:.1} blocks) per Actor; the \
         runtime: {:.0} B ({:.1} blocks) per Actor",
        sites.store_bytes as f64 / nf,
        sites.store_blocks as f64 / nf,
        runtime / nf,
        (blocks - sites.store_blocks as f64) / nf
    );
    println!(
        "   live at the idle point by allocation site (first zlink frame; store sites marked):"
    );
    for s in sites.top.iter().take(TOP_SITES) {
        println!(
            "   {:>8.1} B {:>6.2} blk  {}{}",
            s.bytes as f64 / nf,
            s.blocks as f64 / nf,
            if s.store { "[store] " } else { "" },
            s.name
        );
    }
    println!("runtime-bytes-per-actor {:.1}", runtime / nf);
    Ok(())
}

/// Lets the tasks of the last requests end before the heap is read.
#[cfg(feature = "dhat")]
async fn settle() {
    tokio::time::sleep(Duration::from_millis(500)).await;
}

/// The live blocks of a dhat profile at its end, by allocation site.
#[cfg_attr(not(feature = "dhat"), allow(dead_code))]
#[derive(Debug, Default)]
struct Sites {
    store_bytes: u64,
    store_blocks: u64,
    /// Sites by live bytes, largest first.
    top: Vec<Site>,
}

#[cfg_attr(not(feature = "dhat"), allow(dead_code))]
#[derive(Debug, Clone, PartialEq)]
struct Site {
    name: String,
    store: bool,
    bytes: u64,
    blocks: u64,
}

#[cfg_attr(not(feature = "dhat"), allow(dead_code))]
impl Sites {
    /// Reads the `pps` (program points) and `ftbl` (frame table) of a dhat JSON profile.
    fn parse(json: &str) -> Result<Self, String> {
        let v: serde_json::Value =
            serde_json::from_str(json).map_err(|e| format!("the dhat profile: {e}"))?;
        let frames: Vec<&str> = v["ftbl"]
            .as_array()
            .ok_or("the dhat profile has no ftbl")?
            .iter()
            .map(|f| f.as_str().unwrap_or(""))
            .collect();
        let mut by_site: std::collections::HashMap<(String, bool), (u64, u64)> =
            std::collections::HashMap::new();
        let mut sites = Sites::default();
        for pp in v["pps"].as_array().ok_or("the dhat profile has no pps")? {
            let (bytes, blocks) = (
                pp["eb"].as_u64().unwrap_or(0),
                pp["ebk"].as_u64().unwrap_or(0),
            );
            if blocks == 0 {
                continue;
            }
            let stack: Vec<&str> = pp["fs"]
                .as_array()
                .map(|fs| {
                    fs.iter()
                        .filter_map(|i| i.as_u64())
                        .filter_map(|i| frames.get(i as usize).copied())
                        .collect()
                })
                .unwrap_or_default();
            let store = stack.iter().any(|f| f.contains("zlink_store_spi::memory"));
            if store {
                sites.store_bytes += bytes;
                sites.store_blocks += blocks;
            }
            let e = by_site.entry((site_name(&stack), store)).or_default();
            e.0 += bytes;
            e.1 += blocks;
        }
        sites.top = by_site
            .into_iter()
            .map(|((name, store), (bytes, blocks))| Site {
                name,
                store,
                bytes,
                blocks,
            })
            .collect();
        sites.top.sort_by_key(|b| std::cmp::Reverse(b.bytes));
        Ok(sites)
    }
}

/// A stack's site: its first `zlink` frame, and the frame that allocated when that is another
/// crate's (`tokio::…`, `hashbrown::…`).
#[cfg_attr(not(feature = "dhat"), allow(dead_code))]
fn site_name(stack: &[&str]) -> String {
    let name = |f: &str| {
        // "0x…: function (file:line:col)" -> "function"
        let f = f.split_once(": ").map_or(f, |(_, rest)| rest);
        let f = f.rsplit_once(" (").map_or(f, |(name, _)| name);
        f.to_owned()
    };
    let useful = |f: &&&str| {
        !f.contains("alloc::")
            && !f.contains("dhat::")
            && !f.contains("core::")
            && !f.contains("[root]")
    };
    let first = stack.iter().find(useful).map(|f| name(f));
    let zlink = stack.iter().find(|f| f.contains("zlink_")).map(|f| name(f));
    match (zlink, first) {
        (Some(z), Some(f)) if z != f => format!("{z} <- {f}"),
        (Some(z), _) => z,
        (None, Some(f)) => f,
        (None, None) => "(unknown)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_is_split_by_site_and_store_frames() {
        let json = r#"{
            "ftbl": ["[root]",
                     "0x1: alloc::alloc::alloc (a.rs:1:1)",
                     "0x2: tokio::sync::mpsc::chan::channel (c.rs:1:1)",
                     "0x3: zlink_runtime::objects::activation::Activation::spawn (x.rs:1:1)",
                     "0x4: zlink_store_spi::memory::location::State::commit (m.rs:1:1)"],
            "pps": [
                {"eb": 1000, "ebk": 10, "fs": [1, 2, 3]},
                {"eb": 500, "ebk": 5, "fs": [1, 2, 3]},
                {"eb": 300, "ebk": 3, "fs": [1, 4]},
                {"eb": 0, "ebk": 0, "fs": [1, 4]}
            ]
        }"#;
        let s = Sites::parse(json).unwrap();
        assert_eq!((s.store_bytes, s.store_blocks), (300, 3));
        assert_eq!(
            s.top[0],
            Site {
                name: "zlink_runtime::objects::activation::Activation::spawn <- \
                       tokio::sync::mpsc::chan::channel"
                    .to_owned(),
                store: false,
                bytes: 1500,
                blocks: 15
            }
        );
        assert!(s.top[1].store && s.top[1].bytes == 300);
        assert!(Sites::parse("{}").is_err());
    }
}
