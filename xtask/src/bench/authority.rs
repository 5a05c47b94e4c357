//! `cargo xtask bench`: authority.

pub(crate) fn run(_args: &[String]) -> Result<(), String> {
    Err("benchmark authority is not built yet".to_string())
}
