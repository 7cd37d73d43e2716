//! `rextio-cuda-runtime-smoke --device N [--driver-root DIR]`: prints one
//! JSON record; exits 0 on success, 1 on failure, 2 for bad arguments.
//!
//! The driver is loaded only in a worker process (see `containment`); a
//! driver that crashes the worker ends the smoke the same way. The smoke
//! ends with its parent and bounds its worker by a deadline of its own.

use std::process::ExitCode;

use rextio_cuda_probe::containment::{self, WorkerEnd, WorkerRecord};
use rextio_cuda_probe::inventory::DriverEnvironment;
use rextio_cuda_probe::report_out::ReportOut;
use rextio_cuda_probe::smoke;

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
    let Some(parsed) = smoke::parse_arguments(&arguments) else {
        let (record, status) = smoke::invalid_arguments();
        let _ = out.write_line(&record.to_json());
        return ExitCode::from(status);
    };
    let contained = containment::run_contained(|| {
        // Only this process writes the record: nothing the driver starts
        // keeps the reader's stdout.
        out.close();
        let (record, status) =
            smoke::run(parsed.ordinal, parsed.driver_root.as_deref(), &environment);
        WorkerRecord {
            line: record.to_json(),
            exit_status: status,
        }
    });
    // Nothing the driver started is left, or the record says so.
    let (line, worker_end) = if contained.survivors {
        let record = smoke::survivors_record(parsed.ordinal).to_json();
        let failed = match contained.worker_end {
            WorkerEnd::Exited(_) => WorkerEnd::Exited(i32::from(smoke::EXIT_FAILED)),
            other => other,
        };
        (Some(record), failed)
    } else {
        (contained.line, contained.worker_end)
    };
    // A closed stdout loses the record; the exit status still tells.
    if let Some(line) = line {
        let _ = out.write_line(&line);
    }
    worker_end.exit_code(smoke::EXIT_FAILED)
}
