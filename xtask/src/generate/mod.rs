//! `cargo xtask generate [--check]`: every derived file, computed in memory
//! from `templates/` (and the packaged crates' hand-written sources, the
//! workspace's lock and toolchain files for their tarballs), then written
//! atomically or checked against the tree.

pub mod abi_check;
pub mod fs;
pub mod inputs;
mod lockfile;
pub mod manifest;
pub mod package;
mod python;
pub mod python_value;
pub mod results;
mod rust;
pub mod spec;
pub mod symbols;
mod tables;
pub mod tarball;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::Path;

use crate::paths::repo_root;
use crate::Result;
use inputs::{
    Inputs, DRIVER_API_PATH, DRIVER_SYMBOLS_PATH, LOADER_DIR, RUNTIME_DIR, RUNTIME_RESULTS_PATH,
};
pub use inputs::{INVENTORY_API_PATH, LOADER_SPEC_PATH, PROBE_SPEC_PATH};
use package::{package_crate, package_probe_source, PackagedCrate};
use serde_json::json;
use sha2::{Digest, Sha256};
use spec::RuntimePackageSpec;
use symbols::SymbolList;

pub const PYTHON_MODULE_PATH: &str = "python/rextio_device_cuda/_generated.py";
pub const PYTHON_SPEC_PATH: &str = "python/rextio_device_cuda/_provider_spec.py";
pub const PYPROJECT_PATH: &str = "python/pyproject.toml";
pub const PYTHON_CODES_PATH: &str = "python/rextio_device_cuda/_reason_codes.py";
pub const INDEX_PATH: &str = "generated/index.json";

/// One generated file: repository-relative path and exact bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    pub path: String,
    pub bytes: Vec<u8>,
}

fn output(path: impl Into<String>, bytes: Vec<u8>) -> Output {
    let path = path.into();
    Output { path, bytes }
}

/// Every generated file, a pure function of `inputs`, in a fixed order
/// (the tarball before the Python module that holds its digest, the index
/// last), on one thread (`cargo xtask bench` times it).
pub fn render(inputs: &Inputs) -> Result<Vec<Output>> {
    let spec = spec::parse(inputs.get(inputs::PROVIDER_SPEC_PATH)?)?;
    let symbols = SymbolList::parse(inputs.get(DRIVER_SYMBOLS_PATH)?)?;
    let results = inputs.get(inputs::CUDA_RESULTS_PATH)?;
    let cuda_results = results::CudaResults::parse(results, &symbols)?;
    let driver_api = tables::runtime_table(DRIVER_API_PATH, &symbols)?;
    let inventory_api = tables::inventory_table(INVENTORY_API_PATH, &symbols)?;
    let probe_spec = rust::probe_spec(PROBE_SPEC_PATH, &spec)?;
    let result_names = cuda_results.rust_module(RUNTIME_RESULTS_PATH)?;
    let loader_spec = rust::loader_spec(LOADER_SPEC_PATH, &spec)?;
    let generated_in_crates = [
        (DRIVER_API_PATH, driver_api.as_slice()),
        (RUNTIME_RESULTS_PATH, result_names.as_slice()),
        (INVENTORY_API_PATH, inventory_api.as_slice()),
        (PROBE_SPEC_PATH, probe_spec.as_slice()),
        (LOADER_SPEC_PATH, loader_spec.as_slice()),
    ];
    let runtime = package_crate(inputs, RUNTIME_DIR, &generated_in_crates)?;
    check_runtime_package_names(&runtime, &spec.runtime_package)?;
    let loader = package_crate(inputs, LOADER_DIR, &generated_in_crates)?;
    let probe = package_probe_source(inputs, &generated_in_crates)?;
    let archives = python::SourceArchives {
        runtime: python::SourceArchive::of(&runtime.file_name(), &runtime.bytes),
        loader: python::SourceArchive::of(&loader.file_name(), &loader.bytes),
        loader_crate: loader.name.clone(),
        probe: python::SourceArchive::of(&probe.file_name(), &probe.bytes),
    };
    let mut outputs = vec![
        output(DRIVER_API_PATH, driver_api),
        output(RUNTIME_RESULTS_PATH, result_names),
        output(INVENTORY_API_PATH, inventory_api),
        output(abi_check::ABI_CHECK_PATH, abi_check::render(&symbols)),
        output(results::RESULTS_CHECK_PATH, cuda_results.check_source()),
        output(PROBE_SPEC_PATH, probe_spec),
        output(LOADER_SPEC_PATH, loader_spec),
        output(PYTHON_MODULE_PATH, python::module(&archives)),
        output(PYTHON_CODES_PATH, python::reason_codes(&spec)),
        output(results::PYTHON_RESULTS_PATH, cuda_results.python_module()),
        output(PYPROJECT_PATH, python::pyproject(inputs, &spec)?),
        output(runtime.path(), runtime.bytes),
        output(loader.path(), loader.bytes),
        output(probe.path(), probe.bytes),
        output(PYTHON_SPEC_PATH, python::spec_module(&spec)),
        output(manifest::MANIFEST_PATH, manifest::render(&spec)?),
    ];
    // JSON holds no comment: the generator note is the `generated_by` field.
    let digest = |item: &Output| (item.path.clone(), sha256_hex(&item.bytes));
    let files: BTreeMap<String, String> = outputs.iter().map(digest).collect();
    let note = "cargo xtask generate from templates/; do not edit (check with \
                `cargo xtask generate --check`)";
    let index = manifest::sorted_json(&json!({ "files": files, "generated_by": note }))?;
    outputs.push(output(INDEX_PATH, index));
    Ok(outputs)
}

/// The spec names the runtime crate (for the Python side, which installs
/// it) as the crate's own manifest does.
fn check_runtime_package_names(runtime: &PackagedCrate, named: &RuntimePackageSpec) -> Result<()> {
    if runtime.name == named.crate_name && runtime.version == named.version {
        return Ok(());
    }
    Err(format!(
        "{}: runtime_package names {} {}, but {RUNTIME_DIR}/Cargo.toml names {} {}",
        inputs::PROVIDER_SPEC_PATH,
        named.crate_name,
        named.version,
        runtime.name,
        runtime.version
    ))
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// One difference between the outputs and the tree under a root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Drift {
    Missing(String),
    Stale(String),
    Unexpected(String),
}

impl std::fmt::Display for Drift {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (path, state) = match self {
            Drift::Missing(path) => (path, "missing"),
            Drift::Stale(path) => (path, "stale"),
            Drift::Unexpected(path) => (path, "unexpected (not written by the generator)"),
        };
        write!(formatter, "{path}: {state}")
    }
}

/// Compares `outputs` with the files under `root`; writes nothing.
pub fn drift(root: &Path, outputs: &[Output]) -> Result<Vec<Drift>> {
    let mut found = Vec::new();
    for item in outputs {
        match std::fs::read(root.join(&item.path)) {
            Ok(bytes) if bytes == item.bytes => {}
            Ok(_) => found.push(Drift::Stale(item.path.clone())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                found.push(Drift::Missing(item.path.clone()))
            }
            Err(error) => return Err(format!("{}: cannot read: {error}", item.path)),
        }
    }
    // Directories that hold only generated files: anything else there is unexpected.
    for dir in ["generated", "probe/src/generated"] {
        let files = fs::relative_files(root, dir)?.into_iter();
        let unexpected = files.filter(|path| outputs.iter().all(|item| item.path != *path));
        found.extend(unexpected.map(Drift::Unexpected));
    }
    Ok(found)
}

/// Writes every output under `output_root` that differs, and removes
/// unexpected files from the generator-owned directories. Returns what changed.
pub fn write_outputs(output_root: &Path, outputs: &[Output]) -> Result<Vec<Drift>> {
    let changes = drift(output_root, outputs)?;
    for change in &changes {
        match change {
            Drift::Unexpected(path) => std::fs::remove_file(output_root.join(path))
                .map_err(|error| format!("{path}: cannot remove: {error}"))?,
            Drift::Missing(path) | Drift::Stale(path) => {
                let item = outputs.iter().find(|item| item.path == *path);
                let bytes = item.map(|item| item.bytes.as_slice()).unwrap_or_default();
                fs::write_atomic(&output_root.join(path), bytes)?
            }
        }
    }
    Ok(changes)
}

/// Fails naming each stale, missing or unexpected generated file; writes nothing.
pub fn check() -> Result<()> {
    check_at(&repo_root())
}

pub fn check_at(root: &Path) -> Result<()> {
    let outputs = render(&Inputs::read(root)?)?;
    let changes = drift(root, &outputs)?;
    if !changes.is_empty() {
        let lines = changes.iter().map(|change| format!("  {change}\n"));
        let run = "run `cargo xtask generate` and commit the result";
        let lines = lines.collect::<String>();
        return Err(format!("generated files are not current:\n{lines}{run}"));
    }
    let count = outputs.len();
    println!("generate --check: {count} generated files are current");
    Ok(())
}

/// `generate [--check] [--root DIR]`; `--root` (inputs and outputs under
/// DIR) is how verify-determinism runs the generator in a child process.
pub fn command(args: &[String]) -> Result<()> {
    let mut check_only = false;
    let mut root = repo_root();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--check" => check_only = true,
            "--root" => match rest.next() {
                Some(dir) => root = dir.into(),
                None => crate::usage_error("generate: --root needs a directory"),
            },
            other => crate::usage_error(&format!("generate: unknown argument `{other}`")),
        }
    }
    if check_only {
        return check_at(&root);
    }
    let changes = write_outputs(&root, &render(&Inputs::read(&root)?)?)?;
    if changes.is_empty() {
        println!("generate: every generated file is current");
    }
    for change in changes {
        println!("generate: fixed {change}");
    }
    Ok(())
}
