//! `cargo xtask test`: every check and test of the project, in order.
//!
//! Stops at the first failing step and names it. Nothing is optional: a
//! missing cross target or Miri is installed with rustup, NVIDIA's driver
//! packages are fetched, and a step that cannot get what it needs fails.

use std::process::Command;

use crate::paths::repo_root;
use crate::process::run;
use crate::{
    determinism, emulated, generate, headers, native, nolink, python_env, real_driver, Result,
};

/// Cross targets whose platform-gated code is always compile-checked.
const CROSS_TARGETS: [&str; 2] = ["aarch64-unknown-linux-gnu", "x86_64-pc-windows-msvc"];

/// Crates that carry platform-gated code.
const CROSS_CHECKED_PACKAGES: [&str; 2] = ["rextio-cuda-runtime", "rextio-cuda-probe"];

pub fn command(args: &[String]) -> Result<()> {
    crate::no_arguments("test", args);
    let mut report = StepReport::default();
    let outcome = run_steps(&mut report);
    report.print();
    outcome
}

fn run_steps(report: &mut StepReport) -> Result<()> {
    report.step("rustfmt", || {
        run(cargo().args(["fmt", "--all", "--", "--check"]))
    })?;
    report.step("clippy", || {
        run(cargo().args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ]))
    })?;
    report.step("cargo test", || {
        run(cargo().args(["test", "--workspace", "--locked"]))
    })?;
    report.step("generated files current", generate::check)?;
    report.step("ABI against NVIDIA's headers (12.x, 13.x)", headers::check)?;
    report.step("determinism", determinism::verify)?;
    report.step("no link directive in sources", nolink::scan_sources)?;
    report.step("no cuda in runtime cdylib", nolink::check_runtime_cdylib)?;
    let artifacts = report.step("native build", || native::build(false))?;
    report.step("no cuda in probe and smoke", || {
        native::check_no_cuda_link(&artifacts)
    })?;
    report.step(
        "python environments (uv), the wheel, the plugins, NVIDIA's libcuda1 (setup)",
        || python_env::setup(&artifacts),
    )?;
    report.step(
        &format!(
            "python, Core {} (floor): ruff, mypy, pytest",
            python_env::FLOOR_CORE
        ),
        python_env::test_floor,
    )?;
    report.step(
        &format!(
            "python, Core {} (newest): mypy, pytest, tests/downstream with the companion plugins",
            python_env::NEWEST_CORE
        ),
        python_env::test_newest,
    )?;
    report.step(
        "real NVIDIA driver (libcuda1 535, 550, 555)",
        real_driver::test,
    )?;
    let aarch64 = report.step(
        "aarch64 probe and smoke as shipped (cargo-zigbuild)",
        emulated::shipped_aarch64,
    )?;
    report.step(
        "emulated: aarch64 under qemu (libcuda1 535, 550), the Windows loader under Wine",
        || emulated::test(&aarch64),
    )?;
    report.step("add a driver symbol by one edit (symbol-proof)", || {
        python_env::symbol_proof(&[])
    })?;
    for target in CROSS_TARGETS {
        report.step(&format!("cross check {target}"), || {
            ensure_target(target)?;
            let mut command = cargo();
            command.args(["check", "--locked", "--target", target]);
            for package in CROSS_CHECKED_PACKAGES {
                command.args(["--package", package]);
            }
            run(&mut command)
        })?;
    }
    report.step("miri (runtime unsafe code)", || {
        ensure_miri()?;
        // Miri's sysroot is built inside target/, not in a cache outside the repository.
        run(Command::new("cargo")
            .current_dir(repo_root())
            .env(
                "XDG_CACHE_HOME",
                crate::paths::target_dir().join("miri-cache"),
            )
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

fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.current_dir(repo_root());
    command
}

/// `rustup target add` (a no-op when installed); fails, saying why, when
/// rustup cannot (the targets we claim are always compiled).
pub fn ensure_target(target: &str) -> Result<()> {
    run(rustup().args(["target", "add", target]))
        .map_err(|why| format!("cannot add the {target} target with rustup: {why}"))
}

/// Miri and the sources it builds its sysroot from, on the nightly
/// toolchain (a no-op when installed); fails, saying why, when it cannot.
fn ensure_miri() -> Result<()> {
    run(rustup().args([
        "component",
        "add",
        "miri",
        "rust-src",
        "--toolchain",
        "nightly",
    ]))
    .map_err(|why| format!("cannot install Miri with rustup: {why}"))
}

fn rustup() -> Command {
    let mut command = Command::new("rustup");
    command.current_dir(repo_root());
    command
}

/// What ran and what passed.
#[derive(Default)]
struct StepReport {
    passed: Vec<String>,
    failed: Option<String>,
}

impl StepReport {
    fn step<T>(&mut self, name: &str, body: impl FnOnce() -> Result<T>) -> Result<T> {
        println!("\n== {name} ==");
        match body() {
            Ok(value) => {
                self.passed.push(name.to_owned());
                Ok(value)
            }
            Err(message) => {
                self.failed = Some(name.to_owned());
                Err(format!("step `{name}` failed: {message}"))
            }
        }
    }

    fn print(&self) {
        println!("\n== summary ==");
        for name in &self.passed {
            println!("passed: {name}");
        }
        if let Some(name) = &self.failed {
            println!("FAILED: {name}");
        }
        println!(
            "steps: {} passed, {} failed",
            self.passed.len(),
            usize::from(self.failed.is_some())
        );
    }
}
