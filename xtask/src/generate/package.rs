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
/// files [`Inputs::read`] read), named as its own manifest names it.
/// `generated` holds `(repository-relative path, bytes)` of the files the
/// generator writes inside the crate.
pub fn package_crate(
    inputs: &Inputs,
    crate_dir: &str,
    generated: &[(&str, &[u8])],
) -> Result<PackagedCrate> {
    let manifest_path = format!("{crate_dir}/Cargo.toml");
    let manifest = inputs.get(&manifest_path)?;
    let manifest =
        std::str::from_utf8(manifest).map_err(|_| format!("{manifest_path}: not UTF-8"))?;
    let name = package_value(&manifest_path, manifest, "name")?;
    let version = package_value(&manifest_path, manifest, "version")?;
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
    let bytes = tarball::build(&top, &files)?;
    Ok(PackagedCrate {
        name,
        version,
        bytes,
    })
}

/// The value of `key` in the `[package]` table of a Cargo manifest, which
/// names it on one line as `key = "value"`: the tarball is named after it.
fn package_value(path: &str, manifest: &str, key: &str) -> Result<String> {
    let mut inside = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == "[package]";
            continue;
        }
        let Some((found, value)) = line.split_once('=') else {
            continue;
        };
        if !inside || found.trim() != key {
            continue;
        }
        let value = value.trim();
        let quoted = value.len() >= 2 && value.starts_with('"') && value.ends_with('"');
        if !quoted {
            return Err(format!("{path}: [package] {key} is not a plain \"string\""));
        }
        return Ok(value[1..value.len() - 1].to_string());
    }
    Err(format!("{path}: [package] has no {key}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tarball_is_named_as_the_crates_manifest_names_it() {
        let manifest = "[package]\nname = \"demo\"\nversion = \"0.2.0\"\n\n[dependencies]\n";
        assert_eq!(
            package_value("demo/Cargo.toml", manifest, "name").unwrap(),
            "demo"
        );
        assert_eq!(
            package_value("demo/Cargo.toml", manifest, "version").unwrap(),
            "0.2.0"
        );
        // A key of another table does not count.
        let manifest = "[package]\nname = \"demo\"\n[workspace.package]\nversion = \"0.2.0\"\n";
        let error = package_value("demo/Cargo.toml", manifest, "version").unwrap_err();
        assert_eq!(error, "demo/Cargo.toml: [package] has no version");
        // Inherited from the workspace: the crate alone does not say it.
        let manifest = "[package]\nname = \"demo\"\nversion.workspace = true\n";
        let error = package_value("demo/Cargo.toml", manifest, "version").unwrap_err();
        assert_eq!(error, "demo/Cargo.toml: [package] has no version");
        let manifest = "[package]\nversion = 2\n";
        let error = package_value("demo/Cargo.toml", manifest, "version").unwrap_err();
        assert_eq!(
            error,
            "demo/Cargo.toml: [package] version is not a plain \"string\""
        );
    }
}
