//! `generated/manifest.json`: the provider manifest exactly as Rextio Core's
//! `DeviceProviderManifest.to_dict()` gives it for our provider (contract
//! 2), serialized as `json.dumps(value, indent=2, sort_keys=True)` writes
//! it, with one final newline. Core canonicalizes as it constructs: it
//! sorts the capabilities by id, the runtime requirements by name, and every
//! string collection (de-duplicated) of a capability and a requirement; the
//! records below are those of its `to_dict()`s, field for field.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

use super::spec::{items, text};
use crate::Result;

pub const MANIFEST_PATH: &str = "generated/manifest.json";

/// Core's `DeviceProviderManifest.to_dict()`.
#[derive(Serialize)]
struct ManifestJson {
    provider_id: String,
    display_name: String,
    provider_version: String,
    backend: String,
    api_version: String,
    /// Core writes this constant for every API-1 manifest.
    stability: &'static str,
    capabilities: Vec<CapabilityJson>,
    runtime_requirements: Vec<RuntimeRequirementJson>,
}

/// Core's `TargetCapability.to_dict()`.
#[derive(Serialize)]
struct CapabilityJson {
    id: String,
    target_triples: BTreeSet<String>,
    artifact_kinds: BTreeSet<String>,
    cpu_feature_level: Option<String>,
    cpu_features: BTreeSet<String>,
    accelerator_backends: BTreeSet<String>,
    minimum_runtime_version: String,
    minimum_driver_version: String,
    architectures: BTreeSet<String>,
    device_requirements: Vec<DeviceRequirementJson>,
    certification_tier: String,
    evidence_references: BTreeSet<String>,
}

/// Core's `DeviceRequirement.to_dict()`.
#[derive(Serialize)]
struct DeviceRequirementJson {
    logical_device: String,
    backend: String,
    runtime: String,
    features: BTreeSet<String>,
    layouts: BTreeSet<String>,
    memory_spaces: BTreeSet<String>,
    architectures: BTreeSet<String>,
    reuse_domain_runtime: bool,
}

/// Core's `RuntimeRequirement.to_dict()`.
#[derive(Serialize)]
struct RuntimeRequirementJson {
    name: String,
    version: String,
    features: BTreeSet<String>,
}

fn strings(value: &Value) -> BTreeSet<String> {
    items(value)
        .iter()
        .map(|item| text(item).to_string())
        .collect()
}

fn runtime_requirement(pin: &Value) -> RuntimeRequirementJson {
    RuntimeRequirementJson {
        name: text(&pin["name"]).to_string(),
        version: text(&pin["version"]).to_string(),
        features: strings(&pin["features"]),
    }
}

fn device_requirement(requirement: &Value) -> DeviceRequirementJson {
    DeviceRequirementJson {
        logical_device: text(&requirement["logical_device"]).to_string(),
        backend: text(&requirement["backend"]).to_string(),
        runtime: text(&requirement["runtime"]).to_string(),
        features: strings(&requirement["features"]),
        layouts: strings(&requirement["layouts"]),
        memory_spaces: strings(&requirement["memory_spaces"]),
        architectures: strings(&requirement["architectures"]),
        reuse_domain_runtime: requirement["reuse_domain_runtime"].as_bool() == Some(true),
    }
}

fn capability(spec: &Value, capability: &Value) -> CapabilityJson {
    let manifest = &spec["manifest"];
    let lane = &spec["lanes"][text(&capability["lane"])];
    let requirement = &lane["requirement"];
    let device_requirements = match requirement.is_null() {
        true => Vec::new(),
        false => vec![device_requirement(requirement)],
    };
    let architectures = items(&manifest["architectures"]).iter();
    CapabilityJson {
        id: text(&capability["id"]).to_string(),
        target_triples: BTreeSet::from([text(&capability["target_triple"]).to_string()]),
        artifact_kinds: strings(&capability["artifact_kinds"]),
        cpu_feature_level: None,
        cpu_features: BTreeSet::new(),
        accelerator_backends: BTreeSet::from([text(&manifest["backend"]).to_string()]),
        minimum_runtime_version: text(&capability["minimum_runtime_version"]).to_string(),
        minimum_driver_version: text(&capability["minimum_driver_version"]).to_string(),
        architectures: architectures
            .map(|item| text(&item["sm"]).to_string())
            .collect(),
        device_requirements,
        certification_tier: text(&manifest["certification_tier"]).to_string(),
        evidence_references: strings(&manifest["evidence_references"]),
    }
}

/// The manifest JSON of the parsed spec.
pub fn render(spec: &Value) -> Result<Vec<u8>> {
    let manifest = &spec["manifest"];
    let mut capabilities: Vec<CapabilityJson> = items(&spec["capabilities"])
        .iter()
        .map(|item| capability(spec, item))
        .collect();
    capabilities.sort_by(|a, b| a.id.cmp(&b.id));
    let mut runtime_requirements: Vec<RuntimeRequirementJson> =
        items(&manifest["runtime_requirements"])
            .iter()
            .map(runtime_requirement)
            .collect();
    runtime_requirements.sort_by(|a, b| a.name.cmp(&b.name));
    let json = ManifestJson {
        provider_id: text(&manifest["provider_id"]).to_string(),
        display_name: text(&manifest["display_name"]).to_string(),
        provider_version: text(&manifest["provider_version"]).to_string(),
        backend: text(&manifest["backend"]).to_string(),
        api_version: text(&manifest["api_version"]).to_string(),
        stability: "alpha",
        capabilities,
        runtime_requirements,
    };
    sorted_json(&json)
}

/// `value` as Python's `json.dumps(value, indent=2, sort_keys=True)` writes
/// it (ASCII text here), then a newline: serde_json's objects are sorted maps.
pub fn sorted_json(value: &impl Serialize) -> Result<Vec<u8>> {
    let value = serde_json::to_value(value).map_err(|error| error.to_string())?;
    let text = serde_json::to_string_pretty(&value).map_err(|error| error.to_string())?;
    // Python escapes other characters as `\uXXXX`; serde_json does not.
    if !text.is_ascii() {
        return Err(format!("not ASCII, so not as Python writes it: {text}"));
    }
    Ok((text + "\n").into_bytes())
}
