//! `cargo xtask demo` (owned by the probe work).
use crate::Result;
pub fn command(_args: &[String]) -> Result<()> { Err("demo: not built yet".into()) }
