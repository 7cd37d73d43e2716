//! The generator's inputs: read once from disk, then validated into typed
//! records. Every error names the input file and the problem.

use std::collections::BTreeMap;
use std::path::Path;

use super::fs::{read_input, relative_files};
use crate::Result;

pub const DRIVER_SYMBOLS_PATH: &str = "templates/driver-symbols.json";
pub const PROVIDER_SPEC_PATH: &str = "templates/provider-spec.json";
/// `python/pyproject.toml` with `{{key}}` where a distribution fact of the spec goes.
pub const PYPROJECT_TEMPLATE_PATH: &str = "templates/pyproject.toml";
pub const LICENSE_PATH: &str = "LICENSE";
/// Written by the generator, so never read as an input.
pub const DRIVER_API_PATH: &str = "runtime/src/driver_api.rs";

/// The raw bytes of every input, keyed by repository-relative path.
///
/// Rendering is a pure function of this value, so tests and benches can
/// build one in memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inputs {
    pub files: BTreeMap<String, Vec<u8>>,
}

impl Inputs {
    /// Reads the templates, the license and the runtime crate's hand-written
    /// library sources under `root` (never its unit tests, `src/tests.rs` and
    /// `src/tests/`, nor the table the generator writes).
    pub fn read(root: &Path) -> Result<Self> {
        let mut files = BTreeMap::new();
        let fixed = [
            DRIVER_SYMBOLS_PATH,
            PROVIDER_SPEC_PATH,
            PYPROJECT_TEMPLATE_PATH,
            LICENSE_PATH,
        ];
        let fixed = fixed.into_iter().chain([super::results::CUDA_RESULTS_PATH]);
        for path in fixed.chain(["runtime/Cargo.toml", "runtime/README.md"]) {
            files.insert(path.to_string(), read_input(root, path)?);
        }
        for path in relative_files(root, "runtime/src")? {
            let test = path == "runtime/src/tests.rs" || path.starts_with("runtime/src/tests/");
            if path.ends_with(".rs") && path != DRIVER_API_PATH && !test {
                files.insert(path.clone(), read_input(root, &path)?);
            }
        }
        Ok(Self { files })
    }

    pub fn get(&self, path: &str) -> Result<&[u8]> {
        let missing = || format!("{path}: missing input");
        self.files.get(path).map(Vec::as_slice).ok_or_else(missing)
    }
}
