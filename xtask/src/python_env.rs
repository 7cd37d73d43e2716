//! The project's Python environments ([`Venv`]), made by uv (itself in
//! `target/uv`) from PyPI under `target/` with the exact pins of
//! `xtask/requirements/`, each on a named CPython ([`CPython`]) of this
//! machine that uv finds; uv's and pip's caches are in target/ too.

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
/// templates/pyproject.toml); the whole Python suite runs on each. This
/// machine carries 3.11 to 3.13; 3.14 is Debian's, in a chroot
/// ([`crate::debian_python`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CPython {
    V3_11,
    V3_12,
    V3_13,
    V3_14,
}

impl CPython {
    pub const ALL: [CPython; 4] = [
        CPython::V3_11,
        CPython::V3_12,
        CPython::V3_13,
        CPython::V3_14,
    ];

    /// `3.11`, `3.12`, `3.13`, `3.14`.
    pub fn version(self) -> &'static str {
        match self {
            CPython::V3_11 => "3.11",
            CPython::V3_12 => "3.12",
            CPython::V3_13 => "3.13",
            CPython::V3_14 => "3.14",
        }
    }

    /// Whether it lives in Debian's chroot rather than on this machine.
    fn in_debian_chroot(self) -> bool {
        self == CPython::V3_14
    }

    /// `command` as it runs where this CPython lives: unchanged on this
    /// machine, else in Debian's chroot.
    fn where_it_lives(self, command: Command) -> Result<Command> {
        match self.in_debian_chroot() {
            true => crate::debian_python::inside(&command),
            false => Ok(command),
        }
    }

    /// This machine's interpreter of this version, as the pinned uv finds it
    /// (`uv python find`: on PATH and among uv's own installations; nothing is
    /// downloaded). pyenv's shims on PATH answer only for the versions pyenv
    /// has selected, so uv asks them with every version pyenv has installed
    /// selected (`pyenv versions --bare`), when there is a pyenv.
    /// Debian's 3.14 is the chroot's `python3.14`.
    pub fn interpreter(self) -> Result<PathBuf> {
        if self.in_debian_chroot() {
            crate::debian_python::root()?;
            return Ok(PathBuf::from(crate::debian_python::PYTHON));
        }
        let mut find = uv()?;
        find.current_dir(repo_root())
            .args(["python", "find", "--system", "--no-python-downloads"])
            .arg(self.version());
        let pyenv = output(Command::new("pyenv").args(["versions", "--bare"]));
        if let Ok(installed) = pyenv {
            let installed: Vec<&str> = installed.split_whitespace().collect();
            find.env("PYENV_VERSION", installed.join(":"));
        }
        let found = output(&mut find)
            .map_err(|why| format!("uv finds no CPython {}: {why}", self.version()))?;
        let python = PathBuf::from(found.trim());
        match python.is_file() && self.runs_as(&python) {
            true => Ok(python),
            false => Err(format!(
                "uv named {} for CPython {}, which does not run as it",
                python.display(),
                self.version()
            )),
        }
    }

    /// Whether `python` (a path where this CPython lives) runs and reports
    /// this version.
    fn runs_as(self, python: &Path) -> bool {
        let mut ask = Command::new(python);
        ask.args([
            "-I",
            "-c",
            "import sys; print('%d.%d' % sys.version_info[:2])",
        ]);
        let Ok(mut ask) = self.where_it_lives(ask) else {
            return false;
        };
        output(&mut ask).is_ok_and(|said| said.trim() == self.version())
    }
}

/// One of the environments.
#[derive(Clone, Copy)]
pub enum Venv {
    /// `target/venv-build`: hatchling alone, the wheel's build backend.
    Build,
    /// `target/venv-dist`: `dist`'s tools.
    Dist,
    /// `target/venv`: Core `FLOOR_CORE` on 3.11 and every tool (`bench` too).
    Floor,
    /// `target/venv-demo`: the same pins as `Floor`, with the pure wheel
    /// `demo` builds (apart, so that the demo never replaces what `setup`
    /// installed for the tests).
    Demo,
    /// `target/venv-core-<NEWEST_CORE>` on 3.11, `...-py3.12`, `...-py3.13`
    /// and `...-py3.14` on the others: the newest Core and the same tools (on 3.11 `setup`
    /// adds the companion plugins from their sdists, `target/downstream-sdists/`).
    Newest(CPython),
    /// `target/venv-reference-0.1.0`: Core `NEWEST_CORE` on 3.11 (the bench
    /// adds the companion plugins and the published 0.1.0).
    Reference,
}

/// Where an environment lives and what it is made of.
struct Layout {
    dir: PathBuf,
    cpython: CPython,
    /// The Rextio Core it pins, if any.
    core: Option<&'static str>,
    /// The `xtask/requirements/` file of its other pins, if any.
    requirements: Option<&'static str>,
}

impl Venv {
    fn layout(self) -> Layout {
        let newest = format!("venv-core-{NEWEST_CORE}");
        let layout = |dir: &str, cpython, core, requirements| Layout {
            dir: target_dir().join(dir),
            cpython,
            core,
            requirements,
        };
        match self {
            Venv::Build => layout("venv-build", CPython::V3_11, None, Some("build")),
            Venv::Dist => layout("venv-dist", CPython::V3_11, None, Some("dist")),
            Venv::Floor => layout("venv", CPython::V3_11, Some(FLOOR_CORE), Some("tools")),
            Venv::Demo => layout("venv-demo", CPython::V3_11, Some(FLOOR_CORE), Some("tools")),
            Venv::Newest(CPython::V3_11) => {
                layout(&newest, CPython::V3_11, Some(NEWEST_CORE), Some("tools"))
            }
            Venv::Newest(cpython) => {
                let dir = format!("{newest}-py{}", cpython.version());
                layout(&dir, cpython, Some(NEWEST_CORE), Some("tools"))
            }
            Venv::Reference => layout(
                "venv-reference-0.1.0",
                CPython::V3_11,
                Some(NEWEST_CORE),
                None,
            ),
        }
    }

    pub fn program(self, name: &str) -> PathBuf {
        self.layout().dir.join("bin").join(name)
    }

    /// Creates the environment (again, when its python is not the CPython
    /// it should be) and installs every pin (uv leaves what is already
    /// satisfied); returns its python.
    pub fn ensure(self) -> Result<PathBuf> {
        let layout = self.layout();
        let python = layout.dir.join("bin/python");
        if !layout.cpython.runs_as(&python) {
            let mut venv = uv()?;
            venv.args(["venv", "--quiet", "--clear", "--python"])
                .arg(layout.cpython.interpreter()?)
                .arg(&layout.dir);
            run(&mut layout.cpython.where_it_lives(venv)?)?;
        }
        let mut install = uv_pip(&python)?;
        install.args(layout.core.map(|core| format!("rextio=={core}")));
        if let Some(file) = layout.requirements {
            install.arg("-r").arg(requirements(file));
        }
        run(&mut layout.cpython.where_it_lives(install)?)?;
        Ok(python)
    }

    /// Force-reinstalls a built wheel (without touching its pinned dependency).
    pub fn install_wheel(self, wheel: &Path) -> Result<()> {
        let layout = self.layout();
        let mut install = uv_pip(&layout.dir.join("bin/python"))?;
        install.args(["--reinstall", "--no-deps"]).arg(wheel);
        run(&mut layout.cpython.where_it_lives(install)?)
    }

    /// mypy --strict over each group of paths (each test tree has its own conftest).
    pub fn mypy(self, runs: &[&[&str]]) -> Result<()> {
        for checked in runs {
            let mut mypy = Command::new(self.program("mypy"));
            mypy.current_dir(repo_root())
                // Test trees import the helpers of tests/python and tests/e2e.
                .env("MYPYPATH", "tests/python:tests/e2e")
                .args(["--strict", "--config-file", "mypy.ini"])
                .args(*checked);
            run(&mut self.layout().cpython.where_it_lives(mypy)?)?;
        }
        Ok(())
    }

    /// pytest with `args`, test trees and options beside pytest.ini's; any
    /// non-zero status, 5 for "nothing collected" too, fails. One worker
    /// per core (pytest-xdist), each taking whole test files, so a file's
    /// session fixtures are built once and its tests run in order.
    pub fn pytest(self, args: &[&str]) -> Result<()> {
        let mut pytest = Command::new(self.program("pytest"));
        pytest
            .current_dir(repo_root())
            .env_remove("PYTHONPATH")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .args(["-q", "--numprocesses=auto", "--dist=loadfile"])
            .args(args);
        run(&mut self.layout().cpython.where_it_lives(pytest)?)
    }
}

/// uv `UV`, installed into `target/uv` on first use, with its cache in target/.
pub fn uv() -> Result<Command> {
    let program = target_dir().join("uv/bin/uv");
    // `uv --version` prints "uv 0.13.8 (x86_64-unknown-linux-gnu)".
    let version = output(Command::new(&program).arg("--version"));
    if !version.is_ok_and(|text| text.split(' ').nth(1) == Some(UV)) {
        // Any python3 hosts uv, which finds the claimed CPythons itself.
        run(Command::new("python3")
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
    fn each_claimed_cpython_this_machine_carries_is_found_by_uv() {
        // 3.14's chroot is made and used by `setup` and `test`.
        let carried = CPython::ALL
            .into_iter()
            .filter(|cpython| !cpython.in_debian_chroot());
        for cpython in carried {
            let python = cpython.interpreter().unwrap();
            assert!(cpython.runs_as(&python), "{}", python.display());
        }
    }
}
