//! Running child commands with a clear message when they fail.

use std::process::Command;

use crate::Result;

/// Runs `command` to completion, inheriting stdio; fails naming the command.
pub fn run(command: &mut Command) -> Result<()> {
    let shown = describe(command);
    println!("+ {shown}");
    let status = command
        .status()
        .map_err(|error| format!("could not start `{shown}`: {error}"))?;
    match status.success() {
        true => Ok(()),
        false => Err(format!("`{shown}` failed with {status}")),
    }
}

/// Runs `command` capturing its output: its stdout, or an error naming the
/// command with its stderr.
pub fn output(command: &mut Command) -> Result<String> {
    let shown = describe(command);
    let output = command
        .output()
        .map_err(|error| format!("could not start `{shown}`: {error}"))?;
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    match output.status.success() {
        true => Ok(text(&output.stdout)),
        false => Err(format!(
            "`{shown}` failed with {}:\n{}",
            output.status,
            text(&output.stderr)
        )),
    }
}

/// The program and arguments of `command`, for messages.
pub fn describe(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|part| part.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}
