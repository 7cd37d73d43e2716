//! The probe's schema-1 report: the generated serde structs,
//! whose field order is the spec's key order, and how they are built.

use serde::Serialize;

pub use crate::generated::spec::{DeviceRow, ProbeReport, Target};
use crate::generated::spec::{
    PROBE_COMPLETE_STATUS, PROBE_ERROR_STATUS, PROBE_NAME, PROBE_SCHEMA_VERSION,
};

impl Target {
    /// The target this binary was compiled for.
    pub fn host() -> Self {
        Self {
            os: std::env::consts::OS,
            arch: std::env::consts::ARCH,
            environment: TARGET_ENVIRONMENT,
        }
    }
}

const TARGET_ENVIRONMENT: &str = if cfg!(target_env = "gnu") {
    "gnu"
} else if cfg!(target_env = "msvc") {
    "msvc"
} else if cfg!(target_env = "musl") {
    "musl"
} else {
    "none"
};

impl DeviceRow {
    /// A row whose `sm` is derived from the compute capability.
    pub fn new(ordinal: u32, name: String, compute_major: i32, compute_minor: i32) -> Self {
        Self {
            ordinal,
            name,
            compute_major,
            compute_minor,
            sm: format!("sm_{compute_major}{compute_minor}"),
        }
    }
}

/// How far a failed inventory got; becomes a report without device rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    pub status: &'static str,
    pub reason_code: &'static str,
    pub platform_supported: bool,
    pub driver_loaded: bool,
    pub driver_version: Option<i32>,
    /// Only `Some(0)` is meaningful here (NO_CUDA_DEVICES).
    pub device_count: Option<i32>,
    pub cuda_result: Option<i32>,
}

impl ProbeReport {
    /// A complete inventory of at least one device.
    pub fn complete(target: Target, driver_version: i32, devices: Vec<DeviceRow>) -> Self {
        Self {
            device_count: i32::try_from(devices.len()).ok(),
            devices,
            cuda_result: Some(0),
            driver_version: Some(driver_version),
            driver_loaded: true,
            reason_code: None,
            status: PROBE_COMPLETE_STATUS,
            platform_supported: true,
            ..Self::skeleton(target)
        }
    }

    /// A report that names why the inventory stopped.
    pub fn failed(target: Target, failure: Failure) -> Self {
        Self {
            platform_supported: failure.platform_supported,
            status: failure.status,
            reason_code: Some(failure.reason_code),
            driver_loaded: failure.driver_loaded,
            driver_version: failure.driver_version,
            device_count: failure.device_count,
            cuda_result: failure.cuda_result,
            ..Self::skeleton(target)
        }
    }

    fn skeleton(target: Target) -> Self {
        Self {
            schema_version: PROBE_SCHEMA_VERSION,
            probe: PROBE_NAME,
            support_claim: false,
            target,
            platform_supported: false,
            status: PROBE_ERROR_STATUS,
            reason_code: None,
            driver_loaded: false,
            driver_version: None,
            device_count: None,
            cuda_result: None,
            devices: Vec::new(),
            refusing_rule: None,
            loader_reason: None,
        }
    }

    /// The report as one line of compact JSON.
    pub fn to_json(&self) -> String {
        to_json_line(self)
    }
}

/// Compact JSON for a record made only of strings, numbers, booleans and
/// options: serialization cannot fail, but if it ever did the output is an
/// empty object, which every consumer rejects, rather than a panic.
pub fn to_json_line<T: Serialize>(record: &T) -> String {
    serde_json::to_string(record).unwrap_or_else(|_| String::from("{}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generated::spec::PROBE_UNAVAILABLE_STATUS;

    fn linux() -> Target {
        Target {
            os: "linux",
            arch: "x86_64",
            environment: "gnu",
        }
    }

    #[test]
    fn complete_report_keeps_contract_key_order() {
        let report = ProbeReport::complete(
            linux(),
            12040,
            vec![DeviceRow::new(0, "Sim GPU".into(), 8, 6)],
        );
        assert_eq!(
            report.to_json(),
            concat!(
                r#"{"schema_version":"1","probe":"rextio-cuda-driver-probe","support_claim":false,"#,
                r#""target":{"os":"linux","arch":"x86_64","environment":"gnu"},"#,
                r#""platform_supported":true,"status":"probe-complete","reason_code":null,"#,
                r#""driver_loaded":true,"driver_version":12040,"device_count":1,"cuda_result":0,"#,
                r#""devices":[{"ordinal":0,"name":"Sim GPU","compute_major":8,"compute_minor":6,"sm":"sm_86"}]}"#
            )
        );
    }

    #[test]
    fn failed_report_has_no_rows() {
        let report = ProbeReport::failed(
            linux(),
            Failure {
                status: PROBE_UNAVAILABLE_STATUS,
                reason_code: "LIBCUDA_SO_NOT_FOUND",
                platform_supported: true,
                driver_loaded: false,
                driver_version: None,
                device_count: None,
                cuda_result: None,
            },
        );
        assert_eq!(
            report.to_json(),
            concat!(
                r#"{"schema_version":"1","probe":"rextio-cuda-driver-probe","support_claim":false,"#,
                r#""target":{"os":"linux","arch":"x86_64","environment":"gnu"},"#,
                r#""platform_supported":true,"status":"unavailable","reason_code":"LIBCUDA_SO_NOT_FOUND","#,
                r#""driver_loaded":false,"driver_version":null,"device_count":null,"cuda_result":null,"devices":[]}"#
            )
        );
    }

    #[test]
    fn a_refused_image_names_its_rule_last_and_only_then() {
        let failure = Failure {
            status: PROBE_UNAVAILABLE_STATUS,
            reason_code: "LIBCUDA_SO_LOAD_FAILED",
            platform_supported: true,
            driver_loaded: false,
            driver_version: None,
            device_count: None,
            cuda_result: None,
        };
        let report = ProbeReport {
            refusing_rule: Some("mode"),
            ..ProbeReport::failed(linux(), failure)
        };
        assert!(
            report
                .to_json()
                .ends_with(r#""cuda_result":null,"devices":[],"refusing_rule":"mode"}"#),
            "{}",
            report.to_json()
        );
        let plain = ProbeReport::failed(linux(), failure);
        assert!(!plain.to_json().contains("refusing_rule"));
    }

    #[test]
    fn sm_joins_major_and_minor() {
        assert_eq!(DeviceRow::new(3, "x".into(), 10, 0).sm, "sm_100");
        assert_eq!(DeviceRow::new(3, "x".into(), 9, 0).sm, "sm_90");
    }
}
