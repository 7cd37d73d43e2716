//! The project's own commands: `cargo xtask <command>`.
//!
//! Each command lives in its own module; this file only dispatches.

mod bench;
mod demo;
mod determinism;
mod dist;
mod emulated;
mod generate;
mod headers;
mod native;
mod nolink;
mod paths;
mod process;
mod python_env;
mod real_driver;
mod scratch;
mod test;

use std::process::ExitCode;

/// Any command failure: a message for a person, printed once by `main`.
pub type Result<T, E = String> = std::result::Result<T, E>;

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  generate [--check]       write every derived file (or only check they are current)
  verify-determinism       regenerate under varied conditions and compare every byte
  dist                     check generated files, then build the wheel into target/dist/
  setup                    build the binaries and the wheel, make the Python environments
                           (uv) and fetch what the tests use; then plain pytest runs any test
  test                     run every check and test of the project
  abi-check                compile the symbol list against NVIDIA's cuda.h (12.x and 13.x)
  symbol-proof             add symbols to a copy of the repository; its generate and tests pass
  bench                    measure generate, verify-determinism, preflight and probe costs
  demo                     show the whole chain on the simulated driver (no GPU needed)
  real-driver              fetch NVIDIA's libcuda1 (535, 550, 555) and run the probe,
                           smoke and preflight against it (part of `test`; no GPU needed)
  emulated                 run the aarch64 probe and smoke under qemu (NVIDIA's arm64
                           libcuda1) and the Windows loader under Wine (part of `test`)
";

/// Exit status for input a command cannot use (as for an unknown command).
const EXIT_USAGE: u8 = 2;

/// Ends the process for unusable input: the message once, then exit status 2.
/// Called only while parsing arguments, before anything is built or written.
pub fn usage_error(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(EXIT_USAGE.into())
}

/// A usage error unless `args` is empty.
pub fn no_arguments(command: &str, args: &[String]) {
    if let Some(unexpected) = args.first() {
        usage_error(&format!(
            "{command} takes no arguments (got `{unexpected}`)"
        ));
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = args.split_first() else {
        eprint!("{USAGE}");
        return ExitCode::from(EXIT_USAGE);
    };
    let outcome = match command.as_str() {
        "generate" => generate::command(rest),
        "verify-determinism" => determinism::command(rest),
        "dist" => dist::command(rest),
        "setup" => python_env::command(rest),
        "test" => test::command(rest),
        "symbol-proof" => python_env::symbol_proof(rest),
        "abi-check" => {
            no_arguments("abi-check", rest);
            headers::check()
        }
        "bench" => bench::command(rest),
        "demo" => demo::command(rest),
        "real-driver" => real_driver::command(rest),
        "emulated" => emulated::command(rest),
        "help" | "--help" | "-h" => {
            print!("{USAGE}");
            Ok(())
        }
        other => usage_error(&format!("unknown command `{other}`\n\n{USAGE}")),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
