//! `cargo xtask dist` (owned by the Python provider work): the wheel.
//!
//! The wheel is byte-reproducible: hatchling writes zip entries in a fixed
//! order with the timestamp taken from SOURCE_DATE_EPOCH, fixed here.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::{generate, paths, process, python_env, Result};

/// 1980-01-01T00:00:00Z: the earliest time a zip entry can carry.
const SOURCE_DATE_EPOCH: &str = "315532800";

/// Builds the wheel with hatchling's backend into the directory in argv[1];
/// prints the file name.
const BUILD_WHEEL: &str = "\
import sys
from hatchling.build import build_wheel
print(build_wheel(sys.argv[1]))
";

pub fn command(args: &[String]) -> Result<()> {
    crate::no_arguments("dist", args);
    let wheel = build_wheel()?;
    println!("{}", wheel.display());
    println!("sha256 {}", sha256_file(&wheel)?);
    Ok(())
}

/// generate --check, then the wheel into target/dist/; returns its path.
pub fn build_wheel() -> Result<PathBuf> {
    println!("dist: checking that every generated file is current");
    generate::check()?;
    build_wheel_into(&paths::target_dir().join("dist"))
}

/// Imports the package's code table from `python/` without writing bytecode:
/// its import-time checks (every reason code it names is in the spec) must
/// pass before a wheel exists. The package's `__init__` imports Rextio Core,
/// which the build environment does not hold, so the package is entered
/// without it.
const IMPORT_CHECK: &str = "\
import sys, types
package = types.ModuleType('rextio_device_cuda')
package.__path__ = [sys.argv[1] + '/rextio_device_cuda']
sys.modules['rextio_device_cuda'] = package
import rextio_device_cuda._codes
";

/// Fails, with the import error, unless the package in `python/` imports.
fn check_import(python: &Path) -> Result<()> {
    let mut import = Command::new(python);
    import
        .current_dir(paths::repo_root())
        .env_remove("PYTHONPATH")
        .args(["-I", "-B", "-c", IMPORT_CHECK, "python"]);
    let output = import
        .output()
        .map_err(|error| format!("could not start `{}`: {error}", process::describe(&import)))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last = stderr.lines().last().unwrap_or("");
    Err(format!(
        "python/rextio_device_cuda/_codes.py does not import, so no wheel is built: {last}"
    ))
}

/// Builds the wheel into `dir` (created if needed); returns its path.
pub fn build_wheel_into(dir: &Path) -> Result<PathBuf> {
    let python = python_env::Venv::Build.ensure()?;
    check_import(&python)?;
    std::fs::create_dir_all(dir).map_err(|error| format!("{}: {error}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .map_err(|error| format!("{}: {error}", dir.display()))?;
    let mut build = Command::new(&python);
    build
        .current_dir(paths::repo_root().join("python"))
        .env("SOURCE_DATE_EPOCH", SOURCE_DATE_EPOCH)
        .env_remove("PYTHONPATH")
        .args(["-c", BUILD_WHEEL])
        .arg(&dir);
    let shown = process::describe(&build);
    println!("dist: building the wheel with hatchling (SOURCE_DATE_EPOCH={SOURCE_DATE_EPOCH})");
    println!("+ {shown}");
    let output = build
        .output()
        .map_err(|error| format!("could not start `{shown}`: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "`{shown}` failed with {}:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let name = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let wheel = dir.join(&name);
    if name.is_empty() || !wheel.is_file() {
        return Err(format!("hatchling reported no wheel in {}", dir.display()));
    }
    Ok(wheel)
}

/// Lowercase hex SHA-256 of a file.
pub fn sha256_file(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|error| format!("{}: {error}", path.display()))?;
    Ok(Sha256::digest(&bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect())
}
