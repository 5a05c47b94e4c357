//! The workspace's example binaries the benches and the fault suite run as separate processes,
//! built with the same cargo that runs xtask.

use std::path::PathBuf;
use std::process::Command;

/// The cargo target directory: `CARGO_TARGET_DIR`, else `<workspace>/target`.
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::workspace_root().join("target"))
}

/// The cargo that runs xtask (`CARGO`), else `cargo` from the PATH.
pub(crate) fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string()))
}

/// Builds the example `example` of the workspace package `package` (optimised when `release`)
/// and returns the path of its binary.
pub(crate) fn example_binary(
    package: &str,
    example: &str,
    release: bool,
) -> Result<PathBuf, String> {
    let mut build = cargo();
    build.args(["build", "--quiet"]);
    if release {
        build.arg("--release");
    }
    let status = build
        .args(["--package", package, "--example", example])
        .current_dir(crate::workspace_root())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building examples/{example} failed ({status})"));
    }
    let profile = if release { "release" } else { "debug" };
    Ok(target_dir().join(profile).join("examples").join(example))
}
