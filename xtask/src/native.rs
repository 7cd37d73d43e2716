//! The native binaries: building the probe, the smoke and the simulated
//! driver; timing the probe.

use std::path::PathBuf;
use std::process::Command;

use crate::paths::{repo_root, target_dir};
use crate::python_env::Venv;
use crate::{nolink, process, Result};

/// Paths of the built native binaries.
pub struct NativeArtifacts {
    pub probe: PathBuf,
    pub smoke: PathBuf,
    pub sim_driver: PathBuf,
}

const PROBE_PACKAGE: &str = "rextio-cuda-probe";
const SIM_DRIVER_PACKAGE: &str = "rextio-sim-driver";
const PROBE_BINARY: &str = "rextio-cuda-driver-probe";
const SMOKE_BINARY: &str = "rextio-cuda-runtime-smoke";
const SIM_DRIVER_LIBRARY: &str = "librextio_sim_driver.so";

/// Builds the probe, the smoke and the simulated driver (`release` for
/// the bench: `--release --locked`).
pub fn build(release: bool) -> Result<NativeArtifacts> {
    let mut command = cargo();
    command.args([
        "build",
        "--package",
        PROBE_PACKAGE,
        "--package",
        SIM_DRIVER_PACKAGE,
    ]);
    if release {
        command.args(["--release", "--locked"]);
    }
    process::run(&mut command)?;
    let profile_dir = target_dir().join(if release { "release" } else { "debug" });
    let artifacts = NativeArtifacts {
        probe: profile_dir.join(executable(PROBE_BINARY)),
        smoke: profile_dir.join(executable(SMOKE_BINARY)),
        sim_driver: profile_dir.join(SIM_DRIVER_LIBRARY),
    };
    for path in [&artifacts.probe, &artifacts.smoke] {
        if !path.is_file() {
            return Err(format!("cargo build did not produce {}", path.display()));
        }
    }
    Ok(artifacts)
}

/// The built probe and smoke name no libcuda/nvcuda in their dynamic section.
pub fn check_no_cuda_link(native: &NativeArtifacts) -> Result<()> {
    nolink::check_dynamic_section(&native.probe)?;
    nolink::check_dynamic_section(&native.smoke)
}

fn executable(name: &str) -> String {
    format!("{name}{}", std::env::consts::EXE_SUFFIX)
}

/// `cargo`, as the one running xtask (or from PATH), in the repository root.
pub fn cargo() -> Command {
    let program = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(program);
    command.current_dir(repo_root());
    command
}

/// Probe run time (tests/e2e/probe_bench.py) of the release build: with no
/// driver and beside the simulated one, against the spawn floor.
pub fn bench() -> Result<()> {
    let native = build(true)?;
    process::run(
        Command::new(Venv::Floor.program("python"))
            .current_dir(repo_root())
            .arg("tests/e2e/probe_bench.py")
            .arg(&native.probe)
            .arg(&native.sim_driver),
    )
}
