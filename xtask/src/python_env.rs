//! The project's Python environments ([`Venv`]), made by uv (itself in
//! `target/uv`) from PyPI under `target/` with the exact pins of
//! `xtask/requirements/`; uv's and pip's caches are in target/ too. The
//! tests import the installed wheel and find the rest through [`setup`].

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::paths::{at, regular_files, repo_root, target_dir};
use crate::process::run;
use crate::{dist, native, real_driver, Result};

/// The lowest Rextio Core the package supports (`rextio>=0.1.6,<0.2`).
pub const FLOOR_CORE: &str = "0.1.6";

/// The newest Rextio Core 0.1.x on PyPI, pinned exactly; raise it when a newer
/// 0.1.x is published (and say so in README.md).
pub const NEWEST_CORE: &str = "0.1.8";

/// The uv that makes the environments, pinned exactly.
const UV: &str = "0.13.8";

/// `xtask/requirements/<name>.txt`: exact pins (the sdists and the reference
/// wheel also by SHA-256), read by uv and pip.
fn requirements(name: &str) -> PathBuf {
    repo_root().join(format!("xtask/requirements/{name}.txt"))
}

/// One of the environments.
#[derive(Clone, Copy)]
pub enum Venv {
    /// `target/venv-build`: hatchling alone, the wheel's build backend.
    Build,
    /// `target/venv-dist`: `dist`'s tools.
    Dist,
    /// `target/venv`: Core `FLOOR_CORE` and every tool (`demo`, `bench`).
    Floor,
    /// `target/venv-core-<NEWEST_CORE>`: the newest Core, the same tools and
    /// the companion plugins from their sdists (`target/downstream-sdists/`).
    Newest,
    /// `target/venv-bench-0.1.0`: Core `FLOOR_CORE` and the published 0.1.0 (bench only).
    Reference,
}

impl Venv {
    /// Its directory, its Core and the requirements file of its other pins.
    fn layout(self) -> (PathBuf, Option<&'static str>, Option<&'static str>) {
        let newest = format!("venv-core-{NEWEST_CORE}");
        let (dir, core, file) = match self {
            Venv::Build => ("venv-build".into(), None, Some("build")),
            Venv::Dist => ("venv-dist".into(), None, Some("dist")),
            Venv::Floor => ("venv".into(), Some(FLOOR_CORE), Some("tools")),
            Venv::Newest => (newest, Some(NEWEST_CORE), Some("tools")),
            Venv::Reference => ("venv-bench-0.1.0".into(), Some(FLOOR_CORE), None),
        };
        (target_dir().join(dir), core, file)
    }

    pub fn program(self, name: &str) -> PathBuf {
        self.layout().0.join("bin").join(name)
    }

    /// Creates the environment if needed and installs every pin (uv leaves
    /// what is already satisfied); returns its python.
    pub fn ensure(self) -> Result<PathBuf> {
        let (dir, core, file) = self.layout();
        let python = dir.join("bin/python");
        if !python.exists() {
            // REXTIO_PYTHON names an interpreter; otherwise uv finds a CPython 3.11+.
            let wanted = std::env::var("REXTIO_PYTHON").unwrap_or_else(|_| ">=3.11".into());
            run(uv()?
                .args(["venv", "--quiet", "--python", &wanted])
                .arg(dir))?;
        }
        let mut install = uv_pip(&python)?;
        install.args(core.map(|core| format!("rextio=={core}")));
        if let Some(file) = file {
            install.arg("-r").arg(requirements(file));
        }
        run(&mut install)?;
        Ok(python)
    }

    /// mypy --strict over each group of paths (each test tree has its own conftest).
    pub fn mypy(self, runs: &[&[&str]]) -> Result<()> {
        for checked in runs {
            run(Command::new(self.program("mypy"))
                .current_dir(repo_root())
                // Test trees import the helpers of tests/python and tests/e2e.
                .env("MYPYPATH", "tests/python:tests/e2e")
                .args(["--strict", "--config-file", "mypy.ini"])
                .args(*checked))?;
        }
        Ok(())
    }

    /// pytest over `trees` (options in pytest.ini); any non-zero status,
    /// 5 for "nothing collected" too, fails.
    pub fn pytest(self, trees: &[&str]) -> Result<()> {
        run(Command::new(self.program("pytest"))
            .current_dir(repo_root())
            .env_remove("PYTHONPATH")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .arg("-q")
            .args(trees))
    }
}

/// uv `UV`, installed into `target/uv` on first use, with its cache in target/.
pub fn uv() -> Result<Command> {
    let program = target_dir().join("uv/bin/uv");
    // `uv --version` prints "uv 0.13.8 (x86_64-unknown-linux-gnu)".
    let version = crate::process::output(Command::new(&program).arg("--version"));
    if !version.is_ok_and(|text| text.split(' ').nth(1) == Some(UV)) {
        let base = std::env::var("REXTIO_PYTHON").unwrap_or_else(|_| "python3".into());
        run(Command::new(base)
            .args(["-m", "venv"])
            .arg(target_dir().join("uv")))?;
        run(pip().args(["install", "--quiet", &format!("uv=={UV}")]))?;
    }
    let mut command = Command::new(program);
    command
        .env("UV_CACHE_DIR", target_dir().join("uv-cache"))
        // Only this machine's interpreters, and no uv.toml of the user's.
        .env("UV_PYTHON_DOWNLOADS", "never")
        .env("UV_NO_CONFIG", "1");
    Ok(command)
}

/// The pip of uv's environment, its cache in target/: it fetches sdists and
/// wheels as files and builds wheels, which uv does not.
fn pip() -> Command {
    let mut command = Command::new(target_dir().join("uv/bin/python"));
    command
        .env("PIP_CACHE_DIR", target_dir().join("pip-cache"))
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .args(["-m", "pip"]);
    command
}

/// `uv pip install --quiet` into the environment of `python`.
fn uv_pip(python: &Path) -> Result<Command> {
    let mut command = uv()?;
    command.args(["pip", "install", "--quiet", "--python"]);
    command.arg(python);
    Ok(command)
}

/// Force-reinstalls a built wheel (without touching its pinned dependency).
fn install_wheel(python: &Path, wheel: &Path) -> Result<()> {
    run(uv_pip(python)?
        .args(["--reinstall", "--no-deps"])
        .arg(wheel))
}

/// Downloads the files that `xtask/requirements/<name>.txt` pins (`kind`:
/// `--no-binary` for sdists, `--only-binary` for wheels) into `target/<dir>`
/// once per version of that file, pip checking each SHA-256, and installs
/// them `--no-deps` from there into the environment of `python`, uv checking
/// each SHA-256 again (an sdist's build requirements come from the index).
/// Returns the directory.
fn install_pinned(python: &Path, dir: &str, name: &str, kind: &str) -> Result<PathBuf> {
    let (pinned, dir) = (requirements(name), target_dir().join(dir));
    let wanted = std::fs::read(&pinned).map_err(at(&pinned))?;
    let listed = dir.join("requirements.txt");
    if std::fs::read(&listed).ok() != Some(wanted.clone()) {
        filled_aside(&dir, |partial| {
            run(pip()
                .args(["download", "--quiet", "--no-deps", "--require-hashes"])
                .args([kind, ":all:", "-d"])
                .arg(partial)
                .arg("-r")
                .arg(&pinned))?;
            let list = partial.join("requirements.txt");
            std::fs::write(&list, &wanted).map_err(at(&list))
        })?;
    }
    run(uv_pip(python)?
        .args(["--no-deps", "--require-hashes"])
        .args([kind, ":all:", "--find-links"])
        .arg(&dir)
        .arg("-r")
        .arg(&listed))?;
    Ok(dir)
}

/// Where the fresh-venv test installs from without an index: wheels of Core
/// `NEWEST_CORE` and of the plugins' sdists, built once by pip.
fn ensure_wheelhouse(sdists: &Path) -> Result<PathBuf> {
    let dir = target_dir().join("wheelhouse");
    if !dir.is_dir() {
        let mut archives = regular_files(sdists, |_| false)?;
        archives.retain(|path| path.to_string_lossy().ends_with(".tar.gz"));
        filled_aside(&dir, |partial| {
            run(pip()
                .args(["wheel", "--quiet", "--no-deps", "--wheel-dir"])
                .arg(partial)
                .arg(format!("rextio=={NEWEST_CORE}"))
                .args(archives))
        })?;
    }
    Ok(dir)
}

/// Fills `dir` by `fill` into `<dir>.partial` and renames it, so that a
/// `dir` that exists is complete.
fn filled_aside(dir: &Path, fill: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    fill(&partial)?;
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&partial, dir).map_err(at(dir))
}

/// `cargo xtask setup`: the native binaries, every environment, the wheel in
/// both Core environments, the plugins, NVIDIA's driver images, and
/// `target/test-paths.json` naming them (read by the tests).
pub fn setup() -> Result<()> {
    let native = native::build(false)?;
    let build = Venv::Build.ensure()?;
    let floor = Venv::Floor.ensure()?;
    let newest = Venv::Newest.ensure()?;
    // The build-only paths import neither torch nor tensorflow: `--no-deps`.
    let sdists = install_pinned(&newest, "downstream-sdists", "downstream", "--no-binary")?;
    let wheelhouse = ensure_wheelhouse(&sdists)?;
    // `target/venv-dist/bin/`: dist's tools beside its python.
    let dist_tools = Venv::Dist.ensure()?.with_file_name("");
    // This host's platform wheel (its probe and smoke in _bin/); `dist` leaves
    // the other artifacts in target/dist/ for the tests.
    let wheel = dist::build_wheel()?;
    install_wheel(&floor, &wheel)?;
    install_wheel(&newest, &wheel)?;
    let paths = serde_json::json!({
        "probe": native.probe,
        "smoke": native.smoke,
        "sim_driver": native.sim_driver,
        "build_python": build,
        "dist_dir": target_dir().join("dist"),
        "dist_tools": dist_tools,
        "wheelhouse": wheelhouse,
        "downstream_sdists": sdists,
        "real_libcuda": real_driver::ensure_drivers()?,
    });
    let file = crate::paths::record_test_paths(paths)?;
    let file = file.display();
    println!("setup: {file} names what the tests use; plain `pytest` now runs any test");
    Ok(())
}

/// Core `FLOOR_CORE`: ruff, mypy --strict and pytest on `tests/python` and `tests/e2e`.
pub fn test_floor() -> Result<()> {
    run(Command::new(Venv::Floor.program("ruff"))
        .current_dir(repo_root())
        .args(["check", "python", "tests"]))?;
    // `python/`: the package and its build hook.
    Venv::Floor.mypy(&[&["python", "tests/python"], &["tests/e2e"]])?;
    Venv::Floor.pytest(&["tests/python", "tests/e2e"])
}

/// The newest Core: mypy --strict on the package and tests/downstream, pytest
/// on tests/python, tests/e2e and tests/downstream (the companion plugins).
pub fn test_newest() -> Result<()> {
    Venv::Newest.mypy(&[&["python/rextio_device_cuda"], &["tests/downstream"]])?;
    Venv::Newest.pytest(&["tests/python", "tests/e2e", "tests/downstream"])
}

/// `cargo xtask symbol-proof`: `setup`, then tests/symbol_proof (README's
/// "How to add a driver symbol", done on a copy of the repository).
pub fn symbol_proof() -> Result<()> {
    setup()?;
    Venv::Floor.mypy(&[&["tests/symbol_proof"]])?;
    Venv::Floor.pytest(&["tests/symbol_proof"])
}

/// Preflight latency versus the probe spawn floor, warm and cold, the cold
/// path also against the published 0.1.0 (tests/python/preflight_bench.py).
pub fn bench() -> Result<()> {
    let python = Venv::Floor.ensure()?;
    install_wheel(&python, &dist::build_wheel()?)?;
    let reference = Venv::Reference.ensure()?;
    install_pinned(&reference, "bench-reference", "reference", "--only-binary")?;
    run(Command::new(python)
        .current_dir(repo_root())
        .env_remove("PYTHONPATH")
        .arg("tests/python/preflight_bench.py")
        .arg(reference))
}
