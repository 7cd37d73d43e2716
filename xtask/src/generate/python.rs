//! The generated Python: `_provider_spec.py` (the spec's record classes and
//! `PROVIDER_SPEC`), `_reason_codes.py`, `_generated.py` and pyproject.toml.

use std::collections::BTreeSet;

use toml_edit::{value, Array, DocumentMut, Item, Table};

use super::inputs::{Inputs, PROVIDER_SPEC_PATH, PYPROJECT_TEMPLATE_PATH};
use super::python_value::{header, literal, write, ToPython};
use super::spec::{record_classes, LaneSpec, ProviderSpec, PYTHON_LANE_ALIAS};
use crate::Result;

/// `_provider_spec.py`: a record class per spec record, the lane union,
/// `PROVIDER_SPEC` and the capabilities by id.
pub fn spec_module(spec: &ProviderSpec) -> Vec<u8> {
    let doc = "The provider spec as frozen records; the records are xtask/src/generate/spec.rs.";
    let mut out = header(PROVIDER_SPEC_PATH, doc);
    out.push_str(
        "from __future__ import annotations\n\n\
         from collections.abc import Mapping\n\
         from typing import Final, TypeAlias\n\n\
         from rextio_device_cuda._spec_record import SpecRecord\n",
    );
    for class in record_classes() {
        out.push_str(&class.definition());
    }
    out.push_str(&format!("\n\n{PYTHON_LANE_ALIAS}\n\n"));
    write(
        &mut out,
        0,
        "PROVIDER_SPEC: Final[ProviderSpec] = ",
        &spec.to_python(),
        "",
    );
    out.push_str(
        "CAPABILITIES: Final[Mapping[str, CapabilitySpec]] = {\n\
         \x20   capability.id: capability for capability in PROVIDER_SPEC.capabilities\n\
         }\n",
    );
    out.into_bytes()
}

/// `_generated.py`: the packaged runtime tarball's name and digest.
/// A source tarball the package carries: its file name and SHA-256.
pub struct SourceArchive {
    pub file_name: String,
    pub sha256: String,
}

impl SourceArchive {
    pub fn of(file_name: &str, bytes: &[u8]) -> Self {
        Self {
            file_name: file_name.to_string(),
            sha256: super::sha256_hex(bytes),
        }
    }
}

/// The source tarballs the package carries.
pub struct SourceArchives {
    pub runtime: SourceArchive,
    pub loader: SourceArchive,
    /// The loader crate's name: the directory `runtime-source` installs it in.
    pub loader_crate: String,
    pub probe: SourceArchive,
}

pub fn module(archives: &SourceArchives) -> Vec<u8> {
    let doc = "The packaged source tarballs' file names and SHA-256 digests (data only).";
    let mut out = header("templates/", doc) + "from typing import Final\n\n";
    let mut constant = |name: &str, annotation: &str, value: &str| {
        let value = literal(value);
        out.push_str(&format!("{name}: {annotation} = {value}\n"));
    };
    constant(
        "RUNTIME_SOURCE_ARCHIVE",
        "Final[str]",
        &archives.runtime.file_name,
    );
    constant("RUNTIME_SOURCE_SHA256", "Final", &archives.runtime.sha256);
    constant("LOADER_CRATE_NAME", "Final[str]", &archives.loader_crate);
    constant(
        "LOADER_SOURCE_ARCHIVE",
        "Final[str]",
        &archives.loader.file_name,
    );
    constant("LOADER_SOURCE_SHA256", "Final", &archives.loader.sha256);
    constant(
        "PROBE_SOURCE_ARCHIVE",
        "Final[str]",
        &archives.probe.file_name,
    );
    constant("PROBE_SOURCE_SHA256", "Final", &archives.probe.sha256);
    out.into_bytes()
}

/// The codes a framework lane refuses with: Python takes them from the
/// lane's record, never by name.
fn framework_lane_codes(spec: &ProviderSpec) -> BTreeSet<&str> {
    let mut codes = BTreeSet::new();
    for lane in spec.lanes.values() {
        let LaneSpec::FrameworkReuse(lane) = lane else {
            continue;
        };
        let lane_codes = &lane.reason_codes;
        codes.extend([
            lane_codes.artifact_kind_unsupported.as_str(),
            lane_codes.toolkit_root_unsupported.as_str(),
            lane_codes.cuda_device_unsupported.as_str(),
            lane_codes.runtime_required.as_str(),
            lane_codes.runtime_reuse_required.as_str(),
            lane_codes.features_incompatible.as_str(),
            lane_codes.layout_incompatible.as_str(),
            lane_codes.memory_space_incompatible.as_str(),
            lane_codes.runtime_pins_required.as_str(),
        ]);
        if let Some(fallback) = &lane.required_python_fallback {
            codes.insert(fallback.reason_code.as_str());
        }
    }
    codes
}

/// `_reason_codes.py`: a name for every reason code the provider's Python
/// spells (all but the framework lanes', which it reads from the lane).
pub fn reason_codes(spec: &ProviderSpec) -> Vec<u8> {
    let doc = "The reason codes, one name each (a framework lane's codes are in its record).";
    let mut out = header(PROVIDER_SPEC_PATH, doc) + "from typing import Final\n\n";
    let lane_codes = framework_lane_codes(spec);
    for code in spec.reason_codes.keys() {
        if !lane_codes.contains(code.as_str()) {
            out.push_str(&format!("{code}: Final = {}\n", literal(code)));
        }
    }
    out.into_bytes()
}

/// `python/pyproject.toml`: its template, a TOML document, with the spec's
/// distribution facts set where the template holds their keys.
pub fn pyproject(inputs: &Inputs, spec: &ProviderSpec) -> Result<Vec<u8>> {
    let path = PYPROJECT_TEMPLATE_PATH;
    let text = std::str::from_utf8(inputs.get(path)?).map_err(|_| format!("{path}: not UTF-8"))?;
    let mut document: DocumentMut = text
        .parse()
        .map_err(|error| format!("{path}: not TOML: {error}"))?;
    let distribution = &spec.distribution;
    let project = table(document.as_table_mut(), path, &["project"])?;
    set(project, path, "name", value(&distribution.name))?;
    set(project, path, "version", value(&distribution.version))?;
    let requires_python = value(&distribution.requires_python);
    set(project, path, "requires-python", requires_python)?;
    let dependencies = Array::from_iter(&distribution.dependencies);
    set(project, path, "dependencies", value(dependencies))?;
    set(project, path, "license", value(&distribution.license))?;
    // The one table under `entry-points`, renamed after the group where it stands.
    let entry_points = table(document.as_table_mut(), path, &["project", "entry-points"])?;
    let (_, mut group) = entry_points
        .iter()
        .next()
        .filter(|_| entry_points.len() == 1)
        .and_then(|(key, item)| Some((key.to_owned(), item.as_table()?.clone())))
        .ok_or_else(|| format!("{path}: [project.entry-points] must hold one table"))?;
    entry_points.clear();
    let entry_point = &distribution.entry_point;
    group.clear();
    group.insert(&entry_point.name, value(&entry_point.value));
    entry_points.insert(&entry_point.group, Item::Table(group));
    let wheel = ["tool", "hatch", "build", "targets", "wheel"];
    let wheel = table(document.as_table_mut(), path, &wheel)?;
    let packages = Array::from_iter([&distribution.import_name]);
    set(wheel, path, "packages", value(packages))?;
    let marker = format!(
        "# @generated by `cargo xtask generate` from {path} and {PROVIDER_SPEC_PATH}; do not edit.\n"
    );
    Ok((marker + &document.to_string()).into_bytes())
}

/// The table at `keys`, from the document's root.
fn table<'a>(root: &'a mut Table, path: &str, keys: &[&str]) -> Result<&'a mut Table> {
    let mut table = root;
    for key in keys {
        let missing = || format!("{path}: no [{}] table", keys.join("."));
        table = table
            .get_mut(key)
            .and_then(Item::as_table_mut)
            .ok_or_else(missing)?;
    }
    Ok(table)
}

/// Sets `key` of `table`, which the template must hold (so that it decides
/// where each fact stands).
fn set(table: &mut Table, path: &str, key: &str, item: Item) -> Result<()> {
    let slot = table
        .get_mut(key)
        .ok_or_else(|| format!("{path}: the template has no `{key}` for the generator to set"))?;
    *slot = item;
    Ok(())
}
