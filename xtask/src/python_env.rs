//! The project's Python virtual environments (owned by the Python provider work).
//!
//! Three environments under `target/`, each with exactly pinned packages from
//! PyPI, created once and reused while every pin is satisfied:
//!
//! - `target/venv-build`: hatchling alone, the wheel's build backend (`dist`).
//! - `target/venv-dist`: `dist`'s other tools: zig (`ziglang`) and
//!   cargo-zigbuild for the shipped binaries, auditwheel, twine and
//!   check-wheel-contents for the artifacts' checks.
//! - `target/venv`: Rextio Core `FLOOR_CORE` (0.1.6, the lowest Core the
//!   package supports) and every tool (pytest, ruff, mypy, hatchling).
//!   `demo`, `bench` and `validate-nvidia` use it.
//! - `target/venv-core-<NEWEST_CORE>` (today `target/venv-core-0.1.8`): the
//!   newest Core 0.1.x on PyPI, the same tools, and the companion plugins
//!   rextio-torch 0.1.3 and rextio-tensorflow 0.1.3 installed with `--no-deps`
//!   from their sdists (which `target/downstream-sdists/` caches, SHA-256
//!   pinned; their CUDA candidate builders ship only there).
//!
//! - `target/venv-bench-0.1.0`: Core `FLOOR_CORE` and the published
//!   rextio-device-cuda 0.1.0 (its wheel from PyPI, SHA-256 pinned), the
//!   reference of the bench's cold path only: nothing else imports it.
//!
//! `cargo xtask test` runs `tests/python` and `tests/e2e` in both, and
//! `tests/downstream` (tests needing the plugins or Core >= 0.1.7) only in the
//! newest. Tests always import the installed wheel, never the source tree.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::native::NativeArtifacts;
use crate::{dist, paths, process, Result};

/// The lowest Rextio Core the package supports (`rextio>=0.1.6,<0.2`).
pub const FLOOR_CORE: &str = "0.1.6";

/// The newest Rextio Core 0.1.x on PyPI, pinned exactly; raise it when a newer
/// 0.1.x is published (and say so in README.md).
pub const NEWEST_CORE: &str = "0.1.8";

/// Exact pins of every tool the Python checks and tests use (both environments;
/// the tests build a fixture plugin with hatchling).
const TOOL_PINS: &[(&str, &str)] = &[
    ("pytest", "9.2.0"),
    ("ruff", "0.17.6"),
    ("mypy", "2.4.1"),
    ("hatchling", HATCHLING),
];

/// The wheel's build backend, pinned exactly.
const HATCHLING: &str = "1.33.0";

/// `dist`'s tools besides hatchling, pinned exactly.
const DIST_TOOL_PINS: &[(&str, &str)] = &[
    ("ziglang", "0.17.0"),
    ("cargo-zigbuild", "0.24.0"),
    ("auditwheel", "6.8.2"),
    ("twine", "7.0.0"),
    ("check-wheel-contents", "0.6.3"),
];

/// A distribution installed from one file PyPI serves (its name and SHA-256)
/// with `--no-deps`.
struct Pinned {
    name: &'static str,
    version: &'static str,
    file: &'static str,
    sha256: &'static str,
}

/// The companion plugins, whose own code runs against our wheel (sdists).
const DOWNSTREAM: &[Pinned] = &[
    Pinned {
        name: "rextio-torch",
        version: "0.1.3",
        file: "rextio_torch-0.1.3.tar.gz",
        sha256: "db9e2676da976d6b50818969079b87cf118e969f38120263e9113a7c9a2fe3f7",
    },
    Pinned {
        name: "rextio-tensorflow",
        version: "0.1.3",
        file: "rextio_tensorflow-0.1.3.tar.gz",
        sha256: "64cbe95c313e555d2f9a1982d8357096100a1debfbd6f5f36abcee77aaf32c5c",
    },
];

/// The published build this package succeeds: the bench's cold-path reference
/// (a wheel; its code is never copied into this repository).
const REFERENCE: Pinned = Pinned {
    name: "rextio-device-cuda",
    version: "0.1.0",
    file: "rextio_device_cuda-0.1.0-py3-none-any.whl",
    sha256: "6ba40004e429b8b14c4b90f0ce75a479970b76a86a202d22655b7366d72fb7bf",
};

/// Exits 0 when every `name==version` argument is installed at that version.
const PINS_SATISFIED: &str = "\
import sys
from importlib import metadata
for pin in sys.argv[1:]:
    name, version = pin.split('==')
    try:
        if metadata.version(name) != version:
            sys.exit(1)
    except metadata.PackageNotFoundError:
        sys.exit(1)
";

/// One of the environments.
#[derive(Clone, Copy)]
enum Venv {
    /// `target/venv-build`: the build backend alone.
    Build,
    /// `target/venv-dist`: `dist`'s tools.
    Dist,
    /// `target/venv`: Core `FLOOR_CORE` and every tool.
    Floor,
    /// `target/venv-core-<NEWEST_CORE>`: the newest Core and the plugins.
    Newest,
    /// `target/venv-bench-<REFERENCE.version>`: Core `FLOOR_CORE` and `REFERENCE`.
    Reference,
}

impl Venv {
    fn dir(self) -> PathBuf {
        match self {
            Venv::Build => paths::target_dir().join("venv-build"),
            Venv::Dist => paths::target_dir().join("venv-dist"),
            Venv::Floor => paths::target_dir().join("venv"),
            Venv::Newest => paths::target_dir().join(format!("venv-core-{NEWEST_CORE}")),
            Venv::Reference => {
                paths::target_dir().join(format!("venv-bench-{}", REFERENCE.version))
            }
        }
    }

    fn program(self, name: &str) -> PathBuf {
        if cfg!(windows) {
            self.dir().join("Scripts").join(format!("{name}.exe"))
        } else {
            self.dir().join("bin").join(name)
        }
    }

    fn pins(self) -> Vec<String> {
        let core = match self {
            Venv::Build => return vec![format!("hatchling=={HATCHLING}")],
            Venv::Reference => return vec![format!("rextio=={FLOOR_CORE}")],
            Venv::Dist => {
                return DIST_TOOL_PINS
                    .iter()
                    .map(|(name, version)| format!("{name}=={version}"))
                    .collect()
            }
            Venv::Floor => FLOOR_CORE,
            Venv::Newest => NEWEST_CORE,
        };
        std::iter::once(("rextio", core))
            .chain(TOOL_PINS.iter().copied())
            .map(|(name, version)| format!("{name}=={version}"))
            .collect()
    }

    /// Creates or reuses the environment with every pin; returns its python.
    fn ensure(self) -> Result<PathBuf> {
        let python = self.program("python");
        let shown = self.dir();
        let shown = shown
            .strip_prefix(paths::repo_root())
            .unwrap_or(&shown)
            .display();
        if !python.exists() {
            let base = std::env::var("REXTIO_PYTHON").unwrap_or_else(|_| {
                if cfg!(windows) {
                    "python".into()
                } else {
                    "python3".into()
                }
            });
            println!("python: creating {shown}");
            process::run(Command::new(base).args(["-m", "venv"]).arg(self.dir()))?;
        }
        let pins = self.pins();
        if !pins_satisfied(&python, &pins)? {
            println!(
                "python: installing {} into {shown} from PyPI",
                pins.join(" ")
            );
            process::run(pip_install(&python).args(&pins))?;
        }
        let supported = Command::new(&python)
            .args(["-c", "import sys; sys.exit(sys.version_info < (3, 11))"])
            .status()
            .is_ok_and(|status| status.success());
        if !supported {
            return Err(format!(
                "{} is older than Python 3.11; remove {} and set REXTIO_PYTHON \
                 to a CPython 3.11+ interpreter",
                python.display(),
                self.dir().display()
            ));
        }
        Ok(python)
    }
}

fn pins_satisfied(python: &Path, pins: &[String]) -> Result<bool> {
    Ok(Command::new(python)
        .args(["-c", PINS_SATISFIED])
        .args(pins)
        .status()
        .map_err(|error| format!("could not run {}: {error}", python.display()))?
        .success())
}

/// A program inside the floor environment (`python`, `pytest`, ...).
pub fn venv_program(name: &str) -> PathBuf {
    Venv::Floor.program(name)
}

/// Creates or reuses `target/venv` with every pinned tool; returns its python.
pub fn ensure_venv() -> Result<PathBuf> {
    Venv::Floor.ensure()
}

/// Creates or reuses `target/venv-build` (the build backend only); returns its python.
pub fn ensure_build_venv() -> Result<PathBuf> {
    Venv::Build.ensure()
}

/// Creates or reuses `target/venv-dist`; returns its `bin` directory.
pub fn ensure_dist_tools() -> Result<PathBuf> {
    Venv::Dist.ensure()?;
    Ok(Venv::Dist
        .dir()
        .join(if cfg!(windows) { "Scripts" } else { "bin" }))
}

/// `python -m pip install`, quiet, with pip's download cache inside target/
/// so nothing is cached outside the repository.
fn pip_install(python: &Path) -> Command {
    let mut command = pip(python);
    command.args(["install", "--quiet"]);
    command
}

fn pip(python: &Path) -> Command {
    let mut command = Command::new(python);
    command
        .env("PIP_CACHE_DIR", paths::target_dir().join("pip-cache"))
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .args(["-m", "pip"]);
    command
}

/// Where the plugins' sdists are cached.
fn sdist_dir() -> PathBuf {
    paths::target_dir().join("downstream-sdists")
}

/// Downloads (once) the plugins' sdists into `target/downstream-sdists/` and
/// checks each against its pinned SHA-256.
fn fetch_downstream_sdists(python: &Path) -> Result<PathBuf> {
    let dir = sdist_dir();
    fetch_pinned(python, &dir, DOWNSTREAM, "--no-binary")?;
    Ok(dir)
}

/// Downloads (once) each of `files` into `dir` (`format`: `--no-binary` or
/// `--only-binary`) and checks each against its pinned SHA-256.
fn fetch_pinned(python: &Path, dir: &Path, files: &[Pinned], format: &str) -> Result<()> {
    let missing: Vec<String> = files
        .iter()
        .filter(|pinned| !dir.join(pinned.file).is_file())
        .map(|pinned| format!("{}=={}", pinned.name, pinned.version))
        .collect();
    if !missing.is_empty() {
        process::run(
            pip(python)
                .args(["download", "--quiet", "--no-deps", format, ":all:"])
                .arg("--dest")
                .arg(dir)
                .args(&missing),
        )?;
    }
    for pinned in files {
        let path = dir.join(pinned.file);
        let actual = dist::sha256_file(&path)?;
        if actual != pinned.sha256 {
            return Err(format!(
                "{} has SHA-256 {actual}, not the pinned {}; remove it to download it again",
                path.display(),
                pinned.sha256
            ));
        }
    }
    Ok(())
}

/// The bench's reference environment: Core `FLOOR_CORE` and the published
/// wheel of `REFERENCE`, checked against its SHA-256; returns its python.
fn ensure_reference() -> Result<PathBuf> {
    let python = Venv::Reference.ensure()?;
    let pin = [format!("{}=={}", REFERENCE.name, REFERENCE.version)];
    if !pins_satisfied(&python, &pin)? {
        let dir = paths::target_dir().join("bench-reference");
        fetch_pinned(
            &python,
            &dir,
            std::slice::from_ref(&REFERENCE),
            "--only-binary",
        )?;
        process::run(
            pip_install(&python)
                .arg("--no-deps")
                .arg(dir.join(REFERENCE.file)),
        )?;
    }
    Ok(python)
}

/// The newest-Core environment with the plugins installed from their sdists.
fn ensure_newest_with_plugins() -> Result<(PathBuf, PathBuf)> {
    let python = Venv::Newest.ensure()?;
    let sdists = fetch_downstream_sdists(&python)?;
    for plugin in DOWNSTREAM {
        let pin = [format!("{}=={}", plugin.name, plugin.version)];
        if !pins_satisfied(&python, &pin)? {
            // --no-deps: the build-only paths import neither torch nor tensorflow.
            process::run(
                pip_install(&python)
                    .arg("--no-deps")
                    .arg(sdists.join(plugin.file)),
            )?;
        }
    }
    ensure_wheelhouse(&python, &sdists)?;
    Ok((python, sdists))
}

/// Where the fresh-venv test installs from without an index: wheels of
/// Core `NEWEST_CORE` and of the plugins (built once from their pinned sdists).
fn wheelhouse() -> PathBuf {
    paths::target_dir().join("wheelhouse")
}

fn ensure_wheelhouse(python: &Path, sdists: &Path) -> Result<()> {
    let dir = wheelhouse();
    if dir.is_dir() {
        return Ok(());
    }
    // Built aside and renamed, so a wheelhouse that exists is complete.
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    let mut build = pip(python);
    build
        .args(["wheel", "--quiet", "--no-deps", "--wheel-dir"])
        .arg(&partial)
        .arg(format!("rextio=={NEWEST_CORE}"))
        .args(DOWNSTREAM.iter().map(|plugin| sdists.join(plugin.file)));
    process::run(&mut build)?;
    std::fs::rename(&partial, &dir).map_err(|error| format!("{}: {error}", dir.display()))
}

/// Core `FLOOR_CORE`: builds the wheel, installs it, runs ruff, mypy --strict and
/// pytest on `tests/python` and `tests/e2e`; returns the wheel it tested.
pub fn test_floor(native: &NativeArtifacts) -> Result<PathBuf> {
    let root = paths::repo_root();
    let python = Venv::Floor.ensure()?;
    let wheel = dist::build_wheel()?;
    install_wheel(&python, &wheel)?;
    process::run(
        Command::new(Venv::Floor.program("ruff"))
            .current_dir(&root)
            .args(["check", "python", "tests"]),
    )?;
    // Each test tree has its own conftest.py, so each gets its own mypy run.
    mypy(
        Venv::Floor,
        &[
            &[
                "python/rextio_device_cuda",
                "python/hatch_build.py",
                "tests/python",
            ],
            &["tests/e2e"],
        ],
    )?;
    pytest(Venv::Floor, native, &["tests/python", "tests/e2e"], None)?;
    Ok(wheel)
}

/// The newest Core: the same `wheel`, pytest on `tests/python` and
/// `tests/e2e`, and `tests/downstream` with the companion plugins (mypy
/// --strict on the package and the downstream tests against this Core too).
pub fn test_newest(native: &NativeArtifacts, wheel: &Path) -> Result<()> {
    let (python, sdists) = ensure_newest_with_plugins()?;
    install_wheel(&python, wheel)?;
    mypy(
        Venv::Newest,
        &[&["python/rextio_device_cuda"], &["tests/downstream"]],
    )?;
    pytest(
        Venv::Newest,
        native,
        &["tests/python", "tests/e2e", "tests/downstream"],
        Some(&sdists),
    )
}

fn mypy(venv: Venv, runs: &[&[&str]]) -> Result<()> {
    for checked in runs {
        process::run(
            Command::new(venv.program("mypy"))
                .current_dir(paths::repo_root())
                // tests/downstream imports the helpers of tests/python and tests/e2e.
                .env("MYPYPATH", "tests/python:tests/e2e")
                .args(["--strict", "--config-file", "mypy.ini"])
                .args(*checked),
        )?;
    }
    Ok(())
}

fn pytest(
    venv: Venv,
    native: &NativeArtifacts,
    trees: &[&str],
    sdists: Option<&Path>,
) -> Result<()> {
    let mut pytest = Command::new(venv.program("pytest"));
    pytest
        .current_dir(paths::repo_root())
        .env_remove("PYTHONPATH")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("REXTIO_CUDA_PROBE", &native.probe)
        .env("REXTIO_CUDA_SMOKE", &native.smoke)
        .env("REXTIO_SIM_DRIVER", &native.sim_driver)
        .env("REXTIO_BUILD_PYTHON", Venv::Build.program("python"))
        .env("REXTIO_DIST_DIR", paths::target_dir().join("dist"))
        .env("REXTIO_DIST_TOOLS", ensure_dist_tools()?);
    if let Some(sdists) = sdists {
        pytest
            .env("REXTIO_DOWNSTREAM_SDISTS", sdists)
            .env("REXTIO_WHEELHOUSE", wheelhouse());
    }
    // importlib mode: the rootdir is not put on sys.path, so only the
    // installed wheel can satisfy `import rextio_device_cuda`.
    pytest
        .args(["-p", "no:cacheprovider", "--import-mode=importlib", "-q"])
        .args(trees);
    // pytest exits 5 when it collected nothing; any non-zero status fails here.
    process::run(&mut pytest)
}

/// Force-reinstalls the built wheel (without touching its pinned dependency).
pub fn install_wheel(python: &Path, wheel: &Path) -> Result<()> {
    process::run(
        pip_install(python)
            .args(["--force-reinstall", "--no-deps"])
            .arg(wheel),
    )
}

/// C source of a fast fixture probe: prints one fixed valid report and exits 0.
const FAST_PROBE_C: &str = r#"#include <stdio.h>
int main(void) {
    fputs("{\"schema_version\":\"1\",\"probe\":\"rextio-cuda-driver-probe\",\"support_claim\":false,"
          "\"target\":{\"os\":\"linux\",\"arch\":\"x86_64\",\"environment\":\"gnu\"},"
          "\"platform_supported\":true,\"status\":\"probe-complete\",\"reason_code\":null,"
          "\"driver_loaded\":true,\"driver_version\":12080,\"device_count\":1,\"cuda_result\":0,"
          "\"devices\":[{\"ordinal\":0,\"name\":\"Bench GPU\",\"compute_major\":8,"
          "\"compute_minor\":0,\"sm\":\"sm_80\"}]}\n", stdout);
    return 0;
}
"#;

/// Preflight latency versus the probe spawn floor, warm and cold (against
/// the published `REFERENCE`).
pub fn bench() -> Result<()> {
    let root = paths::repo_root();
    let python = ensure_venv()?;
    let reference = ensure_reference()?;
    let wheel = dist::build_wheel()?;
    install_wheel(&python, &wheel)?;
    let work = paths::target_dir().join("python-bench");
    std::fs::create_dir_all(&work).map_err(|error| format!("{}: {error}", work.display()))?;
    let source = work.join("fast_probe.c");
    std::fs::write(&source, FAST_PROBE_C)
        .map_err(|error| format!("{}: {error}", source.display()))?;
    let probe = work.join("fast-probe");
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    process::run(
        Command::new(compiler)
            .args(["-O2", "-o"])
            .arg(&probe)
            .arg(&source),
    )?;
    process::run(
        Command::new(&python)
            .current_dir(&work)
            .env_remove("PYTHONPATH")
            .arg(root.join("tests").join("python").join("preflight_bench.py"))
            .arg(&probe)
            .arg(&reference),
    )
}
