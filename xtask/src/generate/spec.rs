//! `templates/provider-spec.json`, typed by one schema, [`SCHEMA`], that
//! drives everything: the parse refuses unknown, missing and mistyped keys
//! with their JSON path, [`check`] refuses broken cross-references, and the
//! same table writes the Python record classes (python.rs).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::OnceLock;

use serde::de::{DeserializeSeed, Deserializer, Error, MapAccess, SeqAccess, Unexpected, Visitor};
use serde::Deserialize;

pub use super::inputs::PROVIDER_SPEC_PATH;
use crate::Result;

/// The spec's records: `Name: docstring`, then `field: type` items, `; `
/// between them, the type as Python annotates it (`int` is a u32). `= None`
/// or `= ()`: the key may be absent; `= derived`: not in the JSON, set by
/// [`parse`]; `  # text` after a line's last field goes into the Python class.
pub const SCHEMA: &str = "\
ProviderSpec: The whole provider spec: every fact of the provider, once.
    schema_version: int; distribution: DistributionSpec; manifest: ManifestSpec
    policy: PolicySpec; option_keys: OptionKeysSpec; capabilities: tuple[CapabilitySpec, ...]
    probe_targets: Mapping[str, ProbeTargetSpec]; lanes: Mapping[str, LaneSpec]
    observation_keys: ObservationKeysSpec; probe_report: ProbeReportSpec
    validation_requirement: ValidationRequirementSpec; probe_runner: ProbeRunnerSpec
    toolkit: ToolkitSpec; smoke: SmokeSpec; runtime_package: RuntimePackageSpec
    incompatible_reason_codes: tuple[str, ...]  # status `incompatible`; others `unavailable`
    reason_codes: Mapping[str, tuple[str, str]]  # code -> (explanation, remedy)
DistributionSpec: The Python distribution's metadata (pyproject.toml is written from it).
    name: str; import_name: str; version: str; requires_python: str
    dependencies: tuple[str, ...]; license: str; entry_point: EntryPointSpec
EntryPointSpec: The entry point Rextio Core loads the provider from.
    group: str; name: str; value: str
ManifestSpec: The passive provider manifest.
    provider_id: str
    display_name: str  # the spec's text, then the version
    provider_version: str = derived  # distribution.version
    backend: str; api_version: str; runtime_requirements: tuple[RuntimePin, ...]
    architectures: tuple[ArchitectureSpec, ...]  # the SM vocabulary, oldest first
    evidence_references: tuple[str, ...]; certification_tier: str
ArchitectureSpec: One SM of the vocabulary, as NVIDIA's compilers measure it (contract 9.5).
    sm: str  # `sm_NN` or `sm_NNN`; tests/python/test_compiler_architectures.py re-reads them
    first: tuple[int, int]  # the first release at or above the toolkit floor that knows it
    last: tuple[int, int] | None  # the last release that compiles it; None: every later one
RuntimePin: A runtime requirement: a name, an exact version and its features.
    name: str; version: str; features: tuple[str, ...]
PolicySpec: Bounds the provider enforces on its configuration.
    driver_version_floor: int; driver_version_ceiling: int
    toolkit_version_floor: tuple[int, int]; toolkit_version_part_max: int
    device_ordinal_max: int; sm_pattern: str
OptionKeysSpec: The device option names.
    probe: str; toolkit: str; driver_root: str; device: str; sm: str; probe_sha256: str
CapabilitySpec: One declared capability; `lane` names a key of `lanes`.
    id: str; lane: str; target_triple: str; artifact_kinds: tuple[str, ...]
    minimum_runtime_version: str; minimum_driver_version: str
ProbeTargetSpec: The (os, arch, environment) a probe reports for a target triple.
    os: str; arch: str; environment: str
LaneSpec: A raw-driver lane (`requirement_policy`) or a framework reuse lane (`requirement`).
    reason_prefix: str | None = None; option_allowlist: frozenset[str]; toolkit_inspection: bool
    required_python_fallback_backend: str | None = None  # None: any backend
    requirement_policy: RawRequirementPolicy | None = None
    requirement: RequirementSpec | None = None; runtime_pins: tuple[RuntimePin, ...] = ()
    observations: Mapping[str, str]; contribution: ContributionSpec
RawRequirementPolicy: What a raw-driver lane accepts in a CUDA device requirement.
    allowed_runtimes: frozenset[str | None]; allowed_features: frozenset[str]
    allowed_memory_spaces: frozenset[str]; allowed_layouts: frozenset[str]
RequirementSpec: The one device requirement a framework lane declares and accepts.
    logical_device: str; backend: str; runtime: str; features: frozenset[str]
    layouts: frozenset[str]; memory_spaces: frozenset[str]; architectures: tuple[str, ...]
    reuse_domain_runtime: bool
ContributionSpec: The declarative build inputs of one lane.
    cargo_features: tuple[str, ...]; native_libraries: tuple[str, ...]
    package_references: tuple[str, ...]; generated_helper_ids: tuple[str, ...]
    runtime_check_ids: tuple[str, ...]; resource_contracts: tuple[ResourceContractSpec, ...]
ResourceContractSpec: One resource contract of a lane's build contribution.
    resource_kind: str; owner: str; access: str; may_allocate: bool; may_replace: bool
    may_synchronize: bool
ObservationKeysSpec: The observation keys of a ready preflight.
    device_count: str; driver_version: str; minimum_driver_version: str
    minimum_toolkit_version: str; probe_schema: str; selected_device: str; selected_sm: str
    target_arch: str; target_os: str; toolkit_runtime: str; toolkit_version: str
    toolkit_not_configured: str; probe_sha256: str
ProbeReportSpec: The probe report's schema and bounds.
    schema_version: str; probe: str; statuses: tuple[str, ...]; complete_status: str
    max_output_bytes: int; max_devices: int; max_device_ordinal: int; max_device_name_chars: int
    device_name_buffer_bytes: int; driver_version_range: tuple[int, int]
    compute_major_range: tuple[int, int]; compute_minor_range: tuple[int, int]
    reason_code_pattern: str; target_field_pattern: str
    driver_environment: Mapping[str, str]  # set before `cuInit`
    reason_codes: tuple[str, ...]  # the codes the probe itself reports
ValidationRequirementSpec: The raw-driver requirement the CLI's `preflight` and `validate` compose.
    runtime: str; features: tuple[str, ...]; memory_spaces: tuple[str, ...]
ProbeRunnerSpec: Bounds of the probe subprocess.
    default_timeout_seconds: float; max_timeout_seconds: float; max_argument_chars: int
    windows_environment: tuple[str, ...]; sha256_pattern: str
    max_pinned_probe_bytes: int  # a larger pinned probe is refused before it is read whole
ToolkitSpec: What the toolkit inspector reads.
    version_file: str; max_version_file_bytes: int; version_pattern: str
    components: Mapping[str, Mapping[str, tuple[str, ...]]]  # os -> component -> paths
SmokeSpec: The lifetime smoke's report.
    probe: str; schema_version: str; allocation_bytes: int; complete_status: str
    failure_status: str
    reason_codes: tuple[str, ...]  # the codes the smoke itself reports
RuntimePackageSpec: The packaged runtime crate.
    crate_name: str  # the JSON key is `crate`
    version: str; install_dir: str
";

/// One record class of [`SCHEMA`]: name, docstring and fields.
pub struct Class(pub &'static str, pub &'static str, pub Vec<Field>);

/// A field: name, Python annotation, default (empty: none) and comment.
pub type Field = (&'static str, &'static str, &'static str, Opt);
type Opt = Option<&'static str>;

/// A field's JSON key: its name, but for the Rust keyword `crate`.
fn key(name: &str) -> &str {
    if name == "crate_name" {
        "crate"
    } else {
        name
    }
}

/// [`SCHEMA`]'s classes, in order.
pub fn schema() -> &'static [Class] {
    static CLASSES: OnceLock<Vec<Class>> = OnceLock::new();
    CLASSES.get_or_init(|| {
        let mut classes: Vec<Class> = Vec::new();
        let split = |text: &'static str, at| text.split_once(at).unwrap_or((text, ""));
        for line in SCHEMA.lines() {
            let Some(fields) = line.strip_prefix("    ") else {
                let (name, doc) = split(line, ": ");
                classes.push(Class(name, doc, Vec::new()));
                continue;
            };
            let (fields, comment) = fields.split_once("  # ").unzip();
            let fields = fields.unwrap_or(line.trim_start());
            let fields: Vec<&str> = fields.split("; ").collect();
            for (index, field) in fields.iter().enumerate() {
                let ((field, default), last) = (split(field, " = "), index + 1 == fields.len());
                let (name, ty) = split(field, ": ");
                let comment = comment.filter(|_| last);
                let class = classes.last_mut().into_iter();
                class.for_each(|class| class.2.push((name, ty, default, comment)));
            }
        }
        classes
    })
}

/// A value of the spec, checked against [`SCHEMA`].
#[derive(Clone, Debug, PartialEq, PartialOrd)]
pub enum Val {
    Null,
    Bool(bool),
    Int(u32),
    Float(f64),
    Str(String),
    /// `tuple[T, ...]` or `tuple[A, B]`.
    Tuple(Vec<Val>),
    /// `frozenset[T]`: sorted; no entry twice.
    Set(Vec<Val>),
    /// `Mapping[str, T]`: sorted by key; no key twice.
    Map(BTreeMap<String, Val>),
    /// A record of [`SCHEMA`]: its class, then its fields in schema order.
    Rec(&'static str, Vec<(&'static str, Val)>),
}

const NULL: Val = Val::Null;

impl Val {
    /// A record's field or a map's entry; `Null` when there is none.
    pub fn get(&self, key: &str) -> &Val {
        let mut entries = self.entries().into_iter();
        entries.find(|(k, _)| *k == key).map_or(&NULL, |(_, v)| v)
    }

    /// The value at a `.`-separated path of fields and keys.
    pub fn at(&self, path: &str) -> &Val {
        path.split('.').fold(self, Val::get)
    }

    pub fn has(&self, key: &str) -> bool {
        *self.get(key) != NULL
    }

    pub fn str(&self) -> &str {
        match self {
            Val::Str(text) => text,
            _ => "",
        }
    }

    pub fn int(&self) -> u64 {
        match self {
            Val::Int(value) => u64::from(*value),
            _ => 0,
        }
    }

    /// A tuple's or a set's items.
    pub fn items(&self) -> &[Val] {
        match self {
            Val::Tuple(items) | Val::Set(items) => items,
            _ => &[],
        }
    }

    /// `(major, minor)` or `[low, high]`.
    pub fn pair(&self) -> (u64, u64) {
        let [low, high] = [self.items().first(), self.items().last()];
        (low.map_or(0, Val::int), high.map_or(0, Val::int))
    }

    /// A map's entries, or a record's fields.
    pub fn entries(&self) -> Vec<(&str, &Val)> {
        match self {
            Val::Map(map) => map.iter().map(|(k, v)| (k.as_str(), v)).collect(),
            Val::Rec(_, fields) => fields.iter().map(|(k, v)| (*k, v)).collect(),
            _ => Vec::new(),
        }
    }

    /// Null, or an empty tuple.
    fn is_empty(&self) -> bool {
        *self == NULL || *self == Val::Tuple(Vec::new())
    }

    fn field_mut(&mut self, key: &str) -> Option<&mut Val> {
        let Val::Rec(_, fields) = self else {
            return None;
        };
        let mut fields = fields.iter_mut();
        fields.find(|(k, _)| *k == key).map(|(_, v)| v)
    }
}

type Res<T, E> = std::result::Result<T, E>;

/// A JSON object that refuses a key given twice (a plain map keeps the last
/// silently); results.rs reads `templates/cuda-results.json` with it.
pub struct Map<V>(pub BTreeMap<String, V>);

impl<V> std::ops::Deref for Map<V> {
    type Target = BTreeMap<String, V>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Map<V> {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Res<Self, D::Error> {
        struct Entries<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for Entries<V> {
            type Value = Map<V>;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Res<Map<V>, A::Error> {
                entries(map, |map| map.next_value()).map(Map)
            }
        }
        de.deserialize_map(Entries(std::marker::PhantomData))
    }
}

/// A JSON object's entries, refusing a key given twice.
fn entries<'de, A: MapAccess<'de>, V>(
    mut map: A,
    mut value: impl FnMut(&mut A) -> Res<V, A::Error>,
) -> Res<BTreeMap<String, V>, A::Error> {
    let mut entries = BTreeMap::new();
    while let Some(key) = map.next_key::<String>()? {
        if entries.contains_key(&key) {
            return Err(A::Error::custom(format!("the key `{key}` is given twice")));
        }
        entries.insert(key, value(&mut map)?);
    }
    Ok(entries)
}

/// Reads one value of the Python annotation it holds.
#[derive(Clone, Copy)]
struct Typed(&'static str);

impl<'de> DeserializeSeed<'de> for Typed {
    type Value = Val;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Res<Val, D::Error> {
        match self.0 {
            "str" => String::deserialize(de).map(Val::Str),
            "int" => u32::deserialize(de).map(Val::Int),
            "float" => f64::deserialize(de).map(Val::Float),
            "bool" => bool::deserialize(de).map(Val::Bool),
            ty if ty.ends_with(" | None") => de.deserialize_option(self),
            _ => de.deserialize_any(self),
        }
    }
}

/// Refuses the value it is asked for, so the error's path ends at its key.
struct Refuse(String);

impl<'de> DeserializeSeed<'de> for Refuse {
    type Value = Val;

    fn deserialize<D: Deserializer<'de>>(self, _: D) -> Res<Val, D::Error> {
        Err(D::Error::custom(self.0))
    }
}

impl<'de> Visitor<'de> for Typed {
    type Value = Val;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = self.0.starts_with("tuple[") || self.0.starts_with("frozenset[");
        formatter.write_str(if list { "a list" } else { "an object" })
    }

    fn visit_none<E: Error>(self) -> Res<Val, E> {
        Ok(NULL)
    }

    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Res<Val, D::Error> {
        Typed(self.0.trim_end_matches(" | None")).deserialize(de)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Res<Val, A::Error> {
        let set = self.0.starts_with("frozenset[");
        let open = if set { "frozenset[" } else { "tuple[" };
        let items = self.0.strip_prefix(open);
        let items = items.and_then(|ty| ty.strip_suffix(']'));
        let Some(items) = items else {
            return Err(A::Error::invalid_type(Unexpected::Seq, &self));
        };
        // `T, ...`: any number of T; `A, B`: a pair.
        let (first, second) = items.split_once(", ").unwrap_or((items, "..."));
        let mut values = Vec::new();
        loop {
            let later = !values.is_empty() && second != "...";
            let Some(value) = seq.next_element_seed(Typed(if later { second } else { first }))?
            else {
                break;
            };
            if set && values.contains(&value) {
                let shown = match &value {
                    Val::Str(text) => format!("{text:?}"),
                    _ => "null".into(),
                };
                let message = format!("the entry {shown} is given twice");
                return Err(A::Error::custom(message));
            }
            values.push(value);
        }
        if second != "..." && values.len() != 2 {
            return Err(A::Error::invalid_length(values.len(), &"a pair"));
        }
        if !set {
            return Ok(Val::Tuple(values));
        }
        values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
        Ok(Val::Set(values))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Res<Val, A::Error> {
        let mapping = self.0.strip_prefix("Mapping[str, ");
        if let Some(ty) = mapping.and_then(|ty| ty.strip_suffix(']')) {
            let values = entries(map, |map| map.next_value_seed(Typed(ty)));
            return values.map(Val::Map);
        }
        let Some(Class(class, _, all)) = schema().iter().find(|class| class.0 == self.0) else {
            return Err(A::Error::invalid_type(Unexpected::Map, &self));
        };
        let fields: Vec<&Field> = all.iter().filter(|field| field.2 != "derived").collect();
        let mut values: Vec<Option<Val>> = vec![None; fields.len()];
        while let Some(name) = map.next_key::<String>()? {
            let Some(index) = fields.iter().position(|field| key(field.0) == name) else {
                let known = fields.iter().map(|field| format!("`{}`", key(field.0)));
                let known = known.collect::<Vec<_>>().join(", ");
                let message = format!("unknown field `{name}`, expected one of {known}");
                map.next_value_seed(Refuse(message))?;
                continue;
            };
            if values[index].is_some() {
                return Err(A::Error::custom(format!("duplicate field `{name}`")));
            }
            values[index] = Some(map.next_value_seed(Typed(fields[index].1))?);
        }
        let mut record = Vec::new();
        for (name, _, default, _) in all {
            let index = fields.iter().position(|field| field.0 == *name);
            let value = match (index.and_then(|index| values[index].take()), *default) {
                (Some(value), _) => value,
                (None, "()") => Val::Tuple(Vec::new()),
                (None, "") => return Err(A::Error::missing_field(key(name))),
                (None, _) => NULL,
            };
            record.push((*name, value));
        }
        Ok(Val::Rec(class, record))
    }
}

/// Parses and checks the spec; every error names the file and the JSON path.
pub fn parse(bytes: &[u8]) -> Result<Val> {
    let mut json = serde_json::Deserializer::from_slice(bytes);
    let mut track = serde_path_to_error::Track::new();
    let tracked = serde_path_to_error::Deserializer::new(&mut json, &mut track);
    let parsed = Typed("ProviderSpec").deserialize(tracked);
    let mut spec = parsed.map_err(|error| match track.path().to_string().as_str() {
        "." => format!("{PROVIDER_SPEC_PATH}: {error}"),
        path => format!("{PROVIDER_SPEC_PATH}: {path}: {error}"),
    })?;
    let trailing = |error| format!("{PROVIDER_SPEC_PATH}: {error}");
    json.end().map_err(trailing)?;
    check(&spec)?;
    // The version is written once, in `distribution`.
    let version = spec.at("distribution.version").str().to_string();
    let placeholders = reason_placeholders(&spec);
    if let Some(Val::Rec(_, fields)) = spec.field_mut("manifest") {
        for (name, value) in fields.iter_mut() {
            match (*name, value) {
                ("display_name", Val::Str(text)) => *text = format!("{text} {version}"),
                ("provider_version", value) => *value = Val::Str(version.clone()),
                _ => {}
            }
        }
    }
    let Some(Val::Map(codes)) = spec.field_mut("reason_codes") else {
        return Ok(spec);
    };
    for (code, texts) in codes.iter_mut() {
        let Val::Tuple(texts) = texts else { continue };
        for text in texts.iter_mut() {
            let Val::Str(text) = text else { continue };
            for (name, value) in &placeholders {
                *text = text.replace(name, value);
            }
            let message = format!(
                "reason_codes.{code}: an unknown placeholder; the known ones are \
                 {{architectures}}, {{architecture_first_releases}} and \
                 {{architecture_compile_releases}}"
            );
            ensure(!text.contains(['{', '}']), message)?;
        }
    }
    Ok(spec)
}

/// Reason texts name the SM facts through placeholders, so each fact stays
/// written once in `manifest.architectures`: `{architectures}` (the
/// vocabulary), `{architecture_first_releases}` (release: SMs it first
/// knows) and `{architecture_compile_releases}` (releases: SMs they compile).
fn reason_placeholders(spec: &Val) -> [(&'static str, String); 3] {
    let release = |(major, minor): (u64, u64)| format!("{major}.{minor}");
    let mut first: BTreeMap<_, Vec<&str>> = BTreeMap::new();
    let mut compile: BTreeMap<_, Vec<&str>> = BTreeMap::new();
    for item in spec.at("manifest.architectures").items() {
        let (sm, from) = (item.get("sm").str(), item.get("first").pair());
        let last = item.get("last");
        first.entry(from).or_default().push(sm);
        let last = (*last != NULL).then(|| last.pair());
        compile.entry((from, last)).or_default().push(sm);
    }
    let first = first
        .iter()
        .map(|(from, sms)| (release(*from), sms.join(", ")));
    let first = first.map(|(from, sms)| format!("{from}: {sms}"));
    let compile = compile.iter().map(|((from, last), sms)| {
        let until = last.map_or(" or newer".into(), |last| format!(" to {}", release(last)));
        format!("{}{until}: {}", release(*from), sms.join(", "))
    });
    let first = first.collect::<Vec<_>>().join("; ");
    let compile = compile.collect::<Vec<_>>().join("; ");
    let names = architecture_names(spec).join(", ");
    [
        ("{architectures}", names),
        ("{architecture_first_releases}", first),
        ("{architecture_compile_releases}", compile),
    ]
}

/// `Err("<spec file>: <path>: <message>")` unless `ok`.
fn ensure(ok: bool, path_and_message: String) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(format!("{PROVIDER_SPEC_PATH}: {path_and_message}"))
    }
}

/// The spec's pattern at `path`, which Python's `re` reads too.
fn pattern(spec: &Val, path: &str) -> Result<regex_lite::Regex> {
    let text = spec.at(path).str();
    let message = |error| format!("{path}: `{text}` is not a regular expression: {error}");
    regex_lite::Regex::new(text)
        .map_err(|error| format!("{PROVIDER_SPEC_PATH}: {}", message(error)))
}

/// Fails at `path` when `items` holds an entry twice.
fn unique<'a>(path: &str, items: impl IntoIterator<Item = &'a Val>) -> Result<()> {
    let mut seen = BTreeSet::new();
    for (index, item) in items.into_iter().enumerate() {
        let item = item.str();
        let message = format!("{path}[{index}]: `{item}` is listed twice");
        ensure(seen.insert(item), message)?;
    }
    Ok(())
}

/// The SM vocabulary's names, in spec order.
pub fn architecture_names(spec: &Val) -> Vec<&str> {
    let architectures = spec.at("manifest.architectures").items().iter();
    architectures.map(|item| item.get("sm").str()).collect()
}

/// The runtime tarball's stem, e.g. `rextio-cuda-runtime-0.1.0`.
pub fn runtime_archive_stem(spec: &Val) -> String {
    let package = spec.get("runtime_package");
    let name = package.get("crate_name").str();
    format!("{name}-{}", package.get("version").str())
}

/// The cross-reference and bound checks the schema cannot express.
pub fn check(spec: &Val) -> Result<()> {
    let version = spec.get("schema_version").int();
    let message = format!("schema_version: {version} is not supported (expected 1)");
    ensure(version == 1, message)?;
    check_reason_codes(spec)?;
    check_vocabulary(spec)?;
    check_capabilities(spec)?;
    check_lanes(spec)?;
    check_bounds(spec)
}

fn check_reason_codes(spec: &Val) -> Result<()> {
    let codes = pattern(spec, "probe_report.reason_code_pattern")?;
    let reason_codes = spec.get("reason_codes");
    for (code, texts) in reason_codes.entries() {
        let message = format!("reason_codes.{code}: the code does not match {codes}");
        ensure(codes.is_match(code), message)?;
        let mut texts = texts.items().iter();
        let empty = texts.any(|text| text.str().trim().is_empty());
        let message = "the explanation and the remedy must not be empty";
        ensure(!empty, format!("reason_codes.{code}: {message}"))?;
    }
    let lists = ["probe_report.reason_codes", "smoke.reason_codes"];
    for path in lists.into_iter().chain(["incompatible_reason_codes"]) {
        unique(path, spec.at(path).items())?;
        for (index, code) in spec.at(path).items().iter().enumerate() {
            let code = code.str();
            let message = format!("the reason code `{code}` has no entry in `reason_codes`");
            let message = format!("{path}[{index}]: {message}");
            ensure(reason_codes.has(code), message)?;
        }
    }
    Ok(())
}

fn check_vocabulary(spec: &Val) -> Result<()> {
    let sms = pattern(spec, "policy.sm_pattern")?;
    let floor = spec.at("policy.toolkit_version_floor").pair();
    let architectures = spec.at("manifest.architectures").items();
    let message = "manifest.architectures: the SM vocabulary is empty";
    ensure(!architectures.is_empty(), message.into())?;
    for (index, item) in architectures.iter().enumerate() {
        let path = format!("manifest.architectures[{index}]");
        let sm = item.get("sm").str();
        let message = format!("{path}.sm: `{sm}` does not match `policy.sm_pattern` {sms}");
        ensure(sms.is_match(sm), message)?;
        // Releases below the floor are never distinguished: the floor is the earliest.
        let (first, last) = (item.get("first").pair(), item.get("last"));
        let ((major, minor), (low_major, low_minor)) = (first, floor);
        let message = format!("{major}.{minor} is below the toolkit floor {low_major}.{low_minor}");
        ensure(first >= floor, format!("{path}.first: {message}"))?;
        let message = format!("{path}.last: `{sm}` is last compiled before its first release");
        ensure(*last == NULL || last.pair() >= first, message)?;
    }
    let names = architectures.iter().map(|item| item.get("sm"));
    unique("manifest.architectures", names)?;
    // Core keeps one runtime requirement per name: a second must be the same.
    fn canonical(pin: &Val) -> (&str, &str, BTreeSet<&str>) {
        let features = pin.get("features").items().iter().map(|f| f.str().trim());
        let name = pin.get("name").str().trim();
        (name, pin.get("version").str().trim(), features.collect())
    }
    let pins = spec.at("manifest.runtime_requirements").items();
    for (index, pin) in pins.iter().enumerate() {
        let pin = canonical(pin);
        let mut earlier = pins[..index].iter().map(canonical);
        let conflict = earlier.any(|other| other.0 == pin.0 && other != pin);
        let message = format!("conflicting runtime requirements for `{}`", pin.0);
        let path = format!("manifest.runtime_requirements[{index}]");
        ensure(!conflict, format!("{path}: {message}"))?;
    }
    Ok(())
}

fn check_capabilities(spec: &Val) -> Result<()> {
    let capabilities = spec.get("capabilities").items();
    let message = "capabilities: no capability is declared";
    ensure(!capabilities.is_empty(), message.into())?;
    let mut ids = BTreeSet::new();
    for (index, capability) in capabilities.iter().enumerate() {
        let path = format!("capabilities[{index}]");
        let keys = ["id", "lane", "target_triple"];
        let [id, lane, triple] = keys.map(|key| capability.get(key).str());
        let message = format!("{path}.id: `{id}` is declared twice");
        ensure(ids.insert(id), message)?;
        let message = format!("{path}.lane: `{lane}` is not a key of `lanes`");
        ensure(spec.get("lanes").has(lane), message)?;
        let target = spec.get("probe_targets").get(triple);
        let message = format!("`{triple}` is not a key of `probe_targets`");
        ensure(*target != NULL, format!("{path}.target_triple: {message}"))?;
        let os = target.get("os").str();
        let message = format!("`{os}` is not a key of `toolkit.components`");
        let known = spec.at("toolkit.components").has(os);
        ensure(known, format!("probe_targets.{triple}.os: {message}"))?;
        let message = "a capability builds at least one artifact kind";
        let kinds = capability.get("artifact_kinds");
        let message = format!("{path}.artifact_kinds: {message}");
        ensure(!kinds.is_empty(), message)?;
    }
    Ok(())
}

fn check_lanes(spec: &Val) -> Result<()> {
    let options = spec.get("option_keys").entries();
    let capabilities = spec.get("capabilities").items();
    for (name, lane) in spec.get("lanes").entries() {
        let path = format!("lanes.{name}");
        for option in lane.get("option_allowlist").items() {
            let known = options.iter().any(|(_, key)| *key == option);
            let message = format!("`{}` is not one of the `option_keys`", option.str());
            ensure(known, format!("{path}.option_allowlist: {message}"))?;
        }
        let (policy, requirement) = (lane.get("requirement_policy"), lane.get("requirement"));
        match (policy, requirement) {
            (&NULL, &NULL) | (Val::Rec(..), Val::Rec(..)) => {
                let message = "a lane has exactly one of `requirement_policy` (raw-driver) \
                               and `requirement` (framework reuse)";
                ensure(false, format!("{path}: {message}"))?;
            }
            (&NULL, _) => check_framework_lane(spec, &path, lane, requirement)?,
            _ => check_raw_lane(spec, &path, lane, policy)?,
        }
        let used = capabilities.iter().any(|c| c.get("lane").str() == name);
        ensure(used, format!("{path}: no capability uses this lane"))?;
    }
    Ok(())
}

fn check_raw_lane(spec: &Val, path: &str, lane: &Val, policy: &Val) -> Result<()> {
    for key in [
        "reason_prefix",
        "required_python_fallback_backend",
        "runtime_pins",
    ] {
        let message = "only a framework reuse lane (one with `requirement`) has this key";
        ensure(lane.get(key).is_empty(), format!("{path}.{key}: {message}"))?;
    }
    let validation = spec.get("validation_requirement");
    let allows = |key: &str, allowed: &str| {
        let allowed = policy.get(allowed).items();
        let mut items = validation.get(key).items().iter();
        items.all(|item| allowed.contains(item))
    };
    let runtimes = policy.get("allowed_runtimes").items();
    let accepted = runtimes.contains(validation.get("runtime"))
        && allows("features", "allowed_features")
        && allows("memory_spaces", "allowed_memory_spaces");
    let message = format!("the requirement is not accepted by `{path}.requirement_policy`");
    ensure(accepted, format!("validation_requirement: {message}"))
}

fn check_framework_lane(spec: &Val, path: &str, lane: &Val, requirement: &Val) -> Result<()> {
    let prefix = lane.get("reason_prefix").str();
    let message = "missing field `reason_prefix` (a framework reuse lane needs one)";
    ensure(lane.has("reason_prefix"), format!("{path}: {message}"))?;
    let codes = pattern(spec, "probe_report.reason_code_pattern")?;
    let message = format!("`{prefix}` is not an upper-case code prefix ending in `_`");
    let shaped = codes.is_match(prefix) && prefix.ends_with('_');
    ensure(shaped, format!("{path}.reason_prefix: {message}"))?;
    let codes = spec.get("reason_codes").entries();
    let used = codes.iter().any(|(code, _)| code.starts_with(prefix));
    let message = format!("{path}.reason_prefix: no reason code starts with `{prefix}`");
    ensure(used, message)?;
    let device = requirement.get("logical_device").str().trim();
    let message = format!("{path}.requirement.logical_device: the device is empty");
    ensure(!device.is_empty(), message)?;
    let message = "a framework reuse lane pins at least one runtime";
    let pins = lane.get("runtime_pins");
    ensure(!pins.is_empty(), format!("{path}.runtime_pins: {message}"))?;
    let vocabulary = architecture_names(spec);
    for (index, sm) in requirement.get("architectures").items().iter().enumerate() {
        let sm = sm.str();
        let message = format!("`{sm}` is not in `manifest.architectures`");
        let path = format!("{path}.requirement.architectures[{index}]");
        ensure(vocabulary.contains(&sm), format!("{path}: {message}"))?;
    }
    Ok(())
}

/// The bounds the generated Rust constants and the Python checks rely on.
fn check_bounds(spec: &Val) -> Result<()> {
    let int = |path: &str| spec.at(path).int();
    let (u32_max, i32_max) = (u64::from(u32::MAX), i32::MAX as u64);
    let ordinal_max = int("probe_report.max_device_ordinal");
    let part_max = int("policy.toolkit_version_part_max");
    let ceiling = int("policy.driver_version_ceiling");
    let floor = spec.at("policy.toolkit_version_floor").pair();
    #[rustfmt::skip]
    let within = [
        ("probe_report.max_output_bytes", 1, u32_max),
        ("probe_report.max_devices", 1, i32_max),
        ("probe_report.max_device_ordinal", 0, i32_max),
        ("probe_report.max_device_name_chars", 1, 1 << 16),
        ("probe_report.device_name_buffer_bytes", 1, i32_max),
        ("smoke.allocation_bytes", 1, u32_max),
        ("policy.device_ordinal_max", 0, ordinal_max),
        ("policy.driver_version_floor", 1, ceiling),
    ];
    let within = within.map(|(path, low, high)| (path.to_string(), int(path), low, high));
    let part = |index, value, low| (format!("policy.toolkit_version_floor[{index}]"), value, low);
    let parts = [part(0, floor.0, 1), part(1, floor.1, 0)];
    let parts = parts.map(|(path, value, low)| (path, value, low, part_max));
    for (path, value, low, high) in within.into_iter().chain(parts) {
        let message = format!("{path}: {value} is not from {low} to {high}");
        ensure((low..=high).contains(&value), message)?;
    }
    for name in [
        "driver_version_range",
        "compute_major_range",
        "compute_minor_range",
    ] {
        let (low, high) = spec.get("probe_report").get(name).pair();
        let message = format!("[{low}, {high}] is not a range of integers from 0 to {i32_max}");
        let range = low <= high && high <= i32_max;
        ensure(range, format!("probe_report.{name}: {message}"))?;
    }
    let complete = spec.at("probe_report.complete_status");
    let message = format!("`{}` is not one of `probe_report.statuses`", complete.str());
    let known = spec.at("probe_report.statuses").items().contains(complete);
    ensure(known, format!("probe_report.complete_status: {message}"))?;
    let seconds = |key| match spec.get("probe_runner").get(key) {
        Val::Float(value) => *value,
        _ => 0.0,
    };
    let default = seconds("default_timeout_seconds");
    let timeout = default > 0.0 && default <= seconds("max_timeout_seconds");
    let message = "the default timeout must be positive and at most `max_timeout_seconds`";
    let message = format!("probe_runner.default_timeout_seconds: {message}");
    ensure(timeout, message)?;
    let stem = runtime_archive_stem(spec);
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    let plain = stem.chars().all(allowed);
    let message = format!("crate/version `{stem}` is not a plain file name");
    ensure(plain, format!("runtime_package: {message}"))
}
