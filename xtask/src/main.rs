//! Repository automation for zlink-rs: `cargo xtask <conformance|test|services|bench|demo|faults|sim>`.
//!
//! Each subcommand lives in its own module; this file only dispatches.

// A command-line tool: printing is its output.
#![allow(clippy::print_stdout)]

mod bench;
mod conformance;
mod conformance_redis;
mod demo;
mod examples;
mod faults;
mod services;
mod services_tls;
mod sim;
mod test_cmd;
mod tidy;
mod tidy_effects;
mod tidy_entropy;
mod tidy_facade;
mod tidy_layers;
mod tidy_metrics;
mod tidy_source;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// mimalloc: the binaries set the allocator, never a library (docs/performance.md has the
/// figure it bought).
#[cfg(not(feature = "dhat"))]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// dhat's, in the build `cargo xtask bench scale --heap` runs its heap profiles from.
#[cfg(feature = "dhat")]
#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// Passed/failed counts of a checking run.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Tally {
    pub(crate) passed: usize,
    pub(crate) failed: usize,
}

impl Tally {
    pub(crate) fn add(&mut self, other: Tally) {
        self.passed += other.passed;
        self.failed += other.failed;
    }
}

const USAGE: &str = "usage: cargo xtask <command>

commands:
  conformance [--redis URL]   check the golden fixture (and, with --redis, the live provider bytes)
  services                    start (or reuse) the Redis services and print their env exports
  test                        start what the tests need (Redis, a 3-node Redis Cluster), then fmt, clippy, rustdoc, tests
  bench <name> [options]      benchmarks: store --memory | redis-location | relocation-store | authority | sweep |
                              discovery (Store calls per node per poll, before/after issue 38; --redis URL,
                              --nodes 4,16,32, --interval-ms M, --idle-seconds S) |
                              processes (an idle mesh of real mesh_node processes on a private Redis:
                              Redis commands per node per poll, Redis CPU, time to full mesh;
                              --nodes 4,32, --idle-seconds S, --polling-ms M) | transport | mesh | objects (Actor create, request and route cache; --redis URL) |
                              relocation (64 MiB Actor move vs raw TCP, host Relocate of N Actors under load,
                              a SpotWide Spot of N members vs its inventory pages written raw;
                              --redis URL, --case big-state|host|spotwide, --actors N, --rounds N, --seconds S,
                              --state-mib N) |
                              ractor (beside ractor_cluster from benches/ractor-peer: the mesh shapes
                              and the same-node Actor request; --seconds S, --case mesh|same-node) |
                              scale (per-Actor create, request, memory, host Relocate and shutdown at
                              N and 8N, as ratios; --actors N (50000), --redis URL; --million: 1,000,000
                              Actors on one root; --heap: dhat heap bytes per idle Actor by site)
  faults [--scenario NAME]... [--actors N] [--relocate-lead-ms N]
                              the process-level fault suite: a private redis-server, 3 mesh_node
                              processes, N counter Actors (1000) probed under kill -9 / SIGSTOP of a
                              node or of Redis, a Redis restart with and without AOF, foreign keys;
                              an invariant checker on every reply, one table row per scenario
  sim [--seeds N] [--first F] [--seed S] [--hosts H] [--faults K] [--workload-secs T] [--trace] [--debug]
                              the deterministic mesh simulation (crates/zlink-sim): 3-7 hosts with the real
                              runtime on turmoil's network and the in-memory Location Store, virtual time,
                              faults drawn from each seed, an invariant checker over every reply;
                              --seed S replays one seed with its whole trace
  demo [options]              3 roots create Counter Actors and message them by id; checks the counts;
                              relocates root 1 under load (none lost, duplicated or out of order);
                              then create Instance Spots by their first message (cold activation)
                              (--redis URL, --keep: keep the Redis keys for `zlink audit`, --actors N (10000),
                              --requests N (100000), --instances N (100), --concurrency N (64),
                              --release: run it from an optimised build)
";

/// The workspace root (the parent of the xtask crate).
pub(crate) fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// The golden fixture this repository consumes as-is.
pub(crate) fn fixture_path() -> PathBuf {
    workspace_root().join("fixtures/golden/store-record-v1.json")
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((cmd, rest)) = args.split_first() else {
        eprint!("{USAGE}");
        return ExitCode::from(2);
    };
    let result = match cmd.as_str() {
        "conformance" => run_conformance(rest),
        "test" => test_cmd::run(rest),
        "services" => services::ensure_all().map(|s| {
            for (k, v) in s.env() {
                println!("export {k}={v}");
            }
        }),
        "bench" => bench::run(rest),
        "demo" => demo::run(rest),
        "faults" => faults::run(rest),
        "sim" => sim::run(rest),
        "help" | "--help" | "-h" => {
            print!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown command `{other}`\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_conformance(args: &[String]) -> Result<(), String> {
    let mut redis_url = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--redis" => {
                redis_url = Some(it.next().ok_or("--redis needs a URL")?.clone());
            }
            other => return Err(format!("conformance: unknown argument `{other}`")),
        }
    }
    let fixture = fixture_path();
    let mut tally = conformance::run(&fixture)?;
    if let Some(url) = redis_url {
        tally.add(conformance_redis::run(&url, &fixture)?);
    }
    println!("{} passed, {} failed", tally.passed, tally.failed);
    if tally.failed > 0 {
        return Err(format!("{} conformance vector(s) failed", tally.failed));
    }
    Ok(())
}

/// Runs `cargo xtask <command> <args>` again from an optimised build of xtask (benchmarks and
/// `demo --release` measure the release build); `what` names the command in the error.
pub(crate) fn rerun_in_release(command: &str, args: &[&String], what: &str) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let status = std::process::Command::new(cargo)
        .args([
            "run",
            "--quiet",
            "--release",
            "--package",
            "xtask",
            "--",
            command,
        ])
        .args(args)
        .current_dir(workspace_root())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})"))
    }
}
