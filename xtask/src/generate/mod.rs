//! `cargo xtask generate [--check]`: every derived file, computed in memory
//! from `templates/` (and the runtime crate's hand-written sources for its
//! tarball), then written atomically or checked against the tree.

pub mod abi_check;
pub mod fs;
mod index;
pub mod inputs;
mod json;
mod manifest;
mod python;
pub mod results;
mod rust;
pub mod spec;
pub mod symbols;
mod tables;
pub mod tarball;

#[cfg(test)]
mod tests;

use std::path::Path;

use crate::paths::repo_root;
use crate::Result;
use inputs::{
    Inputs, DRIVER_API_PATH, DRIVER_SYMBOLS_PATH, RUNTIME_TEST_DEFAULTS_PATH, SIM_DRIVER_LIB_PATH,
};
use python::PyValue;
use spec::ProviderSpec;
use symbols::SymbolList;

pub use index::sha256_hex;

pub const INVENTORY_API_PATH: &str = "probe/src/generated/inventory_api.rs";
pub const PROBE_SPEC_PATH: &str = "probe/src/generated/spec.rs";
pub const PROBE_MODULE_PATH: &str = "probe/src/generated/mod.rs";
pub const INVENTORY_DEFAULTS_PATH: &str = "probe/src/generated/inventory_defaults.rs";
pub const SIM_DRIVER_DEFAULTS_PATH: &str = "tests/sim-driver/src/defaults.rs";
pub const MANIFEST_PATH: &str = "generated/manifest.json";
pub const PYTHON_MODULE_PATH: &str = "python/rextio_device_cuda/_generated.py";
pub const PYTHON_SPEC_PATH: &str = "python/rextio_device_cuda/_provider_spec.py";
pub const INDEX_PATH: &str = "generated/index.json";
/// Directories that hold only generated files: anything else there is unexpected.
pub const OWNED_DIRS: [&str; 2] = ["generated", "probe/src/generated"];

/// One generated file: repository-relative path and exact bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    pub path: String,
    pub bytes: Vec<u8>,
}

fn output(path: impl Into<String>, bytes: Vec<u8>) -> Output {
    Output {
        path: path.into(),
        bytes,
    }
}

/// How many threads `render_on` uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threads {
    One,
    Two,
}

/// Every generated file, a pure function of `inputs`, in a fixed order
/// (the tarball before the Python module that holds its digest, the index
/// last), rendered on two threads: `cargo xtask bench` times one and two
/// in the same run, and at 1,500 symbols one thread was at or over the
/// 100 ms target on the 2-core development machine (71-108 ms) where two
/// stayed under it (58-77 ms).
pub fn render(inputs: &Inputs) -> Result<Vec<Output>> {
    render_on(inputs, Threads::Two)
}

/// `render` on one thread or two. The work splits in two independent
/// halves: the runtime crate's files and its tarball, and the rest; each
/// half builds its own signature tokens (`proc_macro2` tokens stay on the
/// thread that made them).
pub fn render_on(inputs: &Inputs, threads: Threads) -> Result<Vec<Output>> {
    let spec = ProviderSpec::parse(inputs.get(inputs::PROVIDER_SPEC_PATH)?)?;
    let symbols = SymbolList::parse(inputs.get(DRIVER_SYMBOLS_PATH)?)?;
    let cuda_results =
        results::CudaResults::parse(inputs.get(results::CUDA_RESULTS_PATH)?, &symbols)?;

    let runtime_half =
        |signatures: &tables::Signatures| runtime_outputs(inputs, &spec, &symbols, signatures);
    let other_half =
        |signatures: &tables::Signatures| other_outputs(inputs, &spec, &symbols, signatures);
    let (runtime, other) = match threads {
        Threads::One => {
            let signatures = tables::Signatures::new(&symbols);
            (runtime_half(&signatures), other_half(&signatures))
        }
        Threads::Two => std::thread::scope(|scope| {
            let other = scope.spawn(|| other_half(&tables::Signatures::new(&symbols)));
            let runtime = runtime_half(&tables::Signatures::new(&symbols));
            let other = other
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (runtime, other)
        }),
    };
    let (runtime, other) = (runtime?, other?);
    let archive_sha256 = sha256_hex(&runtime.archive);
    let python_module = python::module(
        other.python_literals,
        &runtime.archive_name,
        &archive_sha256,
    )?;
    let mut outputs = vec![
        output(DRIVER_API_PATH, runtime.driver_api),
        output(RUNTIME_TEST_DEFAULTS_PATH, runtime.test_defaults),
    ];
    outputs.extend(other.outputs);
    outputs.extend([
        output(results::RESULTS_CHECK_PATH, cuda_results.check_source()),
        output(results::PYTHON_RESULTS_PATH, cuda_results.python_module()),
    ]);
    outputs.extend([
        output(
            format!("generated/{}", runtime.archive_name),
            runtime.archive,
        ),
        output(PYTHON_MODULE_PATH, python_module),
        output(PYTHON_SPEC_PATH, other.python_spec),
    ]);
    let index = index::index(&outputs)?;
    outputs.push(output(INDEX_PATH, index));
    Ok(outputs)
}

/// The runtime crate's generated files and its source tarball.
struct RuntimeOutputs {
    driver_api: Vec<u8>,
    test_defaults: Vec<u8>,
    archive_name: String,
    archive: Vec<u8>,
}

fn runtime_outputs(
    inputs: &Inputs,
    spec: &ProviderSpec,
    symbols: &SymbolList,
    signatures: &tables::Signatures,
) -> Result<RuntimeOutputs> {
    let driver_api = tables::table(symbols, signatures, &tables::RUNTIME_TABLE)?;
    let test_defaults = tables::unit_test_defaults(
        symbols,
        signatures,
        &tables::RUNTIME_TABLE,
        quote::quote!(crate::driver_api),
    )?;
    let (archive_name, archive) = runtime_archive(inputs, spec, &driver_api, &test_defaults)?;
    Ok(RuntimeOutputs {
        driver_api,
        test_defaults,
        archive_name,
        archive,
    })
}

/// Every other output: the probe's and the simulated driver's files, the
/// C check, the manifest, and the Python module's parts.
struct OtherOutputs {
    /// In output order, from the inventory table to the manifest.
    outputs: Vec<Output>,
    python_literals: String,
    python_spec: Vec<u8>,
}

fn other_outputs(
    inputs: &Inputs,
    spec: &ProviderSpec,
    symbols: &SymbolList,
    signatures: &tables::Signatures,
) -> Result<OtherOutputs> {
    let outputs = vec![
        output(
            INVENTORY_API_PATH,
            tables::table(symbols, signatures, &tables::INVENTORY_TABLE)?,
        ),
        output(
            INVENTORY_DEFAULTS_PATH,
            tables::unit_test_defaults(
                symbols,
                signatures,
                &tables::INVENTORY_TABLE,
                quote::quote!(super::inventory_api),
            )?,
        ),
        output(
            SIM_DRIVER_DEFAULTS_PATH,
            sim_driver_defaults(inputs, symbols, signatures)?,
        ),
        output(abi_check::ABI_CHECK_PATH, abi_check::render(symbols)?),
        output(PROBE_SPEC_PATH, rust::probe_spec(spec)?),
        output(PROBE_MODULE_PATH, rust::probe_module()?),
        output(
            MANIFEST_PATH,
            json::to_python_json(&manifest::manifest_value(spec)?)?,
        ),
    ];
    Ok(OtherOutputs {
        outputs,
        python_literals: python::data_literals(symbols),
        python_spec: python::spec_module(&spec::python_classes(), &spec.expr()),
    })
}

/// The simulated driver's defaults: every listed export its `lib.rs` does
/// not define by hand. A hand-written export must take the listed number of
/// parameters.
fn sim_driver_defaults(
    inputs: &Inputs,
    symbols: &SymbolList,
    signatures: &tables::Signatures,
) -> Result<Vec<u8>> {
    let source = inputs.get(SIM_DRIVER_LIB_PATH)?;
    let mut hand_written = std::collections::BTreeSet::new();
    for (name, arity) in tables::hand_written_exports(SIM_DRIVER_LIB_PATH, source)? {
        if let Some(symbol) = symbols.symbols.iter().find(|symbol| symbol.export == name) {
            if symbol.params.len() != arity {
                return Err(format!(
                    "{SIM_DRIVER_LIB_PATH}: `{name}` takes {arity} parameters, \
                     {DRIVER_SYMBOLS_PATH} lists {}",
                    symbol.params.len()
                ));
            }
        }
        hand_written.insert(name);
    }
    tables::sim_driver_defaults(symbols, signatures, &hand_written)
}

/// The runtime crate's source tarball: its hand-written files, the license
/// and the generated symbol table. Returns (file name, bytes).
fn runtime_archive(
    inputs: &Inputs,
    spec: &ProviderSpec,
    driver_api: &[u8],
    test_defaults: &[u8],
) -> Result<(String, Vec<u8>)> {
    let stem = spec.runtime_archive_stem();
    let mut packaged: Vec<(String, Vec<u8>)> = inputs
        .runtime_sources()
        .map(|(path, bytes)| (path.to_string(), bytes.to_vec()))
        .collect();
    packaged.push((
        "LICENSE".to_string(),
        inputs.get(inputs::LICENSE_PATH)?.to_vec(),
    ));
    packaged.push(("src/driver_api.rs".to_string(), driver_api.to_vec()));
    packaged.push(("src/tests/defaults.rs".to_string(), test_defaults.to_vec()));
    Ok((format!("{stem}.tar.gz"), tarball::build(&stem, &packaged)?))
}

/// Reads the inputs under `input_root` and renders every output.
pub fn render_from(input_root: &Path) -> Result<Vec<Output>> {
    render(&Inputs::read(input_root)?)
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
        match self {
            Drift::Missing(path) => write!(formatter, "{path}: missing"),
            Drift::Stale(path) => write!(formatter, "{path}: stale"),
            Drift::Unexpected(path) => {
                write!(
                    formatter,
                    "{path}: unexpected (not written by the generator)"
                )
            }
        }
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
    for dir in OWNED_DIRS {
        for path in fs::relative_files(root, dir)? {
            if !outputs.iter().any(|item| item.path == path) {
                found.push(Drift::Unexpected(path));
            }
        }
    }
    Ok(found)
}

/// Writes every output under `output_root` that differs, and removes
/// unexpected files from the generator-owned directories. Returns what changed.
pub fn write_outputs(output_root: &Path, outputs: &[Output]) -> Result<Vec<Drift>> {
    let changes = drift(output_root, outputs)?;
    for change in &changes {
        match change {
            Drift::Missing(path) | Drift::Stale(path) => {
                let item = outputs
                    .iter()
                    .find(|item| &item.path == path)
                    .ok_or_else(|| format!("internal error: no output for {path}"))?;
                fs::write_atomic(&output_root.join(path), &item.bytes)?;
            }
            Drift::Unexpected(path) => std::fs::remove_file(output_root.join(path))
                .map_err(|error| format!("{path}: cannot remove: {error}"))?,
        }
    }
    Ok(changes)
}

/// Reads inputs from `input_root`, writes outputs under `output_root`.
pub fn generate_into(input_root: &Path, output_root: &Path) -> Result<Vec<Drift>> {
    let outputs = render_from(input_root)?;
    write_outputs(output_root, &outputs)
}

fn drift_report(changes: &[Drift]) -> String {
    let lines: Vec<String> = changes.iter().map(|change| format!("  {change}")).collect();
    format!(
        "generated files are not current:\n{}\nrun `cargo xtask generate` and commit the result",
        lines.join("\n")
    )
}

/// Fails naming each stale, missing or unexpected generated file; writes nothing.
pub fn check() -> Result<()> {
    check_at(&repo_root())
}

pub fn check_at(root: &Path) -> Result<()> {
    let outputs = render_from(root)?;
    let changes = drift(root, &outputs)?;
    if changes.is_empty() {
        println!(
            "generate --check: {} generated files are current",
            outputs.len()
        );
        Ok(())
    } else {
        Err(drift_report(&changes))
    }
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
            "--root" => {
                root = rest
                    .next()
                    .map(Into::into)
                    .unwrap_or_else(|| crate::usage_error("generate: --root needs a directory"));
            }
            other => crate::usage_error(&format!("generate: unknown argument `{other}`")),
        }
    }
    if check_only {
        return check_at(&root);
    }
    let changes = generate_into(&root, &root)?;
    if changes.is_empty() {
        println!("generate: every generated file is current");
    }
    for change in changes {
        match change {
            Drift::Missing(path) => println!("generate: wrote {path}"),
            Drift::Stale(path) => println!("generate: updated {path}"),
            Drift::Unexpected(path) => println!("generate: removed unexpected {path}"),
        }
    }
    Ok(())
}
