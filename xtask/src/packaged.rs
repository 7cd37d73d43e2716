//! The packaged crate tarballs test themselves: every `generated/*.tar.gz`
//! is extracted into one empty directory outside the workspace, each crate
//! beside the others as `runtime-source` installs them (the loader's path
//! dependency on the runtime resolves there), where `cargo test --offline`
//! builds each and runs its tests on its own, as a user who downloaded only
//! the tarballs would.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::paths::{at, crate_tarballs, repo_root, scratch};
use crate::process::output;
use crate::Result;

/// `cargo xtask test`'s step: every source tarball in `generated/`.
pub fn test_generated_crates() -> Result<()> {
    let mut tarballs = Vec::new();
    for path in crate_tarballs(&repo_root())? {
        let bytes = std::fs::read(&path).map_err(at(&path))?;
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        tarballs.push((name.into_owned(), bytes));
    }
    test_crate_tarballs(&tarballs)?;
    for (name, _) in &tarballs {
        println!("packaged crate {name}: cargo test --offline passed outside the workspace");
    }
    Ok(())
}

/// Extracts every `(name, bytes)` tarball into one empty directory, each in
/// a directory named as its crate (the top directory without `-VERSION`),
/// as `runtime-source` installs them side by side, so a path dependency on
/// a sibling resolves; then runs `cargo test --offline` in each (`--locked`
/// where the tarball carries its lock file).
fn test_crate_tarballs(tarballs: &[(String, Vec<u8>)]) -> Result<()> {
    let scratch = scratch("packaged-crate")?;
    let mut crate_dirs = Vec::new();
    for (name, bytes) in tarballs {
        let unpacked_at = scratch.path().join("unpacked").join(name);
        let decoder = flate2::read::GzDecoder::new(bytes.as_slice());
        let unpacked = tar::Archive::new(decoder).unpack(&unpacked_at);
        unpacked.map_err(|error| format!("{name}: cannot extract: {error}"))?;
        let top = only_directory(&unpacked_at)?;
        let top_name = top.file_name().unwrap_or_default().to_string_lossy();
        let crate_name = match top_name.rsplit_once('-') {
            Some((crate_name, _version)) => crate_name.to_string(),
            None => {
                return Err(format!(
                    "{name}: top directory `{top_name}` has no -VERSION"
                ))
            }
        };
        let crate_dir = scratch.path().join(&crate_name);
        std::fs::rename(&top, &crate_dir).map_err(at(&crate_dir))?;
        crate_dirs.push((name, crate_dir));
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    for (name, crate_dir) in crate_dirs {
        let mut command = Command::new(&cargo);
        command
            .current_dir(&crate_dir)
            .env("CARGO_TARGET_DIR", scratch.path().join("target"))
            .env_remove("RUSTFLAGS")
            .args(["test", "--offline", "--quiet"]);
        if crate_dir.join("Cargo.lock").is_file() {
            command.arg("--locked");
        }
        output(&mut command).map_err(|error| format!("{name}: {error}"))?;
    }
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
