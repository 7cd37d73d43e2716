//! A crate's source tarball, as `cargo package` ships it: its manifest,
//! README, the repository's license and every file under `src/` (its unit
//! tests among them, so the extracted crate tests itself), with the files
//! the generator writes into the crate taken from the outputs, never from
//! the tree. One function for every packaged crate.

use super::inputs::{Inputs, LICENSE_PATH};
use super::tarball;
use crate::Result;

/// A crate packaged as `<name>-<version>.tar.gz`, entries below `<name>-<version>/`.
pub struct PackagedCrate {
    pub name: String,
    pub version: String,
    pub bytes: Vec<u8>,
}

impl PackagedCrate {
    pub fn file_name(&self) -> String {
        format!("{}-{}.tar.gz", self.name, self.version)
    }

    /// Where the tarball is written: `generated/<file name>`.
    pub fn path(&self) -> String {
        format!("generated/{}", self.file_name())
    }
}

/// Packages the crate in `crate_dir` (a repository-relative directory whose
/// files [`Inputs::read`] read) as `name` `version`. `generated` holds
/// `(repository-relative path, bytes)` of the files the generator writes
/// inside the crate.
pub fn package_crate(
    inputs: &Inputs,
    crate_dir: &str,
    name: &str,
    version: &str,
    generated: &[(&str, &[u8])],
) -> Result<PackagedCrate> {
    let manifest_path = format!("{crate_dir}/Cargo.toml");
    check_manifest_names(&manifest_path, inputs.get(&manifest_path)?, name, version)?;
    let prefix = format!("{crate_dir}/");
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for (path, bytes) in &inputs.files {
        if let Some(inside) = path.strip_prefix(&prefix) {
            files.push((inside.to_string(), bytes.clone()));
        }
    }
    for (path, bytes) in generated {
        let Some(inside) = path.strip_prefix(&prefix) else {
            return Err(format!("{path}: not inside the crate `{crate_dir}`"));
        };
        files.push((inside.to_string(), bytes.to_vec()));
    }
    files.push(("LICENSE".to_string(), inputs.get(LICENSE_PATH)?.to_vec()));
    let top = format!("{name}-{version}");
    Ok(PackagedCrate {
        name: name.to_string(),
        version: version.to_string(),
        bytes: tarball::build(&top, &files)?,
    })
}

/// The crate's own manifest names the crate and version the tarball is
/// named after: its `[package]` table has the lines `name = "<name>"` and
/// `version = "<version>"`.
fn check_manifest_names(path: &str, manifest: &[u8], name: &str, version: &str) -> Result<()> {
    let text = std::str::from_utf8(manifest).map_err(|_| format!("{path}: not UTF-8"))?;
    let package = package_table(text);
    for (key, value) in [("name", name), ("version", version)] {
        let line = format!("{key} = \"{value}\"");
        if !package.iter().any(|candidate| candidate.trim() == line) {
            return Err(format!(
                "{path}: [package] lacks `{line}`, which the packaged tarball is named after"
            ));
        }
    }
    Ok(())
}

/// The lines of the `[package]` table of a Cargo manifest.
fn package_table(manifest: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut inside = false;
    for line in manifest.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            inside = trimmed == "[package]";
        } else if inside {
            lines.push(line);
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_naming_another_version_is_refused() {
        let manifest = b"[package]\nname = \"demo\"\nversion = \"0.2.0\"\n\n[dependencies]\n";
        assert!(check_manifest_names("demo/Cargo.toml", manifest, "demo", "0.2.0").is_ok());
        let error = check_manifest_names("demo/Cargo.toml", manifest, "demo", "0.3.0").unwrap_err();
        assert_eq!(
            error,
            "demo/Cargo.toml: [package] lacks `version = \"0.3.0\"`, which the packaged \
             tarball is named after"
        );
        // A key of another table does not count.
        let manifest = b"[package]\nname = \"demo\"\n[workspace.package]\nversion = \"0.2.0\"\n";
        assert!(check_manifest_names("demo/Cargo.toml", manifest, "demo", "0.2.0").is_err());
    }
}
