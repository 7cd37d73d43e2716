//! `cargo xtask demo`: builds only what the demo uses (the probe, the smoke,
//! the simulated driver, the pure wheel in its own environment), then runs
//! tests/e2e/demo.py, the whole chain on the simulated driver for a newcomer
//! without a GPU (each step says what it proves and what it does not). No
//! chroot, no other architecture, no NVIDIA download: those are `setup`'s.

use std::process::Command;

use crate::paths::{record_test_paths, repo_root, target_dir};
use crate::python_env::Venv;
use crate::{dist, native, process, Result};

pub fn command() -> Result<()> {
    println!(
        "demo: builds the probe, the smoke and a simulated driver (cargo), and the pure wheel \
         into\n  target/venv-demo (Rextio Core and pytest from PyPI); then runs them in a private \
         mount namespace"
    );
    println!("demo: 1/3 cargo build of the probe, the smoke and the simulated driver");
    let native = native::build(false)?;
    // demo.py finds the binaries where the tests do; other entries stay.
    record_test_paths(serde_json::json!({
        "probe": native.probe,
        "smoke": native.smoke,
        "sim_driver": native.sim_driver,
    }))?;
    println!("demo: 2/3 the pure wheel, installed into target/venv-demo");
    let python = Venv::Demo.ensure()?;
    let wheel = dist::build_pure_wheel(&target_dir().join("demo"))?;
    Venv::Demo.install_wheel(&wheel)?;
    println!("demo: 3/3 tests/e2e/demo.py");
    process::run(
        Command::new(python)
            .current_dir(repo_root())
            .arg("tests/e2e/demo.py"),
    )
}
