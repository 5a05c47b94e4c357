//! `cargo xtask bench`: redis_location.

pub(crate) fn run(_args: &[String]) -> Result<(), String> {
    Err("benchmark redis_location is not built yet".to_string())
}
