//! `cargo xtask setup`, and the Python suites and commands that run on what
//! it set up. This module sits above the leaves (native builds, Python
//! environments, `dist`, the fetched drivers); only the commands (`test`,
//! `demo`, `bench`, main's dispatch) sit above it.

use std::process::Command;

use crate::paths::{record_test_paths, repo_root, target_dir};
use crate::process::run;
use crate::python_env::{self, CPython, Venv};
use crate::{dist, native, real_driver, Result};

/// `cargo xtask setup`: the native binaries, every environment, the wheel in
/// each Core environment, the plugins, NVIDIA's driver images, and
/// `target/test-paths.json` naming them (read by the tests).
pub fn setup() -> Result<()> {
    let native = native::build(false)?;
    let build = Venv::Build.ensure()?;
    Venv::Floor.ensure()?;
    let newest = Venv::Newest(CPython::V3_11).ensure()?;
    // The build-only paths import neither torch nor tensorflow: `--no-deps`.
    let sdists =
        python_env::install_pinned(&newest, "downstream-sdists", "downstream", "--no-binary")?;
    let wheelhouse = python_env::ensure_wheelhouse(&sdists)?;
    // `target/venv-dist/bin/`: dist's tools beside its python.
    let dist_tools = Venv::Dist.ensure()?.with_file_name("");
    // This host's platform wheel (its probe and smoke in _bin/); `dist` leaves
    // the other artifacts in target/dist/ for the tests.
    let wheel = dist::build_wheel()?;
    Venv::Floor.install_wheel(&wheel)?;
    Venv::Newest(CPython::V3_11).install_wheel(&wheel)?;
    for cpython in newer_pythons() {
        let newer = Venv::Newest(cpython);
        newer.ensure()?;
        newer.install_wheel(&wheel)?;
    }
    let paths = serde_json::json!({
        "probe": native.probe,
        "smoke": native.smoke,
        "sim_driver": native.sim_driver,
        "build_python": build,
        "dist_dir": target_dir().join("dist"),
        "dist_tools": dist_tools,
        "recipe_tools": native::recipe_tools()?,
        "wheelhouse": wheelhouse,
        "downstream_sdists": sdists,
        "real_libcuda": real_driver::ensure_drivers()?,
    });
    let file = record_test_paths(paths)?;
    let file = file.display();
    println!("setup: {file} names what the tests use; plain `pytest` now runs any test");
    Ok(())
}

/// Deselects the tests that wait out the probe's and the smoke's own 60 s
/// deadline (a property of the Rust binaries, not of the Python running
/// them): they run once, in the floor environment.
const NOT_OWN_DEADLINE: &str = "not own_deadline";
/// What the CPythons between the oldest and the newest leave out too: the
/// `cargo_build` tests' release builds give the same bytes on every CPython.
const NOT_OWN_DEADLINE_NOR_CARGO_BUILD: &str = "not own_deadline and not cargo_build";

/// The claimed CPythons past 3.11 (3.11 runs the floor and newest suites).
fn newer_pythons() -> impl Iterator<Item = CPython> {
    CPython::ALL
        .into_iter()
        .filter(|cpython| *cpython != CPython::V3_11)
}

/// Core `FLOOR_CORE` on 3.11: ruff, mypy --strict and pytest on `tests/python` and
/// `tests/e2e` (the one run of the `own_deadline` tests).
pub fn test_floor() -> Result<()> {
    run(Command::new(Venv::Floor.program("ruff"))
        .current_dir(repo_root())
        .args(["check", "python", "tests"]))?;
    // `python/`: the package and its build hook.
    Venv::Floor.mypy(&[&["python", "tests/python"], &["tests/e2e"]])?;
    Venv::Floor.pytest(&["tests/python", "tests/e2e"])
}

/// The newest Core on 3.11: mypy --strict on the package and tests/downstream,
/// pytest on tests/python, tests/e2e and tests/downstream (the companion plugins).
pub fn test_newest() -> Result<()> {
    let newest = Venv::Newest(CPython::V3_11);
    newest.mypy(&[&["python/rextio_device_cuda"], &["tests/downstream"]])?;
    newest.pytest(&[
        "-m",
        NOT_OWN_DEADLINE_NOR_CARGO_BUILD,
        "tests/python",
        "tests/e2e",
        "tests/downstream",
    ])
}

/// The newest Core on each claimed CPython past 3.11: the whole Python suite
/// (tests/python and tests/e2e; tests/downstream, which needs the companion
/// plugins, runs on 3.11 alone to keep `cargo xtask test` short).
pub fn test_newer_pythons() -> Result<()> {
    for cpython in newer_pythons() {
        println!(
            "python {}: pytest tests/python tests/e2e",
            cpython.version()
        );
        // The newest CPython runs the cargo builds again; those between do not.
        let selection = if CPython::ALL.last() == Some(&cpython) {
            NOT_OWN_DEADLINE
        } else {
            NOT_OWN_DEADLINE_NOR_CARGO_BUILD
        };
        Venv::Newest(cpython).pytest(&["-m", selection, "tests/python", "tests/e2e"])?;
    }
    Ok(())
}

/// `cargo xtask symbol-proof`: `setup`, then tests/symbol_proof (docs/maintainers.md's
/// "How to add a driver symbol", done on a copy of the repository).
pub fn symbol_proof() -> Result<()> {
    setup()?;
    Venv::Floor.mypy(&[&["tests/symbol_proof"]])?;
    Venv::Floor.pytest(&["tests/symbol_proof"])
}

/// `cargo xtask real-driver`: `setup` (it fetches the images), then that step alone.
pub fn real_driver() -> Result<()> {
    setup()?;
    real_driver::test()
}
