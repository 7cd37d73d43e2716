//! `templates/provider-spec.json`, typed by one schema, [`SCHEMA`], that
//! drives everything: the parse refuses unknown, missing and mistyped keys
//! (and inputs.rs duplicate ones) with their JSON path, [`RULES`] refuse broken
//! cross-references and bounds, and the same table writes the Python record
//! classes (python.rs).

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::{json, Value};

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
    crate_name: str; version: str; install_dir: str
";

/// One record class of [`SCHEMA`]: name, docstring and fields.
pub struct Class(pub &'static str, pub &'static str, pub Vec<Field>);

/// A field: name, Python annotation, default and `  # comment` (each empty: none).
pub type Field = (&'static str, &'static str, &'static str, &'static str);

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
            let (fields, comment) = fields.split_at(fields.find("  # ").unwrap_or(fields.len()));
            let fields: Vec<&str> = fields.split("; ").collect();
            for (index, field) in fields.iter().enumerate() {
                let ((field, default), last) = (split(field, " = "), index + 1 == fields.len());
                let (name, ty) = split(field, ": ");
                let comment = if last { comment } else { "" };
                let class = classes.last_mut().into_iter();
                class.for_each(|class| class.2.push((name, ty, default, comment)));
            }
        }
        classes
    })
}

/// The type of item `index` of a `tuple[T, ...]`, `tuple[A, B]`,
/// `frozenset[T]` or (any index) of a `Mapping[str, T]`'s values.
pub fn item_type(ty: &str, index: usize) -> &str {
    let ty = ty.trim_end_matches(" | None");
    if let Some(value) = ty.strip_prefix("Mapping[str, ") {
        return value.strip_suffix(']').unwrap_or(value);
    }
    let inner = ty.split_once('[').map_or("", |(_, rest)| rest);
    let inner = inner.strip_suffix(']').unwrap_or(inner);
    match inner.split_once(", ") {
        Some((_, second)) if second != "..." && index > 0 => second,
        Some((first, _)) => first,
        None => inner,
    }
}

/// A list's items; none for anything else.
pub fn items(value: &Value) -> &[Value] {
    value.as_array().map_or(&[], Vec::as_slice)
}

/// An object's entries; none for anything else.
pub fn entries(value: &Value) -> impl Iterator<Item = (&String, &Value)> + Clone {
    value.as_object().into_iter().flatten()
}

/// A string's text; empty for anything else.
pub fn text(value: &Value) -> &str {
    value.as_str().unwrap_or("")
}

/// `Err("<spec file>: <path>: <problem>")`.
fn fail<T>(path: &str, problem: impl fmt::Display) -> Result<T> {
    let at = if path.is_empty() { "" } else { ": " };
    Err(format!("{PROVIDER_SPEC_PATH}: {path}{at}{problem}"))
}

/// Checks `value` at `path` against the annotation `ty`, sorting sets and
/// giving a record's absent optional keys their default.
fn typed(ty: &str, value: &mut Value, path: &str) -> Result<()> {
    let join = |key: &str| [path, key].join(if path.is_empty() { "" } else { "." });
    if ty.ends_with(" | None") && value.is_null() {
        return Ok(());
    }
    let ty = ty.trim_end_matches(" | None");
    let class = schema().iter().find(|class| class.0 == ty);
    let (set, list) = (ty.starts_with("frozenset["), ty.starts_with("tuple["));
    if let (Value::Object(map), Some(Class(_, _, fields))) = (&mut *value, class) {
        let given = fields.iter().filter(|field| field.2 != "derived");
        let names: Vec<&str> = given.clone().map(|field| field.0).collect();
        if let Some(name) = map.keys().find(|name| !names.contains(&name.as_str())) {
            let known = names.join("`, `");
            let message = format!("unknown field `{name}`, expected one of `{known}`");
            return fail(&join(name), message);
        }
        for (name, ty, default, _) in given {
            let empty = (*default == "()").then(|| json!([]));
            match map.get_mut(*name) {
                Some(value) => typed(ty, value, &join(name))?,
                None if default.is_empty() => return fail(path, format!("missing field `{name}`")),
                None => drop(map.insert(name.to_string(), empty.unwrap_or_default())),
            }
        }
    } else if let (Value::Object(map), true) = (&mut *value, ty.starts_with("Mapping[")) {
        for (key, value) in map.iter_mut() {
            typed(item_type(ty, 0), value, &join(key))?;
        }
    } else if let (Value::Array(values), true) = (&mut *value, set || list) {
        if list && !ty.ends_with(", ...]") && values.len() != 2 {
            let message = format!("invalid length {}, expected a pair", values.len());
            return fail(path, message);
        }
        for (index, value) in values.iter_mut().enumerate() {
            typed(item_type(ty, index), value, &format!("{path}[{index}]"))?;
        }
        if set {
            values.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
            if let Some(pair) = values.windows(2).find(|pair| pair[0] == pair[1]) {
                return fail(path, format!("the entry {} is given twice", pair[0]));
            }
        }
    } else {
        let checked = match ty {
            "str" => String::deserialize(&*value).map(drop),
            "int" => u32::deserialize(&*value).map(drop),
            "float" => f64::deserialize(&*value).map(drop),
            "bool" => bool::deserialize(&*value).map(drop),
            _ => return fail(path, format!("invalid type: {value}, expected `{ty}`")),
        };
        return checked.or_else(|error| fail(path, error));
    }
    Ok(())
}

/// Parses and checks the spec; every error names the file and the JSON path.
pub fn parse(bytes: &[u8]) -> Result<Value> {
    let mut spec: Value = super::inputs::parse_json(PROVIDER_SPEC_PATH, bytes)?;
    typed("ProviderSpec", &mut spec, "")?;
    check(&spec)?;
    // The version is written once, in `distribution`.
    let version = text(&spec["distribution"]["version"]).to_string();
    let placeholders = reason_placeholders(&spec);
    let manifest = &mut spec["manifest"];
    manifest["display_name"] = format!("{} {version}", text(&manifest["display_name"])).into();
    manifest["provider_version"] = version.into();
    for (code, texts) in spec["reason_codes"].as_object_mut().into_iter().flatten() {
        for value in texts.as_array_mut().into_iter().flatten() {
            let fill = |text: String, (name, value): &(_, String)| text.replace(name, value);
            let filled = placeholders.iter().fold(text(value).to_string(), fill);
            if filled.contains(['{', '}']) {
                let known = placeholders.map(|(name, _)| name).join(", ");
                let message = format!("an unknown placeholder; the known ones are {known}");
                return fail(&format!("reason_codes.{code}"), message);
            }
            *value = filled.into();
        }
    }
    Ok(spec)
}

/// Reason texts name the SM facts through placeholders, so each fact stays
/// written once in `manifest.architectures`: `{architectures}` (the
/// vocabulary), `{architecture_first_releases}` (release: SMs it first
/// knows) and `{architecture_compile_releases}` (releases: SMs they compile).
fn reason_placeholders(spec: &Value) -> [(&'static str, String); 3] {
    let pair = |value: &Value| [0, 1].map(|index| value[index].as_u64().unwrap_or(0));
    let release = |[major, minor]: [u64; 2]| format!("{major}.{minor}");
    let mut first: BTreeMap<_, Vec<&str>> = BTreeMap::new();
    let mut compile: BTreeMap<_, Vec<&str>> = BTreeMap::new();
    let architectures = items(&spec["manifest"]["architectures"]);
    for item in architectures {
        let (sm, from, last) = (text(&item["sm"]), pair(&item["first"]), &item["last"]);
        first.entry(from).or_default().push(sm);
        let last = (!last.is_null()).then(|| pair(last));
        compile.entry((from, last)).or_default().push(sm);
    }
    let first = first
        .iter()
        .map(|(from, sms)| format!("{}: {}", release(*from), sms.join(", ")));
    let compile = compile.iter().map(|((from, last), sms)| {
        let until = last.map_or(" or newer".into(), |last| format!(" to {}", release(last)));
        format!("{}{until}: {}", release(*from), sms.join(", "))
    });
    let (first, compile): (Vec<_>, Vec<_>) = (first.collect(), compile.collect());
    let names: Vec<&str> = architectures.iter().map(|item| text(&item["sm"])).collect();
    [
        ("{architectures}", names.join(", ")),
        ("{architecture_first_releases}", first.join("; ")),
        ("{architecture_compile_releases}", compile.join("; ")),
    ]
}

/// The cross-references and bounds the types cannot say, one a line, in
/// the order they are checked: the values (`.` between steps; `*`: each
/// entry, `[]`: each item, `[N]`: the Nth; null ones skipped), the rule
/// (`key:` first: applied to the entry's key) and its argument: a path
/// (`.x` or `[N]`: a sibling's), a number, for `matches` a path to a pattern
/// or a pattern (`$` last), or for `has` keys `|` apart (one must be there),
/// several rules a line `; ` apart. A lane is raw-driver or framework reuse.
/// Core keeps one runtime requirement per name; releases below the toolkit floor are never
/// distinguished; the bounds (`int` is already a u32) are the ones the
/// generated Rust constants and the Python checks rely on; the crate and
/// version name the tarball's file; a raw lane accepts the requirement the
/// CLI composes.
pub const RULES: &str = "\
schema_version >= 1; <= 1
reason_codes.* key:matches probe_report.reason_code_pattern
reason_codes.*[] nonempty
probe_report.reason_codes[] unique; key_of reason_codes
smoke.reason_codes[] unique; key_of reason_codes
incompatible_reason_codes[] unique; key_of reason_codes
manifest.runtime_requirements[].name matches ^\\S+$; unique
manifest.architectures nonempty
manifest.architectures[].sm matches policy.sm_pattern
manifest.architectures[].first >= policy.toolkit_version_floor
manifest.architectures[].last >= .first
manifest.architectures[].sm unique
capabilities nonempty
capabilities[].id unique
capabilities[].lane key_of lanes
capabilities[].target_triple key_of probe_targets
capabilities[].artifact_kinds nonempty
probe_targets.*.os key_of toolkit.components
lanes.* key:in capabilities[].lane
lanes.*.option_allowlist[] in option_keys.*
lanes.* has requirement_policy|requirement
lanes.*.requirement_policy excludes .requirement; excludes .reason_prefix; excludes .runtime_pins
lanes.*.requirement_policy excludes .required_python_fallback_backend
lanes.*.requirement needs .reason_prefix; needs .runtime_pins
lanes.*.reason_prefix matches probe_report.reason_code_pattern; matches _$; prefix_of reason_codes
lanes.*.requirement.logical_device nonempty
lanes.*.requirement_policy.allowed_runtimes includes validation_requirement.runtime
lanes.*.requirement_policy.allowed_features includes validation_requirement.features[]
lanes.*.requirement_policy.allowed_memory_spaces includes validation_requirement.memory_spaces[]
lanes.*.requirement.architectures[] in manifest.architectures[].sm
probe_report.max_output_bytes > 0
probe_report.max_devices > 0; <= 2147483647
probe_report.max_device_ordinal <= 2147483647
probe_report.max_device_name_chars > 0; <= 65536
probe_report.device_name_buffer_bytes > 0; <= 2147483647
smoke.allocation_bytes > 0
policy.device_ordinal_max <= probe_report.max_device_ordinal
policy.driver_version_floor > 0; <= policy.driver_version_ceiling
policy.toolkit_version_floor[0] > 0
policy.toolkit_version_floor[] <= policy.toolkit_version_part_max
probe_report.driver_version_range[1] >= [0]; <= 2147483647
probe_report.compute_major_range[1] >= [0]; <= 2147483647
probe_report.compute_minor_range[1] >= [0]; <= 2147483647
probe_report.complete_status in probe_report.statuses[]
probe_runner.default_timeout_seconds > 0
probe_runner.max_timeout_seconds >= probe_runner.default_timeout_seconds
runtime_package.crate_name matches ^[A-Za-z0-9._-]+$
runtime_package.version matches ^[A-Za-z0-9._-]+$
";

/// The non-null values a [`RULES`] selector names, with their JSON paths.
fn select<'a>(spec: &'a Value, selector: &str) -> Vec<(String, &'a Value)> {
    let mut found = vec![(String::new(), spec)];
    // `name`, `*` (every entry), `[]` (every item) or `[N]` (the Nth).
    for step in selector.replace('[', ".[").split('.') {
        let mut next = Vec::new();
        for (path, value) in found {
            let dot = if path.is_empty() { "" } else { "." };
            let keys = entries(value).map(|(key, value)| (format!("{path}{dot}{key}"), value));
            let indexed = items(value).iter().enumerate();
            let mut indexed = indexed.map(|(at, item)| (format!("{path}[{at}]"), item));
            match step {
                "*" => next.extend(keys),
                "[]" => next.extend(indexed),
                _ if step.starts_with('[') => {
                    next.extend(indexed.find(|(at, _)| at.ends_with(step)))
                }
                _ => next.push((format!("{path}{dot}{step}"), &value[step])),
            }
        }
        found = next;
    }
    found.retain(|(_, value)| !value.is_null());
    found
}

/// The pattern at `path` (or `pattern` itself), which Python's `re` reads too.
fn regex(path: &str, pattern: &str) -> Result<regex_lite::Regex> {
    let invalid = |error| format!("`{pattern}` is not a regular expression: {error}");
    regex_lite::Regex::new(pattern).or_else(|error| fail(path, invalid(error)))
}

/// Applies one rule of a [`RULES`] line to every value its selector names.
fn apply(spec: &Value, selector: &str, rule: &str) -> Result<()> {
    let (rule, arg) = rule.split_once(' ').unwrap_or((rule, ""));
    let numbers = |value: &Value| match value {
        Value::Array(items) => items.iter().map(Value::as_f64).collect(),
        value => vec![value.as_f64()],
    };
    let mut seen: Vec<Value> = Vec::new();
    for (path, value) in select(spec, selector) {
        let key = Value::from(path.rsplit('.').next().unwrap_or_default());
        let keyed = rule.strip_prefix("key:");
        let (rule, value) = keyed.map_or((rule, value), |rule| (rule, &key));
        let target = match arg.starts_with(['.', '[']) {
            true => format!("{}{arg}", &path[..path.rfind(['.', '[']).unwrap_or(0)]),
            false => arg.to_string(),
        };
        let found = select(spec, &target);
        let bound = found.first().map(|(_, value)| *value);
        let mut keys = entries(bound.unwrap_or(&Value::Null)).map(|(key, _)| key.as_str());
        // A limit that names nothing compares with nothing: the rule fails.
        let limit = bound.map_or(vec![arg.parse().ok()], numbers);
        let order = numbers(value)
            .partial_cmp(&limit)
            .filter(|_| !limit.contains(&None));
        let pattern = bound.and_then(Value::as_str).unwrap_or(arg);
        let named = bound.is_some() || arg.ends_with('$');
        let shown = value.as_str().map_or(value.to_string(), str::to_string);
        let ok = match rule {
            "nonempty" => !shown.trim().is_empty() && *value != json!([]),
            "unique" => !seen.contains(value),
            "key_of" => keys.any(|key| key == shown),
            "prefix_of" => keys.any(|key| key.starts_with(&shown)),
            "in" => found.iter().any(|(_, item)| *item == value),
            "includes" => found.iter().all(|(_, item)| items(value).contains(item)),
            ">=" => order.is_some_and(Ordering::is_ge),
            ">" => order.is_some_and(Ordering::is_gt),
            "<=" => order.is_some_and(Ordering::is_le),
            "matches" => named && regex(&target, pattern)?.is_match(&shown),
            "has" => arg.split('|').any(|key| !value[key].is_null()),
            "needs" | "excludes" => bound.is_some_and(|b| *b != json!([])) == (rule == "needs"),
            _ => return fail(selector, format!("`{rule}` is not a rule")),
        };
        let limit = bound.map_or(arg.to_string(), |bound| format!("`{target}` {bound}"));
        let problem = match rule {
            "nonempty" => "must not be empty".to_string(),
            "needs" | "excludes" => format!("this key {rule} `{target}`"),
            "has" => format!("has none of `{arg}`"),
            "unique" => format!("`{shown}` is listed twice"),
            "key_of" => format!("`{shown}` is not a key of `{target}`"),
            "prefix_of" => format!("no key of `{target}` starts with `{shown}`"),
            "in" => format!("`{shown}` is not one of `{target}`"),
            "includes" => format!("lacks one of `{target}`"),
            "matches" => format!("`{shown}` does not match `{target}` {pattern}"),
            _ => format!("{shown} must be {rule} {limit}"),
        };
        if !ok {
            return fail(&path, problem);
        }
        seen.push(value.clone());
    }
    Ok(())
}

/// Applies [`RULES`].
pub fn check(spec: &Value) -> Result<()> {
    for line in RULES.lines() {
        let (selector, rules) = line.split_once(' ').unwrap_or((line, ""));
        let mut rules = rules.split("; ");
        rules.try_for_each(|rule| apply(spec, selector, rule))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A misspelled selector or path would check nothing: each names values
    /// of the real spec, or (for a sibling that may be absent) a schema field.
    #[test]
    fn every_rule_names_what_it_checks() {
        let path = crate::paths::repo_root().join(PROVIDER_SPEC_PATH);
        let spec = parse(&std::fs::read(path).unwrap()).unwrap();
        let field = |name: &str| {
            schema()
                .iter()
                .any(|class| class.2.iter().any(|f| f.0 == name))
        };
        for line in RULES.lines() {
            let (selector, rules) = line.split_once(' ').unwrap();
            // A list may be empty; it must be there.
            let list = selector.strip_suffix("[]").unwrap_or(selector);
            assert!(!select(&spec, list).is_empty(), "{line}");
            for rule in rules.split("; ") {
                let arg = rule.split_once(' ').map_or("", |(_, arg)| arg);
                if arg.is_empty() || arg.parse::<f64>().is_ok() || arg.ends_with('$') {
                    continue;
                }
                if rule.starts_with("has ") {
                    assert!(arg.split('|').all(field), "{line}: {arg}");
                    continue;
                }
                match arg.strip_prefix('.') {
                    Some(name) => assert!(field(name), "{line}: {arg}"),
                    None if arg.starts_with('[') => {}
                    None => assert!(!select(&spec, arg).is_empty(), "{line}: {arg}"),
                }
            }
        }
    }
}
