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
        /// Written in the spec without the version, which follows it here.
        pub display_name: String,
        /// Not in the spec: `distribution.version`.
        #[serde(skip_deserializing)]
        pub provider_version: String,
        pub backend: String,
        pub api_version: String,
        pub runtime_requirements: Vec<RuntimePin>,
        /// The SM vocabulary, oldest first, with the CUDA releases that know each.
        pub architectures: Vec<ArchitectureSpec>,
        pub evidence_references: Vec<String>,
        pub certification_tier: String,
    }
}

record! {
    /// One architecture of the SM vocabulary, as NVIDIA's compilers measure it
    /// (contract 9.5; `tests/python/test_compiler_architectures.py` re-reads them).
    pub struct ArchitectureSpec {
        /// `sm_NN` or `sm_NNN`.
        pub sm: String,
        /// `(major, minor)` of the first CUDA release at or above the toolkit
        /// floor that knows it (the floor itself: that release or an earlier one).
        pub first: (u32, u32),
        /// The last CUDA release that compiles it; null: every release since `first`.
        pub last: Option<(u32, u32)>,
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
        pub driver_root: String,
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
    /// The raw-driver requirement the CLI's `preflight` and `validate` compose.
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
        /// The codes the smoke itself reports.
        pub reason_codes: Vec<String>,
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
        ArchitectureSpec::class(),
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

/// `Err(refuse(path, message))` unless `ok`; the path and message are
/// spelled only for an error.
fn ensure<P: fmt::Display, M: fmt::Display>(
    ok: bool,
    error: impl FnOnce() -> (P, M),
) -> Result<()> {
    if ok {
        return Ok(());
    }
    let (path, message) = error();
    Err(refuse(path, message))
}

/// The spec's pattern at `path`, which Python's `re` reads too.
fn pattern(path: &str, text: &str) -> Result<regex_lite::Regex> {
    regex_lite::Regex::new(text).map_err(|error| {
        refuse(
            path,
            format!("`{text}` is not a regular expression: {error}"),
        )
    })
}

/// Core's canonical form of a string list: trimmed, de-duplicated, sorted.
fn sorted(items: &[String]) -> BTreeSet<&str> {
    items.iter().map(|item| item.trim()).collect()
}

/// Fails at `path` when `items` holds an entry twice.
fn unique<'a>(path: &str, items: impl IntoIterator<Item = &'a String>) -> Result<()> {
    let mut seen = BTreeSet::new();
    for (index, item) in items.into_iter().enumerate() {
        ensure(seen.insert(item), || {
            (
                format!("{path}[{index}]"),
                format!("`{item}` is listed twice"),
            )
        })?;
    }
    Ok(())
}

impl ProviderSpec {
    /// Parses and checks the spec; every error names the file and the JSON path.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let mut deserializer = serde_json::Deserializer::from_slice(bytes);
        let mut spec: Self =
            serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
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
        // The version is written once, in `distribution`.
        let (manifest, version) = (&mut spec.manifest, &spec.distribution.version);
        manifest.provider_version = version.clone();
        manifest.display_name = format!("{} {version}", manifest.display_name);
        spec.check()?;
        spec.expand_reason_texts()?;
        Ok(spec)
    }

    /// Reason texts name the SM facts through placeholders, so each fact stays
    /// written once in `manifest.architectures`: `{architectures}` (the
    /// vocabulary), `{architecture_first_releases}` (release: SMs it first
    /// knows) and `{architecture_compile_releases}` (releases: SMs they compile).
    fn expand_reason_texts(&mut self) -> Result<()> {
        let items = &self.manifest.architectures;
        let mut first: BTreeMap<(u32, u32), Vec<&str>> = BTreeMap::new();
        type Range = ((u32, u32), Option<(u32, u32)>);
        let mut compile: BTreeMap<Range, Vec<&str>> = BTreeMap::new();
        for item in items {
            first.entry(item.first).or_default().push(&item.sm);
            compile
                .entry((item.first, item.last))
                .or_default()
                .push(&item.sm);
        }
        let release = |(major, minor): (u32, u32)| format!("{major}.{minor}");
        let first = first
            .iter()
            .map(|(from, sms)| format!("{}: {}", release(*from), sms.join(", ")))
            .collect::<Vec<_>>()
            .join("; ");
        let compile = compile
            .iter()
            .map(|((from, last), sms)| match last {
                Some(last) => format!(
                    "{} to {}: {}",
                    release(*from),
                    release(*last),
                    sms.join(", ")
                ),
                None => format!("{} or newer: {}", release(*from), sms.join(", ")),
            })
            .collect::<Vec<_>>()
            .join("; ");
        let placeholders = [
            ("{architectures}", self.architecture_names().join(", ")),
            ("{architecture_first_releases}", first),
            ("{architecture_compile_releases}", compile),
        ];
        for (code, (explanation, remedy)) in self.reason_codes.0.iter_mut() {
            for text in [explanation, remedy] {
                for (name, value) in &placeholders {
                    *text = text.replace(name, value);
                }
                if text.contains(['{', '}']) {
                    return Err(refuse(
                        format!("reason_codes.{code}"),
                        "an unknown placeholder; the known ones are {architectures}, \
                         {architecture_first_releases} and {architecture_compile_releases}",
                    ));
                }
            }
        }
        Ok(())
    }

    /// The runtime tarball's stem, e.g. `rextio-cuda-runtime-0.1.0`.
    pub fn runtime_archive_stem(&self) -> String {
        let package = &self.runtime_package;
        format!("{}-{}", package.crate_name, package.version)
    }

    /// The cross-reference and bound checks serde cannot express.
    fn check(&self) -> Result<()> {
        let version = self.schema_version;
        ensure(version == 1, || {
            (
                "schema_version",
                format!("{version} is not supported (expected 1)"),
            )
        })?;
        self.check_reason_codes()?;
        self.check_vocabulary()?;
        self.check_capabilities()?;
        self.check_lanes()?;
        self.check_bounds()
    }

    /// `probe_report.reason_code_pattern`: every reason code matches it.
    fn code_pattern(&self) -> Result<regex_lite::Regex> {
        let text = &self.probe_report.reason_code_pattern;
        pattern("probe_report.reason_code_pattern", text)
    }

    fn check_reason_codes(&self) -> Result<()> {
        let codes = self.code_pattern()?;
        for (code, (explanation, remedy)) in self.reason_codes.iter() {
            let path = || format!("reason_codes.{code}");
            ensure(codes.is_match(code), || {
                (
                    path(),
                    format!("the code does not match {}", codes.as_str()),
                )
            })?;
            let texts = !explanation.trim().is_empty() && !remedy.trim().is_empty();
            ensure(texts, || {
                (path(), "the explanation and the remedy must not be empty")
            })?;
        }
        #[rustfmt::skip]
        let lists = [
            ("probe_report.reason_codes", &self.probe_report.reason_codes),
            ("smoke.reason_codes", &self.smoke.reason_codes),
            ("incompatible_reason_codes", &self.incompatible_reason_codes),
        ];
        for (path, codes) in lists {
            unique(path, codes)?;
            for (index, code) in codes.iter().enumerate() {
                let known = self.reason_codes.contains_key(code);
                let message = || format!("the reason code `{code}` has no entry in `reason_codes`");
                ensure(known, || (format!("{path}[{index}]"), message()))?;
            }
        }
        Ok(())
    }

    /// The SM vocabulary's names, in spec order.
    pub fn architecture_names(&self) -> Vec<&str> {
        let architectures = self.manifest.architectures.iter();
        architectures.map(|item| item.sm.as_str()).collect()
    }

    fn check_vocabulary(&self) -> Result<()> {
        let sms = pattern("policy.sm_pattern", &self.policy.sm_pattern)?;
        let architectures = &self.manifest.architectures;
        let floor = self.policy.toolkit_version_floor;
        for (index, item) in architectures.iter().enumerate() {
            let (sm, path) = (&item.sm, format!("manifest.architectures[{index}]"));
            let message = || format!("`{sm}` does not match `policy.sm_pattern` {}", sms.as_str());
            ensure(sms.is_match(sm), || (format!("{path}.sm"), message()))?;
            // Releases below the floor are never distinguished: the floor is the earliest.
            let (first, lowest) = (item.first, floor);
            ensure(first >= lowest, || {
                let message = format!(
                    "{}.{} is below the toolkit floor {}.{}",
                    first.0, first.1, lowest.0, lowest.1
                );
                (format!("{path}.first"), message)
            })?;
            let ordered = item.last.is_none_or(|last| last >= first);
            ensure(ordered, || {
                let message = format!("`{sm}` is last compiled before its first release");
                (format!("{path}.last"), message)
            })?;
        }
        let names = architectures.iter().map(|item| &item.sm);
        unique("manifest.architectures", names)?;
        // Core keeps one runtime requirement per name: a second must be the same.
        let pins = &self.manifest.runtime_requirements;
        for (index, pin) in pins.iter().enumerate() {
            let name = pin.name.trim();
            let same = |other: &RuntimePin| {
                other.version.trim() == pin.version.trim()
                    && sorted(&other.features) == sorted(&pin.features)
            };
            let earlier = pins[..index]
                .iter()
                .filter(|other| other.name.trim() == name);
            let message = || format!("conflicting runtime requirements for `{name}`");
            let path = || format!("manifest.runtime_requirements[{index}]");
            ensure(earlier.clone().all(same), || (path(), message()))?;
        }
        let path = "manifest.architectures";
        ensure(!architectures.is_empty(), || {
            (path, "the SM vocabulary is empty")
        })
    }

    fn check_lanes(&self) -> Result<()> {
        let keys = &self.option_keys;
        let options = [
            &keys.probe,
            &keys.toolkit,
            &keys.driver_root,
            &keys.device,
            &keys.sm,
            &keys.probe_sha256,
        ];
        for (name, lane) in self.lanes.iter() {
            let path = format!("lanes.{name}");
            for option in lane.option_allowlist.iter() {
                let message = || format!("`{option}` is not one of the `option_keys`");
                ensure(options.contains(&option), || {
                    (format!("{path}.option_allowlist"), message())
                })?;
            }
            match (&lane.requirement_policy, &lane.requirement) {
                (Some(_), None) => self.check_raw_lane(&path, lane)?,
                (None, Some(requirement)) => self.check_framework_lane(&path, lane, requirement)?,
                _ => {
                    let message = "a lane has exactly one of `requirement_policy` (raw-driver) \
                                   and `requirement` (framework reuse)";
                    return Err(refuse(path, message));
                }
            }
            let used = self.capabilities.iter().any(|item| &item.lane == name);
            ensure(used, || (&path, "no capability uses this lane"))?;
        }
        Ok(())
    }

    fn check_raw_lane(&self, path: &str, lane: &LaneSpec) -> Result<()> {
        #[rustfmt::skip]
        let framework_only = [
            ("reason_prefix", lane.reason_prefix.is_some()),
            ("required_python_fallback_backend", lane.required_python_fallback_backend.is_some()),
            ("runtime_pins", !lane.runtime_pins.is_empty()),
        ];
        for (key, present) in framework_only {
            let message = "only a framework reuse lane (one with `requirement`) has this key";
            ensure(!present, || (format!("{path}.{key}"), message))?;
        }
        let validation = &self.validation_requirement;
        let accepted = lane.requirement_policy.as_ref().is_some_and(|policy| {
            let runtime = Some(validation.runtime.clone());
            policy.allowed_runtimes.contains(&runtime)
                && validation
                    .features
                    .iter()
                    .all(|item| policy.allowed_features.contains(item))
                && (validation.memory_spaces.iter())
                    .all(|item| policy.allowed_memory_spaces.contains(item))
        });
        let message = || format!("the requirement is not accepted by `{path}.requirement_policy`");
        ensure(accepted, || ("validation_requirement", message()))
    }

    fn check_framework_lane(
        &self,
        path: &str,
        lane: &LaneSpec,
        requirement: &RequirementSpec,
    ) -> Result<()> {
        let Some(prefix) = &lane.reason_prefix else {
            let message = "missing field `reason_prefix` (a framework reuse lane needs one)";
            return Err(refuse(path, message));
        };
        let prefix_path = || format!("{path}.reason_prefix");
        let shaped = self.code_pattern()?.is_match(prefix) && prefix.ends_with('_');
        let message = || format!("`{prefix}` is not an upper-case code prefix ending in `_`");
        ensure(shaped, || (prefix_path(), message()))?;
        let used = self
            .reason_codes
            .iter()
            .any(|(code, _)| code.starts_with(prefix));
        ensure(used, || {
            (
                prefix_path(),
                format!("no reason code starts with `{prefix}`"),
            )
        })?;
        let device = requirement.logical_device.trim().is_empty();
        ensure(!device, || {
            (
                format!("{path}.requirement.logical_device"),
                "the device is empty",
            )
        })?;
        let pinned = !lane.runtime_pins.is_empty();
        let message = "a framework reuse lane pins at least one runtime";
        ensure(pinned, || (format!("{path}.runtime_pins"), message))?;
        let vocabulary = self.architecture_names();
        for (index, sm) in requirement.architectures.iter().enumerate() {
            let known = vocabulary.contains(&sm.as_str());
            let item = || format!("{path}.requirement.architectures[{index}]");
            ensure(known, || {
                (item(), format!("`{sm}` is not in `manifest.architectures`"))
            })?;
        }
        Ok(())
    }

    fn check_capabilities(&self) -> Result<()> {
        let mut ids = BTreeSet::new();
        for (index, capability) in self.capabilities.iter().enumerate() {
            let path = |key: &str| format!("capabilities[{index}].{key}");
            let (id, lane, triple) = (&capability.id, &capability.lane, &capability.target_triple);
            ensure(ids.insert(id), || {
                (path("id"), format!("`{id}` is declared twice"))
            })?;
            let message = || format!("`{lane}` is not a key of `lanes`");
            ensure(self.lanes.contains_key(lane), || (path("lane"), message()))?;
            let target = self.probe_targets.get(triple).ok_or_else(|| {
                refuse(
                    path("target_triple"),
                    format!("`{triple}` is not a key of `probe_targets`"),
                )
            })?;
            let os = &target.os;
            let message = || format!("`{os}` is not a key of `toolkit.components`");
            let os_path = || format!("probe_targets.{triple}.os");
            ensure(self.toolkit.components.contains_key(os), || {
                (os_path(), message())
            })?;
            let message = "a capability builds at least one artifact kind";
            ensure(!capability.artifact_kinds.is_empty(), || {
                (path("artifact_kinds"), message)
            })?;
        }
        ensure(!ids.is_empty(), || {
            ("capabilities", "no capability is declared")
        })
    }

    /// The bounds the generated Rust constants and the Python checks rely on.
    fn check_bounds(&self) -> Result<()> {
        let (report, policy) = (&self.probe_report, &self.policy);
        let (u32_end, i32_max) = (u64::from(u32::MAX) + 1, i32::MAX as u64);
        let ordinal_max = u64::from(report.max_device_ordinal);
        let part_max = u64::from(policy.toolkit_version_part_max);
        #[rustfmt::skip]
        let within = [
            ("probe_report.max_output_bytes", report.max_output_bytes, 1, u32_end),
            ("probe_report.max_devices", report.max_devices.into(), 1, i32_max),
            ("probe_report.max_device_ordinal", ordinal_max, 0, i32_max),
            ("probe_report.max_device_name_chars", report.max_device_name_chars.into(), 1, 1 << 16),
            ("probe_report.device_name_buffer_bytes", report.device_name_buffer_bytes.into(), 1, i32_max),
            ("smoke.allocation_bytes", self.smoke.allocation_bytes, 1, u32_end),
            ("policy.device_ordinal_max", policy.device_ordinal_max.into(), 0, ordinal_max),
            ("policy.driver_version_floor", policy.driver_version_floor.into(), 1, policy.driver_version_ceiling.into()),
            ("policy.toolkit_version_floor[0]", policy.toolkit_version_floor.0.into(), 1, part_max),
            ("policy.toolkit_version_floor[1]", policy.toolkit_version_floor.1.into(), 0, part_max),
        ];
        for (path, value, low, high) in within {
            let message = || format!("{value} is not from {low} to {high}");
            ensure((low..=high).contains(&value), || (path, message()))?;
        }
        #[rustfmt::skip]
        let ranges = [
            ("probe_report.driver_version_range", report.driver_version_range),
            ("probe_report.compute_major_range", report.compute_major_range),
            ("probe_report.compute_minor_range", report.compute_minor_range),
        ];
        for (path, (low, high)) in ranges {
            let message = || format!("[{low}, {high}] is not a range of non-negative integers");
            ensure(low <= high && low >= 0, || (path, message()))?;
        }
        let complete = &report.complete_status;
        let message = || format!("`{complete}` is not one of `probe_report.statuses`");
        ensure(report.statuses.contains(complete), || {
            ("probe_report.complete_status", message())
        })?;
        let runner = &self.probe_runner;
        let (default, max) = (runner.default_timeout_seconds, runner.max_timeout_seconds);
        let message = "the default timeout must be positive and at most `max_timeout_seconds`";
        ensure(default > 0.0 && default <= max, || {
            ("probe_runner.default_timeout_seconds", message)
        })?;
        let stem = self.runtime_archive_stem();
        let plain = stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        let message = || format!("crate/version `{stem}` is not a plain file name");
        ensure(plain, || ("runtime_package", message()))
    }
}
