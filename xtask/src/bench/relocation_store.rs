//! `cargo xtask bench`: relocation_store.

pub(crate) fn run(_args: &[String]) -> Result<(), String> {
    Err("benchmark relocation_store is not built yet".to_string())
}
