//! `cargo xtask test`: every check and test of the project, in order.
//!
//! Stops at the first failing step and names it. Optional checkers that this
//! machine lacks (a cross target, Miri) are reported as absent, never counted
//! as passed.

use std::process::Command;

use crate::paths::repo_root;
use crate::process::run;
use crate::{determinism, generate, headers, native, nolink, python_env, symbol_proof, Result};

/// Cross targets whose platform-gated code is compile-checked when installed.
const CROSS_TARGETS: [&str; 2] = ["aarch64-unknown-linux-gnu", "x86_64-pc-windows-msvc"];

/// Crates that carry platform-gated code.
const CROSS_CHECKED_PACKAGES: [&str; 2] = ["rextio-cuda-runtime", "rextio-cuda-probe"];

pub fn command(args: &[String]) -> Result<()> {
    if let Some(unexpected) = args.first() {
        return Err(format!(
            "`cargo xtask test` takes no arguments (got `{unexpected}`)"
        ));
    }
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
    report.step("python: wheel, ruff, mypy, pytest", || {
        python_env::test(&artifacts)
    })?;
    report.step("add a driver symbol by one edit (symbol-proof)", || {
        symbol_proof::command(&[])
    })?;
    for target in CROSS_TARGETS {
        if target_installed(target) {
            report.step(&format!("cross check {target}"), || {
                let mut command = cargo();
                command.args(["check", "--locked", "--target", target]);
                for package in CROSS_CHECKED_PACKAGES {
                    command.args(["--package", package]);
                }
                run(&mut command)
            })?;
        } else {
            report.absent(
                &format!("cross check {target}"),
                &format!("target not installed (rustup target add {target})"),
            );
        }
    }
    if miri_installed() {
        report.step("miri (runtime unsafe code)", || {
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
    } else {
        report.absent(
            "miri (runtime unsafe code)",
            "Miri is not installed (rustup component add miri rust-src --toolchain nightly)",
        );
    }
    Ok(())
}

fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.current_dir(repo_root());
    command
}

fn target_installed(target: &str) -> bool {
    Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|output| {
            String::from_utf8_lossy(&output.stdout)
                .lines()
                .any(|line| line.trim() == target)
        })
        .unwrap_or(false)
}

fn miri_installed() -> bool {
    Command::new("cargo")
        .args(["+nightly", "miri", "--version"])
        .output()
        .map(|output| output.status.success())
        .unwrap_or(false)
}

/// What ran, what passed, and what this machine could not run.
#[derive(Default)]
struct StepReport {
    passed: Vec<String>,
    failed: Option<String>,
    absent: Vec<(String, String)>,
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

    fn absent(&mut self, name: &str, why: &str) {
        println!("\n== {name} ==\nABSENT: {why}; this check did not run.");
        self.absent.push((name.to_owned(), why.to_owned()));
    }

    fn print(&self) {
        println!("\n== summary ==");
        for name in &self.passed {
            println!("passed: {name}");
        }
        if let Some(name) = &self.failed {
            println!("FAILED: {name}");
        }
        for (name, why) in &self.absent {
            println!("absent (not run): {name}: {why}");
        }
        println!(
            "steps: {} passed, {} failed",
            self.passed.len(),
            usize::from(self.failed.is_some())
        );
    }
}
