//! The project's Python environments ([`Venv`]), made by uv (itself in
//! `target/uv`) from PyPI under `target/` with the exact pins of
//! `xtask/requirements/`, each on a named CPython ([`CPython`]) of this
//! machine; uv's and pip's caches are in target/ too.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::paths::{at, regular_files, repo_root, target_dir};
use crate::process::{output, run};
use crate::Result;

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

/// A CPython the package claims (python/pyproject.toml's classifiers, from
/// templates/pyproject.toml); the whole Python suite runs on each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CPython {
    V3_11,
    V3_12,
    V3_13,
}

impl CPython {
    pub const ALL: [CPython; 3] = [CPython::V3_11, CPython::V3_12, CPython::V3_13];

    /// `3.11`, `3.12`, `3.13`.
    pub fn version(self) -> &'static str {
        match self {
            CPython::V3_11 => "3.11",
            CPython::V3_12 => "3.12",
            CPython::V3_13 => "3.13",
        }
    }

    /// This machine's interpreter of this version: the first `python3.X`
    /// on PATH that runs and says so, else the newest pyenv installation
    /// of it (`$PYENV_ROOT` or `~/.pyenv`, `versions/3.X.*`; pyenv's shims on
    /// PATH answer only for the versions pyenv has selected). Nothing is
    /// downloaded.
    pub fn interpreter(self) -> Result<PathBuf> {
        let name = format!("python{}", self.version());
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut candidates: Vec<PathBuf> = std::env::split_paths(&path)
            .map(|dir| dir.join(&name))
            .collect();
        let home = std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".pyenv"));
        let pyenv = std::env::var_os("PYENV_ROOT").map(PathBuf::from).or(home);
        if let Some(versions) = pyenv.map(|root| root.join("versions")) {
            let mut installed = pyenv_installations(&versions, self.version());
            installed.reverse();
            candidates.extend(installed.into_iter().map(|dir| dir.join("bin").join(&name)));
        }
        let found = candidates.into_iter().find(|python| self.runs_as(python));
        found.ok_or_else(|| {
            format!(
                "no CPython {} on PATH or under pyenv (`{name}`)",
                self.version()
            )
        })
    }

    /// Whether `python` runs and reports this version.
    fn runs_as(self, python: &Path) -> bool {
        let mut ask = Command::new(python);
        ask.args([
            "-I",
            "-c",
            "import sys; print('%d.%d' % sys.version_info[:2])",
        ]);
        python.is_file() && output(&mut ask).is_ok_and(|said| said.trim() == self.version())
    }
}

/// The pyenv installations `<versions>/<version>.<patch>`, by patch number.
fn pyenv_installations(versions: &Path, version: &str) -> Vec<PathBuf> {
    let prefix = format!("{version}.");
    let entries = std::fs::read_dir(versions).into_iter().flatten().flatten();
    let mut found: Vec<(u32, PathBuf)> = entries
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let patch = name.strip_prefix(&prefix)?.parse().ok()?;
            Some((patch, entry.path()))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, dir)| dir).collect()
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
    /// `target/venv-core-<NEWEST_CORE>` on 3.11 (`...-py3.X` on the others):
    /// the newest Core, the same tools and the companion plugins from their
    /// sdists (`target/downstream-sdists/`).
    Newest(CPython),
    /// `target/venv-reference-0.1.0`: Core `NEWEST_CORE`, the companion
    /// plugins and the published 0.1.0 (bench only).
    Reference,
}

impl Venv {
    /// Its directory, its CPython, its Core and the requirements file of its other pins.
    fn layout(self) -> (PathBuf, CPython, Option<&'static str>, Option<&'static str>) {
        let newest = format!("venv-core-{NEWEST_CORE}");
        let (dir, python, core, file) = match self {
            Venv::Build => ("venv-build".into(), CPython::V3_11, None, Some("build")),
            Venv::Dist => ("venv-dist".into(), CPython::V3_11, None, Some("dist")),
            Venv::Floor => (
                "venv".into(),
                CPython::V3_11,
                Some(FLOOR_CORE),
                Some("tools"),
            ),
            Venv::Newest(CPython::V3_11) => {
                (newest, CPython::V3_11, Some(NEWEST_CORE), Some("tools"))
            }
            Venv::Newest(python) => {
                let dir = format!("{newest}-py{}", python.version());
                (dir, python, Some(NEWEST_CORE), Some("tools"))
            }
            Venv::Reference => {
                let dir = "venv-reference-0.1.0".into();
                (dir, CPython::V3_11, Some(NEWEST_CORE), None)
            }
        };
        (target_dir().join(dir), python, core, file)
    }

    pub fn program(self, name: &str) -> PathBuf {
        self.layout().0.join("bin").join(name)
    }

    /// Creates the environment if needed and installs every pin (uv leaves
    /// what is already satisfied); returns its python.
    pub fn ensure(self) -> Result<PathBuf> {
        let (dir, cpython, core, file) = self.layout();
        let python = dir.join("bin/python");
        if !cpython.runs_as(&python) {
            run(uv()?
                .args(["venv", "--quiet", "--clear", "--python"])
                .arg(cpython.interpreter()?)
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
    let version = output(Command::new(&program).arg("--version"));
    if !version.is_ok_and(|text| text.split(' ').nth(1) == Some(UV)) {
        run(Command::new(CPython::V3_11.interpreter()?)
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
pub fn install_wheel(python: &Path, wheel: &Path) -> Result<()> {
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
pub fn install_pinned(python: &Path, dir: &str, name: &str, kind: &str) -> Result<PathBuf> {
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
pub fn ensure_wheelhouse(sdists: &Path) -> Result<PathBuf> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_claimed_cpythons_are_the_classifiers_of_the_template() {
        let template = repo_root().join("templates/pyproject.toml");
        let text = std::fs::read_to_string(template).unwrap();
        let prefix = "\"Programming Language :: Python :: 3.";
        let claimed: Vec<&str> = text
            .lines()
            .filter_map(|line| line.trim().strip_prefix(prefix))
            .map(|rest| rest.trim_end_matches(['"', ',']))
            .collect();
        let versions: Vec<String> = claimed.iter().map(|minor| format!("3.{minor}")).collect();
        let ours: Vec<&str> = CPython::ALL
            .iter()
            .map(|cpython| cpython.version())
            .collect();
        assert_eq!(versions, ours);
    }

    #[test]
    fn pyenv_installations_are_ordered_by_patch_number() {
        let scratch = crate::paths::scratch("pyenv").unwrap();
        for name in ["3.12.10", "3.12.9", "3.12.x", "3.13.0", "3.1.2"] {
            std::fs::create_dir(scratch.path().join(name)).unwrap();
        }
        let found = pyenv_installations(scratch.path(), "3.12");
        let names: Vec<_> = found.iter().map(|dir| dir.file_name().unwrap()).collect();
        assert_eq!(names, ["3.12.9", "3.12.10"]);
    }

    #[test]
    fn each_claimed_cpython_is_on_this_machine() {
        for cpython in CPython::ALL {
            let python = cpython.interpreter().unwrap();
            assert!(cpython.runs_as(&python), "{}", python.display());
        }
    }
}
