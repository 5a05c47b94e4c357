//! `cargo xtask bench <name>`: benchmarks that print their figure beside a baseline measured in
//! the same run, as a ratio.

use fred::interfaces::ClientLike;

mod authority;
mod authority_sweep;
mod discovery;
mod mesh;
mod objects;
mod objects_metrics;
mod options;
mod processes;
mod ractor;
mod raw_json;
mod redis_location;
mod relocation;
mod relocation_store;
mod scale;
mod store_memory;
mod transport;

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    if cfg!(debug_assertions) && std::env::var_os("ZLINK_BENCH_ALLOW_DEBUG").is_none() {
        // Benchmarks of a debug build measure the wrong thing: run this command again from an
        // optimised build of xtask.
        let args: Vec<&String> = args.iter().collect();
        return crate::rerun_in_release("bench", &args, "benchmark");
    }
    let Some((name, rest)) = args.split_first() else {
        return Err(
            "bench: name one of: store --memory | redis-location | relocation-store | authority | sweep | discovery | transport | mesh | objects | relocation | processes | ractor | scale"
                .into(),
        );
    };
    match name.as_str() {
        "store" => store_memory::run(rest),
        "redis-location" => redis_location::run(rest),
        "relocation-store" => relocation_store::run(rest),
        "authority" => authority::run(rest),
        "sweep" => authority_sweep::run(rest),
        "discovery" => discovery::run(rest),
        "transport" => transport::run(rest),
        "mesh" => mesh::run(rest),
        "objects" => objects::run(rest),
        "relocation" => relocation::run(rest),
        "processes" => processes::run(rest),
        "ractor" => ractor::run(rest),
        "scale" => scale::run(rest),
        other => Err(format!("bench: unknown benchmark `{other}`")),
    }
}

/// Deletes every key under `{prefix}:` on the Redis at `url` (what a benchmark run wrote);
/// returns how many keys went.
pub(crate) async fn purge_prefix(url: &str, prefix: &str) -> Result<usize, String> {
    scan_keys(url, &format!("{prefix}:*"), true).await
}

/// How many keys match `pattern` (SCAN MATCH), deleting nothing.
pub(crate) async fn count_keys(url: &str, pattern: &str) -> Result<usize, String> {
    scan_keys(url, pattern, false).await
}

/// Scans the keys matching `pattern`, unlinking them when `unlink`; how many matched.
async fn scan_keys(url: &str, pattern: &str, unlink: bool) -> Result<usize, String> {
    let config = fred::types::config::Config::from_url(url).map_err(|e| e.to_string())?;
    let client = fred::types::Builder::from_config(config)
        .build()
        .map_err(|e| e.to_string())?;
    client.init().await.map_err(|e| e.to_string())?;
    let mut cursor = "0".to_owned();
    let mut deleted = 0;
    loop {
        let reply: Vec<fred::types::Value> = client
            .custom(
                fred::types::CustomCommand::new_static("SCAN", None, false),
                vec![
                    fred::types::Value::from(cursor.as_str()),
                    "MATCH".into(),
                    pattern.into(),
                    "COUNT".into(),
                    5000.into(),
                ],
            )
            .await
            .map_err(|e| e.to_string())?;
        let [next, keys] =
            <[fred::types::Value; 2]>::try_from(reply).map_err(|_| "SCAN: bad reply")?;
        cursor = next.as_string().ok_or("SCAN: bad cursor")?;
        let keys = keys.into_array();
        deleted += keys.len();
        if unlink && !keys.is_empty() {
            let _: fred::types::Value = client
                .custom(
                    fred::types::CustomCommand::new_static("UNLINK", None, false),
                    keys,
                )
                .await
                .map_err(|e| e.to_string())?;
        }
        if cursor == "0" {
            break;
        }
    }
    let _ = client.quit().await;
    Ok(deleted)
}
