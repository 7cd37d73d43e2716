//! A crate's source tarball, as `cargo package` ships it: its manifest,
//! README, the repository's license and every file under `src/` (its unit
//! tests among them, so the extracted crate tests itself), with the files
//! the generator writes into the crate taken from the outputs, never from
//! the tree. One function for every packaged crate.

use super::inputs::{
    Inputs, LICENSE_PATH, LOADER_DIR, PACKAGED_CRATES, PROBE_DIR, RUNTIME_DIR, TOOLCHAIN_PATH,
    WORKSPACE_LOCK_PATH, WORKSPACE_MANIFEST_PATH,
};
use super::{lockfile, tarball};
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
/// generator writes inside the packaged crates.
pub fn package_crate(
    inputs: &Inputs,
    crate_dir: &str,
    generated: &[(&str, &[u8])],
) -> Result<PackagedCrate> {
    let CrateFiles {
        name,
        version,
        mut files,
    } = crate_files(inputs, crate_dir, generated)?;
    files.push(("LICENSE".to_string(), inputs.get(LICENSE_PATH)?.to_vec()));
    packaged(name, version, &files)
}

/// The tarball `NAME-VERSION.tar.gz` of `files`, under that top directory.
fn packaged(name: String, version: String, files: &[(String, Vec<u8>)]) -> Result<PackagedCrate> {
    let bytes = tarball::build(&format!("{name}-{version}"), files)?;
    Ok(PackagedCrate {
        name,
        version,
        bytes,
    })
}

/// The probe's source tarball (contract §9.7, `build-probe`): a workspace
/// whose one member is the probe, beside the runtime and the loader it
/// depends on, each in a directory named as the crate is, with the lock file
/// cut from the workspace's to what the probe uses and the pinned toolchain,
/// so `cargo build --release --locked` builds the reviewed probe and smoke
/// in the extracted tree. Named after the probe crate.
pub fn package_probe_source(inputs: &Inputs, generated: &[(&str, &[u8])]) -> Result<PackagedCrate> {
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut probe = None;
    for crate_dir in [RUNTIME_DIR, LOADER_DIR, PROBE_DIR] {
        let packaged = crate_files(inputs, crate_dir, generated)?;
        for (path, bytes) in packaged.files {
            files.push((format!("{}/{path}", packaged.name), bytes));
        }
        if crate_dir == PROBE_DIR {
            probe = Some((packaged.name, packaged.version));
        }
    }
    let Some((name, version)) = probe else {
        return Err(format!("{PROBE_DIR}: not packaged"));
    };
    let workspace = probe_workspace_manifest(inputs, &name)?;
    files.push((WORKSPACE_MANIFEST_PATH.to_string(), workspace.into_bytes()));
    let lock = lockfile::cut(inputs.get(WORKSPACE_LOCK_PATH)?, &name)?;
    files.push((WORKSPACE_LOCK_PATH.to_string(), lock.into_bytes()));
    let toolchain = probe_toolchain(inputs)?;
    files.push((TOOLCHAIN_PATH.to_string(), toolchain.into_bytes()));
    files.push(("LICENSE".to_string(), inputs.get(LICENSE_PATH)?.to_vec()));
    packaged(name, version, &files)
}

/// A crate's files as packaged, relative to the crate.
struct CrateFiles {
    name: String,
    version: String,
    files: Vec<(String, Vec<u8>)>,
}

/// The crate in `crate_dir` as packaged, with its manifest as installed and
/// the files the generator writes taken from `generated`.
fn crate_files(
    inputs: &Inputs,
    crate_dir: &str,
    generated: &[(&str, &[u8])],
) -> Result<CrateFiles> {
    let manifest_path = format!("{crate_dir}/Cargo.toml");
    let manifest = text(inputs, &manifest_path)?;
    let name = package_value(&manifest_path, manifest, "name")?;
    let version = package_value(&manifest_path, manifest, "version")?;
    let prefix = format!("{crate_dir}/");
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for (path, bytes) in &inputs.files {
        if *path == manifest_path {
            let installed = installed_manifest(inputs, &manifest_path, manifest)?;
            files.push(("Cargo.toml".to_string(), installed.into_bytes()));
        } else if let Some(inside) = path.strip_prefix(&prefix) {
            files.push((inside.to_string(), bytes.clone()));
        }
    }
    for (path, bytes) in generated {
        if let Some(inside) = path.strip_prefix(&prefix) {
            files.push((inside.to_string(), bytes.to_vec()));
        }
    }
    Ok(CrateFiles {
        name,
        version,
        files,
    })
}

/// A packaged crate's manifest as installed: a path dependency on another
/// packaged crate (`path = "../runtime"`) names the directory that crate is
/// installed in, beside this one, which is its name (`path =
/// "../rextio-cuda-runtime"`; contract §9.7). Any other path dependency
/// could not resolve there, and is refused.
fn installed_manifest(inputs: &Inputs, manifest_path: &str, manifest: &str) -> Result<String> {
    let mut installed = manifest.to_string();
    let mut names = Vec::new();
    for crate_dir in PACKAGED_CRATES {
        let path = format!("{crate_dir}/Cargo.toml");
        let name = package_value(&path, text(inputs, &path)?, "name")?;
        let from = format!("path = \"../{crate_dir}\"");
        installed = installed.replace(&from, &format!("path = \"../{name}\""));
        names.push(name);
    }
    let marker = "path = \"../";
    for (at, _) in installed.match_indices(marker) {
        let value = installed[at + marker.len()..]
            .split('"')
            .next()
            .unwrap_or("");
        if !names.iter().any(|name| name == value) {
            return Err(format!(
                "{manifest_path}: a path dependency on `../{value}`, which is no packaged crate"
            ));
        }
    }
    Ok(installed)
}

/// The probe tarball's workspace manifest: the workspace's own, with the
/// probe as its one member (its `[workspace.package]` and release profile
/// are the ones the shipped binaries are built with).
fn probe_workspace_manifest(inputs: &Inputs, probe_name: &str) -> Result<String> {
    let manifest = text(inputs, WORKSPACE_MANIFEST_PATH)?;
    let mut out = String::new();
    let mut replaced = false;
    for line in manifest.lines() {
        if line.trim_start().starts_with("members = ") {
            out.push_str(&format!("members = [\"{probe_name}\"]\n"));
            replaced = true;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !replaced {
        return Err(format!(
            "{WORKSPACE_MANIFEST_PATH}: no `members = [...]` line"
        ));
    }
    Ok(out)
}

/// The probe tarball's toolchain file: the workspace's pinned channel, with
/// only what building needs (no other targets or components to download).
fn probe_toolchain(inputs: &Inputs) -> Result<String> {
    let toolchain = text(inputs, TOOLCHAIN_PATH)?;
    let channel = toolchain
        .lines()
        .find(|line| line.trim_start().starts_with("channel = "))
        .ok_or_else(|| format!("{TOOLCHAIN_PATH}: no `channel = ...` line"))?;
    Ok(format!(
        "# The toolchain the shipped probe and smoke are built with.\n\
         [toolchain]\n{}\nprofile = \"minimal\"\n",
        channel.trim()
    ))
}

fn text<'a>(inputs: &'a Inputs, path: &str) -> Result<&'a str> {
    std::str::from_utf8(inputs.get(path)?).map_err(|_| format!("{path}: not UTF-8"))
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
