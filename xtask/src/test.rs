//! `cargo xtask test`: every check and test of the project, in order.
//!
//! Stops at the first failing step and names it. Nothing is optional: a
//! missing cross target or Miri is installed with rustup, NVIDIA's driver
//! packages are fetched, and a step that cannot get what it needs fails.

use std::process::Command;

use crate::native::{self, cargo};
use crate::paths::{repo_root, target_dir};
use crate::process::run;
use crate::python_env::{self, FLOOR_CORE, NEWEST_CORE};
use crate::{determinism, emulated, generate, headers, nolink, real_driver, Result};

/// Cross targets whose platform-gated code is always compile-checked.
const CROSS_TARGETS: [&str; 2] = ["aarch64-unknown-linux-gnu", "x86_64-pc-windows-msvc"];

/// Crates that carry platform-gated code.
const CROSS_CHECKED_PACKAGES: [&str; 2] = ["rextio-cuda-runtime", "rextio-cuda-probe"];

pub fn command(args: &[String]) -> Result<()> {
    crate::no_arguments("test", args);
    let mut steps = Steps::default();
    let outcome = run_steps(&mut steps);
    println!("\n== summary ==");
    for name in &steps.passed {
        println!("passed: {name}");
    }
    let failed = usize::from(steps.failed.is_some());
    if let Some(name) = &steps.failed {
        println!("FAILED: {name}");
    }
    println!("steps: {} passed, {failed} failed", steps.passed.len());
    outcome
}

fn run_steps(steps: &mut Steps) -> Result<()> {
    let cargo_run = |args: &[&str]| run(cargo().args(args));
    steps.step("rustfmt", || cargo_run(&["fmt", "--all", "--", "--check"]))?;
    steps.step("clippy", || {
        cargo_run(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ])
    })?;
    steps.step("cargo test", || {
        cargo_run(&["test", "--workspace", "--locked"])
    })?;
    steps.step("generated files current", generate::check)?;
    steps.step("ABI against NVIDIA's headers (12.x, 13.x)", headers::check)?;
    steps.step("determinism", determinism::verify)?;
    steps.step("no link directive in sources", nolink::scan_sources)?;
    steps.step("no cuda in runtime cdylib", nolink::check_runtime_cdylib)?;
    let native = steps.step("native build", || native::build(false))?;
    steps.step("no cuda in probe and smoke", || {
        nolink::check_dynamic_section(&native.probe)?;
        nolink::check_dynamic_section(&native.smoke)
    })?;
    steps.step(
        "python environments (uv), the wheel, the plugins, NVIDIA's libcuda1 (setup)",
        || python_env::setup(&native),
    )?;
    steps.step(
        &format!("python, Core {FLOOR_CORE} (floor): ruff, mypy, pytest"),
        python_env::test_floor,
    )?;
    steps.step(
        &format!(
            "python, Core {NEWEST_CORE} (newest): mypy, pytest, tests/downstream with the \
             companion plugins"
        ),
        python_env::test_newest,
    )?;
    steps.step(
        "real NVIDIA driver (libcuda1 535, 550, 555)",
        real_driver::test,
    )?;
    let aarch64 = steps.step(
        "aarch64 probe and smoke as shipped (cargo-zigbuild)",
        emulated::shipped_aarch64,
    )?;
    steps.step(
        "emulated: aarch64 under qemu (libcuda1 535, 550), the Windows loader under Wine",
        || emulated::test(&aarch64),
    )?;
    steps.step("add a driver symbol by one edit (symbol-proof)", || {
        python_env::symbol_proof(&[])
    })?;
    for target in CROSS_TARGETS {
        steps.step(&format!("cross check {target}"), || {
            ensure_target(target)?;
            let packages = CROSS_CHECKED_PACKAGES
                .iter()
                .flat_map(|package| ["--package", package]);
            run(cargo()
                .args(["check", "--locked", "--target", target])
                .args(packages))
        })?;
    }
    steps.step("miri (runtime unsafe code)", || {
        // Miri and the sources it builds its sysroot from, on the nightly toolchain.
        run(&mut rustup(&[
            "component",
            "add",
            "miri",
            "rust-src",
            "--toolchain",
            "nightly",
        ]))
        .map_err(|why| format!("cannot install Miri with rustup: {why}"))?;
        // Miri's sysroot is built inside target/, not in a cache outside the repository.
        run(Command::new("cargo")
            .current_dir(repo_root())
            .env("XDG_CACHE_HOME", target_dir().join("miri-cache"))
            .args([
                "+nightly",
                "miri",
                "test",
                "--package",
                "rextio-cuda-runtime",
            ]))
    })?;
    Ok(())
}

/// `rustup target add` (a no-op when installed); fails, saying why, when
/// rustup cannot (the targets we claim are always compiled).
pub fn ensure_target(target: &str) -> Result<()> {
    run(&mut rustup(&["target", "add", target]))
        .map_err(|why| format!("cannot add the {target} target with rustup: {why}"))
}

fn rustup(args: &[&str]) -> Command {
    let mut command = Command::new("rustup");
    command.current_dir(repo_root()).args(args);
    command
}

/// What ran and what passed.
#[derive(Default)]
struct Steps {
    passed: Vec<String>,
    failed: Option<String>,
}

impl Steps {
    fn step<T>(&mut self, name: &str, body: impl FnOnce() -> Result<T>) -> Result<T> {
        println!("\n== {name} ==");
        let value = body().map_err(|message| {
            self.failed = Some(name.to_owned());
            format!("step `{name}` failed: {message}")
        })?;
        self.passed.push(name.to_owned());
        Ok(value)
    }
}
