//! `cargo xtask bench`: store_memory.

pub(crate) fn run(_args: &[String]) -> Result<(), String> {
    Err("benchmark store_memory is not built yet".to_string())
}
