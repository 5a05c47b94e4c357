//! `cargo xtask sim [--seeds N] [--first F] [--seed S] [--hosts H] [--faults K]
//! [--workload-secs T] [--trace] [--debug]`: the deterministic mesh simulation
//! (`crates/zlink-sim`). It runs the `zlink-sim` binary from an optimised build (`--debug`: a
//! debug build) and passes every other argument on; the binary prints one line per seed, a
//! seed with a violation its trace's tail and the command that replays it, and a summary.
//!
//! The simulation is a binary of its own, not a library linked here: turmoil needs tokio's
//! `test-util` feature, which xtask's benchmark builds must not carry.
//!
//! It is built with `--cfg tokio_unstable`, in a target directory of its own
//! (`target/sim`, so the flag does not rebuild the workspace's other builds): only then does
//! turmoil seed each host's tokio runtime, whose generator picks the first branch a
//! `tokio::select!` polls. Without it a seed replays its schedule but not every byte.

use std::process::Command;

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let debug = args.iter().any(|a| a == "--debug");
    let mut cmd = Command::new(cargo);
    cmd.args([
        "run",
        "--quiet",
        "--package",
        "zlink-sim",
        "--bin",
        "zlink-sim",
    ]);
    if !debug {
        cmd.arg("--release");
    }
    let root = crate::workspace_root();
    let mut flags = std::env::var("RUSTFLAGS").unwrap_or_default();
    if !flags.split_whitespace().any(|f| f == "tokio_unstable") {
        flags = format!("{flags} --cfg tokio_unstable").trim().to_owned();
    }
    cmd.arg("--")
        .args(args.iter().filter(|a| *a != "--debug"))
        .env("RUSTFLAGS", flags)
        .env("CARGO_TARGET_DIR", root.join("target").join("sim"))
        .current_dir(root);
    let status = cmd.status().map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("sim found violations or failed ({status})"))
    }
}
