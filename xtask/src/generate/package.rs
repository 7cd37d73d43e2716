//! A crate's source tarball, as `cargo package` ships it: its manifest,
//! README, the repository's license and every file under `src/` (its unit
//! tests among them, so the extracted crate tests itself), with the files
//! the generator writes into the crate taken from the outputs, never from
//! the tree. One function for every packaged crate.

use super::inputs::{
    Inputs, LICENSE_PATH, LOADER_DIR, PACKAGED_CRATES, PROBE_DIR, RUNTIME_DIR, TOOLCHAIN_PATH,
    WORKSPACE_LOCK_PATH, WORKSPACE_MANIFEST_PATH,
};
use toml_edit::{DocumentMut, TableLike};

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

/// The probe's source tarball (`build-probe`): a workspace
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
/// "../rextio-cuda-runtime"`; docs/interfaces.md). Any other path
/// dependency could not resolve there, and is refused.
fn installed_manifest(inputs: &Inputs, manifest_path: &str, manifest: &str) -> Result<String> {
    let mut installed_as = Vec::new();
    for crate_dir in PACKAGED_CRATES {
        let path = format!("{crate_dir}/Cargo.toml");
        let name = package_value(&path, text(inputs, &path)?, "name")?;
        installed_as.push((format!("../{crate_dir}"), format!("../{name}")));
    }
    let mut document = parsed(manifest_path, manifest)?;
    for dependencies in dependency_tables(&mut document) {
        for (_, dependency) in dependencies.iter_mut() {
            // TableLike::get_mut: Item::get_mut would insert a missing key.
            let dependency = dependency.as_table_like_mut();
            let Some(path) = dependency.and_then(|dependency| dependency.get_mut("path")) else {
                continue;
            };
            let from = path.as_str().unwrap_or_default();
            let Some((_, to)) = installed_as.iter().find(|(dir, _)| dir == from) else {
                return Err(format!(
                    "{manifest_path}: a path dependency on `{from}`, which is no packaged crate"
                ));
            };
            let decor = path.as_value().map(|value| value.decor().clone());
            *path = toml_edit::value(to.as_str());
            if let (Some(value), Some(decor)) = (path.as_value_mut(), decor) {
                *value.decor_mut() = decor;
            }
        }
    }
    Ok(document.to_string())
}

/// Every dependency table of a manifest: `[dependencies]`, `[dev-dependencies]`,
/// `[build-dependencies]` and the same under each `[target.'cfg(...)']`.
fn dependency_tables(document: &mut DocumentMut) -> Vec<&mut dyn TableLike> {
    const KINDS: [&str; 3] = ["dependencies", "dev-dependencies", "build-dependencies"];
    let mut tables = Vec::new();
    for (key, item) in document.as_table_mut().iter_mut() {
        if KINDS.contains(&key.get()) {
            tables.extend(item.as_table_like_mut());
        } else if key.get() == "target" {
            let targets = item.as_table_like_mut().into_iter();
            for (_, target) in targets.flat_map(|targets| targets.iter_mut()) {
                let Some(target) = target.as_table_like_mut() else {
                    continue;
                };
                for (kind, item) in target.iter_mut() {
                    if KINDS.contains(&kind.get()) {
                        tables.extend(item.as_table_like_mut());
                    }
                }
            }
        }
    }
    tables
}

/// The probe tarball's workspace manifest: the workspace's own, with the
/// probe as its one member (its `[workspace.package]` and release profile
/// are the ones the shipped binaries are built with).
fn probe_workspace_manifest(inputs: &Inputs, probe_name: &str) -> Result<String> {
    let mut document = parsed(
        WORKSPACE_MANIFEST_PATH,
        text(inputs, WORKSPACE_MANIFEST_PATH)?,
    )?;
    let members = document
        .get_mut("workspace")
        .and_then(|workspace| workspace.as_table_like_mut())
        .and_then(|workspace| workspace.get_mut("members"))
        .and_then(|members| members.as_value_mut())
        .ok_or_else(|| format!("{WORKSPACE_MANIFEST_PATH}: no [workspace] members"))?;
    let decor = members.decor().clone();
    *members = toml_edit::Value::from(toml_edit::Array::from_iter([probe_name]));
    *members.decor_mut() = decor;
    Ok(document.to_string())
}

/// The probe tarball's toolchain file: the workspace's pinned channel, with
/// only what building needs (no other targets or components to download).
fn probe_toolchain(inputs: &Inputs) -> Result<String> {
    let pinned = crate::toolchain::parse_pinned(TOOLCHAIN_PATH, text(inputs, TOOLCHAIN_PATH)?)?;
    let mut toolchain = toml_edit::Table::new();
    toolchain.insert("channel", toml_edit::value(pinned.channel));
    toolchain.insert("profile", toml_edit::value("minimal"));
    let mut document = DocumentMut::new();
    document.insert("toolchain", toml_edit::Item::Table(toolchain));
    Ok(format!(
        "# The toolchain the shipped probe and smoke are built with.\n{document}"
    ))
}

fn text<'a>(inputs: &'a Inputs, path: &str) -> Result<&'a str> {
    std::str::from_utf8(inputs.get(path)?).map_err(|_| format!("{path}: not UTF-8"))
}

fn parsed(path: &str, text: &str) -> Result<DocumentMut> {
    text.parse()
        .map_err(|error| format!("{path}: not TOML: {error}"))
}

/// The string value of `key` in the `[package]` table of a Cargo manifest:
/// the tarball is named after it.
fn package_value(path: &str, manifest: &str, key: &str) -> Result<String> {
    let document = parsed(path, manifest)?;
    let item = document
        .get("package")
        .and_then(|package| package.get(key))
        .ok_or_else(|| format!("{path}: [package] has no {key}"))?;
    let value = item
        .as_str()
        .ok_or_else(|| format!("{path}: [package] {key} is not a plain \"string\""))?;
    Ok(value.to_string())
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
        assert_eq!(
            error,
            "demo/Cargo.toml: [package] version is not a plain \"string\""
        );
        let manifest = "[package]\nversion = 2\n";
        let error = package_value("demo/Cargo.toml", manifest, "version").unwrap_err();
        assert_eq!(
            error,
            "demo/Cargo.toml: [package] version is not a plain \"string\""
        );
    }

    fn inputs_with(manifest: &str) -> Inputs {
        let mut files = std::collections::BTreeMap::new();
        for (dir, name) in [
            ("runtime", "rextio-cuda-runtime"),
            ("loader", "rextio-cuda-loader"),
            ("probe", "rextio-cuda-probe"),
        ] {
            let text = format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\n");
            files.insert(format!("{dir}/Cargo.toml"), text.into_bytes());
        }
        files.insert("demo/Cargo.toml".to_string(), manifest.as_bytes().to_vec());
        Inputs { files }
    }

    #[test]
    fn path_dependencies_name_the_installed_directory_and_nothing_else_changes() {
        let manifest = "[package]\nname = \"demo\"\n\n[lib]\npath = \"src/lib.rs\"\n\n\
            [dependencies]\nlibloading = \"0.8\"\n\
            serde = { version = \"1\", features = [\"derive\"] }\n\
            rextio-cuda-runtime = { path = \"../runtime\" } # kept comment\n\n\
            [target.'cfg(unix)'.dependencies]\n\
            rextio-cuda-loader = { path = \"../loader\", version = \"0.1\" }\n\n\
            [dev-dependencies.rextio-cuda-probe]\npath = \"../probe\"\n";
        let inputs = inputs_with(manifest);
        let installed = installed_manifest(&inputs, "demo/Cargo.toml", manifest).unwrap();
        assert_eq!(
            installed,
            "[package]\nname = \"demo\"\n\n[lib]\npath = \"src/lib.rs\"\n\n\
             [dependencies]\nlibloading = \"0.8\"\n\
             serde = { version = \"1\", features = [\"derive\"] }\n\
             rextio-cuda-runtime = { path = \"../rextio-cuda-runtime\" } # kept comment\n\n\
             [target.'cfg(unix)'.dependencies]\n\
             rextio-cuda-loader = { path = \"../rextio-cuda-loader\", version = \"0.1\" }\n\n\
             [dev-dependencies.rextio-cuda-probe]\npath = \"../rextio-cuda-probe\"\n"
        );
    }

    #[test]
    fn a_path_dependency_on_no_packaged_crate_is_refused() {
        for elsewhere in ["../tests/sim-driver", "vendored/lib", "../runtime/"] {
            let manifest = format!(
                "[package]\nname = \"demo\"\n[target.'cfg(unix)'.build-dependencies]\n\
                 other = {{ path = \"{elsewhere}\" }}\n"
            );
            let inputs = inputs_with(&manifest);
            let error = installed_manifest(&inputs, "demo/Cargo.toml", &manifest).unwrap_err();
            assert_eq!(
                error,
                format!(
                    "demo/Cargo.toml: a path dependency on `{elsewhere}`, which is no packaged crate"
                )
            );
        }
    }
}
