//! The project's Python virtual environment (owned by the Python provider work).
//!
//! `target/venv` holds exactly pinned tools from PyPI, `target/venv-build`
//! only the wheel's build backend; each is created once and reused while
//! every pin is satisfied. Tests always import the installed
//! wheel, never the source tree.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::native::NativeArtifacts;
use crate::{dist, paths, process, Result};

/// Exact pins of everything the Python checks run.
const PINS: &[(&str, &str)] = &[
    ("rextio", "0.1.6"),
    ("pytest", "9.2.0"),
    ("ruff", "0.17.6"),
    ("mypy", "2.4.1"),
    ("hatchling", "1.33.0"),
];

/// Building the wheel needs only its build backend.
const BUILD_PINS: &[(&str, &str)] = &[("hatchling", "1.33.0")];

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

/// One virtual environment under target/ and the exact pins it holds.
struct Venv {
    name: &'static str,
    pins: &'static [(&'static str, &'static str)],
}

/// The checks' environment: Core, the test and lint tools, the build backend.
const TEST_VENV: Venv = Venv {
    name: "venv",
    pins: PINS,
};
/// `cargo xtask dist`'s environment: the build backend alone.
const BUILD_VENV: Venv = Venv {
    name: "venv-build",
    pins: BUILD_PINS,
};

impl Venv {
    fn dir(&self) -> PathBuf {
        paths::target_dir().join(self.name)
    }

    fn program(&self, name: &str) -> PathBuf {
        if cfg!(windows) {
            self.dir().join("Scripts").join(format!("{name}.exe"))
        } else {
            self.dir().join("bin").join(name)
        }
    }

    fn pin_arguments(&self) -> Vec<String> {
        self.pins
            .iter()
            .map(|(name, version)| format!("{name}=={version}"))
            .collect()
    }

    /// Creates or reuses the environment with every pin; returns its python.
    fn ensure(&self) -> Result<PathBuf> {
        let python = self.program("python");
        let shown = format!("target/{}", self.name);
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
        let satisfied = Command::new(&python)
            .args(["-c", PINS_SATISFIED])
            .args(self.pin_arguments())
            .status()
            .map_err(|error| format!("could not run {}: {error}", python.display()))?
            .success();
        if !satisfied {
            println!(
                "python: installing {} into {shown} from PyPI",
                self.pin_arguments().join(" ")
            );
            process::run(pip_install(&python).args(self.pin_arguments()))?;
        }
        let supported = Command::new(&python)
            .args(["-c", "import sys; sys.exit(sys.version_info < (3, 11))"])
            .status()
            .is_ok_and(|status| status.success());
        if !supported {
            return Err(format!(
                "{} is older than Python 3.11; remove {shown} and set REXTIO_PYTHON \
                 to a CPython 3.11+ interpreter",
                python.display()
            ));
        }
        Ok(python)
    }
}

/// A program inside the checks' virtual environment (`python`, `pytest`, ...).
pub fn venv_program(name: &str) -> PathBuf {
    TEST_VENV.program(name)
}

/// Creates or reuses `target/venv` with every pinned tool; returns its python.
pub fn ensure_venv() -> Result<PathBuf> {
    TEST_VENV.ensure()
}

/// Creates or reuses `target/venv-build` (the build backend only); returns its python.
pub fn ensure_build_venv() -> Result<PathBuf> {
    BUILD_VENV.ensure()
}

/// `python -m pip install`, quiet, with pip's download cache inside target/
/// so nothing is cached outside the repository.
fn pip_install(python: &Path) -> Command {
    let mut command = Command::new(python);
    command
        .env("PIP_CACHE_DIR", paths::target_dir().join("pip-cache"))
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--quiet",
        ]);
    command
}

/// Builds the wheel, installs it into the venv, runs ruff, mypy --strict and pytest.
pub fn test(native: &NativeArtifacts) -> Result<()> {
    let root = paths::repo_root();
    let python = ensure_venv()?;
    let wheel = dist::build_wheel()?;
    install_wheel(&python, &wheel)?;
    process::run(
        Command::new(venv_program("ruff"))
            .current_dir(&root)
            .args(["check", "python", "tests"]),
    )?;
    // Each test tree has its own conftest.py, so each gets its own mypy run.
    // tests/downstream imports the helpers of tests/python (MYPYPATH) and
    // tests/e2e (checked beside it).
    for checked in [
        &["python/rextio_device_cuda", "tests/python"][..],
        &["tests/e2e", "tests/downstream"][..],
    ] {
        process::run(
            Command::new(venv_program("mypy"))
                .current_dir(&root)
                .env("MYPYPATH", "tests/python")
                .args(["--strict", "--config-file", "mypy.ini"])
                .args(checked),
        )?;
    }
    let mut pytest = Command::new(venv_program("pytest"));
    pytest
        .current_dir(&root)
        .env_remove("PYTHONPATH")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("REXTIO_CUDA_PROBE", &native.probe)
        .env("REXTIO_CUDA_SMOKE", &native.smoke)
        .env("REXTIO_SIM_DRIVER", &native.sim_driver)
        .env("REXTIO_BUILD_PYTHON", BUILD_VENV.program("python"))
        // importlib mode: the rootdir is not put on sys.path, so only the
        // installed wheel can satisfy `import rextio_device_cuda`.
        .args([
            "-p",
            "no:cacheprovider",
            "--import-mode=importlib",
            "-q",
            "tests/python",
            "tests/e2e",
        ]);
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

/// Preflight latency versus the probe spawn floor; import time.
pub fn bench() -> Result<()> {
    let root = paths::repo_root();
    let python = ensure_venv()?;
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
            .arg(&probe),
    )
}
