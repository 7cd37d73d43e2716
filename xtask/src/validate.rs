//! `cargo xtask validate-nvidia` (owned by the probe work).
use crate::Result;
pub fn command(_args: &[String]) -> Result<()> { Err("validate-nvidia: not built yet".into()) }
