//! `cargo xtask test`: the single test command. It starts (or reuses) a Redis single node, a
//! second independent Redis and a local 3-master Redis Cluster, exports their addresses
//! (`ZLINK_TEST_REDIS_URL`, `ZLINK_TEST_REDIS_URL_2`, `ZLINK_TEST_REDIS_CLUSTER`), a TLS single
//! node and a TLS 3-master cluster (`ZLINK_TEST_REDIS_TLS_URL`, `ZLINK_TEST_REDIS_TLS_CLUSTER`,
//! with the CA and client certificate files in `ZLINK_TEST_REDIS_TLS_CA`, `_CERT`, `_KEY`) together with
//! `ZLINK_REQUIRE_REDIS=1` (a live test that finds its variable missing fails instead of
//! skipping), then runs `cargo fmt --check`, clippy with `-D warnings`, `cargo doc --workspace
//! --no-deps` with every rustdoc warning denied, every workspace test,
//! the golden conformance runner (offline and live against the single node) and the fault
//! suite (`cargo xtask faults`, every scenario).

use std::process::Command;

use crate::services;

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

fn run_step(name: &str, args: &[&str], env: &[(&str, String)]) -> Result<(), String> {
    eprintln!("xtask: == {name}: cargo {}", args.join(" "));
    let status = Command::new(cargo())
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .current_dir(crate::workspace_root())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{name} failed ({status})"))
    }
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let mut lint = true;
    for a in args {
        match a.as_str() {
            "--no-lint" => lint = false,
            other => {
                return Err(format!(
                    "test: unknown argument `{other}` (known: --no-lint)"
                ));
            }
        }
    }
    let services = services::ensure_all()?;
    let mut env = services.env();
    // Read by `zlink_store_conformance::live::env_or_skip`: no live test may skip in this run.
    env.push(("ZLINK_REQUIRE_REDIS", "1".to_string()));
    for (k, v) in &env {
        eprintln!("xtask: {k}={v}");
    }
    if lint {
        run_step("format check", &["fmt", "--all", "--", "--check"], &env)?;
        run_step(
            "clippy",
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
            &env,
        )?;
        // Rustdoc of every workspace crate: any warning (a broken or private intra-doc link
        // among them) fails the run.
        let mut doc_env = env.clone();
        doc_env.push((
            "RUSTDOCFLAGS",
            "-D warnings -D rustdoc::broken_intra_doc_links -D rustdoc::private_intra_doc_links"
                .to_string(),
        ));
        run_step("rustdoc", &["doc", "--workspace", "--no-deps"], &doc_env)?;
    }
    let tests = run_step("tests", &["test", "--workspace", "--no-fail-fast"], &env);
    let conformance = run_step(
        "golden conformance",
        &["xtask", "conformance", "--redis", &services.single],
        &env,
    );
    // The process-level fault suite (real redis-server and mesh_node processes, loopback).
    let faults = run_step("fault suite", &["xtask", "faults"], &env);
    tests.and(conformance).and(faults)
}
