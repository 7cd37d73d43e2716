//! `cargo xtask generate [--check]` (owned by the generator work).
use crate::Result;
pub fn command(_args: &[String]) -> Result<()> { Err("generate: not built yet".into()) }
/// Fails naming each stale generated file; writes nothing.
pub fn check() -> Result<()> { Err("generate --check: not built yet".into()) }
