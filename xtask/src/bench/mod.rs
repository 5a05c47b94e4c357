//! `cargo xtask bench <name>`: benchmarks that print their figure beside a baseline measured in
//! the same run, as a ratio.

mod authority;
mod redis_location;
mod relocation_store;
mod store_memory;

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let Some((name, rest)) = args.split_first() else {
        return Err("bench: name one of: store --memory | redis-location | relocation-store | authority".into());
    };
    match name.as_str() {
        "store" => store_memory::run(rest),
        "redis-location" => redis_location::run(rest),
        "relocation-store" => relocation_store::run(rest),
        "authority" => authority::run(rest),
        other => Err(format!("bench: unknown benchmark `{other}`")),
    }
}
