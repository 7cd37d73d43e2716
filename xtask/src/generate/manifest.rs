//! `generated/manifest.json`: the provider manifest exactly as Rextio Core's
//! `DeviceProviderManifest.to_dict()` gives it for our provider,
//! serialized as `json.dumps(value, indent=2, sort_keys=True)` writes
//! it, with one final newline. Core canonicalizes as it constructs: it
//! sorts the capabilities by id, the runtime requirements by name, and every
//! string collection (de-duplicated) of a capability and a requirement; the
//! records below are those of its `to_dict()`s, field for field.

use std::collections::BTreeSet;

use serde::Serialize;

use super::spec::{CapabilitySpec, LaneSpec, ProviderSpec, RequirementSpec, RuntimePin};
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

fn strings<'a>(items: impl IntoIterator<Item = &'a String>) -> BTreeSet<String> {
    items.into_iter().cloned().collect()
}

fn runtime_requirement(pin: &RuntimePin) -> RuntimeRequirementJson {
    RuntimeRequirementJson {
        name: pin.name.clone(),
        version: pin.version.clone(),
        features: strings(&pin.features),
    }
}

fn device_requirement(requirement: &RequirementSpec) -> DeviceRequirementJson {
    DeviceRequirementJson {
        logical_device: requirement.logical_device.clone(),
        backend: requirement.backend.clone(),
        runtime: requirement.runtime.clone(),
        features: strings(requirement.features.iter()),
        layouts: strings(requirement.layouts.iter()),
        memory_spaces: strings(requirement.memory_spaces.iter()),
        architectures: strings(&requirement.architectures),
        reuse_domain_runtime: requirement.reuse_domain_runtime,
    }
}

/// A capability: a framework lane declares its one device requirement.
fn capability(spec: &ProviderSpec, capability: &CapabilitySpec) -> CapabilityJson {
    let manifest = &spec.manifest;
    let device_requirements = match spec.lanes.get(&capability.lane) {
        Some(LaneSpec::FrameworkReuse(lane)) => vec![device_requirement(&lane.requirement)],
        Some(LaneSpec::RawDriver(_)) | None => Vec::new(),
    };
    CapabilityJson {
        id: capability.id.clone(),
        target_triples: BTreeSet::from([capability.target_triple.clone()]),
        artifact_kinds: strings(&capability.artifact_kinds),
        cpu_feature_level: None,
        cpu_features: BTreeSet::new(),
        accelerator_backends: BTreeSet::from([manifest.backend.clone()]),
        minimum_runtime_version: capability.minimum_runtime_version.clone(),
        minimum_driver_version: capability.minimum_driver_version.clone(),
        architectures: strings(manifest.architectures.iter().map(|item| &item.sm)),
        device_requirements,
        certification_tier: manifest.certification_tier.clone(),
        evidence_references: strings(&manifest.evidence_references),
    }
}

/// The manifest JSON of the parsed spec.
pub fn render(spec: &ProviderSpec) -> Result<Vec<u8>> {
    let manifest = &spec.manifest;
    let mut capabilities: Vec<CapabilityJson> = Vec::new();
    for item in &spec.capabilities {
        capabilities.push(capability(spec, item));
    }
    capabilities.sort_by(|a, b| a.id.cmp(&b.id));
    let mut runtime_requirements: Vec<RuntimeRequirementJson> = Vec::new();
    for pin in &manifest.runtime_requirements {
        runtime_requirements.push(runtime_requirement(pin));
    }
    runtime_requirements.sort_by(|a, b| a.name.cmp(&b.name));
    let json = ManifestJson {
        provider_id: manifest.provider_id.clone(),
        display_name: manifest.display_name.clone(),
        provider_version: manifest.provider_version.clone(),
        backend: manifest.backend.clone(),
        api_version: manifest.api_version.clone(),
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
