//! The generator's inputs: read once from disk, then validated into typed
//! records. Every error names the input file and the problem.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::de::Visitor;
use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer, Error, MapAccess, SeqAccess};
use serde_json::Value;

use super::fs::{read_input, relative_files};
use crate::Result;

pub const DRIVER_SYMBOLS_PATH: &str = "templates/driver-symbols.json";
pub const PROVIDER_SPEC_PATH: &str = "templates/provider-spec.json";
/// `python/pyproject.toml` with `{{key}}` where a distribution fact of the spec goes.
pub const PYPROJECT_TEMPLATE_PATH: &str = "templates/pyproject.toml";
pub const LICENSE_PATH: &str = "LICENSE";
pub const CUDA_RESULTS_PATH: &str = "templates/cuda-results.json";
/// The runtime crate's directory: packaged as a source tarball.
pub const RUNTIME_DIR: &str = "runtime";
/// The reviewed loader's directory: packaged as a source tarball.
pub const LOADER_DIR: &str = "loader";
/// The probe crate's directory: packaged, with the crates above, as the
/// probe's source tarball.
pub const PROBE_DIR: &str = "probe";
/// The crates whose sources are packaged in `generated/`, by directory.
pub const PACKAGED_CRATES: &[&str] = &[RUNTIME_DIR, LOADER_DIR, PROBE_DIR];
/// The workspace files the probe's source tarball is made from: its lock
/// file is cut from the workspace's, its toolchain is the workspace's.
pub const WORKSPACE_MANIFEST_PATH: &str = "Cargo.toml";
pub const WORKSPACE_LOCK_PATH: &str = "Cargo.lock";
pub const TOOLCHAIN_PATH: &str = "rust-toolchain.toml";
/// Written by the generator, so never read as an input.
pub const DRIVER_API_PATH: &str = "runtime/src/driver_api.rs";
pub const RUNTIME_RESULTS_PATH: &str = "runtime/src/cuda_results.rs";
pub const INVENTORY_API_PATH: &str = "probe/src/generated/inventory_api.rs";
pub const PROBE_SPEC_PATH: &str = "probe/src/generated/spec.rs";
pub const LOADER_SPEC_PATH: &str = "loader/src/generated.rs";
/// The files the generator writes inside a packaged crate.
pub const GENERATED_IN_CRATES: &[&str] = &[
    DRIVER_API_PATH,
    RUNTIME_RESULTS_PATH,
    INVENTORY_API_PATH,
    PROBE_SPEC_PATH,
    LOADER_SPEC_PATH,
];

/// The raw bytes of every input, keyed by repository-relative path.
///
/// Rendering is a pure function of this value, so tests and benches can
/// build one in memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inputs {
    pub files: BTreeMap<String, Vec<u8>>,
}

impl Inputs {
    /// Reads the templates, the license, the workspace's manifest, lock file
    /// and toolchain file, and each packaged crate's files under `root`: its
    /// manifest, README and everything under `src/` and `tests/` (its tests
    /// too), never a file the generator writes there.
    pub fn read(root: &Path) -> Result<Self> {
        let mut files = BTreeMap::new();
        let fixed = [
            DRIVER_SYMBOLS_PATH,
            PROVIDER_SPEC_PATH,
            PYPROJECT_TEMPLATE_PATH,
            CUDA_RESULTS_PATH,
            LICENSE_PATH,
            WORKSPACE_MANIFEST_PATH,
            WORKSPACE_LOCK_PATH,
            TOOLCHAIN_PATH,
        ];
        for path in fixed {
            files.insert(path.to_string(), read_input(root, path)?);
        }
        for crate_dir in PACKAGED_CRATES {
            for name in ["Cargo.toml", "README.md"] {
                let path = format!("{crate_dir}/{name}");
                files.insert(path.clone(), read_input(root, &path)?);
            }
            for part in ["src", "tests"] {
                for path in relative_files(root, &format!("{crate_dir}/{part}"))? {
                    if !GENERATED_IN_CRATES.contains(&path.as_str()) {
                        files.insert(path.clone(), read_input(root, &path)?);
                    }
                }
            }
        }
        Ok(Self { files })
    }

    pub fn get(&self, path: &str) -> Result<&[u8]> {
        let missing = || format!("{path}: missing input");
        self.files.get(path).map(Vec::as_slice).ok_or_else(missing)
    }
}

/// The JSON input `file` as a `T`. Bad JSON, a key given twice (a plain map
/// keeps the last silently) and an unknown, missing or mistyped key are
/// named by their JSON path.
pub fn parse_json<T: DeserializeOwned>(file: &str, bytes: &[u8]) -> Result<T> {
    let at = |path: String, error: &dyn fmt::Display| match path.trim_start_matches('.') {
        "" => format!("{file}: {error}"),
        path => format!("{file}: {path}: {error}"),
    };
    let mut json = serde_json::Deserializer::from_slice(bytes);
    let mut track = serde_path_to_error::Track::new();
    let tracked = serde_path_to_error::Deserializer::new(&mut json, &mut track);
    let value = Strict.deserialize(tracked);
    let value = value.map_err(|error| at(track.path().to_string(), &error))?;
    json.end().map_err(|error| at(String::new(), &error))?;
    let typed = serde_path_to_error::deserialize(value);
    typed.map_err(|error| at(error.path().to_string(), error.inner()))
}

/// Reads any JSON value as a [`Value`], refusing an object key given twice.
struct Strict;

type Res<T, E> = std::result::Result<T, E>;

/// The visitor methods that keep a scalar as it is.
macro_rules! scalars {
    ($($visit:ident: $ty:ty),*) => {
        $(fn $visit<E: Error>(self, value: $ty) -> Res<Value, E> {
            Ok(value.into())
        })*
    };
}

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Res<Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_unit<E: Error>(self) -> Res<Value, E> {
        Ok(Value::Null)
    }

    scalars!(visit_bool: bool, visit_u64: u64, visit_i64: i64, visit_f64: f64, visit_str: &str);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Res<Value, A::Error> {
        let items = std::iter::from_fn(|| seq.next_element_seed(Strict).transpose());
        items.collect::<Res<_, _>>().map(Value::Array)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Res<Value, A::Error> {
        let mut entries = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if entries.contains_key(&key) {
                return Err(A::Error::custom(format!("the key `{key}` is given twice")));
            }
            entries.insert(key, map.next_value_seed(Strict)?);
        }
        Ok(Value::Object(entries))
    }
}
