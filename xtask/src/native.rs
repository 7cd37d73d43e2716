//! Building the probe, smoke and simulated driver (owned by the probe work).
use std::path::PathBuf;
use crate::Result;
/// Paths of the built native binaries.
pub struct NativeArtifacts { pub probe: PathBuf, pub smoke: PathBuf, pub sim_driver: PathBuf }
/// Builds the probe, the smoke and the simulated driver (`release` for validate-nvidia).
pub fn build(_release: bool) -> Result<NativeArtifacts> { Err("native build: not built yet".into()) }
/// Probe run time with the simulated driver and with no driver.
pub fn bench() -> Result<()> { Err("probe bench: not built yet".into()) }
/// The probe's and smoke's dynamic sections name no libcuda/nvcuda.
pub fn check_no_cuda_link(_artifacts: &NativeArtifacts) -> Result<()> { Err("native link check: not built yet".into()) }
