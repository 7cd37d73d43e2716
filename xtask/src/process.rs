//! Running child commands with a clear message when they fail.

use std::process::{Command, Stdio};

use crate::Result;

/// Runs `command` to completion, inheriting stdio; fails naming the command.
pub fn run(command: &mut Command) -> Result<()> {
    println!("+ {command:?}");
    let inherit = Stdio::inherit;
    output(command.stdin(inherit()).stdout(inherit()).stderr(inherit())).map(drop)
}

/// Runs `command` capturing its output: its stdout, or an error naming the
/// command with its stderr.
pub fn output(command: &mut Command) -> Result<String> {
    let shown = format!("{command:?}");
    let output = command
        .output()
        .map_err(|error| format!("could not start `{shown}`: {error}"))?;
    let (status, stderr) = (output.status, String::from_utf8_lossy(&output.stderr));
    match status.success() {
        true => Ok(String::from_utf8_lossy(&output.stdout).into_owned()),
        false => Err(format!("`{shown}` failed with {status}:\n{stderr}")),
    }
}
