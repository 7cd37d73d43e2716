//! The project's own commands: `cargo xtask <command>`.
//!
//! Each command lives in its own module; this file only dispatches.

mod apt;
mod bench;
mod debian_python;
mod demo;
mod determinism;
mod dist;
mod emulated;
mod generate;
mod headers;
mod native;
mod nolink;
#[cfg(test)]
mod nolink_sources;
mod packaged;
mod paths;
mod process;
mod python_env;
mod real_driver;
mod setup;
mod test;
mod toolchain;

use std::process::ExitCode;

/// Any command failure: a message for a person, printed once by `main`.
pub type Result<T, E = String> = std::result::Result<T, E>;

const USAGE: &str = "\
usage: cargo xtask <command>, one of: generate [--check], verify-determinism, dist, setup,
  test, abi-check, symbol-proof, bench, demo, real-driver, emulated
  (docs/maintainers.md says what each does)
";

/// Ends the process for unusable input: the message once, then exit status 2.
/// Called only while parsing arguments, before anything is built or written.
pub fn usage_error(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = args.split_first() else {
        usage_error(&format!("no command given\n\n{USAGE}"));
    };
    let step: fn() -> Result<()> = match command.as_str() {
        "generate" => return exit_code(generate::command(rest)),
        "verify-determinism" => determinism::verify,
        "dist" => dist::command,
        "setup" => setup::setup,
        "test" => test::command,
        "symbol-proof" => setup::symbol_proof,
        "abi-check" => headers::check,
        "bench" => bench::command,
        "demo" => demo::command,
        "real-driver" => setup::real_driver,
        "emulated" => emulated::command,
        "help" | "--help" | "-h" => || {
            print!("{USAGE}");
            Ok(())
        },
        other => usage_error(&format!("unknown command `{other}`\n\n{USAGE}")),
    };
    if let Some(unexpected) = rest.first() {
        let why = format!("{command} takes no arguments (got `{unexpected}`)");
        usage_error(&why);
    }
    exit_code(step())
}

fn exit_code(outcome: Result<()>) -> ExitCode {
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
