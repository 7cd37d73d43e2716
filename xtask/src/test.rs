//! `cargo xtask test`: every check and test of the project, in order, to the
//! first failing step. Nothing is optional: what a step cannot get fails it.
//! A step that uses what an earlier one built asks for it again (cargo and
//! cargo-zigbuild then only check that it is current).

use std::process::Command;
use std::time::Instant;

use crate::native::{self, cargo};
use crate::paths::{repo_root, target_dir};
use crate::process::run;
use crate::toolchain::{self, rustup};
use crate::{determinism, emulated, headers, nolink, packaged, real_driver, setup, Result};

type Step = (&'static str, fn() -> Result<()>);

#[rustfmt::skip]
const STEPS: &[Step] = &[
    ("the pinned toolchain's targets", toolchain::ensure_pinned_targets),
    ("a fresh toolchain lacking aarch64 gets it", toolchain::prove_missing_targets_are_added),
    ("rustfmt", || run(cargo().args(["fmt", "--all", "--", "--check"]))),
    ("clippy", || {
        run(cargo().args(["clippy", "--workspace", "--all-targets", "--locked"])
            .args(["--", "-D", "warnings"]))
    }),
    // Its tests include generated-file freshness, the no-link scan of the
    // sources and the runtime's and loader's cdylibs needing no cuda.
    ("cargo test", || run(cargo().args(["test", "--workspace", "--locked"]))),
    ("packaged crates test themselves outside the workspace, offline",
        packaged::test_generated_crates),
    ("ABI against NVIDIA's headers (12.x, 13.x)", headers::check),
    ("determinism", determinism::verify),
    ("native build", || native::build(false).map(drop)),
    ("no cuda in probe and smoke", || {
        let native = native::build(false)?;
        nolink::check_dynamic_section(&native.probe)?;
        nolink::check_dynamic_section(&native.smoke)
    }),
    ("python environments (uv), the wheel, the plugins, NVIDIA's libcuda1 (setup)",
        setup::setup),
    ("python 3.11, the floor Core: ruff, mypy, pytest", setup::test_floor),
    ("python 3.11, the newest Core: mypy, pytest, tests/downstream with the companion plugins",
        setup::test_newest),
    ("python 3.12, 3.13 and 3.14 (Debian's, in a chroot), the newest Core: pytest",
        setup::test_newer_pythons),
    ("real NVIDIA driver (libcuda1 535, 550, 555)", real_driver::test),
    ("aarch64 probe and smoke as shipped (cargo-zigbuild)", || {
        emulated::shipped_aarch64().map(drop)
    }),
    ("emulated: aarch64 under qemu (libcuda1 535, 550), the Windows loader under Wine", || {
        emulated::test(&emulated::shipped_aarch64()?)
    }),
    ("add a driver symbol by one edit (symbol-proof)", setup::symbol_proof),
    ("cross check aarch64-unknown-linux-gnu", || cross_check("aarch64-unknown-linux-gnu")),
    ("cross check x86_64-pc-windows-msvc", || cross_check("x86_64-pc-windows-msvc")),
    ("miri (runtime unsafe code)", || {
        // Miri and the sources it builds its sysroot from, on the nightly toolchain.
        run(rustup().args(["component", "add", "miri", "rust-src", "--toolchain", "nightly"]))?;
        // Miri's sysroot is built inside target/, not in a cache outside the repository.
        run(Command::new("cargo")
            .current_dir(repo_root())
            .env("XDG_CACHE_HOME", target_dir().join("miri-cache"))
            .args(["+nightly", "miri", "test", "--package", "rextio-cuda-runtime"]))
    }),
];

pub fn command() -> Result<()> {
    let started = Instant::now();
    for (passed, (name, step)) in STEPS.iter().enumerate() {
        println!("\n== {name} ==");
        let step_started = Instant::now();
        step().map_err(|why| format!("step `{name}` failed, after {passed} passed: {why}"))?;
        // Where the minutes go, step by step (CI's budget is read from these).
        println!("== passed in {} ==", minutes(step_started));
    }
    println!(
        "\n== all {} steps passed in {} ==",
        STEPS.len(),
        minutes(started)
    );
    Ok(())
}

/// The time since `started`, as `12 min 05 s`.
fn minutes(started: Instant) -> String {
    let seconds = started.elapsed().as_secs();
    format!("{} min {:02} s", seconds / 60, seconds % 60)
}

/// The crates that carry platform-gated code, compile-checked for `target`
/// (one of the pinned targets, which the first step added).
fn cross_check(target: &str) -> Result<()> {
    let packages = [
        "-p",
        "rextio-cuda-runtime",
        "-p",
        "rextio-cuda-loader",
        "-p",
        "rextio-cuda-probe",
    ];
    run(cargo()
        .args(["check", "--locked", "--target", target])
        .args(packages))
}
