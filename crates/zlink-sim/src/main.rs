//! `zlink-sim`: runs seeds of the mesh simulation and prints each seed's outcome and a summary
//! (`cargo xtask sim` runs this binary from an optimised build).
//!
//! ```text
//! zlink-sim [--seeds N] [--first F] [--seed S] [--hosts H] [--faults K] [--workload-secs T] [--trace]
//! ```
//! `--seeds N` runs seeds F..F+N (F = 1); `--seed S` runs seed S alone and prints its whole
//! trace. A seed with a violation prints the seed, the violations and the trace's tail; the
//! exit code is 1 when any seed found one.

// A command-line tool: printing is its output.
#![allow(clippy::print_stdout)]

use std::process::ExitCode;
use std::time::{Duration, Instant};

use zlink_sim::{SimConfig, run_seed};

const USAGE: &str = "usage: zlink-sim [--seeds N] [--first F] [--seed S] [--hosts H] [--faults K] [--workload-secs T] [--trace]";

fn main() -> ExitCode {
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

fn run(args: Vec<String>) -> Result<bool, String> {
    let (mut seeds, mut first, mut only) = (20u64, 1u64, None);
    let mut config = SimConfig::default();
    let mut trace = false;
    let mut i = 0;
    while i < args.len() {
        let flag = args[i].as_str();
        match flag {
            "--seeds" => seeds = number(&args, i, flag)?,
            "--first" => first = number(&args, i, flag)?,
            "--seed" => only = Some(number(&args, i, flag)?),
            "--hosts" => config = config.hosts(number(&args, i, flag)? as usize),
            "--faults" => config = config.faults(number(&args, i, flag)? as usize),
            "--workload-secs" => {
                config = config.workload(Duration::from_secs(number(&args, i, flag)?));
            }
            "--trace" => {
                trace = true;
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
    let started = Instant::now();
    let mut failing = Vec::new();
    for seed in &list {
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
            println!(
                "  replay: cargo xtask sim --seed {seed} --hosts {} --faults {} --workload-secs {}",
                config.hosts,
                config.faults,
                config.workload.as_secs()
            );
            failing.push(*seed);
        }
    }
    println!(
        "{} seeds, {} clean, {} with violations {:?}, {:.1} s",
        list.len(),
        list.len() - failing.len(),
        failing.len(),
        failing,
        started.elapsed().as_secs_f64()
    );
    Ok(failing.is_empty())
}
