//! `cargo xtask dist` (owned by the Python provider work).
use crate::Result;
pub fn command(_args: &[String]) -> Result<()> { Err("dist: not built yet".into()) }
