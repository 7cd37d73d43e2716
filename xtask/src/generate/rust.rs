//! Generated Rust from the provider spec: the probe's and the smoke's
//! reason codes and report constants, written as rustfmt lays them out.

use std::collections::{BTreeMap, BTreeSet};

use super::spec::{ProviderSpec, PROVIDER_SPEC_PATH};

/// One `pub const` of `probe/src/generated/spec.rs`, its doc naming the
/// spec path it holds.
struct Constant {
    name: &'static str,
    rust_type: &'static str,
    spec_path: &'static str,
    /// The value as a Rust expression, laid out as rustfmt lays it out.
    value: String,
}

impl Constant {
    fn text(name: &'static str, spec_path: &'static str, value: &str) -> Self {
        let value = format!("{value:?}");
        Constant {
            name,
            rust_type: "&str",
            spec_path,
            value,
        }
    }

    fn int(
        name: &'static str,
        rust_type: &'static str,
        spec_path: &'static str,
        value: u32,
    ) -> Self {
        let value = value.to_string();
        Constant {
            name,
            rust_type,
            spec_path,
            value,
        }
    }

    fn range(name: &'static str, spec_path: &'static str, (low, high): (u32, u32)) -> Self {
        let value = format!("{low}..={high}");
        Constant {
            name,
            rust_type: "RangeInclusive<i32>",
            spec_path,
            value,
        }
    }

    /// A list of string pairs, one pair a line.
    fn pairs(name: &'static str, spec_path: &'static str, map: &BTreeMap<String, String>) -> Self {
        let mut value = String::from("&[\n");
        for (key, item) in map {
            value.push_str(&format!("    ({key:?}, {item:?}),\n"));
        }
        value.push(']');
        Constant {
            name,
            rust_type: "&[(&str, &str)]",
            spec_path,
            value,
        }
    }

    fn definition(&self) -> String {
        let Constant {
            name,
            rust_type,
            spec_path,
            value,
        } = self;
        format!(
            "/// `{spec_path}` of `{PROVIDER_SPEC_PATH}`.\npub const {name}: {rust_type} = {value};\n"
        )
    }
}

/// The constants of the probe's and the smoke's reports.
fn constants(spec: &ProviderSpec) -> Vec<Constant> {
    let report = &spec.probe_report;
    let smoke = &spec.smoke;
    let statuses = &report.statuses;
    vec![
        Constant::text(
            "PROBE_COMPLETE_STATUS",
            "probe_report.statuses.complete",
            &statuses.complete,
        ),
        Constant::text(
            "PROBE_UNAVAILABLE_STATUS",
            "probe_report.statuses.unavailable",
            &statuses.unavailable,
        ),
        Constant::text(
            "PROBE_UNSUPPORTED_STATUS",
            "probe_report.statuses.unsupported",
            &statuses.unsupported,
        ),
        Constant::text(
            "PROBE_ERROR_STATUS",
            "probe_report.statuses.error",
            &statuses.error,
        ),
        Constant::pairs(
            "DRIVER_ENVIRONMENT",
            "probe_report.driver_environment",
            &report.driver_environment,
        ),
        Constant::text(
            "PROBE_SCHEMA_VERSION",
            "probe_report.schema_version",
            &report.schema_version,
        ),
        Constant::text("PROBE_NAME", "probe_report.probe", &report.probe),
        Constant::int(
            "MAX_DEVICES",
            "i32",
            "probe_report.max_devices",
            report.max_devices,
        ),
        Constant::int(
            "MAX_DEVICE_ORDINAL",
            "i32",
            "probe_report.max_device_ordinal",
            report.max_device_ordinal,
        ),
        Constant::int(
            "MAX_DEVICE_NAME_CHARS",
            "usize",
            "probe_report.max_device_name_chars",
            report.max_device_name_chars,
        ),
        Constant::int(
            "DEVICE_NAME_BUFFER_BYTES",
            "usize",
            "probe_report.device_name_buffer_bytes",
            report.device_name_buffer_bytes,
        ),
        Constant::range(
            "DRIVER_VERSION_RANGE",
            "probe_report.driver_version_range",
            report.driver_version_range,
        ),
        Constant::range(
            "COMPUTE_MAJOR_RANGE",
            "probe_report.compute_major_range",
            report.compute_major_range,
        ),
        Constant::range(
            "COMPUTE_MINOR_RANGE",
            "probe_report.compute_minor_range",
            report.compute_minor_range,
        ),
        Constant::text("SMOKE_NAME", "smoke.probe", &smoke.probe),
        Constant::text(
            "SMOKE_SCHEMA_VERSION",
            "smoke.schema_version",
            &smoke.schema_version,
        ),
        Constant::int(
            "SMOKE_ALLOCATION_BYTES",
            "usize",
            "smoke.allocation_bytes",
            smoke.allocation_bytes,
        ),
        Constant::text(
            "SMOKE_COMPLETE_STATUS",
            "smoke.complete_status",
            &smoke.complete_status,
        ),
        Constant::text(
            "SMOKE_FAILURE_STATUS",
            "smoke.failure_status",
            &smoke.failure_status,
        ),
        // A whole number of seconds (spec.rs checks it): the probe's and the
        // smoke's own deadline for their driver worker.
        Constant::int(
            "RUNNER_MAX_TIMEOUT_SECONDS",
            "u64",
            "probe_runner.max_timeout_seconds",
            spec.probe_runner.max_timeout_seconds as u32,
        ),
    ]
}

/// `probe/src/generated/spec.rs`: the reason codes the probe and the smoke
/// report, and the constants of their reports.
pub fn probe_spec(spec: &ProviderSpec) -> Vec<u8> {
    let report = &spec.probe_report;
    let smoke = &spec.smoke;
    let codes: BTreeSet<&String> = report
        .reason_codes
        .iter()
        .chain(&smoke.reason_codes)
        .collect();
    let mut out = format!(
        "// @generated by `cargo xtask generate` from {PROVIDER_SPEC_PATH}; do not edit.\n\
         //! The probe's and smoke's reason codes and constants, from `{PROVIDER_SPEC_PATH}`.\n\n\
         use core::ops::RangeInclusive;\n\n\
         /// The reason codes the probe and the smoke report, one constant each.\n\
         pub mod reason_codes {{\n"
    );
    for code in codes {
        // Every listed code is a key of `reason_codes` (spec.rs checks it).
        let explanation = spec.reason_codes.get(code).map(|texts| texts.0.as_str());
        let doc = explanation.unwrap_or_default().replace('\n', " ");
        out.push_str(&format!(
            "    /// {doc}\n    pub const {code}: &str = {code:?};\n"
        ));
    }
    out.push_str("}\n");
    for constant in constants(spec) {
        out.push('\n');
        out.push_str(&constant.definition());
    }
    out.into_bytes()
}
