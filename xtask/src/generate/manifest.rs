//! `generated/manifest.json`: Rextio Core 0.1.6's
//! `DeviceProviderManifest(...).to_dict()` for the provider spec, with Core's
//! canonicalisation (trimmed strings, sorted unique lists, records sorted by
//! their Core sort keys).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::spec::{refuse, ProviderSpec, RequirementSpec, RuntimePin};
use crate::Result;

/// Core's `_sorted_strings`: trimmed, de-duplicated, sorted by code point.
fn sorted_strings<'a>(values: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    let mut values: Vec<String> = values.into_iter().map(|v| v.trim().to_string()).collect();
    values.sort();
    values.dedup();
    values
}

/// A Core `RuntimeRequirement` as `(name, to_dict())`.
fn runtime_requirement(pin: &RuntimePin) -> (String, Value) {
    let name = pin.name.trim().to_string();
    let dict = json!({
        "name": name,
        "version": pin.version.trim(),
        "features": sorted_strings(&pin.features),
    });
    (name, dict)
}

/// Core's sort key of a `DeviceRequirement`, beside its `to_dict()`.
type RequirementKey = (
    String,
    String,
    String,
    Vec<String>,
    Vec<String>,
    Vec<String>,
    Vec<String>,
    bool,
);

fn device_requirement(
    requirement: &RequirementSpec,
    path: &str,
) -> Result<(RequirementKey, Value)> {
    let logical_device = requirement.logical_device.trim().to_string();
    if logical_device.is_empty() {
        return Err(refuse(
            format!("{path}.logical_device"),
            "the device is empty",
        ));
    }
    let backend = requirement.backend.trim().to_string();
    let runtime = requirement.runtime.trim().to_string();
    let (features, layouts, memory_spaces, architectures) = (
        sorted_strings(requirement.features.iter()),
        sorted_strings(requirement.layouts.iter()),
        sorted_strings(requirement.memory_spaces.iter()),
        sorted_strings(&requirement.architectures),
    );
    let reuse = requirement.reuse_domain_runtime;
    let dict = json!({
        "logical_device": logical_device,
        "backend": backend,
        "runtime": runtime,
        "features": features,
        "layouts": layouts,
        "memory_spaces": memory_spaces,
        "architectures": architectures,
        "reuse_domain_runtime": reuse,
    });
    let sort_key = (
        logical_device,
        backend,
        runtime,
        features,
        layouts,
        memory_spaces,
        architectures,
        reuse,
    );
    Ok((sort_key, dict))
}

/// The manifest's `to_dict()` as a JSON value.
pub fn manifest_value(spec: &ProviderSpec) -> Result<Value> {
    let manifest = &spec.manifest;
    let backend = manifest.backend.trim().to_lowercase();
    let architectures = sorted_strings(manifest.architectures.iter().map(|item| &item.sm));
    let evidence = sorted_strings(&manifest.evidence_references);
    let tier = &manifest.certification_tier;

    let mut capabilities: BTreeMap<String, Value> = BTreeMap::new();
    for (index, capability) in spec.capabilities.iter().enumerate() {
        let id = capability.id.trim().to_string();
        let lane_path = format!("lanes.{}", capability.lane);
        let lane = spec.lanes.get(&capability.lane).ok_or_else(|| {
            refuse(
                format!("capabilities[{index}].lane"),
                format!("`{}` is not a key of `lanes`", capability.lane),
            )
        })?;
        let mut requirements = Vec::new();
        if let Some(requirement) = &lane.requirement {
            requirements.push(device_requirement(
                requirement,
                &format!("{lane_path}.requirement"),
            )?);
        }
        requirements.sort_by(|a, b| a.0.cmp(&b.0));
        requirements.dedup_by(|a, b| a.0 == b.0);
        let value = json!({
            "id": id,
            "target_triples": sorted_strings([&capability.target_triple]),
            "artifact_kinds": sorted_strings(&capability.artifact_kinds),
            "cpu_feature_level": Value::Null,
            "cpu_features": Vec::<String>::new(),
            "accelerator_backends": vec![backend.clone()],
            "minimum_runtime_version": capability.minimum_runtime_version.trim(),
            "minimum_driver_version": capability.minimum_driver_version.trim(),
            "architectures": architectures,
            "device_requirements": requirements.into_iter().map(|(_, dict)| dict).collect::<Vec<_>>(),
            "certification_tier": tier,
            "evidence_references": evidence,
        });
        if let Some(previous) = capabilities.insert(id.clone(), value.clone()) {
            if previous != value {
                return Err(refuse(
                    format!("capabilities[{index}].id"),
                    format!("conflicting capabilities for `{id}`"),
                ));
            }
        }
    }

    let mut runtime_requirements: BTreeMap<String, Value> = BTreeMap::new();
    for (index, pin) in manifest.runtime_requirements.iter().enumerate() {
        let (name, dict) = runtime_requirement(pin);
        if let Some(previous) = runtime_requirements.insert(name.clone(), dict.clone()) {
            if previous != dict {
                return Err(refuse(
                    format!("manifest.runtime_requirements[{index}]"),
                    format!("conflicting runtime requirements for `{name}`"),
                ));
            }
        }
    }

    Ok(json!({
        "provider_id": manifest.provider_id.trim(),
        "display_name": manifest.display_name.trim(),
        "provider_version": manifest.provider_version.trim(),
        "backend": backend,
        "api_version": manifest.api_version,
        "stability": "alpha",
        "capabilities": capabilities.into_values().collect::<Vec<_>>(),
        "runtime_requirements": runtime_requirements.into_values().collect::<Vec<_>>(),
    }))
}
