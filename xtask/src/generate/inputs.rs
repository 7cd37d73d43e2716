//! The generator's inputs: read once from disk, then validated into typed
//! records. Every error names the input file and the problem.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::fs::{read_input, relative_files};
use crate::Result;

pub const DRIVER_SYMBOLS_PATH: &str = "templates/driver-symbols.json";
pub const PROVIDER_SPEC_PATH: &str = "templates/provider-spec.json";
pub const LICENSE_PATH: &str = "LICENSE";
/// Written by the generator, so never read as an input.
pub const DRIVER_API_PATH: &str = "runtime/src/driver_api.rs";
/// The runtime unit tests' default fake exports; generated, never an input.
pub const RUNTIME_TEST_DEFAULTS_PATH: &str = "runtime/src/tests/defaults.rs";
/// The simulated driver's hand-written exports (its defaults cover the rest).
pub const SIM_DRIVER_LIB_PATH: &str = "tests/sim-driver/src/lib.rs";

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
    /// sources under `root`.
    pub fn read(root: &Path) -> Result<Self> {
        let mut files = BTreeMap::new();
        for path in [
            DRIVER_SYMBOLS_PATH,
            PROVIDER_SPEC_PATH,
            LICENSE_PATH,
            SIM_DRIVER_LIB_PATH,
        ] {
            files.insert(path.to_string(), read_input(root, path)?);
        }
        for path in ["runtime/Cargo.toml", "runtime/README.md"] {
            files.insert(path.to_string(), read_input(root, path)?);
        }
        for path in relative_files(root, "runtime/src")? {
            if path.ends_with(".rs")
                && path != DRIVER_API_PATH
                && path != RUNTIME_TEST_DEFAULTS_PATH
            {
                let bytes = read_input(root, &path)?;
                files.insert(path, bytes);
            }
        }
        Ok(Self { files })
    }

    pub fn get(&self, path: &str) -> Result<&[u8]> {
        self.files
            .get(path)
            .map(Vec::as_slice)
            .ok_or_else(|| format!("{path}: missing input"))
    }

    /// The hand-written runtime files (relative to `runtime/`) to package.
    pub fn runtime_sources(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.files.iter().filter_map(|(path, bytes)| {
            let relative = path.strip_prefix("runtime/")?;
            Some((relative, bytes.as_slice()))
        })
    }
}

/// Parses JSON, naming the file, line and column on failure.
pub fn parse_json<T: for<'de> Deserialize<'de>>(path: &str, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|error| format!("{path}: {error}"))
}

// ---------------------------------------------------------------- provider spec

/// The provider spec: kept as a JSON value (the Python module carries all of
/// it) with typed accessors that name the missing or mistyped key.
pub struct ProviderSpec {
    pub value: Value,
}

impl ProviderSpec {
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let value: Value = parse_json(PROVIDER_SPEC_PATH, bytes)?;
        if !value.is_object() {
            return Err(format!(
                "{PROVIDER_SPEC_PATH}: the top level is not an object"
            ));
        }
        Ok(Self { value })
    }

    /// The value at a dotted key path such as `manifest.provider_id`.
    pub fn at(&self, key_path: &str) -> Result<&Value> {
        let mut current = &self.value;
        for key in key_path.split('.') {
            current = current
                .get(key)
                .ok_or_else(|| format!("{PROVIDER_SPEC_PATH}: missing field `{key_path}`"))?;
        }
        Ok(current)
    }

    pub fn str_at(&self, key_path: &str) -> Result<&str> {
        as_str(self.at(key_path)?, key_path)
    }

    pub fn object_at(&self, key_path: &str) -> Result<&serde_json::Map<String, Value>> {
        as_object(self.at(key_path)?, key_path)
    }

    pub fn array_at(&self, key_path: &str) -> Result<&Vec<Value>> {
        as_array(self.at(key_path)?, key_path)
    }

    pub fn string_list_at(&self, key_path: &str) -> Result<Vec<String>> {
        string_list(self.at(key_path)?, key_path)
    }

    /// The runtime tarball's file name, e.g. `rextio-cuda-runtime-0.1.0.tar.gz`.
    pub fn runtime_archive_stem(&self) -> Result<String> {
        let name = self.str_at("runtime_package.crate")?;
        let version = self.str_at("runtime_package.version")?;
        let stem = format!("{name}-{version}");
        if stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            Ok(stem)
        } else {
            Err(format!(
                "{PROVIDER_SPEC_PATH}: runtime_package crate/version `{stem}` \
                 is not a plain file name"
            ))
        }
    }
}

pub fn mistyped(key_path: &str, expected: &str) -> String {
    format!("{PROVIDER_SPEC_PATH}: field `{key_path}` is not {expected}")
}

pub fn as_str<'a>(value: &'a Value, key_path: &str) -> Result<&'a str> {
    value.as_str().ok_or_else(|| mistyped(key_path, "a string"))
}

pub fn as_object<'a>(
    value: &'a Value,
    key_path: &str,
) -> Result<&'a serde_json::Map<String, Value>> {
    value
        .as_object()
        .ok_or_else(|| mistyped(key_path, "an object"))
}

pub fn as_array<'a>(value: &'a Value, key_path: &str) -> Result<&'a Vec<Value>> {
    value.as_array().ok_or_else(|| mistyped(key_path, "a list"))
}

pub fn string_list(value: &Value, key_path: &str) -> Result<Vec<String>> {
    as_array(value, key_path)?
        .iter()
        .map(|item| {
            item.as_str()
                .map(str::to_string)
                .ok_or_else(|| mistyped(key_path, "a list of strings"))
        })
        .collect()
}
