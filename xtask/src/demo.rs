//! `cargo xtask demo`: `setup`, then tests/e2e/demo.py, the whole chain on
//! the simulated driver for a newcomer without a GPU (each step says what it
//! proves and what it does not).

use std::process::Command;

use crate::paths::repo_root;
use crate::python_env::Venv;
use crate::{process, setup, Result};

pub fn command() -> Result<()> {
    setup::setup()?;
    process::run(
        Command::new(Venv::Floor.program("python"))
            .current_dir(repo_root())
            .arg("tests/e2e/demo.py"),
    )
}
