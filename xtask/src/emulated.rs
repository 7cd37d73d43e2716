//! `cargo xtask test`'s emulated step: the binaries of other architectures
//! and systems, executed (tests/emulated).
//!
//! - aarch64: the probe and smoke exactly as the aarch64 wheel ships them
//!   (`native::build_shipped`), under Debian's qemu user-mode emulator (run
//!   explicitly, no binfmt) in an arm64 chroot holding NVIDIA's real arm64
//!   `libcuda1` (535, 550).
//! - Windows: the probe and smoke built for `x86_64-pc-windows-gnu` under
//!   Wine, with the simulated driver as System32's `nvcuda.dll` and decoys
//!   beside the probe, in its working directory and on PATH.
//!
//! The arm64 packages and the emulator are fetched as the real-driver step
//! fetches `libcuda1` ([`PrivateApt`]), never installed, and cached under
//! `target/emulated/`. mingw-w64 and Wine are Debian packages installed
//! with apt-get when missing; the step fails, saying why, when they cannot
//! be. The step names everything it staged in `target/test-paths.json`, so
//! plain `pytest tests/emulated` runs again after it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::native::{self, cargo};
use crate::paths::{at, record_test_paths, repo_root, target_dir};
use crate::python_env::Venv;
use crate::real_driver::{cached, unpack, PrivateApt, RealDriver};
use crate::{process, Result};

/// The driver series Debian builds for arm64.
const ARM64_SERIES: [&str; 2] = ["535", "550"];
/// The 10.x emulator: bookworm's 7.2 answers `EINVAL` to
/// `PR_SET_CHILD_SUBREAPER`, which the probe and smoke call. Since 10.x
/// `qemu-user` itself holds the static emulators (`qemu-user-static` is
/// only links to them).
const QEMU_PACKAGE: &str = "qemu-user";
/// The arm64 userland the binaries and the driver need.
const USERLAND: [&str; 2] = ["libc6", "libgcc-s1"];
const WINDOWS_TARGET: &str = "x86_64-pc-windows-gnu";
/// Debian's path of the 64-bit Wine loader (package `wine64`).
const WINE: &str = "/usr/lib/wine/wine64";
/// What the step needs on the host: a file and the Debian package with it.
const HOST_TOOLS: [(&str, &str); 2] = [
    (
        "/usr/bin/x86_64-w64-mingw32-gcc",
        "gcc-mingw-w64-x86-64-posix",
    ),
    (WINE, "wine64"),
];
const TEST_DIR: &str = "tests/emulated";

/// The aarch64 binaries the emulated tests run.
pub struct Aarch64Binaries {
    pub probe: PathBuf,
    pub smoke: PathBuf,
}

/// One unpacked arm64 package of the userland.
#[derive(Debug, Serialize, Deserialize)]
struct Unpacked {
    package: String,
    package_version: String,
    tree: PathBuf,
}

/// What was fetched (`target/emulated/emulated.json`, read by the tests).
#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    qemu_package_version: String,
    qemu: PathBuf,
    userland: Vec<Unpacked>,
    drivers: Vec<RealDriver>,
}

/// `cargo xtask emulated`: this step alone.
pub fn command(args: &[String]) -> Result<()> {
    crate::no_arguments("emulated", args);
    Venv::Floor.ensure()?;
    test(&shipped_aarch64()?)
}

/// The aarch64 probe and smoke exactly as the aarch64 wheel ships them.
pub fn shipped_aarch64() -> Result<Aarch64Binaries> {
    let target = native::SHIPPED_TARGETS
        .iter()
        .find(|target| target.triple == "aarch64-unknown-linux-gnu")
        .ok_or("no shipped target is aarch64")?;
    let [probe, smoke] = native::build_shipped(&repo_root(), target)?;
    Ok(Aarch64Binaries { probe, smoke })
}

/// Fetches and builds what tests/emulated use, names it in
/// `target/test-paths.json`, then runs them against `aarch64`.
pub fn test(aarch64: &Aarch64Binaries) -> Result<()> {
    let dir = target_dir().join("emulated");
    let manifest = dir.join("emulated.json");
    let what = "the arm64 userland, driver and qemu";
    cached(&manifest, what, "emulated", complete, || fetch(&dir))?;
    ensure_host_tools()?;
    crate::test::ensure_target(WINDOWS_TARGET)?;
    process::run(
        cargo()
            .args(["build", "--locked", "--target", WINDOWS_TARGET])
            .args([
                "--package",
                "rextio-cuda-probe",
                "--package",
                "rextio-sim-driver",
            ]),
    )?;
    let windows = target_dir().join(WINDOWS_TARGET).join("debug");
    let wine_prefix = dir.join("wine-prefix");
    fs::create_dir_all(&wine_prefix).map_err(at(&wine_prefix))?;
    record_test_paths(json!({
        "emulated": manifest,
        "aarch64_probe": aarch64.probe,
        "aarch64_smoke": aarch64.smoke,
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

/// Installs the Debian packages of the host tools that are missing.
fn ensure_host_tools() -> Result<()> {
    let missing = || -> Vec<&str> {
        let absent = HOST_TOOLS
            .iter()
            .filter(|(path, _)| !Path::new(path).exists());
        absent.map(|(_, package)| *package).collect()
    };
    let packages = missing();
    if !packages.is_empty() {
        process::run(Command::new("apt-get").args(["-q", "update"]))?;
        let install = ["-q", "-y", "install", "--no-install-recommends"];
        let mut command = Command::new("apt-get");
        process::run(
            command
                .env("DEBIAN_FRONTEND", "noninteractive")
                .args(install)
                .args(&packages),
        )?;
    }
    match missing().as_slice() {
        [] => Ok(()),
        still => Err(format!(
            "the emulated step needs {still:?}, which apt-get did not install"
        )),
    }
}

fn complete(manifest: &Manifest) -> bool {
    manifest.qemu.is_file()
        && manifest.userland.len() == USERLAND.len()
        && manifest
            .userland
            .iter()
            .all(|unpacked| unpacked.tree.is_dir())
        && manifest.drivers.len() == ARM64_SERIES.len()
        && manifest.drivers.iter().all(|driver| driver.image.is_file())
}

/// One stanza per suite, each with only the components and architectures it
/// is asked for: the machine's release (arm64 userland, 535), its backports
/// (the 10.x emulator for this machine) and sid (550).
fn fetch(dir: &Path) -> Result<Manifest> {
    let sources = [
        "{release}/main non-free/arm64",
        "{release}-backports/main",
        "sid/non-free/arm64",
    ];
    let apt = PrivateApt::new(dir, "arm64", &sources)?;
    let release = apt.release.clone();
    let qemu_package_version = apt.version_in(QEMU_PACKAGE, &format!("{release}-backports"))?;
    let deb = apt.download(QEMU_PACKAGE, &qemu_package_version)?;
    // Only the one emulator is kept: the package holds every architecture's.
    let (tree, qemu) = (dir.join("qemu-user-tree"), dir.join("qemu-aarch64"));
    unpack(&deb, &tree)?;
    fs::rename(tree.join("usr/bin/qemu-aarch64"), &qemu)
        .map_err(|error| format!("{} holds no usr/bin/qemu-aarch64: {error}", deb.display()))?;
    fs::remove_dir_all(&tree).map_err(at(&tree))?;
    // 63 MB for the 14 MB kept: not worth a cache's space.
    fs::remove_file(&deb).map_err(at(&deb))?;
    let userland = USERLAND
        .iter()
        .map(|package| {
            let name = format!("{package}:arm64");
            let package_version = apt.version_in(&name, &release)?;
            let tree = dir.join(format!("{package}-arm64"));
            unpack(&apt.download(&name, &package_version)?, &tree)?;
            let package = (*package).to_owned();
            Ok(Unpacked {
                package,
                package_version,
                tree,
            })
        })
        .collect::<Result<_>>()?;
    let drivers = apt.drivers("libcuda1:arm64", &ARM64_SERIES, |series| {
        dir.join(format!("libcuda1-{series}-arm64"))
    })?;
    Ok(Manifest {
        qemu_package_version,
        qemu,
        userland,
        drivers,
    })
}
