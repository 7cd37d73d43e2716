//! `templates/provider-spec.json` as typed records. The parse refuses an
//! unknown, missing or mistyped key with its JSON path (serde, through
//! `inputs::parse_json`, which also refuses a key given twice); the checks
//! below refuse what the types cannot say (cross-references and bounds),
//! each one a named function. The same records, through [`ToPython`], write
//! the Python record classes and `PROVIDER_SPEC` (python.rs).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::de::{Deserialize, Deserializer, Error};

pub use super::inputs::PROVIDER_SPEC_PATH;
use super::python_value::{PythonClass, PythonField, PythonRecord, PythonValue, ToPython};
use crate::Result;

/// A set written as a JSON list: sorted, and refused when an entry is
/// given twice (a plain set would drop the second silently).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Set<T: Ord>(pub BTreeSet<T>);

impl<'de, T: Deserialize<'de> + Ord + fmt::Debug> Deserialize<'de> for Set<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let mut set = BTreeSet::new();
        for item in Vec::<T>::deserialize(deserializer)? {
            let shown = format!("{item:?}");
            if !set.insert(item) {
                return Err(D::Error::custom(format!(
                    "the entry {shown} is given twice"
                )));
            }
        }
        Ok(Set(set))
    }
}

impl<T: Ord> Set<T> {
    pub fn contains(&self, item: &T) -> bool {
        self.0.contains(item)
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.0.iter()
    }
}

impl<T: Ord + ToPython> ToPython for Set<T> {
    fn annotation() -> String {
        format!("frozenset[{}]", T::annotation())
    }

    fn to_python(&self) -> PythonValue {
        PythonValue::frozenset(self.0.iter().map(ToPython::to_python).collect())
    }
}

/// A `(major, minor)` CUDA release.
pub type Release = (u32, u32);

/// Defines the spec's record structs (serde: every key known, none missing)
/// and, for each, its Python class: the class's docstring is the struct's
/// doc, a field's doc becomes the comment above the Python field.
macro_rules! records {
    ($(
        $(#[doc = $doc:literal])*
        pub struct $name:ident {
            $(
                $(#[doc = $field_doc:literal])*
                $(#[serde($($serde:tt)*)])*
                pub $field:ident: $ty:ty,
            )*
        }
    )*) => {
        $(
            $(#[doc = $doc])*
            #[derive(Clone, Debug, serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            pub struct $name {
                $(
                    $(#[doc = $field_doc])*
                    $(#[serde($($serde)*)])*
                    pub $field: $ty,
                )*
            }

            impl PythonRecord for $name {
                fn python_class() -> PythonClass {
                    PythonClass {
                        name: stringify!($name),
                        doc: concat!($($doc),*).trim(),
                        fields: vec![$(
                            PythonField {
                                name: stringify!($field),
                                annotation: <$ty as ToPython>::annotation(),
                                doc: vec![$($field_doc.trim()),*],
                            },
                        )*],
                    }
                }
            }

            impl ToPython for $name {
                fn annotation() -> String {
                    stringify!($name).to_string()
                }

                fn to_python(&self) -> PythonValue {
                    let arguments = vec![$(
                        (format!("{}=", stringify!($field)), self.$field.to_python()),
                    )*];
                    PythonValue::call(stringify!($name), arguments)
                }
            }
        )*

        /// Every record's Python class, in the order the records are defined.
        pub fn record_classes() -> Vec<PythonClass> {
            vec![$($name::python_class()),*]
        }
    };
}

records! {
    /// The whole provider spec: every fact of the provider, once.
    pub struct ProviderSpec {
        pub schema_version: u32,
        pub distribution: DistributionSpec,
        pub manifest: ManifestSpec,
        pub policy: PolicySpec,
        pub option_keys: OptionKeysSpec,
        pub capabilities: Vec<CapabilitySpec>,
        pub probe_targets: BTreeMap<String, ProbeTargetSpec>,
        pub lanes: BTreeMap<String, LaneSpec>,
        pub observation_keys: ObservationKeysSpec,
        pub probe_report: ProbeReportSpec,
        pub validation_requirement: ValidationRequirementSpec,
        pub probe_runner: ProbeRunnerSpec,
        pub toolkit: ToolkitSpec,
        pub smoke: SmokeSpec,
        pub loader: LoaderSpec,
        pub runtime_package: RuntimePackageSpec,
        /// Refused with status `incompatible`; every other code `unavailable`.
        pub incompatible_reason_codes: Vec<String>,
        /// code -> (explanation, remedy)
        pub reason_codes: BTreeMap<String, (String, String)>,
    }

    /// The Python distribution's metadata (pyproject.toml is written from it).
    pub struct DistributionSpec {
        pub name: String,
        pub import_name: String,
        pub version: String,
        pub requires_python: String,
        pub dependencies: Vec<String>,
        pub license: String,
        pub entry_point: EntryPointSpec,
    }

    /// The entry point Rextio Core loads the provider from.
    pub struct EntryPointSpec {
        pub group: String,
        pub name: String,
        pub value: String,
    }

    /// The passive provider manifest.
    pub struct ManifestSpec {
        pub provider_id: String,
        /// The spec's text, then the version.
        pub display_name: String,
        /// distribution.version
        #[serde(skip)]
        pub provider_version: String,
        pub backend: String,
        pub api_version: String,
        pub runtime_requirements: Vec<RuntimePin>,
        /// The SM vocabulary, oldest first.
        pub architectures: Vec<ArchitectureSpec>,
        pub evidence_references: Vec<String>,
        pub certification_tier: String,
    }

    /// One SM of the vocabulary, as NVIDIA's compilers measure it.
    pub struct ArchitectureSpec {
        /// `sm_NN` or `sm_NNN`; tests/python/test_compiler_architectures.py re-reads them.
        pub sm: String,
        /// The first release at or above the toolkit floor that knows it.
        pub first: Release,
        /// The last release that compiles it; None: every later one.
        pub last: Option<Release>,
    }

    /// A runtime requirement: a name, an exact version and its features.
    pub struct RuntimePin {
        pub name: String,
        pub version: String,
        pub features: Vec<String>,
    }

    /// Bounds the provider enforces on its configuration.
    pub struct PolicySpec {
        pub driver_version_floor: u32,
        pub driver_version_ceiling: u32,
        pub toolkit_version_floor: Release,
        pub toolkit_version_part_max: u32,
        pub device_ordinal_max: u32,
        pub sm_pattern: String,
    }

    /// The device option names.
    pub struct OptionKeysSpec {
        pub probe: String,
        pub toolkit: String,
        pub driver_root: String,
        pub device: String,
        pub sm: String,
        pub probe_sha256: String,
    }

    /// One declared capability; `lane` names a key of `lanes`.
    pub struct CapabilitySpec {
        pub id: String,
        pub lane: String,
        pub target_triple: String,
        pub artifact_kinds: Vec<String>,
        pub minimum_runtime_version: String,
        pub minimum_driver_version: String,
    }

    /// The (os, arch, environment) a probe reports for a target triple.
    pub struct ProbeTargetSpec {
        pub os: String,
        pub arch: String,
        pub environment: String,
    }

    /// A raw-driver lane: the provider's own context, stream and memory.
    pub struct RawDriverLaneSpec {
        pub option_allowlist: Set<String>,
        pub toolkit_inspection: bool,
        pub requirement_policy: RawRequirementPolicy,
        pub observations: BTreeMap<String, String>,
        pub contribution: ContributionSpec,
    }

    /// A framework reuse lane: the framework's runtime, borrowed and validated.
    pub struct FrameworkLaneSpec {
        pub reason_codes: FrameworkLaneCodes,
        pub option_allowlist: Set<String>,
        pub toolkit_inspection: bool,
        /// None: any backend.
        pub required_python_fallback: Option<PythonFallbackSpec>,
        pub requirement: RequirementSpec,
        pub runtime_pins: Vec<RuntimePin>,
        pub observations: BTreeMap<String, String>,
        pub contribution: ContributionSpec,
    }

    /// The reason codes a framework lane refuses with, one per check.
    pub struct FrameworkLaneCodes {
        pub artifact_kind_unsupported: String,
        pub toolkit_root_unsupported: String,
        pub cuda_device_unsupported: String,
        pub runtime_required: String,
        pub runtime_reuse_required: String,
        pub features_incompatible: String,
        pub layout_incompatible: String,
        pub memory_space_incompatible: String,
        pub runtime_pins_required: String,
    }

    /// The Python fallback backend a framework lane needs, and its refusal.
    pub struct PythonFallbackSpec {
        pub backend: String,
        pub reason_code: String,
    }

    /// What a raw-driver lane accepts in a CUDA device requirement.
    pub struct RawRequirementPolicy {
        pub allowed_runtimes: Set<Option<String>>,
        pub allowed_features: Set<String>,
        pub allowed_memory_spaces: Set<String>,
        pub allowed_layouts: Set<String>,
    }

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

    /// The declarative build inputs of one lane.
    pub struct ContributionSpec {
        pub cargo_features: Vec<String>,
        pub native_libraries: Vec<String>,
        pub package_references: Vec<String>,
        pub generated_helper_ids: Vec<String>,
        pub runtime_check_ids: Vec<String>,
        pub resource_contracts: Vec<ResourceContractSpec>,
    }

    /// One resource contract of a lane's build contribution.
    pub struct ResourceContractSpec {
        pub resource_kind: String,
        pub owner: String,
        pub access: String,
        pub may_allocate: bool,
        pub may_replace: bool,
        pub may_synchronize: bool,
    }

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

    /// The probe report's schema and bounds.
    pub struct ProbeReportSpec {
        pub schema_version: String,
        pub probe: String,
        pub statuses: ProbeStatusesSpec,
        pub fields: ProbeReportFieldsSpec,
        pub max_output_bytes: u32,
        pub max_devices: u32,
        pub max_device_ordinal: u32,
        pub max_device_name_chars: u32,
        /// The longest `loader_reason` (the dynamic loader's own words, paths removed).
        pub max_loader_reason_chars: u32,
        pub device_name_buffer_bytes: u32,
        pub driver_version_range: (u32, u32),
        pub compute_major_range: (u32, u32),
        pub compute_minor_range: (u32, u32),
        pub reason_code_pattern: String,
        pub target_field_pattern: String,
        /// Set before `cuInit`.
        pub driver_environment: BTreeMap<String, String>,
        /// The codes the probe itself reports.
        pub reason_codes: Vec<String>,
        /// The probe's codes whose report carries the driver's CUDA result.
        pub cuda_result_reason_codes: Vec<String>,
    }

    /// The statuses a probe report has, by name.
    pub struct ProbeStatusesSpec {
        /// The inventory completed.
        pub complete: String,
        pub unavailable: String,
        pub unsupported: String,
        pub error: String,
    }

    /// The probe report's records: their keys, in the order the probe writes them.
    pub struct ProbeReportFieldsSpec {
        pub report: Vec<ReportFieldSpec>,
        pub target: Vec<ReportFieldSpec>,
        pub device: Vec<ReportFieldSpec>,
    }

    /// One key of a probe report record and the kind of its value.
    pub struct ReportFieldSpec {
        pub key: String,
        pub kind: ReportFieldKind,
    }

    /// The reviewed loader's facts; the loader crate holds them generated.
    pub struct LoaderSpec {
        /// The codes a `LoadError` carries; the probe reports each.
        pub reason_codes: Vec<String>,
        /// The driver image's file name in every Linux candidate directory.
        pub linux_driver_file_name: String,
        /// Per architecture, the directories searched, in search order.
        pub linux_candidate_dirs: Vec<CandidateDirsSpec>,
        /// A candidate's resolved path must lie strictly below one of these.
        pub reviewed_roots: Vec<String>,
        /// Directories above it need only be root's; it and below, also
        /// writable only by their owner.
        pub ancestor_check_floor: String,
        /// The rules that refuse an image, in the order the remedy explains them.
        pub rules: Vec<LoaderRuleSpec>,
    }

    /// The Linux candidate directories of one architecture (`target_arch`).
    pub struct CandidateDirsSpec {
        pub arch: String,
        pub dirs: Vec<String>,
    }

    /// A loader rule: its name, as stderr names it, and what it requires.
    pub struct LoaderRuleSpec {
        pub name: String,
        /// None: the name says it.
        pub requires: Option<String>,
    }

    /// The raw-driver requirement the CLI's `preflight` and `validate` compose.
    pub struct ValidationRequirementSpec {
        pub runtime: String,
        pub features: Vec<String>,
        pub memory_spaces: Vec<String>,
    }

    /// Bounds of the probe subprocess.
    pub struct ProbeRunnerSpec {
        pub default_timeout_seconds: f64,
        pub max_timeout_seconds: f64,
        pub max_argument_chars: u32,
        pub windows_environment: Vec<String>,
        pub sha256_pattern: String,
        /// A larger pinned probe is refused before it is read whole.
        pub max_pinned_probe_bytes: u32,
        /// How long the reviewed probe's (and smoke's) sweep may go on once
        /// its worker has ended; on a timeout the runner sends SIGTERM and
        /// kills the session only after this.
        pub sweep_seconds: u32,
    }

    /// What the toolkit inspector reads.
    pub struct ToolkitSpec {
        pub version_file: String,
        pub max_version_file_bytes: u32,
        pub version_pattern: String,
        /// os -> component -> paths
        pub components: BTreeMap<String, BTreeMap<String, Vec<String>>>,
    }

    /// The lifetime smoke's report.
    pub struct SmokeSpec {
        pub probe: String,
        pub schema_version: String,
        pub allocation_bytes: u32,
        pub complete_status: String,
        pub failure_status: String,
        /// The codes the smoke itself reports.
        pub reason_codes: Vec<String>,
    }

    /// The packaged runtime crate.
    pub struct RuntimePackageSpec {
        pub crate_name: String,
        pub version: String,
        pub install_dir: String,
    }
}

/// The kind of a probe report value, which decides its Rust type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportFieldKind {
    /// A string the probe picks from a fixed set (a status, a code, a name).
    Name,
    /// A [`ReportFieldKind::Name`] or null.
    OptionalName,
    /// A string from the driver (a device name) or made from its values.
    Text,
    Bool,
    /// A 32-bit signed integer, as the driver's API gives it.
    Int,
    /// An [`ReportFieldKind::Int`] or null.
    OptionalInt,
    /// A device ordinal (from 0).
    Ordinal,
    /// The `target` record.
    Target,
    /// The list of `device` records.
    Devices,
    /// A [`ReportFieldKind::Name`], or the key left out (never null): a key
    /// added after 0.1.0, so that every other report keeps 0.1.0's keys.
    NameIfSet,
    /// A [`ReportFieldKind::Text`], or the key left out (never null), as
    /// [`ReportFieldKind::NameIfSet`].
    TextIfSet,
}

impl ReportFieldKind {
    /// Whether the key is left out when unset (a key added after 0.1.0).
    pub fn left_out_when_unset(self) -> bool {
        matches!(self, Self::NameIfSet | Self::TextIfSet)
    }
}

impl ReportFieldKind {
    /// As the spec spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Name => "name",
            Self::OptionalName => "optional_name",
            Self::Text => "text",
            Self::Bool => "bool",
            Self::Int => "int",
            Self::OptionalInt => "optional_int",
            Self::Ordinal => "ordinal",
            Self::Target => "target",
            Self::Devices => "devices",
            Self::NameIfSet => "name_if_set",
            Self::TextIfSet => "text_if_set",
        }
    }
}

impl ToPython for ReportFieldKind {
    fn annotation() -> String {
        "str".to_string()
    }

    fn to_python(&self) -> PythonValue {
        PythonValue::Str(self.name().to_string())
    }
}

/// A lane: a raw-driver lane or a framework reuse lane, written in the spec
/// as `{"raw_driver": {...}}` or `{"framework_reuse": {...}}`.
// A handful of lanes, parsed once: their size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaneSpec {
    RawDriver(RawDriverLaneSpec),
    FrameworkReuse(FrameworkLaneSpec),
}

impl LaneSpec {
    pub fn option_allowlist(&self) -> &Set<String> {
        match self {
            LaneSpec::RawDriver(lane) => &lane.option_allowlist,
            LaneSpec::FrameworkReuse(lane) => &lane.option_allowlist,
        }
    }
}

/// In Python the lane is the union of its two record classes.
impl ToPython for LaneSpec {
    fn annotation() -> String {
        "LaneSpec".to_string()
    }

    fn to_python(&self) -> PythonValue {
        match self {
            LaneSpec::RawDriver(lane) => lane.to_python(),
            LaneSpec::FrameworkReuse(lane) => lane.to_python(),
        }
    }
}

/// The Python alias of [`LaneSpec`], written after its two classes.
pub const PYTHON_LANE_ALIAS: &str = "LaneSpec: TypeAlias = RawDriverLaneSpec | FrameworkLaneSpec";

// ---------------------------------------------------------------- the checks

/// `Err("<spec file>: <path>: <problem>")`.
fn refuse(path: &str, problem: impl fmt::Display) -> Result<()> {
    Err(format!("{PROVIDER_SPEC_PATH}: {path}: {problem}"))
}

/// `Ok` when `ok`, else [`refuse`].
fn ensure(ok: bool, path: &str, problem: impl fmt::Display) -> Result<()> {
    if ok {
        Ok(())
    } else {
        refuse(path, problem)
    }
}

/// The pattern `pattern` (found at `path`), which Python's `re` reads too.
fn regex(path: &str, pattern: &str) -> Result<regex_lite::Regex> {
    regex_lite::Regex::new(pattern).map_err(|error| {
        let problem = format!("`{pattern}` is not a regular expression: {error}");
        format!("{PROVIDER_SPEC_PATH}: {path}: {problem}")
    })
}

/// The largest value the generated Rust's `i32` constants hold.
const I32_MAX: u32 = i32::MAX as u32;

fn check_schema_version(spec: &ProviderSpec) -> Result<()> {
    let version = spec.schema_version;
    ensure(
        version == 1,
        "schema_version",
        format!("{version} is not supported (expected 1)"),
    )
}

/// Every code is spelled as the probe report's pattern says, and has an
/// explanation and a remedy.
fn check_reason_codes(spec: &ProviderSpec) -> Result<()> {
    let pattern_path = "probe_report.reason_code_pattern";
    let pattern = regex(pattern_path, &spec.probe_report.reason_code_pattern)?;
    for (code, (explanation, remedy)) in &spec.reason_codes {
        let path = format!("reason_codes.{code}");
        let problem = format!("`{code}` does not match `{pattern_path}` {pattern}");
        ensure(pattern.is_match(code), &path, problem)?;
        ensure(
            !explanation.trim().is_empty(),
            &format!("{path}[0]"),
            "must not be empty",
        )?;
        ensure(
            !remedy.trim().is_empty(),
            &format!("{path}[1]"),
            "must not be empty",
        )?;
    }
    Ok(())
}

/// A list of codes at `path`: each listed once, each a key of `reason_codes`.
fn check_code_list(spec: &ProviderSpec, path: &str, codes: &[String]) -> Result<()> {
    let mut seen = BTreeSet::new();
    for (index, code) in codes.iter().enumerate() {
        let at = format!("{path}[{index}]");
        ensure(seen.insert(code), &at, format!("`{code}` is listed twice"))?;
        check_code(spec, &at, code)?;
    }
    Ok(())
}

/// The code at `path` is a key of `reason_codes` (so it is explained).
fn check_code(spec: &ProviderSpec, path: &str, code: &str) -> Result<()> {
    let known = spec.reason_codes.contains_key(code);
    ensure(
        known,
        path,
        format!("`{code}` is not a key of `reason_codes`"),
    )
}

/// The probe's, the smoke's and the incompatible codes are explained; the
/// codes that carry a CUDA result are the probe's own.
fn check_code_lists(spec: &ProviderSpec) -> Result<()> {
    let report = &spec.probe_report;
    check_code_list(spec, "probe_report.reason_codes", &report.reason_codes)?;
    let results = &report.cuda_result_reason_codes;
    check_code_list(spec, "probe_report.cuda_result_reason_codes", results)?;
    for (index, code) in results.iter().enumerate() {
        let path = format!("probe_report.cuda_result_reason_codes[{index}]");
        let problem = format!("`{code}` is not one of `probe_report.reason_codes`");
        ensure(report.reason_codes.contains(code), &path, problem)?;
    }
    check_code_list(spec, "smoke.reason_codes", &spec.smoke.reason_codes)?;
    check_code_list(
        spec,
        "incompatible_reason_codes",
        &spec.incompatible_reason_codes,
    )
}

/// Core keeps one runtime requirement per name; a name is one word.
fn check_runtime_requirements(spec: &ProviderSpec) -> Result<()> {
    let mut names = BTreeSet::new();
    for (index, pin) in spec.manifest.runtime_requirements.iter().enumerate() {
        let path = format!("manifest.runtime_requirements[{index}].name");
        let name = &pin.name;
        let word = !name.is_empty() && !name.contains(char::is_whitespace);
        ensure(word, &path, format!("`{name}` is not one word"))?;
        ensure(
            names.insert(name),
            &path,
            format!("`{name}` is listed twice"),
        )?;
    }
    Ok(())
}

/// The SM vocabulary: spelled as the policy says, each once, first known
/// at or above the toolkit floor (older releases are never distinguished),
/// last compiled no earlier than first known.
fn check_architectures(spec: &ProviderSpec) -> Result<()> {
    let architectures = &spec.manifest.architectures;
    ensure(
        !architectures.is_empty(),
        "manifest.architectures",
        "must not be empty",
    )?;
    let pattern = regex("policy.sm_pattern", &spec.policy.sm_pattern)?;
    let floor = spec.policy.toolkit_version_floor;
    let mut seen = BTreeSet::new();
    for (index, architecture) in architectures.iter().enumerate() {
        let path = |key: &str| format!("manifest.architectures[{index}].{key}");
        let sm = &architecture.sm;
        let problem = format!("`{sm}` does not match `policy.sm_pattern` {pattern}");
        ensure(pattern.is_match(sm), &path("sm"), problem)?;
        ensure(
            seen.insert(sm),
            &path("sm"),
            format!("`{sm}` is listed twice"),
        )?;
        let first = architecture.first;
        let problem = format!(
            "{} is older than `policy.toolkit_version_floor` {}",
            release(first),
            release(floor)
        );
        ensure(first >= floor, &path("first"), problem)?;
        if let Some(last) = architecture.last {
            let problem = format!("{} is older than `first` {}", release(last), release(first));
            ensure(last >= first, &path("last"), problem)?;
        }
    }
    Ok(())
}

fn release((major, minor): Release) -> String {
    format!("{major}.{minor}")
}

/// Each capability: a unique id, a lane and a probe target the spec
/// defines, at least one artifact kind.
fn check_capabilities(spec: &ProviderSpec) -> Result<()> {
    ensure(
        !spec.capabilities.is_empty(),
        "capabilities",
        "must not be empty",
    )?;
    let mut ids = BTreeSet::new();
    for (index, capability) in spec.capabilities.iter().enumerate() {
        let path = |key: &str| format!("capabilities[{index}].{key}");
        let id = &capability.id;
        ensure(
            ids.insert(id),
            &path("id"),
            format!("`{id}` is listed twice"),
        )?;
        let lane = &capability.lane;
        let problem = format!("`{lane}` is not a key of `lanes`");
        ensure(spec.lanes.contains_key(lane), &path("lane"), problem)?;
        let triple = &capability.target_triple;
        let problem = format!("`{triple}` is not a key of `probe_targets`");
        ensure(
            spec.probe_targets.contains_key(triple),
            &path("target_triple"),
            problem,
        )?;
        let kinds = !capability.artifact_kinds.is_empty();
        ensure(kinds, &path("artifact_kinds"), "must not be empty")?;
    }
    Ok(())
}

/// Every lane serves a capability.
fn check_every_lane_is_used(spec: &ProviderSpec) -> Result<()> {
    for name in spec.lanes.keys() {
        let used = spec
            .capabilities
            .iter()
            .any(|capability| capability.lane == *name);
        let problem = format!("`{name}` is the lane of no capability (`capabilities[].lane`)");
        ensure(used, &format!("lanes.{name}"), problem)?;
    }
    Ok(())
}

/// The toolkit inspector knows each probe target's operating system.
fn check_probe_targets(spec: &ProviderSpec) -> Result<()> {
    for (triple, target) in &spec.probe_targets {
        let os = &target.os;
        let known = spec.toolkit.components.contains_key(os);
        let problem = format!("`{os}` is not a key of `toolkit.components`");
        ensure(known, &format!("probe_targets.{triple}.os"), problem)?;
    }
    Ok(())
}

/// A lane allows only option names of `option_keys`.
fn check_option_allowlists(spec: &ProviderSpec) -> Result<()> {
    let keys = &spec.option_keys;
    let known = [
        &keys.probe,
        &keys.toolkit,
        &keys.driver_root,
        &keys.device,
        &keys.sm,
        &keys.probe_sha256,
    ];
    for (name, lane) in &spec.lanes {
        for option in lane.option_allowlist().iter() {
            let problem = format!("`{option}` is not one of the names of `option_keys`");
            ensure(
                known.contains(&option),
                &format!("lanes.{name}.option_allowlist"),
                problem,
            )?;
        }
    }
    Ok(())
}

/// A raw-driver lane accepts the requirement the CLI composes.
fn check_raw_lane_accepts_the_validation_requirement(
    name: &str,
    lane: &RawDriverLaneSpec,
    spec: &ProviderSpec,
) -> Result<()> {
    let path = |key: &str| format!("lanes.{name}.raw_driver.requirement_policy.{key}");
    let policy = &lane.requirement_policy;
    let wanted = &spec.validation_requirement;
    let runtime = Some(wanted.runtime.clone());
    let problem = "lacks `validation_requirement.runtime`";
    ensure(
        policy.allowed_runtimes.contains(&runtime),
        &path("allowed_runtimes"),
        problem,
    )?;
    let features = wanted
        .features
        .iter()
        .all(|item| policy.allowed_features.contains(item));
    let problem = "lacks one of `validation_requirement.features`";
    ensure(features, &path("allowed_features"), problem)?;
    let spaces = &wanted.memory_spaces;
    let spaces = spaces
        .iter()
        .all(|item| policy.allowed_memory_spaces.contains(item));
    let problem = "lacks one of `validation_requirement.memory_spaces`";
    ensure(spaces, &path("allowed_memory_spaces"), problem)
}

/// A framework lane's codes are explained, its requirement names a device
/// and only SMs of the vocabulary.
fn check_framework_lane(name: &str, lane: &FrameworkLaneSpec, spec: &ProviderSpec) -> Result<()> {
    let path = |key: &str| format!("lanes.{name}.framework_reuse.{key}");
    let codes = &lane.reason_codes;
    let named = [
        (
            "artifact_kind_unsupported",
            &codes.artifact_kind_unsupported,
        ),
        ("toolkit_root_unsupported", &codes.toolkit_root_unsupported),
        ("cuda_device_unsupported", &codes.cuda_device_unsupported),
        ("runtime_required", &codes.runtime_required),
        ("runtime_reuse_required", &codes.runtime_reuse_required),
        ("features_incompatible", &codes.features_incompatible),
        ("layout_incompatible", &codes.layout_incompatible),
        (
            "memory_space_incompatible",
            &codes.memory_space_incompatible,
        ),
        ("runtime_pins_required", &codes.runtime_pins_required),
    ];
    for (key, code) in named {
        check_code(spec, &path(&format!("reason_codes.{key}")), code)?;
    }
    if let Some(fallback) = &lane.required_python_fallback {
        let code_path = path("required_python_fallback.reason_code");
        check_code(spec, &code_path, &fallback.reason_code)?;
    }
    let pins = !lane.runtime_pins.is_empty();
    ensure(
        pins,
        &path("runtime_pins"),
        "must not be empty: a framework lane pins its runtime",
    )?;
    let requirement = &lane.requirement;
    let device_path = path("requirement.logical_device");
    ensure(
        !requirement.logical_device.trim().is_empty(),
        &device_path,
        "must not be empty",
    )?;
    let vocabulary: BTreeSet<&String> = spec.manifest.architectures.iter().map(|a| &a.sm).collect();
    for (index, sm) in requirement.architectures.iter().enumerate() {
        let problem = format!("`{sm}` is not one of `manifest.architectures[].sm`");
        let at = path(&format!("requirement.architectures[{index}]"));
        ensure(vocabulary.contains(sm), &at, problem)?;
    }
    Ok(())
}

fn check_lanes(spec: &ProviderSpec) -> Result<()> {
    for (name, lane) in &spec.lanes {
        match lane {
            LaneSpec::RawDriver(lane) => {
                check_raw_lane_accepts_the_validation_requirement(name, lane, spec)?
            }
            LaneSpec::FrameworkReuse(lane) => check_framework_lane(name, lane, spec)?,
        }
    }
    Ok(())
}

/// `value` at `path` lies in `low..=high`.
fn check_within(path: &str, value: u32, low: u32, high: u32) -> Result<()> {
    let problem = format!("{value} is not within {low}..={high}");
    ensure((low..=high).contains(&value), path, problem)
}

/// A `[low, high]` range at `path`: ordered, and an `i32` range in Rust.
fn check_range(path: &str, (low, high): (u32, u32)) -> Result<()> {
    ensure(
        high >= low,
        path,
        format!("[{low}, {high}] ends below its start"),
    )?;
    check_within(&format!("{path}[1]"), high, low, I32_MAX)
}

/// The probe report's bounds fit the generated Rust constants (`i32` where
/// the driver's API speaks `int`) and are not empty; its statuses differ.
fn check_probe_report(spec: &ProviderSpec) -> Result<()> {
    let report = &spec.probe_report;
    let path = |key: &str| format!("probe_report.{key}");
    check_within(
        &path("max_output_bytes"),
        report.max_output_bytes,
        1,
        u32::MAX,
    )?;
    check_within(&path("max_devices"), report.max_devices, 1, I32_MAX)?;
    check_within(
        &path("max_device_ordinal"),
        report.max_device_ordinal,
        0,
        I32_MAX,
    )?;
    check_within(
        &path("max_device_name_chars"),
        report.max_device_name_chars,
        1,
        65536,
    )?;
    check_within(
        &path("max_loader_reason_chars"),
        report.max_loader_reason_chars,
        1,
        65536,
    )?;
    let buffer = report.device_name_buffer_bytes;
    check_within(&path("device_name_buffer_bytes"), buffer, 1, I32_MAX)?;
    check_range(&path("driver_version_range"), report.driver_version_range)?;
    check_range(&path("compute_major_range"), report.compute_major_range)?;
    check_range(&path("compute_minor_range"), report.compute_minor_range)?;
    let statuses = &report.statuses;
    let names = [
        &statuses.complete,
        &statuses.unavailable,
        &statuses.unsupported,
        &statuses.error,
    ];
    let distinct: BTreeSet<&&String> = names.iter().collect();
    ensure(
        distinct.len() == names.len(),
        &path("statuses"),
        "two statuses are the same",
    )
}

/// A lowercase identifier (`[a-z][a-z0-9_]*`): generated Rust and Python
/// spell it as it is.
fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    let first = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    first && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The probe report's records: each key an identifier, listed once; only
/// `report` holds the other records; a key left out when unset comes after
/// every key that is always written (0.1.0's keys keep their order).
fn check_report_fields(spec: &ProviderSpec) -> Result<()> {
    let fields = &spec.probe_report.fields;
    let records = [
        ("report", &fields.report, true),
        ("target", &fields.target, false),
        ("device", &fields.device, false),
    ];
    for (record, list, holds_records) in records {
        let path = format!("probe_report.fields.{record}");
        ensure(!list.is_empty(), &path, "must not be empty")?;
        let mut seen = BTreeSet::new();
        let mut after_unset = false;
        for (index, field) in list.iter().enumerate() {
            let at = format!("{path}[{index}]");
            let key = &field.key;
            let if_set = field.kind.left_out_when_unset();
            let problem = format!(
                "`{key}` is always written, so must come before the keys left out when unset"
            );
            ensure(if_set || !after_unset, &format!("{at}.kind"), problem)?;
            after_unset |= if_set;
            let problem = format!("`{key}` is not a lowercase identifier");
            ensure(is_identifier(key), &format!("{at}.key"), problem)?;
            let problem = format!("`{key}` is listed twice");
            ensure(seen.insert(key), &format!("{at}.key"), problem)?;
            let nested = matches!(
                field.kind,
                ReportFieldKind::Target | ReportFieldKind::Devices
            );
            let problem = format!("`{}` holds a record; only `report` may", field.kind.name());
            ensure(holds_records || !nested, &format!("{at}.kind"), problem)?;
        }
    }
    Ok(())
}

/// An absolute directory written plainly: `/`, then non-empty components
/// other than `.` and `..`, no trailing `/`.
fn is_absolute_dir(text: &str) -> bool {
    match text.strip_prefix('/') {
        Some(rest) => rest
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != ".."),
        None => false,
    }
}

/// A list of absolute directories at `path`: not empty, each once.
fn check_dirs(path: &str, dirs: &[String]) -> Result<()> {
    ensure(!dirs.is_empty(), path, "must not be empty")?;
    let mut seen = BTreeSet::new();
    for (index, dir) in dirs.iter().enumerate() {
        let at = format!("{path}[{index}]");
        let problem = format!("`{dir}` is not a plain absolute directory");
        ensure(is_absolute_dir(dir), &at, problem)?;
        ensure(seen.insert(dir), &at, format!("`{dir}` is listed twice"))?;
    }
    Ok(())
}

/// The loader's facts: its codes are the probe's (the probe reports what
/// the loader says), directories are absolute, architectures and rules are
/// names the generated Rust spells (`LINUX_X86_64_CANDIDATE_DIRS`,
/// `rules::WRITABLE_DIRECTORY`), each once.
fn check_loader(spec: &ProviderSpec) -> Result<()> {
    let loader = &spec.loader;
    check_code_list(spec, "loader.reason_codes", &loader.reason_codes)?;
    for (index, code) in loader.reason_codes.iter().enumerate() {
        let problem = format!("`{code}` is not one of `probe_report.reason_codes`");
        let reported = spec.probe_report.reason_codes.contains(code);
        ensure(reported, &format!("loader.reason_codes[{index}]"), problem)?;
    }
    let name = &loader.linux_driver_file_name;
    let plain = !name.is_empty() && !name.contains('/') && name != "." && name != "..";
    let problem = format!("`{name}` is not a plain file name");
    ensure(plain, "loader.linux_driver_file_name", problem)?;
    let candidates = &loader.linux_candidate_dirs;
    let path = "loader.linux_candidate_dirs";
    ensure(!candidates.is_empty(), path, "must not be empty")?;
    let mut archs = BTreeSet::new();
    for (index, candidate) in candidates.iter().enumerate() {
        let at = format!("{path}[{index}]");
        let arch = &candidate.arch;
        let problem = format!("`{arch}` is not a lowercase identifier");
        ensure(is_identifier(arch), &format!("{at}.arch"), problem)?;
        let problem = format!("`{arch}` is listed twice");
        ensure(archs.insert(arch), &format!("{at}.arch"), problem)?;
        check_dirs(&format!("{at}.dirs"), &candidate.dirs)?;
    }
    check_dirs("loader.reviewed_roots", &loader.reviewed_roots)?;
    let floor = &loader.ancestor_check_floor;
    let problem = format!("`{floor}` is not a plain absolute directory");
    ensure(
        is_absolute_dir(floor),
        "loader.ancestor_check_floor",
        problem,
    )?;
    let path = "loader.rules";
    ensure(!loader.rules.is_empty(), path, "must not be empty")?;
    let mut names = BTreeSet::new();
    for (index, rule) in loader.rules.iter().enumerate() {
        let at = format!("{path}[{index}]");
        let name = &rule.name;
        let words = name
            .split('-')
            .all(|word| is_identifier(word) && !word.contains('_'));
        let problem = format!("`{name}` is not lowercase words joined by `-`");
        ensure(words, &format!("{at}.name"), problem)?;
        let problem = format!("`{name}` is listed twice");
        ensure(names.insert(name), &format!("{at}.name"), problem)?;
        if let Some(requires) = &rule.requires {
            let empty = requires.trim().is_empty();
            ensure(!empty, &format!("{at}.requires"), "must not be empty")?;
        }
    }
    Ok(())
}

/// The configuration bounds: floors above zero and below their ceilings,
/// device ordinals the probe reports.
fn check_policy(spec: &ProviderSpec) -> Result<()> {
    let policy = &spec.policy;
    let ordinal_max = spec.probe_report.max_device_ordinal;
    let path = "policy.device_ordinal_max";
    check_within(path, policy.device_ordinal_max, 0, ordinal_max)?;
    let ceiling = policy.driver_version_ceiling;
    check_within(
        "policy.driver_version_floor",
        policy.driver_version_floor,
        1,
        ceiling,
    )?;
    let (major, minor) = policy.toolkit_version_floor;
    let part_max = policy.toolkit_version_part_max;
    check_within("policy.toolkit_version_floor[0]", major, 1, part_max)?;
    check_within("policy.toolkit_version_floor[1]", minor, 0, part_max)
}

/// The probe's time limits: a default above zero, a maximum no lower, a sweep bound.
fn check_probe_runner(spec: &ProviderSpec) -> Result<()> {
    let runner = &spec.probe_runner;
    let default = runner.default_timeout_seconds;
    let path = "probe_runner.default_timeout_seconds";
    ensure(default > 0.0, path, format!("{default:?} must be above 0"))?;
    let max = runner.max_timeout_seconds;
    let problem = format!("{max:?} is below `probe_runner.default_timeout_seconds` {default:?}");
    ensure(max >= default, "probe_runner.max_timeout_seconds", problem)?;
    // The probe's own deadline is generated from it as whole seconds.
    let problem = format!("{max:?} must be a whole number of seconds, at most 86400");
    ensure(
        max.fract() == 0.0 && max <= 86400.0,
        "probe_runner.max_timeout_seconds",
        problem,
    )?;
    // The sweep's bound waits out a timeout: a few seconds, never none.
    check_within("probe_runner.sweep_seconds", runner.sweep_seconds, 1, 60)
}

fn check_smoke(spec: &ProviderSpec) -> Result<()> {
    check_within(
        "smoke.allocation_bytes",
        spec.smoke.allocation_bytes,
        1,
        u32::MAX,
    )
}

/// The crate and version name the runtime tarball's file: plain names.
fn check_runtime_package(spec: &ProviderSpec) -> Result<()> {
    let package = &spec.runtime_package;
    let plain = |text: &str| {
        let allowed = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
        !text.is_empty() && text.chars().all(allowed)
    };
    for (key, value) in [
        ("crate_name", &package.crate_name),
        ("version", &package.version),
    ] {
        let problem = format!("`{value}` is not a plain name (letters, digits, `.`, `_`, `-`)");
        ensure(plain(value), &format!("runtime_package.{key}"), problem)?;
    }
    Ok(())
}

/// Every check the types cannot make, in this order.
pub fn check(spec: &ProviderSpec) -> Result<()> {
    check_schema_version(spec)?;
    check_reason_codes(spec)?;
    check_code_lists(spec)?;
    check_runtime_requirements(spec)?;
    check_architectures(spec)?;
    check_capabilities(spec)?;
    check_probe_targets(spec)?;
    check_every_lane_is_used(spec)?;
    check_option_allowlists(spec)?;
    check_lanes(spec)?;
    check_probe_report(spec)?;
    check_report_fields(spec)?;
    check_smoke(spec)?;
    check_loader(spec)?;
    check_policy(spec)?;
    check_probe_runner(spec)?;
    check_runtime_package(spec)
}

// ---------------------------------------------------------------- derived facts

/// Parses and checks the spec, then fills what it derives: the manifest's
/// version and display name (the version is written once, in
/// `distribution`) and the reason texts' placeholders.
pub fn parse(bytes: &[u8]) -> Result<ProviderSpec> {
    let mut spec: ProviderSpec = super::inputs::parse_json(PROVIDER_SPEC_PATH, bytes)?;
    check(&spec)?;
    let version = spec.distribution.version.clone();
    let manifest = &mut spec.manifest;
    manifest.display_name = format!("{} {version}", manifest.display_name);
    manifest.provider_version = version;
    let mut placeholders = reason_placeholders(&spec.manifest.architectures);
    placeholders.extend(loader_placeholders(&spec.loader));
    for (code, texts) in &mut spec.reason_codes {
        texts.0 = fill_placeholders(code, &texts.0, &placeholders)?;
        texts.1 = fill_placeholders(code, &texts.1, &placeholders)?;
    }
    Ok(spec)
}

/// `text` with each placeholder replaced; refused when a brace is left.
fn fill_placeholders(code: &str, text: &str, placeholders: &[(&str, String)]) -> Result<String> {
    let mut filled = text.to_string();
    for (name, value) in placeholders {
        filled = filled.replace(name, value);
    }
    if filled.contains(['{', '}']) {
        let known: Vec<&str> = placeholders.iter().map(|(name, _)| *name).collect();
        let problem = format!(
            "an unknown placeholder; the known ones are {}",
            known.join(", ")
        );
        refuse(&format!("reason_codes.{code}"), problem)?;
    }
    Ok(filled)
}

/// Reason texts name the loader's facts through placeholders, so each stays
/// written once in `loader`: `{linux_candidate_dirs}` (per architecture,
/// the directories searched, in order) and `{loader_rules}` (each rule and
/// what it requires).
fn loader_placeholders(loader: &LoaderSpec) -> Vec<(&'static str, String)> {
    let candidates: Vec<String> = loader
        .linux_candidate_dirs
        .iter()
        .map(|candidate| format!("on Linux {} {}", candidate.arch, candidate.dirs.join(", ")))
        .collect();
    let rules: Vec<String> = loader
        .rules
        .iter()
        .map(|rule| match &rule.requires {
            Some(requires) => format!("{} ({requires})", rule.name),
            None => rule.name.clone(),
        })
        .collect();
    vec![
        ("{linux_candidate_dirs}", candidates.join("; ")),
        ("{loader_rules}", rules.join(", ")),
    ]
}

/// Reason texts name the SM facts through placeholders, so each fact stays
/// written once in `manifest.architectures`: `{architectures}` (the
/// vocabulary), `{architecture_first_releases}` (release: SMs it first
/// knows) and `{architecture_compile_releases}` (releases: SMs they compile).
fn reason_placeholders(architectures: &[ArchitectureSpec]) -> Vec<(&'static str, String)> {
    let mut first_known: BTreeMap<Release, Vec<&str>> = BTreeMap::new();
    let mut compiled: BTreeMap<(Release, Option<Release>), Vec<&str>> = BTreeMap::new();
    for architecture in architectures {
        let sm = architecture.sm.as_str();
        first_known.entry(architecture.first).or_default().push(sm);
        let span = (architecture.first, architecture.last);
        compiled.entry(span).or_default().push(sm);
    }
    let mut first_lines = Vec::new();
    for (first, sms) in &first_known {
        first_lines.push(format!("{}: {}", release(*first), sms.join(", ")));
    }
    let mut compile_lines = Vec::new();
    for ((first, last), sms) in &compiled {
        let until = match last {
            Some(last) => format!(" to {}", release(*last)),
            None => " or newer".to_string(),
        };
        compile_lines.push(format!("{}{until}: {}", release(*first), sms.join(", ")));
    }
    let names: Vec<&str> = architectures.iter().map(|item| item.sm.as_str()).collect();
    vec![
        ("{architectures}", names.join(", ")),
        ("{architecture_first_releases}", first_lines.join("; ")),
        ("{architecture_compile_releases}", compile_lines.join("; ")),
    ]
}
