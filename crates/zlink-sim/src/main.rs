//! `zlink-sim`: runs seeds of the mesh simulation and prints each seed's outcome and a summary
//! (`cargo xtask sim` runs this binary from an optimised build).
//!
//! ```text
//! zlink-sim [--seeds N] [--first F] [--seed S] [--hosts H] [--faults K] [--moves M]
//!           [--workload-secs T] [--trace] [--replay-check] [--no-write-verification]
//! ```
//! Each seed of a batch runs in a process of its own (see `alone`), so it runs exactly as
//! `--seed S` replays it. `--replay-check` runs every seed a second time that way and counts
//! a seed whose two traces differ as failing (a replay must be byte for byte).
//! `--no-write-verification` switches off the hosts' acknowledged-write verification (to see
//! what the simulation finds without it). `--moves M` sets the object moves drawn per seed
//! (default 4; 0: none, and the counters disable relocation).
//! `ZLINK_SIM_LOG=<filter>` (e.g. `zlink_runtime=debug`) prints the runtime's own logs,
//! stamped with virtual milliseconds, to standard error.
//! `--seeds N` runs seeds F..F+N (F = 1); `--seed S` runs seed S alone and prints its whole
//! trace. A seed with a violation prints the seed, the violations and the trace's tail; the
//! exit code is 1 when any seed found one.

// A command-line tool: printing is its output.
#![allow(clippy::print_stdout)]

use std::process::ExitCode;
use std::time::{Duration, Instant};

use zlink_sim::{SimConfig, run_seed};

const USAGE: &str = "usage: zlink-sim [--seeds N] [--first F] [--seed S] [--hosts H] [--faults K] [--moves M] [--workload-secs T] [--trace] [--replay-check] [--no-write-verification]";

/// With `ZLINK_SIM_LOG` set (an env-filter directive, e.g. `zlink_runtime=debug`), the
/// runtime's own logs go to standard error, each stamped with the simulation's virtual time in
/// milliseconds (the trace's clock), not the wall clock.
const LOG_ENV: &str = "ZLINK_SIM_LOG";

/// Virtual time for log lines (`-` outside a simulated host).
struct VirtualTime;

impl tracing_subscriber::fmt::time::FormatTime for VirtualTime {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        match turmoil::sim_elapsed() {
            Some(at) => write!(w, "{:>7}", at.as_millis()),
            None => write!(w, "      -"),
        }
    }
}

fn main() -> ExitCode {
    if let Ok(filter) = std::env::var(LOG_ENV) {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_timer(VirtualTime)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .init();
    }
    match run(std::env::args().skip(1).collect()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("zlink-sim: {e}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn number(args: &[String], at: usize, flag: &str) -> Result<u64, String> {
    args.get(at + 1)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{flag} needs a number"))
}

/// Set in the environment of a process this binary starts for one seed.
const ONE_SEED_CHILD: &str = "ZLINK_SIM_ONE_SEED";

/// Runs seed `seed` in a process of its own, as `--seed S` replays it, and returns what it
/// printed. Seeds of a batch each run alone: tokio numbers tasks process-wide, and the order
/// in which a crashed host's tasks are dropped follows those numbers, so a seed run after
/// others in one process would not replay byte for byte on its own.
fn alone(seed: u64, config: &SimConfig, trace: bool) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.env(ONE_SEED_CHILD, "1")
        .args(["--first", &seed.to_string(), "--seeds", "1"])
        .args(["--hosts", &config.hosts.to_string()])
        .args(["--faults", &config.faults.to_string()])
        .args(["--moves", &config.moves.to_string()])
        .args(["--workload-secs", &config.workload.as_secs().to_string()]);
    if !config.write_verification {
        cmd.arg("--no-write-verification");
    }
    if trace {
        cmd.arg("--trace");
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run seed {seed}: {e}"))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// What a one-seed process printed: whether it was clean, its trace hash, and the overlaps
/// inside a rollback window.
fn outcome(printed: &str) -> (bool, String, usize) {
    let first = printed.lines().find(|l| l.starts_with("seed "));
    let clean = first.is_some_and(|l| l.contains(": clean"));
    let hash = first
        .and_then(|l| l.rsplit("trace ").next())
        .unwrap_or("(none)")
        .to_owned();
    let overlaps = printed
        .lines()
        .filter_map(|l| {
            l.trim()
                .split_once(" overlap(s) inside the Store rollback window (")
        })
        .filter_map(|(n, _)| n.parse::<usize>().ok())
        .sum();
    (clean, hash, overlaps)
}

fn replay_line(seed: u64, config: &SimConfig) -> String {
    format!(
        "  replay: cargo xtask sim --seed {seed} --hosts {} --faults {} --moves {} --workload-secs {}{}",
        config.hosts,
        config.faults,
        config.moves,
        config.workload.as_secs(),
        if config.write_verification {
            ""
        } else {
            " --no-write-verification"
        }
    )
}

fn run(args: Vec<String>) -> Result<bool, String> {
    let (mut seeds, mut first, mut only) = (20u64, 1u64, None);
    let mut config = SimConfig::default();
    let mut trace = false;
    let mut replay_check = false;
    let mut i = 0;
    while i < args.len() {
        let flag = args[i].as_str();
        match flag {
            "--seeds" => seeds = number(&args, i, flag)?,
            "--first" => first = number(&args, i, flag)?,
            "--seed" => only = Some(number(&args, i, flag)?),
            "--hosts" => config = config.hosts(number(&args, i, flag)? as usize),
            "--faults" => config = config.faults(number(&args, i, flag)? as usize),
            "--moves" => config = config.moves(number(&args, i, flag)? as usize),
            "--workload-secs" => {
                config = config.workload(Duration::from_secs(number(&args, i, flag)?));
            }
            "--trace" => {
                trace = true;
                i += 1;
                continue;
            }
            "--replay-check" => {
                replay_check = true;
                i += 1;
                continue;
            }
            "--no-write-verification" => {
                config = config.write_verification(false);
                i += 1;
                continue;
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
        i += 2;
    }
    let list: Vec<u64> = match only {
        Some(s) => {
            trace = true;
            vec![s]
        }
        None => (first..first.saturating_add(seeds)).collect(),
    };
    config = config.full_trace(trace);
    if cfg!(not(tokio_unstable)) {
        println!(
            "note: built without --cfg tokio_unstable (cargo xtask sim sets it): tokio's \
             select! order is not seeded, so a seed replays its schedule, not every byte"
        );
    }
    let started = Instant::now();
    let mut failing = Vec::new();
    let mut rollback_windows = 0;
    let isolate = std::env::var_os(ONE_SEED_CHILD).is_none() && (list.len() > 1 || replay_check);
    for seed in &list {
        if isolate {
            let printed = alone(*seed, &config, trace)?;
            for line in printed.lines() {
                if !line.starts_with("note:") && !line.starts_with("1 seeds, ") {
                    println!("{line}");
                }
            }
            let (clean, hash, overlaps) = outcome(&printed);
            rollback_windows += overlaps;
            let mut bad = !clean;
            if replay_check {
                let (_, again, _) = outcome(&alone(*seed, &config, false)?);
                if again != hash {
                    println!("  REPLAY DIFFERS: trace {hash} the first time, {again} the second");
                    if clean {
                        println!("{}", replay_line(*seed, &config));
                    }
                    bad = true;
                }
            }
            if bad {
                failing.push(*seed);
            }
            continue;
        }
        let t = Instant::now();
        let r = run_seed(*seed, &config);
        let failed: u64 = r.failed.values().sum();
        println!(
            "seed {seed}: {} — {} answered, {failed} failed {:?}, {} faults, {:.1} s simulated in {:.1} s, trace {}",
            if r.is_clean() { "clean" } else { "VIOLATION" },
            r.answered,
            r.failed,
            r.faults,
            r.simulated.as_secs_f64(),
            t.elapsed().as_secs_f64(),
            r.trace_hash,
        );
        rollback_windows += r.rollback_doubles.len();
        if let Some(longest) = r.rollback_doubles.iter().map(|(_, ms)| *ms).max() {
            println!(
                "  {} overlap(s) inside the Store rollback window (longest {longest} ms, bound {} ms)",
                r.rollback_doubles.len(),
                zlink_sim::ROLLBACK_BOUND_MS
            );
        }
        if let Some(e) = &r.sim_error {
            println!("  simulation error: {e}");
        }
        for v in &r.violations {
            println!("  {v}");
        }
        if trace || !r.is_clean() {
            for line in &r.trace_tail {
                println!("    {line}");
            }
        }
        if !r.is_clean() {
            println!("{}", replay_line(*seed, &config));
            failing.push(*seed);
        }
    }
    println!(
        "{} seeds, {} clean, {} with violations {:?}, {rollback_windows} overlap(s) inside a \
         Store rollback window, {:.1} s",
        list.len(),
        list.len() - failing.len(),
        failing.len(),
        failing,
        started.elapsed().as_secs_f64()
    );
    Ok(failing.is_empty())
}
