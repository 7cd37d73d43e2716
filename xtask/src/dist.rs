//! `cargo xtask dist` (owned by the Python provider work).
use std::path::PathBuf;
use crate::Result;
pub fn command(_args: &[String]) -> Result<()> { build_wheel().map(|_| ()) }
/// generate --check, then the wheel into target/dist/; returns its path.
pub fn build_wheel() -> Result<PathBuf> { Err("dist: not built yet".into()) }
