//! `rextio-cuda-driver-probe`: prints one schema-1 JSON report and exits 0.
//!
//! Takes nothing, or exactly `--driver-root DIR`; any other
//! argument gets one `error` record and nothing is loaded. When no driver
//! was loaded, stderr says why: for each driver candidate found, the rule
//! that refused it (the provider discards stderr; it is for a person running
//! the probe by hand).
//!
//! The driver is loaded only in a worker process (see `containment`); a
//! driver that crashes the worker ends the probe the same way. The probe
//! ends with its parent and bounds its worker by a deadline of its own.

use std::process::ExitCode;

use rextio_cuda_probe::containment::{self, WorkerRecord};
use rextio_cuda_probe::inventory::{self, DriverEnvironment};
use rextio_cuda_probe::report_out::ReportOut;

/// The probe's exit status when its worker was stopped (it hung at exit).
const EXIT_WORKER_STOPPED: u8 = 1;

fn main() -> ExitCode {
    // Before anything can fork: this process ends with its parent, and
    // every orphaned descendant comes back here.
    containment::start();
    // SAFETY: the process still has one thread (std starts none and nothing
    // here has spawned one), so setting environment variables cannot race a
    // reader.
    let environment = unsafe { DriverEnvironment::set() };
    // Before the driver loads: whatever it prints goes to stderr.
    let mut out = ReportOut::divert_stdout();
    let arguments: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let driver_root = match inventory::parse_arguments(&arguments) {
        Ok(driver_root) => driver_root,
        Err(reason_code) => {
            let _ = out.write_line(&inventory::argument_error(reason_code).to_json());
            return ExitCode::SUCCESS;
        }
    };
    let contained = containment::run_contained(|| {
        // Only this process writes the record: nothing the driver starts
        // keeps the reader's stdout.
        out.close();
        let report = inventory::probe(&environment, driver_root.as_deref());
        WorkerRecord {
            line: report.to_json(),
            exit_status: 0,
        }
    });
    // Nothing the driver started is left, or the record says so.
    let line = if contained.survivors {
        Some(inventory::survivors_report().to_json())
    } else {
        contained.line
    };
    // A closed stdout leaves the reader with no report, which it already
    // treats as a failure; nothing better can be done here.
    if let Some(line) = line {
        let _ = out.write_line(&line);
    }
    contained.worker_end.exit_code(EXIT_WORKER_STOPPED)
}
