//! `cargo xtask verify-determinism` (owned by the generator work).
use crate::Result;
pub fn command(_args: &[String]) -> Result<()> { Err("verify-determinism: not built yet".into()) }
