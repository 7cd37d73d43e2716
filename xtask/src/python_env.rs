//! The project's Python environments, made by uv from PyPI under `target/`.
//!
//! - `target/uv`: a venv holding only uv `UV` (installed once with the
//!   interpreter's own pip); it makes every other environment.
//! - `target/venv-build`: hatchling alone, the wheel's build backend (`dist`).
//! - `target/venv-dist`: `dist`'s other tools: zig (`ziglang`) and
//!   cargo-zigbuild for the shipped binaries, auditwheel, twine and
//!   check-wheel-contents for the artifacts' checks.
//! - `target/venv`: Rextio Core `FLOOR_CORE` (0.1.6, the lowest Core the
//!   package supports) and every tool. `demo` and `bench` use it.
//! - `target/venv-core-<NEWEST_CORE>`: the newest Core 0.1.x, the same tools,
//!   and the companion plugins installed `--no-deps` from their sdists
//!   (kept in `target/downstream-sdists/`; uv checks each pinned SHA-256).
//!
//! uv's cache is `target/uv-cache`, so nothing is cached outside the
//! repository. `cargo xtask setup` prepares everything the Python tests use
//! and writes `target/test-paths.json`, which the tests read to find the
//! built binaries, the build environment, the sdists and NVIDIA's images:
//! after it, plain `pytest` runs any test. Tests import the installed wheel,
//! never the source tree.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use crate::native::NativeArtifacts;
use crate::paths::{repo_root, target_dir};
use crate::{dist, native, process, real_driver, Result};

/// The lowest Rextio Core the package supports (`rextio>=0.1.6,<0.2`).
pub const FLOOR_CORE: &str = "0.1.6";

/// The newest Rextio Core 0.1.x on PyPI, pinned exactly; raise it when a newer
/// 0.1.x is published (and say so in README.md).
pub const NEWEST_CORE: &str = "0.1.8";

/// The uv that makes the environments, pinned exactly.
const UV: &str = "0.13.8";

/// Exact pins of every tool the Python checks and tests use (the tests install
/// a fixture plugin with pip and hatchling; pytest-repeat repeats the stress tests).
const TOOL_PINS: &[&str] = &[
    "pip==26.3",
    "pytest==9.2.0",
    "pytest-repeat==0.9.4",
    "ruff==0.17.6",
    "mypy==2.4.1",
    HATCHLING,
];

/// The wheel's build backend, pinned exactly.
const HATCHLING: &str = "hatchling==1.33.0";

/// `dist`'s tools besides hatchling, pinned exactly.
const DIST_TOOL_PINS: &[&str] = &[
    "ziglang==0.17.0",
    "cargo-zigbuild==0.24.0",
    "auditwheel==6.8.2",
    "twine==7.0.0",
    "check-wheel-contents==0.6.3",
];

/// The companion plugins whose own code runs against our wheel: the sdist
/// PyPI serves (`name==version`, file name, SHA-256).
const DOWNSTREAM: &[(&str, &str, &str)] = &[
    (
        "rextio-torch==0.1.3",
        "rextio_torch-0.1.3.tar.gz",
        "db9e2676da976d6b50818969079b87cf118e969f38120263e9113a7c9a2fe3f7",
    ),
    (
        "rextio-tensorflow==0.1.3",
        "rextio_tensorflow-0.1.3.tar.gz",
        "64cbe95c313e555d2f9a1982d8357096100a1debfbd6f5f36abcee77aaf32c5c",
    ),
];

/// The published build this package succeeds, the bench's cold-path
/// reference only (`name==version`, the wheel PyPI serves, its SHA-256); its
/// code is never copied into this repository.
const REFERENCE: (&str, &str, &str) = (
    "rextio-device-cuda==0.1.0",
    "rextio_device_cuda-0.1.0-py3-none-any.whl",
    "6ba40004e429b8b14c4b90f0ce75a479970b76a86a202d22655b7366d72fb7bf",
);

/// One of the environments.
#[derive(Clone, Copy)]
pub enum Venv {
    /// `target/venv-build`: the build backend alone.
    Build,
    /// `target/venv-dist`: `dist`'s tools.
    Dist,
    /// `target/venv`: Core `FLOOR_CORE` and every tool.
    Floor,
    /// `target/venv-core-<NEWEST_CORE>`: the newest Core and the plugins.
    Newest,
    /// `target/venv-bench-0.1.0`: Core `FLOOR_CORE` and `REFERENCE` (bench only).
    Reference,
}

impl Venv {
    fn dir(self) -> PathBuf {
        target_dir().join(match self {
            Venv::Build => "venv-build".to_owned(),
            Venv::Dist => "venv-dist".to_owned(),
            Venv::Floor => "venv".to_owned(),
            Venv::Newest => format!("venv-core-{NEWEST_CORE}"),
            Venv::Reference => "venv-bench-0.1.0".to_owned(),
        })
    }

    pub fn program(self, name: &str) -> PathBuf {
        bin(&self.dir(), name)
    }

    fn pins(self) -> Vec<String> {
        let core = match self {
            Venv::Build => return vec![HATCHLING.to_owned()],
            Venv::Dist => return DIST_TOOL_PINS.iter().map(|pin| pin.to_string()).collect(),
            Venv::Reference => return vec![format!("rextio=={FLOOR_CORE}")],
            Venv::Floor => FLOOR_CORE,
            Venv::Newest => NEWEST_CORE,
        };
        let mut pins = vec![format!("rextio=={core}")];
        pins.extend(TOOL_PINS.iter().map(|pin| pin.to_string()));
        pins
    }

    /// Creates the environment if needed and installs every pin (uv leaves
    /// what is already satisfied); returns its python.
    pub fn ensure(self) -> Result<PathBuf> {
        let python = self.program("python");
        if !python.exists() {
            // REXTIO_PYTHON names an interpreter; otherwise uv finds a CPython 3.11+.
            let wanted = std::env::var("REXTIO_PYTHON").unwrap_or_else(|_| ">=3.11".into());
            process::run(
                uv()?
                    .args(["venv", "--quiet", "--python", &wanted])
                    .arg(self.dir()),
            )?;
        }
        process::run(uv_pip(&python)?.args(self.pins()))?;
        Ok(python)
    }

    /// mypy --strict over each group of paths (each test tree has its own conftest).
    pub fn mypy(self, runs: &[&[&str]]) -> Result<()> {
        for checked in runs {
            process::run(
                Command::new(self.program("mypy"))
                    .current_dir(repo_root())
                    // Test trees import the helpers of tests/python and tests/e2e.
                    .env("MYPYPATH", "tests/python:tests/e2e")
                    .args(["--strict", "--config-file", "mypy.ini"])
                    .args(*checked),
            )?;
        }
        Ok(())
    }

    /// pytest over `trees` (options in pytest.ini); any non-zero status,
    /// 5 for "nothing collected" too, fails.
    pub fn pytest(self, trees: &[&str]) -> Result<()> {
        process::run(
            Command::new(self.program("pytest"))
                .current_dir(repo_root())
                .env_remove("PYTHONPATH")
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .arg("-q")
                .args(trees),
        )
    }
}

fn bin(venv: &Path, name: &str) -> PathBuf {
    if cfg!(windows) {
        venv.join("Scripts").join(format!("{name}.exe"))
    } else {
        venv.join("bin").join(name)
    }
}

/// uv `UV`, installed into `target/uv` on first use, with its cache in target/.
pub fn uv() -> Result<Command> {
    let venv = target_dir().join("uv");
    let program = bin(&venv, "uv");
    // `uv --version` prints "uv 0.13.8 (x86_64-unknown-linux-gnu)".
    let installed = Command::new(&program)
        .arg("--version")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).split(' ').nth(1) == Some(UV));
    if !installed {
        let base = std::env::var("REXTIO_PYTHON").unwrap_or_else(|_| "python3".into());
        process::run(Command::new(base).args(["-m", "venv"]).arg(&venv))?;
        process::run(
            Command::new(bin(&venv, "python"))
                .env("PIP_CACHE_DIR", target_dir().join("pip-cache"))
                .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
                .args(["-m", "pip", "install", "--quiet", &format!("uv=={UV}")]),
        )?;
    }
    let mut command = Command::new(program);
    command
        .env("UV_CACHE_DIR", target_dir().join("uv-cache"))
        // Only this machine's interpreters, and no uv.toml of the user's.
        .env("UV_PYTHON_DOWNLOADS", "never")
        .env("UV_NO_CONFIG", "1");
    Ok(command)
}

/// `uv pip install --quiet` into the environment of `python`.
fn uv_pip(python: &Path) -> Result<Command> {
    let mut command = uv()?;
    command
        .args(["pip", "install", "--quiet", "--python"])
        .arg(python);
    Ok(command)
}

/// Force-reinstalls a built wheel (without touching its pinned dependency).
pub fn install_wheel(python: &Path, wheel: &Path) -> Result<()> {
    process::run(
        uv_pip(python)?
            .args(["--reinstall", "--no-deps"])
            .arg(wheel),
    )
}

/// Creates or reuses `target/venv-dist`; returns its `bin` directory.
pub fn ensure_dist_tools() -> Result<PathBuf> {
    let python = Venv::Dist.ensure()?;
    Ok(python.parent().map(Path::to_path_buf).unwrap_or_default())
}

/// Where the fresh-venv test installs from without an index: wheels of Core
/// `NEWEST_CORE` and of the plugins, built once (pip, in uv's venv: uv builds
/// no wheel of a requirement) aside and renamed, so one that exists is complete.
fn ensure_wheelhouse(sdists: &Path) -> Result<PathBuf> {
    let dir = target_dir().join("wheelhouse");
    if dir.is_dir() {
        return Ok(dir);
    }
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    uv()?; // makes target/uv, whose pip builds
    process::run(
        Command::new(bin(&target_dir().join("uv"), "python"))
            .env("PIP_CACHE_DIR", target_dir().join("pip-cache"))
            .args(["-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir"])
            .arg(&partial)
            .arg(format!("rextio=={NEWEST_CORE}"))
            .args(DOWNSTREAM.iter().map(|(_, file, _)| sdists.join(file))),
    )?;
    std::fs::rename(&partial, &dir).map_err(|error| format!("{}: {error}", dir.display()))?;
    Ok(dir)
}

/// The floor environment with the freshly built wheel installed; its python.
pub fn ensure_venv_with_wheel() -> Result<PathBuf> {
    let python = Venv::Floor.ensure()?;
    install_wheel(&python, &dist::build_wheel()?)?;
    Ok(python)
}

/// Downloads the plugins' sdists once (pip, in uv's venv: uv downloads no
/// sdist as a file) and installs them `--no-deps` (the build-only paths import
/// neither torch nor tensorflow), uv checking each pinned SHA-256.
fn install_plugins(python: &Path) -> Result<PathBuf> {
    let dir = target_dir().join("downstream-sdists");
    install_pinned_files(python, &dir, DOWNSTREAM, "--no-binary")?;
    Ok(dir)
}

/// Downloads each pinned file once into `dir` (`kind`: pip's `--no-binary`
/// or `--only-binary`) and installs them `--no-deps`, uv checking each SHA-256.
fn install_pinned_files(
    python: &Path,
    dir: &Path,
    pinned: &[(&str, &str, &str)],
    kind: &str,
) -> Result<()> {
    let missing: Vec<&str> = pinned
        .iter()
        .filter(|(_, file, _)| !dir.join(file).is_file())
        .map(|(pin, _, _)| *pin)
        .collect();
    if !missing.is_empty() {
        uv()?; // makes target/uv, whose pip downloads
        process::run(
            Command::new(bin(&target_dir().join("uv"), "python"))
                .env("PIP_CACHE_DIR", target_dir().join("pip-cache"))
                .args(["-m", "pip", "download", "--quiet", "--no-deps"])
                .args([kind, ":all:", "--dest"])
                .arg(dir)
                .args(&missing),
        )?;
    }
    let requirements: String = pinned
        .iter()
        .map(|(pin, file, sha256)| {
            let name = pin.split("==").next().unwrap_or(pin);
            let url = format!("file://{}", dir.join(file).display());
            format!("{name} @ {url} --hash=sha256:{sha256}\n")
        })
        .collect();
    let listed = dir.join("requirements.txt");
    std::fs::write(&listed, requirements)
        .map_err(|error| format!("{}: {error}", listed.display()))?;
    process::run(
        uv_pip(python)?
            .args(["--no-deps", "--require-hashes", "-r"])
            .arg(&listed),
    )
}

/// `cargo xtask setup`: everything the Python tests need, once.
pub fn command(args: &[String]) -> Result<()> {
    crate::no_arguments("setup", args);
    setup(&native::build(false)?)?;
    println!(
        "setup: done; run a test with `{} tests/python/test_cli.py` \
         (or `. target/venv/bin/activate` and plain `pytest ...`)",
        Venv::Floor.program("pytest").display()
    );
    Ok(())
}

/// Every environment, the wheel in both Core environments, the plugins,
/// NVIDIA's driver images, and `target/test-paths.json` naming them.
pub fn setup(native: &NativeArtifacts) -> Result<()> {
    let build = Venv::Build.ensure()?;
    let floor = Venv::Floor.ensure()?;
    let newest = Venv::Newest.ensure()?;
    let sdists = install_plugins(&newest)?;
    let wheelhouse = ensure_wheelhouse(&sdists)?;
    let dist_tools = ensure_dist_tools()?;
    // This host's platform wheel (its probe and smoke in _bin/); `dist` leaves
    // the other artifacts in target/dist/ for the tests.
    let wheel = dist::build_wheel()?;
    install_wheel(&floor, &wheel)?;
    install_wheel(&newest, &wheel)?;
    let real_libcuda = real_driver::ensure_drivers()?;
    let paths = json!({
        "probe": native.probe,
        "smoke": native.smoke,
        "sim_driver": native.sim_driver,
        "build_python": build,
        "dist_dir": target_dir().join("dist"),
        "dist_tools": dist_tools,
        "wheelhouse": wheelhouse,
        "downstream_sdists": sdists,
        "real_libcuda": real_libcuda,
    });
    let file = crate::paths::record_test_paths(paths)?;
    println!("setup: {} names what the tests use", file.display());
    Ok(())
}

/// Core `FLOOR_CORE`: ruff, mypy --strict and pytest on `tests/python` and `tests/e2e`.
pub fn test_floor() -> Result<()> {
    process::run(
        Command::new(Venv::Floor.program("ruff"))
            .current_dir(repo_root())
            .args(["check", "python", "tests"]),
    )?;
    Venv::Floor.mypy(&[
        &[
            "python/rextio_device_cuda",
            "python/hatch_build.py",
            "tests/python",
        ],
        &["tests/e2e"],
    ])?;
    Venv::Floor.pytest(&["tests/python", "tests/e2e"])
}

/// The newest Core: pytest on `tests/python`, `tests/e2e` and
/// `tests/downstream` with the companion plugins (mypy --strict on the
/// package and the downstream tests against this Core too).
pub fn test_newest() -> Result<()> {
    Venv::Newest.mypy(&[&["python/rextio_device_cuda"], &["tests/downstream"]])?;
    Venv::Newest.pytest(&["tests/python", "tests/e2e", "tests/downstream"])
}

/// `cargo xtask symbol-proof`: `setup`, then tests/symbol_proof (README's
/// "How to add a driver symbol", done on a copy of the repository).
pub fn symbol_proof(args: &[String]) -> Result<()> {
    crate::no_arguments("symbol-proof", args);
    setup(&native::build(false)?)?;
    Venv::Floor.mypy(&[&["tests/symbol_proof"]])?;
    Venv::Floor.pytest(&["tests/symbol_proof"])
}

/// Preflight latency versus the probe spawn floor, warm and cold, the cold
/// path also against the published `REFERENCE` (tests/python/preflight_bench.py).
pub fn bench() -> Result<()> {
    let python = ensure_venv_with_wheel()?;
    let reference = Venv::Reference.ensure()?;
    let dir = target_dir().join("bench-reference");
    install_pinned_files(&reference, &dir, &[REFERENCE], "--only-binary")?;
    process::run(
        Command::new(python)
            .current_dir(repo_root())
            .env_remove("PYTHONPATH")
            .arg("tests/python/preflight_bench.py")
            .arg(reference),
    )
}
