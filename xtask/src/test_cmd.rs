//! `cargo xtask test`: the single test command.

pub(crate) fn run(_args: &[String]) -> Result<(), String> {
    Err("not built yet".to_string())
}
