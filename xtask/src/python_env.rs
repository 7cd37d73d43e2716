//! The project's Python virtual environment (owned by the Python provider work).
use crate::native::NativeArtifacts;
use crate::Result;
/// Builds the wheel, installs it into the venv, runs ruff, mypy --strict and pytest.
pub fn test(_native: &NativeArtifacts) -> Result<()> { Err("python checks: not built yet".into()) }
/// Preflight latency versus probe spawn floor; import time.
pub fn bench() -> Result<()> { Err("python bench: not built yet".into()) }
