//! `cargo xtask bench`: ratios measured in one run, never asserted in tests.
use crate::Result;
pub fn command(_args: &[String]) -> Result<()> { Err("bench: not built yet".into()) }
