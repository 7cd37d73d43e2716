//! The native binaries: building the probe, the smoke and the simulated
//! driver; the shipped builds; timing the probe.

use std::path::{Path, PathBuf};
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

/// A target whose platform wheel ships the release probe and smoke.
pub struct ShippedTarget {
    pub triple: &'static str,
    /// The wheel's platform tag: manylinux for the glibc floor below.
    pub platform_tag: &'static str,
}

/// The shipped targets (contract §9.1); Windows stays build-from-source.
pub const SHIPPED_TARGETS: [ShippedTarget; 2] = [
    ShippedTarget {
        triple: "x86_64-unknown-linux-gnu",
        platform_tag: "manylinux_2_17_x86_64",
    },
    ShippedTarget {
        triple: "aarch64-unknown-linux-gnu",
        platform_tag: "manylinux_2_17_aarch64",
    },
];

/// The oldest glibc the shipped binaries link against (RHEL 8, Ubuntu 20.04, Jetson).
const GLIBC_FLOOR: &str = "2.17";

/// The shipped target this host runs.
pub fn host_shipped_target() -> Result<&'static ShippedTarget> {
    let host = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    SHIPPED_TARGETS
        .iter()
        .find(|target| target.triple == host)
        .ok_or_else(|| format!("no platform wheel ships for {host}"))
}

/// Where the shipped builds of the tree at `root` live: `<root>/target/ship`
/// (or `$CARGO_TARGET_DIR/ship` for this checkout).
pub fn ship_dir(root: &Path) -> PathBuf {
    if root == repo_root() {
        target_dir().join("ship")
    } else {
        root.join("target").join("ship")
    }
}

/// The release probe and smoke for `target` exactly as its wheel ships them,
/// built from the tree at `root`: cargo-zigbuild against glibc 2.17 with the
/// toolchain of rust-toolchain.toml, the checkout and cargo-home prefixes
/// remapped so the bytes do not depend on where either lives. They land in
/// `<ship_dir>/<triple>/release/` (for this checkout
/// `target/ship/<triple>/release/rextio-cuda-driver-probe` and
/// `.../rextio-cuda-runtime-smoke`); returns both paths. One cargo
/// invocation per target: the output is then the same for every order.
pub fn build_shipped(root: &Path, target: &ShippedTarget) -> Result<[PathBuf; 2]> {
    let tools = crate::python_env::ensure_dist_tools()?;
    let ship = ship_dir(root);
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")))
        .ok_or("neither CARGO_HOME nor HOME is set")?;
    let rustflags = format!(
        "--remap-path-prefix={}=/rextio-device-cuda --remap-path-prefix={}=/cargo",
        root.display(),
        cargo_home.display()
    );
    let path = std::env::join_paths(std::iter::once(tools.clone()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .map_err(|error| format!("PATH: {error}"))?;
    let mut command = Command::new(tools.join("cargo-zigbuild"));
    command
        .current_dir(root)
        // zig is `python -m ziglang` of the tools environment; its caches stay in target/.
        .env("PATH", path)
        .env("XDG_CACHE_HOME", ship.join("cache"))
        .env("RUSTFLAGS", rustflags)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .args([
            "zigbuild",
            "--release",
            "--locked",
            "--package",
            PROBE_PACKAGE,
            "--bins",
        ])
        .arg("--target")
        .arg(format!("{}.{GLIBC_FLOOR}", target.triple))
        .arg("--target-dir")
        .arg(&ship);
    process::run(&mut command)?;
    let release = ship.join(target.triple).join("release");
    let binaries = [release.join(PROBE_BINARY), release.join(SMOKE_BINARY)];
    for binary in &binaries {
        if !binary.is_file() {
            return Err(format!(
                "cargo zigbuild did not produce {}",
                binary.display()
            ));
        }
    }
    Ok(binaries)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_target_is_a_capability_target_of_the_spec() {
        let root = repo_root();
        let inputs = crate::generate::inputs::Inputs::read(&root).unwrap();
        let spec = crate::generate::spec::parse(
            inputs
                .get(crate::generate::inputs::PROVIDER_SPEC_PATH)
                .unwrap(),
        )
        .unwrap();
        for target in &SHIPPED_TARGETS {
            assert!(
                crate::generate::spec::items(&spec["capabilities"])
                    .iter()
                    .any(|capability| capability["target_triple"] == target.triple),
                "{}",
                target.triple
            );
            let arch = target.triple.split('-').next().unwrap();
            let floor = GLIBC_FLOOR.replace('.', "_");
            assert_eq!(target.platform_tag, format!("manylinux_{floor}_{arch}"));
        }
    }
}
