//! `generated/manifest.json`: Rextio Core 0.1.6's
//! `DeviceProviderManifest(...).to_dict()` for the provider spec, with Core's
//! canonicalisation (trimmed strings, sorted unique lists, records sorted by
//! their Core sort keys).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::inputs::{as_object, as_str, mistyped, string_list, ProviderSpec, PROVIDER_SPEC_PATH};
use crate::Result;

/// Core's `_sorted_strings`: trimmed, de-duplicated, sorted by code point.
fn sorted_strings(values: Vec<String>) -> Vec<String> {
    let mut values: Vec<String> = values.into_iter().map(|v| v.trim().to_string()).collect();
    values.sort();
    values.dedup();
    values
}

fn optional_str(value: Option<&Value>, key: &str) -> Result<Option<String>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(value) => Ok(Some(as_str(value, key)?.trim().to_string())),
    }
}

/// A Core `RuntimeRequirement` as `(name, to_dict())`.
fn runtime_requirement(value: &Value, key: &str) -> Result<(String, Value)> {
    let object = as_object(value, key)?;
    let name = object
        .get("name")
        .map(|name| as_str(name, &format!("{key}.name")))
        .transpose()?
        .ok_or_else(|| format!("{PROVIDER_SPEC_PATH}: missing field `{key}.name`"))?
        .trim()
        .to_string();
    let version = optional_str(object.get("version"), &format!("{key}.version"))?;
    let features = match object.get("features") {
        None => Vec::new(),
        Some(value) => sorted_strings(string_list(value, &format!("{key}.features"))?),
    };
    Ok((
        name.clone(),
        json!({"name": name, "version": version, "features": features}),
    ))
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

fn device_requirement(value: &Value, key: &str) -> Result<(RequirementKey, Value)> {
    let object = as_object(value, key)?;
    let field = |name: &str| format!("{key}.{name}");
    let logical_device = optional_str(object.get("logical_device"), &field("logical_device"))?
        .filter(|device| !device.is_empty())
        .ok_or_else(|| mistyped(&field("logical_device"), "a non-empty string"))?;
    let backend = optional_str(object.get("backend"), &field("backend"))?;
    let runtime = optional_str(object.get("runtime"), &field("runtime"))?;
    let list = |name: &str| -> Result<Vec<String>> {
        match object.get(name) {
            None => Ok(Vec::new()),
            Some(value) => Ok(sorted_strings(string_list(value, &field(name))?)),
        }
    };
    let (features, layouts, memory_spaces, architectures) = (
        list("features")?,
        list("layouts")?,
        list("memory_spaces")?,
        list("architectures")?,
    );
    let reuse = match object.get("reuse_domain_runtime") {
        None => false,
        Some(value) => value
            .as_bool()
            .ok_or_else(|| mistyped(&field("reuse_domain_runtime"), "a boolean"))?,
    };
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
        backend.unwrap_or_default(),
        runtime.unwrap_or_default(),
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
    let backend = spec.str_at("manifest.backend")?.trim().to_lowercase();
    let architectures = sorted_strings(spec.string_list_at("manifest.architectures")?);
    let evidence = sorted_strings(spec.string_list_at("manifest.evidence_references")?);
    let tier = spec.str_at("manifest.certification_tier")?;

    let mut capabilities: BTreeMap<String, Value> = BTreeMap::new();
    for (index, capability) in spec.array_at("capabilities")?.iter().enumerate() {
        let key = format!("capabilities[{index}]");
        let object = as_object(capability, &key)?;
        let get = |name: &str| -> Result<&Value> {
            object
                .get(name)
                .ok_or_else(|| format!("{PROVIDER_SPEC_PATH}: missing field `{key}.{name}`"))
        };
        let id = as_str(get("id")?, &format!("{key}.id"))?.trim().to_string();
        let lane = as_str(get("lane")?, &format!("{key}.lane"))?;
        let lane_key = format!("lanes.{lane}");
        let lane_object = spec.object_at(&lane_key)?;
        let mut requirements = Vec::new();
        if let Some(requirement) = lane_object.get("requirement") {
            requirements.push(device_requirement(
                requirement,
                &format!("{lane_key}.requirement"),
            )?);
        }
        requirements.sort_by(|a, b| a.0.cmp(&b.0));
        requirements.dedup_by(|a, b| a.0 == b.0);
        let target = as_str(get("target_triple")?, &format!("{key}.target_triple"))?;
        let value = json!({
            "id": id,
            "target_triples": sorted_strings(vec![target.to_string()]),
            "artifact_kinds": sorted_strings(string_list(
                get("artifact_kinds")?,
                &format!("{key}.artifact_kinds"),
            )?),
            "cpu_feature_level": Value::Null,
            "cpu_features": Vec::<String>::new(),
            "accelerator_backends": sorted_strings(vec![backend.clone()]),
            "minimum_runtime_version": optional_str(
                object.get("minimum_runtime_version"),
                &format!("{key}.minimum_runtime_version"),
            )?,
            "minimum_driver_version": optional_str(
                object.get("minimum_driver_version"),
                &format!("{key}.minimum_driver_version"),
            )?,
            "architectures": architectures,
            "device_requirements": requirements.into_iter().map(|(_, dict)| dict).collect::<Vec<_>>(),
            "certification_tier": tier,
            "evidence_references": evidence,
        });
        if let Some(previous) = capabilities.insert(id.clone(), value.clone()) {
            if previous != value {
                return Err(format!(
                    "{PROVIDER_SPEC_PATH}: conflicting capabilities for `{id}`"
                ));
            }
        }
    }

    let mut runtime_requirements: BTreeMap<String, Value> = BTreeMap::new();
    for (index, requirement) in spec
        .array_at("manifest.runtime_requirements")?
        .iter()
        .enumerate()
    {
        let key = format!("manifest.runtime_requirements[{index}]");
        let (name, dict) = runtime_requirement(requirement, &key)?;
        if let Some(previous) = runtime_requirements.insert(name.clone(), dict.clone()) {
            if previous != dict {
                return Err(format!(
                    "{PROVIDER_SPEC_PATH}: conflicting runtime requirements for `{name}`"
                ));
            }
        }
    }

    Ok(json!({
        "provider_id": spec.str_at("manifest.provider_id")?.trim(),
        "display_name": spec.str_at("manifest.display_name")?.trim(),
        "provider_version": spec.str_at("manifest.provider_version")?.trim(),
        "backend": backend,
        "api_version": spec.str_at("manifest.api_version")?,
        "stability": "alpha",
        "capabilities": capabilities.into_values().collect::<Vec<_>>(),
        "runtime_requirements": runtime_requirements.into_values().collect::<Vec<_>>(),
    }))
}
