//! The packaged crate tarballs test themselves: each `generated/*.tar.gz`
//! is extracted into an empty directory outside the workspace, where
//! `cargo test --offline` builds it and runs its unit and doc tests on its
//! own, as a user who downloaded only the tarball would.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::paths::{at, repo_root, scratch};
use crate::process::output;
use crate::Result;

/// `cargo xtask test`'s step: every crate tarball in `generated/`.
pub fn test_generated_crates() -> Result<()> {
    let generated = repo_root().join("generated");
    let listing = std::fs::read_dir(&generated).map_err(at(&generated))?;
    let mut tarballs: Vec<PathBuf> = Vec::new();
    for entry in listing {
        let path = entry.map_err(at(&generated))?.path();
        if path.to_string_lossy().ends_with(".tar.gz") {
            tarballs.push(path);
        }
    }
    tarballs.sort();
    if tarballs.is_empty() {
        return Err(format!("{}: no crate tarball to test", generated.display()));
    }
    for tarball in tarballs {
        let bytes = std::fs::read(&tarball).map_err(at(&tarball))?;
        let name = tarball.file_name().unwrap_or_default().to_string_lossy();
        test_crate_tarball(&name, &bytes)?;
        println!("packaged crate {name}: cargo test --offline passed outside the workspace");
    }
    Ok(())
}

/// Extracts the crate tarball `bytes` (named `name` in messages) into an
/// empty directory and runs `cargo test --offline` in its one top directory.
pub fn test_crate_tarball(name: &str, bytes: &[u8]) -> Result<()> {
    let scratch = scratch("packaged-crate")?;
    let decoder = flate2::read::GzDecoder::new(bytes);
    let unpacked = tar::Archive::new(decoder).unpack(scratch.path());
    unpacked.map_err(|error| format!("{name}: cannot extract: {error}"))?;
    let crate_dir = only_directory(scratch.path())?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(&crate_dir)
        .env("CARGO_TARGET_DIR", scratch.path().join("target"))
        .env_remove("RUSTFLAGS")
        .args(["test", "--offline", "--quiet"]);
    output(&mut command).map_err(|error| format!("{name}: {error}"))?;
    Ok(())
}

/// The one entry of `dir`, a directory: the crate a tarball holds.
fn only_directory(dir: &Path) -> Result<PathBuf> {
    let entries = std::fs::read_dir(dir).map_err(at(dir))?;
    let entries: Vec<PathBuf> = entries
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<std::io::Result<_>>()
        .map_err(at(dir))?;
    match entries.as_slice() {
        [only] if only.is_dir() => Ok(only.clone()),
        _ => Err(format!(
            "{}: a crate tarball holds one top directory",
            dir.display()
        )),
    }
}
