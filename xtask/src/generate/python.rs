//! The generated Python: `_provider_spec.py` (the spec's record classes and
//! `PROVIDER_SPEC`), `_reason_codes.py`, `_generated.py` and pyproject.toml.

use std::collections::BTreeSet;

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

/// A TOML string: JSON's spelling of a plain string is TOML's.
fn toml_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// `python/pyproject.toml`: its template with the spec's distribution facts
/// in place of each `{{key}}`.
pub fn pyproject(inputs: &Inputs, spec: &ProviderSpec) -> Result<Vec<u8>> {
    let path = PYPROJECT_TEMPLATE_PATH;
    let text = std::str::from_utf8(inputs.get(path)?).map_err(|_| format!("{path}: not UTF-8"))?;
    let distribution = &spec.distribution;
    let dependencies: Vec<String> = distribution
        .dependencies
        .iter()
        .map(|d| toml_string(d))
        .collect();
    let entry_point = &distribution.entry_point;
    let facts = [
        ("name", toml_string(&distribution.name)),
        ("import_name", toml_string(&distribution.import_name)),
        ("version", toml_string(&distribution.version)),
        (
            "requires_python",
            toml_string(&distribution.requires_python),
        ),
        ("dependencies", format!("[{}]", dependencies.join(","))),
        ("license", toml_string(&distribution.license)),
        ("entry_point_group", toml_string(&entry_point.group)),
        ("entry_point_name", toml_string(&entry_point.name)),
        ("entry_point_value", toml_string(&entry_point.value)),
    ];
    let marker = format!(
        "# @generated by `cargo xtask generate` from {path} and {PROVIDER_SPEC_PATH}; do not edit.\n"
    );
    let mut out = marker + text;
    for (key, value) in facts {
        out = out.replace(&format!("{{{{{key}}}}}"), &value);
    }
    if let Some(start) = out.find("{{") {
        let rest = &out[start..];
        let end = rest.find("}}").map_or(rest.len(), |end| end + 2);
        return Err(format!(
            "{path}: `{}` is not a distribution fact",
            &rest[..end]
        ));
    }
    Ok(out.into_bytes())
}
