//! Proof that nothing links to cuda/nvcuda (owned by the generator work).
use std::path::Path;
use crate::Result;
/// syn scan of every Rust source in the workspace and in the runtime tarball.
pub fn scan_sources() -> Result<()> { Err("nolink scan: not built yet".into()) }
/// Builds the runtime as a cdylib and checks its dynamic section.
pub fn check_runtime_cdylib() -> Result<()> { Err("nolink cdylib: not built yet".into()) }
/// Fails when the ELF/PE at `path` names libcuda or nvcuda as a dependency.
pub fn check_dynamic_section(_path: &Path) -> Result<()> { Err("nolink dynamic: not built yet".into()) }
