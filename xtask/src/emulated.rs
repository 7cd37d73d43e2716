//! `cargo xtask test`'s emulated step: the binaries of other architectures
//! and systems, executed (tests/emulated).
//!
//! - aarch64: the probe and smoke under Debian's qemu user-mode emulator in
//!   an arm64 chroot holding NVIDIA's real arm64 `libcuda1` (535, 550).
//! - Windows: the probe and smoke built for `x86_64-pc-windows-gnu` under
//!   Wine, with the simulated driver as System32's `nvcuda.dll` and decoys
//!   beside the probe, in its working directory and on PATH.
//!
//! The arm64 packages and the emulator are fetched as the real-driver step
//! fetches `libcuda1` (a private apt configuration on the machine's own
//! archive, `apt-get download`, `dpkg-deb -x`; see real_driver.rs), never
//! installed, and cached under `target/emulated/`. The emulator runs
//! explicitly (no binfmt registration). The aarch64 binaries are the shipped
//! ones (`native::build_shipped`, exactly what the aarch64 wheel carries).
//! mingw-w64 and Wine are Debian packages installed with apt-get when
//! missing; the step fails, saying why, when they cannot be.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::native::{self, cargo};
use crate::paths::{repo_root, target_dir};
use crate::real_driver::{self, PrivateApt, RealDriver};
use crate::{process, python_env, Result};

/// The driver series Debian builds for arm64.
const ARM64_SERIES: [&str; 2] = ["535", "550"];
/// The 10.x emulator: bookworm's 7.2 answers `EINVAL` to
/// `PR_SET_CHILD_SUBREAPER`, which the probe and smoke call. Since 10.x
/// `qemu-user` itself holds the static emulators (`qemu-user-static` is
/// only links to them).
const QEMU_PACKAGE: &str = "qemu-user";
const QEMU_BINARY: &str = "usr/bin/qemu-aarch64";
/// The arm64 userland the binaries and the driver need.
const USERLAND: [&str; 2] = ["libc6", "libgcc-s1"];
const ARM64: &str = "arm64";
const AARCH64_TRIPLE: &str = "aarch64-unknown-linux-gnu";
const WINDOWS_TARGET: &str = "x86_64-pc-windows-gnu";
/// Debian's path of the 64-bit Wine loader (package `wine64`).
const WINE: &str = "/usr/lib/wine/wine64";
/// What each step needs on the host: a file and the Debian package with it.
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Unpacked {
    package: String,
    package_version: String,
    tree: PathBuf,
}

/// What the tests read (`target/emulated/emulated.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Manifest {
    qemu_package_version: String,
    qemu: PathBuf,
    userland: Vec<Unpacked>,
    drivers: Vec<RealDriver>,
}

fn cache_dir() -> PathBuf {
    target_dir().join("emulated")
}

/// `cargo xtask emulated`: this step alone.
pub fn command(args: &[String]) -> Result<()> {
    crate::no_arguments("emulated", args);
    python_env::Venv::Floor.ensure()?;
    test(&shipped_aarch64()?)
}

/// Builds what the step needs, then runs tests/emulated against `aarch64`.
pub fn test(aarch64: &Aarch64Binaries) -> Result<()> {
    let manifest = ensure_fetched()?;
    let windows = build_windows()?;
    let root = repo_root();
    let tests = root.join("tests");
    let mypy_path = std::env::join_paths([tests.join("e2e"), tests.join("real_driver")])
        .map_err(|error| error.to_string())?;
    process::run(
        Command::new(python_env::Venv::Floor.program("mypy"))
            .current_dir(&root)
            .env("MYPYPATH", &mypy_path)
            .args(["--strict", "--config-file", "mypy.ini", TEST_DIR]),
    )?;
    process::run(
        Command::new(python_env::Venv::Floor.program("pytest"))
            .current_dir(&root)
            .env_remove("PYTHONPATH")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("REXTIO_EMULATED", &manifest)
            .env("REXTIO_AARCH64_PROBE", &aarch64.probe)
            .env("REXTIO_AARCH64_SMOKE", &aarch64.smoke)
            .env("REXTIO_WINDOWS_PROBE", &windows.probe)
            .env("REXTIO_WINDOWS_SMOKE", &windows.smoke)
            .env("REXTIO_WINDOWS_SIM_DRIVER", &windows.sim_driver)
            .env("REXTIO_WINE", WINE)
            .env("REXTIO_WINE_PREFIX", cache_dir().join("wine-prefix"))
            .args([
                "-p",
                "no:cacheprovider",
                "--import-mode=importlib",
                "-q",
                TEST_DIR,
            ]),
    )
}

/// Installs the Debian packages of the host tools that are missing.
fn ensure_host_tools() -> Result<()> {
    let missing = || -> Vec<&str> {
        HOST_TOOLS
            .iter()
            .filter(|(path, _)| !Path::new(path).exists())
            .map(|(_, package)| *package)
            .collect()
    };
    let packages = missing();
    if packages.is_empty() {
        return Ok(());
    }
    let install = || {
        process::run(Command::new("apt-get").args(["-q", "update"]))?;
        process::run(
            Command::new("apt-get")
                .env("DEBIAN_FRONTEND", "noninteractive")
                .args(["-q", "-y", "install", "--no-install-recommends"])
                .args(&packages),
        )
    };
    install().map_err(|why| {
        format!("the emulated step needs the Debian packages {packages:?} and could not install them: {why}")
    })?;
    match missing().as_slice() {
        [] => Ok(()),
        still => Err(format!(
            "apt-get installed {packages:?}, yet {still:?} are still missing"
        )),
    }
}

/// The aarch64 probe and smoke exactly as the aarch64 wheel ships them.
pub fn shipped_aarch64() -> Result<Aarch64Binaries> {
    let target = native::SHIPPED_TARGETS
        .iter()
        .find(|target| target.triple == AARCH64_TRIPLE)
        .ok_or("no shipped target is aarch64")?;
    let [probe, smoke] = native::build_shipped(&repo_root(), target)?;
    Ok(Aarch64Binaries { probe, smoke })
}

/// The Windows probe, smoke and simulated driver (mingw-w64 links them).
struct WindowsBinaries {
    probe: PathBuf,
    smoke: PathBuf,
    sim_driver: PathBuf,
}

fn build_windows() -> Result<WindowsBinaries> {
    ensure_host_tools()?;
    crate::test::ensure_target(WINDOWS_TARGET)?;
    process::run(
        cargo()
            .args(["build", "--locked", "--target", WINDOWS_TARGET])
            .args(["--package", "rextio-cuda-probe"])
            .args(["--package", "rextio-sim-driver"]),
    )?;
    let dir = target_dir().join(WINDOWS_TARGET).join("debug");
    Ok(WindowsBinaries {
        probe: dir.join("rextio-cuda-driver-probe.exe"),
        smoke: dir.join("rextio-cuda-runtime-smoke.exe"),
        sim_driver: dir.join("rextio_sim_driver.dll"),
    })
}

/// The manifest, fetching what the cache lacks.
fn ensure_fetched() -> Result<PathBuf> {
    let path = cache_dir().join("emulated.json");
    let cached = fs::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str::<Manifest>(&text).ok())
        .filter(is_complete);
    let manifest = match cached {
        Some(manifest) => {
            println!(
                "emulated: reusing the cached arm64 packages ({})",
                path.display()
            );
            manifest
        }
        None => fetch().map_err(|why| {
            format!(
                "the arm64 userland, driver and qemu could not be fetched, so the emulated \
                 checks cannot run (they are never skipped): {why}"
            )
        })?,
    };
    // Written again when reused too, so the tests read every current field.
    let text = serde_json::to_string_pretty(&manifest).map_err(|error| error.to_string())?;
    fs::write(&path, text).map_err(|error| format!("{}: {error}", path.display()))?;
    Ok(path)
}

fn is_complete(manifest: &Manifest) -> bool {
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
fn fetch() -> Result<Manifest> {
    let (entry, codename) = real_driver::machine_entry()?;
    let backports = format!("{codename}-backports");
    let owned = |words: &[&str]| {
        words
            .iter()
            .map(|word| (*word).to_owned())
            .collect::<Vec<_>>()
    };
    let source = [
        real_driver::stanza(
            &entry,
            &owned(&[&codename]),
            &owned(&["main", "non-free"]),
            Some(ARM64),
        ),
        real_driver::stanza(&entry, &owned(&[&backports]), &owned(&["main"]), None),
        real_driver::stanza(&entry, &owned(&["sid"]), &owned(&["non-free"]), Some(ARM64)),
    ]
    .join("\n");
    let dir = cache_dir();
    let apt = PrivateApt::create(&dir.join("apt"), &source, &[ARM64])?;
    apt.update()?;
    let debs = dir.join("debs");
    fs::create_dir_all(&debs).map_err(|error| format!("{}: {error}", debs.display()))?;

    let qemu_version = apt.version_in(QEMU_PACKAGE, &backports)?;
    let deb = apt.download(QEMU_PACKAGE, &qemu_version, &debs)?;
    // Only the one emulator is kept: the package holds every architecture's.
    let tree = dir.join("qemu-user-tree");
    real_driver::unpack(&deb, &tree)?;
    let qemu = dir.join("qemu-aarch64");
    fs::rename(tree.join(QEMU_BINARY), &qemu)
        .map_err(|error| format!("{} holds no {QEMU_BINARY}: {error}", deb.display()))?;
    fs::remove_dir_all(&tree).map_err(|error| format!("{}: {error}", tree.display()))?;
    // 63 MB for the 14 MB kept: not worth a cache's space.
    fs::remove_file(&deb).map_err(|error| format!("{}: {error}", deb.display()))?;

    let mut userland = Vec::new();
    for package in USERLAND {
        let name = format!("{package}:{ARM64}");
        let version = apt.version_in(&name, &codename)?;
        let deb = apt.download(&name, &version, &debs)?;
        let tree = dir.join(format!("{package}-{ARM64}"));
        real_driver::unpack(&deb, &tree)?;
        userland.push(Unpacked {
            package: package.to_owned(),
            package_version: version,
            tree,
        });
    }

    let name = format!("libcuda1:{ARM64}");
    let offered = apt.versions(&name)?;
    println!("emulated: the private apt configuration sees {name} {offered:?}");
    let mut drivers = Vec::new();
    for series in ARM64_SERIES {
        let version = real_driver::newest_of_series(&offered, series)
            .ok_or_else(|| format!("no {name} of series {series} is offered ({offered:?})"))?;
        let deb = apt.download(&name, &version, &debs)?;
        let tree = dir.join(format!("libcuda1-{series}-{ARM64}"));
        drivers.push(real_driver::extract(&tree, series, &version, &deb)?);
    }
    Ok(Manifest {
        qemu_package_version: qemu_version,
        qemu,
        userland,
        drivers,
    })
}
