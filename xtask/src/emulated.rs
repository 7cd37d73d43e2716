//! `cargo xtask test`'s emulated step (docs/maintainers.md): the
//! shipped aarch64 probe and smoke under qemu, the Windows ones under Wine
//! (tests/emulated). The arm64 packages and the emulator are fetched by
//! [`crate::apt`], never installed, cached under
//! `target/emulated/`; mingw-w64 and Wine are installed with apt-get when
//! missing.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::apt::{cached, unpack, PrivateApt};
use crate::native::{self, cargo};
use crate::paths::{at, record_test_paths, repo_root, target_dir};
use crate::python_env::Venv;
use crate::real_driver::{fetch_series, RealDriver};
use crate::{process, toolchain, Result};

/// The driver series Debian builds for arm64.
const ARM64_SERIES: [&str; 2] = ["535", "550"];
/// The 10.x emulator (the machine's backports): bookworm's 7.2 answers
/// `EINVAL` to `PR_SET_CHILD_SUBREAPER`, which the probe and smoke call.
/// Since 10.x `qemu-user` itself holds the static emulators.
const QEMU_PACKAGE: &str = "qemu-user";
/// The arm64 userland the binaries and the driver need.
const USERLAND: [&str; 2] = ["libc6", "libgcc-s1"];
const WINDOWS_TARGET: &str = "x86_64-pc-windows-gnu";
/// Debian's path of the 64-bit Wine loader (package `wine64`).
const WINE: &str = "/usr/lib/wine/wine64";
/// What the step needs on the host: a file and the Debian package with it.
const HOST_TOOLS: [[&str; 2]; 2] = [[MINGW, "gcc-mingw-w64-x86-64-posix"], [WINE, "wine64"]];
const MINGW: &str = "/usr/bin/x86_64-w64-mingw32-gcc";
const TEST_DIR: &str = "tests/emulated";

/// What was fetched (`target/emulated/emulated.json`, read by the tests).
#[derive(Serialize, Deserialize)]
struct Manifest {
    qemu_package_version: String,
    qemu: PathBuf,
    /// The unpacked arm64 userland packages.
    userland: Vec<PathBuf>,
    drivers: Vec<RealDriver>,
}

/// `cargo xtask emulated`: this step alone.
pub fn command() -> Result<()> {
    Venv::Floor.ensure()?;
    test(&shipped_aarch64()?)
}

/// The aarch64 probe and smoke exactly as the aarch64 wheel ships them.
pub fn shipped_aarch64() -> Result<[PathBuf; 2]> {
    native::build_shipped(&repo_root(), "aarch64-unknown-linux-gnu")
}

/// Fetches and builds what tests/emulated use, names it in
/// `target/test-paths.json`, then runs them on the aarch64 probe and smoke.
pub fn test([aarch64_probe, aarch64_smoke]: &[PathBuf; 2]) -> Result<()> {
    let dir = target_dir().join("emulated");
    let manifest = dir.join("emulated.json");
    let complete = |manifest: &Manifest| {
        let trees = manifest.userland.iter().all(|tree| tree.is_dir());
        let images = manifest.drivers.iter().all(|driver| driver.image.is_file());
        let counts = (manifest.userland.len(), manifest.drivers.len());
        manifest.qemu.is_file() && trees && images && counts == (USERLAND.len(), ARM64_SERIES.len())
    };
    let what = "the arm64 userland, driver and qemu";
    cached(&manifest, what, "emulated", complete, || fetch(&dir))?;
    let missing = || HOST_TOOLS.iter().find(|[p, _]| !Path::new(p).exists());
    if missing().is_some() {
        process::run(Command::new("apt-get").args(["-q", "update"]))?;
        let mut install = Command::new("apt-get");
        install.env("DEBIAN_FRONTEND", "noninteractive");
        install.args(["-q", "-y", "install", "--no-install-recommends"]);
        process::run(install.args(HOST_TOOLS.map(|[_, package]| package)))?;
    }
    if let Some([path, package]) = missing() {
        return Err(format!("{path} is missing (package {package})"));
    }
    toolchain::ensure_pinned_targets()?;
    let mut build = cargo();
    build.args(["build", "--locked", "--target", WINDOWS_TARGET]);
    process::run(build.args(["-p", "rextio-cuda-probe", "-p", "rextio-sim-driver"]))?;
    let windows = target_dir().join(WINDOWS_TARGET).join("debug");
    let wine_prefix = dir.join("wine-prefix");
    fs::create_dir_all(&wine_prefix).map_err(at(&wine_prefix))?;
    record_test_paths(json!({
        "emulated": manifest,
        "aarch64_probe": aarch64_probe,
        "aarch64_smoke": aarch64_smoke,
        "windows_probe": windows.join("rextio-cuda-driver-probe.exe"),
        "windows_smoke": windows.join("rextio-cuda-runtime-smoke.exe"),
        "windows_sim_driver": windows.join("rextio_sim_driver.dll"),
        "wine": WINE,
        "wine_prefix": wine_prefix,
    }))?;
    // tests/emulated reads the real-driver series facts (real_libcuda.py).
    Venv::Floor.mypy(&[&[TEST_DIR, "tests/real_driver/real_libcuda.py"]])?;
    Venv::Floor.pytest(&[TEST_DIR])
}

/// Sources: the machine's release (arm64 userland, 535), its backports
/// (the emulator for this machine) and sid (550).
fn fetch(dir: &Path) -> Result<Manifest> {
    let sources = [
        "{release}/main non-free/arm64",
        "{release}-backports/main",
        "sid/non-free/arm64",
    ];
    let apt = PrivateApt::new(dir, Some("arm64"), &sources)?;
    let backports = format!("{}-backports", apt.release);
    let qemu_package_version = apt.version_in(QEMU_PACKAGE, &backports)?;
    let deb = apt.download(QEMU_PACKAGE, &qemu_package_version)?;
    // Only the one emulator is kept (the package holds every architecture's),
    // not the 63 MB package.
    let (tree, qemu) = (dir.join("qemu-user-tree"), dir.join("qemu-aarch64"));
    unpack(&deb, &tree)?;
    fs::rename(tree.join("usr/bin/qemu-aarch64"), &qemu)
        .map_err(|error| format!("{} holds no usr/bin/qemu-aarch64: {error}", deb.display()))?;
    fs::remove_dir_all(&tree).map_err(at(&tree))?;
    fs::remove_file(&deb).map_err(at(&deb))?;
    let mut userland = Vec::new();
    for package in USERLAND {
        let name = format!("{package}:arm64");
        let deb = apt.download(&name, &apt.version_in(&name, &apt.release)?)?;
        let tree = dir.join(format!("{package}-arm64"));
        unpack(&deb, &tree)?;
        userland.push(tree);
    }
    let drivers = fetch_series(&apt, "libcuda1:arm64", &ARM64_SERIES)?;
    Ok(Manifest {
        qemu_package_version,
        qemu,
        userland,
        drivers,
    })
}
