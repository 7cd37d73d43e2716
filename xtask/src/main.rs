//! The project's own commands: `cargo xtask <command>`.
//!
//! Each command lives in its own module; this file only dispatches.

mod bench;
mod demo;
mod determinism;
mod dist;
mod generate;
mod headers;
mod native;
mod nolink;
mod paths;
mod process;
mod python_env;
mod symbol_proof;
mod test;
mod validate;

use std::process::ExitCode;

/// Any command failure: a message for a person, printed once by `main`.
pub type Result<T, E = String> = std::result::Result<T, E>;

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  generate [--check]       write every derived file (or only check they are current)
  verify-determinism       regenerate under varied conditions and compare every byte
  dist                     check generated files, then build the wheel into target/dist/
  test                     run every check and test of the project
  abi-check                compile the symbol list against NVIDIA's cuda.h (12.x and 13.x)
  symbol-proof             add symbols to a copy of the repository; its generate and tests pass
  bench                    measure generate, verify-determinism, preflight and probe costs
  demo                     show the whole chain on the simulated driver (no GPU needed)
  validate-nvidia --sm sm_NN [--device N] [--toolkit-root DIR] [--output FILE]
                           real-GPU evidence on a trusted NVIDIA host
";

fn no_arguments(command: &str, args: &[String]) -> Result<()> {
    match args.first() {
        Some(unexpected) => Err(format!("{command} takes no arguments (got `{unexpected}`)")),
        None => Ok(()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = args.split_first() else {
        eprint!("{USAGE}");
        return ExitCode::from(2);
    };
    let outcome = match command.as_str() {
        "generate" => generate::command(rest),
        "verify-determinism" => determinism::command(rest),
        "dist" => dist::command(rest),
        "test" => test::command(rest),
        "symbol-proof" => symbol_proof::command(rest),
        "abi-check" => no_arguments("abi-check", rest).and_then(|()| headers::check()),
        "bench" => bench::command(rest),
        "demo" => demo::command(rest),
        "validate-nvidia" => validate::command(rest),
        "help" | "--help" | "-h" => {
            print!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown command `{other}`\n\n{USAGE}")),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
