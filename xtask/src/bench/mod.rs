//! `cargo xtask bench <name>`: benchmarks that print their figure beside a baseline measured in
//! the same run, as a ratio.

mod authority;
mod redis_location;
mod relocation_store;
mod store_memory;

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    if cfg!(debug_assertions) && std::env::var_os("ZLINK_BENCH_ALLOW_DEBUG").is_none() {
        // Benchmarks of a debug build measure the wrong thing: run this command again from an
        // optimised build of xtask.
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
        let status = std::process::Command::new(cargo)
            .args([
                "run",
                "--quiet",
                "--release",
                "--package",
                "xtask",
                "--",
                "bench",
            ])
            .args(args)
            .current_dir(crate::workspace_root())
            .status()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        return if status.success() {
            Ok(())
        } else {
            Err(format!("benchmark failed ({status})"))
        };
    }
    let Some((name, rest)) = args.split_first() else {
        return Err(
            "bench: name one of: store --memory | redis-location | relocation-store | authority"
                .into(),
        );
    };
    match name.as_str() {
        "store" => store_memory::run(rest),
        "redis-location" => redis_location::run(rest),
        "relocation-store" => relocation_store::run(rest),
        "authority" => authority::run(rest),
        other => Err(format!("bench: unknown benchmark `{other}`")),
    }
}
