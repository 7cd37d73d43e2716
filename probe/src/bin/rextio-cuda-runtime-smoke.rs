//! `rextio-cuda-runtime-smoke --device N`: prints one JSON record; exits 0 on
//! success, 1 on failure, 2 for bad arguments.

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let arguments: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let (record, status) = rextio_cuda_probe::smoke::run(&arguments);
    // A closed stdout loses the record; the exit status still tells.
    let _ = writeln!(std::io::stdout().lock(), "{}", record.to_json());
    ExitCode::from(status)
}
