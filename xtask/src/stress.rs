//! `cargo xtask stress [--rounds N]`: repeats the process/signal tests.
//!
//! Every test marked `process_stress` (the hostile-probe tests and the other
//! tests that kill, reap and look for leftover processes) runs N times
//! (default 200) in one pytest run against the installed wheel; the summary
//! names each failure and the command fails if there is any.

use std::process::Command;

use crate::{dist, paths, process, python_env, Result};

const DEFAULT_ROUNDS: u32 = 200;

/// Read by tests/python/conftest.py.
const ROUNDS_VARIABLE: &str = "REXTIO_STRESS_ROUNDS";

pub fn command(args: &[String]) -> Result<()> {
    let rounds = parse_rounds(args)?;
    let python = python_env::ensure_venv()?;
    let wheel = dist::build_wheel()?;
    python_env::install_wheel(&python, &wheel)?;
    println!("stress: every process_stress test, {rounds} rounds each");
    let outcome = process::run(
        Command::new(python_env::venv_program("pytest"))
            .current_dir(paths::repo_root())
            .env_remove("PYTHONPATH")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env(ROUNDS_VARIABLE, rounds.to_string())
            .args([
                "-p",
                "no:cacheprovider",
                "--import-mode=importlib",
                "-q",
                "-rf",
                "-m",
                "process_stress",
                "tests/python",
            ]),
    );
    match outcome {
        Ok(()) => {
            println!("stress: {rounds} rounds, 0 failures");
            Ok(())
        }
        Err(error) => Err(format!(
            "stress: failures in {rounds} rounds (listed above): {error}"
        )),
    }
}

fn parse_rounds(args: &[String]) -> Result<u32> {
    match args {
        [] => Ok(DEFAULT_ROUNDS),
        [flag, value] if flag == "--rounds" => match value.parse::<u32>() {
            Ok(rounds) if rounds > 0 => Ok(rounds),
            _ => Err(format!("--rounds takes a positive integer (got `{value}`)")),
        },
        _ => Err("usage: cargo xtask stress [--rounds N]".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|item| item.to_string()).collect()
    }

    #[test]
    fn rounds_default_and_explicit() {
        assert_eq!(parse_rounds(&[]), Ok(DEFAULT_ROUNDS));
        assert_eq!(parse_rounds(&strings(&["--rounds", "7"])), Ok(7));
    }

    #[test]
    fn bad_rounds_are_refused() {
        for bad in [
            &["--rounds", "0"][..],
            &["--rounds", "x"],
            &["--rounds"],
            &["7"],
        ] {
            assert!(parse_rounds(&strings(bad)).is_err(), "{bad:?}");
        }
    }
}
