//! `cargo xtask bench relocation [--redis URL] [--case NAME] [--actors N] [--rounds N]
//! [--seconds S] [--state-mib N]`: moving Actors between Object Servers on loopback Redis, each figure beside
//! a baseline measured in the same run (`--case big-state|host|spotwide` runs one case).
//!
//! 1. **big-state** (`big_state.rs`): one Actor whose state is 64 MiB (`--state-mib`) moved between two
//!    processes by a host Relocate, beside the same 64 MiB sent over a raw tokio TCP socket
//!    between the same two processes, alternating, over `--rounds` rounds (default 3).
//!    Target: ≥ 0.5×.
//! 2. **host** (`host.rs`): host Relocate of `--actors` (default 10,000) small Actors in one
//!    process (three roots), with a steady request load (c=64) from a third root: moves per
//!    second, and request latency during the move beside the same load before and after it.
//! 3. **spotwide** (`spot_wide.rs`): one SpotWide User Spot with `--actors` (default 10,000)
//!    member Actors moved by a host Relocate (one aggregate unit), beside writing the same
//!    relocation inventory pages raw to the same Redis. Aim: under 1 s.
//!
//! Every run uses a fresh Redis key prefix and purges it at the end.

mod big_state;
mod host;
mod spot_wide;

use super::options;
use std::time::Duration;

use zlink_codec::MeshName;

const DEFAULT_URL: &str = "redis://127.0.0.1:6379";
const CASES: [&str; 3] = ["big-state", "host", "spotwide"];
const MIB: usize = 1024 * 1024;

struct Args {
    url: String,
    /// Only this case, or all.
    case: Option<String>,
    /// Actors of the `host` case.
    actors: usize,
    /// Rounds of the `big-state` case.
    rounds: usize,
    /// Seconds of each baseline load of the `host` case.
    seconds: f64,
    /// MiB of state of the `big-state` Actor.
    state_mib: usize,
}

impl Args {
    fn runs(&self, case: &str) -> bool {
        options::runs(self.case.as_deref(), case)
    }
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        url: DEFAULT_URL.to_owned(),
        case: None,
        actors: 10_000,
        rounds: 3,
        seconds: 2.0,
        state_mib: 64,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--redis" => parsed.url = options::url("relocation", it.next())?,
            "--case" => parsed.case = Some(options::case("relocation", it.next(), &CASES)?),
            "--actors" => {
                parsed.actors = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| (1..=1_000_000).contains(n))
                    .ok_or("bench relocation: --actors needs a number in 1..=1000000")?;
            }
            "--rounds" => {
                parsed.rounds = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| (1..=20).contains(n))
                    .ok_or("bench relocation: --rounds needs a number in 1..=20")?;
            }
            "--state-mib" => {
                parsed.state_mib = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| (1..=64).contains(n))
                    .ok_or("bench relocation: --state-mib needs a number in 1..=64")?;
            }
            "--seconds" => parsed.seconds = options::seconds("relocation", it.next())?,
            other => {
                return Err(format!(
                    "bench relocation: unknown option `{other}` (known: --redis URL, --case \
                     big-state|host|spotwide, --actors N, --rounds N, --seconds S, --state-mib N)"
                ));
            }
        }
    }
    Ok(parsed)
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let args = parse(args)?;
    let mode = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!("relocation bench ({mode} build), Redis at {}", args.url);
    if args.runs("big-state") {
        big_state::run(&args)?;
    }
    let rt = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(host::WORKERS)
            .enable_all()
            .build()
            .map_err(to_string)
    };
    if args.runs("host") {
        rt()?.block_on(host::run(&args))?;
    }
    if args.runs("spotwide") {
        rt()?.block_on(spot_wide::run(&args))?;
    }
    Ok(())
}

fn to_string(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn mesh() -> Result<MeshName, String> {
    MeshName::new("relocation").map_err(to_string)
}

/// Starts one root over its own connections to the Redis Location and Relocation Stores at
/// `url` under `prefix` (application version 1, descriptors polled every 100 ms), with one
/// MeshNode of [`mesh`] shaped by `node`.
async fn start_root(
    url: &str,
    prefix: &str,
    node: impl FnOnce(
        zlink_runtime::MeshNodeBuilder<zlink_runtime::handler::NodeHandler>,
    ) -> zlink_runtime::MeshNodeBuilder<zlink_runtime::handler::NodeHandler>,
) -> Result<zlink_runtime::ZLinkHost, String> {
    use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
    use zlink_redis_relocation::{RedisRelocationOptions, RedisRelocationStore};
    let location = RedisLocationOptions::from_url(url)
        .and_then(|o| o.with_key_prefix(prefix.to_owned()))
        .map_err(|e| format!("--redis {url}: {e}"))?;
    let location = RedisLocationStore::connect(location)
        .await
        .map_err(|e| format!("connecting to {url}: {e}"))?;
    let relocation = RedisRelocationOptions::from_url(url)
        .and_then(|o| o.with_key_prefix(prefix.to_owned()))
        .map_err(|e| format!("--redis {url}: {e}"))?;
    let relocation = RedisRelocationStore::connect(relocation)
        .await
        .map_err(|e| format!("connecting to {url}: {e}"))?;
    zlink_runtime::ZLink::builder()
        .location_store(std::sync::Arc::new(location))
        .relocation_store(std::sync::Arc::new(relocation))
        .location_options(
            zlink_runtime::location::LocationOptions::default()
                .polling_interval(Duration::from_millis(100)),
        )
        .application_version(1)
        .route_mesh(mesh()?, node)
        .build()
        .start()
        .await
        .map_err(|e| format!("a root did not start: {e}"))
}

/// A fresh key prefix for one case's run.
fn fresh_prefix(case: &str) -> String {
    format!(
        "zlink-bench-relocation-{case}-{}",
        uuid::Uuid::new_v4().simple()
    )
}

/// Purges `prefix` and says so.
async fn purge(url: &str, prefix: &str) {
    match super::purge_prefix(url, prefix).await {
        Ok(n) => println!("   purged {n} Redis key(s) under {prefix}"),
        Err(e) => println!("   could not purge {prefix}: {e}"),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::bench::options::args;

    #[test]
    fn options_parse_and_unknown_ones_are_refused() {
        let a = parse(&args(&[
            "--redis",
            "redis://127.0.0.1:6390",
            "--case",
            "host",
            "--actors",
            "500",
            "--rounds",
            "2",
            "--seconds",
            "1.5",
            "--state-mib",
            "63",
        ]))
        .unwrap();
        assert_eq!(a.url, "redis://127.0.0.1:6390");
        assert!(a.runs("host") && !a.runs("big-state"));
        assert_eq!(
            (a.actors, a.rounds, a.seconds, a.state_mib),
            (500, 2, 1.5, 63)
        );
        let all = parse(&[]).unwrap();
        assert_eq!(
            (all.url.as_str(), all.actors, all.rounds),
            (DEFAULT_URL, 10_000, 3)
        );
        assert!(CASES.iter().all(|c| all.runs(c)));
        assert!(parse(&args(&["--case", "everything"])).is_err());
        assert!(parse(&args(&["--actors", "0"])).is_err());
        assert!(parse(&args(&["--rounds", "21"])).is_err());
        assert!(parse(&args(&["--state-mib", "64"])).is_ok());
        assert!(parse(&args(&["--state-mib", "65"])).is_err());
        assert!(parse(&args(&["--fast"])).is_err());
    }

    #[test]
    fn the_median_is_the_middle_value() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(Vec::new()).is_nan());
    }
}
