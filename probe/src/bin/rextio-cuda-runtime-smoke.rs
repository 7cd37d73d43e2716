//! `rextio-cuda-runtime-smoke --device N`: prints one JSON record; exits 0 on
//! success, 1 on failure, 2 for bad arguments.

use std::process::ExitCode;

use rextio_cuda_probe::containment;
use rextio_cuda_probe::inventory::DriverEnvironment;
use rextio_cuda_probe::report_out::ReportOut;

fn main() -> ExitCode {
    // Before anything can fork: every orphaned descendant comes back here.
    containment::become_subreaper();
    // SAFETY: the process still has one thread (std starts none and nothing
    // here has spawned one), so setting environment variables cannot race a
    // reader.
    let environment = unsafe { DriverEnvironment::set() };
    // Before the driver loads: whatever it prints goes to stderr.
    let mut out = ReportOut::divert_stdout();
    let arguments: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let (record, status) = rextio_cuda_probe::smoke::run(&arguments, &environment);
    // Nothing the driver started outlives the record, or holds its stdout.
    containment::end_descendants();
    // A closed stdout loses the record; the exit status still tells.
    let _ = out.write_line(&record.to_json());
    ExitCode::from(status)
}
