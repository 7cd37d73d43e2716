//! The runtime lifetime smoke: through the reviewed loader and
//! the runtime crate, create a context, a dedicated stream and a 4096-byte
//! allocation, synchronize; fill the allocation with 0, copy a 4096-byte
//! pattern in and back and compare (the round trip); then release
//! allocation, stream, context, table and image in that order. Never runs a
//! kernel.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use rextio_cuda_loader::LoadError;
use rextio_cuda_runtime::{device_get, initialize, Context, CudaError, DeviceAllocation, Stream};

pub use crate::generated::spec::SmokeRecord;
use crate::generated::spec::{
    reason_codes, DEVICE_ARGUMENT, DRIVER_ROOT_ARGUMENT, MAX_DEVICE_ORDINAL,
    SMOKE_ALLOCATION_BYTES, SMOKE_COMPLETE_STATUS, SMOKE_FAILURE_STATUS, SMOKE_NAME,
    SMOKE_SCHEMA_VERSION,
};
use crate::inventory::DriverEnvironment;
use crate::report::{to_json_line, Target};

/// Exit status of a completed smoke.
pub const EXIT_COMPLETE: u8 = 0;
/// Exit status of a smoke that ran and failed.
pub const EXIT_FAILED: u8 = 1;
/// Exit status for arguments other than `--device N [--driver-root DIR]`.
pub const EXIT_INVALID_ARGUMENTS: u8 = 2;

/// `device_ordinal` of a record whose arguments were refused.
const NO_DEVICE_ORDINAL: i64 = -1;

/// The smoke's JSON record (generated: its keys are the spec's, in order);
/// `round_trip`: the pattern copied to the device came back byte for byte.
impl SmokeRecord {
    fn new(device_ordinal: i64, outcome: Result<(), SmokeFailure>, round_trip: bool) -> Self {
        let (status, reason_code, cuda_result) = match outcome {
            Ok(()) => (SMOKE_COMPLETE_STATUS, None, Some(0)),
            Err(failure) => (
                SMOKE_FAILURE_STATUS,
                Some(failure.reason_code),
                failure.cuda_result,
            ),
        };
        Self {
            schema_version: SMOKE_SCHEMA_VERSION,
            probe: SMOKE_NAME,
            support_claim: false,
            target: Target::host(),
            status,
            reason_code,
            cuda_result,
            device_ordinal,
            allocation_bytes: SMOKE_ALLOCATION_BYTES as u64,
            kernel_executed: false,
            certification_ready: false,
            round_trip,
        }
    }

    /// The record as one line of compact JSON.
    pub fn to_json(&self) -> String {
        to_json_line(self)
    }
}

/// Why the smoke stopped: a reason code and, for a driver call, its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmokeFailure {
    pub reason_code: &'static str,
    pub cuda_result: Option<i32>,
}

impl From<&LoadError> for SmokeFailure {
    fn from(error: &LoadError) -> Self {
        Self {
            reason_code: error.reason_code(),
            cuda_result: None,
        }
    }
}

/// Attaches the step's reason code to a runtime error.
fn at_step(reason_code: &'static str) -> impl FnOnce(CudaError) -> SmokeFailure {
    move |error| SmokeFailure {
        reason_code,
        cuda_result: Some(error.result()),
    }
}

/// What the smoke was asked: a device, and the only directory its driver is
/// looked for in (`None`: the reviewed candidates, as the probe).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmokeArguments {
    /// The device ordinal, 0..=1023.
    pub ordinal: u32,
    /// The probe's `--driver-root DIR` (Linux); the loader refuses a relative DIR.
    pub driver_root: Option<PathBuf>,
}

/// `--device N`, optionally followed by `--driver-root DIR` (Linux), N in
/// 0..=1023 (ASCII digits, leading zeros accepted); anything else is `None`.
pub fn parse_arguments(arguments: &[OsString]) -> Option<SmokeArguments> {
    let (flag, value, driver_root) = match arguments {
        [flag, value] => (flag, value, None),
        [flag, value, root_flag, root]
            if root_flag == DRIVER_ROOT_ARGUMENT && cfg!(target_os = "linux") =>
        {
            (flag, value, Some(PathBuf::from(root)))
        }
        _ => return None,
    };
    if flag.to_str()? != DEVICE_ARGUMENT {
        return None;
    }
    let digits = value.to_str()?;
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let significant = digits.trim_start_matches('0');
    if significant.len() > 4 {
        return None;
    }
    let ordinal = if significant.is_empty() {
        0
    } else {
        significant.parse::<u32>().ok()?
    };
    let max = u32::try_from(MAX_DEVICE_ORDINAL).ok()?;
    (ordinal <= max).then_some(SmokeArguments {
        ordinal,
        driver_root,
    })
}

/// Runs the smoke on device `ordinal` (from [`parse_arguments`]), its driver
/// from `driver_root` when given; returns the record and the exit status.
pub fn run(
    ordinal: u32,
    driver_root: Option<&Path>,
    _environment: &DriverEnvironment,
) -> (SmokeRecord, u8) {
    let mut round_trip_intact = false;
    let outcome = lifetime_smoke(ordinal, driver_root, &mut round_trip_intact);
    let status = if outcome.is_ok() {
        EXIT_COMPLETE
    } else {
        EXIT_FAILED
    };
    (
        SmokeRecord::new(i64::from(ordinal), outcome, round_trip_intact),
        status,
    )
}

/// The record and exit status for arguments [`parse_arguments`] refuses.
pub fn invalid_arguments() -> (SmokeRecord, u8) {
    let failure = SmokeFailure {
        reason_code: reason_codes::INVALID_ARGUMENTS,
        cuda_result: None,
    };
    (
        SmokeRecord::new(NO_DEVICE_ORDINAL, Err(failure), false),
        EXIT_INVALID_ARGUMENTS,
    )
}

/// The record when something the driver started outlived the smoke's sweep
/// (docs/interfaces.md, Probe runner): a failure, whatever the smoke itself did.
pub fn survivors_record(ordinal: u32) -> SmokeRecord {
    let failure = SmokeFailure {
        reason_code: reason_codes::DRIVER_PROCESSES_SURVIVED,
        cuda_result: None,
    };
    SmokeRecord::new(i64::from(ordinal), Err(failure), false)
}

/// Byte `index` of the pattern the round trip writes: never 0, so a byte
/// the copy missed after the fill shows, and with a period of 251, so a
/// copy misplaced by a multiple of 256 shows too.
fn pattern_byte(index: usize) -> u8 {
    // `index % 251` is below 251, so the cast and the addition stay in u8.
    (index % 251) as u8 + 1
}

/// Fills `allocation` with 0, copies the pattern over all of it, copies it
/// back and compares.
fn round_trip(stream: &Stream, allocation: &mut DeviceAllocation) -> Result<(), SmokeFailure> {
    let copy_failed = || at_step(reason_codes::DEVICE_COPY_FAILED);
    stream.fill(allocation, 0).map_err(copy_failed())?;
    let pattern: Vec<u8> = (0..allocation.byte_size()).map(pattern_byte).collect();
    stream
        .copy_to_device(allocation, 0, &pattern)
        .map_err(copy_failed())?;
    let mut back = vec![0; pattern.len()];
    stream
        .copy_from_device(allocation, 0, &mut back)
        .map_err(copy_failed())?;
    if back != pattern {
        return Err(SmokeFailure {
            reason_code: reason_codes::DEVICE_ROUND_TRIP_MISMATCH,
            cuda_result: None,
        });
    }
    Ok(())
}

/// Every resource is released exactly once, children before the context and
/// the context before the table (and its image): explicitly on success, and
/// by the runtime's `Drop` in reverse creation order when a step fails.
/// `round_trip_intact` is set once the pattern came back intact.
fn lifetime_smoke(
    ordinal: u32,
    driver_root: Option<&Path>,
    round_trip_intact: &mut bool,
) -> Result<(), SmokeFailure> {
    let api = rextio_cuda_loader::load_reviewed(driver_root).map_err(|error| {
        crate::inventory::explain_on_stderr(&error);
        SmokeFailure::from(&error)
    })?;
    initialize(&api).map_err(at_step(reason_codes::CU_INIT_FAILED))?;
    let ordinal = i32::try_from(ordinal).map_err(|_| SmokeFailure {
        reason_code: reason_codes::INVALID_ARGUMENTS,
        cuda_result: None,
    })?;
    let device = device_get(&api, ordinal).map_err(at_step(reason_codes::CU_DEVICE_GET_FAILED))?;
    let context = Context::create(Rc::clone(&api), device)
        .map_err(at_step(reason_codes::CONTEXT_CREATE_OR_DETACH_FAILED))?;
    let stream = context
        .create_stream()
        .map_err(at_step(reason_codes::STREAM_CREATE_FAILED))?;
    let mut allocation = context
        .allocate(SMOKE_ALLOCATION_BYTES)
        .map_err(at_step(reason_codes::DEVICE_ALLOCATION_FAILED))?;
    stream
        .synchronize()
        .map_err(at_step(reason_codes::STREAM_SYNCHRONIZE_FAILED))?;
    round_trip(&stream, &mut allocation)?;
    *round_trip_intact = true;
    allocation
        .close()
        .map_err(at_step(reason_codes::DEVICE_FREE_FAILED))?;
    stream
        .close()
        .map_err(at_step(reason_codes::STREAM_DESTROY_FAILED))?;
    context
        .close()
        .map_err(at_step(reason_codes::CONTEXT_DESTROY_FAILED))?;
    // The last owner of the table: dropping it drops the table, then the image.
    drop(api);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arguments(parts: &[&str]) -> Vec<OsString> {
        parts.iter().map(OsString::from).collect()
    }

    fn ordinal(parts: &[&str]) -> Option<u32> {
        parse_arguments(&arguments(parts)).map(|parsed| parsed.ordinal)
    }

    #[test]
    fn accepts_exactly_device_and_an_ordinal() {
        assert_eq!(ordinal(&["--device", "0"]), Some(0));
        assert_eq!(ordinal(&["--device", "1023"]), Some(1023));
        assert_eq!(ordinal(&["--device", "0007"]), Some(7));
        assert_eq!(ordinal(&["--device", "00000000000000000001"]), Some(1));
        assert_eq!(
            parse_arguments(&arguments(&["--device", "0"])).map(|parsed| parsed.driver_root),
            Some(None)
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn accepts_a_driver_root_after_the_device() {
        assert_eq!(
            parse_arguments(&arguments(&[
                "--device",
                "1",
                "--driver-root",
                "/usr/local/cuda/compat"
            ])),
            Some(SmokeArguments {
                ordinal: 1,
                driver_root: Some(PathBuf::from("/usr/local/cuda/compat")),
            })
        );
        for bad in [
            &["--driver-root", "/x", "--device", "0"][..],
            &["--device", "0", "--driver-root"][..],
            &["--device", "0", "--driver-root=/x"][..],
            &["--device", "0", "--driver-root", "/x", "/y"][..],
            &["--device", "x", "--driver-root", "/x"][..],
        ] {
            assert_eq!(parse_arguments(&arguments(bad)), None, "{bad:?}");
        }
    }

    #[test]
    fn refuses_everything_else() {
        for bad in [
            &[][..],
            &["--device"][..],
            &["--device", "1024"][..],
            &["--device", "-1"][..],
            &["--device", "+1"][..],
            &["--device", ""][..],
            &["--device", " 1"][..],
            &["--device", "99999999999999999999"][..],
            &["--device", "١"][..],
            &["--device=0"][..],
            &["--Device", "0"][..],
            &["--device", "0", "--device", "0"][..],
            &["0", "--device"][..],
        ] {
            assert_eq!(ordinal(bad), None, "{bad:?}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn refuses_non_utf8_arguments() {
        use std::os::unix::ffi::OsStringExt;
        let bad = vec![
            OsString::from("--device"),
            OsString::from_vec(vec![0x30, 0xff]),
        ];
        assert_eq!(parse_arguments(&bad), None);
    }

    #[test]
    fn the_pattern_has_no_zero_and_does_not_repeat_every_256_bytes() {
        let pattern: Vec<u8> = (0..SMOKE_ALLOCATION_BYTES).map(pattern_byte).collect();
        assert!(!pattern.contains(&0));
        assert!((0..pattern.len() - 256).any(|index| pattern[index] != pattern[index + 256]));
        assert_eq!(pattern[..3], [1, 2, 3]);
        assert_eq!(pattern[250..252], [251, 1]);
    }

    #[test]
    fn survivors_make_a_failure_record() {
        let record = survivors_record(3);
        assert_eq!(
            (
                record.status,
                record.reason_code,
                record.cuda_result,
                record.device_ordinal
            ),
            (
                SMOKE_FAILURE_STATUS,
                Some(reason_codes::DRIVER_PROCESSES_SURVIVED),
                None,
                3
            )
        );
    }

    #[test]
    fn invalid_arguments_record_and_status() {
        assert_eq!(ordinal(&["--device", "x"]), None);
        let (record, status) = invalid_arguments();
        assert_eq!(status, EXIT_INVALID_ARGUMENTS);
        assert_eq!(
            record.to_json(),
            format!(
                concat!(
                    r#"{{"schema_version":"1","probe":"rextio-cuda-runtime-smoke","support_claim":false,"#,
                    r#""target":{{"os":"{}","arch":"{}","environment":"{}"}},"#,
                    r#""status":"unavailable","reason_code":"INVALID_ARGUMENTS","cuda_result":null,"#,
                    r#""device_ordinal":-1,"allocation_bytes":4096,"kernel_executed":false,"certification_ready":false,"#,
                    r#""round_trip":false}}"#
                ),
                record.target.os, record.target.arch, record.target.environment
            )
        );
    }
}
