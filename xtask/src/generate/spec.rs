//! `templates/provider-spec.json`, typed: one schema that the generator
//! parses once (unknown, missing and mistyped keys refused with their JSON
//! path), checks for broken cross-references, and renders as Python frozen
//! dataclasses, so the Python package never retypes it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

pub use super::inputs::PROVIDER_SPEC_PATH;
use super::python::{PyClass, PyExpr, PyValue};
use crate::Result;

/// Declares one spec record: a serde struct that refuses unknown keys, and
/// its Python dataclass (the same field names; types derived by [`PyValue`]).
macro_rules! record {
    (
        $(#[doc = $doc:literal])*
        pub struct $name:ident {
            $(
                $(#[doc = $field_doc:literal])*
                $(#[serde $serde:tt])?
                pub $field:ident : $type:ty,
            )*
        }
    ) => {
        $(#[doc = $doc])*
        #[derive(Clone, Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $(
                $(#[doc = $field_doc])*
                $(#[serde $serde])?
                pub $field: $type,
            )*
        }

        impl PyValue for $name {
            fn annotation() -> String {
                stringify!($name).to_string()
            }

            fn expr(&self) -> PyExpr {
                PyExpr::Call(
                    stringify!($name).to_string(),
                    vec![$((stringify!($field).to_string(), self.$field.expr()),)*],
                )
            }
        }

        impl $name {
            /// The Python dataclass of this record.
            pub fn class() -> PyClass {
                PyClass {
                    name: stringify!($name),
                    doc: vec![$($doc.trim()),*],
                    fields: vec![$((stringify!($field).to_string(), <$type as PyValue>::annotation()),)*],
                }
            }
        }
    };
}

/// A JSON object with string keys, in key order; a key given twice is refused
/// (a plain map would keep the last silently, which hides merge mistakes).
#[derive(Clone, Debug)]
pub struct Map<V>(pub BTreeMap<String, V>);

impl<V> Map<V> {
    pub fn get(&self, key: &str) -> Option<&V> {
        self.0.get(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &V)> {
        self.0.iter()
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Map<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct MapVisitor<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for MapVisitor<V> {
            type Value = Map<V>;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut access: A,
            ) -> std::result::Result<Map<V>, A::Error> {
                let mut map = BTreeMap::new();
                while let Some(key) = access.next_key::<String>()? {
                    if map.contains_key(&key) {
                        return Err(serde::de::Error::custom(format!(
                            "the key `{key}` is given twice"
                        )));
                    }
                    let value = access.next_value()?;
                    map.insert(key, value);
                }
                Ok(Map(map))
            }
        }
        deserializer.deserialize_map(MapVisitor(PhantomData))
    }
}

impl<V: PyValue> PyValue for Map<V> {
    fn annotation() -> String {
        format!("Mapping[str, {}]", V::annotation())
    }

    fn expr(&self) -> PyExpr {
        PyExpr::Dict(
            self.0
                .iter()
                .map(|(key, value)| (key.clone(), value.expr()))
                .collect(),
        )
    }
}

/// A JSON list whose order means nothing: a `frozenset` in Python. An entry
/// given twice is refused.
#[derive(Clone, Debug)]
pub struct Set<T>(pub BTreeSet<T>);

impl<T: Ord> Set<T> {
    pub fn contains(&self, item: &T) -> bool {
        self.0.contains(item)
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.0.iter()
    }
}

impl<'de, T: Deserialize<'de> + Ord + fmt::Debug> Deserialize<'de> for Set<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct SetVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de> + Ord + fmt::Debug> Visitor<'de> for SetVisitor<T> {
            type Value = Set<T>;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("a list")
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut access: A,
            ) -> std::result::Result<Set<T>, A::Error> {
                let mut set = BTreeSet::new();
                while let Some(item) = access.next_element::<T>()? {
                    if set.contains(&item) {
                        return Err(serde::de::Error::custom(format!(
                            "the entry {item:?} is given twice"
                        )));
                    }
                    set.insert(item);
                }
                Ok(Set(set))
            }
        }
        deserializer.deserialize_seq(SetVisitor(PhantomData))
    }
}

impl<T: PyValue> PyValue for Set<T> {
    fn annotation() -> String {
        format!("frozenset[{}]", T::annotation())
    }

    fn expr(&self) -> PyExpr {
        PyExpr::FrozenSet(self.0.iter().map(PyValue::expr).collect())
    }
}

record! {
    /// The whole provider spec: every fact of the provider, once.
    pub struct ProviderSpec {
        pub schema_version: u32,
        pub distribution: DistributionSpec,
        pub manifest: ManifestSpec,
        pub policy: PolicySpec,
        pub option_keys: OptionKeysSpec,
        pub capabilities: Vec<CapabilitySpec>,
        pub probe_targets: Map<ProbeTargetSpec>,
        pub lanes: Map<LaneSpec>,
        pub observation_keys: ObservationKeysSpec,
        pub probe_report: ProbeReportSpec,
        pub validation_requirement: ValidationRequirementSpec,
        pub probe_runner: ProbeRunnerSpec,
        pub toolkit: ToolkitSpec,
        pub smoke: SmokeSpec,
        pub runtime_package: RuntimePackageSpec,
        /// Codes refused with status `incompatible` (the others: `unavailable`).
        pub incompatible_reason_codes: Vec<String>,
        /// Every reason code: `[explanation, remedy]`.
        pub reason_codes: Map<(String, String)>,
    }
}

record! {
    /// The Python distribution's metadata.
    pub struct DistributionSpec {
        pub name: String,
        pub import_name: String,
        pub version: String,
        pub requires_python: String,
        pub dependencies: Vec<String>,
        pub license: String,
        pub entry_point: EntryPointSpec,
    }
}

record! {
    /// The entry point Rextio Core loads the provider from.
    pub struct EntryPointSpec {
        pub group: String,
        pub name: String,
        pub value: String,
    }
}

record! {
    /// The passive provider manifest.
    pub struct ManifestSpec {
        pub provider_id: String,
        pub display_name: String,
        pub provider_version: String,
        pub backend: String,
        pub api_version: String,
        pub runtime_requirements: Vec<RuntimePin>,
        /// The SM vocabulary, `sm_NN` or `sm_NNN`.
        pub architectures: Vec<String>,
        pub evidence_references: Vec<String>,
        pub certification_tier: String,
    }
}

record! {
    /// A runtime requirement: a name, an exact version and its features.
    pub struct RuntimePin {
        pub name: String,
        pub version: String,
        pub features: Vec<String>,
    }
}

record! {
    /// Bounds the provider enforces on its configuration.
    pub struct PolicySpec {
        pub driver_version_floor: u32,
        pub driver_version_ceiling: u32,
        /// `(major, minor)`.
        pub toolkit_version_floor: (u32, u32),
        pub toolkit_version_part_max: u32,
        pub device_ordinal_max: u32,
        pub sm_pattern: String,
    }
}

record! {
    /// The device option names.
    pub struct OptionKeysSpec {
        pub probe: String,
        pub toolkit: String,
        pub device: String,
        pub sm: String,
        pub probe_sha256: String,
    }
}

record! {
    /// One declared capability; `lane` names a key of `lanes`.
    pub struct CapabilitySpec {
        pub id: String,
        pub lane: String,
        pub target_triple: String,
        pub artifact_kinds: Vec<String>,
        pub minimum_runtime_version: String,
        pub minimum_driver_version: String,
    }
}

record! {
    /// The (os, arch, environment) a probe reports for a target triple.
    pub struct ProbeTargetSpec {
        pub os: String,
        pub arch: String,
        pub environment: String,
    }
}

record! {
    /// One lane: raw-driver (with `requirement_policy`), or a framework
    /// runtime-reuse lane (with `reason_prefix`, `requirement` and `runtime_pins`).
    pub struct LaneSpec {
        #[serde(default)]
        pub reason_prefix: Option<String>,
        pub option_allowlist: Set<String>,
        pub toolkit_inspection: bool,
        /// Absent or null: any Python fallback backend.
        #[serde(default)]
        pub required_python_fallback_backend: Option<String>,
        #[serde(default)]
        pub requirement_policy: Option<RawRequirementPolicy>,
        #[serde(default)]
        pub requirement: Option<RequirementSpec>,
        #[serde(default)]
        pub runtime_pins: Vec<RuntimePin>,
        pub observations: Map<String>,
        pub contribution: ContributionSpec,
    }
}

record! {
    /// What a raw-driver lane accepts in a CUDA device requirement.
    pub struct RawRequirementPolicy {
        pub allowed_runtimes: Set<Option<String>>,
        pub allowed_features: Set<String>,
        pub allowed_memory_spaces: Set<String>,
        pub allowed_layouts: Set<String>,
    }
}

record! {
    /// The one device requirement a framework lane declares and accepts.
    pub struct RequirementSpec {
        pub logical_device: String,
        pub backend: String,
        pub runtime: String,
        pub features: Set<String>,
        pub layouts: Set<String>,
        pub memory_spaces: Set<String>,
        pub architectures: Vec<String>,
        pub reuse_domain_runtime: bool,
    }
}

record! {
    /// The declarative build inputs of one lane.
    pub struct ContributionSpec {
        pub cargo_features: Vec<String>,
        pub native_libraries: Vec<String>,
        pub package_references: Vec<String>,
        pub generated_helper_ids: Vec<String>,
        pub runtime_check_ids: Vec<String>,
        pub resource_contracts: Vec<ResourceContractSpec>,
    }
}

record! {
    /// One resource contract of a lane's build contribution.
    pub struct ResourceContractSpec {
        pub resource_kind: String,
        pub owner: String,
        pub access: String,
        pub may_allocate: bool,
        pub may_replace: bool,
        pub may_synchronize: bool,
    }
}

record! {
    /// The observation keys of a ready preflight.
    pub struct ObservationKeysSpec {
        pub device_count: String,
        pub driver_version: String,
        pub minimum_driver_version: String,
        pub minimum_toolkit_version: String,
        pub probe_schema: String,
        pub selected_device: String,
        pub selected_sm: String,
        pub target_arch: String,
        pub target_os: String,
        pub toolkit_runtime: String,
        pub toolkit_version: String,
        pub toolkit_not_configured: String,
        pub probe_sha256: String,
    }
}

record! {
    /// The probe report's schema and bounds.
    pub struct ProbeReportSpec {
        pub schema_version: String,
        pub probe: String,
        pub statuses: Vec<String>,
        pub complete_status: String,
        pub max_output_bytes: u64,
        pub max_devices: u32,
        pub max_device_ordinal: u32,
        pub max_device_name_chars: u32,
        pub device_name_buffer_bytes: u32,
        pub driver_version_range: (i32, i32),
        pub compute_major_range: (i32, i32),
        pub compute_minor_range: (i32, i32),
        pub reason_code_pattern: String,
        pub target_field_pattern: String,
        /// Set before `cuInit`.
        pub driver_environment: Map<String>,
        /// The codes the probe itself reports.
        pub reason_codes: Vec<String>,
    }
}

record! {
    /// The raw-driver requirement `validate-nvidia` and the CLI compose.
    pub struct ValidationRequirementSpec {
        pub runtime: String,
        pub features: Vec<String>,
        pub memory_spaces: Vec<String>,
    }
}

record! {
    /// Bounds of the probe subprocess.
    pub struct ProbeRunnerSpec {
        pub default_timeout_seconds: f64,
        pub max_timeout_seconds: f64,
        pub max_argument_chars: u32,
        pub windows_environment: Vec<String>,
        pub sha256_pattern: String,
        /// A pinned probe above this many bytes is refused before it is read whole.
        pub max_pinned_probe_bytes: u32,
    }
}

record! {
    /// What the toolkit inspector reads.
    pub struct ToolkitSpec {
        pub version_file: String,
        pub max_version_file_bytes: u32,
        pub version_pattern: String,
        /// os -> component -> candidate relative paths (`{arch}` substituted).
        pub components: Map<Map<Vec<String>>>,
    }
}

record! {
    /// The lifetime smoke's report.
    pub struct SmokeSpec {
        pub probe: String,
        pub schema_version: String,
        pub allocation_bytes: u64,
        pub complete_status: String,
        pub failure_status: String,
    }
}

record! {
    /// The packaged runtime crate.
    pub struct RuntimePackageSpec {
        /// The JSON key is `crate`, a Rust keyword.
        #[serde(rename = "crate")]
        pub crate_name: String,
        pub version: String,
        pub install_dir: String,
    }
}

/// Every record's Python dataclass, in output order.
pub fn python_classes() -> Vec<PyClass> {
    vec![
        ProviderSpec::class(),
        DistributionSpec::class(),
        EntryPointSpec::class(),
        ManifestSpec::class(),
        RuntimePin::class(),
        PolicySpec::class(),
        OptionKeysSpec::class(),
        CapabilitySpec::class(),
        ProbeTargetSpec::class(),
        LaneSpec::class(),
        RawRequirementPolicy::class(),
        RequirementSpec::class(),
        ContributionSpec::class(),
        ResourceContractSpec::class(),
        ObservationKeysSpec::class(),
        ProbeReportSpec::class(),
        ValidationRequirementSpec::class(),
        ProbeRunnerSpec::class(),
        ToolkitSpec::class(),
        SmokeSpec::class(),
        RuntimePackageSpec::class(),
    ]
}

/// `path: message`, prefixed with the spec's file name.
pub fn refuse(path: impl fmt::Display, message: impl fmt::Display) -> String {
    format!("{PROVIDER_SPEC_PATH}: {path}: {message}")
}

impl ProviderSpec {
    /// Parses and checks the spec; every error names the file and the JSON path.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let mut deserializer = serde_json::Deserializer::from_slice(bytes);
        let spec: Self = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
            let path = error.path().to_string();
            if path == "." {
                format!("{PROVIDER_SPEC_PATH}: {}", error.inner())
            } else {
                refuse(path, error.inner())
            }
        })?;
        deserializer
            .end()
            .map_err(|error| format!("{PROVIDER_SPEC_PATH}: {error}"))?;
        spec.check()?;
        Ok(spec)
    }

    /// The runtime tarball's stem, e.g. `rextio-cuda-runtime-0.1.0`.
    pub fn runtime_archive_stem(&self) -> String {
        format!(
            "{}-{}",
            self.runtime_package.crate_name, self.runtime_package.version
        )
    }

    /// The cross-reference and bound checks serde cannot express.
    fn check(&self) -> Result<()> {
        if self.schema_version != 1 {
            return Err(refuse(
                "schema_version",
                format!("{} is not supported (expected 1)", self.schema_version),
            ));
        }
        self.check_reason_codes()?;
        self.check_vocabulary()?;
        self.check_capabilities()?;
        self.check_lanes()?;
        self.check_bounds()?;
        Ok(())
    }

    fn check_reason_codes(&self) -> Result<()> {
        for (code, (explanation, remedy)) in self.reason_codes.iter() {
            let path = format!("reason_codes.{code}");
            if !is_reason_code(code) {
                return Err(refuse(
                    path,
                    "the code does not match ^[A-Z][A-Z0-9_]{0,63}$",
                ));
            }
            if explanation.trim().is_empty() || remedy.trim().is_empty() {
                return Err(refuse(
                    path,
                    "the explanation and the remedy must not be empty",
                ));
            }
        }
        let lists = [
            ("probe_report.reason_codes", &self.probe_report.reason_codes),
            ("incompatible_reason_codes", &self.incompatible_reason_codes),
        ];
        for (list_path, codes) in lists {
            let mut seen = BTreeSet::new();
            for (index, code) in codes.iter().enumerate() {
                let path = format!("{list_path}[{index}]");
                if !seen.insert(code) {
                    return Err(refuse(path, format!("`{code}` is listed twice")));
                }
                self.known_code(&path, code)?;
            }
        }
        Ok(())
    }

    /// Fails unless `code` has an explanation and a remedy in `reason_codes`.
    fn known_code(&self, path: &str, code: &str) -> Result<()> {
        if self.reason_codes.contains_key(code) {
            Ok(())
        } else {
            Err(refuse(
                path,
                format!("the reason code `{code}` has no entry in `reason_codes`"),
            ))
        }
    }

    fn check_vocabulary(&self) -> Result<()> {
        let mut seen = BTreeSet::new();
        for (index, sm) in self.manifest.architectures.iter().enumerate() {
            let path = format!("manifest.architectures[{index}]");
            if !is_sm(sm) {
                return Err(refuse(path, format!("`{sm}` is not sm_NN or sm_NNN")));
            }
            if !seen.insert(sm) {
                return Err(refuse(path, format!("`{sm}` is listed twice")));
            }
        }
        if seen.is_empty() {
            return Err(refuse(
                "manifest.architectures",
                "the SM vocabulary is empty",
            ));
        }
        Ok(())
    }

    fn check_lanes(&self) -> Result<()> {
        let option_names: BTreeSet<&str> = [
            &self.option_keys.probe,
            &self.option_keys.toolkit,
            &self.option_keys.device,
            &self.option_keys.sm,
            &self.option_keys.probe_sha256,
        ]
        .into_iter()
        .map(String::as_str)
        .collect();
        for (name, lane) in self.lanes.iter() {
            let path = format!("lanes.{name}");
            for option in lane.option_allowlist.iter() {
                if !option_names.contains(option.as_str()) {
                    return Err(refuse(
                        format!("{path}.option_allowlist"),
                        format!("`{option}` is not one of the `option_keys`"),
                    ));
                }
            }
            match (&lane.requirement_policy, &lane.requirement) {
                (Some(_), None) => self.check_raw_lane(&path, lane)?,
                (None, Some(requirement)) => self.check_framework_lane(&path, lane, requirement)?,
                _ => {
                    return Err(refuse(
                        path,
                        "a lane has exactly one of `requirement_policy` (raw-driver) \
                         and `requirement` (framework reuse)",
                    ))
                }
            }
            if !self.capabilities.iter().any(|item| &item.lane == name) {
                return Err(refuse(path, "no capability uses this lane"));
            }
        }
        Ok(())
    }

    fn check_raw_lane(&self, path: &str, lane: &LaneSpec) -> Result<()> {
        let framework_only = [
            ("reason_prefix", lane.reason_prefix.is_some()),
            (
                "required_python_fallback_backend",
                lane.required_python_fallback_backend.is_some(),
            ),
            ("runtime_pins", !lane.runtime_pins.is_empty()),
        ];
        for (key, present) in framework_only {
            if present {
                return Err(refuse(
                    format!("{path}.{key}"),
                    "only a framework reuse lane (one with `requirement`) has this key",
                ));
            }
        }
        let validation = &self.validation_requirement;
        let policy = lane.requirement_policy.as_ref();
        let accepted = policy.is_some_and(|policy| {
            policy
                .allowed_runtimes
                .contains(&Some(validation.runtime.clone()))
                && validation
                    .features
                    .iter()
                    .all(|item| policy.allowed_features.contains(item))
                && validation
                    .memory_spaces
                    .iter()
                    .all(|item| policy.allowed_memory_spaces.contains(item))
        });
        if accepted {
            Ok(())
        } else {
            Err(refuse(
                "validation_requirement",
                format!("the requirement is not accepted by `{path}.requirement_policy`"),
            ))
        }
    }

    fn check_framework_lane(
        &self,
        path: &str,
        lane: &LaneSpec,
        requirement: &RequirementSpec,
    ) -> Result<()> {
        let Some(prefix) = &lane.reason_prefix else {
            return Err(refuse(
                path,
                "missing field `reason_prefix` (a framework reuse lane needs one)",
            ));
        };
        if !is_reason_code(prefix) || !prefix.ends_with('_') {
            return Err(refuse(
                format!("{path}.reason_prefix"),
                format!("`{prefix}` is not an upper-case code prefix ending in `_`"),
            ));
        }
        if !self
            .reason_codes
            .iter()
            .any(|(code, _)| code.starts_with(prefix))
        {
            return Err(refuse(
                format!("{path}.reason_prefix"),
                format!("no reason code starts with `{prefix}`"),
            ));
        }
        if lane.runtime_pins.is_empty() {
            return Err(refuse(
                format!("{path}.runtime_pins"),
                "a framework reuse lane pins at least one runtime",
            ));
        }
        for (index, sm) in requirement.architectures.iter().enumerate() {
            if !self.manifest.architectures.contains(sm) {
                return Err(refuse(
                    format!("{path}.requirement.architectures[{index}]"),
                    format!("`{sm}` is not in `manifest.architectures`"),
                ));
            }
        }
        Ok(())
    }

    fn check_capabilities(&self) -> Result<()> {
        let mut ids = BTreeSet::new();
        for (index, capability) in self.capabilities.iter().enumerate() {
            let path = format!("capabilities[{index}]");
            if !ids.insert(&capability.id) {
                return Err(refuse(
                    format!("{path}.id"),
                    format!("`{}` is declared twice", capability.id),
                ));
            }
            if !self.lanes.contains_key(&capability.lane) {
                return Err(refuse(
                    format!("{path}.lane"),
                    format!("`{}` is not a key of `lanes`", capability.lane),
                ));
            }
            let Some(target) = self.probe_targets.get(&capability.target_triple) else {
                return Err(refuse(
                    format!("{path}.target_triple"),
                    format!(
                        "`{}` is not a key of `probe_targets`",
                        capability.target_triple
                    ),
                ));
            };
            if !self.toolkit.components.contains_key(&target.os) {
                return Err(refuse(
                    format!("probe_targets.{}.os", capability.target_triple),
                    format!("`{}` is not a key of `toolkit.components`", target.os),
                ));
            }
            if capability.artifact_kinds.is_empty() {
                return Err(refuse(
                    format!("{path}.artifact_kinds"),
                    "a capability builds at least one artifact kind",
                ));
            }
        }
        if ids.is_empty() {
            return Err(refuse("capabilities", "no capability is declared"));
        }
        Ok(())
    }

    /// The bounds the generated Rust constants and the Python checks rely on.
    fn check_bounds(&self) -> Result<()> {
        let report = &self.probe_report;
        let policy = &self.policy;
        let u32_max = u64::from(u32::MAX);
        let i32_max = i32::MAX as u64;
        let within = [
            (
                "probe_report.max_output_bytes",
                report.max_output_bytes,
                1,
                u32_max + 1,
            ),
            (
                "probe_report.max_devices",
                report.max_devices.into(),
                1,
                i32_max,
            ),
            (
                "probe_report.max_device_ordinal",
                report.max_device_ordinal.into(),
                0,
                i32_max,
            ),
            (
                "probe_report.max_device_name_chars",
                report.max_device_name_chars.into(),
                1,
                1 << 16,
            ),
            (
                "probe_report.device_name_buffer_bytes",
                report.device_name_buffer_bytes.into(),
                1,
                i32_max,
            ),
            (
                "smoke.allocation_bytes",
                self.smoke.allocation_bytes,
                1,
                u32_max + 1,
            ),
            (
                "policy.device_ordinal_max",
                policy.device_ordinal_max.into(),
                0,
                report.max_device_ordinal.into(),
            ),
            (
                "policy.driver_version_floor",
                policy.driver_version_floor.into(),
                1,
                policy.driver_version_ceiling.into(),
            ),
            (
                "policy.toolkit_version_floor[0]",
                policy.toolkit_version_floor.0.into(),
                1,
                policy.toolkit_version_part_max.into(),
            ),
            (
                "policy.toolkit_version_floor[1]",
                policy.toolkit_version_floor.1.into(),
                0,
                policy.toolkit_version_part_max.into(),
            ),
        ];
        for (path, value, low, high) in within {
            if !(low..=high).contains(&value) {
                return Err(refuse(path, format!("{value} is not from {low} to {high}")));
            }
        }
        let ranges = [
            (
                "probe_report.driver_version_range",
                report.driver_version_range,
            ),
            (
                "probe_report.compute_major_range",
                report.compute_major_range,
            ),
            (
                "probe_report.compute_minor_range",
                report.compute_minor_range,
            ),
        ];
        for (path, (low, high)) in ranges {
            if low > high || low < 0 {
                return Err(refuse(
                    path,
                    format!("[{low}, {high}] is not a range of non-negative integers"),
                ));
            }
        }
        if !report.statuses.contains(&report.complete_status) {
            return Err(refuse(
                "probe_report.complete_status",
                format!(
                    "`{}` is not one of `probe_report.statuses`",
                    report.complete_status
                ),
            ));
        }
        let runner = &self.probe_runner;
        let timeouts = runner.default_timeout_seconds > 0.0
            && runner.default_timeout_seconds <= runner.max_timeout_seconds;
        if !timeouts {
            return Err(refuse(
                "probe_runner.default_timeout_seconds",
                "the default timeout must be positive and at most `max_timeout_seconds`",
            ));
        }
        let stem = self.runtime_archive_stem();
        if !stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(refuse(
                "runtime_package",
                format!("crate/version `{stem}` is not a plain file name"),
            ));
        }
        Ok(())
    }
}

/// `^[A-Z][A-Z0-9_]{0,63}$`.
fn is_reason_code(code: &str) -> bool {
    code.len() <= 64
        && code.starts_with(|c: char| c.is_ascii_uppercase())
        && code
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// `^sm_[0-9]{2,3}$`.
fn is_sm(text: &str) -> bool {
    text.strip_prefix("sm_").is_some_and(|digits| {
        (2..=3).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit())
    })
}
